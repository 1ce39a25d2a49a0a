//! Hand-off latency and the cost of holding many locks, against real local masters.
//!
//! Run with `cargo bench --bench handoff`. It prints, within one run:
//! - the uncontended acquire latency (the floor);
//! - hand-off latency (from the holder's `release()` call to the next holder's `acquire()` return)
//!   with 16 waiters on one key, each its own client (as 16 processes), woken by release;
//! - the same with polling waiters sleeping 50-250 ms between attempts (like redsync's defaults);
//! - the same with 16 tasks of one client, which take turns on the local queue;
//! - 10,000 locks held with watchdogs: resident memory per lock, and renewal traffic per tick.
//!
//! Figures are ratios within one run on one machine; nothing here is asserted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream::{self, StreamExt};
use quorlock::{Quorlock, QuorlockBuilder};
use quorlock_chaos::Cluster;

const TTL: Duration = Duration::from_secs(10);
const WAITERS: usize = 16;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run());
}

fn builder(c: &Cluster) -> QuorlockBuilder {
    Quorlock::builder()
        .nodes(c.urls())
        // The benchmark started these masters a moment ago; none of them restarted under a lock,
        // so their votes count at once (the client still verifies each master's identity).
        .restart_grace(std::time::Duration::ZERO)
        .node_timeout(Duration::from_millis(200))
        .wait(Duration::from_secs(60))
        .max_attempts(1_000_000)
}

async fn run() {
    let c = Cluster::start(3).await.expect("start masters");
    let floor = uncontended(&c).await;
    report("uncontended acquire", &floor, None);
    let p50_floor = percentile(&floor, 50);

    let mut clients = Vec::new();
    for _ in 0..WAITERS {
        clients.push(builder(&c).build().await.expect("build"));
    }
    let (woken, sets) = handoffs(&c, clients, "handoff:woken", 300).await;
    report("hand-off, 16 clients woken by release", &woken, Some(sets));
    println!(
        "    p50 / uncontended p50 = {:.2}",
        ratio(percentile(&woken, 50), p50_floor)
    );

    let mut clients = Vec::new();
    for _ in 0..WAITERS {
        clients.push(
            builder(&c)
                .wake_on_release(false)
                .retry_delay(Duration::from_millis(150))
                .retry_jitter(Duration::from_millis(100))
                .build()
                .await
                .expect("build"),
        );
    }
    let (polled, sets) = handoffs(&c, clients, "handoff:polled", 100).await;
    report(
        "hand-off, 16 clients polling every 50-250 ms",
        &polled,
        Some(sets),
    );
    println!(
        "    p50 / uncontended p50 = {:.2}",
        ratio(percentile(&polled, 50), p50_floor)
    );

    let one = builder(&c).build().await.expect("build");
    let clients = vec![one; WAITERS];
    let (local, sets) = handoffs(&c, clients, "handoff:local", 300).await;
    report(
        "hand-off, 16 tasks of one client (local queue)",
        &local,
        Some(sets),
    );
    println!(
        "    p50 / uncontended p50 = {:.2}",
        ratio(percentile(&local, 50), p50_floor)
    );

    many_locks(&c, 10_000).await;
}

/// Latency of `acquire` on free keys.
async fn uncontended(c: &Cluster) -> Vec<Duration> {
    let locks = builder(c).build().await.expect("build");
    let mut samples = Vec::new();
    for i in 0..400 {
        let started = Instant::now();
        let guard = locks.acquire(&format!("free:{i}"), TTL).await.expect("acquire");
        samples.push(started.elapsed());
        guard.release().await.expect("release");
    }
    samples.drain(..100); // warm-up
    samples
}

/// Hand-offs among `clients` (one task each) on one key; returns the latencies and the `SET`
/// calls per hand-off on master 0.
async fn handoffs(
    c: &Cluster,
    clients: Vec<Quorlock>,
    key: &'static str,
    count: usize,
) -> (Vec<Duration>, f64) {
    let released_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let samples = Arc::new(Mutex::new(Vec::new()));
    let remaining = Arc::new(AtomicUsize::new(count));
    // Counts acquisitions: a task that released waits for someone else to acquire before it
    // contends again, so every sample is a hand-off to another waiter.
    let holds = Arc::new(AtomicUsize::new(0));
    let sets_before = set_calls(c, 0).await;
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|locks| {
            let (released_at, samples, remaining, holds) = (
                released_at.clone(),
                samples.clone(),
                remaining.clone(),
                holds.clone(),
            );
            tokio::spawn(async move {
                while remaining.load(Ordering::SeqCst) > 0 {
                    let guard = locks.acquire(key, TTL).await.expect("acquire");
                    if let Some(at) = released_at.lock().expect("lock").take() {
                        samples.lock().expect("lock").push(at.elapsed());
                        let _ =
                            remaining.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
                    }
                    let mine = holds.fetch_add(1, Ordering::SeqCst) + 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    *released_at.lock().expect("lock") = Some(Instant::now());
                    guard.release().await.expect("release");
                    while holds.load(Ordering::SeqCst) == mine && remaining.load(Ordering::SeqCst) > 0 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    let sets = set_calls(c, 0).await - sets_before;
    let samples = samples.lock().expect("lock").clone();
    let per = sets as f64 / samples.len().max(1) as f64;
    (samples, per)
}

/// Holds `n` locks with watchdogs: memory per lock and renewal traffic.
async fn many_locks(c: &Cluster, n: usize) {
    let ttl = Duration::from_secs(6);
    let locks = builder(c).build().await.expect("build");
    // Warm every connection (and the allocator) before the baseline.
    locks
        .acquire("warm", ttl)
        .await
        .expect("acquire")
        .release()
        .await
        .expect("release");
    let mut guards = Vec::with_capacity(n);
    let before = rss();
    let acquired: Vec<_> = stream::iter(0..n)
        .map(|i| {
            let locks = locks.clone();
            async move {
                let guard = locks
                    .acquire(&format!("held:{i:05}"), ttl)
                    .await
                    .expect("acquire");
                guard.keep_alive();
                guard
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    guards.extend(acquired);
    let held = rss();
    let evals_before = stat(c, 0, "evalsha").await;
    let stats_before = locks.watchdog_stats();
    let window = Duration::from_secs(9);
    tokio::time::sleep(window).await;
    let stats = locks.watchdog_stats();
    let after = rss();
    let evals = stat(c, 0, "evalsha").await - evals_before;
    let ticks = stats.ticks - stats_before.ticks;
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    println!(
        "{n} locks held with watchdogs (TTL {ttl:?}, renewal every {:?})",
        ttl / 3
    );
    println!(
        "    resident memory per lock: {:.0} B after acquiring, {:.0} B after {:?} of renewals",
        (held.saturating_sub(before)) as f64 / n as f64,
        (after.saturating_sub(before)) as f64 / n as f64,
        window
    );
    println!(
        "    in {window:?}: {ticks} ticks, {} renewals, {} pipelines ({:.2} per master per tick), {evals} EVALSHA calls on master 0, {lost} lost",
        stats.renewals - stats_before.renewals,
        stats.pipelines - stats_before.pipelines,
        (stats.pipelines - stats_before.pipelines) as f64 / (ticks.max(1) * 3) as f64,
    );
    for guard in guards {
        drop(guard.release().await);
    }
}

/// Resident set size of this process, in bytes.
fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

async fn stat(c: &Cluster, i: usize, name: &str) -> u64 {
    let mut conn = c.client(i).await.expect("connect");
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    let prefix = format!("cmdstat_{name}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

async fn set_calls(c: &Cluster, i: usize) -> u64 {
    stat(c, i, "set").await
}

fn percentile(samples: &[Duration], p: usize) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = (sorted.len() * p / 100).min(sorted.len() - 1);
    sorted[index]
}

fn ratio(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}

fn report(name: &str, samples: &[Duration], sets_per_handoff: Option<f64>) {
    print!(
        "{name}: n={} p50={:?} p99={:?}",
        samples.len(),
        percentile(samples, 50),
        percentile(samples, 99)
    );
    match sets_per_handoff {
        Some(sets) => println!(", {sets:.1} SET calls per hand-off on master 0"),
        None => println!(),
    }
}
