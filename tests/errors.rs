//! What a caller can ask an error: whether the wait ran out, the masters were unavailable, or
//! another holder had the lock, and the chain of sources down to the redis-rs error behind a
//! master's failure. Each against real masters, in the situation the predicate names.

mod common;

use std::time::Duration;

use common::{builder, cluster, locks};
use quorlock::{AcquireError, ReleaseError};

const TTL: Duration = Duration::from_secs(5);

/// Every error of a chain, from the outermost.
fn chain<'a>(err: &'a (dyn std::error::Error + 'static)) -> Vec<&'a (dyn std::error::Error + 'static)> {
    let mut all = vec![err];
    let mut next = err.source();
    while let Some(e) = next {
        all.push(e);
        next = e.source();
    }
    all
}

#[tokio::test]
async fn a_wait_behind_another_holder_is_a_contended_timeout() {
    let c = cluster(3).await;
    let holder = locks(&c).await;
    let _held = holder.acquire("busy", TTL).await.expect("acquire");
    let waiter = builder(&c)
        .wait(Duration::from_millis(300))
        .local_queue(false)
        .build()
        .await
        .expect("build");
    let err = waiter.acquire("busy", TTL).await.expect_err("held elsewhere");
    assert!(err.is_timeout(), "{err}");
    assert!(err.is_contended(), "{err}");
    assert!(!err.is_unavailable(), "{err}");
    assert!(matches!(err.last(), AcquireError::NoQuorum { .. }), "{err}");
    // The chain goes from the wait to its last round.
    assert!(chain(&err).len() >= 2, "{err}");
}

#[tokio::test]
async fn masters_that_refuse_connections_make_an_unavailable_error_that_reaches_redis() {
    let c = cluster(1).await;
    // One live master and two ports nobody listens on: no majority can ever answer.
    let locks = builder(&c)
        .nodes(["redis://127.0.0.1:1", "redis://127.0.0.1:2"])
        .max_attempts(1)
        .build()
        .await
        .expect("unreachable masters are only warned about");
    let err = locks.try_acquire("lonely", TTL).await.expect_err("no majority");
    assert!(err.is_unavailable(), "{err}");
    assert!(!err.is_contended() && !err.is_timeout(), "{err}");
    let reaches_redis = chain(&err)
        .iter()
        .any(|e| e.downcast_ref::<redis::RedisError>().is_some());
    assert!(reaches_redis, "no redis error in the chain of {err}");
}

#[tokio::test]
async fn a_release_that_finds_another_holder_is_contended_and_one_that_finds_nothing_is_absent() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let guard = locks.acquire("kept", TTL).await.expect("acquire");
    let err = locks
        .release_token("kept", "a-stranger")
        .await
        .expect_err("not ours");
    assert!(err.is_contended() && err.is_expired(), "{err}");
    assert!(!err.is_unavailable() && !err.is_timeout(), "{err}");
    guard.release().await.expect("release");
    let err = locks
        .release_token("kept", "a-stranger")
        .await
        .expect_err("nothing there");
    assert!(matches!(err, ReleaseError::Absent { .. }), "{err}");
    assert!(err.is_absent() && !err.is_contended(), "{err}");
}
