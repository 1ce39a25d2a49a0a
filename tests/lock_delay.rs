//! Lock-delay against real masters: a lock whose holder stopped (its guard forgotten, as a crashed
//! or paused process leaves it) stays closed past the holder's validity, for every client, until
//! the TTL plus the delay; a release opens it at once; extend and the watchdog keep the delay; a
//! delay too long is refused before anything is sent.
//!
//! Time is asserted as order, never speed: each check that the lock is still closed runs while
//! the key's own PTTL on the masters says it must be (more than a second left, read after the
//! attempt), and each check that it opened waits for it with a generous bound.

mod common;

use std::time::Duration;

use common::{builder, cluster, eventually, locks};
use quorlock::{AcquireError, InputError};

const TTL: Duration = Duration::from_millis(600);
const DELAY: Duration = Duration::from_secs(20);

/// The PTTL of `key` on every master of `c`, in milliseconds (-2 where it is absent).
async fn pttls(c: &quorlock_chaos::Cluster, key: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for i in 0..c.len() {
        let mut conn = c.client(i).await.expect("connect to master");
        let pttl: i64 = redis::cmd("PTTL")
            .arg(key)
            .query_async(&mut conn)
            .await
            .expect("PTTL");
        out.push(pttl);
    }
    out
}

/// How many masters have `key` with more than `left` to live.
async fn living_longer_than(c: &quorlock_chaos::Cluster, key: &str, left: Duration) -> usize {
    let left = i64::try_from(left.as_millis()).unwrap_or(i64::MAX);
    pttls(c, key).await.into_iter().filter(|ms| *ms > left).count()
}

#[tokio::test]
async fn a_stopped_holder_keeps_its_lock_closed_for_the_delay_past_its_validity() {
    let c = cluster(3).await;
    let holder = locks(&c).await;
    let other = locks(&c).await;
    let guard = holder
        .lock("delay:stopped", TTL)
        .lock_delay(DELAY)
        .try_acquire()
        .await
        .expect("acquire");
    // The holder counts its validity from the TTL alone.
    assert!(guard.validity() <= TTL, "validity {:?}", guard.validity());
    let valid_until = guard.valid_until();
    // The holder stops: no release, no renewal.
    std::mem::forget(guard);
    tokio::time::sleep_until(valid_until + TTL).await;
    let refused = other.lock("delay:stopped", TTL).try_acquire().await;
    // Read after the attempt: the key still had more than a second to live on a majority, so the
    // attempt could not have been granted.
    assert!(
        living_longer_than(&c, "delay:stopped", Duration::from_secs(1)).await >= 2,
        "the key lives the TTL plus the delay"
    );
    assert!(
        matches!(refused, Err(AcquireError::NoQuorum { .. })),
        "another client is kept out past the holder's validity: {refused:?}"
    );
}

#[tokio::test]
async fn without_a_delay_the_same_stopped_holder_is_overlapped_after_its_ttl() {
    // The control of the test above: the same steps with no delay let the next holder in.
    let c = cluster(3).await;
    let holder = locks(&c).await;
    let other = locks(&c).await;
    let guard = holder
        .lock("delay:none", TTL)
        .try_acquire()
        .await
        .expect("acquire");
    std::mem::forget(guard);
    let taken = eventually(Duration::from_secs(10), || async {
        other.lock("delay:none", TTL).try_acquire().await.is_ok()
    })
    .await;
    assert!(taken, "the key expired with its TTL and another client took it");
}

#[tokio::test]
async fn a_release_opens_a_delayed_lock_at_once() {
    let c = cluster(3).await;
    let holder = locks(&c).await;
    let other = locks(&c).await;
    let guard = holder
        .lock("delay:released", TTL)
        .lock_delay(DELAY)
        .try_acquire()
        .await
        .expect("acquire");
    guard.release().await.expect("release");
    let _next = other
        .lock("delay:released", TTL)
        .try_acquire()
        .await
        .expect("free at once after a release, whatever the delay");
}

#[tokio::test]
async fn the_key_lives_the_ttl_plus_the_delay_through_extend_and_the_watchdog() {
    let c = cluster(3).await;
    let holder = locks(&c).await;
    // A delay of a few TTLs: the drift allowance on the key's whole life stays small.
    let guard = holder
        .lock("delay:kept", TTL)
        .lock_delay(TTL * 5)
        .try_acquire()
        .await
        .expect("acquire");
    assert_eq!(
        living_longer_than(&c, "delay:kept", TTL).await,
        3,
        "set for TTL + delay"
    );
    let validity = guard.extend(TTL).await.expect("extend");
    assert!(
        validity <= TTL,
        "the validity counts from the TTL alone: {validity:?}"
    );
    assert_eq!(
        living_longer_than(&c, "delay:kept", TTL).await,
        3,
        "extended to TTL + delay"
    );
    guard.keep_alive();
    // Past several renewals (every TTL / 3) the key still has more than the TTL left.
    tokio::time::sleep(TTL * 2).await;
    assert!(!guard.is_lost(), "kept alive");
    assert_eq!(
        living_longer_than(&c, "delay:kept", TTL).await,
        3,
        "renewed to TTL + delay"
    );
    guard.release().await.expect("release");
    assert!(
        pttls(&c, "delay:kept").await.iter().all(|ms| *ms == -2),
        "released everywhere"
    );
}

#[tokio::test]
async fn the_builders_delay_is_every_locks_default_and_a_request_may_turn_it_off() {
    let c = cluster(3).await;
    let holder = builder(&c).lock_delay(DELAY).build().await.expect("build");
    let delayed = holder.try_acquire("delay:default", TTL).await.expect("acquire");
    assert_eq!(living_longer_than(&c, "delay:default", TTL).await, 3);
    delayed.release().await.expect("release");
    let plain = holder
        .lock("delay:off", TTL)
        .lock_delay(Duration::ZERO)
        .try_acquire()
        .await
        .expect("acquire");
    assert_eq!(
        living_longer_than(&c, "delay:off", TTL).await,
        0,
        "set for the TTL alone"
    );
    plain.release().await.expect("release");
}

#[tokio::test]
async fn a_delay_past_the_longest_key_life_is_refused_before_anything_is_sent() {
    let c = cluster(3).await;
    let holder = locks(&c).await;
    let err = holder
        .lock("delay:huge", Duration::from_secs(3600))
        .lock_delay(Duration::from_secs(24 * 3600))
        .try_acquire()
        .await
        .expect_err("refused");
    assert!(
        matches!(err, AcquireError::Input(InputError::LockDelayTooLarge { .. })),
        "{err:?}"
    );
    assert!(
        pttls(&c, "delay:huge").await.iter().all(|ms| *ms == -2),
        "nothing was set"
    );
}

#[tokio::test]
async fn a_fenced_lock_takes_a_delay_too() {
    let c = cluster(3).await;
    let holder = locks(&c).await;
    let guard = holder
        .lock("delay:fenced", TTL)
        .fenced()
        .lock_delay(DELAY)
        .try_acquire()
        .await
        .expect("acquire");
    assert!(guard.fencing_token().is_some(), "a token");
    assert!(guard.validity() <= TTL);
    assert_eq!(
        living_longer_than(&c, "delay:fenced", TTL).await,
        3,
        "set for TTL + delay"
    );
    guard.release().await.expect("release");
}

#[tokio::test]
async fn a_long_delay_on_a_short_ttl_is_kept_alive_within_its_shorter_validity() {
    // The allowance on the key's whole life (51 s) leaves a 1 s lock less than half its TTL as
    // validity: the watchdog spaces its renewals within that, not within the TTL.
    let c = cluster(3).await;
    let holder = locks(&c).await;
    let ttl = Duration::from_secs(1);
    let guard = holder
        .lock("delay:short", ttl)
        .lock_delay(Duration::from_secs(50))
        .try_acquire()
        .await
        .expect("acquire");
    assert!(guard.validity() < ttl / 2, "validity {:?}", guard.validity());
    guard.keep_alive();
    tokio::time::sleep(ttl * 3).await;
    assert!(!guard.is_lost(), "kept alive past three TTLs");
    assert_eq!(living_longer_than(&c, "delay:short", ttl).await, 3);
    guard.release().await.expect("release");
}
