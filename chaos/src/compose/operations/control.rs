//! The negative controls of the operations: for each operation, the one client rule that keeps
//! it safe, switched off in the probe clients (`--unsafe NAME`), and the check that must then
//! catch two holders at once. A control is only caught by its own check: whatever else fails
//! in its run is kept as a note, and a control whose check never fired leaves the run
//! inconclusive, never passed, exactly as [`crate::verdict::judge`] treats the clients' modes.
//!
//! Each rule is switched off through a public builder option, because the library has no
//! `seam` switch that removes exactly that rule (see [`Control::missing_switch`]):
//! a restart grace of zero for the rule for a replaced master and for the durability-over-time
//! rule (it also removes the uptime rule beneath them, which neither operation reaches: both
//! masters report `appendfsync always`), and `refuse_evicting_masters(false)` for the eviction
//! rule, which is exactly that rule.

use std::time::Duration;

use quorlock::QuorlockBuilder;

use crate::checker::Rule;
use crate::run::{Reason, RunReport, Verdict};
use crate::scenario::ScenarioKind;

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
            Control::CountReplacedMasters | Control::DurabilityFromReport => {
                builder.restart_grace(Duration::ZERO)
            }
            Control::CountEvictingMasters => builder.refuse_evicting_masters(false),
        }
    }

    /// How the control switches its rule off, in words.
    pub fn switch(self) -> &'static str {
        match self {
            Control::CountReplacedMasters | Control::DurabilityFromReport => "restart_grace(0)",
            Control::CountEvictingMasters => "refuse_evicting_masters(false)",
        }
    }

    /// The `seam` switch the library lacks for removing exactly this rule and nothing else, or
    /// `None` when a public option already does.
    pub fn missing_switch(self) -> Option<&'static str> {
        match self {
            Control::CountReplacedMasters => Some(
                "a seam switch under which a check judges a new incarnation as if it had not inherited another \
                 server's replication history (`promoted` ignored in core::master::record::next), leaving the grace \
                 and every other rule in place",
            ),
            Control::DurabilityFromReport => Some(
                "a seam switch under which a restart's durability is judged from the new incarnation's report alone \
                 (the previous record's `durable` ignored in core::master::record::next), leaving the grace and every \
                 other rule in place",
            ),
            Control::CountEvictingMasters => None,
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
        assert!(Control::CountEvictingMasters.missing_switch().is_none());
        assert!(Control::CountReplacedMasters.missing_switch().is_some());
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
