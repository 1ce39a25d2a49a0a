//! The fair lock against real masters: waiters served in ticket order, a crashed waiter skipped
//! after its heartbeat deadline, masters whose queues differ still making progress, the next waiter
//! notified on release, and waiters that give up or are dropped leaving the queue.
//!
//! When a waiter is served is checked on the masters' own clocks (the deadlines they recorded and
//! the expiry they gave the lock), not by how long the test slept, so a busy machine cannot make a
//! correct queue look unfair.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{builder, cluster, eventually, subscribe, value};
use futures::StreamExt;
use quorlock::{AcquireError, FairOptions, NodeErrorKind, Quorlock, Ticket};
use quorlock_chaos::Cluster;
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(10);
const LOCK: &str = "quorlock:fair:printer";
const QUEUE: &str = "quorlock:fair:printer:queue";
const DEADLINES: &str = "quorlock:fair:printer:deadlines";

/// A client that waits long enough for a queue of waiters on a loaded machine.
async fn patient(c: &Cluster) -> Quorlock {
    builder(c)
        .wait(Duration::from_secs(30))
        .max_attempts(u32::MAX)
        .build()
        .await
        .expect("build")
}

/// The tickets queued on master `i`, in queue order.
async fn queue(c: &Cluster, i: usize) -> Vec<String> {
    let mut conn = c.client(i).await.expect("connect");
    conn.zrange(QUEUE, 0, -1).await.expect("ZRANGE")
}

/// Whether every master in `masters` has exactly `n` queued tickets.
async fn queued_everywhere(c: &Cluster, masters: &[usize], n: usize) -> bool {
    for &i in masters {
        if queue(c, i).await.len() != n {
            return false;
        }
    }
    true
}

/// Waits for the lock with `ticket`, records the ticket id when it gets it, then releases.
fn waiter(
    locks: Quorlock,
    ticket: Ticket,
    served: Arc<Mutex<Vec<String>>>,
    holding: Arc<AtomicUsize>,
) -> tokio::task::JoinHandle<Result<(), AcquireError>> {
    tokio::spawn(async move {
        let options = FairOptions::new().ticket(ticket.clone());
        let guard = locks.lock("printer", TTL).fair_with(options).acquire().await?;
        assert_eq!(holding.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
        served.lock().expect("served").push(ticket.id().to_owned());
        tokio::time::sleep(Duration::from_millis(5)).await;
        holding.fetch_sub(1, Ordering::SeqCst);
        guard.release().await.expect("release");
        Ok(())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_waiters_are_served_in_ticket_order() {
    let c = cluster(3).await;
    let locks = patient(&c).await;
    let first = locks
        .lock("printer", TTL)
        .fair()
        .acquire()
        .await
        .expect("first holder");
    let tickets: Vec<Ticket> = (0..8)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(2));
            Ticket::new()
        })
        .collect();
    let mut expected: Vec<Ticket> = tickets.clone();
    expected.sort();
    assert_eq!(expected, tickets, "tickets drawn in sequence are in order");
    let served = Arc::new(Mutex::new(Vec::new()));
    let holding = Arc::new(AtomicUsize::new(0));
    // Start the waiters latest ticket first: the queue order must come from the tickets.
    let mut tasks = Vec::new();
    for ticket in tickets.iter().rev() {
        tasks.push(waiter(
            locks.clone(),
            ticket.clone(),
            Arc::clone(&served),
            Arc::clone(&holding),
        ));
    }
    assert!(
        eventually(Duration::from_secs(10), || queued_everywhere(&c, &[0, 1, 2], 8)).await,
        "all eight waiters queue on every master"
    );
    let ids: Vec<String> = expected.iter().map(|t| t.id().to_owned()).collect();
    assert_eq!(queue(&c, 1).await, ids, "the queue is in ticket order");
    assert!(
        eventually(Duration::from_secs(5), || async {
            subscribers(&c, 0).await == 1 && subscribers(&c, 2).await == 1
        })
        .await,
        "the eight waiters of one client share one subscription per master"
    );
    first.release().await.expect("release the first holder");
    for task in tasks {
        task.await.expect("waiter task").expect("every waiter is served");
    }
    assert_eq!(*served.lock().expect("served"), ids);
    assert!(
        queued_everywhere(&c, &[0, 1, 2], 0).await,
        "nobody left in the queue"
    );
}

/// The heartbeat deadline master `i` holds for the waiter `id`, on that master's clock in ms.
async fn heartbeat_deadline(c: &Cluster, i: usize, id: &str) -> Option<u64> {
    let mut conn = c.client(i).await.expect("connect");
    conn.zscore(DEADLINES, id).await.expect("ZSCORE")
}

/// When master `i` last set the lock, on its clock in ms, from the expiry it gave it (the lock is
/// set with a TTL of `TTL` and not extended since).
async fn locked_at_ms(c: &Cluster, i: usize) -> u64 {
    let mut conn = c.client(i).await.expect("connect");
    let expires: i64 = redis::cmd("PEXPIRETIME")
        .arg(LOCK)
        .query_async(&mut conn)
        .await
        .expect("PEXPIRETIME");
    let expires = u64::try_from(expires).expect("the lock has an expiry");
    expires - TTL.as_millis() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashed_waiter_is_skipped_after_its_heartbeat_deadline() {
    let c = cluster(3).await;
    let locks = patient(&c).await;
    let holder = locks.lock("printer", TTL).fair().acquire().await.expect("holder");
    let crashed = Ticket::new();
    std::thread::sleep(Duration::from_millis(2));
    let live = Ticket::new();
    // The crashed waiter queues with a 3 s heartbeat, then stops without leaving: its future is
    // forgotten, so neither its rounds nor its clean-up ever run again. The live waiter must queue
    // behind it before the heartbeat lapses: one round, milliseconds on a quiet machine; 3 s leaves
    // room for a busy one.
    let options = FairOptions::new()
        .ticket(crashed.clone())
        .heartbeat(Duration::from_secs(3));
    let mut crashing = Box::pin(locks.lock("printer", TTL).fair_with(options).acquire());
    for _ in 0..100 {
        let _ = tokio::time::timeout(Duration::from_millis(50), &mut crashing).await;
        if queued_everywhere(&c, &[0, 1, 2], 1).await {
            break;
        }
    }
    assert!(
        queued_everywhere(&c, &[0, 1, 2], 1).await,
        "the crashed waiter queued"
    );
    std::mem::forget(crashing);
    // Its last deadline on each master, by that master's clock (a round of it still in flight could
    // only move it later).
    let mut deadlines = Vec::new();
    for i in 0..3 {
        let deadline = heartbeat_deadline(&c, i, crashed.id()).await;
        deadlines.push(deadline.expect("the crashed waiter has a deadline"));
    }

    let live_task = tokio::spawn({
        let locks = locks.clone();
        let options = FairOptions::new().ticket(live.clone());
        async move { locks.lock("printer", TTL).fair_with(options).acquire().await }
    });
    assert!(
        eventually(Duration::from_secs(5), || queued_everywhere(&c, &[0, 1, 2], 2)).await,
        "the live waiter queued beside the crashed one"
    );
    let order = [crashed.id().to_owned(), live.id().to_owned()];
    for i in 0..3 {
        assert_eq!(
            queue(&c, i).await,
            order,
            "master {i} queues the live waiter behind the crashed one"
        );
    }
    holder.release().await.expect("release the holder");
    // Once its heartbeat lapses, the crashed waiter is purged and the live one is served.
    let guard = tokio::time::timeout(Duration::from_secs(20), live_task)
        .await
        .expect("served within 20 s")
        .expect("task")
        .expect("acquired");
    // Not ahead of a live-looking head: every master that gave the live waiter the lock did so at
    // or after the crashed waiter's deadline there, both on that master's clock. (The master
    // counts the expiry from its own reading of its clock, in whole milliseconds, which may fall a
    // millisecond before the reading the deadline was compared with.)
    let mut granted = 0;
    for (i, &deadline) in deadlines.iter().enumerate() {
        if value(&c, i, LOCK).await.as_deref() != Some(guard.token()) {
            continue;
        }
        granted += 1;
        let at = locked_at_ms(&c, i).await;
        assert!(
            at + 2 >= deadline,
            "master {i} granted the lock {} ms before the crashed waiter's deadline",
            deadline.saturating_sub(at)
        );
        // The script that granted it purged the crashed waiter first.
        assert!(
            !queue(&c, i).await.contains(&crashed.id().to_owned()),
            "master {i} granted the lock and kept the crashed waiter"
        );
    }
    assert!(granted >= 2, "granted by {granted} masters");
    guard.release().await.expect("release");
    // A master outside the majority may have had its round just before its own deadline: it purges
    // the crashed waiter on its next script, or drops the queue with its expiry.
    let gone = eventually(Duration::from_secs(10), || async {
        for i in 0..3 {
            if queue(&c, i).await.contains(&crashed.id().to_owned()) {
                return false;
            }
        }
        true
    })
    .await;
    assert!(gone, "every master purged the crashed waiter");
}

/// This master's clock in milliseconds.
async fn server_ms(c: &Cluster, i: usize) -> u64 {
    let mut conn = c.client(i).await.expect("connect");
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.expect("TIME");
    secs * 1000 + micros / 1000
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_masters_with_queues_seeded_differently_still_make_progress() {
    let c = cluster(5).await;
    let locks = patient(&c).await;
    let holder = locks.lock("printer", TTL).fair().acquire().await.expect("holder");
    let tickets: Vec<Ticket> = (0..3)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(2));
            Ticket::new()
        })
        .collect();
    let [a, b, d] = [tickets[0].id(), tickets[1].id(), tickets[2].id()];
    // The masters' queues disagree: a heads masters 0 and 1, b heads a majority (2, 3, 4) with a
    // far behind it, d is missing from some, and there is junk: a waiter whose heartbeat lapsed and
    // a queued ticket with no heartbeat at all. Were the seeded scores kept, b would be served
    // before a; were the masters' heads left to disagree, no waiter could reach 3 of 5.
    let late = tickets[2].at_ms() + 1_000_000;
    let seeds: [&[(&str, u64)]; 5] = [
        &[(a, 1), (b, late), ("lapsed", 0)],
        &[(a, 1), (d, 2), (b, late)],
        &[(b, 1), (a, late), ("no-heartbeat", 0)],
        &[(b, 1), (d, 2), (a, late)],
        &[(d, 1), (b, 2), (a, late)],
    ];
    for (i, seed) in seeds.iter().enumerate() {
        let now = server_ms(&c, i).await;
        let mut conn = c.client(i).await.expect("connect");
        for &(id, score) in seed.iter() {
            let _: () = conn.zadd(QUEUE, id, score).await.expect("ZADD queue");
            let deadline = match id {
                "lapsed" => Some(now - 1_000),
                "no-heartbeat" => None,
                _ => Some(now + 60_000),
            };
            if let Some(deadline) = deadline {
                let _: () = conn.zadd(DEADLINES, id, deadline).await.expect("ZADD deadlines");
            }
        }
    }
    let served = Arc::new(Mutex::new(Vec::new()));
    let holding = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = tickets
        .iter()
        .rev()
        .map(|t| {
            waiter(
                locks.clone(),
                t.clone(),
                Arc::clone(&served),
                Arc::clone(&holding),
            )
        })
        .collect();
    // Each waiter's rounds put its own ticket's score on every master: the queues converge.
    let ids: Vec<String> = tickets.iter().map(|t| t.id().to_owned()).collect();
    let converged = eventually(Duration::from_secs(10), || async {
        for i in 0..5 {
            let live: Vec<String> = queue(&c, i)
                .await
                .into_iter()
                .filter(|id| ids.contains(id))
                .collect();
            if live != ids {
                return false;
            }
        }
        true
    })
    .await;
    assert!(converged, "every master orders the live waiters by their tickets");
    holder.release().await.expect("release the holder");
    for task in tasks {
        tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .expect("no livelock: every waiter is served within 20 s")
            .expect("task")
            .expect("acquired");
    }
    assert_eq!(*served.lock().expect("served"), ids, "served in ticket order");
    assert!(
        queued_everywhere(&c, &[0, 1, 2, 3, 4], 0).await,
        "queues drained, junk purged"
    );
}

#[tokio::test]
async fn release_notifies_the_next_waiter_by_its_ticket() {
    let c = cluster(3).await;
    let locks = patient(&c).await;
    let mut messages = subscribe(&c, 0, &format!("quorlock:released:{LOCK}")).await;
    let holder = locks.lock("printer", TTL).fair().acquire().await.expect("holder");
    assert_eq!(holder.key(), LOCK);
    let next = Ticket::new();
    let task = waiter(
        locks.clone(),
        next.clone(),
        Arc::new(Mutex::new(Vec::new())),
        Arc::new(AtomicUsize::new(0)),
    );
    assert!(eventually(Duration::from_secs(5), || queued_everywhere(&c, &[0, 1, 2], 1)).await);
    holder.release().await.expect("release");
    let payload = tokio::time::timeout(Duration::from_secs(5), messages.next())
        .await
        .expect("notified within 5 s")
        .expect("a message");
    assert_eq!(payload, next.id());
    task.await.expect("task").expect("the next waiter is served");
}

#[tokio::test]
async fn waiters_that_give_up_or_are_dropped_leave_the_queue() {
    let c = cluster(3).await;
    let locks = patient(&c).await;
    let holder = locks.lock("printer", TTL).fair().acquire().await.expect("holder");
    // A single round while the lock is held fails and leaves no ticket behind.
    let err = locks
        .lock("printer", TTL)
        .fair_with(FairOptions::new())
        .try_acquire()
        .await
        .expect_err("held");
    assert!(
        err.failures().iter().all(|f| f.kind == NodeErrorKind::Held),
        "{err}"
    );
    assert!(
        queued_everywhere(&c, &[0, 1, 2], 0).await,
        "left at once after failing"
    );
    // Giving up after the wait deadline leaves the queue before returning.
    let impatient = builder(&c)
        .wait(Duration::from_millis(300))
        .build()
        .await
        .expect("build");
    let err = impatient
        .lock("printer", TTL)
        .fair()
        .acquire()
        .await
        .expect_err("held throughout");
    assert!(matches!(err, AcquireError::Exhausted { .. }), "{err}");
    assert!(
        queued_everywhere(&c, &[0, 1, 2], 0).await,
        "left at once after giving up"
    );
    // A waiter whose future is dropped leaves from a background task. It is dropped once it has
    // queued on every master, however long a busy machine takes to get it there.
    let mut waiting = Box::pin(locks.lock("printer", TTL).fair().acquire());
    for _ in 0..100 {
        let _ = tokio::time::timeout(Duration::from_millis(50), &mut waiting).await;
        if queued_everywhere(&c, &[0, 1, 2], 1).await {
            break;
        }
    }
    assert!(
        queued_everywhere(&c, &[0, 1, 2], 1).await,
        "the waiter queued before it was dropped"
    );
    drop(waiting);
    assert!(
        eventually(Duration::from_secs(5), || queued_everywhere(&c, &[0, 1, 2], 0)).await,
        "a dropped waiter leaves the queue"
    );
    // A waiter behind an earlier live ticket on a majority is refused with Queued, not Held.
    holder.release().await.expect("release");
    let early = Ticket::new();
    for i in 0..2 {
        let deadline = server_ms(&c, i).await + 60_000;
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn.zadd(QUEUE, early.id(), early.at_ms()).await.expect("ZADD");
        let _: () = conn.zadd(DEADLINES, early.id(), deadline).await.expect("ZADD");
    }
    let err = locks
        .lock("printer", TTL)
        .fair_with(FairOptions::new())
        .try_acquire()
        .await
        .expect_err("an earlier waiter is ahead on a majority");
    assert!(
        err.failures().iter().any(|f| f.kind == NodeErrorKind::Queued),
        "{err}"
    );
    assert!(err.is_contended(), "{err}");
    assert_eq!(
        queue(&c, 0).await,
        [early.id().to_owned()],
        "only the earlier ticket is left"
    );
}

/// How many connections subscribe to the lock's release channel on master `i`.
async fn subscribers(c: &Cluster, i: usize) -> u64 {
    common::subscribers(c, i, &format!("quorlock:released:{LOCK}")).await
}

#[tokio::test]
async fn a_waiter_wakes_on_its_turn_instead_of_sleeping_out_its_retry_delay() {
    let c = cluster(3).await;
    let locks = patient(&c).await;
    // Between rounds this waiter would sleep 20 s: only the notification can wake it sooner.
    let sleepy = builder(&c)
        .retry_delay(Duration::from_secs(20))
        .retry_jitter(Duration::ZERO)
        .wait(Duration::from_secs(120))
        .build()
        .await
        .expect("build");
    let holder = locks.lock("printer", TTL).fair().acquire().await.expect("holder");
    let options = FairOptions::new().heartbeat(Duration::from_secs(120));
    let task = tokio::spawn(async move { sleepy.lock("printer", TTL).fair_with(options).acquire().await });
    assert!(
        eventually(Duration::from_secs(5), || async {
            queued_everywhere(&c, &[0, 1, 2], 1).await && subscribers(&c, 0).await == 1
        })
        .await,
        "the waiter queued and listens for its turn"
    );
    holder.release().await.expect("release");
    let guard = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("woken by the release, not by its 20 s retry delay")
        .expect("task")
        .expect("acquired");
    guard.release().await.expect("release");
    assert!(
        eventually(Duration::from_secs(5), || async { subscribers(&c, 0).await == 0 }).await,
        "the subscription ends with the wait"
    );
}

#[tokio::test]
async fn a_reused_ticket_never_grants_a_second_holder() {
    let c = cluster(3).await;
    let locks = patient(&c).await;
    let ticket = Ticket::new();
    let first = locks
        .lock("printer", TTL)
        .fair_with(FairOptions::new().ticket(ticket.clone()))
        .acquire()
        .await
        .expect("first holder");
    // The lock holds a fresh secret per acquisition, not the ticket id (which is published to
    // every subscriber of the release channel).
    assert_ne!(first.token(), ticket.id());
    for i in 0..3 {
        assert_eq!(value(&c, i, LOCK).await.as_deref(), Some(first.token()));
    }
    // Another acquisition with a clone of the same ticket is refused while the first holds.
    let err = locks
        .lock("printer", TTL)
        .fair_with(FairOptions::new().ticket(ticket.clone()))
        .try_acquire()
        .await
        .expect_err("the lock is held by the first acquisition");
    assert!(
        err.failures().iter().all(|f| f.kind == NodeErrorKind::Held),
        "{err}"
    );
    // A waiting acquisition with the same ticket queues instead of sharing the lock...
    let second = tokio::spawn({
        let locks = locks.clone();
        let options = FairOptions::new().ticket(ticket.clone());
        async move { locks.lock("printer", TTL).fair_with(options).acquire().await }
    });
    assert!(
        eventually(Duration::from_secs(5), || queued_everywhere(&c, &[0, 1, 2], 1)).await,
        "the second acquisition waits in the queue"
    );
    assert!(!second.is_finished(), "granted while the first holds");
    // ...and the refused rounds touched nothing the first holder owns: it still extends.
    first.extend(TTL).await.expect("the first holder still holds");
    for i in 0..3 {
        assert_eq!(value(&c, i, LOCK).await.as_deref(), Some(first.token()));
    }
    first.release().await.expect("release the first holder");
    let second = tokio::time::timeout(Duration::from_secs(10), second)
        .await
        .expect("the second acquisition is served after the release")
        .expect("task")
        .expect("acquired");
    assert_ne!(second.token(), ticket.id());
    for i in 0..3 {
        assert_eq!(value(&c, i, LOCK).await.as_deref(), Some(second.token()));
    }
    second.extend(TTL).await.expect("extend the second holder");
    second.release().await.expect("release the second holder");
    for i in 0..3 {
        assert_eq!(value(&c, i, LOCK).await, None, "released on master {i}");
    }
}
