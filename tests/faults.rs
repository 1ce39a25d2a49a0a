//! The lock under failed masters: killed, paused (SIGSTOP), never answering, answering garbage;
//! and a dropped acquire future.

mod common;

use std::time::Duration;

use common::{builder, cluster, eventually, holders, locks};
use quorlock::{AcquireError, NodeErrorKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn five_masters_with_two_killed_still_acquire() {
    let mut c = cluster(5).await;
    c.kill(1).expect("kill");
    c.kill(3).expect("kill");
    let locks = locks(&c).await;
    let guard = locks
        .try_acquire("survivor", TTL)
        .await
        .expect("3 of 5 is a majority");
    let released = guard.release().await.expect("release");
    assert_eq!(released.held, 3);
    // The dead masters may or may not have answered before the majority confirmed.
    assert!(released.failures.len() <= 2);
    assert!(
        released.failures.iter().all(|f| f.kind.is_unreachable()),
        "{:?}",
        released.failures
    );
}

#[tokio::test]
async fn five_masters_with_three_killed_fail_and_leave_no_key() {
    let mut c = cluster(5).await;
    for i in [0, 2, 4] {
        c.kill(i).expect("kill");
    }
    let locks = locks(&c).await;
    let err = locks
        .try_acquire("no-majority", TTL)
        .await
        .expect_err("2 of 5 is not a majority");
    match &err {
        AcquireError::NoQuorum {
            acquired,
            required: 3,
            masters: 5,
            failures,
            ..
        } => {
            assert!(*acquired <= 2);
            assert!(
                failures.iter().filter(|f| f.kind.is_unreachable()).count() >= 3,
                "{err}"
            );
        }
        other => panic!("expected NoQuorum, got {other}"),
    }
    let clean = eventually(Duration::from_secs(1), || async {
        holders(&c, &[1, 3], "no-majority").await == 0
    })
    .await;
    assert!(clean, "a failed acquire left keys on the live masters");
    // acquire (with retries) gives up with the same diagnosis and still leaves nothing behind.
    let err = common::builder(&c)
        .wait(Duration::from_millis(300))
        .build()
        .await
        .expect("build")
        .acquire("no-majority", TTL)
        .await
        .expect_err("no majority");
    assert!(
        matches!(err, AcquireError::Exhausted { attempts, .. } if attempts >= 2),
        "{err}"
    );
    let clean = eventually(Duration::from_secs(1), || async {
        holders(&c, &[1, 3], "no-majority").await == 0
    })
    .await;
    assert!(clean);
}

#[tokio::test]
async fn a_paused_master_does_not_hold_up_the_acquire() {
    let mut c = cluster(5).await;
    let locks = builder(&c)
        .node_timeout(Duration::from_secs(5))
        .build()
        .await
        .expect("build");
    // Warm the connections, then stop one master dead.
    common::cycle(&locks, "warm", TTL).await;
    c.pause(2).expect("SIGSTOP");
    let guard = locks
        .try_acquire("paused", Duration::from_secs(30))
        .await
        .expect("4 of 5 answer");
    // The decision came while master 2 was still stopped: it could not have answered, and its
    // node timeout (5 s) has not been waited for.
    assert!(c.is_paused(2));
    assert!(
        guard.validity() > Duration::from_secs(25),
        "validity {:?}",
        guard.validity()
    );
    c.resume(2).expect("SIGCONT");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn with_a_paused_majority_acquire_fails_within_the_node_timeout() {
    let mut c = cluster(3).await;
    let locks = builder(&c)
        .node_timeout(Duration::from_millis(100))
        .build()
        .await
        .expect("build");
    c.pause(0).expect("SIGSTOP");
    c.pause(1).expect("SIGSTOP");
    let err = locks
        .try_acquire("stalled", TTL)
        .await
        .expect_err("no majority answers");
    let timeouts = common::timeouts(&err);
    assert_eq!(timeouts, 2, "{err}");
    c.resume(0).expect("SIGCONT");
    c.resume(1).expect("SIGCONT");
    // The SETs queued on the stopped masters land after the resume, and the releases queued behind
    // them remove them again: no key is stranded until its TTL.
    let clean = eventually(Duration::from_secs(2), || async {
        holders(&c, &[0, 1, 2], "stalled").await == 0
    })
    .await;
    assert!(clean, "a key outlived the failed acquire");
}

#[tokio::test]
async fn a_dropped_acquire_future_leaves_no_key_soon_after() {
    let mut c = cluster(5).await;
    let locks = builder(&c)
        .node_timeout(Duration::from_millis(800))
        .build()
        .await
        .expect("build");
    common::cycle(&locks, "warm", TTL).await;
    // With 3 of 5 stopped the round waits on them; the 2 live masters have already granted the key.
    for i in [0, 1, 2] {
        c.pause(i).expect("SIGSTOP");
    }
    let attempt = tokio::time::timeout(Duration::from_millis(100), locks.acquire("abandoned", TTL)).await;
    assert!(
        attempt.is_err(),
        "the acquire should still be waiting when dropped"
    );
    let clean = eventually(Duration::from_secs(2), || async {
        holders(&c, &[3, 4], "abandoned").await == 0
    })
    .await;
    assert!(clean, "the dropped acquire stranded keys on the live masters");
    for i in [0, 1, 2] {
        c.resume(i).expect("SIGCONT");
    }
    let clean = eventually(Duration::from_secs(2), || async {
        holders(&c, &[0, 1, 2, 3, 4], "abandoned").await == 0
    })
    .await;
    assert!(clean, "the dropped acquire stranded keys on the resumed masters");
}

/// A TCP server on a free port that answers every request with `reply` (or never, if `None`).
async fn fake_master(reply: Option<&'static [u8]>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = sock.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    if let Some(reply) = reply {
                        if sock.write_all(reply).await.is_err() {
                            break;
                        }
                    }
                }
            });
        }
    });
    format!("redis://{addr}")
}

#[tokio::test]
async fn masters_that_answer_garbage_or_nothing_count_as_no() {
    let c = cluster(1).await;
    // The real master was in use before (a client that reached it wrote its record): a client
    // that finds a lone master without a record, the others silent, cannot tell it from one that
    // lost its data, and waits out the grace for it.
    quorlock::Quorlock::builder()
        .node(c.url(0))
        .build()
        .await
        .expect("build");
    let garbage = fake_master(Some(b"HTTP/1.1 400 Bad Request\r\n\r\n")).await;
    let silent = fake_master(None).await;
    let urls = vec![c.url(0), garbage, silent];
    let locks = quorlock::Quorlock::builder()
        .nodes(urls.clone())
        .node_timeout(Duration::from_millis(150))
        .connect_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("build tolerates broken masters");
    let err = locks
        .try_acquire("broken", TTL)
        .await
        .expect_err("only 1 of 3 is a real master");
    let kinds: Vec<&NodeErrorKind> = err.failures().iter().map(|f| &f.kind).collect();
    assert_eq!(kinds.len(), 2, "{err}");
    assert!(
        matches!(
            kinds[0],
            NodeErrorKind::Protocol(_) | NodeErrorKind::Connection(_)
        ),
        "garbage: {err}"
    );
    assert_eq!(kinds[1], &NodeErrorKind::Timeout, "silence: {err}");
    let clean = eventually(Duration::from_secs(1), || async {
        holders(&c, &[0], "broken").await == 0
    })
    .await;
    assert!(clean);
    // With two real masters out of three, the broken one is simply outvoted.
    let c2 = cluster(2).await;
    let locks = quorlock::Quorlock::builder()
        .nodes([c2.url(0), c2.url(1), urls[2].clone()])
        .node_timeout(Duration::from_millis(150))
        .connect_timeout(Duration::from_millis(300))
        .build()
        .await
        .expect("build");
    locks
        .try_acquire("outvoted", TTL)
        .await
        .expect("2 of 3")
        .release()
        .await
        .expect("release");
}

#[tokio::test]
async fn a_restarted_master_is_reconnected() {
    let mut c = cluster(3).await;
    let locks = locks(&c).await;
    common::cycle(&locks, "before", TTL).await;
    c.kill(0).expect("kill");
    c.kill(1).expect("kill");
    assert!(locks.try_acquire("down", TTL).await.is_err());
    c.restart(0, quorlock_chaos::DataMode::Keep)
        .await
        .expect("restart");
    c.restart(1, quorlock_chaos::DataMode::Keep)
        .await
        .expect("restart");
    let ok = eventually(Duration::from_secs(5), || async {
        match locks.try_acquire("after", TTL).await {
            Ok(g) => g.release().await.is_ok(),
            Err(_) => false,
        }
    })
    .await;
    assert!(ok, "the client never reconnected to the restarted masters");
}
