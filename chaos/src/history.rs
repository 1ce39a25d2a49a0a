//! The record of a chaos run: every lock operation and every injected fault, stamped on one
//! shared monotonic clock, so the checker and the SVG timeline can reason about who held
//! what, when, independently of how the run was driven.
//!
//! [`LockRecord`] is the one record of a lock operation: the checker, the reports, the timeline
//! and the simulation's checks all read it. Its serde form is what a client container writes
//! (`compose::wire`); the JSON report writes it through a view of its own (times in
//! milliseconds).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// A monotonic clock shared by every client of a run; times are offsets from the run start.
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    start: Instant,
}

impl RunClock {
    /// A clock whose zero is now.
    pub fn new() -> RunClock {
        RunClock {
            start: Instant::now(),
        }
    }

    /// A clock whose zero is `start`.
    pub fn starting_at(start: Instant) -> RunClock {
        RunClock { start }
    }

    /// The instant of offset zero.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// Time since the run start.
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Offset of `instant` from the run start (zero if it is earlier).
    pub fn offset(&self, instant: Instant) -> Duration {
        instant.saturating_duration_since(self.start)
    }
}

impl Default for RunClock {
    fn default() -> Self {
        RunClock::new()
    }
}

/// One lock operation by one client: an acquire attempt and, if it succeeded, the hold.
///
/// Its serde form (a client container's `record` line) writes the times as whole microseconds
/// from the run start, each field named with a `_us` suffix (`invoked_us`, `acquired_us`, ...).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRecord {
    /// Client id within the run.
    pub client: usize,
    /// The locked resource (a multi-resource hold: its resources joined by commas).
    pub resource: String,
    /// The lock token (empty if the attempt produced none).
    pub token: String,
    /// When `acquire` was called.
    #[serde(rename = "invoked_us", with = "micros")]
    pub invoked: Duration,
    /// When `acquire` returned success; `None` for a failed attempt.
    #[serde(rename = "acquired_us", with = "micros::option", default)]
    pub acquired: Option<Duration>,
    /// End of the validity the lock library reported (`valid_until`); set with `acquired`.
    #[serde(rename = "validity_end_us", with = "micros::option", default)]
    pub validity_end: Option<Duration>,
    /// When the holder released: it acts no more after this (the release itself may take
    /// longer); `None` if it never released.
    #[serde(rename = "released_us", with = "micros::option", default)]
    pub released: Option<Duration>,
    /// Fencing token, when the library provides one.
    pub fencing: Option<u64>,
    /// Why the attempt failed (error text), if it did.
    pub error: Option<String>,
}

/// A record's times in its serde form: whole microseconds (a longer time than `u64::MAX`
/// microseconds is written as `u64::MAX`).
mod micros {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    fn us(d: Duration) -> u64 {
        u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
    }

    pub(super) fn serialize<S: Serializer>(d: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(us(*d))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_micros)
    }

    /// The same, for a time that may be absent (`null`).
    pub(super) mod option {
        use std::time::Duration;

        use serde::{Deserialize, Deserializer, Serializer};

        pub(in crate::history) fn serialize<S: Serializer>(
            d: &Option<Duration>,
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => serializer.serialize_some(&super::us(*d)),
                None => serializer.serialize_none(),
            }
        }

        pub(in crate::history) fn deserialize<'de, D: Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Option<Duration>, D::Error> {
            Ok(Option::<u64>::deserialize(deserializer)?.map(Duration::from_micros))
        }
    }
}

impl LockRecord {
    /// A record of an attempt that has only been invoked so far.
    pub fn invoked(client: usize, resource: impl Into<String>, invoked: Duration) -> LockRecord {
        LockRecord {
            client,
            resource: resource.into(),
            token: String::new(),
            invoked,
            acquired: None,
            validity_end: None,
            released: None,
            fencing: None,
            error: None,
        }
    }

    /// The interval in which the holder may safely act: `[acquired, min(released,
    /// validity_end)]`. `None` for failed attempts. A hold with no known end extends
    /// forever, so the checker treats it conservatively.
    pub fn safe_interval(&self) -> Option<(Duration, Duration)> {
        let acquired = self.acquired?;
        let end = match (self.released, self.validity_end) {
            (Some(r), Some(v)) => r.min(v),
            (Some(r), None) => r,
            (None, Some(v)) => v,
            (None, None) => Duration::MAX,
        };
        Some((acquired, end.max(acquired)))
    }
}

/// A fault that was active during `[start, end]`, for reports and the timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultWindow {
    /// When the fault was injected.
    pub start: Duration,
    /// When it was healed (the run end if never).
    pub end: Duration,
    /// Human-readable label, e.g. `"kill m1"`.
    pub label: String,
}

/// A thread-safe, append-only log of a run's lock records and fault windows.
#[derive(Debug, Clone, Default)]
pub struct History {
    clock: RunClock,
    inner: Arc<Mutex<Log>>,
}

#[derive(Debug, Default)]
struct Log {
    records: Vec<LockRecord>,
    faults: Vec<FaultWindow>,
}

impl History {
    /// An empty history on `clock`.
    pub fn new(clock: RunClock) -> History {
        History {
            clock,
            inner: Arc::default(),
        }
    }

    /// The run's clock.
    pub fn clock(&self) -> RunClock {
        self.clock
    }

    /// Appends a finished lock record.
    pub fn push(&self, record: LockRecord) {
        self.lock().records.push(record);
    }

    /// Appends a fault window.
    pub fn push_fault(&self, fault: FaultWindow) {
        self.lock().faults.push(fault);
    }

    /// A copy of all lock records so far.
    pub fn records(&self) -> Vec<LockRecord> {
        self.lock().records.clone()
    }

    /// A copy of all fault windows so far.
    pub fn faults(&self) -> Vec<FaultWindow> {
        self.lock().faults.clone()
    }

    /// Lock attempts recorded so far and how many of them acquired (cheap: no copy).
    pub fn counts(&self) -> (usize, usize) {
        let log = self.lock();
        let acquired = log.records.iter().filter(|r| r.acquired.is_some()).count();
        (log.records.len(), acquired)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Log> {
        // A panicking client must not hide the rest of the history.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn safe_interval_ends_at_the_earlier_of_release_and_validity() {
        let mut r = LockRecord::invoked(0, "a", ms(0));
        assert_eq!(r.safe_interval(), None);
        r.acquired = Some(ms(10));
        r.validity_end = Some(ms(100));
        assert_eq!(r.safe_interval(), Some((ms(10), ms(100))));
        r.released = Some(ms(50));
        assert_eq!(r.safe_interval(), Some((ms(10), ms(50))));
        r.released = Some(ms(150));
        assert_eq!(r.safe_interval(), Some((ms(10), ms(100))));
        r.validity_end = None;
        r.released = None;
        assert_eq!(r.safe_interval(), Some((ms(10), Duration::MAX)));
    }

    #[test]
    fn history_clones_share_one_log() {
        let h = History::new(RunClock::new());
        let h2 = h.clone();
        h2.push(LockRecord::invoked(1, "r", ms(1)));
        h.push_fault(FaultWindow {
            start: ms(1),
            end: ms(2),
            label: "kill m0".into(),
        });
        assert_eq!(h.records().len(), 1);
        assert_eq!(h2.faults().len(), 1);
        assert!(h.clock().now() < Duration::from_secs(3600));
    }

    #[test]
    fn clock_offsets_saturate_before_the_start() {
        let start = Instant::now();
        let clock = RunClock::starting_at(start + ms(1000));
        assert_eq!(clock.offset(start), Duration::ZERO);
        assert_eq!(clock.offset(start + ms(1500)), ms(500));
    }
}
