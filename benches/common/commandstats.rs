//! What the masters spent executing a benchmark's commands, from their own accounting
//! (`INFO commandstats`: calls and microseconds per command), read before and after a pass.

use std::collections::BTreeMap;

use quorlock_chaos::Cluster;

/// Each command's calls and microseconds on the masters, summed over the masters, from
/// `INFO commandstats`: what the masters spent executing commands, without their network work.
#[derive(Debug, Clone, Default)]
pub struct CommandStats(BTreeMap<String, (u64, u64)>);

/// The commands quorlock's release script calls: a master counts each of them on its own as well
/// as inside the script's time, so they are left out of a pass that ran scripts.
const SCRIPT_CALLS: [&str; 3] = ["get", "del", "publish"];

impl CommandStats {
    /// Reads every master of `cluster`; `None` when one cannot be read.
    pub async fn read(cluster: &Cluster) -> Option<CommandStats> {
        let mut all = BTreeMap::<String, (u64, u64)>::new();
        for i in 0..cluster.len() {
            let mut conn = cluster.client(i).await.ok()?;
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .query_async(&mut conn)
                .await
                .ok()?;
            for line in info.lines() {
                let Some((name, rest)) = line
                    .trim()
                    .strip_prefix("cmdstat_")
                    .and_then(|l| l.split_once(':'))
                else {
                    continue;
                };
                let field = |f: &str| -> u64 {
                    rest.split(',')
                        .find_map(|kv| kv.strip_prefix(f)?.strip_prefix('='))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0)
                };
                let entry = all.entry(name.to_ascii_lowercase()).or_default();
                entry.0 += field("calls");
                entry.1 += field("usec");
            }
        }
        Some(CommandStats(all))
    }

    /// What was counted between `before` and this reading.
    pub fn since(&self, before: &CommandStats) -> CommandStats {
        CommandStats(
            self.0
                .iter()
                .map(|(name, (calls, usec))| {
                    let (c0, u0) = before.0.get(name).copied().unwrap_or_default();
                    (name.clone(), (calls.saturating_sub(c0), usec.saturating_sub(u0)))
                })
                .filter(|(_, (calls, _))| *calls > 0)
                .collect(),
        )
    }

    /// Whether the counted commands include a script call.
    fn ran_scripts(&self) -> bool {
        ["eval", "evalsha", "eval_ro", "evalsha_ro", "fcall"]
            .iter()
            .any(|s| self.0.contains_key(*s))
    }

    /// Whether `name` counts as a client's own command: not the benchmark's `INFO`, and not a
    /// command that a script called (already in the script's time).
    fn counted(&self, name: &str) -> bool {
        name != "info" && !(self.ran_scripts() && SCRIPT_CALLS.contains(&name))
    }

    /// Microseconds the masters spent on the counted commands (usec per call × calls).
    pub fn usec(&self) -> u64 {
        self.0
            .iter()
            .filter(|(name, _)| self.counted(name))
            .map(|(_, (_, usec))| usec)
            .sum()
    }

    /// The counted commands as `name calls×usec_per_call`, for reports.
    pub fn summary(&self, cycles: u64) -> String {
        let per = cycles.max(1) as f64;
        self.0
            .iter()
            .filter(|(name, _)| self.counted(name))
            .map(|(name, (calls, usec))| {
                format!(
                    "{name} {:.2}×{:.2} µs",
                    *calls as f64 / per,
                    *usec as f64 / (*calls).max(1) as f64
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}
