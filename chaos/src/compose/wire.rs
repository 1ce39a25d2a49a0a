//! What a client container tells the harness: one JSON object per line on its stdout, a
//! `record` per lock operation and one `stats` line at the end. Times are microseconds from
//! the run's start, which the harness passes to every container as a wall-clock instant:
//! containers share the host's kernel clock, so their offsets land on the harness's timeline.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::HarnessError;
use crate::history::LockRecord;
use crate::workload::WorkloadStats;

/// One line of a client container's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientLine {
    /// One lock operation.
    Record(WireRecord),
    /// The container's workload totals, last.
    Stats(WireStats),
}

/// A [`LockRecord`] on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireRecord {
    /// Client id within the whole run.
    pub client: usize,
    /// The resource.
    pub resource: String,
    /// The lock token.
    pub token: String,
    /// Microseconds from the run start: invoked, acquired, validity end, released.
    pub invoked_us: u64,
    /// See `invoked_us`.
    pub acquired_us: Option<u64>,
    /// See `invoked_us`.
    pub validity_end_us: Option<u64>,
    /// See `invoked_us`.
    pub released_us: Option<u64>,
    /// Fencing token.
    pub fencing: Option<u64>,
    /// Why it failed.
    pub error: Option<String>,
}

/// [`WorkloadStats`] on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireStats {
    /// See [`WorkloadStats`].
    pub increments: u64,
    /// See [`WorkloadStats`].
    pub late_writes: u64,
    /// See [`WorkloadStats`].
    pub skipped: u64,
    /// See [`WorkloadStats`].
    pub acquire_failures: u64,
    /// See [`WorkloadStats`].
    pub release_failures: u64,
    /// See [`WorkloadStats`].
    pub witness_errors: u64,
}

fn us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl WireRecord {
    /// `record`, its client renumbered to `client`.
    pub fn new(record: &LockRecord, client: usize) -> WireRecord {
        WireRecord {
            client,
            resource: record.resource.clone(),
            token: record.token.clone(),
            invoked_us: us(record.invoked),
            acquired_us: record.acquired.map(us),
            validity_end_us: record.validity_end.map(us),
            released_us: record.released.map(us),
            fencing: record.fencing,
            error: record.error.clone(),
        }
    }

    /// Back to a [`LockRecord`].
    pub fn record(&self) -> LockRecord {
        let mut r = LockRecord::invoked(
            self.client,
            self.resource.clone(),
            Duration::from_micros(self.invoked_us),
        );
        r.token = self.token.clone();
        r.acquired = self.acquired_us.map(Duration::from_micros);
        r.validity_end = self.validity_end_us.map(Duration::from_micros);
        r.released = self.released_us.map(Duration::from_micros);
        r.fencing = self.fencing;
        r.error = self.error.clone();
        r
    }
}

impl From<WorkloadStats> for WireStats {
    fn from(s: WorkloadStats) -> WireStats {
        WireStats {
            increments: s.increments,
            late_writes: s.late_writes,
            skipped: s.skipped,
            acquire_failures: s.acquire_failures,
            release_failures: s.release_failures,
            witness_errors: s.witness_errors,
        }
    }
}

impl From<WireStats> for WorkloadStats {
    fn from(s: WireStats) -> WorkloadStats {
        WorkloadStats {
            increments: s.increments,
            late_writes: s.late_writes,
            skipped: s.skipped,
            acquire_failures: s.acquire_failures,
            release_failures: s.release_failures,
            witness_errors: s.witness_errors,
        }
    }
}

/// What one container reported.
#[derive(Debug, Clone, Default)]
pub struct ClientOutput {
    /// Its lock operations.
    pub records: Vec<LockRecord>,
    /// Its totals.
    pub stats: WorkloadStats,
}

/// Parses a container's stdout; a line that is not a [`ClientLine`], or a missing `stats`
/// line (the container died before the end), is an error naming the container.
pub fn parse(container: &str, stdout: &str) -> Result<ClientOutput, HarnessError> {
    let mut out = ClientOutput::default();
    let mut finished = false;
    for (n, line) in stdout.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let parsed: ClientLine = serde_json::from_str(line).map_err(|e| {
            HarnessError::Workload(format!(
                "client container {container}, line {}: {e}: {line:?}",
                n + 1
            ))
        })?;
        match parsed {
            ClientLine::Record(r) => out.records.push(r.record()),
            ClientLine::Stats(s) => {
                out.stats = s.into();
                finished = true;
            }
        }
    }
    if !finished {
        return Err(HarnessError::Workload(format!(
            "client container {container} ended without its stats line ({} records)",
            out.records.len()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_stats_survive_the_wire() {
        let mut r = LockRecord::invoked(1, "r0", Duration::from_micros(1500));
        r.acquired = Some(Duration::from_millis(2));
        r.validity_end = Some(Duration::from_millis(2002));
        r.released = Some(Duration::from_millis(40));
        r.token = "t".into();
        let lines = [
            serde_json::to_string(&ClientLine::Record(WireRecord::new(&r, 7))).unwrap(),
            serde_json::to_string(&ClientLine::Stats(WireStats {
                increments: 3,
                ..WireStats::default()
            }))
            .unwrap(),
        ]
        .join("\n");
        let out = parse("c", &lines).unwrap();
        let mut expected = r.clone();
        expected.client = 7;
        assert_eq!(out.records, vec![expected]);
        assert_eq!(out.stats.increments, 3);
    }

    #[test]
    fn a_truncated_or_garbled_output_is_an_error_naming_the_container() {
        let err = parse("g1", "").unwrap_err().to_string();
        assert!(err.contains("g1") && err.contains("stats"), "{err}");
        let err = parse("g0", "{\"nope\":1}\n").unwrap_err().to_string();
        assert!(err.contains("g0") && err.contains("line 1"), "{err}");
    }
}
