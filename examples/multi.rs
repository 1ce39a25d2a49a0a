//! A multi-resource lock: two accounts taken at once, all or nothing, so that two transfers taking
//! them in opposite orders cannot deadlock.
//!
//! `cargo run --example multi` against `docker compose up`, or with `QUORLOCK_NODES` set.

mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = common::connect().await?;
    let ttl = Duration::from_secs(10);

    let both = locks
        .lock_all(["example:account:3", "example:account:7"], ttl)
        .acquire()
        .await?;
    println!("holding {:?}", both.resources());

    // The other order, while held: refused, and the error names what was held.
    let err = locks
        .lock_all(["example:account:7", "example:account:3"], ttl)
        .try_acquire()
        .await
        .expect_err("the set is held");
    println!(
        "the same set in the other order is refused; held: {:?}",
        err.conflicts()
    );

    both.release().await?;
    locks.settle().await;
    Ok(())
}
