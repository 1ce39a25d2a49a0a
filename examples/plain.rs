//! A plain lock on your own masters: acquire, extend, release, and a second holder refused meanwhile.
//!
//! `cargo run --example plain` against `docker compose up`, or with `QUORLOCK_NODES` set to your
//! masters' URLs (comma-separated).

mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = common::connect().await?;
    let ttl = Duration::from_secs(10);

    let guard = locks
        .lock("example:plain", ttl)
        .wait(Duration::from_secs(2))
        .acquire()
        .await?;
    println!("acquired {}: validity {:?}", guard.resource(), guard.validity());

    match locks.try_acquire("example:plain", ttl).await {
        Ok(_) => println!("unexpected: a second holder got the lock"),
        Err(err) => println!(
            "a second holder is refused (contended: {}): {err}",
            err.is_contended()
        ),
    }

    let validity = guard.extend(ttl).await?;
    println!("extended: validity {validity:?}");
    let released = guard.release().await?;
    println!("released on {} of {} masters", released.held, released.masters);
    locks.settle().await;
    Ok(())
}
