//! A held lock: its validity on the monotonic clock, extend, release, and release on drop.
//!
//! The guard holds the lock's lease (`lease.rs`): when its validity ends, on tokio's monotonic
//! clock, and whether it is known lost. Extend is one round over every master (`round.rs`), and
//! release is the release mechanism's (`release.rs`). A failed extend marks the guard lost without
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

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::time::Instant;
use tracing::{field, instrument, Span};

use super::Inner;
use crate::base::error::{ExtendError, ReleaseError, Released};
use crate::base::lua::Found;
use crate::base::metrics::{self, Cause};
use crate::base::names::ttl_millis;
use crate::core::release::verdict;
use crate::core::Decision;
use crate::mechanisms::lease::Lease;
use crate::mechanisms::release::{report_unawaited, Release, Releasing};
use crate::mechanisms::round::Read;
use crate::mechanisms::watchdog::KeepAlive;

/// A lock held on a majority of masters. Release it with [`Guard::release`].
#[derive(Debug)]
#[must_use = "dropping a guard releases the lock at once (from a background task)"]
pub struct Guard {
    client: Arc<Inner>,
    lease: Arc<Lease>,
}

impl Guard {
    /// The guard of `lease`, held through `client`.
    pub(crate) fn new(client: Arc<Inner>, lease: Lease) -> Self {
        Self {
            client,
            lease: Arc::new(lease),
        }
    }

    /// The lease this guard holds, shared with whatever watches it.
    pub(crate) fn lease(&self) -> &Arc<Lease> {
        &self.lease
    }

    /// The fencing token of a lock taken with [`crate::Lock::fenced`]; `None` for a
    /// plain lock.
    ///
    /// Tokens of successive holders of any resource on these masters strictly increase.
    pub fn fencing_token(&self) -> Option<u64> {
        self.lease.fencing_token.get().copied()
    }

    /// Keeps the lock alive in the background, renewing it every `ttl / 3` until it is released,
    /// dropped or lost. Calling it again changes nothing.
    ///
    /// Needs a Tokio runtime; outside one it only logs a warning.
    pub fn keep_alive(&self) {
        self.client.watchdog.watch(&self.lease, None);
    }

    /// Keeps the lock alive with the given options; calling it again replaces them.
    pub fn keep_alive_with(&self, opts: KeepAlive) {
        self.client.watchdog.watch(&self.lease, Some(opts));
    }

    /// The resource name this lock is for.
    pub fn resource(&self) -> &str {
        &self.lease.resource
    }

    /// The key set on every master (the resource with the configured prefix); for a
    /// multi-resource lock, its keys as one label, `{key1, key2}`.
    pub fn key(&self) -> &str {
        &self.lease.key
    }

    /// Every resource this lock covers: the set of a multi-resource lock, else the one resource.
    pub fn resources(&self) -> Vec<&str> {
        match self.lease.ops.resources() {
            Some(all) => all.iter().map(String::as_str).collect(),
            None => vec![self.lease.resource.as_str()],
        }
    }

    /// For a reentrant lock, the owner's hold count on a majority of masters once this hold was
    /// taken (1 for a first hold); `None` for other kinds.
    pub fn holds(&self) -> Option<u64> {
        self.lease.ops.holds()
    }

    /// For a semaphore's permit, the slot it holds (0-based, below the permits); `None` for other
    /// kinds.
    pub fn permit(&self) -> Option<u32> {
        self.lease.ops.permit()
    }

    /// For a read-write lock, whether this is a read hold (`Some(true)`) or the write hold
    /// (`Some(false)`); `None` for other kinds.
    pub fn is_read(&self) -> Option<bool> {
        self.lease.ops.is_read()
    }

    /// This holder's random token, the value stored under the key.
    pub fn token(&self) -> &str {
        &self.lease.token
    }

    /// The instant the lock stops being valid, on the client's monotonic clock: tokio's, or the
    /// clock of the `Environment` the client was built with.
    pub fn valid_until(&self) -> Instant {
        self.lease.valid_until()
    }

    /// The time left before the lock stops being valid; zero once it has.
    pub fn validity(&self) -> Duration {
        self.lease.validity()
    }

    /// Whether the lock is lost: a failed extend or a conflict said so, or its validity ran out.
    pub fn is_lost(&self) -> bool {
        self.lease.is_lost()
    }

    /// Waits until the lock is lost: as soon as it is known, and at the latest when the last
    /// confirmed validity ends.
    pub async fn lost(&self) {
        self.lease.lost().await;
    }

    /// Extends the lock to `ttl` from now on every master; the validity is recomputed from this
    /// round's start. A lock taken with a lock-delay keeps it: its key is set for `ttl` plus the
    /// delay.
    ///
    /// Counts its majority over all N masters. On failure the guard is marked lost, and nothing is
    /// unlocked.
    ///
    /// # Errors
    /// [`ExtendError::Lost`] without a majority, [`ExtendError::Expired`] when the validity had
    /// already ended, [`ExtendError::AlreadyLost`] for a lost guard, [`ExtendError::Input`] for a
    /// bad TTL (the lock is unchanged then).
    #[instrument(skip_all, fields(resource = %self.lease.resource, ok = field::Empty, failed = field::Empty, validity_ms = field::Empty))]
    pub async fn extend(&self, ttl: Duration) -> Result<Duration, ExtendError> {
        let lease = &self.lease;
        // The key keeps the lock-delay the lock was taken with.
        let timing = self.client.check_ttl(ttl, Some(lease.timing.lock_delay()))?;
        let round = self.client.round();
        // Re-verifies masters that reconnected, so a process that only extends still counts them.
        round.check_health();
        let _serial = lease.extend_lock.lock().await;
        let status = lease.status.get();
        if status.lost {
            return Err(ExtendError::AlreadyLost {
                resource: lease.resource.clone(),
            });
        }
        if lease.clock.now() >= status.valid_until {
            lease.lose(Cause::Expired);
            return Err(ExtendError::Expired {
                resource: lease.resource.clone(),
            });
        }
        let call = lease.ops.extend(ttl_millis(timing.key_ttl()));
        let mut votes = round.votes::<()>(timing);
        let mut pending = round.fan_out(|link| {
            link.call(&call)
                .map(|reply| Read::vote(reply.and_then(Found::from_reply).and_then(Found::into_result)))
        });
        match round.decide(&mut votes, &mut pending).await {
            Decision::Acquired {
                validity,
                valid_until,
            } => {
                lease.status.set_valid_until(Instant::from_std(valid_until));
                Ok(validity)
            }
            _ => {
                lease.lose(Cause::ExtendFailed);
                Err(votes.extend_error(&lease.resource))
            }
        }
    }

    /// Releases the lock on all N masters and reports how many still held our token.
    ///
    /// # Errors
    /// [`ReleaseError::Expired`] when fewer than a majority still held it: the lock had expired, and
    /// the protected data may have been touched by another holder. [`ReleaseError::Unconfirmed`]
    /// when too many masters were unreachable to tell (their keys expire with the TTL).
    #[instrument(skip_all, fields(resource = %self.lease.resource, held = field::Empty))]
    pub async fn release(self) -> Result<Released, ReleaseError> {
        let (client, lease) = (Arc::clone(&self.client), Arc::clone(&self.lease));
        // Whether the holder's own clock says the lock had expired when its release went out.
        let expired = lease.clock.now() >= lease.valid_until();
        let known_lost = lease.status.get().lost;
        lease.set_released();
        // From here on, dropping this future part-way still releases from a task.
        let mut net = ReleaseNet(Some((Arc::clone(&client), Arc::clone(&lease))));
        // The next waiter of this process may go as soon as the release is queued on every
        // master's connection, before any reply (the ordering argument is at the top of this file).
        let out = client
            .release()
            .everywhere(lease.ops.as_ref(), || drop(lease.take_turn()))
            .await;
        net.0 = None;
        drop(self);
        lease.mark_lost();
        drop(lease.take_turn());
        Span::current().record("held", out.held);
        let result = verdict(out, &lease.resource, client.masters().len(), expired);
        if !known_lost {
            match &result {
                Err(ReleaseError::Expired { .. }) => metrics::lost(Cause::Expired),
                Err(ReleaseError::TakenOver { .. }) => metrics::lost(Cause::TakenOver),
                Err(ReleaseError::Absent { .. }) => metrics::lost(Cause::Vanished),
                _ => {}
            }
        }
        result
    }
}

/// Releases `lease` on every master from a task: a guard dropped without `release()`, or a
/// release whose future was dropped part-way.
fn release_in_background(client: &Inner, lease: &Lease) {
    let all: Vec<usize> = (0..client.masters().len()).collect();
    let turn = lease.take_turn();
    match (turn, tokio::runtime::Handle::try_current()) {
        // Pass the turn on once the release is queued (see the top of this file).
        (Some(turn), Ok(runtime)) => {
            let (masters, background) = (Arc::clone(client.masters()), client.background().clone());
            let ops = Arc::clone(&lease.ops);
            client.background().spawn_on(&runtime, async move {
                let release = Release {
                    masters: &masters,
                    background: &background,
                };
                let out = release.on_queued(ops.as_ref(), &all, || drop(turn)).await;
                report_unawaited(&out);
            });
        }
        _ => client
            .release()
            .spawn(Arc::clone(&lease.ops), all, Releasing::Held),
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.lease.is_released() {
            self.lease.set_released();
            self.lease.mark_lost();
            release_in_background(&self.client, &self.lease);
        }
    }
}

/// Releases from a task if a `release()` future is dropped before its fan-out finished.
struct ReleaseNet(Option<(Arc<Inner>, Arc<Lease>)>);

impl Drop for ReleaseNet {
    fn drop(&mut self) {
        if let Some((client, lease)) = self.0.take() {
            release_in_background(&client, &lease);
        }
    }
}
