//! `with_lock` and [`Lock::with`]: run a piece of work under a lock (of any kind) that the watchdog
//! keeps alive, and stop the work the moment the lock is lost.
//!
//! This is the safe way to hold a lock for work of unknown length: the lock is acquired (waiting up
//! to the configured deadline), renewed in the background, and released when the work ends. If the
//! lock is lost first (a conflict, too many masters gone, a pause past the validity), the work's
//! future is dropped at its next await point and the caller gets [`WithLockError::LockLost`], so
//! the work never runs on unprotected.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{instrument, warn};

use crate::api::client::Quorlock;
use crate::api::lock::Lock;
use crate::base::error::{ReleaseError, WithLockError};
use crate::mechanisms::lease::Lease;

/// A cheap, clonable view of a lock held by [`Quorlock::with_lock`], handed to the work.
///
/// It owns what it refers to, so the work's future borrows nothing from the caller.
#[derive(Clone)]
pub struct LockHandle {
    held: Arc<Lease>,
}

impl fmt::Debug for LockHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockHandle")
            .field("resource", &self.held.resource)
            .field("lost", &self.held.is_lost())
            .finish_non_exhaustive()
    }
}

impl LockHandle {
    /// The resource name this lock is for.
    pub fn resource(&self) -> &str {
        &self.held.resource
    }

    /// The key set on every master.
    pub fn key(&self) -> &str {
        &self.held.key
    }

    /// This holder's random token.
    pub fn token(&self) -> &str {
        &self.held.token
    }

    /// The fencing token of a fenced lock ([`Lock::fenced`]); `None` for other kinds.
    pub fn fencing_token(&self) -> Option<u64> {
        self.held.fencing_token.get().copied()
    }

    /// The instant the lock stops being valid unless renewed, on the client's monotonic clock:
    /// tokio's, or the clock of the `Environment` the client was built with.
    pub fn valid_until(&self) -> Instant {
        self.held.valid_until()
    }

    /// The time left before the lock stops being valid unless renewed; zero once it has.
    pub fn validity(&self) -> Duration {
        self.held.validity()
    }

    /// Whether the lock is lost.
    pub fn is_lost(&self) -> bool {
        self.held.is_lost()
    }

    /// Waits until the lock is lost: as soon as it is known, at the latest when its last confirmed
    /// validity ends.
    pub async fn lost(&self) {
        self.held.lost().await;
    }
}

impl Quorlock {
    /// Acquires `resource` (waiting as configured), keeps it alive, runs `work`, and releases it:
    /// `lock(resource, ttl).with(work)`.
    ///
    /// ```no_run
    /// # async fn run(locks: quorlock::Quorlock) -> Result<(), quorlock::WithLockError> {
    /// use std::time::Duration;
    ///
    /// let rows = locks
    ///     .with_lock("reports:daily", Duration::from_secs(30), |lock| async move {
    ///         // Work of any length: the lock is renewed every 10 s while this runs, and this
    ///         // future is dropped if the lock is lost.
    ///         assert!(!lock.is_lost());
    ///         1234
    ///     })
    ///     .await?;
    /// # let _ = rows;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Lock::with`].
    pub async fn with_lock<F, Fut, T>(
        &self,
        resource: &str,
        ttl: Duration,
        work: F,
    ) -> Result<T, WithLockError>
    where
        F: FnOnce(LockHandle) -> Fut,
        Fut: Future<Output = T>,
    {
        self.lock(resource, ttl).with(work).await
    }
}

impl Lock<'_> {
    /// Acquires the lock (of any kind, waiting as this request says), keeps it alive (see
    /// [`Lock::keep_alive`]), runs `work`, and releases it.
    ///
    /// If the lock is lost while the work runs, the work's future is dropped and
    /// [`WithLockError::LockLost`] is returned. A release that could not be confirmed because
    /// masters were unreachable is only logged: the work finished while the lock was known held,
    /// and the leftover keys expire with their TTL.
    ///
    /// # Errors
    /// [`WithLockError::Acquire`] when the lock was not acquired (the work never ran);
    /// [`WithLockError::LockLost`] when it was lost during the work, or reached its hold cap (the
    /// work was cancelled); [`WithLockError::Release`] when the release found the lock had already
    /// expired on a majority, so the work may not have been protected to its end.
    #[instrument(skip_all, fields(resource = %self.label()))]
    pub async fn with<F, Fut, T>(self, work: F) -> Result<T, WithLockError>
    where
        F: FnOnce(LockHandle) -> Fut,
        Fut: Future<Output = T>,
    {
        let resource = self.label();
        let opts = self.keep_alive_options();
        let guard = self.acquire().await?;
        guard.keep_alive_with(opts);
        let clock = guard.lease().clock.clone();
        let started = clock.now();
        let work = work(LockHandle {
            held: Arc::clone(guard.lease()),
        });
        let output = tokio::select! {
            biased;
            () = guard.lost() => None,
            output = work => Some(output),
        };
        let Some(output) = output else {
            let held_for = clock.now().saturating_duration_since(started);
            warn!(
                held_for_ms = held_for.as_millis() as u64,
                "lock lost during the work; the work was cancelled"
            );
            // Clean up whatever is left of it; the outcome changes nothing for the caller.
            let _ = guard.release().await;
            return Err(WithLockError::LockLost { resource, held_for });
        };
        match guard.release().await {
            Ok(_) => Ok(output),
            Err(err @ ReleaseError::Unconfirmed { .. }) => {
                warn!(error = %err, "release after the work was not confirmed; leftover keys expire with their TTL");
                Ok(output)
            }
            Err(err) => Err(WithLockError::Release(err)),
        }
    }
}
