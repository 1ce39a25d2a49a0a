//! A counting semaphore on your own masters: three permits, a fourth caller refused while they are
//! held, the permits seen in an inspection, and one permit returned for the next caller.
//!
//! `cargo run --example semaphore` against `docker compose up`, or with `QUORLOCK_NODES` set to
//! your masters' URLs (comma-separated).

mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = common::connect().await?;
    let ttl = Duration::from_secs(10);
    let resource = "example:semaphore";
    const PERMITS: u32 = 3;

    let mut held = Vec::new();
    for _ in 0..PERMITS {
        let permit = locks
            .semaphore(resource, PERMITS, ttl)
            .wait(Duration::from_secs(2))
            .acquire()
            .await?;
        println!("took permit {:?} of {PERMITS}", permit.permit());
        held.push(permit);
    }

    match locks.semaphore(resource, PERMITS, ttl).try_acquire().await {
        Ok(_) => println!("unexpected: a fourth holder got a permit"),
        Err(err) => println!(
            "a fourth caller is refused (contended: {}): {err}",
            err.is_contended()
        ),
    }

    let seen = locks.inspect_semaphore(resource, PERMITS).await?;
    println!(
        "{} of {} permits held, {} free",
        seen.held(),
        seen.permits(),
        seen.free()
    );

    if let Some(first) = held.pop() {
        first.release().await?;
    }
    let next = locks.acquire_permit(resource, PERMITS, ttl).await?;
    println!(
        "after one release, the next caller took permit {:?}",
        next.permit()
    );
    next.release().await?;
    for permit in held {
        permit.release().await?;
    }
    locks.settle().await;
    Ok(())
}
