//! Shared helpers for the integration tests: real masters from the chaos harness, and a builder
//! tuned for tests (short retry delays, a node timeout generous enough for a loaded CI machine).
#![allow(dead_code)]

use std::time::Duration;

use quorlock::{Quorlock, QuorlockBuilder};
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
