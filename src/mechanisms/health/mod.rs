//! What the client knows about each master, and which votes it may therefore count: the state
//! (one [`Belief`] per master, whose rules are the core's, `core::master`), the checks that feed it
//! (`check.rs`), and what an application can read of it (`snapshot.rs`).
//!
//! RedLock is only safe if a master that may have lost writes stays out of every majority for
//! longer than the longest TTL: otherwise it grants a lock that another client still holds
//! through it. The spec leaves that delay to operators; the client enforces it, from evidence
//! every client shares:
//!
//! - Every master's `run_id`, uptime, persistence (`aof_enabled`, `CONFIG GET appendfsync`),
//!   replication and memory policy are read at `build()`, and again in the background at most once
//!   per [`crate::config::DEFAULT_HEALTH_REFRESH`] (at once after a reconnect, and when this
//!   client's longest TTL grows): piggybacked on an acquire, never awaited by it.
//! - Each check reads and updates the record the master keeps about itself
//!   (`core::master::record`): when its incarnation was first seen, whether it may lack writes,
//!   whether it persisted every write at every check, and the longest grace any client declared.
//!   A master replaced behind its address, promoted from a replica, or restarted after a runtime
//!   downgrade waits out the grace from its first sighting, for every client, including one built
//!   after the change ([`NodeErrorKind::Replaced`]).
//! - A restart always drops our connection. Each master counts its lost connections, and a vote
//!   only counts while that count is the one seen when the master was last checked: after a
//!   reconnect the master is checked again at once (in the background), and its votes are ignored
//!   until then ([`NodeErrorKind::Unverified`]).
//! - A master that (re)started, by its uptime, less than the grace ago and does not persist with
//!   `appendfsync always` has its votes ignored until the grace has passed
//!   ([`NodeErrorKind::Restarted`]): the spec's delayed restart, kept beneath the record's rule.
//! - A master that may evict keys (`maxmemory` with a policy other than `noeviction`) has its votes
//!   refused unless the builder allows it ([`NodeErrorKind::Evicting`]).
//! - The grace is the configured one; by default, the longest TTL this client used, raised to the
//!   longest any other client declared in a master's record (every client declares its longest
//!   TTL there at its checks).
//! - For fencing, a master whose incarnation may lack writes needs a full counter repair after the
//!   grace; one whose record shows it lost nothing only has its epoch stamped.
//!
//! Every change of persistence, eviction, replicas or identity is warned about once, at the check
//! that sees it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::base::error::NodeErrorKind;
use crate::core::admission;
use crate::core::master::{Belief, Change, Report, Rules, Sighting};
use crate::mechanisms::config::Config;
use crate::mechanisms::removal::Removed;
use crate::seam::clock::Clock;
use crate::seam::link::Link;

mod check;
mod snapshot;
mod warn;

pub(crate) use check::{check_at_build, refresh_in_background, tick};
pub use snapshot::{HealthSnapshot, Ignored, MasterHealth};

/// Least delay between two checks of a master whose identity is unverified (down, or reconnected).
const UNVERIFIED_RETRY: Duration = Duration::from_millis(100);

/// One master's state: the core's belief, and what the checks and rounds keep beside it.
#[derive(Debug, Default)]
struct NodeState {
    belief: Belief,
    in_flight: bool,
    last_attempt: Option<Instant>,
    /// Whether the last request to the master timed out or could not connect.
    unreachable: bool,
    /// The master's last fault (a refusal such as "held" is not one).
    last_error: Option<NodeErrorKind>,
    /// How long the master took to answer the last request it answered.
    round_trip: Option<Duration>,
}

/// The health of every master, shared by every handle and guard.
#[derive(Debug)]
pub(crate) struct Health {
    enforce: bool,
    refuse_evicting: bool,
    /// The mechanisms a negative control removed (none outside the simulation's controls).
    pub(crate) removed: Removed,
    grace: Option<Duration>,
    drift_factor: f64,
    refresh_every: Duration,
    max_ttl_ms: AtomicU64,
    /// The longest grace any master's record declares (other clients' TTLs), in ms.
    fleet_grace_ms: AtomicU64,
    /// The highest fencing counter this process has seen on any master, in any incarnation.
    highest_counter: AtomicU64,
    /// Set when this client's longest TTL grew: the next tick checks every master, so that their
    /// records learn the longer grace.
    grace_grew: AtomicBool,
    nodes: Vec<Mutex<NodeState>>,
    last_periodic: Mutex<Instant>,
    /// This client's share of the ignored-masters gauge, by reason, as last published.
    published: Mutex<[i64; snapshot::REASONS]>,
    /// This client's share of the masters-at-risk gauge, by risk, as last published.
    published_risks: Mutex<[i64; snapshot::RISKS]>,
    /// The client's clock: graces, check intervals and uptimes are measured on it.
    clock: Clock,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Health {
    /// Nothing known yet about `n` masters.
    pub(crate) fn new(n: usize, config: &Config) -> Self {
        Self {
            enforce: config.enforce_restart_grace,
            refuse_evicting: config.refuse_evicting_masters,
            removed: config.removed,
            grace: config.restart_grace,
            drift_factor: config.drift_factor,
            refresh_every: config.health_refresh,
            max_ttl_ms: AtomicU64::new(0),
            fleet_grace_ms: AtomicU64::new(0),
            highest_counter: AtomicU64::new(0),
            grace_grew: AtomicBool::new(false),
            nodes: (0..n).map(|_| Mutex::new(NodeState::default())).collect(),
            last_periodic: Mutex::new(config.clock.now()),
            published: Mutex::new([0; snapshot::REASONS]),
            published_risks: Mutex::new([0; snapshot::RISKS]),
            clock: config.clock.clone(),
        }
    }

    /// Now, on the client's clock.
    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Remembers a TTL in use, so the default grace covers it; a longer one than before makes
    /// the next tick check every master, so their records carry it to the other clients.
    pub(crate) fn note_ttl(&self, ttl: Duration) {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        if self.max_ttl_ms.fetch_max(ms, Ordering::Relaxed) < ms {
            self.grace_grew.store(true, Ordering::Relaxed);
        }
    }

    /// This client's own grace: configured, or the longest TTL it used plus its drift.
    fn own_grace(&self) -> Duration {
        let longest = Duration::from_millis(self.max_ttl_ms.load(Ordering::Relaxed));
        admission::grace(self.grace, longest, self.drift_factor)
    }

    /// The grace this client declares in the masters' records, in ms: its longest TTL so far plus
    /// its drift, whatever grace it was configured with. Other clients wait out a master that may
    /// have lost writes for at least this long, so that none of this client's locks is granted
    /// again through it; a configured grace is this client's own choice and binds nobody else.
    pub(crate) fn declared_grace_ms(&self) -> u64 {
        let longest = Duration::from_millis(self.max_ttl_ms.load(Ordering::Relaxed));
        let grace = admission::grace(None, longest, self.drift_factor);
        u64::try_from(grace.as_millis()).unwrap_or(u64::MAX)
    }

    /// The grace a master that may have lost writes waits out: the configured one; by default, the
    /// longer of this client's longest TTL (plus drift) and the longest TTL another client declared
    /// in a master's record.
    pub(crate) fn grace(&self) -> Duration {
        if let Some(configured) = self.grace {
            return configured;
        }
        let fleet = Duration::from_millis(self.fleet_grace_ms.load(Ordering::Relaxed));
        self.own_grace().max(fleet)
    }

    /// The rules a vote is judged by now.
    fn rules(&self) -> Rules {
        Rules {
            enforce: self.enforce,
            refuse_evicting: self.refuse_evicting,
            grace: self.grace(),
            drift_factor: self.drift_factor,
        }
    }

    fn state(&self, node: usize) -> Option<MutexGuard<'_, NodeState>> {
        self.nodes.get(node).map(locked)
    }

    /// Records how master `node` answered a request sent `after` ago: as asked (`None`) or with
    /// `error`. A master that answered, even with a refusal, is reachable.
    pub(crate) fn observe(&self, node: usize, error: Option<&NodeErrorKind>, after: Duration) {
        let Some(mut state) = self.state(node) else {
            return;
        };
        match error {
            Some(kind) if kind.is_unreachable() => {
                state.unreachable = true;
                state.last_error = Some(kind.clone());
            }
            Some(kind) => {
                state.unreachable = false;
                state.round_trip = Some(after);
                if !kind.is_contention() && *kind != NodeErrorKind::Absent {
                    state.last_error = Some(kind.clone());
                }
            }
            None => {
                state.unreachable = false;
                state.round_trip = Some(after);
            }
        }
    }

    /// Whether a yes from `link` at `now` may count towards a majority.
    ///
    /// # Errors
    /// Why its vote must be ignored (see [`Belief::admit`]).
    pub(crate) fn admit(&self, link: &Link, now: Instant) -> Result<(), NodeErrorKind> {
        if !self.enforce {
            return Ok(());
        }
        let rules = self.rules();
        let Some(state) = self.state(link.index()) else {
            return Ok(());
        };
        state.belief.admit(&rules, now.into_std(), link.disconnects())
    }

    /// Takes in a check of `node` that began when its disconnect count was `before`: what it
    /// reported, and its record as the check left it. Returns what changed, for warnings.
    pub(crate) fn record(
        &self,
        node: &Link,
        before: u64,
        report: &Report,
        sighting: Sighting,
        found_none: bool,
    ) -> Vec<Change> {
        self.fleet_grace_ms
            .fetch_max(sighting.record.grace_ms, Ordering::Relaxed);
        self.highest_counter
            .fetch_max(sighting.record.hwm, Ordering::Relaxed);
        let Some(mut state) = self.state(node.index()) else {
            return Vec::new();
        };
        // Only a check that no reconnect interleaved with vouches for the current connection.
        let verified = node.disconnects() == before;
        state
            .belief
            .checked(report, Some(sighting), found_none, verified, before)
    }

    /// The highest fencing counter this client has seen on `node`.
    pub(crate) fn fence_floor(&self, node: usize) -> u64 {
        self.state(node).map_or(0, |s| s.belief.fence.floor)
    }

    /// Raises the fencing counter floor of `node` to `value`.
    pub(crate) fn raise_fence_floor(&self, node: usize, value: u64) {
        self.highest_counter.fetch_max(value, Ordering::Relaxed);
        if let Some(mut state) = self.state(node) {
            state.belief.fence.floor = state.belief.fence.floor.max(value);
        }
    }

    /// The highest fencing counter this process has seen anywhere, in any incarnation of any
    /// master, its records' high-water marks included: a bootstrap never starts below it.
    pub(crate) fn highest_counter(&self) -> u64 {
        self.highest_counter.load(Ordering::Relaxed)
    }

    /// The `run_id` of `node`, if it was read on the connection in use now.
    pub(crate) fn verified_run_id(&self, node: &Link) -> Option<String> {
        let state = self.state(node.index())?;
        if !state.belief.verified(node.disconnects()) {
            return None;
        }
        state.belief.run_id.clone()
    }

    /// Marks `node`'s fencing counter as behind (below what this client saw): it needs a full
    /// repair.
    pub(crate) fn mark_fence_repair(&self, node: usize) {
        if let Some(mut state) = self.state(node) {
            state.belief.fence_behind();
        }
    }

    /// Marks `node`'s fencing counter as absent: a full repair, unless another client sets the
    /// counter up meanwhile (see [`Health::fence_vouchable`]).
    pub(crate) fn mark_fence_absent(&self, node: usize) {
        if let Some(mut state) = self.state(node) {
            state.belief.fence_absent();
        }
    }

    /// Whether `node` waits for repair only for reasons another client's repair answers: its
    /// counter was absent, or it restarted.
    pub(crate) fn fence_vouchable(&self, node: usize) -> bool {
        self.state(node)
            .is_some_and(|s| s.belief.fence.repair && s.belief.fence.vouchable)
    }

    /// Marks `node`'s fencing epoch as stale (it restarted since its counter was vouched for): a
    /// full repair unless its record shows it lost nothing, in which case the repair only raises
    /// it to what the others have and stamps the new epoch.
    pub(crate) fn mark_fence_epoch(&self, node: usize) {
        if let Some(mut state) = self.state(node) {
            state.belief.fence_epoch_stale();
        }
    }

    /// Whether `node`'s pending repair only has to stamp a new epoch: its record shows that it
    /// lost nothing it acknowledged, so no grace is needed.
    pub(crate) fn fence_repair_light(&self, node: usize) -> bool {
        self.state(node).is_some_and(|s| s.belief.fence_repair_light())
    }

    /// Whether `node`'s fencing counter needs repair.
    pub(crate) fn needs_fence_repair(&self, node: usize) -> bool {
        self.state(node).is_some_and(|s| s.belief.fence.repair)
    }

    /// Whether `node`'s counter may be repaired at `now` (see [`Belief::fence_repair_due`]).
    pub(crate) fn fence_repair_due(&self, node: usize, now: Instant) -> bool {
        let rules = self.rules();
        self.state(node)
            .is_some_and(|s| s.belief.fence_repair_due(&rules, now.into_std()))
    }

    /// Records that `node`'s counter was repaired to `value`, which becomes the floor: increments
    /// this client saw above it were never committed (the repair covers every issued token), and a
    /// floor left above it would refuse the master's vote again and again.
    pub(crate) fn fence_repaired(&self, node: usize, value: u64) {
        self.highest_counter.fetch_max(value, Ordering::Relaxed);
        if let Some(mut state) = self.state(node) {
            state.belief.fence_repaired(value);
        }
    }

    /// Claims a check of `node` if one is due at `now`.
    pub(crate) fn claim(&self, node: &Link, now: Instant, periodic: bool) -> bool {
        let Some(mut state) = self.state(node.index()) else {
            return false;
        };
        if state.in_flight {
            return false;
        }
        let unverified = !state.belief.verified(node.disconnects());
        let may_retry = state
            .last_attempt
            .is_none_or(|t| now.saturating_duration_since(t) >= UNVERIFIED_RETRY);
        if periodic || (unverified && may_retry) {
            state.in_flight = true;
            state.last_attempt = Some(now);
            return true;
        }
        false
    }

    pub(crate) fn release_claim(&self, node: usize) {
        if let Some(mut state) = self.state(node) {
            state.in_flight = false;
        }
    }

    /// Whether every master is due a check at `now`: once per refresh interval, and at once when
    /// this client's longest TTL grew.
    pub(crate) fn periodic_due(&self, now: Instant) -> bool {
        let mut last = locked(&self.last_periodic);
        let grew = self.grace_grew.swap(false, Ordering::Relaxed);
        if grew || now.saturating_duration_since(*last) >= self.refresh_every {
            *last = now;
            return true;
        }
        false
    }
}
