//! A held lock: its validity on the monotonic clock, extend, release, and release on drop.
//!
//! The guard knows when its validity ends (`valid_until`, an [`Instant`]), so `validity()` shrinks as
//! time passes and never depends on the wall clock. A failed extend marks the guard lost without
//! unlocking anywhere. Dropping a guard without `release()` releases it from a spawned task.
//!
//! The local turn passes as soon as the release is queued, not when it is confirmed.
//!
//! The next task in this process's queue for the key starts its acquire with `SET NX` on every
//! master, over the same shared connection per master that carries the release. Commands on one
//! multiplexed connection are written, and executed by the master, in the order they were handed
//! to it. The release of every master is handed to its connection (each request polled once)
//! before the turn passes, so on every master the release runs before the next `SET NX`: the next
//! attempt finds the key free wherever the release succeeds, without waiting a round trip for the
//! confirmations. Safety never depends on this: the masters decide who holds the lock. If the order
//! is lost (a reconnect between the two commands, a connection whose queue was full), the next
//! attempt finds the key held on that master and falls back to the usual wait for the release's
//! announcement or the key's expiry.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tracing::{field, instrument, Span};

use crate::coalesce::Turn;
use crate::coordinator::{spawn_release, ttl_millis, Inner, Releasing};
use crate::core::{Decision, Tally};
use crate::error::{ExtendError, ReleaseError, Released};
use crate::fanout::Fanout;
use crate::ops::LockOps;

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
pub(crate) struct Held {
    pub(crate) inner: Arc<Inner>,
    pub(crate) resource: String,
    pub(crate) key: Arc<str>,
    pub(crate) token: Arc<str>,
    /// How this kind of lock is extended and released.
    pub(crate) ops: Arc<dyn LockOps>,
    /// The TTL the lock was acquired with; the watchdog renews to it.
    pub(crate) ttl: Duration,
    pub(crate) status: StatusCell,
    /// The fencing token, for a lock taken with a fenced acquire.
    pub(crate) fencing_token: std::sync::OnceLock<u64>,
    /// Serializes extends of the same guard (and watchdog renewals of it) so validity only moves
    /// with confirmed rounds.
    pub(crate) extend_lock: tokio::sync::Mutex<()>,
    released: Mutex<bool>,
    /// This task's turn in the process's local queue for the key, held until the release is done.
    turn: Mutex<Option<Turn>>,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token stays out: whoever has it can release the lock.
        f.debug_struct("Held")
            .field("resource", &self.resource)
            .field("key", &self.key)
            .field("ttl", &self.ttl)
            .field("status", &self.status.get())
            .field("fencing_token", &self.fencing_token.get())
            .finish_non_exhaustive()
    }
}

/// A lock held on a majority of masters. Release it with [`Guard::release`].
#[derive(Debug)]
#[must_use = "dropping a guard releases the lock at once (from a background task)"]
pub struct Guard {
    pub(crate) held: Arc<Held>,
}

impl Guard {
    pub(crate) fn new(
        inner: Arc<Inner>,
        resource: String,
        key: Arc<str>,
        token: Arc<str>,
        ops: Arc<dyn LockOps>,
        ttl: Duration,
        valid_until: Instant,
    ) -> Self {
        let status = StatusCell::new(Status {
            valid_until,
            lost: false,
        });
        Self {
            held: Arc::new(Held {
                inner,
                resource,
                key,
                token,
                ops,
                ttl,
                status,
                fencing_token: std::sync::OnceLock::new(),
                extend_lock: tokio::sync::Mutex::new(()),
                released: Mutex::new(false),
                turn: Mutex::new(None),
            }),
        }
    }

    /// The resource name this lock is for.
    pub fn resource(&self) -> &str {
        &self.held.resource
    }

    /// The key set on every master (the resource with the configured prefix); for a
    /// multi-resource lock, its keys as one label, `{key1, key2}`.
    pub fn key(&self) -> &str {
        &self.held.key
    }

    /// Every resource this lock covers: the set of a multi-resource lock, else the one resource.
    pub fn resources(&self) -> Vec<&str> {
        match self.held.ops.resources() {
            Some(all) => all.iter().map(String::as_str).collect(),
            None => vec![self.held.resource.as_str()],
        }
    }

    /// For a reentrant lock, the owner's hold count on a majority of masters once this hold was
    /// taken (1 for a first hold); `None` for other kinds.
    pub fn holds(&self) -> Option<u64> {
        self.held.ops.holds()
    }

    /// This holder's random token, the value stored under the key.
    pub fn token(&self) -> &str {
        &self.held.token
    }

    /// The monotonic instant the lock stops being valid.
    pub fn valid_until(&self) -> Instant {
        self.held.valid_until()
    }

    /// The time left before the lock stops being valid; zero once it has.
    pub fn validity(&self) -> Duration {
        self.held.validity()
    }

    /// Whether the lock is lost: a failed extend or a conflict said so, or its validity ran out.
    pub fn is_lost(&self) -> bool {
        self.held.is_lost()
    }

    /// Waits until the lock is lost: as soon as it is known, and at the latest when the last
    /// confirmed validity ends.
    pub async fn lost(&self) {
        self.held.lost().await;
    }

    /// Extends the lock to `ttl` from now on every master; the validity is recomputed from this
    /// round's start.
    ///
    /// Counts its majority over all N masters. On failure the guard is marked lost, and nothing is
    /// unlocked.
    ///
    /// # Errors
    /// [`ExtendError::Lost`] without a majority, [`ExtendError::Expired`] when the validity had
    /// already ended, [`ExtendError::AlreadyLost`] for a lost guard, [`ExtendError::Input`] for a
    /// bad TTL (the lock is unchanged then).
    #[instrument(skip_all, fields(resource = %self.held.resource, ok = field::Empty, failed = field::Empty, validity_ms = field::Empty))]
    pub async fn extend(&self, ttl: Duration) -> Result<Duration, ExtendError> {
        let held = &self.held;
        let timing = held.inner.check_ttl(ttl)?;
        // Re-verifies masters that reconnected, so a process that only extends still counts them.
        crate::health::tick(&held.inner);
        let _serial = held.extend_lock.lock().await;
        let status = held.status.get();
        if status.lost {
            return Err(ExtendError::AlreadyLost {
                resource: held.resource.clone(),
            });
        }
        if Instant::now() >= status.valid_until {
            held.mark_lost();
            return Err(ExtendError::Expired {
                resource: held.resource.clone(),
            });
        }
        let cmd = match held.ops.extend_call(ttl_millis(ttl)) {
            Some(call) => Ok(call),
            None => Err(held.ops.extend_cmd(ttl_millis(ttl))),
        };
        let started = Instant::now();
        let mut tally = Tally::new(held.inner.nodes.len(), timing, started);
        let mut pending: Fanout<_> = held
            .inner
            .nodes
            .iter()
            .map(|node| {
                let cmd = &cmd;
                async move {
                    (
                        node.index(),
                        match cmd {
                            Ok(call) => node.run_script(call).await,
                            Err(cmd) => node.script(cmd).await,
                        }
                        .and_then(|found| found.into_result()),
                    )
                }
            })
            .collect();
        let mut failures = Vec::new();
        let decision = held.inner.decide(&mut tally, &mut pending, &mut failures).await;
        match decision {
            Decision::Acquired {
                validity,
                valid_until,
            } => {
                held.status.set_valid_until(valid_until);
                Ok(validity)
            }
            _ => {
                held.mark_lost();
                failures.sort_by_key(|f| f.node);
                Err(ExtendError::Lost {
                    resource: held.resource.clone(),
                    extended: tally.yes(),
                    required: tally.required(),
                    masters: tally.masters(),
                    failures,
                })
            }
        }
    }

    /// Releases the lock on all N masters and reports how many still held our token.
    ///
    /// # Errors
    /// [`ReleaseError::Expired`] when fewer than a majority still held it: the lock had expired, and
    /// the protected data may have been touched by another holder. [`ReleaseError::Unconfirmed`]
    /// when too many masters were unreachable to tell (their keys expire with the TTL).
    #[instrument(skip_all, fields(resource = %self.held.resource, held = field::Empty))]
    pub async fn release(self) -> Result<Released, ReleaseError> {
        let held = Arc::clone(&self.held);
        held.set_released();
        // From here on, dropping this future part-way still releases from a task.
        let mut net = ReleaseNet(Some(Arc::clone(&held)));
        // The next waiter of this process may go as soon as the release is queued on every
        // master's connection, before any reply (the ordering argument is at the top of this file).
        let out = held
            .inner
            .release_all(held.ops.as_ref(), || drop(held.take_turn()))
            .await;
        net.0 = None;
        drop(self);
        held.mark_lost();
        drop(held.take_turn());
        Span::current().record("held", out.held);
        crate::by_token::verdict(out, &held.resource, held.inner.nodes.len())
    }
}

impl Held {
    /// The monotonic instant the lock stops being valid unless renewed.
    pub(crate) fn valid_until(&self) -> Instant {
        self.status.get().valid_until
    }

    /// The time left before the lock stops being valid; zero once it has.
    pub(crate) fn validity(&self) -> Duration {
        self.valid_until().saturating_duration_since(Instant::now())
    }

    /// Whether the lock is known lost or its validity ran out.
    pub(crate) fn is_lost(&self) -> bool {
        let status = self.status.get();
        status.lost || Instant::now() + LOST_TIMER_LEAD >= status.valid_until
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
            let deadline = tokio::time::Instant::from_std(early);
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {
                    // The deadline may have moved while we slept (an extend); look again.
                    if Instant::now() + LOST_TIMER_LEAD >= self.status.get().valid_until {
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

    fn set_released(&self) {
        *self.released.lock().unwrap_or_else(PoisonError::into_inner) = true;
    }

    pub(crate) fn is_released(&self) -> bool {
        *self.released.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps this process's turn for the key until the lock is released.
    pub(crate) fn hold_turn(&self, turn: Turn) {
        *self.turn.lock().unwrap_or_else(PoisonError::into_inner) = Some(turn);
    }

    fn take_turn(&self) -> Option<Turn> {
        self.turn.lock().unwrap_or_else(PoisonError::into_inner).take()
    }

    fn release_in_background(self: &Arc<Self>) {
        let all: Vec<usize> = (0..self.inner.nodes.len()).collect();
        let turn = self.take_turn();
        match (turn, tokio::runtime::Handle::try_current()) {
            // Pass the turn on once the release is queued (see the top of this file).
            (Some(turn), Ok(runtime)) => {
                let (inner, ops) = (Arc::clone(&self.inner), Arc::clone(&self.ops));
                self.inner.background.spawn_on(&runtime, async move {
                    inner
                        .release_on_queued(ops.as_ref(), &all, || drop(turn))
                        .await
                        .report_unawaited();
                });
            }
            _ => spawn_release(
                Arc::clone(&self.inner),
                Arc::clone(&self.ops),
                all,
                Releasing::Held,
            ),
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.held.is_released() {
            self.held.set_released();
            self.held.mark_lost();
            self.held.release_in_background();
        }
    }
}

/// Releases from a task if a `release()` future is dropped before its fan-out finished.
struct ReleaseNet(Option<Arc<Held>>);

impl Drop for ReleaseNet {
    fn drop(&mut self) {
        if let Some(held) = self.0.take() {
            held.release_in_background();
        }
    }
}
