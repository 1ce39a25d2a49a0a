//! What a client container tells the harness: one JSON object per line on its stdout, a
//! `record` per lock operation (a [`LockRecord`] in its serde form), a `note` per remark for the
//! report (what an operation's probe saw of the masters) and one `stats` line at the end. Times are microseconds from the run's start, which the harness passes to every container
//! as a wall-clock instant: containers share the host's kernel clock, so their offsets land on
//! the harness's timeline.

use serde::{Deserialize, Serialize};

use crate::error::HarnessError;
use crate::history::LockRecord;
use crate::workload::WorkloadStats;

/// One line of a client container's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientLine {
    /// One lock operation, its client numbered within the whole run.
    Record(LockRecord),
    /// A remark for the run's report.
    Note(String),
    /// The container's workload totals, last.
    Stats(WireStats),
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
    /// Its remarks.
    pub notes: Vec<String>,
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
            ClientLine::Record(r) => out.records.push(r),
            ClientLine::Note(n) => out.notes.push(n),
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
    use std::time::Duration;

    use super::*;

    #[test]
    fn records_and_stats_survive_the_wire() {
        let mut r = LockRecord::invoked(7, "r0", Duration::from_micros(1500));
        r.acquired = Some(Duration::from_millis(2));
        r.validity_end = Some(Duration::from_millis(2002));
        r.released = Some(Duration::from_millis(40));
        r.token = "t".into();
        let record = serde_json::to_string(&ClientLine::Record(r.clone())).unwrap();
        // The line as containers have always written it: microseconds, `_us` names.
        assert_eq!(
            record,
            concat!(
                r#"{"record":{"client":7,"resource":"r0","token":"t","invoked_us":1500,"#,
                r#""acquired_us":2000,"validity_end_us":2002000,"released_us":40000,"#,
                r#""fencing":null,"error":null}}"#
            )
        );
        let note = serde_json::to_string(&ClientLine::Note("m0 counts".into())).unwrap();
        assert_eq!(note, r#"{"note":"m0 counts"}"#);
        let lines = [
            record,
            note,
            serde_json::to_string(&ClientLine::Stats(WireStats {
                increments: 3,
                ..WireStats::default()
            }))
            .unwrap(),
        ]
        .join("\n");
        let out = parse("c", &lines).unwrap();
        assert_eq!(out.records, vec![r]);
        assert_eq!(out.notes, vec!["m0 counts".to_string()]);
        assert_eq!(out.stats.increments, 3);
    }

    #[test]
    fn a_record_line_without_its_absent_times_still_reads() {
        let line = r#"{"record":{"client":1,"resource":"r1","token":"","invoked_us":5,"fencing":null,"error":"refused"}}"#;
        let ClientLine::Record(r) = serde_json::from_str(line).unwrap() else {
            panic!("not a record: {line}");
        };
        let mut expected = LockRecord::invoked(1, "r1", Duration::from_micros(5));
        expected.error = Some("refused".into());
        assert_eq!(r, expected);
    }

    #[test]
    fn a_truncated_or_garbled_output_is_an_error_naming_the_container() {
        let err = parse("g1", "").unwrap_err().to_string();
        assert!(err.contains("g1") && err.contains("stats"), "{err}");
        let err = parse("g0", "{\"nope\":1}\n").unwrap_err().to_string();
        assert!(err.contains("g0") && err.contains("line 1"), "{err}");
    }
}
