//! Per-call options: one lock request sets its own wait and attempts, for every kind of lock, and
//! `with` runs work under every kind. Impossible combinations are refused before anything is sent.

mod common;

use std::time::Duration;

use common::{builder, cluster, locks};
use quorlock::{AcquireError, InputError, LockOwner};

const TTL: Duration = Duration::from_secs(5);

#[tokio::test]
async fn each_call_waits_as_long_as_it_says_whatever_the_builder_default() {
    let c = cluster(3).await;
    let holder = locks(&c).await;
    let held = holder.acquire("busy", TTL).await.expect("acquire");
    // The client waits 30 s by default; these calls say otherwise.
    let waiter = builder(&c)
        .wait(Duration::from_secs(30))
        .build()
        .await
        .expect("build");
    let err = waiter
        .lock("busy", TTL)
        .wait(Duration::from_millis(150))
        .acquire()
        .await
        .expect_err("held elsewhere");
    assert!(err.is_timeout() && err.is_contended(), "{err}");
    // It gave up on the call's deadline, not on the client's 30 s.
    assert!(
        matches!(err, AcquireError::Exhausted { waited, .. } if waited < Duration::from_secs(29)),
        "{err}"
    );
    let err = waiter
        .lock("busy", TTL)
        .attempts(2)
        .acquire()
        .await
        .expect_err("held elsewhere");
    assert!(
        matches!(err, AcquireError::Exhausted { attempts: 2, .. }),
        "{err}"
    );
    // A longer wait in another call gets the lock once it is released.
    let releasing = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        held.release().await.expect("release");
    });
    let guard = waiter
        .lock("busy", TTL)
        .wait(Duration::from_secs(5))
        .acquire()
        .await
        .expect("acquired after the release");
    releasing.await.expect("release task");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn every_kind_takes_the_per_call_wait() {
    let c = cluster(3).await;
    let holder = locks(&c).await;
    let waiter = builder(&c)
        .wait(Duration::from_secs(30))
        .build()
        .await
        .expect("build");
    let short = Duration::from_millis(150);
    let owner = LockOwner::new();
    // Each kind's lock is held by another client, and each short wait gives up in time.
    let fenced = holder
        .lock("k-fenced", TTL)
        .fenced()
        .acquire()
        .await
        .expect("fenced");
    let err = waiter
        .lock("k-fenced", TTL)
        .fenced()
        .wait(short)
        .acquire()
        .await
        .expect_err("held");
    assert!(err.is_timeout(), "fenced: {err}");
    let reentrant = holder
        .lock("k-re", TTL)
        .reentrant(&owner)
        .acquire()
        .await
        .expect("reentrant");
    let err = waiter
        .lock("k-re", TTL)
        .reentrant(&LockOwner::new())
        .wait(short)
        .acquire()
        .await
        .expect_err("held by another owner");
    assert!(err.is_timeout(), "reentrant: {err}");
    let fair = holder.lock("k-fair", TTL).fair().acquire().await.expect("fair");
    let err = waiter
        .lock("k-fair", TTL)
        .fair()
        .wait(short)
        .acquire()
        .await
        .expect_err("held");
    assert!(err.is_timeout(), "fair: {err}");
    let set = holder.lock_all(["k-a", "k-b"], TTL).acquire().await.expect("set");
    let err = waiter
        .lock_all(["k-b", "k-c"], TTL)
        .wait(short)
        .acquire()
        .await
        .expect_err("b is held");
    assert!(err.is_timeout() && err.conflicts() == ["k-b"], "multi: {err}");
    for guard in [fenced, reentrant, fair, set] {
        guard.release().await.expect("release");
    }
}

#[tokio::test]
async fn work_runs_under_every_kind() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let owner = LockOwner::new();
    let token = locks
        .lock("w-fenced", TTL)
        .fenced()
        .with(|lock| async move { lock.fencing_token() })
        .await
        .expect("fenced work");
    assert!(token.is_some());
    let ran = locks
        .lock("w-re", TTL)
        .reentrant(&owner)
        .with(|_| async { 1 })
        .await
        .expect("reentrant work");
    let ran = ran
        + locks
            .lock("w-fair", TTL)
            .fair()
            .with(|_| async { 1 })
            .await
            .expect("fair work");
    let ran = ran
        + locks
            .lock_all(["w-a", "w-b"], TTL)
            .with(|_| async { 1 })
            .await
            .expect("set work");
    assert_eq!(ran, 3);
    // Every lock was released after its work.
    for resource in ["w-fenced", "w-a", "w-b"] {
        locks
            .try_acquire(resource, TTL)
            .await
            .expect("free again")
            .release()
            .await
            .expect("release");
    }
}

#[tokio::test]
async fn impossible_requests_are_refused_before_anything_is_sent() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let err = locks
        .lock("r", TTL)
        .attempts(0)
        .acquire()
        .await
        .expect_err("no attempts");
    assert!(
        matches!(err, AcquireError::Input(InputError::ZeroAttempts)),
        "{err}"
    );
    let err = locks
        .lock_all(["a", "b"], TTL)
        .fenced()
        .acquire()
        .await
        .expect_err("fenced set");
    assert!(
        matches!(err, AcquireError::Input(InputError::Unsupported { .. })),
        "{err}"
    );
    assert!(err.to_string().contains("fenced"), "{err}");
}
