//! Lock kinds beyond the plain lock, each decided by the same quorum as the plain lock.
//!
//! - [`reentrant`](crate::Quorlock::acquire_reentrant): an explicit [`LockOwner`] may hold the lock
//!   several times at once; each hold is released separately, and the last release frees it.
//! - [`multi`](crate::Quorlock::acquire_all): a set of resources taken all-or-nothing by one
//!   atomic script per master, so overlapping sets taken in different orders cannot deadlock.
//! - [`fair`](crate::Quorlock::acquire_fair): waiters are served in the order of their
//!   [`Ticket`]s, kept in a queue on every master.
//!
//! Every kind returns the ordinary [`Guard`](crate::Guard): validity, extend, release and release on
//! drop work the same for all of them, because each kind only supplies its own acquire command and
//! its own extend and release commands.
//!
//! # Keys
//! A multi-resource lock uses the plain lock's keys (the resource names with the configured prefix),
//! so it excludes plain locks on any of its resources, and the other way round. The reentrant and
//! fair kinds keep their state in keys of their own, derived from the resource name
//! (`prefix + REENTRANT_TAG + resource`, `prefix + FAIR_TAG + resource`, and so on), so plain locks keep
//! their wire format and stay interoperable with other RedLock clients. A consequence: a reentrant
//! or fair lock on `r` does not exclude a plain lock on `r`; use one kind per resource.
//!
//! The fair lock's scripts read the master's clock (`TIME`) before writing, which needs Redis 5 or
//! later (effects replication); the other kinds run on any Redis with Lua scripting.

pub(crate) mod fair;
pub(crate) mod multi;
pub(crate) mod reentrant;

use redis::{Cmd, Value};

use crate::coordinator::Inner;
use crate::error::NodeErrorKind;

pub use fair::{FairOptions, Ticket, DEFAULT_FAIR_HEARTBEAT};
pub use reentrant::LockOwner;

/// Put between the key prefix and the resource name to form a reentrant lock's hash key.
pub const REENTRANT_TAG: &str = "quorlock:reentrant:";
/// Put between the key prefix and the resource name to form a fair lock's keys.
pub const FAIR_TAG: &str = "quorlock:fair:";
/// Appended to a fair lock's key to form its queue (a sorted set of tickets by ticket time).
pub const FAIR_QUEUE_SUFFIX: &str = ":queue";
/// Appended to a fair lock's key to form its waiters' heartbeat deadlines (a sorted set).
pub const FAIR_DEADLINES_SUFFIX: &str = ":deadlines";

/// The key of a kind's state: the configured prefix, the kind's tag, then the resource name.
pub(crate) fn kind_key(inner: &Inner, tag: &str, resource: &str) -> String {
    let prefix = &inner.config.key_prefix;
    let mut key = String::with_capacity(prefix.len() + tag.len() + resource.len());
    key.push_str(prefix);
    key.push_str(tag);
    key.push_str(resource);
    key
}

/// An `EVAL` of `script` over `keys`; the caller appends the script's arguments.
pub(crate) fn eval<K: AsRef<str>>(script: &str, keys: &[K]) -> Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(script).arg(keys.len());
    for key in keys {
        cmd.arg(key.as_ref());
    }
    cmd
}

/// Reads a script's integer reply.
pub(crate) fn int_reply(value: Value, what: &str) -> Result<i64, NodeErrorKind> {
    match value {
        Value::Int(n) => Ok(n),
        other => Err(NodeErrorKind::Protocol(format!(
            "{what} answered {other:?}, expected an integer"
        ))),
    }
}
