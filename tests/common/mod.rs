//! Shared helpers for the integration tests: real masters from the chaos harness, and a builder
//! tuned for tests (short retry delays, a node timeout generous enough for a loaded CI machine).
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use quorlock::{AcquireError, Guard, Quorlock, QuorlockBuilder};
use quorlock_chaos::Cluster;
use redis::AsyncCommands;

/// Starts `n` fresh masters.
pub async fn cluster(n: usize) -> Cluster {
    Cluster::start(n)
        .await
        .expect("start redis-server masters (is redis-server installed?)")
}

/// A builder for `cluster` with test-friendly retry settings.
pub fn builder(cluster: &Cluster) -> QuorlockBuilder {
    Quorlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(200))
        .retry_delay(Duration::from_millis(20))
        .retry_jitter(Duration::from_millis(10))
        .wait(Duration::from_secs(2))
}

/// A built client for `cluster`.
pub async fn locks(cluster: &Cluster) -> Quorlock {
    builder(cluster).build().await.expect("build quorlock")
}

/// The value stored under `key` on master `i`, if any.
pub async fn value(cluster: &Cluster, i: usize, key: &str) -> Option<String> {
    let mut conn = cluster.client(i).await.expect("connect to master");
    conn.get(key).await.expect("GET")
}

/// Polls until `check` holds, for at most `limit`; returns whether it did.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// How many masters among `live` hold any value under `key`.
pub async fn holders(cluster: &Cluster, live: &[usize], key: &str) -> usize {
    let mut n = 0;
    for &i in live {
        if value(cluster, i, key).await.is_some() {
            n += 1;
        }
    }
    n
}

/// How many connections subscribe to `channel` on master `i`.
pub async fn subscribers(cluster: &Cluster, i: usize, channel: &str) -> u64 {
    let mut conn = cluster.client(i).await.expect("connect to master");
    let (_, n): (String, u64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut conn)
        .await
        .expect("PUBSUB NUMSUB");
    n
}

/// Subscribes to `channel` on master `i` and returns its messages' payloads as a stream.
pub async fn subscribe(
    cluster: &Cluster,
    i: usize,
    channel: &str,
) -> impl futures::Stream<Item = String> + Unpin {
    use futures::StreamExt;
    let client = redis::Client::open(cluster.url(i)).expect("client");
    let mut pubsub = client.get_async_pubsub().await.expect("pubsub");
    pubsub.subscribe(channel).await.expect("SUBSCRIBE");
    Box::pin(
        pubsub
            .into_on_message()
            .map(|m| m.get_payload::<String>().expect("a text payload")),
    )
}

/// One plain acquire and release of `resource` in a single round each, both expected to succeed.
pub async fn cycle(locks: &Quorlock, resource: &str, ttl: Duration) {
    locks
        .try_acquire(resource, ttl)
        .await
        .expect("acquire")
        .release()
        .await
        .expect("release");
}

/// How many masters timed out in the (last) round of a failed acquire.
pub fn timeouts(err: &quorlock::AcquireError) -> usize {
    err.failures()
        .iter()
        .filter(|f| f.kind == quorlock::NodeErrorKind::Timeout)
        .count()
}

/// The masters whose failure in a failed acquire was `kind`, in order.
pub fn failed_with(err: &quorlock::AcquireError, kind: &quorlock::NodeErrorKind) -> Vec<usize> {
    err.failures()
        .iter()
        .filter(|f| f.kind == *kind)
        .map(|f| f.node)
        .collect()
}

/// An acquire of one kind on a resource, by a fresh owner where the kind has owners.
pub type Acquire = fn(Quorlock, &'static str) -> BoxFuture<'static, Result<Guard, AcquireError>>;

/// A client that would sleep 3 s between attempts when polling.
pub async fn waiter(c: &Cluster, wake_on_release: bool) -> Quorlock {
    builder(c)
        .retry_delay(Duration::from_secs(3))
        .retry_jitter(Duration::ZERO)
        .wait(Duration::from_secs(8))
        .wake_on_release(wake_on_release)
        .build()
        .await
        .expect("build")
}

/// The holder takes `a` and `b` with `acquire`; a waking client waits for `a`, a polling one for
/// `b`; both are released together. The waking client must acquire first.
pub async fn woken_before_polling(acquire: Acquire) {
    let c = cluster(3).await;
    let holder = locks(&c).await;
    let a = acquire(holder.clone(), "wait:woken:a").await.expect("hold a");
    let b = acquire(holder.clone(), "wait:woken:b").await.expect("hold b");
    let order = Arc::new(Mutex::new(Vec::new()));
    let wait_on = |locks: Quorlock, resource: &'static str, name: &'static str| {
        let order = Arc::clone(&order);
        tokio::spawn(async move {
            let guard = acquire(locks, resource).await.expect("acquire after release");
            order.lock().unwrap().push(name);
            guard
        })
    };
    let (polling, woken) = (waiter(&c, false).await, waiter(&c, true).await);
    reset_stats(&c).await;
    // The polling client starts first: were the waking one polling too, its retry would come
    // after the polling one's.
    let polling_task = wait_on(polling, "wait:woken:b", "polling");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let woken_task = wait_on(woken, "wait:woken:a", "woken");
    // Both have made their first attempts and are waiting.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(order.lock().unwrap().is_empty(), "nobody passes the holder");
    // Waiting is not polling: the polling client made one attempt, the waking one at most two
    // (the second right after subscribing); each costs at most an acquire and a release per master.
    let calls = calls(&c, 0, &["set", "eval", "evalsha"]).await;
    assert!(calls <= 12, "{calls} lock commands on master 0 while waiting");
    order.lock().unwrap().push("released");
    let (ra, rb) = tokio::join!(a.release(), b.release());
    ra.expect("release a");
    rb.expect("release b");
    let woken_guard = woken_task.await.expect("task");
    let polling_guard = polling_task.await.expect("task");
    assert_eq!(*order.lock().unwrap(), vec!["released", "woken", "polling"]);
    woken_guard.release().await.expect("release");
    polling_guard.release().await.expect("release");
}

/// Every command master `i` has served since its stats were last reset, with its call count.
pub async fn command_calls(c: &Cluster, i: usize) -> std::collections::HashMap<String, u64> {
    let mut conn = c.client(i).await.expect("connect");
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    info.lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(":calls=")?;
            let count = rest.split(',').next()?.parse().ok()?;
            Some((name.to_owned(), count))
        })
        .collect()
}

/// How many calls of the commands `names` master `i` has served since its stats were last reset.
pub async fn calls(c: &Cluster, i: usize, names: &[&str]) -> u64 {
    let all = command_calls(c, i).await;
    names.iter().filter_map(|name| all.get(*name)).sum()
}

/// Runs the admin command `args` (answered with `OK`) on every master.
pub async fn on_every_master(c: &Cluster, args: &[&str]) {
    for i in 0..c.len() {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = redis::cmd(args[0])
            .arg(&args[1..])
            .query_async(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{args:?} on master {i}: {e}"));
    }
}

/// Resets every master's command statistics.
pub async fn reset_stats(c: &Cluster) {
    on_every_master(c, &["CONFIG", "RESETSTAT"]).await;
}
