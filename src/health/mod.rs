//! What the client knows about each master's identity and durability, and which votes it may
//! therefore count: the state, the checks that fill it (`check.rs`), and the admission of votes,
//! whose rule is the core's (`core::admission`).
//!
//! RedLock is only safe if a master that lost its data (a restart without `appendfsync always`)
//! stays out of every majority for longer than the longest TTL: otherwise it grants a lock that
//! another client still holds through it. The spec leaves that delay to operators; this file has
//! the client enforce it.
//!
//! - Every master's `run_id`, `uptime_in_seconds`, AOF state and `appendfsync` policy are read at
//!   `build()` (`INFO`, `CONFIG GET appendfsync`), cached, and read again in the background at most
//!   once per [`crate::config::DEFAULT_HEALTH_REFRESH`] — piggybacked on an acquire, never awaited by
//!   it.
//! - A restart always drops our connection. Each master counts its lost connections, and a vote
//!   only counts while that count is the one seen when the master's identity was last read: after a
//!   reconnect the master is checked again at once (in the background), and its votes are ignored
//!   until then ([`NodeErrorKind::Unverified`]).
//! - A master that (re)started less than the grace period ago (the longest TTL in use plus its drift
//!   allowance, unless configured) and does not persist with `appendfsync always` has its votes
//!   ignored until the grace has passed ([`NodeErrorKind::Restarted`]).
//! - For fencing, a master whose `run_id` changed without `appendfsync always` may have lost counter
//!   increments: it is marked for counter repair, which waits out the same grace. The master itself
//!   also keeps the `run_id` its counter was last vouched for under (the fencing epoch), so a client
//!   that never saw the restart learns of it from the fenced acquire; the cached `run_id` read here
//!   is what it compares the epoch with.
//!
//! A master whose `appendfsync` policy cannot be read (CONFIG disabled) is treated as not
//! persisting every write. Uptime has a resolution of one second, rounded so that the grace only
//! grows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tracing::warn;

use crate::clock::Clock;
use crate::config::Config;
use crate::core::admission::{self, Standing};
use crate::error::NodeErrorKind;
use crate::link::Link;

mod check;
mod snapshot;

pub(crate) use check::{check_at_build, tick, Snapshot};
pub use snapshot::{HealthSnapshot, Ignored, MasterHealth};

/// Least delay between two checks of a master whose identity is unverified (down, or reconnected).
const UNVERIFIED_RETRY: Duration = Duration::from_millis(100);

/// One master's cached state.
#[derive(Debug, Default)]
struct NodeState {
    run_id: Option<String>,
    /// When the master (re)started, on our monotonic clock.
    started: Option<Instant>,
    fsync_always: Option<bool>,
    /// The node's disconnect count when its identity was last read successfully.
    verified_at: Option<u64>,
    in_flight: bool,
    last_attempt: Option<Instant>,
    /// The highest fencing counter this client has seen on the master.
    fence_floor: u64,
    /// Whether the master's fencing counter must be repaired before its fenced votes count.
    fence_repair: bool,
    /// Whether that repair must treat the counter as possibly behind (lost, regressed, or a new
    /// epoch on a master that does not persist every write), rather than only stamp a new epoch.
    fence_repair_full: bool,
    /// Whether every reason for that repair is one that another client's repair answers: the
    /// counter was absent, or the master restarted (see `core::fencing::set_up_elsewhere`).
    fence_vouchable: bool,
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
    grace: Option<Duration>,
    drift_factor: f64,
    refresh_every: Duration,
    max_ttl_ms: AtomicU64,
    nodes: Vec<Mutex<NodeState>>,
    last_periodic: Mutex<Instant>,
    /// This client's share of the ignored-masters gauge, by reason, as last published.
    published: Mutex<[i64; snapshot::REASONS]>,
    /// The client's clock: restart graces, check intervals and uptimes are measured on it.
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
            grace: config.restart_grace,
            drift_factor: config.drift_factor,
            refresh_every: config.health_refresh,
            max_ttl_ms: AtomicU64::new(0),
            nodes: (0..n).map(|_| Mutex::new(NodeState::default())).collect(),
            last_periodic: Mutex::new(config.clock.now()),
            published: Mutex::new([0; snapshot::REASONS]),
            clock: config.clock.clone(),
        }
    }

    /// Now, on the client's clock.
    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Remembers a TTL in use, so the default grace covers it.
    pub(crate) fn note_ttl(&self, ttl: Duration) {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.max_ttl_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// The grace period after a restart: configured, or the longest TTL in use plus its drift.
    pub(crate) fn grace(&self) -> Duration {
        let longest = Duration::from_millis(self.max_ttl_ms.load(Ordering::Relaxed));
        admission::grace(self.grace, longest, self.drift_factor)
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
    /// [`NodeErrorKind::Unverified`] or [`NodeErrorKind::Restarted`] when its vote must be ignored.
    pub(crate) fn admit(&self, link: &Link, now: Instant) -> Result<(), NodeErrorKind> {
        if !self.enforce {
            return Ok(());
        }
        let Some(state) = self.state(link.index()) else {
            return Ok(());
        };
        let standing = Standing {
            verified: state.verified_at == Some(link.disconnects()),
            fsync_always: state.fsync_always,
            started: state.started.map(Instant::into_std),
        };
        drop(state);
        admission::admit(self.enforce, standing, self.grace(), now.into_std())
    }

    /// Records a check of `node` that began when its disconnect count was `before`.
    pub(crate) fn record(&self, node: &Link, before: u64, snapshot: &Snapshot, observed_at: Instant) {
        let Some(mut state) = self.state(node.index()) else {
            return;
        };
        let fsync_always = snapshot.fsync_always();
        if let Some(previous) = &state.run_id {
            if *previous != snapshot.run_id {
                warn!(
                    node = node.index(),
                    addr = node.addr(),
                    uptime_s = snapshot.uptime_secs,
                    "master restarted (its run_id changed)"
                );
                if fsync_always != Some(true) {
                    state.fence_repair = true;
                    state.fence_repair_full = true;
                }
                // A new incarnation: what was seen of the old one's counter says nothing about
                // the new one, which only a repair under the new run_id vouches for.
                state.fence_vouchable = true;
                state.fence_floor = 0;
            }
        }
        state.run_id = Some(snapshot.run_id.clone());
        state.started =
            admission::latest_start(observed_at.into_std(), snapshot.uptime_secs).map(Instant::from_std);
        state.fsync_always = fsync_always;
        // Only a check that no reconnect interleaved with vouches for the current connection.
        if node.disconnects() == before {
            state.verified_at = Some(before);
        }
    }

    /// The highest fencing counter this client has seen on `node`.
    pub(crate) fn fence_floor(&self, node: usize) -> u64 {
        self.state(node).map_or(0, |s| s.fence_floor)
    }

    /// Raises the fencing counter floor of `node` to `value`.
    pub(crate) fn raise_fence_floor(&self, node: usize, value: u64) {
        if let Some(mut state) = self.state(node) {
            state.fence_floor = state.fence_floor.max(value);
        }
    }

    /// The `run_id` of `node`, if it was read on the connection in use now.
    pub(crate) fn verified_run_id(&self, node: &Link) -> Option<String> {
        let state = self.state(node.index())?;
        if state.verified_at != Some(node.disconnects()) {
            return None;
        }
        state.run_id.clone()
    }

    /// Marks `node`'s fencing counter as behind (below what this client saw): it needs a full
    /// repair.
    pub(crate) fn mark_fence_repair(&self, node: usize) {
        if let Some(mut state) = self.state(node) {
            state.fence_repair = true;
            state.fence_repair_full = true;
            state.fence_vouchable = false;
        }
    }

    /// Marks `node`'s fencing counter as absent: a full repair, unless another client sets the
    /// counter up meanwhile (see [`Health::fence_vouchable`]).
    pub(crate) fn mark_fence_absent(&self, node: usize) {
        if let Some(mut state) = self.state(node) {
            if !state.fence_repair {
                state.fence_vouchable = true;
            }
            state.fence_repair = true;
            state.fence_repair_full = true;
        }
    }

    /// Whether `node` waits for repair only for reasons another client's repair answers: its
    /// counter was absent, or it restarted.
    pub(crate) fn fence_vouchable(&self, node: usize) -> bool {
        self.state(node)
            .is_some_and(|s| s.fence_repair && s.fence_vouchable)
    }

    /// Marks `node`'s fencing epoch as stale (it restarted since its counter was vouched for): a
    /// full repair unless it persists every write, in which case its counter is intact and the
    /// repair only raises it to what the others have and stamps the new epoch.
    pub(crate) fn mark_fence_epoch(&self, node: usize) {
        if let Some(mut state) = self.state(node) {
            state.fence_repair = true;
            // The epoch is stale: it was never stamped in this incarnation, and a grant needs it
            // to match, so every counter this client saw from the master was an older one's.
            state.fence_vouchable = true;
            state.fence_floor = 0;
            if state.fsync_always != Some(true) {
                state.fence_repair_full = true;
            }
        }
    }

    /// Whether `node`'s pending repair only has to stamp a new epoch: it restarted with
    /// `appendfsync always`, so nothing it acknowledged was lost and no grace is needed.
    pub(crate) fn fence_repair_light(&self, node: usize) -> bool {
        self.state(node)
            .is_some_and(|s| s.fence_repair && !s.fence_repair_full && s.fsync_always == Some(true))
    }

    /// Whether `node`'s fencing counter needs repair.
    pub(crate) fn needs_fence_repair(&self, node: usize) -> bool {
        self.state(node).is_some_and(|s| s.fence_repair)
    }

    /// Whether `node`'s counter may be repaired at `now`: its start is known and the grace has
    /// passed since, so no acquisition can still count an acknowledgement it gave before.
    /// A light repair (see [`Health::fence_repair_light`]) is due at once.
    pub(crate) fn fence_repair_due(&self, node: usize, now: Instant) -> bool {
        if self.fence_repair_light(node) {
            return true;
        }
        let grace = self.grace();
        self.state(node).and_then(|s| s.started).is_some_and(|started| {
            crate::core::fencing::repair_due(started.into_std(), grace, now.into_std())
        })
    }

    /// Records that `node`'s counter was repaired to `value`, which becomes the floor: increments
    /// this client saw above it were never committed (the repair covers every issued token), and a
    /// floor left above it would refuse the master's vote again and again.
    pub(crate) fn fence_repaired(&self, node: usize, value: u64) {
        if let Some(mut state) = self.state(node) {
            state.fence_repair = false;
            state.fence_repair_full = false;
            state.fence_vouchable = false;
            state.fence_floor = value;
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
        let unverified = state.verified_at != Some(node.disconnects());
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

    pub(crate) fn periodic_due(&self, now: Instant) -> bool {
        let mut last = locked(&self.last_periodic);
        if now.saturating_duration_since(*last) >= self.refresh_every {
            *last = now;
            return true;
        }
        false
    }
}
