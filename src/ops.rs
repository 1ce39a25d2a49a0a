//! The commands that renew and release one held lock on a master, supplied by each lock kind.
//!
//! The coordinator, the guard and the watchdog only need to know how to extend and how to release a
//! held lock; what those commands are depends on the kind of lock (a plain key, a reentrant hold
//! count, a set of keys, a fair queue). Each kind implements [`LockOps`], so quorum counting,
//! validity, release on drop and renewal are written once.

use std::fmt;

use redis::Cmd;

use crate::coordinator::release_channel;
use crate::node::{EXTEND_SCRIPT, RELEASE_SCRIPT};

/// How one held lock is extended and released on a master.
///
/// Both commands must answer `1` when the lock was ours and the command acted on it, `0` when the
/// lock is absent (expired), and `-1` when another holder has it.
pub(crate) trait LockOps: Send + Sync + fmt::Debug + 'static {
    /// The command that sets the lock's TTL to `ttl_ms` if we still hold it.
    fn extend_cmd(&self, ttl_ms: u64) -> Cmd;
    /// The command that releases the lock if we still hold it.
    fn release_cmd(&self) -> Cmd;
    /// For a reentrant lock, the owner's hold count when this hold was taken.
    fn holds(&self) -> Option<u64> {
        None
    }
    /// For a multi-resource lock, every resource it covers.
    fn resources(&self) -> Option<&[String]> {
        None
    }
}

/// A plain RedLock lock: one string key holding our token (interoperable with other clients).
#[derive(Clone)]
pub(crate) struct PlainLock {
    key: String,
    token: String,
    channel: String,
}

impl PlainLock {
    /// The plain lock of `key` for `token`.
    pub(crate) fn new(key: &str, token: &str) -> Self {
        Self {
            key: key.to_owned(),
            token: token.to_owned(),
            channel: release_channel(key),
        }
    }
}

impl fmt::Debug for PlainLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token stays out of logs: whoever has it can release the lock.
        f.debug_struct("PlainLock")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl LockOps for PlainLock {
    fn extend_cmd(&self, ttl_ms: u64) -> Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(EXTEND_SCRIPT)
            .arg(1)
            .arg(&self.key)
            .arg(&self.token)
            .arg(ttl_ms);
        cmd
    }

    fn release_cmd(&self) -> Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(RELEASE_SCRIPT)
            .arg(1)
            .arg(&self.key)
            .arg(&self.token)
            .arg(&self.channel);
        cmd
    }
}
