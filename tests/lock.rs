//! The lock's behaviour against real `redis-server` masters: exclusion, validity, extend, release.

mod common;

use std::time::Duration;

use common::{cluster, eventually, holders, locks, value};
use quorlock::{AcquireError, ExtendError, NodeErrorKind, ReleaseError};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn two_contenders_exclude_each_other() {
    let c = cluster(3).await;
    let a = locks(&c).await;
    let b = locks(&c).await;
    let guard = a.acquire("orders:42", TTL).await.expect("first holder acquires");
    let err = b
        .try_acquire("orders:42", TTL)
        .await
        .expect_err("second holder must be refused");
    assert!(
        matches!(
            err,
            AcquireError::NoQuorum {
                acquired: 0,
                required: 2,
                masters: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_contended());
    // After release, the other contender gets it.
    let released = guard.release().await.expect("release");
    assert!(released.held >= 2, "a release confirms at least a majority");
    let guard = b.try_acquire("orders:42", TTL).await.expect("free after release");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn the_wire_format_is_a_plain_string_key_with_the_token_and_a_ttl() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let guard = locks.acquire("wire", TTL).await.expect("acquire");
    assert_eq!(guard.token().len(), 32, "128-bit token as hex");
    for i in 0..3 {
        let mut conn = c.client(i).await.expect("connect");
        let v: Option<String> = conn.get("wire").await.expect("GET");
        assert_eq!(v.as_deref(), Some(guard.token()));
        let pttl: i64 = conn.pttl("wire").await.expect("PTTL");
        assert!(pttl > 0 && pttl <= 10_000, "PTTL {pttl}");
    }
    guard.release().await.expect("release");
    let gone = eventually(Duration::from_secs(1), || async {
        holders(&c, &[0, 1, 2], "wire").await == 0
    })
    .await;
    assert!(gone, "release deletes the key on every master");
}

#[tokio::test]
async fn validity_is_below_the_ttl_and_shrinks() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let guard = locks.acquire("shrink", TTL).await.expect("acquire");
    let first = guard.validity();
    assert!(
        first < TTL - Duration::from_millis(102) + Duration::from_millis(1),
        "{first:?}"
    );
    assert!(first > Duration::ZERO);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(guard.validity() < first);
    assert!(!guard.is_lost());
    guard.release().await.expect("release");
}

#[tokio::test]
async fn extend_recomputes_validity_and_keeps_the_token() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let guard = locks
        .acquire("extend", Duration::from_secs(2))
        .await
        .expect("acquire");
    let before = guard.valid_until();
    let validity = guard.extend(Duration::from_secs(20)).await.expect("extend");
    assert!(validity > Duration::from_secs(19));
    assert!(guard.valid_until() > before);
    let mut conn = c.client(0).await.expect("connect");
    let pttl: i64 = conn.pttl("extend").await.expect("PTTL");
    assert!(pttl > 2_000, "PTTL after extend {pttl}");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn extend_after_expiry_fails_and_marks_the_guard_lost() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let guard = locks
        .acquire("expiring", Duration::from_millis(300))
        .await
        .expect("acquire");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(guard.is_lost(), "validity ran out");
    let err = guard
        .extend(Duration::from_secs(5))
        .await
        .expect_err("extend after expiry");
    assert!(matches!(err, ExtendError::Expired { .. }), "{err}");
    assert!(holders(&c, &[0, 1, 2], "expiring").await == 0);
}

#[tokio::test]
async fn extend_fails_when_another_holder_took_over_without_unlocking_it() {
    let c = cluster(3).await;
    let a = locks(&c).await;
    let guard = a.acquire("taken", Duration::from_secs(5)).await.expect("acquire");
    // Another holder's token replaces ours on a majority (as after an expiry and a new acquire).
    for i in 0..2 {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn.set("taken", "someone-else").await.expect("SET");
    }
    let err = guard
        .extend(Duration::from_secs(5))
        .await
        .expect_err("extend must fail");
    assert!(err.is_conflict(), "{err}");
    assert!(guard.is_lost());
    // A failed extend does not unlock anywhere: our key on master 2 and theirs on 0 and 1 remain.
    assert_eq!(value(&c, 2, "taken").await.as_deref(), Some(guard.token()));
    assert_eq!(value(&c, 0, "taken").await.as_deref(), Some("someone-else"));
    let err = guard
        .extend(Duration::from_secs(5))
        .await
        .expect_err("lost guard stays lost");
    assert!(matches!(err, ExtendError::AlreadyLost { .. }), "{err}");
    // Release then removes only our own key and reports the expiry.
    let err = guard.release().await.expect_err("release of a lost lock");
    assert!(err.is_expired(), "{err}");
    assert_eq!(value(&c, 0, "taken").await.as_deref(), Some("someone-else"));
    assert_eq!(value(&c, 2, "taken").await, None);
}

#[tokio::test]
async fn a_release_by_a_former_holder_deletes_nothing_of_the_new_holder() {
    let c = cluster(3).await;
    let a = locks(&c).await;
    let b = locks(&c).await;
    let old = a
        .acquire("handover", Duration::from_millis(300))
        .await
        .expect("acquire");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let new = b.acquire("handover", TTL).await.expect("acquire after expiry");
    let err = old
        .release()
        .await
        .expect_err("the old holder's lock had expired");
    // Its validity ended and another holder has the key everywhere: it was taken over.
    match &err {
        ReleaseError::TakenOver {
            held: 0,
            others: 3,
            required: 2,
            masters: 3,
            failures,
            ..
        } => {
            assert!(failures.iter().all(|f| f.kind == NodeErrorKind::Held), "{err}");
        }
        other => panic!("expected TakenOver, got {other}"),
    }
    assert!(err.is_expired() && err.is_contended(), "{err}");
    assert!(
        err.to_string()
            .contains("may have been touched by another holder"),
        "{err}"
    );
    for i in 0..3 {
        assert_eq!(
            value(&c, i, "handover").await.as_deref(),
            Some(new.token()),
            "master {i}"
        );
    }
    new.release().await.expect("release");
}

#[tokio::test]
async fn a_lost_race_releases_its_partial_acquisitions() {
    let c = cluster(5).await;
    // Another holder owns the key on masters 2, 3 and 4: we can win only 0 and 1.
    for i in 2..5 {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn.set_ex("race", "other", 30).await.expect("SET");
    }
    let locks = locks(&c).await;
    let err = locks.try_acquire("race", TTL).await.expect_err("minority only");
    assert!(matches!(err, AcquireError::NoQuorum { required: 3, .. }), "{err}");
    // Our partial keys on 0 and 1 are released right away (not after the TTL): the masters that had
    // answered before the decision are released before the error returns, the others from a task.
    let released = eventually(Duration::from_secs(1), || async {
        holders(&c, &[0, 1], "race").await == 0
    })
    .await;
    assert!(released, "partial acquisitions stayed behind");
    assert_eq!(
        holders(&c, &[2, 3, 4], "race").await,
        3,
        "the other holder's keys are untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_racers_have_at_most_one_winner_and_losers_leave_nothing() {
    let c = cluster(5).await;
    for round in 0..5 {
        let resource = format!("crowd:{round}");
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let locks = locks(&c).await;
            let resource = resource.clone();
            tasks.push(tokio::spawn(
                async move { locks.try_acquire(&resource, TTL).await },
            ));
        }
        let mut winners = Vec::new();
        for t in tasks {
            if let Ok(guard) = t.await.expect("task") {
                winners.push(guard);
            }
        }
        assert!(winners.len() <= 1, "{} winners", winners.len());
        // Once the losers' background releases ran, only the winner's token remains anywhere.
        let winner = winners.first().map(|g| g.token().to_owned());
        let settled = eventually(Duration::from_secs(3), || {
            let (c, resource, winner) = (&c, &resource, winner.clone());
            async move {
                for i in 0..5 {
                    let v = value(c, i, resource).await;
                    if v.is_some() && v != winner {
                        return false;
                    }
                }
                true
            }
        })
        .await;
        assert!(settled, "a loser's key stayed behind on {resource}");
        for g in winners {
            g.release().await.expect("release");
        }
    }
}

#[tokio::test]
async fn dropping_a_guard_releases_it_in_the_background() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let guard = locks.acquire("dropped-guard", TTL).await.expect("acquire");
    drop(guard);
    let gone = eventually(Duration::from_secs(2), || async {
        holders(&c, &[0, 1, 2], "dropped-guard").await == 0
    })
    .await;
    assert!(gone, "a dropped guard must be released well before its TTL");
}

#[tokio::test]
async fn key_prefix_is_applied() {
    let c = cluster(3).await;
    let locks = common::builder(&c)
        .key_prefix("app:")
        .build()
        .await
        .expect("build");
    let guard = locks.acquire("job", TTL).await.expect("acquire");
    assert_eq!(guard.key(), "app:job");
    assert_eq!(value(&c, 0, "app:job").await.as_deref(), Some(guard.token()));
    guard.release().await.expect("release");
}

#[tokio::test]
async fn a_key_of_another_type_is_an_error_for_that_master_and_is_left_alone() {
    let c = cluster(3).await;
    for i in 0..2 {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn.hset("profile", "name", "x").await.expect("HSET");
    }
    let locks = locks(&c).await;
    let err = locks
        .acquire("profile", TTL)
        .await
        .expect_err("a hash is not a lock");
    assert!(
        !err.is_retryable(),
        "a wrong type does not heal by waiting: {err}"
    );
    assert_eq!(
        common::failed_with(&err, &NodeErrorKind::WrongType),
        [0, 1],
        "{err}"
    );
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
    // The hashes survive, and our partial key on master 2 is gone.
    for i in 0..2 {
        let mut conn = c.client(i).await.expect("connect");
        let t: String = redis::cmd("TYPE")
            .arg("profile")
            .query_async(&mut conn)
            .await
            .expect("TYPE");
        assert_eq!(t, "hash");
    }
    let released = eventually(Duration::from_secs(1), || async {
        value(&c, 2, "profile").await.is_none()
    })
    .await;
    assert!(released, "our partial key on master 2 stayed behind");
}
