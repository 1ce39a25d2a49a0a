//! The read-write lock against real masters: readers share and exclude a writer, a writer excludes
//! everyone, a writer is not starved by a stream of readers, a crashed reader's hold lapses with its
//! TTL, and inspection shows readers and writer.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{builder, cluster, locks};

const TTL: Duration = Duration::from_secs(10);

#[tokio::test]
async fn readers_share_and_a_writer_excludes() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let r1 = locks
        .read("config", TTL)
        .try_acquire()
        .await
        .expect("first reader");
    let r2 = locks
        .read("config", TTL)
        .try_acquire()
        .await
        .expect("second reader");
    assert_eq!((r1.is_read(), r2.is_read()), (Some(true), Some(true)));
    let err = locks
        .write("config", TTL)
        .try_acquire()
        .await
        .expect_err("readers hold it");
    assert!(err.is_contended(), "{err}");
    let status = locks.inspect_rwlock("config").await.expect("inspect");
    assert_eq!(status.readers().len(), 2);
    assert_eq!(status.writer(), None);
    r1.extend(TTL).await.expect("a read extends");
    r1.release().await.expect("release");
    r2.release().await.expect("release");
    locks.settle().await;
    let w = locks
        .write("config", TTL)
        .try_acquire()
        .await
        .expect("the writer");
    assert_eq!(w.is_read(), Some(false));
    let err = locks
        .read("config", TTL)
        .try_acquire()
        .await
        .expect_err("a writer holds it");
    assert!(err.is_contended(), "{err}");
    let err = locks
        .write("config", TTL)
        .try_acquire()
        .await
        .expect_err("one writer at once");
    assert!(err.is_contended(), "{err}");
    let status = locks.inspect_rwlock("config").await.expect("inspect");
    assert_eq!(status.writer(), Some(w.token()));
    assert!(status.readers().is_empty());
    w.release().await.expect("release");
    locks.settle().await;
    locks
        .read("config", TTL)
        .try_acquire()
        .await
        .expect("readers again")
        .release()
        .await
        .expect("release");
}

#[tokio::test]
async fn a_writer_is_not_starved_by_a_stream_of_readers() {
    let c = cluster(3).await;
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicUsize::new(0));
    let mut readers = Vec::new();
    for i in 0..3u64 {
        let locks = builder(&c)
            .wait(Duration::from_secs(10))
            .build()
            .await
            .expect("build");
        let (stop, reads) = (Arc::clone(&stop), Arc::clone(&reads));
        readers.push(tokio::spawn(async move {
            // Staggered, so that some reader always holds the lock.
            tokio::time::sleep(Duration::from_millis(40 * i)).await;
            while !stop.load(Ordering::SeqCst) {
                if let Ok(guard) = locks.acquire_read("catalog", TTL).await {
                    reads.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(120)).await;
                    let _ = guard.release().await;
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(reads.load(Ordering::SeqCst) >= 3, "the readers are running");
    let writer = builder(&c)
        .wait(Duration::from_secs(5))
        .build()
        .await
        .expect("build");
    let guard = writer
        .acquire_write("catalog", TTL)
        .await
        .expect("the writer gets in");
    let status = writer.inspect_rwlock("catalog").await.expect("inspect");
    assert!(status.readers().is_empty(), "no reader overlaps the writer");
    guard.release().await.expect("release");
    stop.store(true, Ordering::SeqCst);
    for task in readers {
        task.await.expect("reader");
    }
}

#[tokio::test]
async fn a_crashed_readers_hold_lapses_with_its_ttl() {
    let c = cluster(3).await;
    let locks = builder(&c)
        .wait(Duration::from_secs(5))
        .build()
        .await
        .expect("build");
    let reader = locks
        .acquire_read("report", Duration::from_millis(600))
        .await
        .expect("reader");
    std::mem::forget(reader);
    let started = tokio::time::Instant::now();
    let writer = locks
        .acquire_write("report", TTL)
        .await
        .expect("the writer after the TTL");
    assert!(started.elapsed() < Duration::from_secs(5));
    writer.release().await.expect("release");
}

#[tokio::test]
async fn a_writer_that_gives_up_lets_readers_in_again() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let reader = locks.read("doc", TTL).try_acquire().await.expect("reader");
    let err = locks
        .write("doc", TTL)
        .wait(Duration::from_millis(100))
        .acquire()
        .await
        .expect_err("a reader holds it");
    assert!(err.is_contended(), "{err}");
    locks.settle().await;
    locks
        .read("doc", TTL)
        .try_acquire()
        .await
        .expect("the writer left")
        .release()
        .await
        .expect("release");
    reader.release().await.expect("release");
}

#[tokio::test]
async fn work_under_a_read_hold_is_kept_alive_past_its_ttl() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let ttl = Duration::from_millis(600);
    let other = locks.clone();
    let out = locks
        .read("long-read", ttl)
        .with(|_| async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            // Past the TTL, the watchdog's extends still keep the writer out.
            other.write("long-read", TTL).try_acquire().await.is_err()
        })
        .await
        .expect("the work ran under the read hold");
    assert!(out, "a writer got in under a kept-alive read");
}

#[tokio::test]
async fn successive_fenced_writers_get_strictly_increasing_tokens() {
    let c = cluster(3).await;
    let a = locks(&c).await;
    let b = locks(&c).await;
    let mut last = 0;
    for round in 0..4 {
        // Alternate clients, and put a fenced plain lock of another resource between writers:
        // the writers draw from the same counters.
        let writer = if round % 2 == 0 { &a } else { &b };
        let w = writer
            .write("ledger", TTL)
            .fenced()
            .try_acquire()
            .await
            .expect("a fenced writer on a free lock");
        assert_eq!(w.is_read(), Some(false));
        let token = w.fencing_token().expect("a fenced write carries a token");
        assert!(token > last, "round {round}: {token} after {last}");
        // The fenced write is the write hold: no other writer, fenced or not, and no reader.
        let err = b
            .write("ledger", TTL)
            .try_acquire()
            .await
            .expect_err("a writer holds it");
        assert!(err.is_contended(), "{err}");
        let err = a
            .write("ledger", TTL)
            .fenced()
            .try_acquire()
            .await
            .expect_err("a writer holds it");
        assert!(err.is_contended(), "{err}");
        let err = b
            .read("ledger", TTL)
            .try_acquire()
            .await
            .expect_err("a writer holds it");
        assert!(err.is_contended(), "{err}");
        w.extend(TTL).await.expect("a fenced write extends");
        w.release().await.expect("release");
        let other = a
            .lock("other", TTL)
            .fenced()
            .try_acquire()
            .await
            .expect("a fenced lock");
        let between = other.fencing_token().expect("token");
        assert!(
            between > token,
            "a fenced lock after a fenced write: {between} after {token}"
        );
        other.release().await.expect("release");
        last = between;
    }
    // A plain write on the same lock is free again once the fenced one is released.
    let w = b.write("ledger", TTL).try_acquire().await.expect("released");
    assert_eq!(w.fencing_token(), None);
    w.release().await.expect("release");
}

#[tokio::test]
async fn a_fenced_write_is_refused_while_a_reader_holds() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let writer = builder(&c).build().await.expect("build");
    let r = locks.read("report", TTL).try_acquire().await.expect("reader");
    let err = writer
        .write("report", TTL)
        .fenced()
        .wait(Duration::from_millis(300))
        .acquire()
        .await
        .expect_err("a reader holds it");
    assert!(err.is_timeout() || err.is_contended(), "{err}");
    // The reader keeps its hold; the writer that gave up left, so readers are let in again.
    r.extend(TTL).await.expect("the reader still holds");
    writer.settle().await;
    let r2 = locks
        .read("report", TTL)
        .try_acquire()
        .await
        .expect("no writer waits any more");
    // Once the readers are gone, the fenced writer gets in, with a token.
    let waiting = tokio::spawn({
        let writer = writer.clone();
        async move {
            writer
                .write("report", TTL)
                .fenced()
                .wait(Duration::from_secs(20))
                .acquire()
                .await
        }
    });
    // Once the waiting fenced writer is on every master, new readers are kept out.
    let mut waiting_on = 0;
    for _ in 0..400 {
        waiting_on = locks
            .inspect_rwlock("report")
            .await
            .expect("inspect")
            .writers_waiting();
        if waiting_on == 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(waiting_on, 3, "the fenced writer never waited on every master");
    let err = locks
        .read("report", TTL)
        .try_acquire()
        .await
        .expect_err("a fenced writer waits: new readers are kept out");
    assert!(err.is_contended(), "{err}");
    r.release().await.expect("release");
    r2.release().await.expect("release");
    let w = waiting
        .await
        .expect("task")
        .expect("the writer after the readers");
    assert!(w.fencing_token().is_some());
    w.release().await.expect("release");
}

#[tokio::test]
async fn fencing_is_refused_where_it_makes_no_sense() {
    let c = cluster(3).await;
    let locks = locks(&c).await;
    let owner = quorlock::LockOwner::new();
    let cases = [
        ("read", locks.read("x", TTL).fenced()),
        ("read, fenced first", locks.lock("x", TTL).fenced().read()),
        ("reentrant", locks.lock("x", TTL).fenced().reentrant(&owner)),
        ("fair", locks.lock("x", TTL).fair().fenced()),
        ("semaphore", locks.semaphore("x", 2, TTL).fenced()),
        ("set", locks.lock_all(["x", "y"], TTL).fenced()),
        ("set of writes", locks.lock_all(["x", "y"], TTL).write().fenced()),
    ];
    for (what, request) in cases {
        let err = request.try_acquire().await.expect_err(what);
        assert!(
            matches!(
                err,
                quorlock::AcquireError::Input(quorlock::InputError::Unsupported { .. })
            ),
            "{what}: {err:?}"
        );
        assert!(err.to_string().contains("fenced"), "{what}: {err}");
    }
    // Nothing was taken: a plain writer and a plain lock get in at once.
    let w = locks.write("x", TTL).try_acquire().await.expect("free");
    w.release().await.expect("release");
    let g = locks.try_acquire("x", TTL).await.expect("free");
    g.release().await.expect("release");
}
