//! The semaphore's and the read-write lock's part of a run's report: their lines of the text
//! summary and their object in the JSON (`kind_findings`). A plain lock run has neither.
//!
//! Apart from `report` so that the plain lock's rendering reads as before; both are built from
//! the same JSON pieces (`json_parts`).

use std::fmt::Write as _;

use serde::Serialize;

use crate::checker::Excess;
use crate::json_parts::{JsonOverlap, JsonRecord, Ms};
use crate::run::{Kind, RunReport};

/// The kind as the report names it: `semaphore of 2 permits`, `rwlock`, `lock`.
pub(crate) fn describe(kind: Kind) -> String {
    match kind {
        Kind::Semaphore(p) => format!("semaphore of {p} permits"),
        Kind::Lock | Kind::RwLock => kind.name().to_string(),
    }
}

/// How many attempts the run made, reads included.
pub(crate) fn attempts(r: &RunReport) -> usize {
    r.records.len() + r.kinds.as_ref().map_or(0, |k| k.reads.len())
}

/// The kind's lines of the text summary: operations and safety (`None` for a plain lock).
pub(crate) fn summary(r: &RunReport) -> Option<String> {
    let k = r.kinds.as_ref()?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "operations: {} attempts ({} reads), {} holds ({} under faults), {} refused, {} release failures",
        attempts(r),
        k.reads.len(),
        r.acquisitions,
        r.acquisitions_under_faults,
        r.stats.acquire_failures,
        r.stats.release_failures
    );
    match r.options.kind {
        Kind::Semaphore(p) => {
            let _ = writeln!(
                s,
                "safety: {} excesses over {p} permits, {} acquisitions without majority; no witness (no lost-update check)",
                k.excesses.len(),
                r.acquired_without_majority.len()
            );
            for e in k.excesses.iter().take(10) {
                let clients: Vec<String> = e.holders.iter().map(|h| h.client.to_string()).collect();
                let _ = writeln!(
                    s,
                    "  {} holders of {} at {:.3}s: clients {}",
                    e.holders.len(),
                    e.resource,
                    e.at.as_secs_f64(),
                    clients.join(", ")
                );
            }
        }
        Kind::Lock | Kind::RwLock => {
            let _ = writeln!(
                s,
                "safety: {} reader/writer overlaps, {} writer overlaps, {} acquisitions without majority; no witness (no lost-update check)",
                k.reader_writer.len(),
                r.overlaps.len(),
                r.acquired_without_majority.len()
            );
            for o in k.reader_writer.iter().take(10) {
                let _ = writeln!(
                    s,
                    "  read by client {} inside the write of client {} for {:?}",
                    o.second.client, o.first.client, o.overlap
                );
            }
        }
    }
    Some(s)
}

/// The kind's findings in the JSON report, every record included.
#[derive(Serialize)]
pub(crate) struct JsonKinds<'a> {
    excesses: Vec<JsonExcess<'a>>,
    reader_writer_overlaps: Vec<JsonOverlap<'a>>,
    reads: Vec<JsonRecord<'a>>,
}

/// More holders of a semaphore than its permits, all of them.
#[derive(Serialize)]
struct JsonExcess<'a> {
    resource: &'a str,
    at_ms: Ms,
    holders: Vec<JsonRecord<'a>>,
}

impl<'a> From<&'a Excess> for JsonExcess<'a> {
    fn from(e: &'a Excess) -> JsonExcess<'a> {
        JsonExcess {
            resource: &e.resource,
            at_ms: Ms(e.at),
            holders: e.holders.iter().map(JsonRecord::from).collect(),
        }
    }
}

/// The kind's JSON object (`None` for a plain lock).
pub(crate) fn json(r: &RunReport) -> Option<JsonKinds<'_>> {
    let k = r.kinds.as_ref()?;
    Some(JsonKinds {
        excesses: k.excesses.iter().map(JsonExcess::from).collect(),
        reader_writer_overlaps: k.reader_writer.iter().map(JsonOverlap::from).collect(),
        reads: k.reads.iter().map(JsonRecord::from).collect(),
    })
}

#[cfg(test)]
mod tests {
    use crate::checker;
    use crate::run::tests::{hold, report};
    use crate::run::{Kind, KindFindings};
    use crate::verdict::judge;

    #[test]
    fn a_semaphore_excess_shows_in_text_table_and_json() {
        let mut r = report("kill-minority");
        r.options.kind = Kind::Semaphore(2);
        r.records = vec![hold(0, 0, 100), hold(1, 10, 100), hold(2, 20, 100)];
        r.acquisitions = 3;
        r.kinds = Some(KindFindings {
            excesses: checker::too_many_holders(&r.records, 2),
            ..KindFindings::default()
        });
        judge(&mut r);
        let text = r.summary();
        assert!(text.contains("kind semaphore of 2 permits"), "{text}");
        assert!(text.contains("1 excesses over 2 permits"), "{text}");
        assert!(
            text.contains("3 holders of r0 at 0.020s: clients 0, 1, 2"),
            "{text}"
        );
        assert!(text.contains("no witness"), "{text}");
        let row = r.table_row();
        assert!(row.contains("| semaphore of 2 permits | in |"), "{row}");
        assert!(row.contains("| 1 | - | 0 |"), "{row}");
        let json: serde_json::Value = serde_json::from_str(&r.to_json().unwrap()).unwrap();
        assert_eq!(json["kind"], "semaphore");
        assert_eq!(json["permits"], 2);
        assert_eq!(json["excesses"], 1);
        assert_eq!(json["violations"], 1);
        assert!(json["reader_writer_overlaps"].is_null());
        assert!(json["lost_updates"].is_null() && json["witness"].is_null());
        assert_eq!(
            json["kind_findings"]["excesses"][0]["holders"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
        assert_eq!(json["verdict"], "fail");
    }

    #[test]
    fn reads_count_as_attempts_and_show_in_the_json() {
        let mut r = report("none");
        r.options.kind = Kind::RwLock;
        r.records = vec![hold(0, 200, 300)];
        r.kinds = Some(KindFindings {
            reads: vec![hold(1, 0, 100), hold(2, 50, 150)],
            ..KindFindings::default()
        });
        assert_eq!(super::attempts(&r), 3);
        let text = super::summary(&r).unwrap();
        assert!(text.contains("3 attempts (2 reads)"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&r.to_json().unwrap()).unwrap();
        assert_eq!(json["reader_writer_overlaps"], 0);
        assert!(json["excesses"].is_null());
        assert_eq!(json["stats"]["acquired"], 3);
        assert_eq!(json["kind_findings"]["reads"].as_array().unwrap().len(), 2);
    }
}
