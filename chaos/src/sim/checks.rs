//! The checks a simulated run must pass, on simulated time: mutual exclusion over safe intervals
//! per resource (the chaos checker's sweep, reused), one owner per reentrant lock, all-or-nothing
//! multi-resource holds, fencing tokens that never go backwards, grants of a fair lock in ticket
//! order, no more semaphore holders than permits (and one holder per slot), no reader beside a
//! writer, no lost update of the witness, liveness when nothing stands in the way, and no key left
//! behind. A hold's safe interval runs from its acquire to the earliest of its last confirmed
//! validity, its release and the moment it learnt the lock was lost. Pure functions over the
//! records, so each is unit-tested with a case that must fail; each returns its findings typed
//! ([`Finding`], with the [`Check`] that made it), so that a negative control is judged by the
//! check that fired, never by the words.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::checker;
use crate::history::{FaultWindow, LockRecord};

use super::record::{CallKind, SimRecord, SEMAPHORE_PERMITS};

/// Which of the checks a finding comes from: what a negative control must be caught by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Check {
    /// Two owners' safe intervals overlapped on an exclusive hold ([`exclusion`]).
    Exclusion,
    /// A multi-resource hold without every resource ([`all_or_nothing`]).
    AllOrNothing,
    /// A fencing token went backwards or was handed out twice ([`fencing`]).
    Fencing,
    /// A fair lock granted out of ticket order ([`fair_order`]).
    FairOrder,
    /// More semaphore holders than permits, or two holders of one slot ([`semaphore`]).
    Semaphore,
    /// A reader beside a writer ([`readers_and_writers`]).
    ReadWrite,
    /// An acquire that should have succeeded did not ([`liveness`]).
    Liveness,
    /// Acknowledged witness updates were lost ([`lost_updates`]).
    LostUpdates,
    /// Keys left on the masters after the run settled.
    LeakedKeys,
}

impl Check {
    /// Its name in reports (`mutual exclusion`, `semaphore`, `lost updates`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Check::Exclusion => "mutual exclusion",
            Check::AllOrNothing => "multi",
            Check::Fencing => "fencing",
            Check::FairOrder => "fair",
            Check::Semaphore => "semaphore",
            Check::ReadWrite => "read-write",
            Check::Liveness => "liveness",
            Check::LostUpdates => "lost updates",
            Check::LeakedKeys => "leaked keys",
        }
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One violation a check found, with the check that found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The check.
    pub check: Check,
    /// What it saw, starting with the check's name.
    pub text: String,
}

impl Finding {
    /// What `check` saw: `CHECK: DETAIL`.
    pub fn new(check: Check, detail: impl fmt::Display) -> Finding {
        Finding {
            check,
            text: format!("{check}: {detail}"),
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A finding in a JSON report: its words (which start with its check's name).
impl Serialize for Finding {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

/// Every violation of the per-record checks, each with its check: exclusion, all-or-nothing,
/// fencing, fair order, the semaphore, readers and writers, liveness.
pub fn findings(records: &[SimRecord], faults: &[FaultWindow]) -> Vec<Finding> {
    [
        exclusion(records),
        all_or_nothing(records),
        fencing(records),
        fair_order(records, faults),
        semaphore(records),
        readers_and_writers(records),
        liveness(records, faults),
    ]
    .concat()
}

/// How long after a waiter's call its ticket is surely in every reachable queue (a round trip
/// and more, with no fault).
pub const FAIR_MARGIN: Duration = Duration::from_millis(50);

/// How long before a quiet acquire nothing may have been faulted for liveness to be judged: longer
/// than the longest TTL, the restart grace and a fair waiter's heartbeat.
pub const QUIET_BEFORE: Duration = Duration::from_secs(7);

/// The chaos checker's records, one per held resource ([`SimRecord::holds`]).
pub fn lock_records(records: &[SimRecord]) -> Vec<LockRecord> {
    records_of(records.iter())
}

/// The chaos checker's records of `records`, one per held resource, whose validity ends at the
/// loss signal if the holder had one earlier.
fn records_of<'a>(records: impl Iterator<Item = &'a SimRecord>) -> Vec<LockRecord> {
    records.flat_map(SimRecord::holds).collect()
}

/// Overlapping safe intervals of different owners (a reentrant owner is its client), for every
/// kind that excludes: all but the semaphore's permits and the read holds (checked by
/// [`semaphore`] and [`readers_and_writers`]), so two writers of a read-write lock are here. What
/// the docs promise excludes what, on one resource name ([`CallKind::exclusion`]): the plain lock,
/// the fenced lock, a multi-resource lock holding the name, a write and a fenced write all take
/// the plain lock's key and exclude each other; a reentrant or fair lock uses keys of its own, so
/// it excludes only its own kind there (a reentrant and a plain hold on one name may overlap).
pub fn exclusion(records: &[SimRecord]) -> Vec<Finding> {
    let mut holds = Vec::new();
    for r in records {
        let Some(keys) = r.kind.exclusion() else {
            continue;
        };
        holds.extend(r.holds().map(|mut hold| {
            if !keys.is_empty() {
                hold.resource = format!("{} ({keys} keys)", hold.resource);
            }
            hold
        }));
    }
    checker::overlaps(&holds)
        .into_iter()
        .filter(|o| o.first.client != o.second.client)
        .map(|o| held_twice(Check::Exclusion, &o))
        .collect()
}

/// More holders of a semaphore at once than its permits, two holders of one slot at once (a slot
/// is a plain lock of its own), and holders that asked for different permits on one semaphore at
/// once (the library refuses a count other than the one in use: `PermitsMismatch`). Each hold is
/// judged by the permits its call asked for ([`SEMAPHORE_PERMITS`] in the classic runs).
pub fn semaphore(records: &[SimRecord]) -> Vec<Finding> {
    let permits = records.iter().filter(|r| r.kind == CallKind::Semaphore);
    let counts: std::collections::BTreeSet<u32> = permits
        .clone()
        .map(|r| r.permits.unwrap_or(SEMAPHORE_PERMITS))
        .collect();
    let mut found = Vec::new();
    for &count in &counts {
        let holds = records_of(
            permits
                .clone()
                .filter(|r| r.permits.unwrap_or(SEMAPHORE_PERMITS) == count),
        );
        found.extend(
            checker::too_many_holders(&holds, count as usize)
                .into_iter()
                .map(|e| {
                    let holders: Vec<String> = e
                        .holders
                        .iter()
                        .map(|h| format!("c{} from {:?}", h.client, h.acquired.unwrap_or_default()))
                        .collect();
                    Finding::new(
                        Check::Semaphore,
                        format_args!(
                            "{} had {} holders at {:?} ({}), above its {count} permits",
                            e.resource,
                            e.holders.len(),
                            e.at,
                            holders.join(", ")
                        ),
                    )
                }),
        );
    }
    if counts.len() > 1 {
        // The token field, empty in a hold, carries the permits asked for through the sweep.
        let asked: Vec<LockRecord> = permits
            .clone()
            .flat_map(|r| {
                let count = r.permits.unwrap_or(SEMAPHORE_PERMITS).to_string();
                r.holds().map(move |mut hold| {
                    hold.token.clone_from(&count);
                    hold
                })
            })
            .collect();
        found.extend(
            checker::overlaps(&asked)
                .into_iter()
                .filter(|o| o.first.token != o.second.token)
                .map(|o| {
                    Finding::new(
                        Check::Semaphore,
                        format_args!(
                            "{} held with {} permits by c{} from {:?} and with {} by c{} from {:?}, {:?} of overlap",
                            o.resource,
                            o.first.token,
                            o.first.client,
                            o.first.acquired.unwrap_or_default(),
                            o.second.token,
                            o.second.client,
                            o.second.acquired.unwrap_or_default(),
                            o.overlap
                        ),
                    )
                }),
        );
    }
    // A slot is a plain lock of its own, named after the slot the guard said it held.
    let slots: Vec<LockRecord> = permits
        .flat_map(|r| {
            let slot = r.permit.map_or("?".to_owned(), |p| p.to_string());
            r.holds().map(move |mut hold| {
                hold.resource = format!("{} slot {slot}", hold.resource);
                hold
            })
        })
        .collect();
    found.extend(
        checker::overlaps(&slots)
            .into_iter()
            .map(|o| held_twice(Check::Semaphore, &o)),
    );
    found
}

/// `CHECK: RESOURCE held by cA from T and by cB from T, D of overlap`.
fn held_twice(check: Check, o: &checker::Overlap) -> Finding {
    overlap_finding(check, o, ("held by", "and by"))
}

/// `CHECK: RESOURCE FIRST cA from T SECOND cB from T, D of overlap`, with the words that say what
/// each of the two holds was.
fn overlap_finding(check: Check, o: &checker::Overlap, (first, second): (&str, &str)) -> Finding {
    Finding::new(
        check,
        format_args!(
            "{} {first} c{} from {:?} {second} c{} from {:?}, {:?} of overlap",
            o.resource,
            o.first.client,
            o.first.acquired.unwrap_or_default(),
            o.second.client,
            o.second.acquired.unwrap_or_default(),
            o.overlap
        ),
    )
}

/// A read hold of a read-write lock whose safe interval overlaps a write hold's (fenced or not)
/// on the same resource (two write holds are [`exclusion`]'s). A plain, fenced or multi-resource
/// lock beside readers is no finding: the docs promise that a read is refused while one holds,
/// not that it waits for readers, so the two can overlap.
pub fn readers_and_writers(records: &[SimRecord]) -> Vec<Finding> {
    let readers = records_of(records.iter().filter(|r| r.kind == CallKind::Read));
    let writers = records_of(records.iter().filter(|r| r.kind.writes()));
    checker::reader_writer_overlaps(&readers, &writers)
        .into_iter()
        .map(|o| overlap_finding(Check::ReadWrite, &o, ("written by", "while read by")))
        .collect()
}

/// Multi-resource holds that do not hold every resource asked for.
pub fn all_or_nothing(records: &[SimRecord]) -> Vec<Finding> {
    records
        .iter()
        .filter(|r| r.kind == CallKind::Multi && r.lock.acquired.is_some())
        .filter(|r| {
            let mut want: Vec<&str> = r.resources().collect();
            let mut held: Vec<&str> = r.held.iter().map(String::as_str).collect();
            want.sort_unstable();
            held.sort_unstable();
            want != held
        })
        .map(|r| {
            let asked: Vec<&str> = r.resources().collect();
            Finding::new(
                Check::AllOrNothing,
                format_args!("c{} asked for {asked:?} and holds {:?}", r.lock.client, r.held),
            )
        })
        .collect()
}

/// Fencing tokens that went backwards: a hold that began after another's safe interval ended
/// must carry a larger token; and no token is handed out twice.
pub fn fencing(records: &[SimRecord]) -> Vec<Finding> {
    let mut found = Vec::new();
    let mut by_resource: BTreeMap<&str, Vec<(Duration, Duration, u64, usize)>> = BTreeMap::new();
    for r in records {
        let (Some(token), Some(acquired)) = (r.lock.fencing, r.lock.acquired) else {
            continue;
        };
        let released = r.lock.released.unwrap_or(r.ended);
        let end = r
            .lock
            .validity_end
            .unwrap_or(released)
            .min(released)
            .max(acquired);
        by_resource
            .entry(r.first_resource())
            .or_default()
            .push((acquired, end, token, r.lock.client));
    }
    for (resource, holds) in by_resource {
        let mut by_end = holds.clone();
        by_end.sort_by_key(|h| (h.1, h.2));
        let mut by_start = holds;
        by_start.sort_by_key(|h| (h.0, h.2));
        let mut highest: Option<(u64, usize)> = None;
        let mut i = 0;
        for (acquired, _, token, client) in by_start {
            while i < by_end.len() && by_end[i].1 <= acquired {
                if highest.is_none_or(|(t, _)| by_end[i].2 > t) {
                    highest = Some((by_end[i].2, by_end[i].3));
                }
                i += 1;
            }
            if let Some((earlier, who)) = highest {
                if token <= earlier {
                    found.push(Finding::new(
                        Check::Fencing,
                        format_args!(
                            "{resource} token {token} (c{client} at {acquired:?}) after token {earlier} (c{who}) had ended"
                        ),
                    ));
                }
            }
        }
    }
    for (a, b) in checker::duplicate_fencing_tokens(&lock_records(records)) {
        found.push(Finding::new(
            Check::Fencing,
            format_args!(
                "token {:?} handed to c{} and c{} on {}",
                a.fencing, a.client, b.client, a.resource
            ),
        ));
    }
    found
}

fn quiet(faults: &[FaultWindow], from: Duration, to: Duration) -> bool {
    !faults
        .iter()
        .any(|f| f.start <= to && f.end + QUIET_BEFORE >= from)
}

/// A fair lock granted to a later ticket while an earlier one was queued. Tickets carry the
/// waiter's wall clock in ms, which runs at the client's own rate (two clients' read apart by up to
/// 0.8 % of the time since the run start), so a call a whole ms earlier by its own clock
/// ([`SimRecord::stamped`]) holds the earlier ticket. Judged only with no fault around, and once
/// the earlier ticket had time to reach the queues.
pub fn fair_order(records: &[SimRecord], faults: &[FaultWindow]) -> Vec<Finding> {
    let mut found = Vec::new();
    let mut by_resource: BTreeMap<&str, Vec<&SimRecord>> = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind == CallKind::Fair) {
        by_resource.entry(r.first_resource()).or_default().push(r);
    }
    for (resource, calls) in by_resource {
        for a in &calls {
            // Tickets are stamped on each client's own clock, in whole milliseconds.
            let a_ms = a.stamped.as_millis();
            // While `a` waited: from its call until it got the lock, or until it gave up.
            let (a_called, a_client) = (a.lock.invoked, a.lock.client);
            let gave_up = a.ended.min(a_called + a.wait).saturating_sub(FAIR_MARGIN);
            let waited_until = a.lock.acquired.unwrap_or(gave_up);
            for b in &calls {
                let Some(granted) = b.lock.acquired else { continue };
                if b.stamped.as_millis() <= a_ms
                    || granted < a_called + FAIR_MARGIN
                    || granted >= waited_until
                {
                    continue;
                }
                if quiet(faults, a_called, granted) {
                    found.push(Finding::new(
                        Check::FairOrder,
                        format_args!(
                            "{resource} granted to c{} (called at {:?}) at {granted:?} while c{a_client} (called earlier, at {a_called:?}) waited",
                            b.lock.client, b.lock.invoked
                        ),
                    ));
                }
            }
        }
    }
    found
}

/// Acquires that failed although no fault was near, no other call touched the resource, and no
/// earlier hold could still be on a master: with a majority reachable and no holder, an acquire
/// must succeed within its wait.
pub fn liveness(records: &[SimRecord], faults: &[FaultWindow]) -> Vec<Finding> {
    let mut found = Vec::new();
    for f in records.iter().filter(|r| r.lock.error.is_some()) {
        if !quiet(faults, f.lock.invoked, f.ended) {
            continue;
        }
        let contended = records.iter().any(|o| {
            if std::ptr::eq(o, f) || !o.resources().any(|res| f.resources().any(|mine| mine == res)) {
                return false;
            }
            // What `o` may leave on a master: its key until its TTL if its release was not confirmed.
            let lingers = if o.released_ok {
                o.ended
            } else {
                o.ended.max(o.lock.invoked + o.ttl) + o.ttl
            };
            o.lock.invoked <= f.ended && lingers + QUIET_BEFORE >= f.lock.invoked
        });
        if !contended {
            let wanted: Vec<&str> = f.resources().collect();
            found.push(Finding::new(
                Check::Liveness,
                format_args!(
                    "c{} could not take {wanted:?} (wait {:?}) at {:?} with every master reachable and no other caller: {}",
                    f.lock.client,
                    f.wait,
                    f.lock.invoked,
                    f.lock.error.as_deref().unwrap_or_default()
                ),
            ));
        }
    }
    found
}

/// Updates of the witness counters that were acknowledged and then lost: per counter, the
/// acknowledged writes minus the value the store ends with.
pub fn lost_updates(writes: &BTreeMap<String, u64>, finals: &BTreeMap<String, u64>) -> u64 {
    writes
        .iter()
        .map(|(key, n)| n.saturating_sub(finals.get(key).copied().unwrap_or(0)))
        .sum()
}
