//! A held lock's state, shared by its guard and whatever watches it: the lock's names and token,
//! how its kind extends and releases it, and what the holder knows about its validity.
//!
//! The lease knows when its validity ends (`valid_until`, on tokio's monotonic clock), so
//! `validity()` shrinks as time passes and never depends on the wall clock. A failed extend or a
//! failed renewal marks it lost, and everyone waiting on [`Lease::lost`] wakes at once; at the
//! latest, `lost()` fires when the last confirmed validity ends. The guard, the watchdog and
//! `with_lock`'s handle all hold the same lease, so what one learns the others see.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::base::metrics::{self, Cause};
use crate::core::Timing;
use crate::mechanisms::coalesce::Turn;
use crate::mechanisms::ops::LockOps;
use crate::seam::clock::{later, Clock};

/// How much earlier than the end of validity the lock counts as lost (`is_lost()`, `lost()`):
/// timers fire up to a tick late, and the signal must never be.
const LOST_TIMER_LEAD: Duration = Duration::from_millis(5);

/// What the holder knows about its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Status {
    /// When the last confirmed validity ends.
    pub(crate) valid_until: Instant,
    /// Whether the lock is known to be lost (a failed extend, a conflict).
    pub(crate) lost: bool,
}

/// The holder's [`Status`] and a wake-up for whoever waits on it (`lost()`), inline in the held
/// lock. A Tokio `watch` channel would allocate about 350 bytes more per held lock (its sender and
/// receiver notifiers), the largest single cost of a lock kept alive by the watchdog.
pub(crate) struct StatusCell {
    value: Mutex<Status>,
    changed: Notify,
}

impl StatusCell {
    fn new(status: Status) -> Self {
        Self {
            value: Mutex::new(status),
            changed: Notify::new(),
        }
    }

    /// The status now.
    pub(crate) fn get(&self) -> Status {
        *self.value.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the status with `change`, which says whether it changed anything; waiters wake
    /// when it did.
    fn modify(&self, change: impl FnOnce(&mut Status) -> bool) {
        let changed = change(&mut self.value.lock().unwrap_or_else(PoisonError::into_inner));
        if changed {
            self.changed.notify_waiters();
        }
    }

    /// A confirmed round moved the end of validity.
    pub(crate) fn set_valid_until(&self, valid_until: Instant) {
        self.modify(|s| {
            s.valid_until = valid_until;
            true
        });
    }
}

/// The state a guard shares with anything that watches it.
pub(crate) struct Lease {
    pub(crate) resource: String,
    pub(crate) key: Arc<str>,
    pub(crate) token: Arc<str>,
    /// How this kind of lock is extended and released.
    pub(crate) ops: Arc<dyn LockOps>,
    /// The timing the lock was acquired with: its TTL, which the watchdog renews to, its drift
    /// allowance, and its lock-delay, which every extend and renewal keeps.
    pub(crate) timing: Timing,
    pub(crate) status: StatusCell,
    /// The fencing token, for a lock taken with a fenced acquire.
    pub(crate) fencing_token: std::sync::OnceLock<u64>,
    /// Serializes extends of the same guard (and watchdog renewals of it) so validity only moves
    /// with confirmed rounds.
    pub(crate) extend_lock: tokio::sync::Mutex<()>,
    released: Mutex<bool>,
    /// Its place in the watchdog's schedule, once kept alive.
    pub(crate) watched: std::sync::OnceLock<u64>,
    /// This task's turn in the process's local queue for the key, held until the release is done.
    turn: Mutex<Option<Turn>>,
    /// The lock in the held-locks gauge, until it is released.
    held: metrics::Held,
    /// The client's clock, which `valid_until` is on.
    pub(crate) clock: Clock,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token stays out: whoever has it can release the lock.
        f.debug_struct("Lease")
            .field("resource", &self.resource)
            .field("key", &self.key)
            .field("timing", &self.timing)
            .field("status", &self.status.get())
            .field("fencing_token", &self.fencing_token.get())
            .finish_non_exhaustive()
    }
}

impl Lease {
    /// A lease of `resource` (under `key`, for `token`) taken with `timing`, valid until
    /// `valid_until` on `clock`.
    pub(crate) fn new(
        resource: String,
        key: Arc<str>,
        token: Arc<str>,
        ops: Arc<dyn LockOps>,
        timing: Timing,
        valid_until: Instant,
        clock: Clock,
    ) -> Self {
        Self {
            resource,
            key,
            token,
            ops,
            timing,
            status: StatusCell::new(Status {
                valid_until,
                lost: false,
            }),
            fencing_token: std::sync::OnceLock::new(),
            extend_lock: tokio::sync::Mutex::new(()),
            released: Mutex::new(false),
            watched: std::sync::OnceLock::new(),
            turn: Mutex::new(None),
            held: metrics::Held::start(),
            clock,
        }
    }
}

impl Lease {
    /// The monotonic instant the lock stops being valid unless renewed.
    pub(crate) fn valid_until(&self) -> Instant {
        self.status.get().valid_until
    }

    /// The time left before the lock stops being valid; zero once it has.
    pub(crate) fn validity(&self) -> Duration {
        self.valid_until().saturating_duration_since(self.clock.now())
    }

    /// Whether the lock is known lost or its validity ran out.
    pub(crate) fn is_lost(&self) -> bool {
        let status = self.status.get();
        status.lost || later(self.clock.now(), LOST_TIMER_LEAD) >= status.valid_until
    }

    /// Waits until the lock is known lost or its last confirmed validity ends.
    pub(crate) async fn lost(&self) {
        loop {
            let changed = self.status.changed.notified();
            tokio::pin!(changed);
            // Registered before the status is read: a change after the read still wakes us.
            changed.as_mut().enable();
            let status = self.status.get();
            if status.lost {
                return;
            }
            // Timers fire up to a tick late; aim a little early so the signal is never late.
            let early = status
                .valid_until
                .checked_sub(LOST_TIMER_LEAD)
                .unwrap_or(status.valid_until);
            let deadline = early;
            tokio::select! {
                // In a fixed order: one seed, one history (the simulation runs this on a paused clock).
                biased;
                () = self.clock.sleep_until(deadline) => {
                    // The deadline may have moved while we slept (an extend); look again.
                    if later(self.clock.now(), LOST_TIMER_LEAD) >= self.status.get().valid_until {
                        return;
                    }
                }
                () = &mut changed => {}
            }
        }
    }

    /// Marks the lock lost and wakes everyone waiting on `lost()`.
    pub(crate) fn mark_lost(&self) {
        self.status.modify(|s| !std::mem::replace(&mut s.lost, true));
    }

    /// Marks the lock lost, found so for `cause` while held: counted once per lock, before anyone
    /// waiting on `lost()` wakes.
    pub(crate) fn lose(&self, cause: Cause) {
        let held = !self.is_released();
        self.status.modify(|s| {
            let newly = !std::mem::replace(&mut s.lost, true);
            if newly && held {
                metrics::lost(cause);
            }
            newly
        });
    }

    pub(crate) fn set_released(&self) {
        *self.released.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.held.end();
    }

    pub(crate) fn is_released(&self) -> bool {
        *self.released.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps this process's turn for the key until the lock is released.
    pub(crate) fn hold_turn(&self, turn: Turn) {
        *self.turn.lock().unwrap_or_else(PoisonError::into_inner) = Some(turn);
    }

    pub(crate) fn take_turn(&self) -> Option<Turn> {
        self.turn.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}
