//! End-to-end checks of the process backend against real `redis-server` children:
//! kill, pause/resume and restart keeping or wiping data.

use std::time::Duration;

use quorlock_chaos::{Cluster, ClusterOptions, DataMode, HarnessError};
use redis::AsyncCommands;

async fn ping(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<String> {
    redis::cmd("PING").query_async(conn).await
}

#[tokio::test]
async fn kill_pause_resume_restart_keep_and_wipe() {
    let mut cluster = Cluster::start(3).await.unwrap();
    assert_eq!(cluster.len(), 3);
    let urls = cluster.urls();
    assert_eq!(urls.len(), 3);
    for (i, url) in urls.iter().enumerate() {
        assert_eq!(url, &format!("redis://127.0.0.1:{}", cluster.port(i)));
        assert!(cluster.is_running(i));
    }
    let distinct: std::collections::HashSet<_> = urls.iter().collect();
    assert_eq!(distinct.len(), 3, "ports must be distinct: {urls:?}");

    // Kill master 0: it stops answering and reports not running.
    cluster.kill(0).unwrap();
    assert!(!cluster.is_running(0));
    assert!(matches!(
        cluster.keys(0, "*").await,
        Err(HarnessError::NotRunning { index: 0, .. })
    ));
    cluster.kill(0).unwrap(); // idempotent

    // Pause master 1: an open connection gets no answer; resume brings it back.
    let mut conn1 = cluster.client(1).await.unwrap();
    assert_eq!(ping(&mut conn1).await.unwrap(), "PONG");
    cluster.pause(1).unwrap();
    assert!(cluster.is_paused(1));
    assert!(cluster.is_running(1));
    let paused = tokio::time::timeout(Duration::from_millis(200), ping(&mut conn1)).await;
    assert!(paused.is_err(), "a paused master answered: {paused:?}");
    assert!(matches!(
        cluster.keys(1, "*").await,
        Err(HarnessError::Paused { index: 1, .. })
    ));
    cluster.resume(1).unwrap();
    assert!(!cluster.is_paused(1));
    let mut conn1 = cluster.client(1).await.unwrap();
    assert_eq!(ping(&mut conn1).await.unwrap(), "PONG");

    // Restart master 2 keeping data: a key without TTL survives the SIGKILL.
    let port2 = cluster.port(2);
    let mut conn2 = cluster.client(2).await.unwrap();
    let _: () = conn2.set("survivor", "1").await.unwrap();
    cluster.restart(2, DataMode::Keep).await.unwrap();
    assert_eq!(cluster.port(2), port2);
    assert_eq!(cluster.keys(2, "*").await.unwrap(), vec!["survivor"]);

    // Restart master 2 wiping data: the key is gone.
    cluster.restart(2, DataMode::Wipe).await.unwrap();
    assert_eq!(cluster.port(2), port2);
    assert!(cluster.keys(2, "*").await.unwrap().is_empty());

    // A killed master can be restarted too.
    cluster.restart(0, DataMode::Keep).await.unwrap();
    assert!(cluster.is_running(0));
    assert!(cluster.keys(0, "*").await.unwrap().is_empty());
}

#[tokio::test]
async fn password_and_acl_user_are_in_urls_and_enforced() {
    let cluster = Cluster::start_with(ClusterOptions {
        masters: 1,
        password: Some("pw:1".into()),
        acl_user: Some(("locker".into(), "s3cret".into())),
        ..ClusterOptions::default()
    })
    .await
    .unwrap();
    assert_eq!(
        cluster.url(0),
        format!("redis://locker:s3cret@127.0.0.1:{}", cluster.port(0))
    );
    // The ACL user works (the harness itself connects with it).
    let mut conn = cluster.client(0).await.unwrap();
    let who: String = redis::cmd("ACL")
        .arg("WHOAMI")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(who, "locker");
    // The default user needs the password.
    let anon = redis::Client::open(format!("redis://127.0.0.1:{}", cluster.port(0))).unwrap();
    let mut anon = anon.get_multiplexed_async_connection().await.unwrap();
    assert!(ping(&mut anon).await.is_err());
    let with_pw = redis::Client::open(format!("redis://:pw%3A1@127.0.0.1:{}", cluster.port(0))).unwrap();
    let mut with_pw = with_pw.get_multiplexed_async_connection().await.unwrap();
    assert_eq!(ping(&mut with_pw).await.unwrap(), "PONG");
}

#[tokio::test]
async fn without_fsync_always_a_restart_comes_back_empty() {
    let mut cluster = Cluster::start_with(ClusterOptions {
        masters: 1,
        appendfsync_always: false,
        ..ClusterOptions::default()
    })
    .await
    .unwrap();
    let mut conn = cluster.client(0).await.unwrap();
    let _: () = conn.set("volatile", "1").await.unwrap();
    cluster.restart(0, DataMode::Keep).await.unwrap();
    assert!(cluster.keys(0, "*").await.unwrap().is_empty());
}

#[tokio::test]
async fn drop_kills_children_and_removes_dirs() {
    let cluster = Cluster::start(2).await.unwrap();
    let dir = cluster.dir(0).to_path_buf();
    let pid = cluster.pid(0).unwrap();
    assert!(dir.exists());
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    drop(cluster);
    assert!(!dir.exists(), "{} was left behind", dir.display());
    // The child was reaped, so its /proc entry is gone.
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

#[tokio::test]
async fn paused_cluster_drops_cleanly() {
    let mut cluster = Cluster::start(1).await.unwrap();
    cluster.pause(0).unwrap();
    drop(cluster);
}

#[tokio::test]
async fn bad_options_fail_with_a_message() {
    let err = Cluster::start_with(ClusterOptions {
        masters: 1,
        extra_args: vec!["--no-such-option".into(), "x".into()],
        ..ClusterOptions::default()
    })
    .await
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("no-such-option"), "{msg}");
}
