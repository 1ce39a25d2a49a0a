//! The counting semaphore against real masters: never more holders than permits, with P + 1
//! clients contending and with three clients each cut off from a different master (the majority
//! counting counterexample, as partitions); a crashed holder's permit returns after its TTL; a
//! permit is an ordinary guard on its slot key.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{builder, cluster, holders, locks};
use quorlock::{AcquireError, InputError, PermitsError};
use quorlock_chaos::ProxyGroup;

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn p_plus_one_clients_never_hold_more_than_p_permits() {
    let c = cluster(3).await;
    const PERMITS: u32 = 2;
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let served = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..=PERMITS {
        let locks = builder(&c)
            .wait(Duration::from_secs(10))
            .build()
            .await
            .expect("build");
        let (inside, most, served) = (Arc::clone(&inside), Arc::clone(&most), Arc::clone(&served));
        tasks.push(tokio::spawn(async move {
            for _ in 0..6 {
                let guard = locks
                    .acquire_permit("workers", PERMITS, TTL)
                    .await
                    .expect("a permit");
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(30)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                served.fetch_add(1, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
        }));
    }
    for task in tasks {
        task.await.expect("worker");
    }
    assert_eq!(served.load(Ordering::SeqCst), 18);
    let most = most.load(Ordering::SeqCst);
    assert!(most <= PERMITS as usize, "{most} holders of {PERMITS} permits");
}

#[tokio::test]
async fn a_permit_is_a_guard_on_its_slot_key() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let first = locks.acquire_permit("pool", 2, TTL).await.expect("first permit");
    let second = locks.acquire_permit("pool", 2, TTL).await.expect("second permit");
    let (a, b) = (first.permit().expect("a slot"), second.permit().expect("a slot"));
    assert_ne!(a, b);
    assert!(a < 2 && b < 2);
    assert_eq!(first.key(), format!("quorlock:semaphore:pool:slot:{a}"));
    assert_eq!(holders(&c, &[0, 1, 2], first.key()).await, 3);
    // Full: one round refuses, and the refusal is a contended one.
    let err = locks
        .semaphore("pool", 2, TTL)
        .try_acquire()
        .await
        .expect_err("full");
    assert!(err.is_contended(), "{err}");
    first.extend(TTL).await.expect("extend a permit");
    let status = locks.inspect_semaphore("pool", 2).await.expect("inspect");
    assert_eq!((status.held(), status.free()), (2, 0));
    first.release().await.expect("release");
    assert_eq!(
        holders(&c, &[0, 1, 2], &format!("quorlock:semaphore:pool:slot:{a}")).await,
        0
    );
    let third = locks
        .semaphore("pool", 2, TTL)
        .try_acquire()
        .await
        .expect("a freed permit");
    assert_eq!(third.permit(), Some(a));
    // Dropped, a permit is released from a task.
    drop(third);
    drop(second);
    locks.settle().await;
    let status = locks.inspect_semaphore("pool", 2).await.expect("inspect");
    assert_eq!((status.held(), status.free()), (0, 2));
}

#[tokio::test]
async fn bad_permit_counts_are_refused_before_anything_is_sent() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let err = locks
        .acquire_permit("pool", 0, TTL)
        .await
        .expect_err("zero permits");
    assert!(
        matches!(err, AcquireError::Input(InputError::Permits(PermitsError::Zero))),
        "{err}"
    );
    let err = locks
        .acquire_permit("pool", 100_000, TTL)
        .await
        .expect_err("too many");
    assert!(err.to_string().contains("at most"), "{err}");
    assert!(c.keys(0, "quorlock:semaphore:*").await.expect("keys").is_empty());
}

#[tokio::test]
async fn a_crashed_holders_permit_returns_after_its_ttl() {
    let c = cluster(3).await;
    let locks = builder(&c)
        .wait(Duration::from_secs(5))
        .build()
        .await
        .expect("build");
    let ttl = Duration::from_millis(800);
    let crashed = locks.acquire_permit("jobs", 1, ttl).await.expect("permit");
    // A holder that dies never releases: forgetting the guard leaves its key to its TTL.
    std::mem::forget(crashed);
    let other = builder(&c).wait(Duration::ZERO).build().await.expect("build");
    assert!(
        other.acquire_permit("jobs", 1, ttl).await.is_err(),
        "held until the TTL"
    );
    let started = tokio::time::Instant::now();
    let guard = locks
        .acquire_permit("jobs", 1, ttl)
        .await
        .expect("the permit returns");
    assert!(started.elapsed() < Duration::from_secs(5));
    guard.release().await.expect("release");
}

/// The counterexample as partitions: with 3 masters and 2 permits, clients cut off from
/// masters 0, 1 and 2 respectively each reach a different majority. Counting permits per master,
/// all three would hold; with slots, at most two do.
#[tokio::test]
async fn three_clients_each_cut_off_from_a_different_master_cannot_exceed_the_permits() {
    let c = cluster(3).await;
    let proxies = ProxyGroup::start(&c, 3).await.expect("proxies");
    let mut clients = Vec::new();
    for group in 0..3 {
        let locks = quorlock::Quorlock::builder()
            .nodes(proxies.urls(group))
            .node_timeout(Duration::from_millis(200))
            .retry_delay(Duration::from_millis(20))
            .retry_jitter(Duration::from_millis(10))
            .wait(Duration::from_secs(2))
            .build()
            .await
            .expect("build");
        clients.push(locks);
    }
    for group in 0..3 {
        proxies.partition(group, &[group]).expect("partition");
    }
    let attempts = clients
        .iter()
        .map(|locks| locks.acquire_permit("migrations", 2, TTL));
    let results = futures::future::join_all(attempts).await;
    let held: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert!(held.len() <= 2, "{} holders of 2 permits", held.len());
    assert!(!held.is_empty(), "{results:?}");
    let mut slots: Vec<u32> = held.iter().filter_map(|g| g.permit()).collect();
    slots.sort_unstable();
    slots.dedup();
    assert_eq!(slots.len(), held.len(), "two holders of one slot");
    proxies.heal();
}

#[tokio::test]
async fn work_under_a_permit_is_kept_alive_past_its_ttl() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let ttl = Duration::from_millis(600);
    let other = locks.clone();
    let out = locks
        .semaphore("long", 1, ttl)
        .with(|_| async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            other.semaphore("long", 1, TTL).try_acquire().await.is_err()
        })
        .await
        .expect("the work ran under the permit");
    assert!(out, "a second holder of one permit under a kept-alive permit");
}
