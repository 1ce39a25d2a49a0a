//! The rules a run applies to the semaphore and the read-write lock, apart from the plain lock's:
//! a semaphore of P permits never has more than P holders at once
//! ([`checker::too_many_holders`]); no reader overlaps a writer
//! ([`checker::reader_writer_overlaps`]) and no two writers overlap ([`checker::overlaps`]).
//!
//! Pure, like `verdict`, which calls it; kept apart so that the plain lock's judgement reads
//! as before and each kind's rule is tested on hand-written holds.

use crate::checker::{self, Overlap, Rule};
use crate::history::LockRecord;
use crate::run::{Kind, KindFindings, Reason, RunReport};

/// The overlaps the kind forbids among `records`, and the kind's own findings (`None` for a
/// plain lock). A semaphore's holders may overlap up to its permits, so only the excess counts;
/// a read-write lock's `records` are its writes, `reads` its reads.
pub(crate) fn findings(
    kind: Kind,
    records: &[LockRecord],
    reads: Vec<LockRecord>,
) -> (Vec<Overlap>, Option<KindFindings>) {
    match kind {
        Kind::Lock => (checker::overlaps(records), None),
        Kind::Semaphore(permits) => {
            let permits = usize::try_from(permits).unwrap_or(usize::MAX);
            let findings = KindFindings {
                excesses: checker::too_many_holders(records, permits),
                ..KindFindings::default()
            };
            (Vec::new(), Some(findings))
        }
        Kind::RwLock => {
            let findings = KindFindings {
                reader_writer: checker::reader_writer_overlaps(&reads, records),
                reads,
                ..KindFindings::default()
            };
            (checker::overlaps(records), Some(findings))
        }
    }
}

/// How many violations of the kind's own rules the report holds (0 for a plain lock).
pub(crate) fn violations(report: &RunReport) -> usize {
    report
        .kinds
        .as_ref()
        .map_or(0, |k| k.excesses.len() + k.reader_writer.len())
}

/// The reasons an in-model run of the kind fails on its own rules.
pub(crate) fn failures(report: &RunReport) -> Vec<Reason> {
    let Some(k) = &report.kinds else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Kind::Semaphore(permits) = report.options.kind {
        if !k.excesses.is_empty() {
            out.push(Reason::fail(
                Rule::SemaphoreExcess,
                format!(
                    "{} times the semaphore had more holders than its {permits} permits",
                    k.excesses.len()
                ),
            ));
        }
    }
    if !k.reader_writer.is_empty() {
        out.push(Reason::fail(
            Rule::ReaderWriter,
            format!(
                "{} reads overlapped a write inside their validity",
                k.reader_writer.len()
            ),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::tests::{hold, report};
    use crate::run::Verdict;
    use crate::verdict::judge;
    use crate::workload::ClientMode;

    fn judged(name: &str, kind: Kind, records: Vec<LockRecord>, reads: Vec<LockRecord>) -> RunReport {
        let mut r = report(name);
        r.options.kind = kind;
        let (overlaps, kinds) = findings(kind, &records, reads);
        r.acquisitions = records.len() + kinds.as_ref().map_or(0, |k| k.reads.len());
        r.overlaps = overlaps;
        r.kinds = kinds;
        r.records = records;
        r.stats.increments = 0;
        judge(&mut r);
        r
    }

    #[test]
    fn holders_up_to_the_permits_pass_and_one_more_fails() {
        let three = vec![hold(0, 0, 100), hold(1, 10, 100), hold(2, 20, 100)];
        let r = judged("kill-minority", Kind::Semaphore(3), three.clone(), Vec::new());
        assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.reasons);
        assert!(r.overlaps.is_empty());
        let r = judged("kill-minority", Kind::Semaphore(2), three, Vec::new());
        assert_eq!(r.verdict, Verdict::Fail);
        assert_eq!(
            r.reasons,
            vec![Reason::fail(
                Rule::SemaphoreExcess,
                "1 times the semaphore had more holders than its 2 permits"
            )]
        );
    }

    #[test]
    fn overlapping_reads_pass_and_a_read_inside_a_write_fails() {
        let reads = vec![hold(1, 0, 100), hold(2, 50, 150)];
        let r = judged("partition", Kind::RwLock, vec![hold(0, 150, 300)], reads);
        assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.reasons);
        assert_eq!(r.acquisitions, 3);

        let r = judged(
            "partition",
            Kind::RwLock,
            vec![hold(0, 120, 300)],
            vec![hold(1, 100, 200)],
        );
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(
            r.reasons[0].text.contains("1 reads overlapped a write"),
            "{:?}",
            r.reasons
        );

        let writes = vec![hold(0, 0, 100), hold(1, 50, 150)];
        let r = judged("partition", Kind::RwLock, writes, Vec::new());
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(r.reasons[0].text.contains("overlapped"), "{:?}", r.reasons);
    }

    #[test]
    fn the_kinds_have_no_witness_and_an_idle_run_is_inconclusive() {
        let r = judged("none", Kind::Semaphore(2), Vec::new(), Vec::new());
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(r.reasons[0].text.contains("no hold was taken"), "{:?}", r.reasons);
        // A lock run with no increments is judged on its witness, as before.
        let mut lock = report("none");
        lock.stats.increments = 0;
        judge(&mut lock);
        assert!(lock.reasons[0].text.contains("witness"), "{:?}", lock.reasons);
    }

    #[test]
    fn the_majority_counting_control_is_caught_by_the_excess() {
        let mut r = report("partition");
        r.options.kind = Kind::Semaphore(2);
        r.options.mode = ClientMode::MajorityCounting;
        let holds = vec![hold(0, 0, 100), hold(1, 10, 100), hold(2, 20, 100)];
        let (overlaps, kinds) = findings(r.options.kind, &holds, Vec::new());
        r.overlaps = overlaps;
        r.kinds = kinds;
        r.acquisitions = 3;
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("1 semaphore violations, as it must")),
            "{:?}",
            r.notes
        );
        // Without an excess the control shows nothing, and says so.
        r.kinds = Some(KindFindings::default());
        r.notes.clear();
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(
            r.reasons[0]
                .text
                .contains("own check (semaphore excess) never fired"),
            "{:?}",
            r.reasons
        );
    }

    #[test]
    fn out_of_model_kind_violations_are_noted_not_failed() {
        let r = judged(
            "clock-jump",
            Kind::Semaphore(1),
            vec![hold(0, 0, 100), hold(1, 50, 150)],
            Vec::new(),
        );
        assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.reasons);
        assert!(
            r.notes.iter().any(|n| n.contains("1 semaphore violations")),
            "{:?}",
            r.notes
        );
    }
}
