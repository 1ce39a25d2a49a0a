//! The leak scan at the end of a run: every key under the run's prefix still on a master, with its
//! remaining TTL, but for the keys quorlock keeps on every master by design and without a TTL (the
//! fencing counter and epoch, and the record each master keeps about itself). Both backends
//! (processes and compose) read the masters the same way, so the scan lives below both.

use std::time::Duration;

use quorlock::config::{FENCE_COUNTER_KEY, FENCE_EPOCH_KEY, MASTER_RECORD_KEY};
use redis::AsyncCommands;

use crate::checker::KeyObservation;
use crate::history::RunClock;
use crate::server::connect;

/// What quorlock keeps on every master for good, after the key prefix: no leak.
pub const PERMANENT: [&str; 3] = [FENCE_COUNTER_KEY, FENCE_EPOCH_KEY, MASTER_RECORD_KEY];

/// Whether `key` (under `prefix`) is one of the keys quorlock keeps for good.
pub fn permanent(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix)
        .is_some_and(|rest| PERMANENT.contains(&rest))
}

/// `KEYS prefix*` and `PTTL` on every master, directly (not through proxies); a master that cannot
/// be scanned is named in `notes`.
pub(crate) async fn scan_lock_keys(
    urls: &[String],
    prefix: &str,
    clock: RunClock,
    notes: &mut Vec<String>,
) -> Vec<KeyObservation> {
    let mut found = Vec::new();
    for (master, url) in urls.iter().enumerate() {
        let scanned: redis::RedisResult<Vec<(String, i64)>> = async {
            let mut conn = connect(url, Duration::from_secs(5)).await?;
            let keys: Vec<String> = conn.keys(format!("{prefix}*")).await?;
            let mut out = Vec::with_capacity(keys.len());
            for key in keys {
                let pttl: i64 = conn.pttl(&key).await?;
                out.push((key, pttl));
            }
            Ok(out)
        }
        .await;
        match scanned {
            Ok(keys) => found.extend(
                keys.into_iter()
                    .filter(|(key, pttl)| *pttl != -2 && !permanent(key, prefix))
                    .map(|(key, pttl_ms)| KeyObservation {
                        master,
                        key,
                        pttl_ms,
                        observed_at: clock.now(),
                    }),
            ),
            Err(e) => notes.push(format!("could not scan m{master} for leaked keys: {e}")),
        }
    }
    found
}
