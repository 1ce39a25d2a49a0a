//! The watchdog against real masters: renewal past many TTLs, the lost-lock signal under a paused
//! majority and under a conflict, `with_lock` cancelling its work, hold caps, and batched renewals.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use common::{builder, cluster, eventually, holders, locks, value};
use quorlock::{KeepAlive, Quorlock, WithLockError};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_millis(600);

/// Whether the watchdog of `locks` stops watching every lock within 2 s.
async fn unwatched(locks: &Quorlock) -> bool {
    eventually(Duration::from_secs(2), || async {
        locks.watchdog_stats().watched == 0
    })
    .await
}

#[tokio::test]
async fn the_watchdog_keeps_a_lock_through_many_ttls() {
    let c = cluster(3).await;
    let a = locks(&c).await;
    let b = locks(&c).await;
    let guard = a.acquire("long-job", TTL).await.expect("acquire");
    guard.keep_alive();
    guard.keep_alive(); // idempotent
    let started = Instant::now();
    let mut refused = 0;
    while started.elapsed() < TTL * 6 {
        assert!(!guard.is_lost(), "lost after {:?}", started.elapsed());
        if b.try_acquire("long-job", TTL).await.is_err() {
            refused += 1;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(refused >= 20, "the lock must stay held: {refused} refusals");
    for i in 0..3 {
        assert_eq!(value(&c, i, "long-job").await.as_deref(), Some(guard.token()));
    }
    assert!(guard.validity() > TTL / 3, "validity {:?}", guard.validity());
    let stats = a.watchdog_stats();
    assert_eq!(stats.watched, 1);
    assert!(stats.ticks >= 6, "{stats:?}");
    let released = guard.release().await.expect("release");
    // Our token was still on a majority: the watchdog kept the lock (the release returns at a majority).
    assert!(released.held >= 2, "{released:?}");
    assert!(unwatched(&a).await, "the watchdog still watches the lock");
}

#[tokio::test]
async fn with_a_majority_paused_lost_fires_before_the_last_validity_ends() {
    let mut c = cluster(3).await;
    let locks = builder(&c)
        .node_timeout(Duration::from_millis(100))
        .build()
        .await
        .expect("build");
    let guard = locks.acquire("stalled", TTL).await.expect("acquire");
    guard.keep_alive();
    // Let a renewal or two through, then stop a majority dead.
    tokio::time::sleep(TTL / 2).await;
    c.pause(0).expect("SIGSTOP");
    c.pause(1).expect("SIGSTOP");
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fires");
    let fired = Instant::now();
    // No renewal can have been confirmed after the pause, so this is the last confirmed validity.
    let valid_until = guard.valid_until();
    assert!(guard.is_lost());
    // Timers aim early; the margin only absorbs a loaded scheduler.
    assert!(
        fired <= valid_until + Duration::from_millis(30),
        "lost() fired {:?} after the validity ended",
        fired - valid_until
    );
    c.resume(0).expect("SIGCONT");
    c.resume(1).expect("SIGCONT");
}

/// Sets its flag when dropped: tells whether a future was dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn with_lock_cancels_the_work_when_the_lock_is_lost() {
    let mut c = cluster(3).await;
    let locks = builder(&c)
        .node_timeout(Duration::from_millis(100))
        .build()
        .await
        .expect("build");
    let dropped = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let steps = Arc::new(AtomicU32::new(0));
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let work = {
        let (dropped, finished, steps) = (dropped.clone(), finished.clone(), steps.clone());
        locks.with_lock("job", TTL, move |lock| async move {
            let _flag = DropFlag(dropped);
            let _ = started_tx.send(());
            assert!(!lock.is_lost());
            for _ in 0..1000 {
                steps.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            finished.store(true, Ordering::SeqCst);
            42
        })
    };
    let pauser = async {
        started_rx.await.expect("work started");
        tokio::time::sleep(TTL).await;
        c.pause(0).expect("SIGSTOP");
        c.pause(2).expect("SIGSTOP");
    };
    let (result, ()) = tokio::join!(work, pauser);
    let err = result.expect_err("the lock was lost");
    assert!(err.is_lock_lost(), "{err}");
    assert!(matches!(&err, WithLockError::LockLost { resource, .. } if resource == "job"));
    assert!(dropped.load(Ordering::SeqCst), "the work future was dropped");
    assert!(
        !finished.load(Ordering::SeqCst),
        "the work did not run to its end"
    );
    // It ran past the first TTL (the watchdog kept it), and stopped long before its 10 s of steps.
    let ran = steps.load(Ordering::SeqCst);
    assert!(ran > 20 && ran < 1000, "{ran} steps");
    c.resume(0).expect("SIGCONT");
    c.resume(2).expect("SIGCONT");
}

#[tokio::test]
async fn with_lock_returns_the_output_and_releases() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let out = locks
        .with_lock("short-job", TTL, |lock| async move {
            tokio::time::sleep(TTL * 2).await;
            assert!(!lock.is_lost());
            lock.token().to_owned()
        })
        .await
        .expect("work ran under the lock");
    assert_eq!(out.len(), 32);
    assert_eq!(holders(&c, &[0, 1, 2], "short-job").await, 0);
}

#[tokio::test]
async fn a_conflict_stops_the_watchdog_at_once() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let guard = locks.acquire("taken", TTL).await.expect("acquire");
    guard.keep_alive();
    // Someone else's token replaces ours everywhere (as after an expiry and a takeover).
    for i in 0..3 {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn.set_ex("taken", "intruder", 30).await.expect("SET");
    }
    tokio::time::timeout(Duration::from_secs(3), guard.lost())
        .await
        .expect("lost() fires");
    // Known from the conflict, long before the validity would have run out.
    let left = guard.valid_until().saturating_duration_since(Instant::now());
    assert!(
        left > Duration::ZERO,
        "the signal came from the conflict, not the timer"
    );
    assert!(guard.is_lost());
    assert!(unwatched(&locks).await, "the watchdog still watches the lock");
    let stats = locks.watchdog_stats();
    assert_eq!(stats.lost, 1, "{stats:?}");
    // No more renewals go out, and the other holder's key is untouched.
    tokio::time::sleep(TTL).await;
    assert_eq!(locks.watchdog_stats().renewals, stats.renewals);
    for i in 0..3 {
        assert_eq!(value(&c, i, "taken").await.as_deref(), Some("intruder"));
    }
    drop(guard);
}

#[tokio::test]
async fn dropping_a_kept_alive_guard_releases_it_and_stops_renewals() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let guard = locks.acquire("dropped", TTL).await.expect("acquire");
    guard.keep_alive();
    drop(guard);
    assert!(
        eventually(Duration::from_secs(2), || async {
            holders(&c, &[0, 1, 2], "dropped").await == 0
        })
        .await
    );
    assert!(unwatched(&locks).await, "the watchdog still watches the lock");
}

#[tokio::test]
async fn a_hold_cap_lets_the_lock_expire_at_the_cap() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let cap = TTL * 2;
    let guard = locks.acquire("capped", TTL).await.expect("acquire");
    let started = Instant::now();
    guard.keep_alive_with(KeepAlive::default().max_hold(cap));
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost() fires at the cap");
    let held = started.elapsed();
    // Renewed past its first TTL, and not past the cap.
    assert!(held > TTL, "held {held:?}");
    // The last renewal was cut to end at the cap; the margin only absorbs a loaded scheduler.
    assert!(held <= cap + Duration::from_millis(100), "held {held:?}");
    assert!(
        eventually(Duration::from_secs(2), || async {
            holders(&c, &[0, 1, 2], "capped").await == 0
        })
        .await
    );
}

#[tokio::test]
async fn renewals_of_many_locks_share_one_pipeline_per_master_per_tick() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let ttl = Duration::from_millis(1500);
    let mut guards = Vec::new();
    for i in 0..200 {
        let guard = locks.acquire(&format!("many:{i}"), ttl).await.expect("acquire");
        guard.keep_alive();
        guards.push(guard);
    }
    let before = locks.watchdog_stats();
    // Six renewal intervals.
    tokio::time::sleep(ttl * 2).await;
    assert!(guards.iter().all(|g| !g.is_lost()));
    let stats = locks.watchdog_stats();
    assert_eq!(stats.watched, 200);
    let (renewals, ticks) = (stats.renewals - before.renewals, stats.ticks - before.ticks);
    // Every lock was renewed several times, in far fewer ticks than renewals.
    assert!(renewals >= 200 * 3, "{renewals} renewals: {stats:?}");
    // (A loose ratio: on a loaded machine the 200 acquisitions spread out, and so do their due times.)
    assert!(
        ticks * 5 <= renewals,
        "{ticks} ticks for {renewals} renewals: {stats:?}"
    );
    assert!(stats.pipelines <= stats.ticks * 3, "{stats:?}");
    for guard in guards {
        guard.release().await.expect("release");
    }
}

#[tokio::test]
async fn renewals_survive_a_flushed_script_cache() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let guard = locks.acquire("flushed", TTL).await.expect("acquire");
    guard.keep_alive();
    let started = Instant::now();
    while started.elapsed() < TTL * 3 {
        // As after a master restart: the scripts the renewals run are gone.
        common::on_every_master(&c, &["SCRIPT", "FLUSH"]).await;
        tokio::time::sleep(TTL / 6).await;
        assert!(!guard.is_lost(), "lost after {:?}", started.elapsed());
    }
    assert!(locks.watchdog_stats().ticks >= 3);
    assert!(guard.release().await.expect("release").held >= 2);
}

/// `total_connections_received` of the master behind `conn` (reuse one connection: each new one counts).
async fn connections_received(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(conn)
        .await
        .expect("INFO");
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("total_connections_received")
}

#[tokio::test]
async fn large_ticks_reopen_their_connections_and_keep_renewing() {
    use futures::stream::{self, StreamExt};
    let c = cluster(3).await;
    // A thousand locks renewed at once on a busy machine: a node timeout well inside the TTL but
    // far above the default, so the final releases are not refused for a slow reply.
    let locks = builder(&c)
        .node_timeout(Duration::from_secs(1))
        .build()
        .await
        .expect("build");
    let ttl = Duration::from_secs(6);
    // The watchdog closes its renewal connections after a tick of at least 1,000 renewals.
    let n = 1_000;
    let guards: Vec<_> = stream::iter(0..n)
        .map(|i| {
            let locks = locks.clone();
            async move { locks.acquire(&format!("large:{i}"), ttl).await.expect("acquire") }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    // Kept alive once every lock is past its first renewal time (a third of the TTL after its
    // acquire), so all are due at once, however long the acquires took on a busy machine: the
    // first tick renews all of them, and locks renewed in one tick stay together. Each such tick
    // closes its renewal connections and the next one opens them again.
    tokio::time::sleep(ttl / 3 + Duration::from_millis(100)).await;
    for guard in &guards {
        guard.keep_alive();
    }
    let mut conn = c.client(0).await.expect("connect");
    let opened = connections_received(&mut conn).await;
    let stats = locks.watchdog_stats();
    let conn = tokio::sync::Mutex::new(conn);
    assert!(
        eventually(Duration::from_secs(30), || async {
            connections_received(&mut *conn.lock().await).await >= opened + 2
                && locks.watchdog_stats().ticks >= stats.ticks + 3
        })
        .await,
        "no renewal connection was reopened: {:?}",
        locks.watchdog_stats()
    );
    assert!(
        guards.iter().all(|g| !g.is_lost()),
        "{:?}",
        locks.watchdog_stats()
    );
    let renewed = locks.watchdog_stats();
    assert!(renewed.renewals >= stats.renewals + n as u64, "{renewed:?}");
    assert_eq!(renewed.lost, 0, "{renewed:?}");
    for guard in guards {
        guard.release().await.expect("release");
    }
}
