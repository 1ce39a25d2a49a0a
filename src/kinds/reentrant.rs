//! The reentrant lock: an explicit owner may hold the same lock several times at once.
//!
//! Async Rust has no thread identity to reuse, so the owner is explicit: a [`LockOwner`] that the
//! caller passes to every acquire. On each master the lock is a hash holding the owner's hold count
//! and one field per hold. Acquiring again with the same owner adds a hold and increments the count;
//! releasing a hold removes it and decrements the count; the last release deletes the hash and
//! announces it on the release channel. Another owner is refused while any hold is left.
//!
//! Each hold is identified by its own random token, so a retried or repeated release removes that
//! hold at most once, and the masters agree on what is held even when a hold reached only some of
//! them. Quorum, validity and release are the plain lock's: every hold is its own [`Guard`].

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;

use crate::client::{Guard, Inner};
use crate::core::kinds::majority_count;
use crate::core::{RetryPlan, Timing};
use crate::error::{AcquireError, InputError, NodeErrorKind};
use crate::link::Call;
use crate::lua::{
    eval, int_reply, ScriptCall, REENTRANT_ACQUIRE as ACQUIRE, REENTRANT_EXTEND as EXTEND,
    REENTRANT_RELEASE as RELEASE,
};
use crate::names::{release_channel, ttl_millis, REENTRANT_TAG};
use crate::ops::LockOps;
use crate::token::Entropy;

/// Who holds a reentrant lock: holds taken with equal owners re-enter, others exclude each other.
///
/// Share one owner between the tasks that may re-enter each other's critical section (typically a
/// task and the calls it makes), and give unrelated work its own.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LockOwner(Arc<str>);

impl LockOwner {
    /// A fresh owner with a random 128-bit identity.
    pub fn new() -> Self {
        Self(Arc::from(Entropy::Os.id()))
    }

    /// The owner's identity as stored on the masters.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for LockOwner {
    fn default() -> Self {
        Self::new()
    }
}

impl From<String> for LockOwner {
    fn from(id: String) -> Self {
        Self(Arc::from(id))
    }
}

impl From<&str> for LockOwner {
    fn from(id: &str) -> Self {
        Self(Arc::from(id))
    }
}

impl fmt::Display for LockOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for LockOwner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockOwner({:?})", &*self.0)
    }
}

/// One hold of a reentrant lock: how it is extended and released.
pub(crate) struct ReentrantHold {
    key: Arc<str>,
    owner_field: String,
    hold_field: String,
    channel: String,
    /// The owner's hold count on a majority of masters when this hold was taken (0 until then).
    holds: AtomicU64,
}

impl fmt::Debug for ReentrantHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The hold field carries the hold's token: whoever has it can extend or release the hold.
        f.debug_struct("ReentrantHold")
            .field("key", &self.key)
            .field("owner_field", &self.owner_field)
            .field("holds", &self.holds.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl ReentrantHold {
    fn new(key: &Arc<str>, owner: &LockOwner, token: &str) -> Self {
        Self {
            key: Arc::clone(key),
            owner_field: format!("o:{owner}"),
            hold_field: format!("h:{token}"),
            channel: release_channel(key),
            holds: AtomicU64::new(0),
        }
    }

    fn acquire_cmd(&self, ttl_ms: u64) -> ScriptCall {
        let mut cmd = eval(&ACQUIRE, &[&self.key]);
        cmd.push(&self.owner_field).push(&self.hold_field).push(ttl_ms);
        cmd
    }
}

impl LockOps for ReentrantHold {
    fn extend(&self, ttl_ms: u64) -> Call {
        let mut cmd = eval(&EXTEND, &[&self.key]);
        cmd.push(&self.owner_field).push(&self.hold_field).push(ttl_ms);
        Call::Script(cmd)
    }

    fn release(&self) -> Call {
        let mut cmd = eval(&RELEASE, &[&self.key]);
        cmd.push(&self.owner_field)
            .push(&self.hold_field)
            .push(&self.channel);
        Call::Script(cmd)
    }

    fn holds(&self) -> Option<u64> {
        Some(self.holds.load(Ordering::Relaxed))
    }
}

/// Adds a hold of `resource` for `owner`: retrying within `plan`, or one round when `plan` is
/// `None`.
pub(crate) async fn acquire(
    inner: &Arc<Inner>,
    resource: &str,
    owner: &LockOwner,
    ttl: Duration,
    plan: Option<RetryPlan>,
) -> Result<Guard, AcquireError> {
    let timing = check(inner, resource, owner, ttl)?;
    match plan {
        Some(plan) => {
            let key = inner.names().tagged(REENTRANT_TAG, resource);
            inner
                .retrying_woken(resource, plan, vec![key], || {
                    round(inner, resource, owner, timing)
                })
                .await
        }
        None => round(inner, resource, owner, timing).await,
    }
}

fn check(inner: &Inner, resource: &str, owner: &LockOwner, ttl: Duration) -> Result<Timing, InputError> {
    if owner.as_str().is_empty() {
        return Err(InputError::EmptyOwner);
    }
    inner.check(resource, ttl)
}

/// One quorum round adding a hold for `owner`.
async fn round(
    inner: &Arc<Inner>,
    resource: &str,
    owner: &LockOwner,
    timing: Timing,
) -> Result<Guard, AcquireError> {
    // One copy of the key for the hold, the round and its guard.
    let key: Arc<str> = inner.names().tagged(REENTRANT_TAG, resource).into();
    let token = inner.entropy().token()?;
    let hold = Arc::new(ReentrantHold::new(&key, owner, &token));
    let cmd = Arc::new(hold.acquire_cmd(ttl_millis(timing.ttl())));
    // Shared with the requests: those still in flight at the decision finish in a task.
    let masters = inner.masters().len();
    let counts: Arc<Mutex<Vec<u64>>> = Arc::new(Mutex::new(Vec::with_capacity(masters)));
    let ops: Arc<dyn LockOps> = Arc::clone(&hold) as Arc<dyn LockOps>;
    let guard = inner
        .acquire_round(resource, key, token, timing, ops, |link| {
            let counts = Arc::clone(&counts);
            link.run_script(&cmd).map(move |reply| {
                let count = int_reply(reply?, "reentrant acquire")?;
                match u64::try_from(count) {
                    Ok(count) if count > 0 => {
                        counts.lock().unwrap_or_else(PoisonError::into_inner).push(count);
                        Ok(())
                    }
                    _ if count == -1 => Err(NodeErrorKind::Held),
                    _ => Err(NodeErrorKind::Protocol(
                        format!("reentrant acquire answered {count}, expected a hold count or -1").into(),
                    )),
                }
            })
        })
        .await?;
    let counts = std::mem::take(&mut *counts.lock().unwrap_or_else(PoisonError::into_inner));
    hold.holds
        .store(majority_count(counts, masters), Ordering::Relaxed);
    Ok(guard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_are_random_unless_named() {
        assert_ne!(LockOwner::new(), LockOwner::new());
        assert_eq!(LockOwner::new().as_str().len(), 32);
        assert_eq!(
            LockOwner::from("worker-7"),
            LockOwner::from("worker-7".to_owned())
        );
    }

    #[test]
    fn debug_leaves_the_hold_token_out() {
        let token = "0123456789abcdef0123456789abcdef";
        let hold = ReentrantHold::new(
            &"p:quorlock:reentrant:r".into(),
            &LockOwner::from("worker-7"),
            token,
        );
        let shown = format!("{hold:?}");
        assert!(
            shown.contains("p:quorlock:reentrant:r") && shown.contains("worker-7"),
            "{shown}"
        );
        assert!(!shown.contains(token), "{shown}");
    }
}
