//! Finding and removing what chaos runs left in the Docker engine. Every container, network
//! and volume a run creates carries the label `quorlock.chaos.run=<pid>-<nonce>`; a run removes
//! its own at the end, and a run that was killed before it could is swept by the next one:
//! whatever carries a run label whose process is gone. Runs of live processes (another test,
//! another terminal) are left alone, and so are resources labelled by hand (`manual`). The
//! small host directories that hand client containers their start are swept the same way.

use std::ffi::OsString;
use std::path::Path;

use super::DockerCommand;
use crate::error::HarnessError;

/// The label every resource of a chaos run carries.
pub const RUN_LABEL: &str = "quorlock.chaos.run";

/// What a sweep removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// The runs whose resources were removed.
    pub runs: Vec<String>,
    /// Containers removed.
    pub containers: usize,
    /// Networks removed.
    pub networks: usize,
    /// Volumes removed.
    pub volumes: usize,
}

impl Swept {
    /// `true` if nothing was removed.
    pub fn is_empty(&self) -> bool {
        self.containers + self.networks + self.volumes == 0
    }
}

/// A fresh run id owned by this process: `<pid>-<16 hex digits>`.
pub fn new_run_id() -> String {
    format!("{}-{:016x}", std::process::id(), rand::random::<u64>())
}

/// The process that owns a run id, if the id is one [`new_run_id`] made.
pub fn owner_pid(run_id: &str) -> Option<i32> {
    let (pid, nonce) = run_id.split_once('-')?;
    if nonce.len() != 16 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    pid.parse().ok().filter(|p| *p > 0)
}

/// `true` if the run's owning process is gone, so its resources are garbage.
fn is_stale(run_id: &str) -> bool {
    match owner_pid(run_id) {
        // ESRCH: no such process. EPERM means it exists under another user.
        Some(pid) => {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH)
        }
        None => false,
    }
}

/// One kind of labelled resource: how to list it and how to remove it.
struct Kind {
    list: &'static [&'static str],
    remove: &'static [&'static str],
}

const CONTAINERS: Kind = Kind {
    list: &[
        "ps",
        "-a",
        "--format",
        "{{.ID}}\t{{.Label \"quorlock.chaos.run\"}}",
    ],
    remove: &["rm", "-f", "-v"],
};
const NETWORKS: Kind = Kind {
    list: &[
        "network",
        "ls",
        "--format",
        "{{.ID}}\t{{.Label \"quorlock.chaos.run\"}}",
    ],
    remove: &["network", "rm"],
};
const VOLUMES: Kind = Kind {
    list: &[
        "volume",
        "ls",
        "--format",
        "{{.Name}}\t{{.Label \"quorlock.chaos.run\"}}",
    ],
    remove: &["volume", "rm", "-f"],
};

/// Removes every resource of runs whose process is gone. Blocking.
///
/// # Errors
/// When `docker` cannot list or remove them.
pub fn stale(docker: &Path, env: &[(OsString, OsString)]) -> Result<Swept, HarnessError> {
    stale_start_dirs(&std::env::temp_dir());
    sweep(docker, env, &format!("label={RUN_LABEL}"), is_stale)
}

/// Removes the `qlchaos-<run id>-start` directories (the run's start, mounted into client
/// containers) that runs whose process is gone left in `dir`; returns how many.
pub fn stale_start_dirs(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(run) = name
            .to_str()
            .and_then(|n| n.strip_prefix("qlchaos-"))
            .and_then(|n| n.strip_suffix("-start"))
        else {
            continue;
        };
        if is_stale(run) && std::fs::remove_dir_all(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Removes every resource of run `run_id`, whatever state it is in. Blocking.
///
/// # Errors
/// When `docker` cannot list or remove them.
pub fn run(docker: &Path, env: &[(OsString, OsString)], run_id: &str) -> Result<Swept, HarnessError> {
    sweep(docker, env, &format!("label={RUN_LABEL}={run_id}"), |id| {
        id == run_id
    })
}

/// Lists resources matching `filter` and removes those whose run `doomed` picks: containers
/// first (they hold networks and volumes), then networks, then volumes.
fn sweep(
    docker: &Path,
    env: &[(OsString, OsString)],
    filter: &str,
    doomed: impl Fn(&str) -> bool,
) -> Result<Swept, HarnessError> {
    let mut swept = Swept::default();
    let mut first_error = None;
    for (n, kind) in [CONTAINERS, NETWORKS, VOLUMES].iter().enumerate() {
        let listed = DockerCommand::new(docker, env)
            .args(kind.list)
            .args(["--filter", filter])
            .output_blocking()?;
        let mut ids = Vec::new();
        for (id, run) in listed.lines().filter_map(|l| l.split_once('\t')) {
            if doomed(run.trim()) {
                ids.push(id.trim().to_string());
                if !swept.runs.iter().any(|r| r == run.trim()) {
                    swept.runs.push(run.trim().to_string());
                }
            }
        }
        if ids.is_empty() {
            continue;
        }
        match DockerCommand::new(docker, env)
            .args(kind.remove)
            .args(&ids)
            .output_blocking()
        {
            Ok(_) => match n {
                0 => swept.containers += ids.len(),
                1 => swept.networks += ids.len(),
                _ => swept.volumes += ids.len(),
            },
            // Keep going: a volume left is better than a network left as well.
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(swept),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_name_their_owner() {
        let id = new_run_id();
        assert_eq!(owner_pid(&id), Some(std::process::id() as i32));
        assert!(!is_stale(&id), "this process is alive");
        assert_eq!(owner_pid("manual"), None);
        assert_eq!(owner_pid("12-xyz"), None);
        assert_eq!(owner_pid("0-0123456789abcdef"), None);
        assert_eq!(owner_pid("abc-0123456789abcdef"), None);
        assert!(!is_stale("manual"));
    }

    #[test]
    fn start_dirs_of_dead_runs_are_removed_and_live_ones_kept() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let dir = std::env::temp_dir().join(format!("quorlock-sweep-{:016x}", rand::random::<u64>()));
        let stale = dir.join(format!("qlchaos-{dead}-0123456789abcdef-start"));
        let live = dir.join(format!("qlchaos-{}-start", new_run_id()));
        let other = dir.join("qlchaos-manual-start");
        for d in [&stale, &live, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        assert_eq!(stale_start_dirs(&dir), 1);
        assert!(!stale.exists() && live.exists() && other.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_run_of_a_dead_process_is_stale() {
        // A child that has exited and been reaped: its pid names no process (until reused).
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(is_stale(&format!("{pid}-0123456789abcdef")));
    }
}
