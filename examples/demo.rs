//! A tour on local masters it starts itself: take, extend and release locks, then watch the quorum
//! ride out two dead masters and refuse cleanly when a third dies.
//!
//! Run it with `chaos/demo` (installs redis-server when missing) or `cargo run --example demo`.

use std::time::{Duration, Instant};

use quorlock::Quorlock;
use quorlock_chaos::{Cluster, DataMode};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut cluster = Cluster::start(5).await?;
    println!("started 5 independent redis-server masters:");
    for url in cluster.urls() {
        println!("  {url}");
    }
    let locks = Quorlock::builder()
        .nodes(cluster.urls())
        .wait(Duration::from_secs(1))
        .build()
        .await?;
    let ttl = Duration::from_secs(5);

    let t = Instant::now();
    let guard = locks.acquire("orders:42", ttl).await?;
    println!(
        "\nacquired orders:42 in {:?}: token {}, validity {:?}",
        t.elapsed(),
        guard.token(),
        guard.validity()
    );
    let refused = locks.try_acquire("orders:42", ttl).await.err();
    if let Some(err) = refused {
        println!("a second holder is refused: {err}");
    }
    let validity = guard.extend(Duration::from_secs(10)).await?;
    println!("extended to a validity of {validity:?}");
    let released = guard.release().await?;
    println!("released on {} of {} masters", released.held, released.masters);

    cluster.kill(0)?;
    cluster.kill(1)?;
    println!("\nkilled masters 0 and 1: 3 of 5 remain, still a majority");
    let mut ok = 0;
    let t = Instant::now();
    for i in 0..100 {
        let guard = locks.try_acquire(&format!("job:{i}"), ttl).await?;
        guard.release().await?;
        ok += 1;
    }
    println!("{ok} locks taken and released in {:?}", t.elapsed());

    cluster.kill(2)?;
    println!("\nkilled master 2: only 2 of 5 remain");
    match locks.try_acquire("orders:42", ttl).await {
        Ok(_) => println!("unexpected: acquired without a majority"),
        Err(err) => println!("refused, as it must be: {err}"),
    }

    for i in 0..3 {
        cluster.restart(i, DataMode::Keep).await?;
    }
    println!("\nrestarted masters 0-2");
    let t = Instant::now();
    let guard = loop {
        match locks.try_acquire("orders:42", ttl).await {
            Ok(guard) => break guard,
            Err(_) if t.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(err) => return Err(err.into()),
        }
    };
    println!("acquired again {:?} after the restart", t.elapsed());
    guard.release().await?;
    println!("\ndone; stopping the masters");
    Ok(())
}
