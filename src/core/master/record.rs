//! The record each master keeps about itself for quorlock, and the rule for what to write there.
//!
//! A report is what a master says now, and a master can be wrong about its past: a server put
//! behind the address of another reports its own uptime and its own `appendfsync`; a master whose
//! persistence was lowered at runtime (`CONFIG SET`, no `CONFIG REWRITE`) comes back from a crash
//! reporting the policy of its configuration file. What no report can show, the record shows: it
//! is written on the master (the hash `quorlock:master`, under the key prefix) by the first
//! client that sees each incarnation of it, and kept up to date by every client's checks. It
//! holds:
//!
//! - `run_id`: the incarnation it speaks for;
//! - `since`: the master's own clock (ms) when a client first saw that incarnation;
//! - `lost`: whether that incarnation may lack acknowledged writes, so that its votes wait out the
//!   grace from `since`;
//! - `durable`: whether every check of that incarnation found `appendfsync always` (once not, it
//!   stays not, until the next incarnation);
//! - `grace`: the longest grace any client that checked it declared, in ms, carried over from
//!   incarnation to incarnation, so a client with short TTLs learns of another's long ones;
//! - `hwm`: the highest fencing counter a check read there.
//!
//! A master without a record never had quorlock's writes, or lost them: it is treated as lost,
//! unless every master of the deployment answered without one at once (a fresh deployment, or
//! every master lost its data together, which no quorum system survives). A record made under
//! another `run_id` means the master restarted or was replaced: it lost nothing only if the
//! previous incarnation was durable at every check, the new one is durable, and it was not
//! promoted from a replica (whose replication lags); and a durable restart of an incarnation still
//! in doubt stays in doubt, with its grace counted from its first sighting. Every client reads the same record, so a
//! client started after the change honours the same window as one that watched it.

/// What one master's record says (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The incarnation it speaks for.
    pub run_id: String,
    /// When that incarnation was first seen, on the master's clock, in ms.
    pub since_ms: u64,
    /// Whether that incarnation may lack acknowledged writes.
    pub lost: bool,
    /// Whether every check of that incarnation found it persisting every write.
    pub durable: bool,
    /// The longest grace declared by a client that checked it, in ms.
    pub grace_ms: u64,
    /// The highest fencing counter read there.
    pub hwm: u64,
}

/// The hash fields of a record, in the order [`Record::fields`] writes them.
pub const FIELDS: [&str; 6] = ["run_id", "since", "lost", "durable", "grace", "hwm"];

impl Record {
    /// Reads a record from its hash fields (`HGETALL`'s pairs); `None` when there is none or it is
    /// not one (a field missing or not a number): a record that cannot be read is no evidence.
    pub fn from_fields<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Option<Record> {
        let mut found: [Option<&str>; 6] = [None; 6];
        for (name, value) in pairs {
            if let Some(i) = FIELDS.iter().position(|f| *f == name) {
                found[i] = Some(value);
            }
        }
        let [run_id, since, lost, durable, grace, hwm] = found;
        let flag = |v: Option<&str>| match v? {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        };
        let run_id = run_id.filter(|r| !r.is_empty())?.to_owned();
        Some(Record {
            run_id,
            since_ms: since?.parse().ok()?,
            lost: flag(lost)?,
            durable: flag(durable)?,
            grace_ms: grace?.parse().ok()?,
            hwm: hwm.map_or(Some(0), |v| v.parse().ok())?,
        })
    }

    /// Its hash fields, as [`FIELDS`] names them.
    pub fn fields(&self) -> [String; 6] {
        let flag = |b: bool| if b { "1" } else { "0" }.to_owned();
        [
            self.run_id.clone(),
            self.since_ms.to_string(),
            flag(self.lost),
            flag(self.durable),
            self.grace_ms.to_string(),
            self.hwm.to_string(),
        ]
    }
}

/// What one check of a master read, besides its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its `run_id` now.
    pub run_id: String,
    /// Its clock now, in ms.
    pub now_ms: u64,
    /// Whether it persists every write now (`Some(false)` when it does not, `None` when that could
    /// not be read: treated as not).
    pub durable: Option<bool>,
    /// Whether it inherited another server's replication history (promoted from a replica).
    pub promoted: bool,
    /// Its fencing counter, if any.
    pub counter: Option<u64>,
}

/// Where a check found a master's record missing while deciding what to write: alone (other
/// masters have records, or too few answered), or together with a majority of the deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// Some master has a record, or too few answered: a missing record means lost data.
    Alone,
    /// A majority answered, and none has a record: a fresh deployment.
    Everywhere,
}

/// Whether the masters' records, as a client's build read them (`Some(true)`: has one,
/// `Some(false)`: has none, `None`: did not answer), show a fresh deployment.
///
/// Every master that ever granted a lock had a record then: a client counts a master's vote only
/// after a check that read or wrote its record. So a majority without records, with no answering
/// master holding one, means either that nobody used these masters yet, or that a majority lost
/// its data since, which no quorum system survives (every held lock is on a majority, and any two
/// majorities meet). One master with a record, or too few answers, and a missing record means
/// that master lost its data.
pub fn missing(reads: &[Option<bool>]) -> Missing {
    let none = reads.iter().filter(|r| **r == Some(false)).count();
    let some = reads.contains(&Some(true));
    if !some && none >= super::super::timing::quorum(reads.len()) {
        Missing::Everywhere
    } else {
        Missing::Alone
    }
}

/// The record to write after a check that read `previous` and saw `seen`, with this client's
/// grace `grace_ms`; `None` when the record already says everything (nothing to write).
pub fn next(previous: Option<&Record>, seen: &Seen, grace_ms: u64, missing: Missing) -> Option<Record> {
    let durable_now = seen.durable == Some(true);
    let counter = seen.counter.unwrap_or(0);
    let Some(previous) = previous else {
        return Some(Record {
            run_id: seen.run_id.clone(),
            since_ms: seen.now_ms,
            lost: missing == Missing::Alone,
            durable: durable_now,
            grace_ms,
            hwm: counter,
        });
    };
    if previous.run_id != seen.run_id {
        // Restarted or replaced: what the previous incarnation acknowledged survived only if it
        // persisted every write throughout, the new one does too, and the data did not come from
        // a replica's (lagging) copy.
        let carried = previous.durable && durable_now && !seen.promoted;
        // A durable restart carries what the previous incarnation had, and what it lacked: one
        // that was itself still in doubt stays so, its grace counted from its first sighting.
        let (lost, since_ms) = match (carried, previous.lost) {
            (true, false) => (false, seen.now_ms),
            (true, true) => (true, previous.since_ms.min(seen.now_ms)),
            (false, _) => (true, seen.now_ms),
        };
        return Some(Record {
            run_id: seen.run_id.clone(),
            since_ms,
            lost,
            durable: durable_now,
            grace_ms: previous.grace_ms.max(grace_ms),
            hwm: previous.hwm.max(counter),
        });
    }
    let updated = Record {
        durable: previous.durable && durable_now,
        grace_ms: previous.grace_ms.max(grace_ms),
        hwm: previous.hwm.max(counter),
        ..previous.clone()
    };
    (updated != *previous).then_some(updated)
}

/// How long a master whose record is `record`, read when its clock said `now_ms`, still waits
/// before its votes count, for a grace of `grace_ms`: zero unless the record says it may lack
/// writes, else what is left of the grace since it was first seen.
pub fn remaining_ms(record: &Record, now_ms: u64, grace_ms: u64) -> u64 {
    if !record.lost {
        return 0;
    }
    record.since_ms.saturating_add(grace_ms).saturating_sub(now_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seen(run_id: &str, now_ms: u64, durable: bool) -> Seen {
        Seen {
            run_id: run_id.into(),
            now_ms,
            durable: Some(durable),
            promoted: false,
            counter: None,
        }
    }

    fn record(run_id: &str, since_ms: u64, lost: bool, durable: bool) -> Record {
        Record {
            run_id: run_id.into(),
            since_ms,
            lost,
            durable,
            grace_ms: 1_000,
            hwm: 0,
        }
    }

    #[test]
    fn a_record_reads_back_what_it_wrote_and_nothing_else() {
        let r = Record {
            hwm: 42,
            ..record("abc", 17, true, false)
        };
        let fields = r.fields();
        let pairs: Vec<(&str, &str)> = FIELDS
            .iter()
            .copied()
            .zip(fields.iter().map(String::as_str))
            .collect();
        assert_eq!(Record::from_fields(pairs.clone()), Some(r));
        // A field missing, or not a number: no record at all.
        assert_eq!(Record::from_fields(pairs[1..].iter().copied()), None);
        let mut bad = pairs.clone();
        bad[1].1 = "soon";
        assert_eq!(Record::from_fields(bad), None);
        let mut bad = pairs;
        bad[2].1 = "yes";
        assert_eq!(Record::from_fields(bad), None);
    }

    #[test]
    fn a_missing_record_is_lost_unless_missing_everywhere() {
        let fresh = next(None, &seen("a", 5, true), 700, Missing::Everywhere).unwrap();
        assert!(!fresh.lost);
        let alone = next(None, &seen("a", 5, true), 700, Missing::Alone).unwrap();
        assert!(alone.lost, "a replacement reporting always is not trusted for it");
        assert_eq!((alone.since_ms, alone.grace_ms), (5, 700));
    }

    #[test]
    fn a_new_incarnation_keeps_its_data_only_on_durable_evidence() {
        let old = record("a", 0, false, true);
        assert!(
            !next(Some(&old), &seen("b", 9, true), 0, Missing::Alone)
                .unwrap()
                .lost
        );
        // Downgraded at a check of the old incarnation: lost, whatever the new one reports.
        let downgraded = record("a", 0, false, false);
        assert!(
            next(Some(&downgraded), &seen("b", 9, true), 0, Missing::Alone)
                .unwrap()
                .lost
        );
        // A promoted replica's copy lags.
        let promoted = Seen {
            promoted: true,
            ..seen("b", 9, true)
        };
        assert!(next(Some(&old), &promoted, 0, Missing::Alone).unwrap().lost);
        // Not durable now.
        assert!(
            next(Some(&old), &seen("b", 9, false), 0, Missing::Alone)
                .unwrap()
                .lost
        );
    }

    #[test]
    fn a_check_of_the_same_incarnation_only_lowers_durability_and_raises_grace() {
        let r = record("a", 3, true, true);
        assert_eq!(next(Some(&r), &seen("a", 50, true), 1_000, Missing::Alone), None);
        let lowered = next(Some(&r), &seen("a", 50, false), 1_000, Missing::Alone).unwrap();
        assert!(!lowered.durable);
        assert_eq!((lowered.since_ms, lowered.lost), (3, true), "since and lost stay");
        // Once not durable, a report of always does not make it durable again.
        assert_eq!(
            next(Some(&lowered), &seen("a", 60, true), 1_000, Missing::Alone),
            None
        );
        let longer = next(Some(&r), &seen("a", 50, true), 9_000, Missing::Alone).unwrap();
        assert_eq!(longer.grace_ms, 9_000);
        assert_eq!(
            next(Some(&longer), &seen("a", 50, true), 1_000, Missing::Alone),
            None
        );
    }

    #[test]
    fn a_fresh_deployment_needs_a_majority_without_records_and_none_with_one() {
        assert_eq!(missing(&[Some(false); 3]), Missing::Everywhere);
        assert_eq!(missing(&[Some(false), Some(false), None]), Missing::Everywhere);
        assert_eq!(missing(&[Some(false), None, None]), Missing::Alone);
        assert_eq!(missing(&[Some(false), Some(false), Some(true)]), Missing::Alone);
        assert_eq!(
            missing(&[Some(false), Some(false), Some(false), None, None]),
            Missing::Everywhere
        );
        assert_eq!(missing(&[]), Missing::Alone);
    }

    #[test]
    fn the_grace_runs_from_the_first_sighting() {
        let r = record("a", 1_000, true, true);
        assert_eq!(remaining_ms(&r, 1_400, 1_000), 600);
        assert_eq!(remaining_ms(&r, 2_000, 1_000), 0);
        assert_eq!(remaining_ms(&record("a", 1_000, false, true), 1_000, 1_000), 0);
    }

    proptest! {
        /// Whatever a master reports and whatever record it had, the next record never forgets a
        /// loss within an incarnation, never shortens the grace, never moves the first sighting
        /// of an incarnation, and only calls a new incarnation intact on durable evidence.
        #[test]
        fn the_record_only_grows_more_careful(
            prev_run in 0u8..3, prev_lost: bool, prev_durable: bool, prev_grace in 0u64..5_000,
            run in 0u8..3, now in 0u64..100_000, durable in prop::option::of(any::<bool>()),
            promoted: bool, grace in 0u64..5_000, everywhere: bool, has_prev: bool,
        ) {
            let prev = Record {
                run_id: prev_run.to_string(),
                since_ms: 10,
                lost: prev_lost,
                durable: prev_durable,
                grace_ms: prev_grace,
                hwm: 3,
            };
            let seen = Seen { run_id: run.to_string(), now_ms: now, durable, promoted, counter: Some(2) };
            let missing = if everywhere { Missing::Everywhere } else { Missing::Alone };
            let prev = has_prev.then_some(prev);
            let next = next(prev.as_ref(), &seen, grace, missing);
            let after = next.clone().or_else(|| prev.clone()).expect("a record after a check");
            prop_assert_eq!(&after.run_id, &seen.run_id);
            prop_assert!(after.grace_ms >= grace);
            match &prev {
                Some(p) if p.run_id == seen.run_id => {
                    prop_assert_eq!(after.since_ms, p.since_ms);
                    prop_assert_eq!(after.lost, p.lost);
                    prop_assert!(after.grace_ms >= p.grace_ms);
                    prop_assert!(!after.durable || (p.durable && durable == Some(true)));
                    prop_assert!(after.hwm >= p.hwm);
                }
                Some(p) => {
                    prop_assert!(after.since_ms == now || (after.lost && after.since_ms == p.since_ms.min(now)));
                    prop_assert!(after.grace_ms >= p.grace_ms);
                    if !after.lost {
                        prop_assert!(p.durable && !p.lost && durable == Some(true) && !promoted);
                    }
                }
                None => {
                    prop_assert_eq!(after.since_ms, now);
                    prop_assert_eq!(after.lost, !everywhere);
                }
            }
        }
    }
}
