//! The cost of fencing: sequential acquire+release latency, plain versus fenced, on 5 local
//! masters, in the same run (the two kinds interleaved so they share the machine's load).
//!
//! Run with `cargo run --release --example fencing_cost [iterations]`. A fenced acquisition makes
//! one more round trip (the commit) than a plain one; the target is a p50 ratio of at most 2.

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
    // Warm up connections, script caches and the fencing counters.
    for _ in 0..50 {
        locks.acquire("bench", ttl).await?.release().await?;
        locks
            .lock("bench", ttl)
            .fenced()
            .acquire()
            .await?
            .release()
            .await?;
    }
    let mut plain = Vec::with_capacity(iterations);
    let mut fenced = Vec::with_capacity(iterations);
    for i in 0..iterations * 2 {
        let started = Instant::now();
        if i % 2 == 0 {
            locks.acquire("bench", ttl).await?.release().await?;
            plain.push(started.elapsed());
        } else {
            let guard = locks.lock("bench", ttl).fenced().acquire().await?;
            guard.release().await?;
            fenced.push(started.elapsed());
        }
    }
    println!("5 local masters, sequential acquire+release, {iterations} of each, interleaved");
    let p = line("plain", &mut plain);
    let f = line("fenced", &mut fenced);
    println!(
        "fenced / plain p50: {:.2}x (target <= 2x)",
        f.as_secs_f64() / p.as_secs_f64().max(f64::MIN_POSITIVE)
    );
    Ok(())
}
