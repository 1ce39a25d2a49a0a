//! Blocking waits against real masters: woken by the holder's release, outwaiting a crashed holder
//! without polling, falling back to polling without pub/sub, and local coalescing of many waiters.

mod common;

use std::time::{Duration, Instant};

use common::{builder, cluster, holders, locks, reset_stats};
use futures::FutureExt;
use quorlock::Quorlock;
use quorlock_chaos::Cluster;
use redis::AsyncCommands;

const HOLD: Duration = Duration::from_secs(10);

/// `SET` calls master `i` has served since its stats were last reset.
async fn set_calls(c: &Cluster, i: usize) -> u64 {
    common::calls(c, i, &["set"]).await
}

#[tokio::test]
async fn a_woken_waiter_acquires_before_a_polling_waiter_would_have_retried() {
    common::woken_before_polling(|locks, resource| {
        async move { locks.acquire(resource, HOLD).await }.boxed()
    })
    .await;
}

#[tokio::test]
async fn a_crashed_holder_is_outwaited_at_its_ttl_without_polling() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    // A holder that set the key everywhere and died: nobody will ever announce a release.
    let ttl_ms = 800;
    for i in 0..3 {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = redis::cmd("SET")
            .arg("crashed")
            .arg("dead-holder")
            .arg("PX")
            .arg(ttl_ms)
            .query_async(&mut conn)
            .await
            .expect("SET");
    }
    reset_stats(&c).await;
    let started = Instant::now();
    let guard = locks
        .acquire("crashed", HOLD)
        .await
        .expect("acquired after the TTL");
    // It cannot have got the key before it expired on a majority.
    assert!(
        started.elapsed() >= Duration::from_millis(ttl_ms / 2),
        "{:?}",
        started.elapsed()
    );
    // Ours on a majority (a master whose copy of the dead key has not expired yet may lag by a few
    // milliseconds: the majority is what counts).
    let mut ours = 0;
    for i in 0..3 {
        let mut conn = c.client(i).await.expect("connect");
        let v: Option<String> = conn.get("crashed").await.expect("GET");
        if v.as_deref() == Some(guard.token()) {
            ours += 1;
        }
    }
    assert!(ours >= 2, "our token on only {ours} of 3 masters");
    // Woken near the expiry, not every 20 ms (which would be about 40 attempts).
    let calls = set_calls(&c, 0).await;
    eprintln!("crashed holder: {calls} SET calls on master 0");
    assert!(calls <= 6, "{calls} SET calls on master 0");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn without_pub_sub_a_waiter_falls_back_to_polling() {
    let c = cluster(3).await;
    // A user allowed to take locks but not to subscribe to any channel.
    for i in 0..3 {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = redis::cmd("ACL")
            .arg(&["SETUSER", "nosub", "on", ">pw", "~*", "+@all", "resetchannels"])
            .query_async(&mut conn)
            .await
            .expect("ACL SETUSER");
    }
    let holder = locks(&c).await;
    let urls: Vec<String> = (0..3)
        .map(|i| format!("redis://nosub:pw@127.0.0.1:{}", c.port(i)))
        .collect();
    let waiter = Quorlock::builder()
        .nodes(urls)
        .node_timeout(Duration::from_millis(200))
        .retry_delay(Duration::from_millis(50))
        .retry_jitter(Duration::from_millis(25))
        .wait(Duration::from_secs(5))
        .build()
        .await
        .expect("build");
    let guard = holder.acquire("nosub", HOLD).await.expect("hold");
    let task = tokio::spawn(async move { waiter.acquire("nosub", HOLD).await.map(|g| g.token().to_owned()) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!task.is_finished());
    guard.release().await.expect("release");
    let token = task.await.expect("task").expect("acquired by polling");
    assert_eq!(token.len(), 32);
}

/// Fifty tasks of one process wait for a key held elsewhere, then take turns holding it.
async fn fifty_waiters(c: &Cluster, local_queue: bool) -> u64 {
    let holder = locks(c).await;
    let waiters = builder(c)
        .wait(Duration::from_secs(30))
        .max_attempts(10_000)
        .local_queue(local_queue)
        .build()
        .await
        .expect("build");
    let guard = holder.acquire("crowd", HOLD).await.expect("hold");
    reset_stats(c).await;
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let waiters = waiters.clone();
        tasks.push(tokio::spawn(async move {
            let guard = waiters.acquire("crowd", HOLD).await.expect("acquire in turn");
            tokio::time::sleep(Duration::from_millis(2)).await;
            guard.release().await.expect("release");
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    guard.release().await.expect("release");
    for task in tasks {
        task.await.expect("task");
    }
    assert_eq!(holders(c, &[0, 1, 2], "crowd").await, 0);
    let calls = set_calls(c, 0).await;
    eprintln!("local_queue={local_queue}: {calls} SET calls on master 0 for 50 hand-offs");
    calls
}

#[tokio::test]
async fn fifty_local_waiters_make_about_one_remote_attempt_per_release() {
    let c = cluster(3).await;
    let calls = fifty_waiters(&c, true).await;
    // 51 releases (the outside holder's and each waiter's): one attempt each, plus the head's
    // first attempt and its re-attempt after subscribing, plus a few fallback wake-ups.
    assert!(calls <= 50 + 8, "{calls} SET calls on master 0 for 50 hand-offs");
}

#[tokio::test]
async fn without_the_local_queue_fifty_waiters_contend_remotely() {
    // The negative control: the same crowd, every waiter contending on the masters: each makes
    // its own first attempt there, and each release wakes one of them (the process is one member
    // of the key's hand-off queue), so about two attempts per waiter, well above the bound above.
    let c = cluster(3).await;
    let calls = fifty_waiters(&c, false).await;
    assert!(calls > 90, "{calls} SET calls on master 0");
}
