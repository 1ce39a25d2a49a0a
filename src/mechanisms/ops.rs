//! The commands that renew and release one held lock on a master, supplied by each lock kind.
//!
//! The guard, the release mechanism and the watchdog only need to know how to extend and how to
//! release a held lock; what those commands are depends on the kind of lock (a plain key, a
//! reentrant hold count, a set of keys, a fair queue). Each kind implements [`LockOps`], so quorum
//! counting, validity, release on drop and renewal are written once.

use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::base::lua::{ScriptCall, EXTEND, RELEASE};
use crate::base::names::{ChannelArg, WaitersArg, RELEASE_CHANNEL_PREFIX, WAITERS_SUFFIX};
use crate::seam::link::Call;

/// How one held lock is extended and released on a master.
///
/// Both calls must answer `1` when the lock was ours and the command acted on it, `0` when the
/// lock is absent (expired), and `-1` when another holder has it.
pub(crate) trait LockOps: Send + Sync + fmt::Debug + 'static {
    /// The call that sets the lock's TTL to `ttl_ms` if we still hold it.
    fn extend(&self, ttl_ms: u64) -> Call;
    /// The call that releases the lock if we still hold it, and announces the release to waiters.
    fn release(&self) -> Call;
    /// The call that undoes what a failed or abandoned acquire may have taken. It need not
    /// announce anything: a master where the attempt left its key never made a majority, and an
    /// announcement from every master after every failed attempt would wake every waiter of every
    /// process to fail again. (The scripts announce only where they deleted a key, which is this
    /// already.)
    fn cleanup(&self) -> Call {
        self.release()
    }
    /// For a reentrant lock, the owner's hold count when this hold was taken.
    fn holds(&self) -> Option<u64> {
        None
    }
    /// For a semaphore's permit, the slot it holds.
    fn permit(&self) -> Option<u32> {
        None
    }
    /// For a read-write lock, whether this is a read hold.
    fn is_read(&self) -> Option<bool> {
        None
    }
    /// For a multi-resource lock, every resource it covers.
    fn resources(&self) -> Option<&[String]> {
        None
    }
}

/// A plain RedLock lock: one string key holding our token (interoperable with other clients).
///
/// The release channel is derived from the key when a release is built, not stored: a held lock
/// costs memory for as long as it is held, a release happens once. For the same reason the key and
/// the token are shared with the guard ([`PlainLock::sharing`]) rather than copied.
#[derive(Clone)]
pub(crate) struct PlainLock {
    key: Arc<str>,
    token: Arc<str>,
}

impl PlainLock {
    /// The plain lock of `key` for `token`.
    pub(crate) fn new(key: &str, token: &str) -> Self {
        Self {
            key: key.into(),
            token: token.into(),
        }
    }

    /// The plain lock of `key` for `token`, sharing both with whoever else holds them.
    pub(crate) fn sharing(key: &Arc<str>, token: &Arc<str>) -> Self {
        Self {
            key: Arc::clone(key),
            token: Arc::clone(token),
        }
    }

    fn extend_call(&self, ttl_ms: u64) -> ScriptCall {
        EXTEND
            .call(1, 3, self.key.len() + self.token.len())
            .arg(&*self.key)
            .arg(&*self.token)
            .arg(ttl_ms)
    }

    /// The release script; `announce` says whether it hands the key on (a failed attempt's
    /// cleanup does not: nobody waited for a lock that was never held).
    fn release_call(&self, announce: bool) -> ScriptCall {
        let channel = RELEASE_CHANNEL_PREFIX.len() + self.key.len();
        let queue = self.key.len() + WAITERS_SUFFIX.len();
        let call = RELEASE
            .call(2, 4, self.key.len() + queue + self.token.len() + channel)
            .arg(&*self.key)
            .arg(WaitersArg(&self.key))
            .arg(&*self.token);
        if announce {
            call.arg(ChannelArg(&self.key))
        } else {
            call.arg("")
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
    fn extend(&self, ttl_ms: u64) -> Call {
        Call::CompareExtend {
            key: Arc::clone(&self.key),
            token: Arc::clone(&self.token),
            ttl_ms,
            script: self.extend_call(ttl_ms),
        }
    }

    fn release(&self) -> Call {
        Call::CompareDelete {
            key: Arc::clone(&self.key),
            token: Arc::clone(&self.token),
            announce: true,
            script: self.release_call(true),
            native: OnceLock::new(),
        }
    }

    fn cleanup(&self) -> Call {
        Call::CompareDelete {
            key: Arc::clone(&self.key),
            token: Arc::clone(&self.token),
            announce: false,
            script: self.release_call(false),
            native: OnceLock::new(),
        }
    }
}
