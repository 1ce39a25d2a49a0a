//! The multi-resource lock against real masters: all-or-nothing acquisition, conflicts named,
//! exclusion of plain locks, and overlapping sets taken concurrently, with and without a minority of
//! masters killed, checked with the chaos harness's history checker.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{builder, cluster, eventually, holders, locks, value};
use quorlock::{AcquireError, Quorlock};
use quorlock_chaos::checker::{lost_updates, overlaps};
use quorlock_chaos::{History, LockRecord, RunClock};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_conflict_names_the_held_resources_and_takes_nothing() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let plain = locks.acquire("b", TTL).await.expect("plain lock on b");
    let err = locks
        .lock_all(["c", "b", "a"], TTL)
        .try_acquire()
        .await
        .expect_err("b is held");
    assert!(
        matches!(
            &err,
            AcquireError::Conflict {
                acquired: 0,
                required: 2,
                masters: 3,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.conflicts(), ["b"]);
    assert!(err.is_contended() && err.is_retryable(), "{err}");
    assert!(err.to_string().contains(r#"["b"] held by others"#), "{err}");
    // All or nothing: neither a nor c was taken anywhere.
    assert_eq!(holders(&c, &[0, 1, 2], "a").await, 0);
    assert_eq!(holders(&c, &[0, 1, 2], "c").await, 0);
    // With retries, the conflict is still named once the attempts run out.
    let quick = builder(&c)
        .wait(Duration::from_millis(200))
        .build()
        .await
        .expect("build");
    let err = quick
        .lock_all(["a", "b"], TTL)
        .acquire()
        .await
        .expect_err("b stays held");
    assert!(matches!(err, AcquireError::Exhausted { .. }), "{err}");
    assert_eq!(err.conflicts(), ["b"]);
    plain.release().await.expect("release b");
    let guard = locks
        .lock_all(["a", "b"], TTL)
        .try_acquire()
        .await
        .expect("free now");
    guard.release().await.expect("release");
}

#[tokio::test]
async fn a_set_is_held_extended_and_released_as_one_lock_on_the_plain_keys() {
    let c = cluster(3).await;
    let a = locks(&c).await;
    let b = locks(&c).await;
    let guard = a
        .lock_all(["y", "x", "y"], Duration::from_secs(2))
        .acquire()
        .await
        .expect("acquire {x, y}");
    assert_eq!(guard.resources(), ["x", "y"]);
    assert_eq!(guard.resource(), "{x, y}");
    for i in 0..3 {
        for key in ["x", "y"] {
            assert_eq!(value(&c, i, key).await.as_deref(), Some(guard.token()));
        }
    }
    // The keys are the plain locks' keys: a plain lock on either is excluded, and the other way round.
    let err = b.try_acquire("y", TTL).await.expect_err("y is held");
    assert!(err.is_contended(), "{err}");
    let validity = guard.extend(Duration::from_secs(20)).await.expect("extend");
    assert!(validity > Duration::from_secs(19));
    let mut conn = c.client(1).await.expect("connect");
    for key in ["x", "y"] {
        let pttl: i64 = conn.pttl(key).await.expect("PTTL");
        assert!(pttl > 2_000, "{key}: PTTL {pttl} after extend");
    }
    let released = guard.release().await.expect("release");
    assert!(released.held >= 2, "a release confirms at least a majority");
    // The masters past the majority finish their release in the background.
    let gone = eventually(Duration::from_secs(1), || async {
        holders(&c, &[0, 1, 2], "x").await + holders(&c, &[0, 1, 2], "y").await == 0
    })
    .await;
    assert!(gone, "release deletes every key of the set on every master");
    let plain = b.try_acquire("x", TTL).await.expect("x free after release");
    let err = a
        .lock_all(["x", "z"], TTL)
        .try_acquire()
        .await
        .expect_err("x is held");
    assert_eq!(err.conflicts(), ["x"]);
    plain.release().await.expect("release");
}

#[tokio::test]
async fn a_set_that_lost_a_key_on_a_master_is_not_extended_there() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let guard = locks.lock_all(["p", "q"], TTL).acquire().await.expect("acquire");
    // Another holder's token replaces q on a majority (as after an expiry and a new acquire).
    for i in 0..2 {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn.set("q", "someone-else").await.expect("SET");
    }
    let err = guard.extend(TTL).await.expect_err("the set is lost");
    assert!(err.is_conflict(), "{err}");
    // Release removes only keys that hold our token, and reports the loss.
    let err = guard.release().await.expect_err("expired");
    assert!(err.is_expired(), "{err}");
    assert_eq!(value(&c, 0, "q").await.as_deref(), Some("someone-else"));
    assert_eq!(holders(&c, &[0, 1, 2], "p").await, 0);
}

/// What one client of the workload did.
#[derive(Debug, Default)]
struct Tally {
    held: usize,
    failed: usize,
}

/// Locks `set` `iterations` times; inside each hold it increments the witness of `b` by an
/// unprotected read, pause, write, and logs a record of holding `b`.
async fn client_loop(
    locks: Quorlock,
    client: usize,
    set: [&'static str; 2],
    iterations: usize,
    history: History,
    witness: Arc<AtomicU64>,
) -> Tally {
    let clock = history.clock();
    let mut tally = Tally::default();
    for _ in 0..iterations {
        let invoked = clock.now();
        match locks.lock_all(set, TTL).acquire().await {
            Ok(guard) => {
                let acquired = clock.now();
                let read = witness.load(Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(1)).await;
                witness.store(read + 1, Ordering::SeqCst);
                // The holder stops acting before it releases.
                let released = clock.now();
                let mut record = LockRecord::invoked(client, "b", invoked);
                record.token = guard.token().to_owned();
                record.acquired = Some(acquired);
                record.validity_end = Some(clock.offset(guard.valid_until().into_std()));
                record.released = Some(released);
                history.push(record);
                let _ = guard.release().await;
                tally.held += 1;
            }
            Err(err) => {
                let mut record = LockRecord::invoked(client, set.join(","), invoked);
                record.error = Some(err.to_string());
                history.push(record);
                tally.failed += 1;
            }
        }
    }
    tally
}

/// Two clients, `{a, b}` and `{b, c}` (each given in its own order), both witnessing `b`.
async fn overlapping_workload(
    locks: [Quorlock; 2],
    sets: [[&'static str; 2]; 2],
    iterations: usize,
) -> (History, [Tally; 2], u64) {
    let history = History::new(RunClock::new());
    let witness = Arc::new(AtomicU64::new(0));
    let [l0, l1] = locks;
    let t0 = tokio::spawn(client_loop(
        l0,
        0,
        sets[0],
        iterations,
        history.clone(),
        Arc::clone(&witness),
    ));
    let t1 = tokio::spawn(client_loop(
        l1,
        1,
        sets[1],
        iterations,
        history.clone(),
        Arc::clone(&witness),
    ));
    let tallies = [t0.await.expect("client 0"), t1.await.expect("client 1")];
    let total = witness.load(Ordering::SeqCst);
    (history, tallies, total)
}

fn b_records(history: &History) -> Vec<LockRecord> {
    history
        .records()
        .into_iter()
        .filter(|r| r.resource == "b" && r.acquired.is_some())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_sets_in_opposite_orders_never_both_hold_b() {
    let c = cluster(3).await;
    let (history, tallies, witnessed) =
        overlapping_workload([locks(&c).await, locks(&c).await], [["a", "b"], ["c", "b"]], 60).await;
    let records = b_records(&history);
    let found = overlaps(&records);
    assert!(found.is_empty(), "mutual exclusion on b violated: {found:#?}");
    let held: usize = tallies.iter().map(|t| t.held).sum();
    let lost = lost_updates(held as u64, witnessed);
    assert_eq!(lost.lost, 0, "{lost:?}");
    assert_eq!(records.len(), held);
    for (i, tally) in tallies.iter().enumerate() {
        assert!(tally.held >= 55, "client {i} made little progress: {tally:?}");
    }
    for key in ["a", "b", "c"] {
        assert_eq!(holders(&c, &[0, 1, 2], key).await, 0, "{key} left behind");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_minority_of_masters_killed_mid_run_there_are_no_violations() {
    let mut c = cluster(5).await;
    let clients = [locks(&c).await, locks(&c).await];
    let workload = tokio::spawn(overlapping_workload(clients, [["b", "a"], ["b", "c"]], 90));
    // Kill two of the five masters while the clients run.
    let started = Instant::now();
    tokio::time::sleep(Duration::from_millis(150)).await;
    c.kill(1).expect("kill master 1");
    tokio::time::sleep(Duration::from_millis(150)).await;
    c.kill(3).expect("kill master 3");
    let after_kills = started.elapsed();
    let (history, tallies, witnessed) = workload.await.expect("workload");
    let records = b_records(&history);
    let found = overlaps(&records);
    assert!(found.is_empty(), "mutual exclusion on b violated: {found:#?}");
    let held: usize = tallies.iter().map(|t| t.held).sum();
    assert_eq!(lost_updates(held as u64, witnessed).lost, 0);
    // Liveness: both clients kept acquiring once the minority was gone.
    for client in 0..2 {
        let late = records
            .iter()
            .filter(|r| r.client == client && r.acquired.is_some_and(|t| t > after_kills))
            .count();
        assert!(
            late > 0,
            "client {client} acquired nothing after the kills: {tallies:?}"
        );
    }
    assert!(held >= 150, "too few holds: {tallies:?}");
    for key in ["a", "b", "c"] {
        assert_eq!(holders(&c, &[0, 2, 4], key).await, 0, "{key} left behind");
    }
}

/// Negative control: the same workload where the clients lock {a} and {c} but both touch b. The
/// checker must see the overlaps, or the tests above prove nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_unprotected_b_is_caught() {
    let c = cluster(3).await;
    let (history, tallies, witnessed) =
        overlapping_workload([locks(&c).await, locks(&c).await], [["a", "a"], ["c", "c"]], 60).await;
    let found = overlaps(&b_records(&history));
    assert!(
        !found.is_empty(),
        "the checker missed unprotected access to b ({tallies:?}, witness {witnessed})"
    );
}
