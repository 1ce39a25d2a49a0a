//! The watchdog against real masters: renewal past many TTLs, the lost-lock signal under a paused
//! majority and under a conflict, `with_lock` cancelling its work, hold caps, and batched renewals.
//!
//! The masters are real processes on a machine that may be busy, so time is asserted as order, not
//! speed: the lost-lock signal is raced against a timer of our own set for the end of the lock's
//! validity, on the same clock and in the same task, and what a hold did is read from the validity
//! the client recorded rather than from how long the test waited.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

use common::{builder, cluster, eventually, holders, locks, value};
use quorlock::{Guard, KeepAlive, Quorlock, WithLockError};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_millis(600);

/// Whether the watchdog of `locks` stops watching every lock within 2 s.
async fn unwatched(locks: &Quorlock) -> bool {
    eventually(Duration::from_secs(2), || async {
        locks.watchdog_stats().watched == 0
    })
    .await
}

/// Waits, for at most `limit`, until `guard.lost()` fires, and fails if a timer of ours set for the
/// end of the guard's last confirmed validity fires first.
///
/// Both are timers of the same clock polled by the same task, `lost()` first: when a loaded machine
/// wakes the task late, both are due and `lost()` wins, so a late wake-up cannot fail this. What
/// fails it is a `lost()` that was not armed for the validity's end (it would wait for the
/// watchdog to give up, or aim later than the validity). A renewal that moves the validity while
/// we wait re-arms our timer.
async fn lost_by_its_validity_end(guard: &Guard, limit: Duration) {
    let race = async {
        loop {
            let valid_until = guard.valid_until();
            tokio::select! {
                biased;
                () = guard.lost() => return,
                () = tokio::time::sleep_until(valid_until) => {
                    assert!(
                        guard.valid_until() > valid_until,
                        "the validity ended before lost() fired"
                    );
                }
            }
        }
    };
    tokio::time::timeout(limit, race).await.expect("lost() fires");
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
    // Every attempt of another client during the hold is refused, to the last one, which starts six
    // TTLs in: without renewals the lock would have expired before one TTL had passed. However few
    // attempts a busy machine fits in, each one must fail.
    let mut attempts = 0;
    loop {
        let at = started.elapsed();
        assert!(!guard.is_lost(), "lost after {at:?}");
        attempts += 1;
        if let Ok(taken) = b.try_acquire("long-job", TTL).await {
            panic!("attempt {attempts}, {at:?} into the hold, acquired the held lock: {taken:?}");
        }
        if at >= TTL * 6 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 0..3 {
        assert_eq!(value(&c, i, "long-job").await.as_deref(), Some(guard.token()));
    }
    // Still valid now, past the six TTLs: only confirmed renewals move the validity, and each moves
    // it at most one TTL past its own round.
    assert!(!guard.is_lost(), "lost after {:?}", started.elapsed());
    assert!(guard.validity() <= TTL, "validity {:?}", guard.validity());
    let window = started.elapsed();
    let stats = a.watchdog_stats();
    assert_eq!(stats.watched, 1);
    // Renewed every third of the TTL: at least one tick per two intervals on average, however late
    // a busy machine wakes the watchdog (its next tick is counted from the last one's start). A
    // watchdog that renewed only when the validity was about to end would tick once per TTL.
    let intervals = (window.as_millis() / (TTL / 3).as_millis()) as u64;
    assert!(
        stats.ticks * 2 >= intervals,
        "{} ticks in {window:?} ({attempts} attempts): {stats:?}",
        stats.ticks
    );
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
    // No later than the last confirmed validity (a renewal confirmed between the two pauses moves it).
    lost_by_its_validity_end(&guard, Duration::from_secs(5)).await;
    assert!(guard.is_lost());
    // And not before it ran out: renewals that went unanswered are retried inside the validity, so
    // the signal is the validity's end (aimed a few milliseconds early), not the first failed
    // renewal. Read after the signal, so a late wake-up only shrinks what is left.
    assert!(
        guard.validity() <= TTL / 20,
        "lost() fired with {:?} of validity left",
        guard.validity()
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
    // Two TTLs into the work, the work must still be running (the watchdog kept the lock: without
    // renewals it would have been lost a whole TTL earlier); only then is a majority paused.
    let pauser = async {
        started_rx.await.expect("work started");
        tokio::time::sleep(TTL * 2).await;
        let running = !dropped.load(Ordering::SeqCst);
        c.pause(0).expect("SIGSTOP");
        c.pause(2).expect("SIGSTOP");
        running
    };
    let (result, running) = tokio::join!(work, pauser);
    assert!(running, "the work was cancelled before the masters were paused");
    let err = result.expect_err("the lock was lost");
    assert!(err.is_lock_lost(), "{err}");
    assert!(matches!(&err, WithLockError::LockLost { resource, .. } if resource == "job"));
    // Measured when the loss was handled, so a busy machine only makes it longer.
    let WithLockError::LockLost { held_for, .. } = &err else {
        unreachable!()
    };
    assert!(*held_for >= TTL * 2, "held for {held_for:?}");
    assert!(dropped.load(Ordering::SeqCst), "the work future was dropped");
    assert!(
        !finished.load(Ordering::SeqCst),
        "the work did not run to its end"
    );
    // It stopped before its 1,000 steps (10 s at the least).
    let ran = steps.load(Ordering::SeqCst);
    assert!(ran > 0 && ran < 1000, "{ran} steps");
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
    // A long TTL renewed as often as the short one elsewhere here: the conflict is found at the
    // next renewal, some 200 ms away, while the validity's timer could only fire seconds later, so
    // even a late wake-up on a busy machine tells one from the other.
    let ttl = TTL * 10;
    let guard = locks.acquire("taken", ttl).await.expect("acquire");
    guard.keep_alive_with(KeepAlive::default().interval(TTL / 3));
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
    // No more renewals go out (for three renewal intervals), and the other holder's key is untouched.
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
    let first = guard.valid_until();
    guard.keep_alive_with(KeepAlive::default().max_hold(cap));
    // The cap is counted from inside `keep_alive_with`, at or before this instant.
    let capped_at = Instant::now() + cap;
    lost_by_its_validity_end(&guard, Duration::from_secs(5)).await;
    let valid_until = guard.valid_until();
    // Renewed past its first validity...
    assert!(valid_until > first, "never renewed");
    // ...and not past the cap: the last renewal was cut to end at it. The validity is what the
    // client recorded, not when the test woke up; the margin covers only a thread descheduled
    // between the two clock reads of one tick (the cut is computed at the first, the validity
    // counted from the second). A renewal that was not cut would end up to a TTL past the cap.
    assert!(
        valid_until <= capped_at + TTL / 4,
        "the validity ended {:?} past the cap",
        valid_until - capped_at
    );
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
    // Until every lock has been renewed three times on average (six renewal intervals on a quiet
    // machine), and none was lost meanwhile: counted in renewals, not in time, so a busy machine
    // only makes this take longer.
    assert!(
        eventually(Duration::from_secs(30), || async {
            locks.watchdog_stats().renewals >= before.renewals + 200 * 3
        })
        .await,
        "{:?}",
        locks.watchdog_stats()
    );
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
