//! The lock through real operations on its masters, each with a client that watched the change and
//! one built after it (every CLI invocation is one):
//!
//! - a master **replaced behind its address** by a server that never had the data, which reports
//!   `appendfsync always` and an uptime longer than any grace (the harness's proxy repoints the
//!   address);
//! - a **replica promoted** behind the address, lagging: the lock's key never reached it;
//! - a **runtime downgrade** (`CONFIG SET appendfsync everysec`, no rewrite), then a crash that
//!   loses the last writes (the data directory put back to a copy taken before them), then a
//!   restart that reports `always` from its command line;
//! - **eviction**: `maxmemory` with `volatile-ttl` and a filler that evicts a held lock's key;
//! - two **semaphore** clients asking for the same name with different permit counts.
//!
//! In each, holder A holds the lock on two of three masters (the third held by a foreign token
//! meanwhile), and the operation then takes A's key from one of the two. A second holder would need
//! the free master and the changed one: both clients must be refused while A's validity lasts.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use quorlock::{AcquireError, Guard, Quorlock};
use quorlock_chaos::{Cluster, ClusterOptions, DataMode, Existing, ProxyGroup};
use redis::AsyncCommands;

const KEY: &str = "orders";
/// A's TTL: long enough that every check below happens inside its validity.
const TTL: Duration = Duration::from_secs(20);
/// The TTL the other clients ask for, and so the grace they would use on their own: far shorter
/// than A's, so that only what the masters record makes them wait for A's.
const SHORT: Duration = Duration::from_secs(1);

/// A client of the masters behind `urls` with the default grace (the longest TTL it used, or
/// another client declared in the masters' records), checking them every 200 ms.
async fn client(urls: Vec<String>) -> Quorlock {
    Quorlock::builder()
        .nodes(urls)
        .node_timeout(Duration::from_millis(300))
        .retry_delay(Duration::from_millis(20))
        .retry_jitter(Duration::from_millis(10))
        .health_refresh(Duration::from_millis(200))
        .build()
        .await
        .expect("build")
}

/// Holder A. The watching client and the one built after the change only ever use [`SHORT`], so
/// their own grace is far shorter than A's TTL: only what A declared in the masters' records
/// makes them wait for A's.
async fn holder(urls: Vec<String>) -> Quorlock {
    client(urls).await
}

/// A takes [`KEY`] on masters 1 and 2 only: master 0 is held by a foreign token meanwhile.
async fn hold_on_two(c: &Cluster, a: &Quorlock) -> Guard {
    hold_on_two_for(c, a, TTL).await
}

/// As [`hold_on_two`], for `ttl`.
async fn hold_on_two_for(c: &Cluster, a: &Quorlock, ttl: Duration) -> Guard {
    let mut m0 = c.client(0).await.expect("connect");
    let _: () = m0.set_ex(KEY, "foreign", 60).await.expect("SET");
    let guard = a
        .try_acquire(KEY, ttl)
        .await
        .expect("A acquires on masters 1 and 2");
    let _: () = m0.del(KEY).await.expect("DEL");
    assert_eq!(common::value(c, 1, KEY).await.as_deref(), Some(guard.token()));
    guard
}

/// How long each client keeps trying: several of its own graces, and long enough to reconnect to
/// the changed master and read it again.
const TRYING: Duration = Duration::from_secs(3);
/// A's TTL in the downgrade scenario, where the masters must first have been up for A's grace
/// (its longest TTL) before a master persisting less than every write grants A its key: long
/// enough for the crash, the restart and both clients' tries.
const DOWNGRADE_TTL: Duration = Duration::from_secs(12);

/// Both clients are refused for [`TRYING`] each (every round refused for want of a majority),
/// while A's validity lasts, and A still holds master 1.
async fn refused(c: &Cluster, guard: &Guard, watcher: &Quorlock, newcomer: &Quorlock, what: &str) {
    let mut wrong = Vec::new();
    for (who, locks) in [
        ("the client built after", newcomer),
        ("the watching client", watcher),
    ] {
        let got = locks.lock(KEY, SHORT).wait(TRYING).acquire().await;
        // A refused round's cleanup is left to a task: done before the next client tries.
        locks.settle().await;
        assert!(
            guard.validity() > Duration::ZERO,
            "{what}: A's validity ran out before {who} was done trying"
        );
        match got {
            Ok(g) => {
                wrong.push(format!(
                    "{what}: {who} acquired {KEY} (token {}) while A (token {}) held it: two holders",
                    g.token(),
                    guard.token()
                ));
                // Its release makes way for the other client's try.
                let _ = g.release().await;
            }
            Err(AcquireError::Exhausted { last, .. }) if matches!(*last, AcquireError::NoQuorum { .. }) => {
                eprintln!("{what}: {who} refused for {TRYING:?}; last: {last}")
            }
            Err(e) => wrong.push(format!(
                "{what}: {who} failed for another reason than a refused majority: {e}"
            )),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(common::value(c, 1, KEY).await.as_deref(), Some(guard.token()));
}

/// The address of master `i` of `c`.
fn addr(c: &Cluster, i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], c.port(i)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_replaced_behind_its_address_is_kept_out() {
    let mut c = common::cluster(3).await;
    // The replacement: up for longer than the newcomer's own grace, durable, empty.
    let spare = common::cluster(1).await;
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    let a = holder(proxies.urls(0)).await;
    let watcher = client(proxies.urls(0)).await;
    let guard = hold_on_two(&c, &a).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    proxies
        .proxy(0, 2)
        .expect("proxy")
        .repoint(addr(&spare, 0), Existing::Reset);
    c.kill(2).expect("kill the old master 2");
    let newcomer = client(proxies.urls(0)).await;
    refused(&c, &guard, &watcher, &newcomer, "replaced").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_replica_promoted_behind_the_address_is_kept_out() {
    let mut c = common::cluster(3).await;
    let replica = common::cluster(1).await;
    // The replica reaches master 2 through a proxy of its own, which then stops the replication
    // stream: writes made after that never reach it.
    let link = quorlock_chaos::Proxy::start(addr(&c, 2)).await.expect("proxy");
    let mut r = replica.client(0).await.expect("connect");
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(link.port())
        .query_async(&mut r)
        .await
        .expect("REPLICAOF");
    assert!(
        common::eventually(Duration::from_secs(20), || async {
            let mut r = replica.client(0).await.expect("connect");
            let info: String = redis::cmd("INFO")
                .arg("replication")
                .query_async(&mut r)
                .await
                .expect("INFO");
            info.contains("master_link_status:up")
        })
        .await,
        "the replica never synced"
    );
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    let a = holder(proxies.urls(0)).await;
    let watcher = client(proxies.urls(0)).await;
    // What the clients wrote at build has reached the replica; from here on nothing does.
    tokio::time::sleep(Duration::from_millis(500)).await;
    link.set_mode(quorlock_chaos::ProxyMode::Blackhole);
    let guard = hold_on_two(&c, &a).await;
    assert_eq!(common::value(&replica, 0, KEY).await, None, "the replica lags");
    tokio::time::sleep(Duration::from_secs(2)).await;
    c.kill(2).expect("kill master 2");
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query_async(&mut r)
        .await
        .expect("REPLICAOF NO ONE");
    proxies
        .proxy(0, 2)
        .expect("proxy")
        .repoint(addr(&replica, 0), Existing::Reset);
    let newcomer = client(proxies.urls(0)).await;
    refused(&c, &guard, &watcher, &newcomer, "promoted replica").await;
}

/// Copies the files of `from` (one level of directories, as a master's data directory has) over
/// `to`, which is emptied first.
fn restore(from: &Path, to: &Path) {
    std::fs::remove_dir_all(to).expect("empty the data directory");
    copy_dir(from, to);
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a directory");
    for entry in std::fs::read_dir(from).expect("read a directory") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).expect("copy a file");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_downgrade_then_a_lossy_crash_is_not_trusted_for_what_the_restart_reports() {
    let started = std::time::Instant::now();
    let mut c = common::cluster(3).await;
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    let a = holder(proxies.urls(0)).await;
    let watcher = client(proxies.urls(0)).await;
    let mut m2 = c.client(2).await.expect("connect");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("appendfsync")
        .arg("everysec")
        .query_async(&mut m2)
        .await
        .expect("CONFIG SET");
    // Long enough for the clients' checks to see the downgrade, and for what they wrote to reach
    // the disk (everysec: within a second).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let saved = tempdir("downgrade");
    copy_dir(c.dir(2), &saved);
    // Master 2 now persists less than every write: by its reported uptime, it is in A's grace
    // (A's TTL) until it has been up that long. Only then does it grant A its key.
    // (A reported uptime understates the real one by up to a second, so one more.)
    let up_for = DOWNGRADE_TTL + DOWNGRADE_TTL / 50 + Duration::from_millis(2_500);
    tokio::time::sleep(up_for.saturating_sub(started.elapsed())).await;
    let guard = hold_on_two_for(&c, &a, DOWNGRADE_TTL).await;
    // The crash loses A's write: the data directory is what it was before it.
    c.kill(2).expect("kill");
    restore(&saved, c.dir(2));
    c.restart(2, DataMode::Keep).await.expect("restart");
    assert_eq!(common::value(&c, 2, KEY).await, None, "the crash lost A's key");
    let mut m2 = c.client(2).await.expect("connect");
    let policy: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("appendfsync")
        .query_async(&mut m2)
        .await
        .expect("CONFIG GET");
    assert_eq!(policy[1], "always", "the restarted master reports always");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let newcomer = client(proxies.urls(0)).await;
    refused(&c, &guard, &watcher, &newcomer, "downgraded, then crashed").await;
    let _ = std::fs::remove_dir_all(saved);
}

/// A fresh directory under the system's temporary one.
fn tempdir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "quorlock-operations-{what}-{}-{:x}",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_that_may_evict_lock_keys_is_not_counted() {
    let c = Cluster::start_with(ClusterOptions {
        masters: 3,
        extra_args: vec!["--maxmemory-policy".into(), "volatile-ttl".into()],
        ..ClusterOptions::default()
    })
    .await
    .expect("start masters");
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    let a = holder(proxies.urls(0)).await;
    let watcher = client(proxies.urls(0)).await;
    let guard = hold_on_two(&c, &a).await;
    // Master 2 gets a memory limit a little above what it uses, and a filler whose keys expire
    // later than the lock's: volatile-ttl evicts the lock's key first.
    let mut m2 = c.client(2).await.expect("connect");
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut m2)
        .await
        .expect("INFO");
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(used + 2 * 1024 * 1024)
        .query_async(&mut m2)
        .await
        .expect("CONFIG SET maxmemory");
    let filler = "x".repeat(16 * 1024);
    for i in 0..2_000 {
        let _: redis::RedisResult<()> = m2.set_ex(format!("filler:{i}"), &filler, 3_600).await;
        if common::value(&c, 2, KEY).await.is_none() {
            break;
        }
    }
    assert_eq!(
        common::value(&c, 2, KEY).await,
        None,
        "the filler evicted A's key"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let newcomer = client(proxies.urls(0)).await;
    refused(&c, &guard, &watcher, &newcomer, "evicting").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphores_of_one_name_with_different_permits_do_not_mix() {
    let c = common::cluster(3).await;
    let old = holder(c.urls()).await;
    let new = client(c.urls()).await;
    let first = old.acquire_permit("pool", 2, TTL).await.expect("permit 1 of 2");
    let second = old.acquire_permit("pool", 2, TTL).await.expect("permit 2 of 2");
    let third = new.semaphore("pool", 5, SHORT).try_acquire().await;
    match third {
        Ok(g) => panic!(
            "a client asking for 5 permits got one ({}) while 2 of 2 were held: 3 holders",
            g.token()
        ),
        Err(e) => {
            let text = e.to_string();
            assert!(
                text.contains('2') && text.contains('5'),
                "the error names both counts: {text}"
            );
            assert!(
                matches!(
                    e,
                    AcquireError::PermitsMismatch {
                        asked: 5,
                        in_use: 2,
                        ..
                    }
                ),
                "{e:?}"
            );
        }
    }
    // Nothing was taken: every slot key on every master holds one of the two permits' tokens.
    for i in 0..3 {
        let keys = c.keys(i, "quorlock:semaphore:pool*").await.expect("KEYS");
        for key in keys.iter().filter(|k| k.contains(":slot:")) {
            let v = common::value(&c, i, key).await;
            assert!(
                v.as_deref() == Some(first.token()) || v.as_deref() == Some(second.token()),
                "master {i} key {key} holds {v:?}"
            );
        }
    }
}
