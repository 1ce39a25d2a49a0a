//! The cost of the semaphore and of the read lock against the plain lock: sequential acquire
//! latency on 5 local masters, the three kinds interleaved in one run so they share the machine's
//! load. Each acquire is timed alone; its release follows, untimed.
//!
//! Run with `cargo run --release --example kinds_cost [iterations]`. The targets: a permit of a
//! free semaphore at most 1.5 times a plain acquire's p50, and a read with only readers present
//! at most 1.3 times.

use std::time::{Duration, Instant};

use quorlock::Quorlock;
use quorlock_chaos::Cluster;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn line(name: &str, samples: &mut [Duration]) -> Duration {
    samples.sort();
    let p50 = percentile(samples, 0.50);
    println!(
        "{name:>7}: p50 {:>6} µs   p90 {:>6} µs   p99 {:>6} µs   ({} samples)",
        p50.as_micros(),
        percentile(samples, 0.90).as_micros(),
        percentile(samples, 0.99).as_micros(),
        samples.len()
    );
    p50
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(f64::MIN_POSITIVE)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let cluster = Cluster::start(5).await?;
    let locks = Quorlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(200))
        .build()
        .await?;
    let ttl = Duration::from_secs(10);
    // Another reader holds the read lock throughout: reads are measured with readers present.
    let resident = locks.acquire_read("bench-rw", ttl).await?;
    resident.keep_alive();
    for _ in 0..50 {
        locks.acquire("bench", ttl).await?.release().await?;
        locks.acquire_permit("bench-sem", 4, ttl).await?.release().await?;
        locks.acquire_read("bench-rw", ttl).await?.release().await?;
    }
    let (mut plain, mut permit, mut read) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..iterations * 3 {
        let started = Instant::now();
        let (guard, samples) = match i % 3 {
            0 => (locks.acquire("bench", ttl).await?, &mut plain),
            1 => (locks.acquire_permit("bench-sem", 4, ttl).await?, &mut permit),
            _ => (locks.acquire_read("bench-rw", ttl).await?, &mut read),
        };
        samples.push(started.elapsed());
        guard.release().await?;
    }
    println!("5 local masters, sequential acquires, {iterations} of each, interleaved");
    let p = line("plain", &mut plain);
    let s = line("permit", &mut permit);
    let r = line("read", &mut read);
    println!("permit / plain p50: {:.2}x (target <= 1.5x)", ratio(s, p));
    println!("read / plain p50:   {:.2}x (target <= 1.3x)", ratio(r, p));
    resident.release().await?;
    Ok(())
}
