//! How a chaos run's [`RunReport`] is shown: the human-readable summary, one row of the
//! Markdown results table, the JSON object behind `--json`, and the SVG timeline.
//!
//! Rendering only reads a finished report; it decides nothing (that is `verdict`) and runs
//! nothing (that is `drive`), so each format can change without touching either.

use std::fmt::Write as _;

use serde::Serialize;

use crate::error::HarnessError;
use crate::history::LockRecord;
use crate::json_parts::{JsonOverlap, JsonRecord, Ms, Number};
use crate::kinds_report::{self, JsonKinds};
use crate::run::{Kind, Reason, RunReport};
use crate::svg::{self, SvgOptions};

impl RunReport {
    /// A human-readable summary.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let o = &self.options;
        let _ =
            writeln!(
            s,
            "scenario {} ({}), kind {}, seed {}, {} backend, {} masters, {} clients, {} resources, ttl {:?}, {:.1}s",
            self.scenario.name,
            if self.scenario.in_model { "in model" } else { "out of model" },
            kinds_report::describe(o.kind),
            o.seed,
            self.backend,
            self.masters,
            o.clients,
            o.resources,
            o.ttl,
            self.run_end.as_secs_f64()
        );
        if o.mode.is_unsafe() {
            let _ = writeln!(s, "clients: {} (UNSAFE, a negative control)", o.mode.name());
        }
        let kind_lines = kinds_report::summary(self);
        match &kind_lines {
            Some(lines) => s.push_str(lines),
            None => {
                let _ = writeln!(
                s,
                "operations: {} attempts, {} acquired ({} under faults), {} increments ({} late), {} skipped, {} release failures",
                self.records.len(),
                self.acquisitions,
                self.acquisitions_under_faults,
                self.stats.increments,
                self.stats.late_writes,
                self.stats.skipped,
                self.stats.release_failures
            );
            }
        }
        for f in &self.applied {
            let _ = writeln!(
                s,
                "fault {:>8.3}s..{:>8.3}s  {}",
                f.started.as_secs_f64(),
                f.finished.as_secs_f64(),
                f.action
            );
        }
        if kind_lines.is_none() {
            let _ = writeln!(
                s,
                "safety: {} overlaps, {} acquisitions without majority, witness {} expected / {} actual ({} lost)",
                self.overlaps.len(),
                self.acquired_without_majority.len(),
                self.lost_updates.expected,
                self.lost_updates.actual,
                self.lost_updates.lost
            );
            for o in self.overlaps.iter().take(10) {
                let _ = writeln!(
                    s,
                    "  overlap on {} for {:?}: client {} token {} and client {} token {}",
                    o.resource, o.overlap, o.first.client, o.first.token, o.second.client, o.second.token
                );
            }
        }
        let _ = writeln!(
            s,
            "liveness: {}/{} attempts succeeded while a majority was reachable ({:.0}%)",
            self.liveness.successes,
            self.liveness.attempts,
            self.liveness.success_rate * 100.0
        );
        for (heal, first) in &self.liveness.recovery {
            match first {
                Some(d) => {
                    let _ = writeln!(
                        s,
                        "  healed at {:.3}s, first success {:?} later",
                        heal.as_secs_f64(),
                        d
                    );
                }
                None => {
                    let _ = writeln!(s, "  healed at {:.3}s, no success afterwards", heal.as_secs_f64());
                }
            }
        }
        let _ = writeln!(s, "leaks: {}", self.leaks.len());
        for note in &self.notes {
            let _ = writeln!(s, "note: {note}");
        }
        let _ = writeln!(s, "verdict: {:?}", self.verdict);
        for reason in &self.reasons {
            let _ = writeln!(s, "  {reason}");
        }
        s
    }

    /// The header of the results table (Markdown) whose rows are [`RunReport::table_row`].
    pub fn table_header() -> String {
        [
            "| scenario | kind | model | seed | duration | attempts | acquisitions | under faults | violations | lost updates | leaked keys | success (majority up) | verdict |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        .join("\n")
    }

    /// This run as one row of the results table.
    pub fn table_row(&self) -> String {
        let model = match (self.scenario.in_model, self.options.mode.is_unsafe()) {
            (_, true) => format!("unsafe {}", self.options.mode.name()),
            (true, false) => "in".to_string(),
            (false, false) => "out".to_string(),
        };
        let lost = match self.kinds {
            Some(_) => "-".to_string(),
            None => self.lost_updates.lost.to_string(),
        };
        format!(
            "| {} | {} | {model} | {} | {:.0}s | {} | {} | {} | {} | {lost} | {} | {:.1}% | {} |",
            self.scenario.name,
            kinds_report::describe(self.options.kind),
            self.options.seed,
            self.options.duration.as_secs_f64(),
            kinds_report::attempts(self),
            self.acquisitions,
            self.acquisitions_under_faults,
            self.violations(),
            self.leaks.len(),
            self.liveness.success_rate * 100.0,
            format!("{:?}", self.verdict).to_lowercase()
        )
    }

    /// Every violation found: overlaps, acquisitions without a majority, and the kind's own
    /// (semaphore excesses, reads inside writes); lost updates are counted apart.
    pub fn violations(&self) -> usize {
        let kinds = self
            .kinds
            .as_ref()
            .map_or(0, |k| k.excesses.len() + k.reader_writer.len());
        self.overlaps.len() + self.acquired_without_majority.len() + kinds
    }

    /// The report as one JSON object: the `--json` output.
    ///
    /// The top level carries the summary counts, the verdict and its reasons; then come the
    /// faults, the workload totals, the overlaps, the acquisitions without a majority, the
    /// witness, liveness, the leaked keys and every lock record. A semaphore or read-write lock
    /// run has no witness (`null`) and its own findings in `kind_findings`, its reads included;
    /// a plain lock run has `null` there. Times are milliseconds
    /// rounded to the microsecond, written as integers when they are whole.
    ///
    /// # Errors
    /// [`HarnessError::Json`] if the report cannot be serialized; its plain strings and
    /// numbers give serde no reason to fail.
    pub fn to_json(&self) -> Result<String, HarnessError> {
        serde_json::to_string(&JsonReport::from(self)).map_err(HarnessError::Json)
    }

    /// The run as an SVG timeline.
    pub fn svg(&self) -> String {
        let opts = SvgOptions {
            title: format!(
                "{} (seed {}, {:?}): {} overlaps, {} lost",
                self.scenario.name,
                self.options.seed,
                self.verdict,
                self.overlaps.len(),
                self.lost_updates.lost
            ),
            ..SvgOptions::default()
        };
        match &self.kinds {
            Some(k) => {
                let every: Vec<LockRecord> = self.records.iter().chain(&k.reads).cloned().collect();
                svg::timeline(&every, &self.fault_windows, self.run_end, &opts)
            }
            None => svg::timeline(&self.records, &self.fault_windows, self.run_end, &opts),
        }
    }
}

/// The JSON object of a report, field by field in output order.
#[derive(Serialize)]
struct JsonReport<'a> {
    scenario: &'a str,
    in_model: bool,
    seed: u64,
    clients_mode: &'a str,
    kind: &'a str,
    permits: Option<u32>,
    attempts: usize,
    acquisitions: usize,
    acquisitions_under_faults: usize,
    violations: usize,
    excesses: Option<usize>,
    reader_writer_overlaps: Option<usize>,
    lost_updates: Option<u64>,
    success_rate_majority_up: Number,
    leaked_keys: usize,
    backend: &'a str,
    masters: usize,
    clients: usize,
    resources: usize,
    ttl_ms: Ms,
    duration_ms: Ms,
    run_end_ms: Ms,
    verdict: String,
    reasons: &'a [Reason],
    notes: &'a [String],
    faults: Vec<JsonFault>,
    stats: JsonStats,
    overlaps: Vec<JsonOverlap<'a>>,
    kind_findings: Option<JsonKinds<'a>>,
    acquired_without_majority: Vec<JsonRecord<'a>>,
    witness: Option<JsonWitness>,
    liveness: JsonLiveness,
    leaks: Vec<JsonLeak<'a>>,
    records: Vec<JsonRecord<'a>>,
}

impl<'a> From<&'a RunReport> for JsonReport<'a> {
    fn from(r: &'a RunReport) -> JsonReport<'a> {
        let o = &r.options;
        JsonReport {
            scenario: r.scenario.name,
            in_model: r.scenario.in_model,
            seed: o.seed,
            clients_mode: o.mode.name(),
            kind: o.kind.name(),
            permits: match o.kind {
                Kind::Semaphore(p) => Some(p),
                Kind::Lock | Kind::RwLock => None,
            },
            attempts: kinds_report::attempts(r),
            acquisitions: r.acquisitions,
            acquisitions_under_faults: r.acquisitions_under_faults,
            violations: r.violations(),
            excesses: r
                .kinds
                .as_ref()
                .filter(|_| matches!(o.kind, Kind::Semaphore(_)))
                .map(|k| k.excesses.len()),
            reader_writer_overlaps: r
                .kinds
                .as_ref()
                .filter(|_| o.kind == Kind::RwLock)
                .map(|k| k.reader_writer.len()),
            lost_updates: r.kinds.is_none().then_some(r.lost_updates.lost),
            success_rate_majority_up: Number(r.liveness.success_rate),
            leaked_keys: r.leaks.len(),
            backend: r.backend,
            masters: r.masters,
            clients: o.clients,
            resources: o.resources,
            ttl_ms: Ms(o.ttl),
            duration_ms: Ms(o.duration),
            run_end_ms: Ms(r.run_end),
            verdict: format!("{:?}", r.verdict).to_lowercase(),
            reasons: &r.reasons,
            notes: &r.notes,
            faults: r
                .applied
                .iter()
                .map(|f| JsonFault {
                    started_ms: Ms(f.started),
                    finished_ms: Ms(f.finished),
                    action: f.action.to_string(),
                })
                .collect(),
            stats: JsonStats {
                attempts: kinds_report::attempts(r),
                acquired: r
                    .records
                    .iter()
                    .chain(r.kinds.iter().flat_map(|k| &k.reads))
                    .filter(|x| x.acquired.is_some())
                    .count(),
                increments: r.stats.increments,
                late_writes: r.stats.late_writes,
                skipped: r.stats.skipped,
                acquire_failures: r.stats.acquire_failures,
                release_failures: r.stats.release_failures,
                witness_errors: r.stats.witness_errors,
            },
            overlaps: r.overlaps.iter().map(JsonOverlap::from).collect(),
            kind_findings: kinds_report::json(r),
            acquired_without_majority: r.acquired_without_majority.iter().map(JsonRecord::from).collect(),
            witness: r.kinds.is_none().then_some(JsonWitness {
                expected: r.lost_updates.expected,
                actual: r.lost_updates.actual,
                lost: r.lost_updates.lost,
                unaccounted: r.lost_updates.unaccounted,
            }),
            liveness: JsonLiveness {
                attempts: r.liveness.attempts,
                successes: r.liveness.successes,
                success_rate: Number(r.liveness.success_rate),
                recovery: r
                    .liveness
                    .recovery
                    .iter()
                    .map(|(heal, first)| JsonRecovery {
                        healed_ms: Ms(*heal),
                        first_success_after_ms: first.map(Ms),
                    })
                    .collect(),
            },
            leaks: r
                .leaks
                .iter()
                .map(|l| JsonLeak {
                    master: l.master,
                    key: &l.key,
                    pttl_ms: l.pttl_ms,
                })
                .collect(),
            records: r.records.iter().map(JsonRecord::from).collect(),
        }
    }
}

/// One applied fault.
#[derive(Serialize)]
struct JsonFault {
    started_ms: Ms,
    finished_ms: Ms,
    action: String,
}

/// The workload totals.
#[derive(Serialize)]
struct JsonStats {
    attempts: usize,
    acquired: usize,
    increments: u64,
    late_writes: u64,
    skipped: u64,
    acquire_failures: u64,
    release_failures: u64,
    witness_errors: u64,
}

/// The witness counts.
#[derive(Serialize)]
struct JsonWitness {
    expected: u64,
    actual: u64,
    lost: u64,
    unaccounted: u64,
}

/// Progress while a majority was reachable, and recovery after heals.
#[derive(Serialize)]
struct JsonLiveness {
    attempts: usize,
    successes: usize,
    success_rate: Number,
    recovery: Vec<JsonRecovery>,
}

/// How long after a heal the first acquisition succeeded (`null`: none did).
#[derive(Serialize)]
struct JsonRecovery {
    healed_ms: Ms,
    first_success_after_ms: Option<Ms>,
}

/// A lock key left behind.
#[derive(Serialize)]
struct JsonLeak<'a> {
    master: usize,
    key: &'a str,
    pttl_ms: i64,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::availability::{self, AppliedFault};
    use crate::checker::{self, KeyObservation, Liveness};
    use crate::faults::FaultAction;
    use crate::run::tests::{hold, report};
    use crate::verdict::judge;
    use crate::workload::{ClientMode, WorkloadStats};

    /// A judged report with one of everything the JSON carries, awkward values included:
    /// fractional and whole milliseconds, absent times, a fencing token, an error text with
    /// quotes and control characters, the largest seed.
    fn rich_report() -> RunReport {
        let mut r = report("partition");
        let mut a = hold(0, 0, 100);
        a.token = "t-a".into();
        a.released = Some(Duration::from_micros(90_500));
        a.fencing = Some(7);
        let mut b = hold(1, 50, 150);
        b.token = "t-b".into();
        let mut failed = LockRecord::invoked(2, "r1", Duration::from_nanos(1_234_567_891));
        failed.error = Some("boom: \"quoted\"\n\ttab\u{1}\\".into());
        r.records = vec![a.clone(), b.clone(), failed];
        r.acquisitions = 2;
        r.acquisitions_under_faults = 1;
        r.overlaps = checker::overlaps(&[a.clone(), b]);
        r.acquired_without_majority = vec![a];
        r.applied = vec![
            AppliedFault {
                started: Duration::from_micros(2_000_000),
                finished: Duration::from_micros(2_003_250),
                action: FaultAction::Partition {
                    group: 0,
                    masters: vec![0, 1, 2],
                },
            },
            AppliedFault {
                started: Duration::from_millis(6000),
                finished: Duration::from_nanos(6_000_000_400),
                action: FaultAction::HealNetwork,
            },
        ];
        r.fault_windows = availability::fault_windows(&r.applied, r.run_end);
        r.lost_updates = checker::lost_updates(10, 8);
        r.stats = WorkloadStats {
            increments: 10,
            late_writes: 1,
            skipped: 2,
            acquire_failures: 3,
            release_failures: 4,
            witness_errors: 5,
        };
        r.liveness = Liveness {
            attempts: 3,
            successes: 2,
            success_rate: 2.0 / 3.0,
            recovery: vec![
                (Duration::from_millis(6000), Some(Duration::from_micros(12_345))),
                (Duration::from_millis(8000), None),
            ],
        };
        r.leaks = vec![KeyObservation {
            master: 3,
            key: "quorlock-chaos:r0".into(),
            pttl_ms: -1,
            observed_at: Duration::from_secs(12),
        }];
        r.notes = vec!["a note".into()];
        r.options.seed = u64::MAX;
        r.options.mode = ClientMode::SingleMaster;
        r.options.ttl = Duration::from_micros(1_500_500);
        judge(&mut r);
        r
    }

    #[test]
    fn reports_render_as_text_json_and_svg() {
        let mut r = report("none");
        r.records = vec![hold(0, 0, 100)];
        judge(&mut r);
        assert!(r.summary().contains("verdict: Pass"));
        let json = r.to_json().unwrap();
        assert!(json.starts_with("{\"scenario\":\"none\""), "{json}");
        assert!(json.contains("\"verdict\":\"pass\""));
        assert!(r.svg().contains("class=\"hold\""));
        let row = r.table_row();
        assert!(row.starts_with("| none | lock | in | 1 | 30s | 1 | 0 |"), "{row}");
        assert!(row.ends_with("| pass |"), "{row}");
        let columns = |line: &str| line.matches('|').count();
        let header = RunReport::table_header();
        assert!(
            header.lines().all(|line| columns(line) == columns(&row)),
            "{header}"
        );
    }

    #[test]
    fn the_json_of_a_plain_run_is_pinned_byte_for_byte() {
        let mut r = report("none");
        r.records = vec![hold(0, 0, 100)];
        judge(&mut r);
        let expected = concat!(
            r#"{"scenario":"none","in_model":true,"seed":1,"clients_mode":"safe","kind":"lock","#,
            r#""permits":null,"attempts":1,"acquisitions":0,"#,
            r#""acquisitions_under_faults":0,"violations":0,"excesses":null,"#,
            r#""reader_writer_overlaps":null,"lost_updates":0,"#,
            r#""success_rate_majority_up":1,"leaked_keys":0,"backend":"process","masters":5,"#,
            r#""clients":16,"resources":4,"ttl_ms":2000,"duration_ms":30000,"run_end_ms":10000,"#,
            r#""verdict":"pass","reasons":[],"notes":[],"faults":[],"stats":{"attempts":1,"acquired":1,"#,
            r#""increments":10,"late_writes":0,"skipped":0,"acquire_failures":0,"release_failures":0,"#,
            r#""witness_errors":0},"overlaps":[],"kind_findings":null,"acquired_without_majority":[],"#,
            r#""witness":{"expected":10,"actual":10,"lost":0,"unaccounted":0},"liveness":{"attempts":0,"#,
            r#""successes":0,"success_rate":1,"recovery":[]},"leaks":[],"records":[{"client":0,"#,
            r#""resource":"r0","token":"","invoked_ms":0,"acquired_ms":0,"validity_end_ms":100,"#,
            r#""released_ms":null,"fencing":null,"error":null}]}"#,
        );
        assert_eq!(r.to_json().unwrap(), expected);
    }

    #[test]
    fn the_json_of_a_failed_run_keeps_every_field_in_order() {
        let expected = concat!(
            r#"{"scenario":"partition","in_model":true,"seed":18446744073709551615,"#,
            r#""clients_mode":"single-master","kind":"lock","permits":null,"attempts":3,"#,
            r#""acquisitions":2,"acquisitions_under_faults":1,"#,
            r#""violations":2,"excesses":null,"reader_writer_overlaps":null,"lost_updates":2,"success_rate_majority_up":0.6666666666666666,"#,
            r#""leaked_keys":1,"backend":"process","masters":5,"clients":16,"resources":4,"#,
            r#""ttl_ms":1500.5,"duration_ms":30000,"run_end_ms":10000,"verdict":"fail","#,
            r#""reasons":["1 acquisitions succeeded while their client could not reach a majority","#,
            r#""1 pairs of holders overlapped inside their validity","2 witness increments were lost","#,
            r#""1 lock keys outlived their TTL"],"notes":["a note","#,
            r#""negative control (single-master clients): caught by its own check (overlaps); the checker "#,
            r#"detected 1 overlaps and 2 lost increments, as it must"],"faults":[{"started_ms":2000,"finished_ms":2003.25,"#,
            r#""action":"partition g0 | m0,m1,m2"},{"started_ms":6000,"finished_ms":6000,"#,
            r#""action":"heal network"}],"stats":{"attempts":3,"acquired":2,"increments":10,"#,
            r#""late_writes":1,"skipped":2,"acquire_failures":3,"release_failures":4,"#,
            r#""witness_errors":5},"overlaps":[{"resource":"r0","overlap_ms":40.5,"first":{"client":0,"#,
            r#""resource":"r0","token":"t-a","invoked_ms":0,"acquired_ms":0,"validity_end_ms":100,"#,
            r#""released_ms":90.5,"fencing":7,"error":null},"second":{"client":1,"resource":"r0","#,
            r#""token":"t-b","invoked_ms":50,"acquired_ms":50,"validity_end_ms":150,"released_ms":null,"#,
            r#""fencing":null,"error":null}}],"kind_findings":null,"#,
            r#""acquired_without_majority":[{"client":0,"resource":"r0","#,
            r#""token":"t-a","invoked_ms":0,"acquired_ms":0,"validity_end_ms":100,"released_ms":90.5,"#,
            r#""fencing":7,"error":null}],"witness":{"expected":10,"actual":8,"lost":2,"#,
            r#""unaccounted":0},"liveness":{"attempts":3,"successes":2,"#,
            r#""success_rate":0.6666666666666666,"recovery":[{"healed_ms":6000,"#,
            r#""first_success_after_ms":12.345},{"healed_ms":8000,"first_success_after_ms":null}]},"#,
            r#""leaks":[{"master":3,"key":"quorlock-chaos:r0","pttl_ms":-1}],"records":[{"client":0,"#,
            r#""resource":"r0","token":"t-a","invoked_ms":0,"acquired_ms":0,"validity_end_ms":100,"#,
            r#""released_ms":90.5,"fencing":7,"error":null},{"client":1,"resource":"r0","token":"t-b","#,
            r#""invoked_ms":50,"acquired_ms":50,"validity_end_ms":150,"released_ms":null,"#,
            r#""fencing":null,"error":null},{"client":2,"resource":"r1","token":"","#,
            r#""invoked_ms":1234.568,"acquired_ms":null,"validity_end_ms":null,"released_ms":null,"#,
            r#""fencing":null,"error":"boom: \"quoted\"\n\ttab\u0001\\"}]}"#,
        );
        let json = rich_report().to_json().unwrap();
        assert_eq!(json, expected);
        // And it is JSON that reads back with the same values.
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["seed"], u64::MAX);
        assert_eq!(value["ttl_ms"], 1500.5);
        assert_eq!(value["records"][2]["error"], "boom: \"quoted\"\n\ttab\u{1}\\");
        assert_eq!(value["records"][1]["released_ms"], serde_json::Value::Null);
        assert_eq!(value["liveness"]["recovery"][0]["first_success_after_ms"], 12.345);
    }

    #[test]
    fn a_negative_control_is_shown_as_unsafe() {
        let mut r = report("none");
        r.options.mode = ClientMode::IgnoreValidity;
        r.lost_updates = checker::lost_updates(10, 7);
        r.stats.late_writes = 10;
        judge(&mut r);
        assert!(r.summary().contains("UNSAFE"));
        assert!(r.table_row().contains("| unsafe ignore-validity |"));
    }
}
