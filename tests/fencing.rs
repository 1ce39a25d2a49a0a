//! Fenced locks against real masters: tokens that strictly increase across holders, the counter
//! committed on a majority, a key of another type failing a fenced acquire as it fails a plain one,
//! the repair of a master that lost its counter, and the fenced store.

mod common;

use std::time::Duration;

use common::{builder, cluster, locks};
use quorlock::{FencedError, FencedStore, NodeErrorKind, Quorlock};
use quorlock_chaos::DataMode;
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(5);
const COUNTER: &str = "quorlock:fence:counter";

async fn counter(c: &quorlock_chaos::Cluster, i: usize) -> Option<u64> {
    let mut conn = c.client(i).await.expect("connect");
    conn.get(COUNTER).await.expect("GET counter")
}

/// A client with `grace`, whose acquires wait up to 8 s.
async fn with_grace(c: &quorlock_chaos::Cluster, grace: Duration) -> Quorlock {
    builder(c)
        .restart_grace(grace)
        .wait(Duration::from_secs(8))
        .build()
        .await
        .expect("build")
}

/// Takes a fenced lock on `ledger` for `ttl` and releases it: its token.
async fn fenced_token(locks: &Quorlock, ttl: Duration, what: &str) -> u64 {
    let g = locks.lock("ledger", ttl).fenced().acquire().await.expect(what);
    let token = g.fencing_token().expect("token");
    g.release().await.expect("release");
    token
}

#[tokio::test]
async fn tokens_strictly_increase_across_holders_and_resources() {
    let c = cluster(3).await;
    let a = locks(&c).await;
    let b = locks(&c).await;
    let mut last = 0;
    for round in 0..6 {
        let (client, resource) = if round % 2 == 0 {
            (&a, "orders:1")
        } else {
            (&b, "orders:2")
        };
        let guard = client
            .lock(resource, TTL)
            .fenced()
            .acquire()
            .await
            .expect("fenced acquire");
        let token = guard.fencing_token().expect("a fenced guard has a token");
        assert!(token > last, "token {token} after {last}");
        last = token;
        // The token is committed on a majority: their counters are at least the token.
        let committed = {
            let mut n = 0;
            for i in 0..3 {
                if counter(&c, i).await.unwrap_or(0) >= token {
                    n += 1;
                }
            }
            n
        };
        assert!(committed >= 2, "token {token} committed on {committed} masters");
        guard.release().await.expect("release");
    }
    // A plain lock has no token.
    let plain = a.acquire("orders:1", TTL).await.expect("plain acquire");
    assert_eq!(plain.fencing_token(), None);
    plain.release().await.expect("release");
}

#[tokio::test]
async fn a_fenced_lock_excludes_plain_and_fenced_contenders() {
    let c = cluster(3).await;
    let a = locks(&c).await;
    let b = locks(&c).await;
    let guard = a
        .lock("stock", TTL)
        .fenced()
        .acquire()
        .await
        .expect("fenced acquire");
    let err = b
        .lock("stock", TTL)
        .fenced()
        .try_acquire()
        .await
        .expect_err("held");
    assert!(err.is_contended(), "{err}");
    let err = b.try_acquire("stock", TTL).await.expect_err("held");
    assert!(err.is_contended(), "{err}");
    // A refused fenced contender leaves no key behind.
    for i in 0..3 {
        let v = common::value(&c, i, "stock").await;
        assert_eq!(v.as_deref(), Some(guard.token()));
    }
    guard.release().await.expect("release");
    let next = b.lock("stock", TTL).fenced().try_acquire().await.expect("free");
    next.release().await.expect("release");
}

/// As with a plain lock: the error names the masters holding a key of another type, is not retried
/// for the whole wait as if the key were held, and our key on the third master is released.
#[tokio::test]
async fn a_key_of_another_type_fails_a_fenced_acquire_at_once_and_leaves_no_key() {
    let c = cluster(3).await;
    for i in 0..2 {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn.lpush("ledger", "x").await.expect("LPUSH");
    }
    let locks = builder(&c)
        .wait(Duration::from_secs(30))
        .build()
        .await
        .expect("build");
    let err = locks
        .lock("ledger", TTL)
        .fenced()
        .acquire()
        .await
        .expect_err("a list is not a lock");
    assert!(!err.is_retryable(), "{err}");
    assert_eq!(
        common::failed_with(&err, &NodeErrorKind::WrongType),
        [0, 1],
        "{err}"
    );
    locks.settle().await;
    let mut conn = c.client(2).await.expect("connect");
    let left: Option<String> = conn.get("ledger").await.expect("GET");
    assert_eq!(left, None, "our key on master 2 stayed behind");
}

#[tokio::test]
async fn a_master_that_lost_its_counter_is_repaired_before_it_votes() {
    let mut c = cluster(3).await;
    let locks = with_grace(&c, Duration::from_millis(1500)).await;
    let mut last = 0;
    for _ in 0..5 {
        last = fenced_token(&locks, TTL, "acquire").await;
    }
    // Master 0 comes back empty: no counter.
    c.restart(0, DataMode::Wipe).await.expect("restart");
    assert_eq!(counter(&c, 0).await, None);
    // Fenced acquisitions go on with masters 1 and 2; master 0 is repaired once the grace passed.
    let token = fenced_token(&locks, TTL, "acquire").await;
    assert!(token > last);
    last = token;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut repaired = false;
    while !repaired && tokio::time::Instant::now() < deadline {
        let token = fenced_token(&locks, TTL, "acquire").await;
        assert!(token > last, "token {token} after {last}");
        last = token;
        repaired = counter(&c, 0).await.is_some();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(repaired, "master 0's counter was never repaired");
    assert!(
        counter(&c, 0).await.unwrap_or(0) >= last - 1,
        "repaired to the majority's value"
    );
    // Now master 0 must carry the majority: stop master 1, and tokens still go up.
    c.pause(1).expect("pause");
    let g = locks
        .lock("ledger", TTL)
        .fenced()
        .acquire()
        .await
        .expect("acquire without master 1");
    assert!(g.fencing_token().expect("token") > last);
    g.release().await.expect("release");
    c.resume(1).expect("resume");
}

/// Two of three masters come back empty while the third keeps its counter: no majority of intact
/// counters is left to repair them from, and a raise would wait for ever. They start again at the
/// clock once their grace has passed, above every token issued, and fenced locks are issued again.
#[tokio::test]
async fn masters_that_lost_their_counters_so_that_no_intact_majority_is_left_start_again() {
    let mut c = cluster(3).await;
    // A short TTL: the masters' records ask every repair to wait out the longest TTL declared.
    let ttl = Duration::from_millis(800);
    let grace = Duration::from_millis(1000);
    let locks = with_grace(&c, grace).await;
    let mut last = 0;
    for _ in 0..3 {
        last = fenced_token(&locks, ttl, "acquire").await;
    }
    c.restart(0, DataMode::Wipe).await.expect("restart");
    c.restart(1, DataMode::Wipe).await.expect("restart");
    assert_eq!((counter(&c, 0).await, counter(&c, 1).await), (None, None));
    // Every attempt is refused until the grace has passed: wait it out rather than spend them.
    tokio::time::sleep(grace + Duration::from_millis(300)).await;
    let token = fenced_token(&locks, ttl, "a fenced lock once the wiped masters start again").await;
    assert!(token > last, "token {token} after {last}");
    let issued = last;
    last = token;
    // The first restart may come before the second master's grace has passed (each is counted
    // from when a check first saw it back): fenced locks go on meanwhile, their tokens rising, and
    // the other starts again too.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let both = || async { counter(&c, 0).await.is_some() && counter(&c, 1).await.is_some() };
    while !both().await && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let token = fenced_token(&locks, ttl, "acquire").await;
        assert!(token > last, "token {token} after {last}");
        last = token;
    }
    for i in 0..2 {
        assert!(
            counter(&c, i).await.is_some_and(|v| v > issued),
            "master {i} did not start again above {issued}"
        );
    }
}

#[tokio::test]
async fn a_master_whose_counter_went_back_refuses_to_vote() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let mut highest = 0;
    for _ in 0..3 {
        let g = locks.lock("r", TTL).fenced().acquire().await.expect("acquire");
        highest = g.fencing_token().expect("token");
        g.release().await.expect("release");
    }
    // Master 0's counter is set back behind this client's back; master 1 is busy with another key.
    let mut conn = c.client(0).await.expect("connect");
    let _: () = conn.set(COUNTER, 0).await.expect("SET");
    let mut conn1 = c.client(1).await.expect("connect");
    let _: () = conn1.set_ex("r", "someone-else", 5).await.expect("SET");
    match locks.lock("r", TTL).fenced().try_acquire().await {
        // Master 0 refuses to vote until it is repaired: with master 1 busy, no majority.
        Err(err) => assert!(
            err.failures()
                .iter()
                .any(|f| f.node == 0 && f.kind == NodeErrorKind::FenceRepair),
            "{err}"
        ),
        // On a slow machine the master may already be past its grace period: then it was repaired
        // first, and the token must still be above every token issued before.
        Ok(g) => {
            let token = g.fencing_token().expect("token");
            assert!(token > highest, "token {token} not above {highest}");
            assert!(
                counter(&c, 0).await.unwrap_or(0) >= token,
                "master 0 was not repaired"
            );
            g.release().await.expect("release");
        }
    }
}

#[tokio::test]
async fn the_fenced_store_rejects_stale_tokens() {
    let c = cluster(1).await;
    let store = FencedStore::new(c.client(0).await.expect("connect"));
    store.write("balance", 5, "100").await.expect("first write");
    let err = store.write("balance", 4, "90").await.expect_err("stale write");
    assert_eq!(
        err,
        FencedError::Stale {
            key: "balance".into(),
            token: 4,
            highest: 5
        }
    );
    assert!(err.to_string().contains("stale fencing token 4"), "{err}");
    let v: Option<String> = store.read("balance", 5).await.expect("read");
    assert_eq!(v.as_deref(), Some("100"));
    // A read with a newer token fences out every older writer, even one equal to the old fence.
    let v: Option<String> = store.read("balance", 7).await.expect("read");
    assert_eq!(v.as_deref(), Some("100"));
    assert!(store
        .write("balance", 5, "110")
        .await
        .expect_err("stale")
        .is_stale());
    assert_eq!(store.highest("balance").await.expect("highest"), 7);
    store
        .write("balance", 7, "120")
        .await
        .expect("current holder writes");
    let v: Option<String> = store.read("balance", 7).await.expect("read");
    assert_eq!(v.as_deref(), Some("120"));
    let none: Option<String> = store.read("missing", 8).await.expect("read");
    assert_eq!(none, None);
}

/// A master restarts with its counter behind a committed token (the last writes before a crash
/// lost): a client that never saw the restart, and so has no floor and no cached `run_id` for the
/// old run, learns of it from the master's fencing epoch and repairs it before counting its vote.
#[tokio::test]
async fn a_fresh_client_repairs_a_master_whose_counter_went_back_across_a_restart() {
    let mut c = cluster(3).await;
    let old = locks(&c).await;
    // Every counter exists (and carries its epoch); then tokens are committed on masters 0 and 1
    // only (another holder's key on master 2 keeps its counter out of them).
    let g = old.lock("r", TTL).fenced().acquire().await.expect("acquire");
    g.release().await.expect("release");
    let mut conn2 = c.client(2).await.expect("connect");
    let _: () = conn2.set_ex("r", "someone-else", 30).await.expect("SET");
    let mut committed = 0;
    for _ in 0..5 {
        let g = old
            .lock("r", TTL)
            .fenced()
            .acquire()
            .await
            .expect("acquire without master 2");
        committed = g.fencing_token().expect("token");
        g.release().await.expect("release");
    }
    let _: () = conn2.del("r").await.expect("DEL");
    let behind = counter(&c, 2).await.expect("master 2 has a counter");
    assert!(behind + 1 < committed, "master 2 at {behind}, token {committed}");
    // Master 0 comes back from a restart with its counter as it was before those tokens.
    let mut conn = c.client(0).await.expect("connect");
    let _: () = conn.set(COUNTER, behind).await.expect("SET");
    drop(conn);
    c.restart(0, DataMode::Keep).await.expect("restart");
    assert_eq!(counter(&c, 0).await, Some(behind));
    // Master 1 is busy with another holder's key: the only majority left is {0, 2}.
    let mut conn1 = c.client(1).await.expect("connect");
    let _: () = conn1.set_ex("r", "someone-else", 30).await.expect("SET");
    let fresh = builder(&c)
        .wait(Duration::from_secs(8))
        .build()
        .await
        .expect("build");
    let g = fresh
        .lock("r", TTL)
        .fenced()
        .acquire()
        .await
        .expect("fenced acquire on {0, 2}");
    let token = g.fencing_token().expect("token");
    assert!(token > committed, "token {token} after the committed {committed}");
    assert!(counter(&c, 0).await.unwrap_or(0) >= token, "master 0 repaired");
    g.release().await.expect("release");
}

/// Sets up master `i`'s fencing counter at `value` under its current `run_id`, as another
/// client's first fenced acquire (or repair) does.
async fn set_up_counter(c: &quorlock_chaos::Cluster, i: usize, value: u64) {
    let mut conn = c.client(i).await.expect("connect");
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .expect("INFO");
    let run_id = info
        .lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .expect("run_id")
        .trim()
        .to_owned();
    let _: () = redis::pipe()
        .set("quorlock:fence:counter", value)
        .set("quorlock:fence:epoch", run_id)
        .query_async(&mut conn)
        .await
        .expect("set up the counter");
}

/// A client that found counters absent on some masters (a bootstrap by another client was under
/// way) takes them once the other client has set them up, instead of waiting for a repair that
/// can never be decided (too few masters it trusts).
#[tokio::test]
async fn counters_another_client_set_up_are_taken_without_a_repair() {
    let c = cluster(5).await;
    let locks = builder(&c)
        .wait(Duration::from_secs(3))
        .build()
        .await
        .expect("build");
    // Two masters have their counters, three not yet.
    for i in 0..2 {
        set_up_counter(&c, i, 0).await;
    }
    let err = locks
        .lock("half-set-up", TTL)
        .fenced()
        .try_acquire()
        .await
        .expect_err("three masters have no counter");
    assert!(
        err.failures()
            .iter()
            .filter(|f| f.kind == NodeErrorKind::FenceRepair)
            .count()
            >= 3,
        "{err}"
    );
    // The other client finishes setting them up.
    for i in 2..5 {
        set_up_counter(&c, i, 0).await;
    }
    let guard = locks
        .lock("half-set-up", TTL)
        .fenced()
        .acquire()
        .await
        .expect("the masters vote again");
    assert!(guard.fencing_token() >= Some(1));
    guard.release().await.expect("release");
}
