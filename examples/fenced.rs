//! A fenced lock: each holder gets a fencing token, and tokens of successive holders only grow, so
//! the protected resource can refuse a write from a holder that paused past its lock.
//!
//! `cargo run --example fenced` against `docker compose up`, or with `QUORLOCK_NODES` set.

mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = common::connect().await?;
    let ttl = Duration::from_secs(10);

    let mut last = None;
    for holder in 1..=3 {
        let guard = locks.lock("example:account", ttl).fenced().acquire().await?;
        let token = guard.fencing_token().ok_or("a fenced lock has a token")?;
        println!("holder {holder}: fencing token {token}");
        if let Some(previous) = last {
            assert!(token > previous, "fencing tokens only grow");
        }
        last = Some(token);
        // Pass `token` with every write; the resource keeps the highest it has seen and refuses
        // lower ones (quorlock::FencedStore does this for a Redis-backed resource).
        guard.release().await?;
    }
    locks.settle().await;
    Ok(())
}
