//! Native compare-and-delete and compare-and-extend: each master gets what its server offers.
//!
//! Valkey 9.1 has `DELIFEQ` and `SET ... IFEQ`, Valkey 8.1 only the latter, Redis 7.0 neither. The
//! master's own command statistics tell what the client sent it: a plain lock's extend (the
//! watchdog's renewals too) goes native where it can, as a script elsewhere, in one fleet of mixed
//! servers; the release is a script on every server, since it hands the key to the first queued
//! waiter, and it still tells an absent key from another holder's. A server that
//! is not installed is a recorded skip here, and a failure where every server is required
//! (`chaos/test` installs them all).

mod common;

use std::collections::HashMap;
use std::time::Duration;

use quorlock::{Quorlock, ReleaseError};
use quorlock_chaos::skip::{skip, Need};
use quorlock_chaos::{Cluster, ClusterOptions, Server};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(5);

/// Starts one master of `server`, or `None` when its binary is not installed here.
async fn master(server: Server) -> Option<Cluster> {
    if !server.is_installed() {
        skip(
            Need::Servers,
            &format!("nothing runs on {}", server.name()),
            "its binary is not installed (chaos/ensure-servers installs it)",
        );
        return None;
    }
    let opts = ClusterOptions {
        masters: 1,
        server: Some(server),
        ..ClusterOptions::default()
    };
    Some(Cluster::start_with(opts).await.expect("start master"))
}

/// `cmdstat_<name>` call counts of master 0 of `cluster`.
async fn calls(cluster: &Cluster) -> HashMap<String, u64> {
    common::command_calls(cluster, 0).await
}

/// Script calls counted by a master (by source or by SHA1).
fn scripts(calls: &HashMap<String, u64>) -> u64 {
    calls.get("eval").copied().unwrap_or(0) + calls.get("evalsha").copied().unwrap_or(0)
}

#[tokio::test]
async fn a_mixed_fleet_gives_each_master_what_it_supports() {
    let (Some(redis), Some(valkey81), Some(valkey91)) = (
        master(Server::Redis).await,
        master(Server::Valkey81).await,
        master(Server::Valkey91).await,
    ) else {
        return;
    };
    let fleet = [&redis, &valkey81, &valkey91];
    // The counts below need every master to answer every command: a generous node timeout keeps a
    // loaded machine from turning a slow reply into a timeout (and a missing count).
    let locks = Quorlock::builder()
        .nodes(fleet.iter().map(|c| c.url(0)))
        .node_timeout(Duration::from_secs(2))
        .build()
        .await
        .expect("build");
    // The first TTL this client uses makes it check every master again, with scripts of its own
    // (its record on each master learns the TTL): done before the counted window opens, once every
    // record says so.
    let g = locks.acquire("warm-up", TTL).await.expect("acquire");
    g.release().await.expect("release");
    for c in &fleet {
        assert!(
            common::eventually(Duration::from_secs(10), || async {
                let mut conn = c.client(0).await.expect("connect");
                let grace: Option<u64> = conn.hget("quorlock:master", "grace").await.expect("HGET");
                grace.is_some_and(|g| g >= TTL.as_millis() as u64)
            })
            .await,
            "the check after the first TTL never wrote the master's record"
        );
    }
    let before: Vec<HashMap<String, u64>> = futures::future::join_all(fleet.iter().map(|c| calls(c))).await;
    const CYCLES: u64 = 20;
    for i in 0..CYCLES {
        let guard = locks.acquire(&format!("mixed:{i}"), TTL).await.expect("acquire");
        guard.extend(TTL).await.expect("extend");
        guard.release().await.expect("release");
    }
    // Every master answered every cycle.
    locks.settle().await;
    let after: Vec<HashMap<String, u64>> = futures::future::join_all(fleet.iter().map(|c| calls(c))).await;
    let delta = |i: usize, name: &str| {
        after[i].get(name).copied().unwrap_or(0) - before[i].get(name).copied().unwrap_or(0)
    };
    let script_delta = |i: usize| scripts(&after[i]) - scripts(&before[i]);
    // Redis 7.0: both as scripts.
    assert_eq!(script_delta(0), 2 * CYCLES, "redis: {:?}", after[0]);
    // Valkey 8.1: extend native, release as a script.
    assert_eq!(script_delta(1), CYCLES, "valkey 8.1: {:?}", after[1]);
    assert_eq!(delta(1, "delifeq"), 0, "valkey 8.1 has no DELIFEQ");
    // Valkey 9.1: extend native; the release as a script too, which hands the key to the first
    // queued waiter (`DELIFEQ` cannot), announcing it on the key's channel when nobody is queued.
    assert_eq!(script_delta(2), CYCLES, "valkey 9.1: {:?}", after[2]);
    assert_eq!(delta(2, "delifeq"), 0, "valkey 9.1: {:?}", after[2]);
    assert!(
        delta(2, "publish") >= CYCLES,
        "valkey 9.1 announces every release: {:?}",
        after[2]
    );
}

#[tokio::test]
async fn a_native_release_still_says_what_happened() {
    let Some(valkey) = master(Server::Valkey91).await else {
        return;
    };
    let others = [master(Server::Valkey91).await, master(Server::Valkey91).await];
    let [Some(b), Some(c)] = others else {
        return;
    };
    let fleet = [&valkey, &b, &c];
    // The outcomes below count every master's answer: a node timeout generous enough that a slow
    // reply on a busy machine is not a missing answer, and still inside the short TTL renewed at
    // the end (a node timeout must be shorter than the TTL).
    let locks = Quorlock::builder()
        .nodes(fleet.iter().map(|c| c.url(0)))
        .node_timeout(Duration::from_millis(200))
        .build()
        .await
        .expect("build");
    let guard = locks.acquire("told", TTL).await.expect("acquire");
    // Another holder's token now stands on a majority: taken over.
    for cluster in &fleet[..2] {
        let mut conn = cluster.client(0).await.expect("connect");
        let _: () = conn.set("told", "someone-else").await.expect("SET");
    }
    let err = locks
        .release_token("told", guard.token())
        .await
        .expect_err("taken over");
    assert!(matches!(err, ReleaseError::TakenOver { others: 2, .. }), "{err}");
    drop(guard);
    locks.settle().await;
    // Nothing left of ours: a release by our token finds the key absent (or another's).
    for cluster in &fleet {
        let mut conn = cluster.client(0).await.expect("connect");
        let _: () = conn.del("told").await.expect("DEL");
    }
    let err = locks.release_token("told", "ours").await.expect_err("absent");
    assert!(matches!(err, ReleaseError::Absent { absent: 3, .. }), "{err}");
    // A watchdog renewal goes native too, and keeps a short TTL alive well past it.
    let short = Duration::from_millis(600);
    // Counted before the acquire, so nothing stands between it and the keep-alive.
    let before: Vec<HashMap<String, u64>> = futures::future::join_all(fleet.iter().map(|c| calls(c))).await;
    let guard = locks.acquire("renewed", short).await.expect("acquire");
    let first = guard.valid_until();
    guard.keep_alive();
    // Until the validity ends two TTLs past where the acquire left it: only a renewal confirmed by
    // a majority moves it, by at most one TTL each, and a lock whose validity ran out stays lost.
    // Counted in renewals, not time: a busy machine only makes this take longer.
    let renewed = common::eventually(Duration::from_secs(10), || async {
        guard.is_lost() || guard.valid_until() > first + short * 2
    })
    .await;
    assert!(
        renewed && !guard.is_lost(),
        "renewals moved the validity {:?} (lost: {})",
        guard.valid_until() - first,
        guard.is_lost()
    );
    let after: Vec<HashMap<String, u64>> = futures::future::join_all(fleet.iter().map(|c| calls(c))).await;
    // The acquire's SET on each master, then at least three renewals, each confirmed by at least
    // two masters, all as `SET ... IFEQ`: no script ran.
    let sets: u64 = (0..3)
        .map(|i| after[i].get("set").copied().unwrap_or(0) - before[i].get("set").copied().unwrap_or(0))
        .sum();
    assert!(sets >= 3 + 3 * 2, "{sets} SETs for the acquire and its renewals");
    for i in 0..3 {
        assert_eq!(
            scripts(&after[i]),
            scripts(&before[i]),
            "master {i} ran a script: {:?}",
            after[i]
        );
    }
    guard.release().await.expect("release");
}
