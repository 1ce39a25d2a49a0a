//! The watchdog: keeps held locks alive by renewing them before they expire, for as long as their
//! guards live, and says so the moment one is lost.
//!
//! There is one renewal scheduler per [`Quorlock`] (a single task, spawned on the first
//! [`Guard::keep_alive`]), not a task per guard: with thousands of held locks, one tick sends one
//! pipeline of renewals per master instead of one round trip per lock. The scheduler holds only weak
//! references, so a dropped guard is released as usual and simply falls out of the schedule.
//!
//! Each renewal uses the lock's own extend command ([`LockOps`](crate::mechanisms::ops::LockOps)), so every kind
//! of lock is kept alive the same way, and is counted over all N masters with the same tally as an
//! acquire: the new validity runs from the start of the tick. A lock whose renewal is refused by a
//! master holding another token (a conflict), or that too few masters still hold, is marked lost at
//! once and dropped from the schedule; a renewal that failed for want of replies is retried inside
//! the remaining validity. Either way the guard's `lost()` fires no later than the end of the last
//! confirmed validity.
//!
//! Renewals travel on a second connection per master (the seam's batch connection), opened
//! lazily, so a large renewal pipeline never queues in front of acquires and releases. After a large tick those connections are closed
//! and reopened on the next one, so the write buffers a big pipeline grew are not kept between
//! ticks ([`RENEWAL_CONNECTION_RECYCLE`]). Script renewals go out as `EVALSHA`, with the scripts'
//! `SCRIPT LOAD` at the head of the same pipeline: a tick carries each script's source once instead
//! of once per lock, and a master that lost its script cache (a restart) still finds the script
//! loaded before the first renewal that needs it.

//!
//! This file holds the schedule (which locks are due, and the task that sleeps until they are); the
//! renewal of one tick's batch is in `batch.rs`, and the arithmetic of both in `core::renewal`.

mod batch;

use std::collections::btree_map::Entry as Slot;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::base::metrics::Cause;
use crate::base::names::Names;
use crate::core::renewal;
use crate::mechanisms::config::Config;
use crate::mechanisms::health::Health;
use crate::mechanisms::lease::Lease;
use crate::seam::clock::later;
use crate::seam::link::Masters;

/// How much time each renewal adds to the bound on a tick's pipeline, on top of the node timeout:
/// 20 µs, so 10,000 renewals may take 200 ms more than a single command. The bound is raised to
/// the shortest validity left among the tick's locks when that is longer: a reply later than that
/// is useless, one earlier still renews.
pub(crate) const RENEWAL_TIME_ALLOWANCE: Duration = Duration::from_micros(20);

/// A tick renewing at least this many locks closes its renewal connections afterwards (they are
/// reopened on the next tick): 1,000. A connection's write buffer keeps the capacity of the largest
/// pipeline it sent, about 100 bytes per renewal, for as long as it lives; with 10,000 locks that is
/// 1 MB per master kept between ticks, more than the locks themselves. Reopening costs one connect
/// per master per large tick, which is small next to the pipeline it follows.
pub(crate) const RENEWAL_CONNECTION_RECYCLE: usize = 1_000;

/// How a guard is kept alive. Start from [`KeepAlive::default`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeepAlive {
    /// Time between renewals; `None` renews every `ttl / 3`. Kept within `[10 ms, ttl / 2]`.
    pub interval: Option<Duration>,
    /// A cap on the total hold, counted from the start of keep-alive; `None` for no cap. The last
    /// renewals are shortened so the lock expires at the cap.
    pub max_hold: Option<Duration>,
}

impl KeepAlive {
    /// Renews every `every` instead of every `ttl / 3`.
    pub fn interval(mut self, every: Duration) -> Self {
        self.interval = Some(every);
        self
    }

    /// Stops renewing so the lock expires `cap` after keep-alive started.
    pub fn max_hold(mut self, cap: Duration) -> Self {
        self.max_hold = Some(cap);
        self
    }
}

/// Counters of a [`crate::Quorlock`]'s watchdog, for monitoring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchdogStats {
    /// Locks currently kept alive.
    pub watched: usize,
    /// Ticks that sent renewals.
    pub ticks: u64,
    /// Renewal commands sent, each counted once however many masters it went to.
    pub renewals: u64,
    /// Pipelines sent: at most one per master per tick.
    pub pipelines: u64,
    /// Locks the watchdog found lost (conflict, expiry, or too few masters left).
    pub lost: u64,
}

/// The renewal scheduler of one [`crate::Quorlock`]: the registry of kept-alive locks and the task that
/// renews them.
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
    /// What the renewals go to and are counted by; the task stops once the client is gone.
    to: To,
}

/// The masters renewals go to, whose votes count, and the rules they are checked by: held weakly,
/// so the task stops once the client that owns them is gone.
#[derive(Clone)]
struct To {
    masters: Weak<Masters>,
    /// Whose votes count: a renewal is admitted as every other round's votes are.
    health: Weak<Health>,
    /// The client's key names, for the health checks a renewal starts.
    names: Names,
    /// The TTL rules and the node timeout renewals are checked and bounded by.
    config: Arc<Config>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the task when a lock joins the schedule or the handle is gone.
    wake: Notify,
}

#[derive(Default)]
struct State {
    /// Kept-alive locks by the address of their shared state.
    /// By their order of joining the schedule (a lease's `watched` id), so a tick's batch, and
    /// what its replies change, come in the same order every time.
    entries: BTreeMap<u64, Entry>,
    /// The id of the last lease that joined.
    last_id: u64,
    running: bool,
    closed: bool,
    stats: WatchdogStats,
}

struct Entry {
    held: Weak<Lease>,
    interval: Duration,
    next_due: Instant,
    hold_until: Option<Instant>,
}

/// A lock renewed in the current tick.
struct Due {
    id: u64,
    held: Arc<Lease>,
    ttl: Duration,
}

/// What a tick did for one lock.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// Renewed by a majority; the next renewal is counted from `started`.
    Renewed { started: Instant },
    /// Being extended by hand right now; look again shortly.
    Busy,
    /// Not enough replies; retry inside the remaining validity.
    Retry,
    /// Lost, released, or at its hold cap: no more renewals.
    Stop,
}

impl fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state();
        f.debug_struct("Watchdog")
            .field("watched", &state.entries.len())
            .field("running", &state.running)
            .finish()
    }
}

impl Watchdog {
    /// The scheduler of the locks renewed on `masters` (whose votes `health` admits) under
    /// `config`; no task runs yet.
    pub(crate) fn new(
        masters: &Arc<Masters>,
        health: &Arc<Health>,
        names: &Names,
        config: Arc<Config>,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                wake: Notify::new(),
            }),
            to: To {
                masters: Arc::downgrade(masters),
                health: Arc::downgrade(health),
                names: names.clone(),
                config,
            },
        }
    }

    /// The watchdog's counters.
    pub(crate) fn stats(&self) -> WatchdogStats {
        let state = self.shared.state();
        WatchdogStats {
            watched: state.entries.len(),
            ..state.stats
        }
    }

    /// Adds a lock to the schedule (or replaces its options when `opts` is given), and starts the
    /// task if it is not running.
    pub(crate) fn watch(&self, held: &Arc<Lease>, opts: Option<KeepAlive>) {
        let runtime = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime,
            Err(_) => {
                warn!(resource = %held.resource, "keep_alive outside a Tokio runtime: the lock is not renewed");
                return;
            }
        };
        if held.is_released() || held.status.get().lost {
            return;
        }
        let now = self.to.config.clock.now();
        // With a lock-delay the drift allowance is taken on the key's whole life, so the validity
        // a renewal gives is shorter than the TTL by more: the renewals are spaced within that.
        let timing = held.timing;
        let basis = if timing.lock_delay().is_zero() {
            timing.ttl()
        } else {
            timing.ttl().saturating_sub(timing.drift())
        };
        let make = |opts: KeepAlive| {
            let interval = renewal::renew_interval(basis, opts.interval);
            // The first renewal comes `interval` after the round that set the current validity.
            let valid_until = held.valid_until();
            let next_due = basis
                .checked_sub(interval)
                .and_then(|lead| valid_until.checked_sub(lead))
                .map_or(now, |due| due.max(now));
            Entry {
                held: Arc::downgrade(held),
                interval,
                next_due,
                hold_until: opts.max_hold.and_then(|cap| now.checked_add(cap)),
            }
        };
        let mut state = self.shared.state();
        if state.closed {
            return;
        }
        // Decided under the state's lock: two calls for one lease cannot both draw an id.
        let id = match held.watched.get() {
            Some(id) => *id,
            None => {
                state.last_id += 1;
                let id = state.last_id;
                let _ = held.watched.set(id);
                id
            }
        };
        match state.entries.entry(id) {
            Slot::Occupied(mut slot) => {
                if let Some(opts) = opts {
                    slot.insert(make(opts));
                }
            }
            Slot::Vacant(slot) => {
                slot.insert(make(opts.unwrap_or_default()));
            }
        }
        if !state.running {
            state.running = true;
            runtime.spawn(run(Arc::clone(&self.shared), self.to.clone()));
        }
        drop(state);
        self.shared.wake.notify_one();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.state().closed = true;
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the locks due at `now` out for renewal, drops those no longer worth renewing, and
    /// returns when the next one falls due.
    fn take_due(&self, now: Instant) -> (Vec<Due>, Option<Instant>) {
        let mut due = Vec::new();
        let mut wake: Option<Instant> = None;
        let mut lost = 0u64;
        let mut state = self.state();
        state.entries.retain(|&id, entry| {
            let Some(held) = entry.held.upgrade() else {
                return false;
            };
            if held.is_released() {
                return false;
            }
            let status = held.status.get();
            if status.lost {
                return false;
            }
            if now >= status.valid_until {
                // Renewals kept failing until the validity ran out.
                held.lose(Cause::Expired);
                lost += 1;
                warn!(resource = %held.resource, "watchdog could not renew the lock before its validity ended; it is lost");
                return false;
            }
            if !renewal::is_due(entry.next_due.into_std(), entry.interval, now.into_std()) {
                // Wake when the first lock is due (not early): the tick then takes every lock due
                // within the slack along, which is what merges the ticks of many locks.
                let at = entry.next_due;
                wake = Some(wake.map_or(at, |w| w.min(at)));
                return true;
            }
            match renewal::renew_ttl(held.timing.ttl(), entry.hold_until.map(Instant::into_std), now.into_std(), Duration::ZERO) {
                Some(ttl) => {
                    due.push(Due { id, held, ttl });
                    true
                }
                None => {
                    debug!(resource = %held.resource, "hold cap reached; the lock expires with its validity");
                    false
                }
            }
        });
        state.stats.lost += lost;
        (due, wake)
    }

    /// Records what a tick did and schedules the next renewal of each lock.
    fn apply(&self, due: &[Due], outcomes: &[Outcome], retry_floor: Duration, now: Instant) {
        let mut state = self.state();
        for (d, outcome) in due.iter().zip(outcomes) {
            let Slot::Occupied(mut slot) = state.entries.entry(d.id) else {
                continue;
            };
            if slot.get().held.as_ptr() != Arc::as_ptr(&d.held) {
                continue;
            }
            let entry = slot.get_mut();
            match outcome {
                Outcome::Renewed { started } => entry.next_due = later(*started, entry.interval),
                Outcome::Busy => {
                    let delay = renewal::retry_delay(entry.interval, renewal::MIN_RENEW_INTERVAL);
                    entry.next_due = later(now, delay);
                }
                Outcome::Retry => {
                    entry.next_due = later(now, renewal::retry_delay(entry.interval, retry_floor));
                }
                Outcome::Stop => {
                    slot.remove();
                }
            }
        }
    }
}

impl Shared {
    /// Counts a tick that sent its batch to `masters` masters.
    fn record_tick(&self, tick: &batch::Tick, masters: usize) {
        if tick.sent == 0 {
            return;
        }
        let mut state = self.state();
        state.stats.ticks += 1;
        state.stats.lost += tick.lost;
        state.stats.renewals += tick.sent as u64;
        state.stats.pipelines += masters as u64;
    }
}

/// Clears the running flag when the task ends, however it ends (even with its runtime).
struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.state().running = false;
    }
}

/// The scheduler task: sleeps until a lock is due, renews every due lock in one batch, repeats.
async fn run(shared: Arc<Shared>, to: To) {
    let _running = Running(Arc::clone(&shared));
    let config = &to.config;
    let mut scripts = batch::Scripts::default();
    loop {
        let clock = &config.clock;
        let (due, wake) = shared.take_due(clock.now());
        if due.is_empty() {
            if shared.state().closed {
                return;
            }
            match wake {
                Some(at) => {
                    tokio::select! {
                        // In a fixed order: one seed, one history (the simulation runs this on a paused clock).
                        biased;
                        () = clock.sleep_until(at) => {}
                        () = shared.wake.notified() => {}
                    }
                }
                None => shared.wake.notified().await,
            }
            continue;
        }
        let (Some(masters), Some(health)) = (to.masters.upgrade(), to.health.upgrade()) else {
            return;
        };
        // Re-verifies masters that reconnected, so a process that only renews still counts them.
        crate::mechanisms::health::tick(&health, &masters, &to.names);
        let tick = batch::renew(&masters, &health, config, &mut scripts, &due).await;
        shared.record_tick(&tick, masters.len());
        if tick.sent >= RENEWAL_CONNECTION_RECYCLE {
            // Frees the write buffers this pipeline grew; the next tick opens them again.
            for link in masters.iter() {
                link.master().close_batch_connection();
            }
        }
        drop((masters, health));
        shared.apply(&due, &tick.outcomes, config.node_timeout, clock.now());
    }
}
