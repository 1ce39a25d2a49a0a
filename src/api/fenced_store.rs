//! A resource kept in Redis that enforces fencing tokens: it applies a write only when the writer's
//! token is at least the highest it has seen, and rejects it otherwise.
//!
//! This is the other half of fencing: the lock hands out tokens that never go backwards
//! ([`crate::Lock::fenced`]), and the resource refuses a holder whose token is stale —
//! a holder that paused past its validity while another took the lock. Each data key `k` has a
//! fence key `k:fence` (the suffix is configurable) holding the highest token accepted; both are
//! checked and updated by one Lua script, atomically.
//!
//! Reads go through the fence too ([`FencedStore::read`]): a read with token `t` raises the fence
//! to `t`, so once a holder has read, no holder with a lower token can write. That keeps
//! read-modify-write cycles in token order, which is what rules out lost updates.
//!
//! # The same pattern in SQL
//! Keep the highest token next to the row and make every write conditional on it:
//! ```sql
//! UPDATE accounts SET balance = $1, fence = $token
//!  WHERE id = $2 AND fence <= $token;
//! -- 0 rows updated: a holder with a newer token has written; abort.
//! ```
//! and read with `SELECT ... FOR UPDATE` after `UPDATE accounts SET fence = $token WHERE id = $2 AND
//! fence <= $token` in the same transaction, for the same read-modify-write ordering.

use std::fmt;

use redis::aio::ConnectionLike;
use redis::{FromRedisValue, Script, ToRedisArgs, Value};

/// Default suffix of a data key's fence key: `":fence"`.
pub const DEFAULT_FENCE_SUFFIX: &str = ":fence";

use crate::base::lua::{FENCED_READ, FENCED_WRITE};

/// Why a fenced operation did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FencedError {
    /// A holder with a newer token has already read or written this key: this holder's lock is gone.
    #[error("stale fencing token {token} for {key:?}: the store has already seen token {highest}")]
    Stale {
        /// The data key.
        key: String,
        /// The token presented.
        token: u64,
        /// The highest token the store has seen for this key.
        highest: u64,
    },
    /// The store could not be reached, or answered something unexpected.
    #[error("fenced store error on {key:?}: {message}")]
    Store {
        /// The data key.
        key: String,
        /// What went wrong.
        message: String,
    },
}

impl FencedError {
    /// Whether the token was rejected as stale.
    pub fn is_stale(&self) -> bool {
        matches!(self, FencedError::Stale { .. })
    }
}

/// A key-value resource in Redis guarded by fencing tokens.
#[derive(Clone)]
pub struct FencedStore<C> {
    conn: C,
    suffix: String,
    write: Script,
    read: Script,
}

impl<C> fmt::Debug for FencedStore<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FencedStore")
            .field("suffix", &self.suffix)
            .finish_non_exhaustive()
    }
}

impl<C> FencedStore<C>
where
    C: ConnectionLike + Clone + Send + Sync,
{
    /// A store over `conn` (a multiplexed connection or a connection manager to the Redis that
    /// holds the resource, usually not one of the lock masters).
    pub fn new(conn: C) -> Self {
        Self {
            conn,
            suffix: DEFAULT_FENCE_SUFFIX.to_owned(),
            write: Script::new(FENCED_WRITE.source()),
            read: Script::new(FENCED_READ.source()),
        }
    }

    /// Uses `suffix` instead of [`DEFAULT_FENCE_SUFFIX`] to name each data key's fence key.
    #[must_use]
    pub fn with_fence_suffix(mut self, suffix: impl Into<String>) -> Self {
        self.suffix = suffix.into();
        self
    }

    /// The key holding the highest token seen for `key`.
    pub fn fence_key(&self, key: &str) -> String {
        let mut fence = String::with_capacity(key.len() + self.suffix.len());
        fence.push_str(key);
        fence.push_str(&self.suffix);
        fence
    }

    /// Stores `value` under `key` if `token` is at least the highest token seen for it.
    ///
    /// # Errors
    /// [`FencedError::Stale`] when a newer token has been seen (nothing is written);
    /// [`FencedError::Store`] when the store failed.
    pub async fn write<V: ToRedisArgs + Send + Sync>(
        &self,
        key: &str,
        token: u64,
        value: V,
    ) -> Result<(), FencedError> {
        let mut conn = self.conn.clone();
        let reply: Value = self
            .write
            .key(key)
            .key(self.fence_key(key))
            .arg(token)
            .arg(value)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| store_error(key, e.to_string()))?;
        let (allowed, highest, _) = verdict(key, reply)?;
        if allowed {
            Ok(())
        } else {
            Err(FencedError::Stale {
                key: key.to_owned(),
                token,
                highest,
            })
        }
    }

    /// Reads `key` on behalf of the holder of `token`, raising the fence to `token`.
    ///
    /// # Errors
    /// [`FencedError::Stale`] when a newer token has been seen; [`FencedError::Store`] when the
    /// store failed or the value does not convert to `V`.
    pub async fn read<V: FromRedisValue>(&self, key: &str, token: u64) -> Result<Option<V>, FencedError> {
        let mut conn = self.conn.clone();
        let reply: Value = self
            .read
            .key(key)
            .key(self.fence_key(key))
            .arg(token)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| store_error(key, e.to_string()))?;
        let (allowed, highest, value) = verdict(key, reply)?;
        if !allowed {
            return Err(FencedError::Stale {
                key: key.to_owned(),
                token,
                highest,
            });
        }
        match value {
            None | Some(Value::Nil) => Ok(None),
            Some(value) => V::from_redis_value(value)
                .map(Some)
                .map_err(|e| store_error(key, e.to_string())),
        }
    }

    /// The highest token the store has accepted for `key` (0 if none).
    ///
    /// # Errors
    /// [`FencedError::Store`] when the store failed.
    pub async fn highest(&self, key: &str) -> Result<u64, FencedError> {
        let mut conn = self.conn.clone();
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.fence_key(key));
        let value: Option<u64> = cmd
            .query_async(&mut conn)
            .await
            .map_err(|e| store_error(key, e.to_string()))?;
        Ok(value.unwrap_or(0))
    }
}

fn store_error(key: &str, message: String) -> FencedError {
    FencedError::Store {
        key: key.to_owned(),
        message,
    }
}

/// Reads a script's `{allowed, token-or-highest, value?}` reply.
fn verdict(key: &str, reply: Value) -> Result<(bool, u64, Option<Value>), FencedError> {
    let unexpected = |reply: &Value| store_error(key, format!("fenced script answered {reply:?}"));
    let Value::Array(items) = reply else {
        return Err(unexpected(&reply));
    };
    let mut items = items.into_iter();
    match (items.next(), items.next(), items.next()) {
        (Some(Value::Int(allowed)), Some(Value::Int(highest)), value) => {
            let highest = u64::try_from(highest)
                .map_err(|_| store_error(key, format!("fence {highest} is negative")))?;
            Ok((allowed == 1, highest, value))
        }
        (a, b, c) => Err(unexpected(&Value::Array(
            a.into_iter().chain(b).chain(c).collect(),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_strictly() {
        let ok = Value::Array(vec![
            Value::Int(1),
            Value::Int(7),
            Value::BulkString(b"v".to_vec()),
        ]);
        let (allowed, highest, value) = verdict("k", ok).expect("valid");
        assert!(allowed);
        assert_eq!(highest, 7);
        assert_eq!(value, Some(Value::BulkString(b"v".to_vec())));
        let stale = Value::Array(vec![Value::Int(0), Value::Int(9)]);
        assert!(!verdict("k", stale).expect("valid").0);
        assert!(verdict("k", Value::Int(1)).is_err());
        assert!(verdict("k", Value::Array(vec![Value::Int(1)])).is_err());
    }
}
