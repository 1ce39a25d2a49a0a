//! The verdict of a chaos run, decided from what the run recorded and nothing else.
//!
//! [`assess`] turns the [`Evidence`] a run collected (its lock records, the faults applied,
//! the witness counter, the keys left on the masters) into a [`RunReport`]: which holds
//! overlapped, which acquisitions succeeded while their client could not reach a majority,
//! how many increments the witness lost, whether clients made progress while they could,
//! which keys leaked. [`judge`] then decides pass, fail or inconclusive for the scenario and
//! the clients' mode.
//!
//! It is pure (no IO, no async, no clock), so that every rule is unit-tested here on
//! histories written by hand, apart from the machinery that produces real ones.

use std::time::Duration;

use crate::availability::{self, AppliedFault};
use crate::checker::{self, KeyObservation, Liveness, Rule};
use crate::history::LockRecord;
use crate::kinds_verdict;
use crate::run::{Reason, RunOptions, RunReport, Verdict};
use crate::workload::WorkloadStats;

/// What a run collected, before any judgement.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// The options the run used.
    pub options: RunOptions,
    /// Backend name.
    pub backend: &'static str,
    /// Number of masters.
    pub masters: usize,
    /// When the last client finished (offset from the run start).
    pub run_end: Duration,
    /// When every fault had been healed after the clients finished.
    pub healed: Duration,
    /// Every lock operation (for the read-write lock, the writes).
    pub records: Vec<LockRecord>,
    /// The reads of a read-write lock (empty for every other kind).
    pub reads: Vec<LockRecord>,
    /// Every fault applied, the final heal included.
    pub applied: Vec<AppliedFault>,
    /// Workload totals.
    pub stats: WorkloadStats,
    /// The witness counters' final total (0 for the kinds, whose workload has no witness).
    pub witness_total: u64,
    /// Lock keys seen on the masters after the TTL was waited out.
    pub observations: Vec<KeyObservation>,
    /// Remarks made while running (clock method, checks that could not be made).
    pub notes: Vec<String>,
}

/// Checks the evidence and judges it: the run's report, verdict included.
pub fn assess(evidence: Evidence) -> RunReport {
    let Evidence {
        options,
        backend,
        masters,
        run_end,
        healed,
        records,
        reads,
        applied,
        stats,
        witness_total,
        observations,
        mut notes,
    } = evidence;
    let scenario = options.scenario;
    let groups = scenario.groups();
    let fault_windows = availability::fault_windows(&applied, run_end);
    let (overlaps, kinds) = kinds_verdict::findings(options.kind, &records, reads);
    // Every hold, reads included, needs a majority and counts for liveness.
    let every: Vec<LockRecord> = match &kinds {
        Some(k) => records.iter().chain(&k.reads).cloned().collect(),
        None => records.clone(),
    };
    if kinds.is_some() {
        notes.push(format!(
            "the {} workload has no witness counter: no lost-update check",
            options.kind.name()
        ));
    }
    let acquisitions = every.iter().filter(|r| r.acquired.is_some()).count();
    let spans = availability::fault_spans(&applied, run_end);
    let acquisitions_under_faults = checker::acquisitions_during(&every, &spans, run_end);
    let mut acquired_without_majority = Vec::new();
    let mut liveness = Liveness {
        attempts: 0,
        successes: 0,
        success_rate: 1.0,
        recovery: Vec::new(),
    };
    for group in 0..groups {
        let mine: Vec<LockRecord> = every
            .iter()
            .filter(|r| r.client % groups == group)
            .cloned()
            .collect();
        let down = availability::no_majority_windows(&applied, masters, group, run_end);
        acquired_without_majority.extend(checker::acquisitions_within(&mine, &down));
        let up = availability::majority_windows(&down, run_end);
        let heals = availability::heals(&down, run_end);
        let live = checker::liveness(&mine, &up, &heals);
        liveness.attempts += live.attempts;
        liveness.successes += live.successes;
        liveness.recovery.extend(live.recovery);
    }
    if liveness.attempts > 0 {
        liveness.success_rate = liveness.successes as f64 / liveness.attempts as f64;
    }
    let lost_updates = checker::lost_updates(stats.increments, witness_total);
    let leaks = checker::leaks(&observations, healed, options.ttl);

    let mut report = RunReport {
        scenario,
        backend,
        masters,
        options,
        run_end,
        records,
        kinds,
        acquisitions,
        acquisitions_under_faults,
        applied,
        fault_windows,
        overlaps,
        acquired_without_majority,
        lost_updates,
        stats,
        liveness,
        leaks,
        notes,
        verdict: Verdict::Pass,
        reasons: Vec::new(),
    };
    judge(&mut report);
    report
}

/// Sets the verdict and its reasons from the findings.
pub fn judge(report: &mut RunReport) {
    let mut fail = Vec::new();
    let mut unsure = Vec::new();
    let control = report.options.mode;
    // A negative control is judged as strictly as an in-model run: its violations must show.
    let in_model = report.scenario.in_model || control.is_unsafe();
    if !report.acquired_without_majority.is_empty() {
        fail.push(Reason::fail(
            Rule::Majority,
            format!(
                "{} acquisitions succeeded while their client could not reach a majority",
                report.acquired_without_majority.len()
            ),
        ));
    }
    let kind_violations = kinds_verdict::violations(report);
    let violations = !report.overlaps.is_empty() || report.lost_updates.lost > 0 || kind_violations > 0;
    let witness = report.kinds.is_none();
    if in_model {
        if !report.overlaps.is_empty() {
            fail.push(Reason::fail(
                Rule::Overlaps,
                format!(
                    "{} pairs of holders overlapped inside their validity",
                    report.overlaps.len()
                ),
            ));
        }
        if report.lost_updates.lost > 0 {
            let msg = format!("{} witness increments were lost", report.lost_updates.lost);
            if report.stats.late_writes == 0 || control.is_unsafe() {
                fail.push(Reason::fail(Rule::LostUpdates, msg));
            } else {
                unsure.push(Reason::inconclusive(
                    Some(Rule::LostUpdates),
                    format!(
                        "{msg}, but {} writes completed after their validity (the machine is too loaded for the TTL)",
                        report.stats.late_writes
                    ),
                ));
            }
        }
        if !report.leaks.is_empty() {
            fail.push(Reason::fail(
                Rule::LeakedKeys,
                format!("{} lock keys outlived their TTL", report.leaks.len()),
            ));
        }
        fail.extend(kinds_verdict::failures(report));
        if witness && report.stats.increments == 0 {
            unsure.push(Reason::inconclusive(
                Some(Rule::LostUpdates),
                "no critical section completed, so the witness showed nothing",
            ));
        }
        if !witness && report.acquisitions == 0 {
            unsure.push(Reason::inconclusive(
                None,
                "no hold was taken, so the checks saw nothing",
            ));
        }
        if let Some(target) = control.target() {
            // A control is caught only by the check it targets; whatever else failed says
            // nothing about the assumption it breaks, and is kept as a note.
            if fired(report, target) {
                report.notes.push(format!(
                    "negative control ({} clients): caught by its own check ({target}); the checker detected {}, as it must",
                    control.name(),
                    found(report, kind_violations)
                ));
            } else {
                report.notes.extend(
                    fail.drain(..)
                        .map(|f| format!("negative control, another check (does not count): {f}")),
                );
                unsure.push(Reason::inconclusive(
                    Some(target),
                    format!(
                        "negative control ({} clients): its own check ({target}) never fired, so the control was not caught",
                        control.name()
                    ),
                ));
            }
        }
    } else if violations {
        report.notes.push(format!(
            "out of model: {} observed, as this scenario allows",
            found(report, kind_violations)
        ));
    } else {
        report
            .notes
            .push("out of model: no violation observed this time (one is possible, not certain)".into());
    }
    report.verdict = if !fail.is_empty() {
        Verdict::Fail
    } else if !unsure.is_empty() {
        Verdict::Inconclusive
    } else {
        Verdict::Pass
    };
    report.reasons = fail.into_iter().chain(unsure).collect();
}

/// `true` if the check of `rule` found something in the report, whatever the scenario allows:
/// what a negative control's target ([`ClientMode::target`](crate::workload::ClientMode::target))
/// must do for the control to count as caught.
fn fired(report: &RunReport, rule: Rule) -> bool {
    let kinds = report.kinds.as_ref();
    match rule {
        Rule::Majority => !report.acquired_without_majority.is_empty(),
        Rule::Overlaps => !report.overlaps.is_empty(),
        Rule::LostUpdates => report.lost_updates.lost > 0,
        Rule::LeakedKeys => !report.leaks.is_empty(),
        Rule::SemaphoreExcess => kinds.is_some_and(|k| !k.excesses.is_empty()),
        Rule::ReaderWriter => kinds.is_some_and(|k| !k.reader_writer.is_empty()),
    }
}

/// What the checks found, in words: overlaps and lost increments for plain locks, overlaps and
/// the kind's violations for the others (which have no witness).
fn found(report: &RunReport, kind_violations: usize) -> String {
    match &report.kinds {
        None => format!(
            "{} overlaps and {} lost increments",
            report.overlaps.len(),
            report.lost_updates.lost
        ),
        Some(_) => format!(
            "{} overlaps and {} {} violations",
            report.overlaps.len(),
            kind_violations,
            report.options.kind.name()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::DataMode;
    use crate::faults::FaultAction;
    use crate::run::tests::{hold, report};
    use crate::scenario;
    use crate::workload::ClientMode;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A hold of `resource` by `client` from `from` ms, valid until `to` ms, released at
    /// `released` ms, with the token `client-from`.
    fn held(client: usize, resource: &str, from: u64, to: u64, released: u64) -> LockRecord {
        let mut r = LockRecord::invoked(client, resource, ms(from));
        r.token = format!("{client}-{from}");
        r.acquired = Some(ms(from));
        r.validity_end = Some(ms(to));
        r.released = Some(ms(released));
        r
    }

    /// The evidence of a 10 s run of `name` on 5 masters that left no key behind.
    fn evidence(name: &str, records: Vec<LockRecord>, increments: u64, witness: u64) -> Evidence {
        Evidence {
            options: RunOptions::new(*scenario::find(name).unwrap()),
            backend: "process",
            masters: 5,
            run_end: ms(10_000),
            healed: ms(10_050),
            records,
            reads: Vec::new(),
            applied: Vec::new(),
            stats: WorkloadStats {
                increments,
                ..WorkloadStats::default()
            },
            witness_total: witness,
            observations: Vec::new(),
            notes: Vec::new(),
        }
    }

    fn applied(at: u64, action: FaultAction) -> AppliedFault {
        AppliedFault {
            started: ms(at),
            finished: ms(at),
            action,
        }
    }

    #[test]
    fn a_clean_history_is_judged_clean() {
        // Two clients take turns on r0, a third holds r1 meanwhile; every increment counted.
        let records = vec![
            held(0, "r0", 0, 500, 100),
            held(1, "r0", 100, 600, 250),
            held(2, "r1", 50, 550, 400),
            held(0, "r0", 260, 760, 300),
        ];
        let report = assess(evidence("none", records, 4, 4));
        assert!(report.overlaps.is_empty(), "{:?}", report.overlaps);
        assert!(report.acquired_without_majority.is_empty());
        assert_eq!(report.acquisitions, 4);
        assert_eq!(report.acquisitions_under_faults, 0);
        assert_eq!(report.lost_updates.lost, 0);
        assert_eq!((report.liveness.attempts, report.liveness.successes), (4, 4));
        assert!(report.leaks.is_empty());
        assert_eq!(report.verdict, Verdict::Pass, "{:?}", report.reasons);
        assert!(report.reasons.is_empty(), "{:?}", report.reasons);
    }

    #[test]
    fn a_violating_history_is_judged_a_violation() {
        // Client 1 acquires r0 while client 0 still holds it, and one increment is lost.
        let records = vec![held(0, "r0", 0, 500, 400), held(1, "r0", 300, 800, 700)];
        let report = assess(evidence("none", records, 2, 1));
        assert_eq!(report.overlaps.len(), 1, "{:?}", report.overlaps);
        let overlap = &report.overlaps[0];
        assert_eq!((overlap.first.client, overlap.second.client), (0, 1));
        assert_eq!(overlap.overlap, ms(100));
        assert_eq!(report.lost_updates.lost, 1);
        assert_eq!(report.verdict, Verdict::Fail);
        assert_eq!(
            report.reasons,
            vec![
                Reason::fail(
                    Rule::Overlaps,
                    "1 pairs of holders overlapped inside their validity"
                ),
                Reason::fail(Rule::LostUpdates, "1 witness increments were lost"),
            ]
        );
    }

    #[test]
    fn an_acquisition_while_a_majority_is_down_is_a_violation() {
        // Three of five masters are killed from 2 s to 5 s: the hold at 3 s is impossible,
        // the one at 6 s is not; both overlap a fault's span.
        let mut ev = evidence(
            "kill-majority",
            vec![
                held(0, "r0", 3_000, 3_500, 3_100),
                held(1, "r0", 6_000, 6_500, 6_100),
            ],
            2,
            2,
        );
        for m in 0..3 {
            ev.applied.push(applied(2_000, FaultAction::Kill(m)));
        }
        for m in 0..3 {
            ev.applied
                .push(applied(5_000, FaultAction::Restart(m, DataMode::Keep)));
        }
        let report = assess(ev);
        assert_eq!(report.acquired_without_majority.len(), 1);
        assert_eq!(report.acquired_without_majority[0].acquired, Some(ms(3_000)));
        assert_eq!(report.fault_windows.len(), 3, "{:?}", report.fault_windows);
        assert_eq!(report.verdict, Verdict::Fail);
        assert!(
            report.reasons[0].text.contains("could not reach a majority"),
            "{:?}",
            report.reasons
        );
        // Liveness only counts the attempt made while the majority was up.
        assert_eq!((report.liveness.attempts, report.liveness.successes), (1, 1));
    }

    #[test]
    fn only_the_partitioned_group_is_held_to_the_majority_rule() {
        // Group 0 (even clients) is cut from three masters from 2 s to 6 s; group 1 (odd
        // clients) keeps them. The same acquisition is a violation for the first only.
        let cut = |client: usize| {
            let mut ev = evidence("partition", vec![held(client, "r0", 3_000, 3_500, 3_100)], 1, 1);
            ev.applied = vec![
                applied(
                    2_000,
                    FaultAction::Partition {
                        group: 0,
                        masters: vec![0, 1, 2],
                    },
                ),
                applied(
                    2_000,
                    FaultAction::Partition {
                        group: 1,
                        masters: vec![3, 4],
                    },
                ),
                applied(6_000, FaultAction::HealNetwork),
            ];
            assess(ev)
        };
        let even = cut(0);
        assert_eq!(even.acquired_without_majority.len(), 1);
        assert_eq!(even.verdict, Verdict::Fail);
        let odd = cut(1);
        assert!(odd.acquired_without_majority.is_empty());
        assert_eq!(odd.verdict, Verdict::Pass, "{:?}", odd.reasons);
        assert_eq!(odd.acquisitions_under_faults, 1);
    }

    #[test]
    fn keys_seen_after_the_ttl_are_leaks() {
        let mut ev = evidence("none", vec![held(0, "r0", 0, 500, 100)], 1, 1);
        let key = |pttl_ms: i64, observed: u64| KeyObservation {
            master: 1,
            key: "quorlock-chaos:r0".into(),
            pttl_ms,
            observed_at: ms(observed),
        };
        // Healed at 10.05 s with a 2 s TTL: a key seen at 11 s with an expiry may still go.
        ev.observations = vec![key(500, 11_000)];
        assert!(assess(ev.clone()).leaks.is_empty());
        ev.observations = vec![key(500, 12_100), key(-1, 11_000)];
        let report = assess(ev);
        assert_eq!(report.leaks.len(), 2, "{:?}", report.leaks);
        assert_eq!(report.verdict, Verdict::Fail);
    }

    #[test]
    fn a_clean_in_model_run_passes() {
        let mut r = report("kill-minority");
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.reasons);
    }

    #[test]
    fn overlaps_fail_an_in_model_run_but_not_an_out_of_model_one() {
        let overlaps = checker::overlaps(&[hold(0, 0, 100), hold(1, 50, 150)]);
        assert_eq!(overlaps.len(), 1);
        let mut r = report("partition");
        r.overlaps = overlaps.clone();
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(r.reasons[0].text.contains("overlapped"), "{:?}", r.reasons);

        let mut r = report("client-pause");
        r.overlaps = overlaps;
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Pass);
        assert!(r.notes.iter().any(|n| n.contains("1 overlaps")), "{:?}", r.notes);
    }

    #[test]
    fn lost_updates_fail_unless_writes_were_late() {
        let mut r = report("none");
        r.lost_updates = checker::lost_updates(10, 8);
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Fail);
        r.stats.late_writes = 1;
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Inconclusive);
    }

    #[test]
    fn a_negative_control_fails_when_caught_and_is_inconclusive_when_not() {
        let mut r = report("none");
        r.options.mode = ClientMode::IgnoreValidity;
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(
            r.reasons[0].text.contains("own check (lost updates) never fired"),
            "{:?}",
            r.reasons
        );

        // Another check's finding does not count: a leak fails a safe run, not this control.
        let mut r = report("none");
        r.options.mode = ClientMode::IgnoreValidity;
        r.leaks = vec![checker::KeyObservation {
            master: 0,
            key: "quorlock-chaos:r0".into(),
            pttl_ms: -1,
            observed_at: ms(10_000),
        }];
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Inconclusive, "{:?}", r.reasons);
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("another check (does not count)") && n.contains("outlived")),
            "{:?}",
            r.notes
        );

        // Late writes excuse nothing here: they are what the unsafe clients do.
        let mut r = report("none");
        r.options.mode = ClientMode::IgnoreValidity;
        r.lost_updates = checker::lost_updates(10, 7);
        r.stats.late_writes = 10;
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Fail, "{:?}", r.reasons);
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("caught by its own check (lost updates)")
                    && n.contains("3 lost increments, as it must")),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn an_acquisition_without_majority_fails_any_scenario() {
        let mut r = report("clock-jump");
        r.acquired_without_majority = vec![hold(0, 10, 20)];
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Fail);
    }

    #[test]
    fn leaks_fail_and_an_idle_run_is_inconclusive() {
        let mut r = report("none");
        r.leaks = vec![KeyObservation {
            master: 0,
            key: "quorlock-chaos:r0".into(),
            pttl_ms: -1,
            observed_at: Duration::from_secs(12),
        }];
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Fail);
        let mut r = report("none");
        r.stats.increments = 0;
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Inconclusive);
    }
}
