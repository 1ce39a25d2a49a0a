//! What a held lock costs in memory, counted exactly: a counting global allocator tracks the live
//! heap of this test binary while it holds 1,000 locks kept alive by the watchdog.
//!
//! The peers benchmark reports the same cost as RSS growth, which also counts the allocator's
//! fragmentation and moves by hundreds of bytes per lock from run to run; this count does not, so a
//! change that adds to every held lock shows here. The file holds one test: tests of one binary run
//! on parallel threads and would share the count.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use common::cluster;

/// Passes every request to the system allocator and keeps the number of live bytes.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

fn bytes(layout: Layout) -> isize {
    isize::try_from(layout.size()).unwrap_or(isize::MAX)
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract holds exactly as it does for `System`; the counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged (see above).
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            LIVE.fetch_add(bytes(layout), Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged (see above).
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(bytes(layout), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged (see above).
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            LIVE.fetch_add(
                isize::try_from(new_size).unwrap_or(isize::MAX) - bytes(layout),
                Ordering::Relaxed,
            );
        }
        new
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const LOCKS: usize = 1_000;
const TTL: Duration = Duration::from_secs(3);
/// Live heap per lock held and kept alive, allocator overhead not included (measured at 729 B
/// when this test was written; the benchmark's target for RSS is 2 KB).
const BUDGET: isize = 1_000;

/// The smallest live-heap reading over `span`: renewal rounds in flight come and go, the locks'
/// own state stays.
async fn settled_live(span: Duration) -> isize {
    let mut least = isize::MAX;
    let end = tokio::time::Instant::now() + span;
    while tokio::time::Instant::now() < end {
        least = least.min(LIVE.load(Ordering::Relaxed));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    least
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_kept_alive_by_the_watchdog_costs_under_a_kilobyte_of_heap() {
    let c = cluster(3).await;
    let locks = common::builder(&c)
        .restart_grace(Duration::ZERO)
        .build()
        .await
        .expect("build");
    // Connections, the watchdog's task and its buffers exist before the baseline.
    let warm = locks.acquire("mem:warm", TTL).await.expect("warm");
    warm.keep_alive();
    tokio::time::sleep(Duration::from_millis(1_200)).await;
    warm.release().await.expect("release");
    let before = settled_live(Duration::from_millis(400)).await;
    let mut guards = Vec::with_capacity(LOCKS);
    for batch in 0..LOCKS / 100 {
        let got = futures::future::join_all((0..100).map(|i| {
            let resource = format!("mem:{}", batch * 100 + i);
            let locks = &locks;
            async move { locks.acquire(&resource, TTL).await }
        }))
        .await;
        guards.extend(got.into_iter().map(|g| g.expect("acquire")));
    }
    for guard in &guards {
        guard.keep_alive();
    }
    // Past one renewal of every lock (every TTL / 3 = 1 s).
    let ticks = locks.watchdog_stats().ticks;
    let renewed = common::eventually(Duration::from_secs(5), || async {
        locks.watchdog_stats().ticks >= ticks + 2
    })
    .await;
    assert!(renewed, "the watchdog did not tick");
    let after = settled_live(Duration::from_millis(1_200)).await;
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    assert_eq!(lost, 0, "locks lost while kept alive");
    let per_lock = (after - before) / isize::try_from(LOCKS).unwrap_or(1);
    eprintln!("live heap per lock kept alive: {per_lock} B");
    assert!(
        per_lock < BUDGET,
        "{per_lock} B of live heap per held lock (budget {BUDGET} B)"
    );
    for guard in guards {
        guard.release().await.expect("release");
    }
}
