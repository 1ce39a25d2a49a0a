//! The lock behind a faulty network, through the harness's own TCP proxy: a blackholed master
//! (accepts, never answers), a slow one, and one that resets every connection; and a blackholed
//! master is not dialled again on every pause of a waiter, nor a slow one whose `SUBSCRIBE` a
//! waiter's timeout cut short; a master slower to connect than the node timeout still gets its
//! pub/sub connection; a master whose connection is being re-opened when the round is won still
//! gets the key; and `settle` waits for a slow master's share of the work left to tasks.

mod common;

use std::time::Duration;

use common::{cluster, eventually, holders};
use quorlock::Quorlock;
use quorlock_chaos::{ProxyGroup, ProxyMode};

const TTL: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_blackholed_master_does_not_hold_up_the_acquire() {
    let c = cluster(5).await;
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    // A node timeout far longer than a round: waiting on the blackholed master would show in the validity.
    let locks = proxied(&proxies, Duration::from_secs(10)).await;
    common::cycle(&locks, "warm", TTL).await;
    proxies
        .set_master_mode(4, ProxyMode::Blackhole)
        .expect("blackhole");
    let guard = locks.try_acquire("blackholed", TTL).await.expect("4 of 5 answer");
    assert!(
        guard.validity() > TTL - Duration::from_secs(5),
        "validity {:?}",
        guard.validity()
    );
    // The round returns at the quorum; the fourth reachable master's SET may still be on its way.
    let everywhere = eventually(Duration::from_secs(5), || async {
        holders(&c, &[0, 1, 2, 3], "blackholed").await == 4
    })
    .await;
    assert!(everywhere, "a reachable master never got the key");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn a_blackholed_majority_fails_on_the_node_timeout_and_leaves_no_key() {
    let c = cluster(3).await;
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    let locks = proxied(&proxies, Duration::from_millis(150)).await;
    proxies
        .set_master_mode(0, ProxyMode::Blackhole)
        .expect("blackhole");
    proxies
        .set_master_mode(1, ProxyMode::Blackhole)
        .expect("blackhole");
    let err = locks
        .try_acquire("dark", TTL)
        .await
        .expect_err("no majority answers");
    let timeouts = common::timeouts(&err);
    assert_eq!(timeouts, 2, "{err}");
    let clean = eventually(Duration::from_secs(2), || async {
        holders(&c, &[0, 1, 2], "dark").await == 0
    })
    .await;
    assert!(clean, "the live master kept our partial key");
}

#[tokio::test]
async fn latency_below_the_ttl_still_acquires_and_reset_connections_are_a_no() {
    let c = cluster(3).await;
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    let locks = proxied(&proxies, Duration::from_millis(500)).await;
    proxies
        .set_master_mode(0, ProxyMode::Latency(Duration::from_millis(30)))
        .expect("latency");
    proxies
        .set_master_mode(1, ProxyMode::Latency(Duration::from_millis(30)))
        .expect("latency");
    let guard = locks
        .try_acquire("slow", TTL)
        .await
        .expect("slow masters still answer within the timeout");
    guard.release().await.expect("release");
    proxies.set_master_mode(0, ProxyMode::Reset).expect("reset");
    proxies.set_master_mode(1, ProxyMode::Reset).expect("reset");
    let err = locks
        .try_acquire("reset", TTL)
        .await
        .expect_err("connections are reset");
    assert!(
        err.failures().iter().filter(|f| f.kind.is_unreachable()).count() >= 2,
        "{err}"
    );
    // Healing the network heals the client: it reconnects without a restart.
    proxies.heal();
    let ok = eventually(Duration::from_secs(5), || async {
        match locks.try_acquire("healed", TTL).await {
            Ok(g) => g.release().await.is_ok(),
            Err(_) => false,
        }
    })
    .await;
    assert!(ok, "the client did not recover after the network healed");
}

/// A waiter whose pub/sub connection to a blackholed master cannot open must not try again on
/// every pause: an attempt cut off by the waiter's own timeout counts as a failure, and the next
/// comes after the reconnect delay (1 s), however short the retry delay.
#[tokio::test]
async fn a_blackholed_master_is_not_redialled_on_every_pause() {
    let c = cluster(3).await;
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    let build = || {
        Quorlock::builder()
            .nodes(proxies.urls(0))
            .node_timeout(Duration::from_millis(100))
            .retry_delay(Duration::from_millis(40))
            .retry_jitter(Duration::ZERO)
            .wait(Duration::from_millis(1500))
            .build()
    };
    let holder = build().await.expect("build");
    let waiter = build().await.expect("build");
    // The lock connections are open before the blackhole; the pub/sub ones are not yet.
    common::cycle(&waiter, "warm", TTL).await;
    let held = holder
        .lock_all(["redial:a", "redial:b"], TTL)
        .acquire()
        .await
        .expect("hold");
    proxies
        .set_master_mode(2, ProxyMode::Blackhole)
        .expect("blackhole");
    let before = proxies.proxy(0, 2).expect("proxy").accepted_connections();
    let err = waiter
        .lock_all(["redial:a", "redial:b"], TTL)
        .acquire()
        .await
        .expect_err("held throughout");
    assert!(err.is_contended(), "{err}");
    let dials = proxies.proxy(0, 2).expect("proxy").accepted_connections() - before;
    eprintln!("{dials} dials");
    // About 30 pauses in 1.5 s; one dial per second, plus one for a reconnect of the lock
    // connection, is at most 4.
    assert!(
        dials <= 4,
        "{dials} connections to the blackholed master in 1.5 s"
    );
    proxies.heal();
    held.release().await.expect("release");
}

/// An acquire returns as soon as a majority granted it; a master whose request was still waiting
/// for its connection then must still get the key, or the lock stands on a bare majority and the
/// loss of one more master ends it. Here master 2's connection is being re-opened through a slow
/// proxy when the round is won: its request waits for the new connection, then is sent.
#[tokio::test]
async fn a_master_reconnecting_when_the_round_is_won_still_gets_the_key() {
    let c = cluster(3).await;
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    let locks = proxied(&proxies, Duration::from_secs(2)).await;
    common::cycle(&locks, "warm", TTL).await;
    // Cut master 2's connection, and make the next one slow to open.
    proxies.set_master_mode(2, ProxyMode::Reset).expect("reset");
    let cut = eventually(Duration::from_secs(2), || async {
        proxies.proxy(0, 2).expect("proxy").active_connections() == 0
    })
    .await;
    assert!(cut, "the proxy kept master 2's connection");
    proxies
        .set_master_mode(2, ProxyMode::Latency(Duration::from_millis(200)))
        .expect("latency");
    // This round's request to master 2 fails on the cut connection and starts the reconnect.
    let first = locks.try_acquire("trigger", TTL).await.expect("masters 0 and 1");
    first.release().await.expect("release");
    // This one's waits for the new connection; the round is won by masters 0 and 1 long before.
    let guard = locks
        .try_acquire("straggler", TTL)
        .await
        .expect("masters 0 and 1");
    let everywhere = eventually(Duration::from_secs(5), || async {
        holders(&c, &[0, 1, 2], "straggler").await == 3
    })
    .await;
    assert!(
        everywhere,
        "master 2 never got the key: {} of 3 hold it",
        holders(&c, &[0, 1, 2], "straggler").await
    );
    guard.release().await.expect("release");
    let clean = eventually(Duration::from_secs(5), || async {
        holders(&c, &[0, 1, 2], "straggler").await == 0
    })
    .await;
    assert!(clean, "the release left the key behind");
}

/// `settle` returns only once the lock traffic left to tasks has reached a slow master: the `SET`
/// of a round won without it, the rest of a release a majority confirmed, and the release of a
/// dropped guard. Each check follows `settle` at once: without it, the slow master would still be
/// waiting for its request.
#[tokio::test]
async fn settle_waits_until_a_slow_master_got_the_key_and_lost_it() {
    let c = cluster(3).await;
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    let locks = proxied(&proxies, Duration::from_secs(2)).await;
    common::cycle(&locks, "warm", TTL).await;
    locks.settle().await;
    proxies
        .set_master_mode(2, ProxyMode::Latency(Duration::from_millis(200)))
        .expect("latency");
    let guard = locks
        .try_acquire("settle:released", TTL)
        .await
        .expect("masters 0 and 1");
    locks.settle().await;
    assert_eq!(
        holders(&c, &[0, 1, 2], "settle:released").await,
        3,
        "settled before the slow master got the key"
    );
    let released = guard.release().await.expect("release");
    locks.settle().await;
    assert_eq!(
        holders(&c, &[0, 1, 2], "settle:released").await,
        0,
        "settled before the slow master released (the release returned with {} of 3)",
        released.held
    );
    let dropped = locks
        .try_acquire("settle:dropped", TTL)
        .await
        .expect("masters 0 and 1");
    drop(dropped);
    locks.settle().await;
    assert_eq!(
        holders(&c, &[0, 1, 2], "settle:dropped").await,
        0,
        "settled before the dropped guard was released everywhere"
    );
}

/// A client of the masters through the proxies, with `node_timeout`.
async fn proxied(proxies: &ProxyGroup, node_timeout: Duration) -> Quorlock {
    Quorlock::builder()
        .nodes(proxies.urls(0))
        .node_timeout(node_timeout)
        .build()
        .await
        .expect("build")
}

/// A waiter through the proxies with a short node timeout (100 ms), retrying every 40 ms for `wait`.
fn proxied_waiter(proxies: &ProxyGroup, wait: Duration) -> quorlock::QuorlockBuilder {
    Quorlock::builder()
        .nodes(proxies.urls(0))
        .node_timeout(Duration::from_millis(100))
        .retry_delay(Duration::from_millis(40))
        .retry_jitter(Duration::ZERO)
        .wait(wait)
}

/// A waiter's timeout that cuts a `SUBSCRIBE` short on a slow master must not take down that
/// master's pub/sub connection, which every channel of the process shares (it used to be dropped
/// and dialled again on the next pause); and the channel, which may be subscribed after all, is
/// unsubscribed when the last waiter leaves.
#[tokio::test]
async fn a_subscribe_cut_short_keeps_the_pubsub_connection_and_is_undone() {
    let c = cluster(3).await;
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    let holder = common::locks(&c).await;
    let waiter = proxied_waiter(&proxies, Duration::from_millis(800))
        .build()
        .await
        .expect("build");
    // One contended wait opens the waiter's pub/sub connections.
    let first = holder.acquire("cut:a", TTL).await.expect("hold");
    waiter.acquire("cut:a", TTL).await.expect_err("held");
    first.release().await.expect("release");
    // Its leaving unsubscribes in the background, holding master 2's pub/sub link meanwhile.
    let left = eventually(Duration::from_secs(5), || async {
        common::subscribers(&c, 2, "quorlock:released:cut:a").await == 0
    })
    .await;
    assert!(left, "the first wait's channel stayed subscribed");
    let dialled = proxies.proxy(0, 2).expect("proxy").accepted_connections();
    // Master 2 now answers after the waiter's timeout: each of its SUBSCRIBEs is cut short.
    proxies
        .set_master_mode(2, ProxyMode::Latency(Duration::from_millis(400)))
        .expect("latency");
    let held = holder.acquire("cut:b", TTL).await.expect("hold");
    waiter.acquire("cut:b", TTL).await.expect_err("held");
    assert_eq!(
        proxies.proxy(0, 2).expect("proxy").accepted_connections(),
        dialled,
        "a connection to master 2 was opened again"
    );
    proxies.heal();
    let undone = eventually(Duration::from_secs(5), || async {
        common::subscribers(&c, 2, "quorlock:released:cut:b").await == 0
    })
    .await;
    assert!(undone, "master 2's pub/sub connection still carries the channel");
    held.release().await.expect("release");
}

/// Opening a connection takes several round trips, a command one: against a master whose new
/// connections take longer than the node timeout to open, each waiter's attempt used to be cut off
/// at the node timeout, so that master never got a pub/sub connection and its announcements never
/// arrived. The attempt now runs in a task of its own, bounded by the connect timeout.
#[tokio::test]
async fn a_master_slower_to_connect_than_the_node_timeout_still_gets_pubsub() {
    let c = cluster(3).await;
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    let holder = common::locks(&c).await;
    let waiter = proxied_waiter(&proxies, Duration::from_secs(10))
        .connect_timeout(Duration::from_secs(3))
        .build()
        .await
        .expect("build");
    // New connections to master 2 now take about half a second to open; the waiter has none yet
    // for pub/sub.
    proxies
        .set_master_mode(2, ProxyMode::Latency(Duration::from_millis(150)))
        .expect("latency");
    let held = holder.acquire("slow:a", TTL).await.expect("hold");
    let waiting = tokio::spawn(async move { waiter.acquire("slow:a", TTL).await.map(drop) });
    let subscribed = eventually(Duration::from_secs(8), || async {
        common::subscribers(&c, 2, "quorlock:released:slow:a").await == 1
    })
    .await;
    assert!(subscribed, "the waiter never subscribed on the slow master");
    held.release().await.expect("release");
    waiting
        .await
        .expect("waiter task")
        .expect("acquired after the release");
}
