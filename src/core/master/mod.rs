//! What the client believes about each master, as one pure state machine: its identity and the
//! changes of it, its durability over time, whether it may evict keys, its replicas, the grace
//! window its votes wait out, and its fencing state. It is fed what a master reports at each check
//! (`INFO`, `CONFIG GET appendfsync`), the record the master keeps about itself ([`record`]),
//! connection events and `now`; it decides whether a vote counts, whether and how the fencing
//! counter must be repaired, and what deserves a warning. The IO files only gather the reports and
//! act on the decisions.
//!
//! A report can be wrong about the past (a replacement behind the same address reports its own
//! uptime and persistence; a master downgraded at runtime and restarted reports its configuration
//! file), so a decision rests on what survives the change and what every client can read: the
//! record on the master, whose first sighting of each incarnation starts its grace, for a client
//! started after the change as for one that watched it. The restart grace read from the reported
//! uptime, as the RedLock spec's delayed restart, stays as a floor beneath it.

pub mod record;

#[cfg(test)]
mod model;

use std::time::{Duration, Instant};

use crate::base::error::NodeErrorKind;

use super::admission::latest_start;
use super::timing::drift;
use record::Record;

/// A master's memory limit and what it does when it reaches it (from `INFO memory`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memory {
    /// `maxmemory` in bytes; 0 for no limit.
    pub maxmemory: u64,
    /// `maxmemory-policy`, if reported.
    pub policy: Option<String>,
    /// How many keys it has evicted since it started (`evicted_keys`).
    pub evicted_keys: u64,
}

impl Memory {
    /// The policy when the master may evict keys: a memory limit and any policy but
    /// `noeviction`. Every lock key carries a TTL (the `volatile-*` policies pick exactly those),
    /// and the `allkeys-*` ones may take the fencing counters and the master's record as well.
    pub fn evicting(&self) -> Option<&str> {
        let policy = self.policy.as_deref().unwrap_or("noeviction");
        (self.maxmemory > 0 && !policy.eq_ignore_ascii_case("noeviction")).then_some(policy)
    }
}

/// What one check of a master read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Its `run_id`, new at every start.
    pub run_id: String,
    /// How long it has been up, in whole seconds, as it says.
    pub uptime_secs: u64,
    /// Whether the AOF is on.
    pub aof_enabled: bool,
    /// Its `appendfsync` policy, or why it could not be read (`CONFIG` disabled).
    pub appendfsync: Result<String, String>,
    /// How many replicas are attached to it.
    pub replicas: u64,
    /// Whether it inherited another server's replication history: promoted from a replica.
    pub promoted: bool,
    /// Its memory limit and policy.
    pub memory: Memory,
}

impl Report {
    /// Whether every acknowledged write is on disk before it is acknowledged: `Some(false)` when
    /// known not to be, `None` when the policy could not be read.
    pub fn durable(&self) -> Option<bool> {
        if !self.aof_enabled {
            return Some(false);
        }
        match &self.appendfsync {
            Ok(policy) => Some(policy.eq_ignore_ascii_case("always")),
            Err(_) => None,
        }
    }
}

/// What a client's checks of a master noticed that deserves a warning, once per change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Its `run_id` changed: restarted, or another server answers at its address.
    Restarted {
        /// Whether its record shows that it may lack acknowledged writes.
        lost: bool,
    },
    /// It has no record while others have one: a new server at its address, or it lost its data.
    RecordMissing,
    /// Its persistence is not (or is no longer) `appendfsync always`; `None` when unreadable.
    Persistence(Option<bool>),
    /// Its `appendfsync` policy could not be read (`CONFIG` disabled), with the reason.
    ConfigUnreadable(String),
    /// It may evict keys (`Some(policy)`), or no longer may (`None`).
    Eviction(Option<String>),
    /// It evicted keys since the last check: this many more.
    KeysEvicted(u64),
    /// Replicas attached to it: this many (0 when they went away).
    Replicas(u64),
}

/// What applies when a vote arrives: the client's rules.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rules {
    /// Whether votes of masters that may have lost data are ignored for the grace.
    pub enforce: bool,
    /// Whether votes of masters that may evict keys are refused.
    pub refuse_evicting: bool,
    /// The grace: the longest TTL any client uses, as this client knows it.
    pub grace: Duration,
    /// The drift allowance's factor, applied to the grace counted across the master's clock.
    pub drift_factor: f64,
}

/// A master's record as a check last read or wrote it, with the master's clock and ours then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    /// The record.
    pub record: Record,
    /// The master's clock when it was read, in ms.
    pub master_ms: u64,
    /// Our clock when the reply arrived (never before the master read its clock).
    pub at: Instant,
}

/// Everything the client believes about one master.
#[derive(Debug, Clone, Default)]
pub struct Belief {
    /// Its `run_id`, as last read.
    pub run_id: Option<String>,
    /// When it (re)started as late as its reported uptime allows, on our clock.
    pub started: Option<Instant>,
    /// Whether it persists every write now, as last reported.
    pub durable: Option<bool>,
    /// Its record for the current `run_id`, as last seen.
    pub sighting: Option<Sighting>,
    /// The policy when it may evict keys.
    pub evicting: Option<String>,
    /// Its eviction count at the last check.
    evicted_keys: Option<u64>,
    /// Its replicas at the last check.
    replicas: Option<u64>,
    /// Whether its `appendfsync` could be read at the last check.
    config_readable: Option<bool>,
    /// The connection's disconnect count when the identity was last read on it.
    pub verified_at: Option<u64>,
    /// The fencing state.
    pub fence: Fence,
}

/// What the client knows about a master's fencing counter.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fence {
    /// The highest counter this client has seen on it (in its current incarnation).
    pub floor: u64,
    /// Whether its counter must be repaired before its fenced votes count.
    pub repair: bool,
    /// Whether that repair must treat the counter as possibly behind, rather than only stamp a
    /// new epoch.
    pub full: bool,
    /// Whether every reason for the repair is one that another client's repair answers: the
    /// counter was absent, or the master restarted (see `core::fencing::set_up_elsewhere`).
    pub vouchable: bool,
}

impl Belief {
    /// Takes in a check: what the master reported, the record it has now (after this client's
    /// write, if it made one) with its clock then and ours when the reply came, and whether the
    /// check found no record at all. `verified` says that no reconnect interleaved with the check,
    /// so it vouches for the connection whose disconnect count is `disconnects`. Returns what
    /// changed, for warnings (at the first check, what is worth a warning at all).
    pub fn checked(
        &mut self,
        report: &Report,
        sighting: Option<Sighting>,
        found_none: bool,
        verified: bool,
        disconnects: u64,
    ) -> Vec<Change> {
        let first = self.run_id.is_none();
        let restarted = self
            .run_id
            .as_ref()
            .is_some_and(|previous| *previous != report.run_id);
        let mut changes = Vec::new();
        let lost = sighting.as_ref().is_none_or(|s| s.record.lost);
        if restarted {
            changes.push(Change::Restarted { lost });
            // A new incarnation: what was seen of the old one's counter says nothing about the
            // new one, which only a repair under the new run_id vouches for.
            self.fence.repair |= lost;
            self.fence.full |= lost;
            self.fence.vouchable = true;
            self.fence.floor = 0;
        } else if found_none && lost {
            changes.push(Change::RecordMissing);
        }
        self.run_id = Some(report.run_id.clone());
        if let Some(s) = &sighting {
            self.started = latest_start(s.at, report.uptime_secs);
        }
        self.sighting = sighting.filter(|s| s.record.run_id == report.run_id);
        let durable = report.durable();
        if (first || self.durable != durable) && durable != Some(true) {
            changes.push(Change::Persistence(durable));
        }
        self.durable = durable;
        let readable = report.appendfsync.is_ok();
        if first || self.config_readable != Some(readable) {
            if let Err(reason) = &report.appendfsync {
                changes.push(Change::ConfigUnreadable(reason.clone()));
            }
        }
        self.config_readable = Some(readable);
        let evicting = report.memory.evicting().map(str::to_owned);
        if (first && evicting.is_some()) || (!first && self.evicting != evicting) {
            changes.push(Change::Eviction(evicting.clone()));
        }
        self.evicting = evicting;
        let evicted = report.memory.evicted_keys;
        if let Some(before) = self.evicted_keys.filter(|_| !restarted) {
            if evicted > before {
                changes.push(Change::KeysEvicted(evicted - before));
            }
        }
        self.evicted_keys = Some(evicted);
        if (first && report.replicas > 0) || (!first && self.replicas != Some(report.replicas)) {
            changes.push(Change::Replicas(report.replicas));
        }
        self.replicas = Some(report.replicas);
        if verified {
            self.verified_at = Some(disconnects);
        }
        changes
    }

    /// How many replicas were attached at the last check.
    pub fn replicas(&self) -> Option<u64> {
        self.replicas
    }

    /// Whether the current connection (whose disconnect count is `disconnects`) was vouched for
    /// by a check.
    pub fn verified(&self, disconnects: u64) -> bool {
        self.verified_at == Some(disconnects)
    }

    /// When the grace that its record asks for ends, on our clock: `None` when its record says
    /// it lacks nothing (or there is no record yet).
    fn record_grace_ends(&self, rules: &Rules) -> Option<Instant> {
        let s = self.sighting.as_ref()?;
        let grace_ms = u64::try_from(rules.grace.as_millis()).unwrap_or(u64::MAX);
        if !s.record.lost {
            return None;
        }
        let left = Duration::from_millis(record::remaining_ms(&s.record, s.master_ms, grace_ms));
        // The part of the grace still to run is counted on our clock; our clock may run slower
        // than the master's by the drift allowance.
        let slack = drift(left, rules.drift_factor).unwrap_or(Duration::ZERO);
        Some(s.at.checked_add(left.saturating_add(slack)).unwrap_or(s.at))
    }

    /// When its record's incarnation was first sighted, on our clock.
    fn first_sighted(&self) -> Option<Instant> {
        let s = self.sighting.as_ref()?;
        let ago = Duration::from_millis(s.master_ms.saturating_sub(s.record.since_ms));
        Some(s.at.checked_sub(ago).unwrap_or(s.at))
    }

    /// Whether a yes from this master, over the connection whose disconnect count is
    /// `disconnects`, may count at `now`.
    ///
    /// # Errors
    /// [`NodeErrorKind::Unverified`] when the connection was not vouched for by a check (its
    /// record included), [`NodeErrorKind::Evicting`] when it may evict keys and such masters are
    /// refused, [`NodeErrorKind::Replaced`] within the grace after an incarnation that may lack
    /// writes was first seen, [`NodeErrorKind::Restarted`] within the grace after a restart (by
    /// its reported uptime) when it does not persist every write.
    pub fn admit(&self, rules: &Rules, now: Instant, disconnects: u64) -> Result<(), NodeErrorKind> {
        if !rules.enforce {
            return Ok(());
        }
        if !self.verified(disconnects) || self.sighting.is_none() {
            return Err(NodeErrorKind::Unverified);
        }
        if rules.refuse_evicting {
            if let Some(policy) = &self.evicting {
                return Err(NodeErrorKind::Evicting {
                    policy: policy.clone(),
                });
            }
        }
        if let Some(ends) = self.record_grace_ends(rules) {
            if now < ends {
                let seen = self
                    .first_sighted()
                    .map_or(Duration::ZERO, |t| now.saturating_duration_since(t));
                return Err(NodeErrorKind::Replaced {
                    seen,
                    remaining: ends - now,
                });
            }
        }
        if self.durable == Some(true) {
            return Ok(());
        }
        if let Some(started) = self.started {
            let uptime = now.saturating_duration_since(started);
            if uptime < rules.grace {
                return Err(NodeErrorKind::Restarted {
                    uptime,
                    remaining: rules.grace - uptime,
                });
            }
        }
        Ok(())
    }

    /// Whether its record shows that its current incarnation lacks nothing it acknowledged: a
    /// durable restart (or a fresh deployment). Judged from the record, never from the report.
    pub fn intact(&self) -> bool {
        self.sighting.as_ref().is_some_and(|s| !s.record.lost)
    }

    /// Marks its fencing epoch as stale (it restarted since its counter was vouched for): a full
    /// repair unless its record shows it lost nothing.
    pub fn fence_epoch_stale(&mut self) {
        self.fence.repair = true;
        // The epoch was never stamped in this incarnation, and a grant needs it to match, so
        // every counter this client saw from the master was an older one's.
        self.fence.vouchable = true;
        self.fence.floor = 0;
        if !self.intact() {
            self.fence.full = true;
        }
    }

    /// Marks its fencing counter as behind what this client saw: a full repair of its own.
    pub fn fence_behind(&mut self) {
        self.fence.repair = true;
        self.fence.full = true;
        self.fence.vouchable = false;
    }

    /// Marks its fencing counter as absent: a full repair, unless another client sets it up
    /// meanwhile.
    pub fn fence_absent(&mut self) {
        if !self.fence.repair {
            self.fence.vouchable = true;
        }
        self.fence.repair = true;
        self.fence.full = true;
    }

    /// Whether its pending repair only has to stamp a new epoch: its record shows it lost nothing,
    /// so no grace is needed.
    pub fn fence_repair_light(&self) -> bool {
        self.fence.repair && !self.fence.full && self.intact()
    }

    /// Whether its counter may be repaired at `now`: a light repair at once; else once the grace
    /// has passed since both its start (by its uptime) and the first sighting of its incarnation,
    /// so that no acquisition can still count an acknowledgement it gave before it lost data.
    pub fn fence_repair_due(&self, rules: &Rules, now: Instant) -> bool {
        if self.fence_repair_light() {
            return true;
        }
        let Some(started) = self.started else {
            return false;
        };
        let from = self.first_sighted().map_or(started, |seen| seen.max(started));
        super::fencing::repair_due(from, rules.grace, now)
    }

    /// Records that its counter was repaired to `value`, which becomes the floor.
    pub fn fence_repaired(&mut self, value: u64) {
        self.fence = Fence {
            floor: value,
            ..Fence::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::record::{next, Missing, Seen};
    use super::*;

    fn report(run_id: &str, appendfsync: &str) -> Report {
        Report {
            run_id: run_id.into(),
            uptime_secs: 100_000,
            aof_enabled: true,
            appendfsync: Ok(appendfsync.into()),
            replicas: 0,
            promoted: false,
            memory: Memory::default(),
        }
    }

    fn rules(grace_ms: u64) -> Rules {
        Rules {
            enforce: true,
            refuse_evicting: true,
            grace: Duration::from_millis(grace_ms),
            drift_factor: 0.01,
        }
    }

    /// A check at `at` (our clock) when the master's clock says `master_ms`: the record the
    /// client writes after reading `previous`, as the IO layer does.
    fn check(
        belief: &mut Belief,
        previous: Option<&Record>,
        report: &Report,
        master_ms: u64,
        at: Instant,
        missing: Missing,
    ) -> (Record, Vec<Change>) {
        let seen = Seen {
            run_id: report.run_id.clone(),
            now_ms: master_ms,
            durable: report.durable(),
            promoted: report.promoted,
            counter: None,
        };
        let record = next(previous, &seen, 1_000, missing).unwrap_or_else(|| previous.cloned().unwrap());
        let sighting = Sighting {
            record: record.clone(),
            master_ms,
            at,
        };
        let changes = belief.checked(report, Some(sighting), previous.is_none(), true, 0);
        (record, changes)
    }

    #[test]
    fn a_replacement_with_a_long_uptime_waits_from_its_first_sighting() {
        let t0 = Instant::now();
        let mut b = Belief::default();
        let (_, changes) = check(&mut b, None, &report("new", "always"), 50_000, t0, Missing::Alone);
        assert!(changes.contains(&Change::RecordMissing), "{changes:?}");
        let err = b.admit(&rules(1_000), t0 + Duration::from_millis(500), 0);
        assert!(matches!(err, Err(NodeErrorKind::Replaced { .. })), "{err:?}");
        assert_eq!(
            b.admit(&rules(1_000), t0 + Duration::from_millis(1_100), 0),
            Ok(())
        );
        // A client started later reads the same record and honours the same window.
        let mut later = Belief::default();
        let r = check(
            &mut b.clone(),
            None,
            &report("new", "always"),
            50_000,
            t0,
            Missing::Alone,
        )
        .0;
        let sighting = Sighting {
            record: r,
            master_ms: 50_600,
            at: t0 + Duration::from_millis(600),
        };
        later.checked(&report("new", "always"), Some(sighting), false, true, 0);
        assert!(matches!(
            later.admit(&rules(1_000), t0 + Duration::from_millis(700), 0),
            Err(NodeErrorKind::Replaced { .. })
        ));
        assert_eq!(
            later.admit(&rules(1_000), t0 + Duration::from_millis(1_100), 0),
            Ok(())
        );
    }

    #[test]
    fn a_durable_restart_votes_at_once_and_a_downgraded_one_waits() {
        let t0 = Instant::now();
        let mut b = Belief::default();
        let (old, _) = check(&mut b, None, &report("a", "always"), 0, t0, Missing::Everywhere);
        let (_, changes) = check(&mut b, Some(&old), &report("b", "always"), 10, t0, Missing::Alone);
        assert_eq!(changes, vec![Change::Restarted { lost: false }]);
        assert_eq!(b.admit(&rules(1_000), t0, 0), Ok(()));
        assert!(!b.fence.repair);

        let mut b = Belief::default();
        let (old, _) = check(&mut b, None, &report("a", "always"), 0, t0, Missing::Everywhere);
        // Downgraded at runtime, seen by a check, then a crash; it comes back saying always.
        let (old, changes) = check(
            &mut b,
            Some(&old),
            &report("a", "everysec"),
            5,
            t0,
            Missing::Alone,
        );
        assert_eq!(changes, vec![Change::Persistence(Some(false))]);
        let (_, changes) = check(&mut b, Some(&old), &report("b", "always"), 10, t0, Missing::Alone);
        assert_eq!(changes[0], Change::Restarted { lost: true });
        assert!(matches!(
            b.admit(&rules(1_000), t0, 0),
            Err(NodeErrorKind::Replaced { .. })
        ));
        assert!(b.fence.repair && b.fence.full && !b.fence_repair_light());
    }

    #[test]
    fn an_evicting_master_is_refused_unless_allowed() {
        let t0 = Instant::now();
        let mut b = Belief::default();
        let mut r = report("a", "always");
        r.memory = Memory {
            maxmemory: 1 << 20,
            policy: Some("volatile-ttl".into()),
            evicted_keys: 0,
        };
        let (_, changes) = check(&mut b, None, &r, 0, t0, Missing::Everywhere);
        assert_eq!(changes, vec![Change::Eviction(Some("volatile-ttl".into()))]);
        assert_eq!(
            b.admit(&rules(0), t0, 0),
            Err(NodeErrorKind::Evicting {
                policy: "volatile-ttl".into()
            })
        );
        let allowed = Rules {
            refuse_evicting: false,
            ..rules(0)
        };
        assert_eq!(b.admit(&allowed, t0, 0), Ok(()));
        // noeviction, or no limit, never evicts.
        r.memory.policy = Some("noeviction".into());
        assert_eq!(r.memory.evicting(), None);
        r.memory = Memory {
            maxmemory: 0,
            policy: Some("allkeys-lru".into()),
            evicted_keys: 0,
        };
        assert_eq!(r.memory.evicting(), None);
    }

    #[test]
    fn each_change_is_warned_about_once() {
        let t0 = Instant::now();
        let mut b = Belief::default();
        let mut r = report("a", "everysec");
        let (rec, first) = check(&mut b, None, &r, 0, t0, Missing::Everywhere);
        assert_eq!(first, vec![Change::Persistence(Some(false))]);
        let (rec, again) = check(&mut b, Some(&rec), &r, 1, t0, Missing::Alone);
        assert!(again.is_empty(), "{again:?}");
        r.replicas = 1;
        r.appendfsync = Err("CONFIG disabled".into());
        let (_, changed) = check(&mut b, Some(&rec), &r, 2, t0, Missing::Alone);
        assert_eq!(
            changed,
            vec![
                Change::Persistence(None),
                Change::ConfigUnreadable("CONFIG disabled".into()),
                Change::Replicas(1)
            ]
        );
    }

    #[test]
    fn without_a_check_of_this_connection_no_vote_counts() {
        let t0 = Instant::now();
        let mut b = Belief::default();
        check(&mut b, None, &report("a", "always"), 0, t0, Missing::Everywhere);
        assert_eq!(b.admit(&rules(0), t0, 0), Ok(()));
        assert_eq!(b.admit(&rules(0), t0, 1), Err(NodeErrorKind::Unverified));
        let off = Rules {
            enforce: false,
            ..rules(0)
        };
        assert_eq!(Belief::default().admit(&off, t0, 0), Ok(()));
    }
}
