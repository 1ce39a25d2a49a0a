//! What the CLI tests share: real masters from the chaos harness, a library client for setting up
//! and checking locks, and polling without wall-clock assumptions.

use std::time::Duration;

use quorlock::Quorlock;
use quorlock_chaos::Cluster;
use redis::AsyncCommands;

/// Starts `n` fresh masters.
pub async fn cluster(n: usize) -> Cluster {
    Cluster::start(n)
        .await
        .expect("start redis-server masters (is redis-server installed?)")
}

/// A library client for `cluster`, to hold locks the binary must wait for.
pub async fn locks(cluster: &Cluster) -> Quorlock {
    Quorlock::builder()
        .nodes(cluster.urls())
        .node_timeout(Duration::from_millis(200))
        .wait(Duration::from_secs(2))
        .build()
        .await
        .expect("build quorlock")
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
        let mut conn = cluster.client(i).await.expect("connect to master");
        let value: Option<String> = conn.get(key).await.expect("GET");
        if value.is_some() {
            n += 1;
        }
    }
    n
}
