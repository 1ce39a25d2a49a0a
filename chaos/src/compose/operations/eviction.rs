//! The eviction, for real: master 0 gets a small `maxmemory` and the `volatile-ttl` policy before
//! any client starts (a cache's settings), and the `filler` service of `compose.operations.yml`,
//! a cache workload writing 16 KB values with an hour's TTL, fills it past the limit until it
//! has evicted the first probe's key. Every lock key carries a TTL shorter than the filler's, so
//! `volatile-ttl` picks lock keys first: the key of a held lock is gone from that master while
//! the lock is held, with nothing in any reply to say so.

use super::super::Compose;
use super::reach::{command, info_field};
use crate::error::HarnessError;

/// The memory limit master 0 gets.
pub(crate) const MAXMEMORY: &str = "4mb";
/// Its eviction policy.
pub(crate) const POLICY: &str = "volatile-ttl";
/// The filler's service.
const FILLER: &str = "filler";

/// Gives master 0 its memory limit and eviction policy.
///
/// # Errors
/// When the master refuses.
pub(crate) async fn prepare(compose: &Compose) -> Result<String, HarnessError> {
    let _: () = command(compose, 0, &["CONFIG", "SET", "maxmemory", MAXMEMORY]).await?;
    let _: () = command(compose, 0, &["CONFIG", "SET", "maxmemory-policy", POLICY]).await?;
    Ok(format!(
        "m0 runs with maxmemory {MAXMEMORY} and maxmemory-policy {POLICY}"
    ))
}

/// Runs the filler against master 0 until it no longer has `key` (at least past the limit, when
/// it never had it), and checks that master 0 evicted keys; when `key` was held through it
/// (`held`), the filler's exit says it is gone. Returns what happened, in words.
///
/// # Errors
/// When the filler fails or gives up with the key still there, or master 0 evicted nothing.
pub(crate) async fn fill(compose: &Compose, key: &str, held: bool) -> Result<String, HarnessError> {
    let filled = compose.run(&["run", "--rm", "--no-deps", FILLER, key]).await?;
    let info: String = command(compose, 0, &["INFO", "stats"]).await?;
    let evicted = info_field(&info, "evicted_keys").unwrap_or("0").to_string();
    if evicted == "0" {
        return Err(HarnessError::Workload(format!(
            "the filler ran ({}), but m0 evicted nothing",
            filled.trim()
        )));
    }
    Ok(format!(
        "the filler filled m0 (it says: {}); m0 has evicted {evicted} keys, {}",
        filled.trim(),
        if held {
            "the first probe's among them"
        } else {
            "and the first probe held nothing"
        }
    ))
}
