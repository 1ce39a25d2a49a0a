//! Row 5 of the peers benchmark: RSS growth per held lock, each library holding many locks in a
//! fresh child process of this binary, so that one library's heap does not count against another.

use std::time::Duration;

use quorlock::Quorlock;

use super::{Lib, TTL, TTL_MS};
use crate::common::{self, Args, Json};

/// Row 5: RSS growth per held lock, each library in a fresh child process.
pub(crate) async fn row5(args: &Args) -> Vec<Json> {
    let locks = if args.quick { 1_000 } else { 10_000 };
    let cluster = common::masters(5).await;
    let exe = std::env::current_exe().unwrap_or_default();
    let mut cells = Vec::new();
    let mut rows = Vec::new();
    for lib in Lib::LOCKS {
        eprintln!(
            "row 5, N = 5: {} holding {locks} locks (child process)",
            lib.name()
        );
        let out = tokio::task::block_in_place(|| {
            std::process::Command::new(&exe)
                .arg(MEMORY_CHILD)
                .arg(lib.name())
                .arg(locks.to_string())
                .args(cluster.urls())
                .output()
        });
        let text = out
            .as_ref()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default();
        let mut fields = text
            .split_whitespace()
            .map(|f| f.parse::<f64>().unwrap_or(f64::NAN));
        let (before, after, held) = (
            fields.next().unwrap_or(f64::NAN),
            fields.next().unwrap_or(f64::NAN),
            fields.next().unwrap_or(f64::NAN),
        );
        if held.is_nan() || held <= 0.0 {
            if let Ok(o) = &out {
                eprintln!("  child failed: {}", String::from_utf8_lossy(&o.stderr).trim());
            }
        }
        let per = (after - before) / held;
        cells.push(
            Json::object()
                .str("library", lib.name())
                .num("masters", 5.0)
                .num("locks", held)
                .num("rss_before_bytes", before)
                .num("rss_after_bytes", after)
                .num("bytes_per_lock", per)
                .bool("watchdog", lib == Lib::Quorlock),
        );
        rows.push(vec![
            lib.name().to_owned(),
            format!("{held:.0}"),
            format!("{:.1} MB", (after - before) / 1e6),
            format!("{per:.0} B"),
        ]);
    }
    if !args.json {
        common::table(
            "Row 5: memory per held lock (RSS growth; quorlock: guards kept alive by the watchdog through \
             about 4 renewal ticks; rslock: extended once, it has no watchdog; redlock: held)",
            &["library", "locks held", "RSS growth", "per lock"],
            &rows,
        );
    }
    cells
}

/// Row 5's TTL for quorlock: 3 s, so the watchdog renews every second.
const MEMORY_TTL: Duration = Duration::from_secs(3);
/// How long row 5 lets quorlock's watchdog run before reading RSS: about four ticks.
const MEMORY_WATCH: Duration = Duration::from_millis(4_500);
/// Row 5's node timeout for quorlock: a 10,000-lock acquire burst on a loaded 2-core machine must
/// not fail on the 50 ms default.
const MEMORY_NODE_TIMEOUT: Duration = Duration::from_millis(500);

/// The argument that makes this binary a row-5 child.
const MEMORY_CHILD: &str = "--memory-child";

/// In a row-5 child: holds the locks, prints `rss_before rss_after held`, returns the exit code.
pub(crate) fn memory_child() -> Option<i32> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == MEMORY_CHILD)?;
    let lib = args.get(at + 1).cloned().unwrap_or_default();
    let count: usize = args.get(at + 2).and_then(|c| c.parse().ok()).unwrap_or(0);
    let urls: Vec<String> = args.iter().skip(at + 3).cloned().collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .ok()?;
    let result = runtime.block_on(hold_many(&lib, count, urls));
    match result {
        Ok((before, after, held)) => {
            println!("{before} {after} {held}");
            Some(0)
        }
        Err(e) => {
            eprintln!("{e}");
            Some(1)
        }
    }
}

/// Acquires `count` locks on distinct keys with library `lib`, extends each once, and measures RSS
/// before and while holding them all.
async fn hold_many(lib: &str, count: usize, urls: Vec<String>) -> Result<(u64, u64, usize), String> {
    /// Locks acquired concurrently at a time.
    const BATCH: usize = 64;
    let keys: Vec<String> = (0..count).map(|i| format!("bench:peers:mem:{lib}:{i}")).collect();
    match lib {
        "quorlock" => {
            let locks = Quorlock::builder()
                .nodes(urls)
                // The benchmark started these masters a moment ago; none of them restarted under a lock,
                // so their votes count at once (the client still verifies each master's identity).
                .restart_grace(std::time::Duration::ZERO)
                .node_timeout(MEMORY_NODE_TIMEOUT)
                .build()
                .await
                .map_err(|e| e.to_string())?;
            // Warm the connections and the allocator before the baseline.
            let warm = locks
                .try_acquire("bench:peers:mem:warm", MEMORY_TTL)
                .await
                .map_err(|e| e.to_string())?;
            warm.release().await.map_err(|e| e.to_string())?;
            let before = common::rss_bytes();
            let mut guards = Vec::with_capacity(count);
            for chunk in keys.chunks(BATCH) {
                let got =
                    futures::future::join_all(chunk.iter().map(|k| locks.try_acquire(k, MEMORY_TTL))).await;
                for g in got {
                    guards.push(g.map_err(|e| e.to_string())?);
                }
            }
            for g in &guards {
                g.keep_alive();
            }
            // Several watchdog ticks: each renews every lock in one pipeline per master.
            let ticks0 = locks.watchdog_stats().ticks;
            tokio::time::sleep(MEMORY_WATCH).await;
            let stats = locks.watchdog_stats();
            let after = common::rss_bytes();
            let lost = guards.iter().filter(|g| g.is_lost()).count();
            eprintln!(
                "  quorlock watchdog: {} ticks, {} renewals, {} pipelines in {MEMORY_WATCH:?}, {lost} locks lost",
                stats.ticks - ticks0,
                stats.renewals,
                stats.pipelines
            );
            let held = guards.len() - lost;
            for g in guards {
                let _ = g.release().await;
            }
            Ok((before, after, held))
        }
        "rslock" => {
            let rl = rslock::LockManager::new(urls);
            let warm = rl
                .lock("bench:peers:mem:warm", TTL)
                .await
                .map_err(|e| e.to_string())?;
            rl.unlock(&warm).await;
            let before = common::rss_bytes();
            let mut held = Vec::with_capacity(count);
            for chunk in keys.chunks(BATCH) {
                let got = futures::future::join_all(chunk.iter().map(|k| rl.lock(k.as_str(), TTL))).await;
                for l in got {
                    held.push(l.map_err(|e| e.to_string())?);
                }
            }
            let mut extended = Vec::with_capacity(count);
            for chunk in held.chunks(BATCH) {
                let got = futures::future::join_all(chunk.iter().map(|l| rl.extend(l, TTL))).await;
                for l in got {
                    extended.push(l.map_err(|e| e.to_string())?);
                }
            }
            let after = common::rss_bytes();
            let n = held.len();
            for l in &held {
                rl.unlock(l).await;
            }
            drop(extended);
            Ok((before, after, n))
        }
        "redlock" => tokio::task::spawn_blocking(move || {
            let rl = redlock::RedLock::new(urls);
            match rl.lock(b"bench:peers:mem:warm", TTL_MS) {
                Ok(Some(l)) => rl.unlock(&l),
                other => return Err(format!("warm-up lock failed: {:?}", other.map(|o| o.is_some()))),
            }
            let before = common::rss_bytes();
            let mut held = Vec::with_capacity(count);
            for k in &keys {
                match rl.lock(k.as_bytes(), TTL_MS) {
                    Ok(Some(l)) => held.push(l),
                    other => return Err(format!("lock {k} failed: {:?}", other.map(|o| o.is_some()))),
                }
            }
            // redlock 2.0 has no extend.
            let after = common::rss_bytes();
            let n = held.len();
            for l in &held {
                rl.unlock(l);
            }
            Ok((before, after, n))
        })
        .await
        .map_err(|e| e.to_string())?,
        other => Err(format!("unknown library {other:?}")),
    }
}
