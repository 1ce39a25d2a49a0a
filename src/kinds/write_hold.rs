//! The write side of a read-write lock, once held: a plain lock on the writer key, extended and
//! released as one, and known as a write. It stands apart from `rwlock.rs` (which takes it) and
//! `fenced.rs` (which takes it with a fencing token) so that both build on it without importing
//! each other.

use std::sync::Arc;

use crate::link::Call;
use crate::ops::{LockOps, PlainLock};

/// The write hold: a plain lock on the writer key.
#[derive(Debug)]
struct WriteHold(PlainLock);

impl LockOps for WriteHold {
    fn extend(&self, ttl_ms: u64) -> Call {
        self.0.extend(ttl_ms)
    }

    fn release(&self) -> Call {
        self.0.release()
    }

    fn cleanup(&self) -> Call {
        self.0.cleanup()
    }

    fn is_read(&self) -> Option<bool> {
        Some(false)
    }
}

/// How a write hold on the writer key `key` with `token` is extended and released (the fenced
/// write's too).
pub(crate) fn write_ops(key: &Arc<str>, token: &Arc<str>) -> Arc<dyn LockOps> {
    Arc::new(WriteHold(PlainLock::sharing(key, token)))
}
