//! Scripts by SHA1 on real masters: releases and extends go out as `EVALSHA` once a connection has
//! run the script, and still work after the masters' script cache was flushed under the client.
//! On Redis, whatever server the suite runs on: Valkey 9.1 releases and extends natively instead
//! (`tests/native.rs`).

mod common;

use std::time::Duration;

use common::{locks, value};
use quorlock_chaos::{Cluster, ClusterOptions, Server};

const TTL: Duration = Duration::from_secs(10);

/// Three Redis masters: the servers whose plain locks go by script.
async fn redis_masters() -> Cluster {
    Cluster::start_with(ClusterOptions {
        masters: 3,
        server: Some(Server::Redis),
        ..ClusterOptions::default()
    })
    .await
    .expect("start redis-server masters")
}

#[tokio::test]
async fn release_goes_by_sha_once_loaded_and_survives_a_script_flush() {
    let c = redis_masters().await;
    let locks = locks(&c).await;

    // The first release on each connection carries the source and caches the script.
    let guard = locks.acquire("scripts:a", TTL).await.expect("acquire");
    let released = guard.release().await.expect("first release");
    // A release returns once a majority confirmed it.
    assert!(released.held >= 2);

    // From then on it goes by SHA1.
    let before: Vec<u64> =
        futures::future::join_all((0..3).map(|i| common::calls(&c, i, &["evalsha"]))).await;
    let guard = locks.acquire("scripts:a", TTL).await.expect("acquire again");
    guard.extend(TTL).await.expect("extend");
    let released = guard.release().await.expect("second release");
    assert!(released.held >= 2);
    // The release returns at a majority; the last master's reply may still be on its way.
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            let after: Vec<u64> =
                futures::future::join_all((0..3).map(|i| common::calls(&c, i, &["evalsha"]))).await;
            after.iter().zip(&before).all(|(a, b)| a > b)
        })
        .await,
        "every master ran the release by SHA1"
    );

    // The cache is emptied behind the client's back: NOSCRIPT must fall back to the source.
    common::on_every_master(&c, &["SCRIPT", "FLUSH"]).await;
    let guard = locks
        .acquire("scripts:a", TTL)
        .await
        .expect("acquire after flush");
    guard.extend(TTL).await.expect("extend after flush");
    let released = guard.release().await.expect("release after flush");
    assert!(released.held >= 2, "a majority released the lock");
    for i in 0..3 {
        assert!(
            common::eventually(Duration::from_secs(5), || async {
                value(&c, i, "scripts:a").await.is_none()
            })
            .await,
            "master {i} still holds the key"
        );
    }
}

#[tokio::test]
async fn release_after_a_restart_reloads_the_script() {
    let mut c = redis_masters().await;
    let locks = common::builder(&c)
        // The restarted master's votes count at once here; the grace is tested elsewhere.
        .restart_grace(Duration::ZERO)
        .build()
        .await
        .expect("build");
    let guard = locks.acquire("scripts:b", TTL).await.expect("acquire");
    guard.release().await.expect("release");
    // A restart empties the master's script cache and drops the client's connection.
    c.restart(0, quorlock_chaos::DataMode::Wipe)
        .await
        .expect("restart");
    // The first command on the dead connection fails; a later release on the new connection must
    // reach the restarted master, whose cache is empty, and delete the key there.
    let mut freed = false;
    for i in 0..20 {
        let key = format!("scripts:b:{i}");
        let guard = locks.acquire(&key, TTL).await.expect("acquire after restart");
        // Only a lock the restarted master granted shows whether its release works there.
        let granted = value(&c, 0, &key).await.as_deref() == Some(guard.token());
        guard.release().await.expect("release after restart");
        if !granted {
            continue;
        }
        if common::eventually(Duration::from_secs(1), || async {
            value(&c, 0, &key).await.is_none()
        })
        .await
        {
            freed = true;
            break;
        }
    }
    assert!(freed, "the restarted master never released a lock again");
}
