//! A reentrant lock: one owner takes the same lock twice (a nested call), and each hold is
//! released on its own; another owner is refused until both are.
//!
//! `cargo run --example reentrant` against `docker compose up`, or with `QUORLOCK_NODES` set.

mod common;

use std::time::Duration;

use quorlock::LockOwner;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = common::connect().await?;
    let ttl = Duration::from_secs(10);
    let owner = LockOwner::new();

    let outer = locks
        .lock("example:ledger", ttl)
        .reentrant(&owner)
        .acquire()
        .await?;
    let inner = locks
        .lock("example:ledger", ttl)
        .reentrant(&owner)
        .acquire()
        .await?;
    println!(
        "owner {} holds example:ledger {} times",
        owner.as_str(),
        inner.holds().unwrap_or(0)
    );

    let other = LockOwner::new();
    let refused = locks
        .lock("example:ledger", ttl)
        .reentrant(&other)
        .try_acquire()
        .await;
    println!("another owner refused: {}", refused.is_err());

    inner.release().await?;
    outer.release().await?;
    let now_free = locks
        .lock("example:ledger", ttl)
        .reentrant(&other)
        .try_acquire()
        .await?;
    println!("after both releases, another owner gets it");
    now_free.release().await?;
    locks.settle().await;
    Ok(())
}
