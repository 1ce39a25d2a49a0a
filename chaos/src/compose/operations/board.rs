//! The board the two probes and the harness share on the witness Redis, which every one of them
//! reaches and no fault touches: who has done what, so that an operation's steps come exactly
//! between the probes' steps (the first probe checked the masters, it holds the lock, the
//! second has tried, the first has released) instead of racing them. Every wait is bounded, so
//! a probe that never gets there delays the run but never hangs it.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

use crate::error::HarnessError;
use crate::server::connect;
use crate::workload::witness_key;

/// The resource the probes lock (their own: the background clients lock `r0`, `r1`, ...).
pub const RESOURCE: &str = "probe";
/// The first probe has built its client, whose checks have read every master it reaches.
pub const BUILT: &str = "probe:built";
/// The harness: the first probe may acquire.
pub const GO: &str = "probe:go";
/// The first probe's acquisition: `1` held, `0` refused.
pub const HELD: &str = "probe:held";
/// The second probe's first attempt is over (and its critical section, if it held).
pub const TRIED: &str = "probe:tried";
/// The first probe has released (or never held).
pub const RELEASED: &str = "probe:released";
/// Every key of the board.
const KEYS: [&str; 5] = [BUILT, GO, HELD, TRIED, RELEASED];

/// How often a waiter looks at the board.
const POLL: Duration = Duration::from_millis(10);

/// A connection to the board.
#[derive(Clone)]
pub struct Board {
    conn: MultiplexedConnection,
}

impl std::fmt::Debug for Board {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Board")
    }
}

impl Board {
    /// Connects to the witness at `url`.
    ///
    /// # Errors
    /// When the witness does not answer.
    pub async fn connect(url: &str) -> Result<Board, HarnessError> {
        let conn = connect(url, Duration::from_secs(5))
            .await
            .map_err(|e| HarnessError::redis("connecting to the probes' board on the witness", e))?;
        Ok(Board { conn })
    }

    /// Clears the board and the probes' witness counter, before a run.
    ///
    /// # Errors
    /// When the witness refuses the `DEL`.
    pub async fn clear(&self) -> Result<(), HarnessError> {
        let mut keys: Vec<String> = KEYS.iter().map(|k| (*k).to_owned()).collect();
        keys.push(witness_key(RESOURCE));
        let mut conn = self.conn.clone();
        let _: () = conn
            .del(&keys)
            .await
            .map_err(|e| HarnessError::redis("clearing the probes' board", e))?;
        Ok(())
    }

    /// Writes `key`.
    ///
    /// # Errors
    /// When the witness refuses the write.
    pub async fn set(&self, key: &str, value: &str) -> Result<(), HarnessError> {
        let mut conn = self.conn.clone();
        let _: () = conn
            .set(key, value)
            .await
            .map_err(|e| HarnessError::redis(format!("writing {key} on the probes' board"), e))?;
        Ok(())
    }

    /// Waits until `key` is written, for at most `patience`; its value, or `None` when it never
    /// came.
    pub async fn wait(&self, key: &str, patience: Duration) -> Option<String> {
        let deadline = Instant::now() + patience;
        let mut conn = self.conn.clone();
        loop {
            let value: redis::RedisResult<Option<String>> = conn.get(key).await;
            if let Ok(Some(value)) = value {
                return Some(value);
            }
            if Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The probes' witness counter (0 when never written).
    ///
    /// # Errors
    /// When the witness cannot be read.
    pub async fn counter(&self) -> Result<u64, HarnessError> {
        let mut conn = self.conn.clone();
        let value: Option<u64> = conn
            .get(witness_key(RESOURCE))
            .await
            .map_err(|e| HarnessError::redis("reading the probes' witness counter", e))?;
        Ok(value.unwrap_or(0))
    }
}
