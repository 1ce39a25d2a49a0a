//! The negative controls of the operations: for each operation, the one client rule that keeps
//! it safe, switched off in the probe clients (`--unsafe NAME`), and the check that must then
//! catch two holders at once. A control is only caught by its own check: whatever else fails
//! in its run is kept as a note, and a control whose check never fired leaves the run
//! inconclusive, never passed, exactly as [`crate::verdict::judge`] treats the clients' modes.
//!
//! Each removes exactly its rule and leaves the grace and every other rule in place: the library's
//! `seam` switch `unsafe_without_for_tests` for the rule for a replaced master (a promoted
//! replica counts at once) and for the durability-over-time rule (a restart judged on the new
//! report alone), the public `refuse_evicting_masters(false)` for the eviction rule.

use quorlock::config::Mechanism;
use quorlock::QuorlockBuilder;

use crate::checker::Rule;
use crate::run::{Reason, RunReport, Verdict};
use crate::scenario::ScenarioKind;

/// The name of a mechanism the clients can run without (`quorlock-chaos client --without NAME`).
pub fn mechanism_name(mechanism: Mechanism) -> &'static str {
    match mechanism {
        Mechanism::ReplacedMaster => "replaced-master",
        Mechanism::DurabilityOverTime => "durability-over-time",
        _ => "other",
    }
}

/// The mechanism named `name` by [`mechanism_name`].
pub fn mechanism_named(name: &str) -> Result<Mechanism, String> {
    [Mechanism::ReplacedMaster, Mechanism::DurabilityOverTime]
        .into_iter()
        .find(|m| mechanism_name(*m) == name)
        .ok_or_else(|| format!("unknown mechanism {name:?}; the clients can run without replaced-master or durability-over-time"))
}

/// An operation's negative control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// The failover's: a promoted replica's votes count at once.
    CountReplacedMasters,
    /// The runtime downgrade's: a restart's durability is judged from what the new incarnation
    /// reports, not from the record of what the old one was.
    DurabilityFromReport,
    /// The eviction's: a master that may evict keys is counted.
    CountEvictingMasters,
}

impl Control {
    /// Every control, in the order of the operations.
    pub const ALL: [Control; 3] = [
        Control::CountReplacedMasters,
        Control::DurabilityFromReport,
        Control::CountEvictingMasters,
    ];

    /// Its name on the command line (`--unsafe NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Control::CountReplacedMasters => "count-replaced-masters",
            Control::DurabilityFromReport => "durability-from-report",
            Control::CountEvictingMasters => "count-evicting-masters",
        }
    }

    /// The operation whose protection it removes.
    pub fn operation(self) -> ScenarioKind {
        match self {
            Control::CountReplacedMasters => ScenarioKind::Failover,
            Control::DurabilityFromReport => ScenarioKind::RuntimeDowngrade,
            Control::CountEvictingMasters => ScenarioKind::Eviction,
        }
    }

    /// The check that must catch it: two probes holding the lock at once.
    pub fn target(self) -> Rule {
        Rule::Overlaps
    }

    /// The probe clients' builder with the rule switched off.
    pub fn configure(self, builder: QuorlockBuilder) -> QuorlockBuilder {
        match self {
            Control::CountReplacedMasters => builder.unsafe_without_for_tests(Mechanism::ReplacedMaster),
            Control::DurabilityFromReport => builder.unsafe_without_for_tests(Mechanism::DurabilityOverTime),
            Control::CountEvictingMasters => builder.refuse_evicting_masters(false),
        }
    }

    /// The mechanism every client of the deployment runs without, the background clients
    /// included: the masters' record is evidence every client shares, so a background client that
    /// keeps the rule records a promoted replica as lost before a probe judges it, and protects
    /// the probe. `None` when the probes alone are enough (eviction is judged from each master's
    /// report, not from the record).
    pub fn everywhere(self) -> Option<Mechanism> {
        match self {
            Control::CountReplacedMasters => Some(Mechanism::ReplacedMaster),
            Control::DurabilityFromReport => Some(Mechanism::DurabilityOverTime),
            Control::CountEvictingMasters => None,
        }
    }

    /// How the control switches its rule off, in words.
    pub fn switch(self) -> &'static str {
        match self {
            Control::CountReplacedMasters => "unsafe_without_for_tests(Mechanism::ReplacedMaster)",
            Control::DurabilityFromReport => "unsafe_without_for_tests(Mechanism::DurabilityOverTime)",
            Control::CountEvictingMasters => "refuse_evicting_masters(false)",
        }
    }
}

/// Judges a run of `control`'s probes, after [`crate::verdict::assess`] judged it as a run of
/// safe clients: caught when its own check fired (the run fails, as it must, with a note
/// saying so); otherwise what failed is kept as notes and the run is inconclusive.
pub fn judge(report: &mut RunReport, control: Control) {
    let target = control.target();
    // Every control targets the overlap check (see [`Control::target`]).
    if !report.overlaps.is_empty() {
        report.notes.push(format!(
            "negative control ({}: {} in the probes): caught by its own check ({target}); the checker detected \
             {} overlaps and {} lost increments, as it must",
            control.name(),
            control.switch(),
            report.overlaps.len(),
            report.lost_updates.lost
        ));
        return;
    }
    let (failed, kept): (Vec<Reason>, Vec<Reason>) = std::mem::take(&mut report.reasons)
        .into_iter()
        .partition(|r| r.verdict == Verdict::Fail);
    report.notes.extend(
        failed
            .into_iter()
            .map(|f| format!("negative control, another check (does not count): {f}")),
    );
    report.reasons = kept;
    report.reasons.push(Reason::inconclusive(
        Some(target),
        format!(
            "negative control ({}): its own check ({target}) never fired, so the control was not caught",
            control.name()
        ),
    ));
    report.verdict = Verdict::Inconclusive;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::tests::{hold, report};

    #[test]
    fn every_operation_has_one_control_with_its_own_name() {
        let mut names: Vec<&str> = Control::ALL.iter().map(|c| c.name()).collect();
        names.dedup();
        assert_eq!(names.len(), 3);
        let operations: Vec<ScenarioKind> = Control::ALL.iter().map(|c| c.operation()).collect();
        assert_eq!(
            operations,
            vec![
                ScenarioKind::Failover,
                ScenarioKind::RuntimeDowngrade,
                ScenarioKind::Eviction
            ]
        );
        // Each removes its one rule: the seam switch, or the public option that is exactly it.
        assert!(Control::CountReplacedMasters.switch().contains("ReplacedMaster"));
        assert!(Control::DurabilityFromReport
            .switch()
            .contains("DurabilityOverTime"));
        assert_eq!(
            Control::CountEvictingMasters.switch(),
            "refuse_evicting_masters(false)"
        );
    }

    #[test]
    fn a_control_caught_by_its_own_check_fails_and_says_so() {
        let mut r = report("failover");
        r.overlaps = crate::checker::overlaps(&[hold(0, 0, 100), hold(1, 50, 150)]);
        r.verdict = Verdict::Fail;
        r.reasons = vec![Reason::fail(Rule::Overlaps, "1 pairs of holders overlapped")];
        judge(&mut r, Control::CountReplacedMasters);
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("caught by its own check (overlaps)")),
            "{:?}",
            r.notes
        );
    }

    #[test]
    fn a_control_its_check_missed_is_inconclusive_whatever_else_failed() {
        let mut r = report("eviction");
        r.verdict = Verdict::Fail;
        r.reasons = vec![Reason::fail(Rule::LeakedKeys, "1 lock keys outlived their TTL")];
        judge(&mut r, Control::CountEvictingMasters);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert_eq!(r.reasons.len(), 1);
        assert_eq!(r.reasons[0].rule, Some(Rule::Overlaps));
        assert!(
            r.notes.iter().any(|n| n.contains("does not count")),
            "{:?}",
            r.notes
        );
        let mut clean = report("runtime-downgrade");
        judge(&mut clean, Control::DurabilityFromReport);
        assert_eq!(clean.verdict, Verdict::Inconclusive);
    }
}
