//! How a chaos run's [`RunReport`] is shown: the human-readable summary, one row of the
//! Markdown results table, the JSON object behind `--json`, and the SVG timeline.
//!
//! Rendering only reads a finished report; it decides nothing (that is `verdict`) and runs
//! nothing (that is `drive`), so each format can change without touching either.

use std::fmt::Write as _;

use crate::history::LockRecord;
use crate::json::Json;
use crate::run::RunReport;
use crate::svg::{self, SvgOptions};

impl RunReport {
    /// A human-readable summary.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let o = &self.options;
        let _ =
            writeln!(
            s,
            "scenario {} ({}), seed {}, {} backend, {} masters, {} clients, {} resources, ttl {:?}, {:.1}s",
            self.scenario.name,
            if self.scenario.in_model { "in model" } else { "out of model" },
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
        for f in &self.applied {
            let _ = writeln!(
                s,
                "fault {:>8.3}s..{:>8.3}s  {}",
                f.started.as_secs_f64(),
                f.finished.as_secs_f64(),
                f.action
            );
        }
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
            "| scenario | model | seed | duration | acquisitions | under faults | violations | lost updates | leaked keys | success (majority up) | verdict |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
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
        format!(
            "| {} | {model} | {} | {:.0}s | {} | {} | {} | {} | {} | {:.1}% | {} |",
            self.scenario.name,
            self.options.seed,
            self.options.duration.as_secs_f64(),
            self.acquisitions,
            self.acquisitions_under_faults,
            self.overlaps.len() + self.acquired_without_majority.len(),
            self.lost_updates.lost,
            self.leaks.len(),
            self.liveness.success_rate * 100.0,
            format!("{:?}", self.verdict).to_lowercase()
        )
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Json {
        let o = &self.options;
        let record = |r: &LockRecord| {
            Json::obj([
                ("client", Json::usize(r.client)),
                ("resource", Json::str(r.resource.clone())),
                ("token", Json::str(r.token.clone())),
                ("invoked_ms", Json::ms(r.invoked)),
                ("acquired_ms", Json::opt_ms(r.acquired)),
                ("validity_end_ms", Json::opt_ms(r.validity_end)),
                ("released_ms", Json::opt_ms(r.released)),
                ("fencing", r.fencing.map_or(Json::Null, Json::uint)),
                ("error", r.error.clone().map_or(Json::Null, Json::Str)),
            ])
        };
        Json::obj([
            ("scenario", Json::str(self.scenario.name)),
            ("in_model", Json::Bool(self.scenario.in_model)),
            ("seed", Json::uint(o.seed)),
            ("clients_mode", Json::str(o.mode.name())),
            ("acquisitions", Json::usize(self.acquisitions)),
            (
                "acquisitions_under_faults",
                Json::usize(self.acquisitions_under_faults),
            ),
            (
                "violations",
                Json::usize(self.overlaps.len() + self.acquired_without_majority.len()),
            ),
            ("lost_updates", Json::uint(self.lost_updates.lost)),
            ("success_rate_majority_up", Json::Num(self.liveness.success_rate)),
            ("leaked_keys", Json::usize(self.leaks.len())),
            ("backend", Json::str(self.backend)),
            ("masters", Json::usize(self.masters)),
            ("clients", Json::usize(o.clients)),
            ("resources", Json::usize(o.resources)),
            ("ttl_ms", Json::ms(o.ttl)),
            ("duration_ms", Json::ms(o.duration)),
            ("run_end_ms", Json::ms(self.run_end)),
            ("verdict", Json::str(format!("{:?}", self.verdict).to_lowercase())),
            (
                "reasons",
                Json::Arr(self.reasons.iter().cloned().map(Json::Str).collect()),
            ),
            (
                "notes",
                Json::Arr(self.notes.iter().cloned().map(Json::Str).collect()),
            ),
            (
                "faults",
                Json::Arr(
                    self.applied
                        .iter()
                        .map(|f| {
                            Json::obj([
                                ("started_ms", Json::ms(f.started)),
                                ("finished_ms", Json::ms(f.finished)),
                                ("action", Json::str(f.action.to_string())),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "stats",
                Json::obj([
                    ("attempts", Json::usize(self.records.len())),
                    (
                        "acquired",
                        Json::usize(self.records.iter().filter(|r| r.acquired.is_some()).count()),
                    ),
                    ("increments", Json::uint(self.stats.increments)),
                    ("late_writes", Json::uint(self.stats.late_writes)),
                    ("skipped", Json::uint(self.stats.skipped)),
                    ("acquire_failures", Json::uint(self.stats.acquire_failures)),
                    ("release_failures", Json::uint(self.stats.release_failures)),
                    ("witness_errors", Json::uint(self.stats.witness_errors)),
                ]),
            ),
            (
                "overlaps",
                Json::Arr(
                    self.overlaps
                        .iter()
                        .map(|v| {
                            Json::obj([
                                ("resource", Json::str(v.resource.clone())),
                                ("overlap_ms", Json::ms(v.overlap)),
                                ("first", record(&v.first)),
                                ("second", record(&v.second)),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "acquired_without_majority",
                Json::Arr(self.acquired_without_majority.iter().map(record).collect()),
            ),
            (
                "witness",
                Json::obj([
                    ("expected", Json::uint(self.lost_updates.expected)),
                    ("actual", Json::uint(self.lost_updates.actual)),
                    ("lost", Json::uint(self.lost_updates.lost)),
                    ("unaccounted", Json::uint(self.lost_updates.unaccounted)),
                ]),
            ),
            (
                "liveness",
                Json::obj([
                    ("attempts", Json::usize(self.liveness.attempts)),
                    ("successes", Json::usize(self.liveness.successes)),
                    ("success_rate", Json::Num(self.liveness.success_rate)),
                    (
                        "recovery",
                        Json::Arr(
                            self.liveness
                                .recovery
                                .iter()
                                .map(|(heal, first)| {
                                    Json::obj([
                                        ("healed_ms", Json::ms(*heal)),
                                        ("first_success_after_ms", Json::opt_ms(*first)),
                                    ])
                                })
                                .collect(),
                        ),
                    ),
                ]),
            ),
            (
                "leaks",
                Json::Arr(
                    self.leaks
                        .iter()
                        .map(|l| {
                            Json::obj([
                                ("master", Json::usize(l.master)),
                                ("key", Json::str(l.key.clone())),
                                ("pttl_ms", Json::Int(i128::from(l.pttl_ms))),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("records", Json::Arr(self.records.iter().map(record).collect())),
        ])
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
        svg::timeline(&self.records, &self.fault_windows, self.run_end, &opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker;
    use crate::run::tests::{hold, report};
    use crate::verdict::judge;
    use crate::workload::ClientMode;

    #[test]
    fn reports_render_as_text_json_and_svg() {
        let mut r = report("none");
        r.records = vec![hold(0, 0, 100)];
        judge(&mut r);
        assert!(r.summary().contains("verdict: Pass"));
        let json = r.to_json().to_string();
        assert!(json.starts_with("{\"scenario\":\"none\""), "{json}");
        assert!(json.contains("\"verdict\":\"pass\""));
        assert!(r.svg().contains("class=\"hold\""));
        let row = r.table_row();
        assert!(row.starts_with("| none | in | 1 | 30s | 0 |"), "{row}");
        assert!(row.ends_with("| pass |"), "{row}");
        let columns = |line: &str| line.matches('|').count();
        let header = RunReport::table_header();
        assert!(
            header.lines().all(|line| columns(line) == columns(&row)),
            "{header}"
        );
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
