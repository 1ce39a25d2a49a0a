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

use super::{Guard, Inner};
use crate::core::{RetryPlan, Timing};
use crate::error::AcquireError;
use crate::names::ttl_millis;
use crate::ops::{LockOps, PlainLock};
use crate::retry::policy::{deadline, ReleaseOrExpiry, WaitSettings};
use crate::retry::retry;

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

    /// The plain acquire of `resource`: retrying within `plan` (local turn, attempts, and waits
    /// woken by release or by expiry), or one round when `plan` is `None`.
    pub(crate) async fn acquire_plain(
        self: &Arc<Self>,
        resource: &str,
        ttl: Duration,
        plan: Option<RetryPlan>,
    ) -> Result<Guard, AcquireError> {
        let timing = self.check(resource, ttl)?;
        let Some(plan) = plan else {
            let key = self.names.shared_key(resource);
            return self.plain_round(resource, key, timing).await;
        };
        let clock = self.clock();
        let started = clock.now();
        // One copy of the key serves the local queue, the rounds and the guard.
        let key = self.names.shared_key(resource);
        let turn = if self.config.local_queue {
            let until = deadline(started, plan);
            match clock.timeout_at(until, self.queue.turn(&key)).await {
                Ok(turn) => Some(turn),
                Err(_) => {
                    return Err(AcquireError::Queued {
                        resource: resource.to_owned(),
                        waited: clock.now().saturating_duration_since(started),
                    })
                }
            }
        } else {
            None
        };
        let settings = WaitSettings {
            plan,
            backoff: self.config.backoff,
            wake_on_release: self.config.wake_on_release,
            node_timeout: self.config.node_timeout,
            clock: clock.clone(),
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
        let guard = retry(resource, clock, started, &mut policy, || {
            self.plain_round(resource, Arc::clone(&key), timing)
        })
        .await?;
        if let Some(turn) = turn {
            guard.lease().hold_turn(turn);
        }
        Ok(guard)
    }
}
