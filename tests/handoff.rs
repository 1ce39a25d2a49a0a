//! The library side of the CLI's script commands: releasing by (resource, token) without a guard,
//! and inspecting a lock on every master.

mod common;

use std::time::Duration;

use common::{cluster, eventually, holders, locks};
use quorlock::{InputError, NodeErrorKind, ReleaseError};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_token_releases_the_lock_its_guard_took() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let guard = locks.acquire("handed", TTL).await.expect("acquire");
    let token = guard.token().to_owned();
    // The acquire returns at the quorum; the slower master's SET lands shortly after.
    let everywhere = eventually(Duration::from_secs(5), || async {
        holders(&c, &[0, 1, 2], "handed").await == 3
    })
    .await;
    assert!(everywhere, "a master never got the key");

    let err = locks
        .release_token("handed", "not-the-token")
        .await
        .expect_err("a wrong token releases nothing");
    // Another token (ours, for the guard) holds it: to the wrong token's holder it is taken over.
    assert!(matches!(err, ReleaseError::TakenOver { others: 3, .. }), "{err}");
    assert_eq!(
        holders(&c, &[0, 1, 2], "handed").await,
        3,
        "a wrong token released nothing"
    );

    let released = locks.release_token("handed", &token).await.expect("release");
    assert!(released.held >= 2);
    // The guard learns the lock is gone when it tries to release it: the key is absent, its own
    // validity has not ended, so it was released (by the token), not expired.
    let err = guard.release().await.expect_err("already released");
    assert!(
        matches!(
            err,
            ReleaseError::Absent {
                held: 0,
                absent: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.is_absent() && !err.is_expired(), "{err}");

    assert!(matches!(
        locks.release_token("handed", "").await,
        Err(ReleaseError::Input(InputError::EmptyToken))
    ));
    assert!(matches!(
        locks.release_token("", &token).await,
        Err(ReleaseError::Input(InputError::EmptyResource))
    ));
}

#[tokio::test]
async fn inspection_reports_each_master_and_the_majority_holder() {
    let mut c = cluster(3).await;
    let locks = locks(&c).await;
    let free = locks.inspect("seen").await.expect("inspect");
    assert!(!free.is_held());
    assert_eq!(free.reachable(), 3);
    assert!(free.masters.iter().all(|m| m.state == Ok(None)));

    let guard = locks.acquire("seen", TTL).await.expect("acquire");
    // Master 2 holds something that is not a lock under the key: it is reported, not trusted.
    let mut conn = c.client(2).await.expect("client");
    let _: () = conn.del("seen").await.expect("DEL");
    let _: () = conn.hset("seen", "f", "v").await.expect("HSET");
    c.kill(1).expect("kill");

    let seen = locks.inspect("seen").await.expect("inspect");
    assert_eq!(seen.holder(), None, "one master is not a majority of 3");
    assert_eq!(seen.masters[0].token(), Some(guard.token()));
    let ttl = match &seen.masters[0].state {
        Ok(Some(holding)) => holding.ttl.expect("a lock has a TTL"),
        other => panic!("master 0: {other:?}"),
    };
    assert!(ttl > Duration::ZERO && ttl <= TTL, "{ttl:?}");
    assert!(!seen.masters[1].is_reachable());
    assert_eq!(seen.masters[2].state, Err(NodeErrorKind::WrongType));
    assert_eq!(seen.reachable(), 2);
    drop(guard);
}
