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
use std::sync::Arc;

use redis::Value;

use futures::future::BoxFuture;

use crate::api::client::request::{Choose, Request};
use crate::api::client::Guard;
use crate::api::kinds::kind::{named, Ctx, Held, Kind, Wait};
use crate::api::lock::Lock;
use crate::base::error::{AcquireError, InputError, NodeErrorKind};
use crate::base::lua::{eval, int_reply, lua, ScriptCall};
use crate::base::names::{release_channel, REENTRANT_TAG};
use crate::core::kinds::majority_count;
use crate::mechanisms::ops::LockOps;
use crate::mechanisms::round::Read;
use crate::seam::link::Call;
use crate::seam::token::Entropy;

lua! {
    /// A reentrant lock's acquire: a hold for the owner, unless another owner holds it.
    static ACQUIRE = include_str!("../../scripts/reentrant_acquire.lua");
    /// A reentrant hold's release; the last one deletes the lock and announces it.
    static RELEASE = concat!(
        include_str!("../../scripts/reentrant_common.lua"),
        include_str!("../../scripts/reentrant_release.lua")
    );
    /// A reentrant hold's extend.
    static EXTEND = concat!(
        include_str!("../../scripts/reentrant_common.lua"),
        include_str!("../../scripts/reentrant_extend.lua")
    );
}

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

/// A reentrant lock on one resource for one owner.
#[derive(Debug)]
pub(crate) struct Reentrant {
    resource: String,
    owner: LockOwner,
    key: Arc<str>,
}

impl Reentrant {
    /// A hold of `resource` for `owner`.
    pub(crate) fn new(ctx: &Ctx<'_>, resource: String, owner: LockOwner) -> Self {
        Self {
            key: ctx.names.tagged(REENTRANT_TAG, &resource).into(),
            resource,
            owner,
        }
    }
}

impl Kind for Reentrant {
    type Hold = ReentrantHold;
    /// A master's hold count for the owner, once it granted the hold.
    type Note = u64;
    type Reads = ();

    fn resource(&self) -> &str {
        &self.resource
    }

    fn check(&self) -> Result<(), InputError> {
        if self.owner.as_str().is_empty() {
            return Err(InputError::EmptyOwner);
        }
        named(&self.resource)
    }

    fn wait(&self) -> Wait {
        Wait::Released(vec![self.key.to_string()])
    }

    fn hold(&self, ctx: &Ctx<'_>) -> Result<Held<ReentrantHold>, AcquireError> {
        Held::fresh(ctx, &self.key, |key, token| {
            ReentrantHold::new(key, &self.owner, token)
        })
    }

    fn call(&self, held: &Held<ReentrantHold>, ttl_ms: u64) -> Call {
        Call::Script(held.hold.acquire_cmd(ttl_ms))
    }

    fn reads(&self) {}

    fn read((): (), reply: Value) -> Read<u64> {
        let count = match int_reply(reply, "reentrant acquire") {
            Ok(count) => count,
            Err(kind) => return Read::vote(Err(kind)),
        };
        match u64::try_from(count) {
            Ok(count) if count > 0 => Read::noting(Ok(()), count),
            _ if count == -1 => Read::vote(Err(NodeErrorKind::Held)),
            _ => Read::vote(Err(NodeErrorKind::Protocol(
                format!("reentrant acquire answered {count}, expected a hold count or -1").into(),
            ))),
        }
    }

    fn won(&self, held: &Held<ReentrantHold>, notes: Vec<(usize, u64)>, masters: usize) {
        let counts = notes.into_iter().map(|(_, count)| count).collect();
        held.hold
            .holds
            .store(majority_count(counts, masters), Ordering::Relaxed);
    }
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

/// The reentrant lock as a request's kind, for one owner.
#[derive(Debug)]
struct ReentrantChoice(LockOwner);

impl Choose for ReentrantChoice {
    fn name(&self) -> &'static str {
        "reentrant"
    }

    fn acquire<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Guard, AcquireError>> {
        tracing::Span::current().record("owner", self.0.as_str());
        request.one(self, |ctx, resource| {
            Ok(Reentrant::new(ctx, resource, self.0.clone()))
        })
    }
}

impl Lock<'_> {
    /// Asks for a reentrant lock held by `owner`: if `owner` holds it already, this adds one more
    /// hold. Every hold is its own [`Guard`] and needs its own release; the lock is free for other
    /// owners once every hold is released (or has expired). A reentrant lock uses its own key, so
    /// it does not exclude a plain lock on the same resource.
    pub fn reentrant(self, owner: &LockOwner) -> Self {
        self.choose(ReentrantChoice(owner.clone()))
    }
}
