//! A fair lock: three tasks ask for the same printer and are served in the order they arrived.
//!
//! `cargo run --example fair` against `docker compose up`, or with `QUORLOCK_NODES` set.

mod common;

use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let locks = common::connect().await?;
    let ttl = Duration::from_secs(10);

    let first = locks.lock("example:printer", ttl).fair().acquire().await?;
    let mut waiters = Vec::new();
    for n in 1..=3 {
        let locks = locks.clone();
        waiters.push(tokio::spawn(async move {
            let guard = locks
                .lock("example:printer", ttl)
                .fair()
                .wait(Duration::from_secs(10))
                .acquire()
                .await?;
            println!("waiter {n} prints");
            tokio::time::sleep(Duration::from_millis(100)).await;
            guard.release().await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        }));
        // Arrive in order.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("the first holder prints while three wait");
    first.release().await?;
    for waiter in waiters {
        waiter.await??;
    }
    locks.settle().await;
    Ok(())
}
