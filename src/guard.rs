//! A held lock: its validity on the monotonic clock, extend, release, and release on drop.
//!
//! The guard knows when its validity ends (`valid_until`, an [`Instant`]), so `validity()` shrinks as
//! time passes and never depends on the wall clock. A failed extend marks the guard lost without
//! unlocking anywhere. Dropping a guard without `release()` releases it from a spawned task.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::stream::FuturesUnordered;
use tokio::sync::watch;
use tracing::{field, instrument, Span};

use crate::coordinator::{spawn_release, ttl_millis, Inner};
use crate::core::{quorum, Decision, Tally};
use crate::error::{ExtendError, NodeErrorKind, ReleaseError, Released};
use crate::ops::LockOps;

/// What the holder knows about its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Status {
    /// When the last confirmed validity ends.
    pub(crate) valid_until: Instant,
    /// Whether the lock is known to be lost (a failed extend, a conflict).
    pub(crate) lost: bool,
}

/// The state a guard shares with anything that watches it.
#[derive(Debug)]
pub(crate) struct Held {
    pub(crate) inner: Arc<Inner>,
    pub(crate) resource: String,
    pub(crate) key: String,
    pub(crate) token: String,
    /// How this kind of lock is extended and released.
    pub(crate) ops: Arc<dyn LockOps>,
    pub(crate) status: watch::Sender<Status>,
    /// The fencing token, for a lock taken with a fenced acquire.
    pub(crate) fencing_token: std::sync::OnceLock<u64>,
    /// Serializes extends of the same guard so validity only moves with confirmed rounds.
    extend_lock: tokio::sync::Mutex<()>,
    released: Mutex<bool>,
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
        key: String,
        token: String,
        ops: Arc<dyn LockOps>,
        valid_until: Instant,
    ) -> Self {
        let (status, _) = watch::channel(Status {
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
                status,
                fencing_token: std::sync::OnceLock::new(),
                extend_lock: tokio::sync::Mutex::new(()),
                released: Mutex::new(false),
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
        self.held.status.borrow().valid_until
    }

    /// The time left before the lock stops being valid; zero once it has.
    pub fn validity(&self) -> Duration {
        self.valid_until().saturating_duration_since(Instant::now())
    }

    /// Whether the lock is lost: a failed extend or a conflict said so, or its validity ran out.
    pub fn is_lost(&self) -> bool {
        let status = *self.held.status.borrow();
        status.lost || Instant::now() >= status.valid_until
    }

    /// Waits until the lock is lost: as soon as it is known, and at the latest when the last
    /// confirmed validity ends.
    pub async fn lost(&self) {
        let mut rx = self.held.status.subscribe();
        loop {
            let status = *rx.borrow_and_update();
            if status.lost {
                return;
            }
            let deadline = tokio::time::Instant::from_std(status.valid_until);
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {
                    // The deadline may have moved while we slept (an extend); look again.
                    if Instant::now() >= rx.borrow().valid_until {
                        return;
                    }
                }
                changed = rx.changed() => if changed.is_err() { return },
            }
        }
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
        let _serial = held.extend_lock.lock().await;
        let status = *held.status.borrow();
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
        let cmd = held.ops.extend_cmd(ttl_millis(ttl));
        let started = Instant::now();
        let mut tally = Tally::new(held.inner.nodes.len(), timing, started);
        let mut pending: FuturesUnordered<_> = held
            .inner
            .nodes
            .iter()
            .map(|node| {
                let cmd = &cmd;
                async move {
                    (
                        node.index(),
                        node.script(cmd).await.and_then(|found| found.into_result()),
                    )
                }
            })
            .collect();
        let mut failures = Vec::new();
        let decision = held.inner.decide(&mut tally, &mut pending, &mut failures).await;
        let span = Span::current();
        span.record("ok", tally.yes());
        span.record("failed", tally.no());
        match decision {
            Decision::Acquired {
                validity,
                valid_until,
            } => {
                span.record("validity_ms", validity.as_millis() as u64);
                held.status.send_modify(|s| s.valid_until = valid_until);
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
        let out = held.inner.release_all(held.ops.as_ref()).await;
        net.0 = None;
        drop(self);
        held.mark_lost();
        Span::current().record("held", out.held);
        let masters = held.inner.nodes.len();
        let required = quorum(masters);
        let mut failures = out.not_held;
        failures.extend(out.errors.iter().cloned());
        failures.sort_by_key(|f| f.node);
        if out.held >= required {
            return Ok(Released {
                held: out.held,
                masters,
                failures,
            });
        }
        let unreachable = out
            .errors
            .iter()
            .filter(|f| f.kind != NodeErrorKind::WrongType)
            .count();
        let resource = held.resource.clone();
        if out.held + unreachable >= required {
            Err(ReleaseError::Unconfirmed {
                resource,
                held: out.held,
                required,
                masters,
                failures,
            })
        } else {
            Err(ReleaseError::Expired {
                resource,
                held: out.held,
                required,
                masters,
                failures,
            })
        }
    }
}

impl Held {
    /// Marks the lock lost and wakes everyone waiting on `lost()`.
    pub(crate) fn mark_lost(&self) {
        self.status
            .send_if_modified(|s| !std::mem::replace(&mut s.lost, true));
    }

    fn set_released(&self) {
        *self.released.lock().unwrap_or_else(PoisonError::into_inner) = true;
    }

    fn is_released(&self) -> bool {
        *self.released.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn release_in_background(self: &Arc<Self>) {
        let all = (0..self.inner.nodes.len()).collect();
        spawn_release(Arc::clone(&self.inner), Arc::clone(&self.ops), all);
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
