//! The plain acquire: `SET key token NX PX ttl` on every master, decided at the quorum, retried
//! until it wins or the wait is spent.
//!
//! The retrying acquire first queues on the local turn for the key (other tasks of this process
//! waiting for the same resource go after it, see `coalesce.rs`), then makes attempts; between
//! them it waits as the plain acquire's policy says: until the holder's release is announced, or
//! until the key expires on a majority, or a jittered delay when masters fail rather than refuse
//! (`retry/policy.rs`).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{field, instrument};

use super::{Guard, Inner, Quorlock};
use crate::core::Timing;
use crate::error::AcquireError;
use crate::names::ttl_millis;
use crate::ops::{LockOps, PlainLock};
use crate::retry::policy::{deadline, ReleaseOrExpiry, WaitSettings};
use crate::retry::retry;

impl Quorlock {
    /// Acquires `resource` for `ttl`, waiting until the attempt count or the wait deadline runs
    /// out.
    ///
    /// While another holder has it, the wait ends as soon as the holder releases (announced on
    /// the resource's release channel) or the key expires on a majority; other tasks of this
    /// process waiting for the same resource queue behind this one. See the builder's
    /// `wake_on_release` and `local_queue`.
    ///
    /// # Errors
    /// [`AcquireError::Input`] for a bad resource name or TTL (nothing is sent);
    /// [`AcquireError::Exhausted`] when every attempt failed, carrying the last round's failure;
    /// [`AcquireError::Queued`] when the deadline passed behind other tasks of this process;
    /// a non-retryable round failure (authentication, wrong key type) is returned at once.
    #[instrument(skip_all, fields(resource = %resource, attempt = field::Empty, ok = field::Empty, failed = field::Empty, validity_ms = field::Empty))]
    pub async fn acquire(&self, resource: &str, ttl: Duration) -> Result<Guard, AcquireError> {
        let timing = self.inner.check(resource, ttl)?;
        self.inner.acquire_waiting(resource, timing).await
    }

    /// Makes exactly one round for `resource`, with no retries.
    ///
    /// # Errors
    /// [`AcquireError::NoQuorum`] when a majority did not grant it, [`AcquireError::TooSlow`] when
    /// the majority came too late, [`AcquireError::Input`] for bad arguments.
    #[instrument(skip_all, fields(resource = %resource, attempt = 1, ok = field::Empty, failed = field::Empty, validity_ms = field::Empty))]
    pub async fn try_acquire(&self, resource: &str, ttl: Duration) -> Result<Guard, AcquireError> {
        let timing = self.inner.check(resource, ttl)?;
        let key = self.inner.names.shared_key(resource);
        self.inner.plain_round(resource, key, timing).await
    }
}

impl Inner {
    /// One plain round for `resource`, whose key is `key`.
    pub(crate) async fn plain_round(
        self: &Arc<Self>,
        resource: &str,
        key: Arc<str>,
        timing: Timing,
    ) -> Result<Guard, AcquireError> {
        let token = self.entropy.token()?;
        // Sized for its arguments up front: no buffer grows while it is built.
        let mut cmd = redis::Cmd::with_capacity(6, 40 + key.len() + token.len());
        cmd.arg("SET")
            .arg(&*key)
            .arg(&*token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_millis(timing.ttl()));
        let cmd = Arc::new(cmd);
        let ops: Arc<dyn LockOps> = Arc::new(PlainLock::sharing(&key, &token));
        self.acquire_round(resource, key, token, timing, ops, |link| {
            link.set_nx(Arc::clone(&cmd))
        })
        .await
    }

    /// The retrying acquire: local turn, attempts, and waits woken by release or by expiry.
    pub(crate) async fn acquire_waiting(
        self: &Arc<Self>,
        resource: &str,
        timing: Timing,
    ) -> Result<Guard, AcquireError> {
        let started = Instant::now();
        // One copy of the key serves the local queue, the rounds and the guard.
        let key = self.names.shared_key(resource);
        let turn = if self.config.local_queue {
            let until = deadline(started, self.config.retry);
            match tokio::time::timeout_at(until, self.queue.turn(&key)).await {
                Ok(turn) => Some(turn),
                Err(_) => {
                    return Err(AcquireError::Queued {
                        resource: resource.to_owned(),
                        waited: started.elapsed(),
                    })
                }
            }
        } else {
            None
        };
        let settings = WaitSettings {
            plan: self.config.retry,
            backoff: self.config.backoff,
            wake_on_release: self.config.wake_on_release,
            node_timeout: self.config.node_timeout,
        };
        let mut policy = ReleaseOrExpiry::new(
            settings,
            self.entropy.clone(),
            started,
            &self.waits,
            &self.masters,
            resource,
            &key,
        );
        let guard = retry(resource, started, &mut policy, || {
            self.plain_round(resource, Arc::clone(&key), timing)
        })
        .await?;
        if let Some(turn) = turn {
            guard.lease().hold_turn(turn);
        }
        Ok(guard)
    }
}
