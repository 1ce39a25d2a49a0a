//! The reentrant lock against real masters: re-entry by the same owner, exclusion of other owners,
//! one release per hold, notification at the last release, and a quorum with a master down.

mod common;

use std::time::Duration;

use common::{cluster, eventually, locks, subscribe};
use futures::StreamExt;
use quorlock::{AcquireError, LockOwner, NodeErrorKind};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(10);
const KEY: &str = "quorlock:reentrant:ledger";

/// The owner's hold count stored on master `i` (None when the lock is absent there).
async fn stored_holds(c: &quorlock_chaos::Cluster, i: usize, owner: &LockOwner) -> Option<u64> {
    let mut conn = c.client(i).await.expect("connect");
    conn.hget(KEY, format!("o:{owner}")).await.expect("HGET")
}

async fn assert_excluded(locks: &quorlock::Quorlock, other: &LockOwner) {
    let err = locks
        .lock("ledger", TTL)
        .reentrant(other)
        .try_acquire()
        .await
        .expect_err("another owner must be excluded");
    assert!(matches!(err, AcquireError::NoQuorum { acquired: 0, .. }), "{err}");
    // Live masters refuse it as held; a killed master may count as the other no.
    assert!(
        err.failures()
            .iter()
            .all(|f| f.kind == NodeErrorKind::Held || f.kind.is_unreachable()),
        "{err}"
    );
    assert!(err.is_contended(), "{err}");
}

#[tokio::test]
async fn the_same_owner_reenters_three_times_and_needs_three_releases() {
    let c = cluster(3).await;
    let a = locks(&c).await;
    let b = locks(&c).await;
    let owner = LockOwner::new();
    let other = LockOwner::new();

    let mut guards = Vec::new();
    for n in 1..=3u64 {
        let guard = a
            .lock("ledger", TTL)
            .reentrant(&owner)
            .acquire()
            .await
            .expect("the same owner re-enters");
        assert_eq!(guard.holds(), Some(n));
        assert_eq!(guard.resource(), "ledger");
        assert_eq!(guard.key(), KEY);
        for i in 0..3 {
            assert_eq!(stored_holds(&c, i, &owner).await, Some(n), "master {i}");
        }
        assert_excluded(&b, &other).await;
        guards.push(guard);
    }

    // Release the holds in any order: the first two leave the lock held.
    for left in [2u64, 1] {
        let guard = guards.remove(0);
        let released = guard.release().await.expect("release one hold");
        assert!(released.held >= 2, "a release confirms at least a majority");
        // Masters past the majority finish in the background; each ends with exactly `left` holds.
        let settled = eventually(Duration::from_secs(1), || async {
            let mut all = true;
            for i in 0..3 {
                all &= stored_holds(&c, i, &owner).await == Some(left);
            }
            all
        })
        .await;
        assert!(settled, "every master should count {left} holds");
        assert_excluded(&b, &other).await;
    }
    let last = guards.remove(0);
    last.release().await.expect("release the last hold");
    for i in 0..3 {
        let mut conn = c.client(i).await.expect("connect");
        let exists: bool = conn.exists(KEY).await.expect("EXISTS");
        assert!(!exists, "the last release deletes the lock on master {i}");
    }
    let guard = b
        .lock("ledger", TTL)
        .reentrant(&other)
        .try_acquire()
        .await
        .expect("free for another owner after the third release");
    assert_eq!(guard.holds(), Some(1));
    guard.release().await.expect("release");
}

#[tokio::test]
async fn the_last_release_is_announced_and_earlier_ones_are_not() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let owner = LockOwner::from("worker-7");
    let mut messages = subscribe(&c, 0, &format!("quorlock:released:{KEY}")).await;

    let outer = locks
        .lock("ledger", TTL)
        .reentrant(&owner)
        .acquire()
        .await
        .expect("outer");
    let inner = locks
        .lock("ledger", TTL)
        .reentrant(&owner)
        .acquire()
        .await
        .expect("inner");
    inner.release().await.expect("release inner");
    let early = tokio::time::timeout(Duration::from_millis(300), messages.next()).await;
    assert!(early.is_err(), "no announcement while a hold is left: {early:?}");
    outer.release().await.expect("release outer");
    let payload = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("announced within 5 s")
        .expect("a message");
    assert!(
        payload.starts_with("h:"),
        "the hold's field is announced: {payload}"
    );
    // The same owner takes and releases the lock again: listeners count the masters announcing one
    // release by its payload, so this release must not look like the last one.
    let again = locks
        .lock("ledger", TTL)
        .reentrant(&owner)
        .acquire()
        .await
        .expect("again");
    again.release().await.expect("release again");
    let second = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("announced within 5 s")
        .expect("a message");
    assert_ne!(second, payload, "two releases by one owner are told apart");
}

#[tokio::test]
async fn a_short_inner_hold_does_not_cut_the_outer_holds_ttl() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let owner = LockOwner::new();
    let outer = locks
        .lock("ledger", TTL)
        .reentrant(&owner)
        .acquire()
        .await
        .expect("outer");
    let inner = locks
        .lock("ledger", Duration::from_millis(500))
        .reentrant(&owner)
        .acquire()
        .await
        .expect("inner");
    inner
        .extend(Duration::from_millis(500))
        .await
        .expect("extend inner");
    for i in 0..3 {
        let mut conn = c.client(i).await.expect("connect");
        let pttl: i64 = conn.pttl(KEY).await.expect("PTTL");
        assert!(
            pttl > 5_000,
            "master {i}: PTTL {pttl} was cut below the outer hold's"
        );
    }
    // Extending the outer hold works as for a plain lock.
    let validity = outer.extend(Duration::from_secs(20)).await.expect("extend outer");
    assert!(validity > Duration::from_secs(19));
    inner.release().await.expect("release inner");
    outer.release().await.expect("release outer");
}

#[tokio::test]
async fn reentry_works_with_a_minority_of_masters_down() {
    let mut c = cluster(3).await;
    let a = locks(&c).await;
    let b = locks(&c).await;
    let owner = LockOwner::new();
    let other = LockOwner::new();
    c.kill(2).expect("kill master 2");
    let outer = a
        .lock("ledger", TTL)
        .reentrant(&owner)
        .acquire()
        .await
        .expect("outer");
    let inner = a
        .lock("ledger", TTL)
        .reentrant(&owner)
        .acquire()
        .await
        .expect("inner");
    assert_eq!(inner.holds(), Some(2));
    let err = b
        .lock("ledger", TTL)
        .reentrant(&other)
        .try_acquire()
        .await
        .expect_err("excluded");
    assert!(err.is_contended(), "{err}");
    let released = inner.release().await.expect("release inner at quorum");
    assert_eq!((released.held, released.masters), (2, 3));
    assert_excluded(&b, &other).await;
    outer.release().await.expect("release outer");
    assert!(
        eventually(Duration::from_secs(5), || async {
            match b.lock("ledger", TTL).reentrant(&other).try_acquire().await {
                Ok(guard) => guard.release().await.is_ok(),
                Err(_) => false,
            }
        })
        .await,
        "another owner gets the lock once every hold is released"
    );
}

#[tokio::test]
async fn a_dropped_hold_is_released_in_the_background() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let owner = LockOwner::new();
    let outer = locks
        .lock("ledger", TTL)
        .reentrant(&owner)
        .acquire()
        .await
        .expect("outer");
    let inner = locks
        .lock("ledger", TTL)
        .reentrant(&owner)
        .acquire()
        .await
        .expect("inner");
    drop(inner);
    assert!(
        eventually(Duration::from_secs(5), || async {
            stored_holds(&c, 0, &owner).await == Some(1)
        })
        .await,
        "the dropped hold is gone, the outer one stays"
    );
    outer.release().await.expect("release outer");
}

#[tokio::test]
async fn bad_owners_and_wrong_key_types_are_typed_errors() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let err = locks
        .lock("ledger", TTL)
        .reentrant(&LockOwner::from(""))
        .try_acquire()
        .await
        .expect_err("empty owner");
    assert!(
        matches!(err, AcquireError::Input(quorlock::InputError::EmptyOwner)),
        "{err}"
    );
    for i in 0..3 {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn.set(KEY, "not a hash").await.expect("SET");
    }
    let err = locks
        .lock("ledger", TTL)
        .reentrant(&LockOwner::new())
        .acquire()
        .await
        .expect_err("a string under the key is not a reentrant lock");
    assert!(!err.is_retryable(), "{err}");
    assert!(
        err.failures().iter().any(|f| f.kind == NodeErrorKind::WrongType),
        "{err}"
    );
}
