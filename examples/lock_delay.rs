//! Lock-delay: a lock that stays closed for a while after it expires, for a resource that cannot
//! check a fencing token (a legacy API, a file, an email). A holder that stops responding past its
//! validity cannot overlap the next holder as long as it acts again within the delay; a clean
//! release opens the lock at once.
//!
//! `cargo run --example lock_delay` against `docker compose up`, or with `QUORLOCK_NODES` set.

mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = common::connect().await?;
    let ttl = Duration::from_secs(2);
    let delay = Duration::from_secs(5);

    // A clean release opens the lock at once, whatever the delay.
    let guard = locks
        .lock("example:mailer", ttl)
        .lock_delay(delay)
        .acquire()
        .await?;
    println!(
        "held, valid for {:?} (counted from the TTL alone)",
        guard.validity()
    );
    guard.release().await?;
    let next = locks.lock("example:mailer", ttl).try_acquire().await?;
    println!("released: the next holder got it at once");

    // A holder that stops (here: its guard forgotten, as a crashed process leaves it) keeps the
    // lock closed for its TTL plus the delay, for every client. The stopped holder is a client of
    // its own, as another process would be: a forgotten guard also keeps its process's local turn.
    next.release().await?;
    let crashed = common::connect().await?;
    let stopped = crashed
        .lock("example:mailer", ttl)
        .lock_delay(delay)
        .acquire()
        .await?;
    let valid_until = stopped.valid_until();
    std::mem::forget(stopped);
    tokio::time::sleep_until(valid_until + Duration::from_secs(1)).await;
    match locks.lock("example:mailer", ttl).try_acquire().await {
        Ok(_) => println!("unexpected: taken inside the delay"),
        Err(err) => println!("past the stopped holder's validity, still closed: {err}"),
    }
    let taken = locks
        .lock("example:mailer", ttl)
        .wait(Duration::from_secs(30))
        .acquire()
        .await?;
    println!("taken once the TTL plus the delay had passed");
    taken.release().await?;
    locks.settle().await;
    Ok(())
}
