//! Pure checks over a run's history: mutual exclusion (overlapping safe intervals), lost
//! updates of the read-modify-write witness, acquisitions while no majority was up,
//! liveness, fencing-token reuse and leaked keys; for the other kinds, more holders of a
//! semaphore than its permits, and a reader overlapping a writer. No I/O, so every verdict is unit-tested.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::history::{FaultWindow, LockRecord};

/// A rule a run is judged by, as the checks below decide it: what each of a verdict's reasons is
/// about, and what a negative control must be caught by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rule {
    /// No acquisition while its client could not reach a majority ([`acquisitions_within`]).
    Majority,
    /// No two holders inside their validity at once ([`overlaps`]; of a read-write lock, its
    /// writers).
    Overlaps,
    /// No witness increment lost ([`lost_updates`]).
    LostUpdates,
    /// No lock key outlives its TTL ([`leaks`]).
    LeakedKeys,
    /// No more holders of a semaphore than its permits ([`too_many_holders`]).
    SemaphoreExcess,
    /// No read inside a write ([`reader_writer_overlaps`]).
    ReaderWriter,
}

impl Rule {
    /// Its name in reports (`overlaps`, `lost updates`, `semaphore excess`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Rule::Majority => "majority",
            Rule::Overlaps => "overlaps",
            Rule::LostUpdates => "lost updates",
            Rule::LeakedKeys => "leaked keys",
            Rule::SemaphoreExcess => "semaphore excess",
            Rule::ReaderWriter => "reader-writer",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Two holders of one resource whose safe intervals overlap: a mutual-exclusion violation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The resource both held.
    pub resource: String,
    /// The holder that acquired first.
    pub first: LockRecord,
    /// The holder that acquired while `first` was still safe.
    pub second: LockRecord,
    /// How long both were safe at once.
    pub overlap: Duration,
}

/// Each resource's non-empty safe intervals `(start, end, record)`, sorted by start, end and client:
/// what every sweep below walks. An empty interval overlaps nothing and holds nothing.
fn safe_intervals(records: &[LockRecord]) -> BTreeMap<&str, Vec<(Duration, Duration, &LockRecord)>> {
    let mut by_resource: BTreeMap<&str, Vec<(Duration, Duration, &LockRecord)>> = BTreeMap::new();
    for record in records {
        if let Some((start, end)) = record.safe_interval().filter(|(start, end)| end > start) {
            by_resource
                .entry(record.resource.as_str())
                .or_default()
                .push((start, end, record));
        }
    }
    for intervals in by_resource.values_mut() {
        intervals.sort_by_key(|&(start, end, r)| (start, end, r.client));
    }
    by_resource
}

/// Every pair of records of the same resource whose safe intervals
/// `[acquired, min(released, validity_end)]` overlap. Touching endpoints do not overlap.
pub fn overlaps(records: &[LockRecord]) -> Vec<Overlap> {
    let mut found = Vec::new();
    for (resource, intervals) in safe_intervals(records) {
        // Sweep: `open` holds intervals that may still overlap later starts.
        let mut open: Vec<(Duration, Duration, &LockRecord)> = Vec::new();
        for (start, end, record) in intervals {
            open.retain(|&(_, open_end, _)| open_end > start);
            for &(open_start, open_end, earlier) in &open {
                let overlap = open_end.min(end).saturating_sub(start.max(open_start));
                if overlap > Duration::ZERO {
                    found.push(Overlap {
                        resource: resource.to_string(),
                        first: earlier.clone(),
                        second: record.clone(),
                        overlap,
                    });
                }
            }
            open.push((start, end, record));
        }
    }
    found
}

/// Successful acquisitions that were both invoked and completed inside one of `windows`
/// (e.g. while a majority of masters was down, when none may succeed).
pub fn acquisitions_within(records: &[LockRecord], windows: &[(Duration, Duration)]) -> Vec<LockRecord> {
    records
        .iter()
        .filter(|r| {
            r.acquired.is_some_and(|acquired| {
                windows
                    .iter()
                    .any(|&(start, end)| r.invoked >= start && acquired <= end)
            })
        })
        .cloned()
        .collect()
}

/// How many successful acquisitions ran while a fault was active: the record's span from
/// invocation to the end of its hold (release, else validity end, else `run_end`) meets a
/// window. Touching endpoints count, so instantaneous faults (a clock jump) are not missed.
pub fn acquisitions_during(records: &[LockRecord], windows: &[FaultWindow], run_end: Duration) -> usize {
    records
        .iter()
        .filter(|r| r.acquired.is_some())
        .filter(|r| {
            let end = r.released.or(r.validity_end).unwrap_or(run_end).max(r.invoked);
            windows.iter().any(|w| r.invoked <= w.end && w.start <= end)
        })
        .count()
}

/// The read-modify-write witness: increments done under the lock versus the counter's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostUpdates {
    /// Increments clients completed under the lock.
    pub expected: u64,
    /// The counter's final value.
    pub actual: u64,
    /// `expected - actual`: increments overwritten by a concurrent holder.
    pub lost: u64,
    /// `actual - expected`: writes not accounted for (e.g. a write landed after its client
    /// saw an error); not a mutual-exclusion violation by itself.
    pub unaccounted: u64,
}

/// Compares the witness counter with the increments clients believe they made.
pub fn lost_updates(expected: u64, actual: u64) -> LostUpdates {
    LostUpdates {
        expected,
        actual,
        lost: expected.saturating_sub(actual),
        unaccounted: actual.saturating_sub(expected),
    }
}

/// Whether clients made progress when they should have.
#[derive(Debug, Clone, PartialEq)]
pub struct Liveness {
    /// Attempts invoked while a majority was up.
    pub attempts: usize,
    /// Of those, how many acquired.
    pub successes: usize,
    /// `successes / attempts` (1.0 when there were no attempts).
    pub success_rate: f64,
    /// For each heal time, how long until the next successful acquisition (`None`: never).
    pub recovery: Vec<(Duration, Option<Duration>)>,
}

/// Success rate of attempts invoked inside `majority_up` windows, and time to the first
/// success after each of `heals`.
pub fn liveness(
    records: &[LockRecord],
    majority_up: &[(Duration, Duration)],
    heals: &[Duration],
) -> Liveness {
    let in_windows: Vec<&LockRecord> = records
        .iter()
        .filter(|r| {
            majority_up
                .iter()
                .any(|&(start, end)| r.invoked >= start && r.invoked <= end)
        })
        .collect();
    let attempts = in_windows.len();
    let successes = in_windows.iter().filter(|r| r.acquired.is_some()).count();
    let success_rate = if attempts == 0 {
        1.0
    } else {
        successes as f64 / attempts as f64
    };
    let recovery = heals
        .iter()
        .map(|&heal| {
            let first = records
                .iter()
                .filter_map(|r| r.acquired)
                .filter(|&acquired| acquired >= heal)
                .min();
            (heal, first.map(|acquired| acquired - heal))
        })
        .collect();
    Liveness {
        attempts,
        successes,
        success_rate,
        recovery,
    }
}

/// Pairs of records of one resource that were handed the same fencing token.
pub fn duplicate_fencing_tokens(records: &[LockRecord]) -> Vec<(LockRecord, LockRecord)> {
    let mut seen: BTreeMap<(&str, u64), &LockRecord> = BTreeMap::new();
    let mut found = Vec::new();
    for record in records.iter().filter(|r| r.acquired.is_some()) {
        if let Some(token) = record.fencing {
            match seen.get(&(record.resource.as_str(), token)) {
                Some(first) => found.push(((*first).clone(), record.clone())),
                None => {
                    seen.insert((record.resource.as_str(), token), record);
                }
            }
        }
    }
    found
}

/// A lock key seen on a master after the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyObservation {
    /// Master index.
    pub master: usize,
    /// The key.
    pub key: String,
    /// Its `PTTL` in milliseconds (-1: no expiry).
    pub pttl_ms: i64,
    /// When it was observed.
    pub observed_at: Duration,
}

/// Keys still present more than `ttl` after every client finished, or with no expiry at all. A
/// plain lock's hand-off queue outlives a leave lost to a fault by design, for at most its
/// `QUEUE_LIFE`: no leak while its deadline is within that.
pub fn leaks(
    observations: &[KeyObservation],
    clients_finished: Duration,
    ttl: Duration,
) -> Vec<KeyObservation> {
    let life = i64::try_from(quorlock::config::QUEUE_LIFE.as_millis()).unwrap_or(i64::MAX);
    observations
        .iter()
        .filter(|o| !(o.key.ends_with(quorlock::config::WAITERS_SUFFIX) && (0..=life).contains(&o.pttl_ms)))
        .filter(|o| o.pttl_ms == -1 || o.observed_at > clients_finished + ttl)
        .cloned()
        .collect()
}

/// A moment when more holders of one semaphore were safe at once than it has permits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excess {
    /// The semaphore.
    pub resource: String,
    /// When the excess began: the acquisition that brought the holders above the permits.
    pub at: Duration,
    /// Every holder safe at that moment (more than the permits).
    pub holders: Vec<LockRecord>,
}

/// Every moment a semaphore of `permits` permits had more holders whose safe intervals
/// `[acquired, min(released, validity_end)]` contain it. Touching endpoints do not overlap.
pub fn too_many_holders(records: &[LockRecord], permits: usize) -> Vec<Excess> {
    let mut found = Vec::new();
    for (resource, intervals) in safe_intervals(records) {
        let mut open: Vec<(Duration, Duration, &LockRecord)> = Vec::new();
        for (start, end, record) in intervals {
            open.retain(|&(_, open_end, _)| open_end > start);
            open.push((start, end, record));
            if open.len() > permits {
                found.push(Excess {
                    resource: resource.to_string(),
                    at: start,
                    holders: open.iter().map(|&(_, _, r)| r.clone()).collect(),
                });
            }
        }
    }
    found
}

/// Every reader whose safe interval overlaps a writer's on the same resource, as an [`Overlap`]
/// with the writer `first` (two writers overlapping each other are [`overlaps`] of `writers`).
pub fn reader_writer_overlaps(readers: &[LockRecord], writers: &[LockRecord]) -> Vec<Overlap> {
    let mut found = Vec::new();
    for writer in writers {
        let Some((w_start, w_end)) = writer.safe_interval() else {
            continue;
        };
        for reader in readers.iter().filter(|r| r.resource == writer.resource) {
            let Some((r_start, r_end)) = reader.safe_interval() else {
                continue;
            };
            let overlap = w_end.min(r_end).saturating_sub(w_start.max(r_start));
            if overlap > Duration::ZERO {
                found.push(Overlap {
                    resource: writer.resource.clone(),
                    first: writer.clone(),
                    second: reader.clone(),
                    overlap,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn held(
        client: usize,
        resource: &str,
        acquired: u64,
        validity_end: u64,
        released: Option<u64>,
    ) -> LockRecord {
        let mut r = LockRecord::invoked(client, resource, ms(acquired.saturating_sub(1)));
        r.token = format!("t{client}-{acquired}");
        r.acquired = Some(ms(acquired));
        r.validity_end = Some(ms(validity_end));
        r.released = released.map(ms);
        r
    }

    fn failed(client: usize, resource: &str, invoked: u64) -> LockRecord {
        let mut r = LockRecord::invoked(client, resource, ms(invoked));
        r.error = Some("no quorum".into());
        r
    }

    #[test]
    fn disjoint_holds_are_not_violations() {
        let records = vec![
            held(0, "a", 0, 100, Some(50)),
            held(1, "a", 50, 150, Some(120)), // touches the previous release
            held(2, "a", 130, 200, None),
            held(3, "b", 10, 90, Some(80)), // other resource
            failed(4, "a", 60),
        ];
        assert!(overlaps(&records).is_empty());
    }

    #[test]
    fn overlapping_holds_are_reported_with_both_records() {
        let first = held(0, "a", 0, 100, Some(80));
        let second = held(1, "a", 60, 160, Some(100));
        let found = overlaps(&[second.clone(), first.clone()]);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].resource, "a");
        assert_eq!(found[0].first, first);
        assert_eq!(found[0].second, second);
        assert_eq!(found[0].overlap, ms(20));
    }

    #[test]
    fn a_hold_past_validity_only_counts_until_validity_end() {
        // Holder 0 kept working until 200 but was only safe until 100; holder 1 from 100 on
        // is fine: the lock expired, which is holder 0's problem, not a lock violation.
        let records = vec![held(0, "a", 0, 100, Some(200)), held(1, "a", 100, 300, Some(250))];
        assert!(overlaps(&records).is_empty());
    }

    #[test]
    fn every_violating_pair_is_reported() {
        let records = vec![
            held(0, "a", 0, 100, None),
            held(1, "a", 10, 50, Some(40)),
            held(2, "a", 20, 30, Some(30)),
        ];
        let found = overlaps(&records);
        let pairs: Vec<(usize, usize)> = found.iter().map(|o| (o.first.client, o.second.client)).collect();
        assert_eq!(pairs, vec![(0, 1), (0, 2), (1, 2)]);
    }

    #[test]
    fn a_hold_without_any_end_overlaps_everything_after_it() {
        let mut never = held(0, "a", 0, 0, None);
        never.validity_end = None;
        let found = overlaps(&[never, held(1, "a", 5000, 6000, Some(5500))]);
        assert_eq!(found.len(), 1);
    }

    #[test]
    fn acquisitions_inside_a_no_majority_window_are_reported() {
        let inside = held(0, "a", 150, 400, Some(200));
        let records = vec![
            held(1, "a", 50, 120, Some(90)), // before the window
            inside.clone(),
            held(2, "a", 350, 600, Some(400)), // after the window
            failed(3, "a", 160),
        ];
        assert_eq!(acquisitions_within(&records, &[(ms(100), ms(300))]), vec![inside]);
        assert!(acquisitions_within(&records, &[(ms(1000), ms(2000))]).is_empty());
    }

    #[test]
    fn lost_updates_are_expected_minus_actual() {
        assert_eq!(
            lost_updates(10, 7),
            LostUpdates {
                expected: 10,
                actual: 7,
                lost: 3,
                unaccounted: 0
            }
        );
        assert_eq!(lost_updates(5, 6).lost, 0);
        assert_eq!(lost_updates(5, 6).unaccounted, 1);
    }

    #[test]
    fn acquisitions_during_faults_count_spans_meeting_a_window() {
        let window = FaultWindow {
            start: Duration::from_millis(100),
            end: Duration::from_millis(200),
            label: "kill m0".into(),
        };
        let held = |from: u64, to: u64| {
            let mut r = LockRecord::invoked(0, "r0", Duration::from_millis(from));
            r.acquired = Some(Duration::from_millis(from + 1));
            r.released = Some(Duration::from_millis(to));
            r
        };
        let failed = LockRecord::invoked(1, "r0", Duration::from_millis(150));
        let records = vec![
            held(0, 50),    // before
            held(50, 120),  // runs into the window
            held(150, 160), // inside
            held(190, 300), // starts inside
            held(201, 300), // after
            failed,         // never acquired
        ];
        let end = Duration::from_secs(1);
        assert_eq!(
            acquisitions_during(&records, std::slice::from_ref(&window), end),
            3
        );
        assert_eq!(acquisitions_during(&records, &[], end), 0);
        let instant = FaultWindow {
            start: Duration::from_millis(20),
            end: Duration::from_millis(20),
            label: "clock m1 +4000ms".into(),
        };
        assert_eq!(acquisitions_during(&records, &[instant], end), 1);
    }

    #[test]
    fn liveness_counts_attempts_in_majority_windows_and_recovery_after_heals() {
        let records = vec![
            held(0, "a", 10, 100, Some(20)),
            failed(1, "a", 30),
            failed(2, "a", 150), // outside the windows
            held(3, "a", 260, 400, Some(300)),
        ];
        let live = liveness(
            &records,
            &[(ms(0), ms(100)), (ms(250), ms(500))],
            &[ms(250), ms(900)],
        );
        assert_eq!(live.attempts, 3);
        assert_eq!(live.successes, 2);
        assert!((live.success_rate - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(live.recovery, vec![(ms(250), Some(ms(10))), (ms(900), None)]);
        assert_eq!(liveness(&[], &[], &[]).success_rate, 1.0);
    }

    #[test]
    fn reused_fencing_tokens_are_reported() {
        let mut a = held(0, "a", 0, 10, Some(5));
        a.fencing = Some(7);
        let mut b = held(1, "a", 20, 30, Some(25));
        b.fencing = Some(7);
        let mut c = held(2, "b", 20, 30, Some(25));
        c.fencing = Some(7);
        let found = duplicate_fencing_tokens(&[a.clone(), b.clone(), c]);
        assert_eq!(found, vec![(a, b)]);
    }

    #[test]
    fn keys_beyond_ttl_or_without_expiry_are_leaks() {
        let obs = |key: &str, pttl_ms, at| KeyObservation {
            master: 0,
            key: key.into(),
            pttl_ms,
            observed_at: ms(at),
        };
        let observations = vec![
            obs("fresh", 500, 1200),  // observed within TTL of the end: fine
            obs("stale", 500, 2500),  // should have expired
            obs("forever", -1, 1100), // no expiry at all
            // A hand-off queue within its life is none; one without a deadline, or beyond it, is.
            obs("k:quorlock:waiters", 90_000, 2500),
            obs("q:quorlock:waiters", -1, 2500),
            obs("r:quorlock:waiters", 500_000, 2500),
        ];
        let found = leaks(&observations, ms(1000), ms(1000));
        let keys: Vec<&str> = found.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(
            keys,
            vec!["stale", "forever", "q:quorlock:waiters", "r:quorlock:waiters"]
        );
    }

    #[test]
    fn more_holders_than_permits_are_reported_once_per_excess() {
        let records = vec![
            held(0, "s", 0, 100, Some(50)),
            held(1, "s", 10, 100, Some(60)),
            held(2, "s", 50, 100, Some(90)), // starts as 0 ends: touching, still 2
            held(3, "s", 55, 100, Some(70)), // 1, 2 and 3 at once: one too many
            held(4, "t", 0, 100, Some(90)),
            failed(5, "s", 20),
        ];
        assert!(too_many_holders(&records, 3).is_empty());
        let found = too_many_holders(&records, 2);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].at, ms(55));
        let clients: Vec<usize> = found[0].holders.iter().map(|r| r.client).collect();
        assert_eq!(clients, vec![1, 2, 3]);
    }

    #[test]
    fn a_reader_inside_a_writers_hold_is_reported() {
        let writers = vec![held(0, "rw", 100, 300, Some(200))];
        let readers = vec![
            held(1, "rw", 0, 300, Some(100)),   // ends as the writer starts: fine
            held(2, "rw", 150, 300, Some(250)), // overlaps the writer by 50 ms
            held(3, "other", 150, 300, Some(250)),
            failed(4, "rw", 150),
        ];
        let found = reader_writer_overlaps(&readers, &writers);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].second.client, found[0].overlap), (2, ms(50)));
    }
}
