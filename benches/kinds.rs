//! What the masters do for one cycle (acquire, then release) of each lock kind: the commands they
//! count (`INFO commandstats`), the bytes they read from the client (`INFO stats`) and the CPU they
//! spend (`INFO cpu`), summed over the masters and divided by the cycles.
//!
//! Run with `cargo bench --bench kinds` (`-- --cycles N` for another count, `--masters N` for
//! another N; `QUORLOCK_TEST_SERVER` picks the server as for the tests). The cycles run one after
//! another on one resource per kind, uncontended, after a warm-up that lets the connections cache
//! the scripts. `INFO commandstats` also counts the commands a script calls, so a kind's script
//! shows up with the `GET`, `HSET` or `ZADD` it runs; the bytes read show what sending a script by
//! SHA1 saves over sending its source. Figures are from one run on one machine; nothing is asserted.

use std::collections::BTreeMap;
use std::time::Duration;

use quorlock::{LockOwner, Quorlock};
use quorlock_chaos::Cluster;

const TTL: Duration = Duration::from_secs(10);
const WARM_UP: usize = 50;

/// The kinds measured, by name.
const KINDS: [&str; 9] = [
    "plain",
    "fenced",
    "reentrant",
    "multi",
    "fair",
    "semaphore",
    "read",
    "write",
    "fenced write",
];

fn main() {
    let mut cycles = 2_000usize;
    let mut masters = 5usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut number = |name: &str| -> usize {
            args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
                eprintln!("{name} needs a number");
                std::process::exit(2)
            })
        };
        match arg.as_str() {
            "--cycles" => cycles = number("--cycles"),
            "--masters" => masters = number("--masters"),
            "--quick" => cycles = 200,
            "--bench" => {}
            other => {
                eprintln!("usage: kinds [--cycles N] [--masters N] [--quick] (not {other:?})");
                std::process::exit(2)
            }
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(run(cycles.max(1), masters.max(1)));
}

async fn run(cycles: usize, masters: usize) {
    let cluster = Cluster::start(masters).await.expect("start masters");
    let locks = Quorlock::builder()
        .nodes(cluster.urls())
        // These masters started a moment ago and never restarted under a lock.
        .restart_grace(Duration::ZERO)
        .build()
        .await
        .expect("client");
    println!("{cycles} cycles (acquire, then release) per kind, {masters} masters; per cycle, summed over the masters:");
    println!("| kind | bytes read | master CPU | commands counted (calls per cycle) |");
    println!("|---|---|---|---|");
    for kind in KINDS {
        for _ in 0..WARM_UP {
            cycle(&locks, kind).await;
        }
        let before = Reading::take(&cluster).await;
        for _ in 0..cycles {
            cycle(&locks, kind).await;
        }
        let after = Reading::take(&cluster).await;
        let per = cycles as f64;
        let commands: Vec<String> = after
            .calls
            .iter()
            .filter(|(name, _)| name.as_str() != "info")
            .filter_map(|(name, calls)| {
                let n = calls.saturating_sub(before.calls.get(name).copied().unwrap_or(0));
                (n > 0).then(|| format!("`{}` {:.2}", name.to_uppercase(), n as f64 / per))
            })
            .collect();
        println!(
            "| {kind} | {:.0} B | {:.1} µs | {} |",
            (after.bytes_in - before.bytes_in) as f64 / per,
            (after.cpu_us - before.cpu_us) / per,
            commands.join(", ")
        );
    }
}

/// One acquire and release of `kind`, each on its own resource.
async fn cycle(locks: &Quorlock, kind: &str) {
    let owner = LockOwner::new();
    let request = match kind {
        "plain" => locks.lock("kinds:plain", TTL),
        "fenced" => locks.lock("kinds:fenced", TTL).fenced(),
        "reentrant" => locks.lock("kinds:reentrant", TTL).reentrant(&owner),
        "multi" => locks.lock_all(["kinds:multi:a", "kinds:multi:b", "kinds:multi:c"], TTL),
        "fair" => locks.lock("kinds:fair", TTL).fair(),
        "semaphore" => locks.semaphore("kinds:semaphore", 3, TTL),
        "read" => locks.read("kinds:rw", TTL),
        "write" => locks.write("kinds:rw", TTL),
        "fenced write" => locks.write("kinds:rw-fenced", TTL).fenced(),
        other => unreachable!("no kind {other}"),
    };
    let guard = request
        .try_acquire()
        .await
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
    guard
        .release()
        .await
        .unwrap_or_else(|e| panic!("{kind} release: {e}"));
}

/// What the masters had counted at one moment, summed over them.
struct Reading {
    calls: BTreeMap<String, u64>,
    bytes_in: u64,
    cpu_us: f64,
}

impl Reading {
    async fn take(cluster: &Cluster) -> Reading {
        let mut reading = Reading {
            calls: BTreeMap::new(),
            bytes_in: 0,
            cpu_us: 0.0,
        };
        for i in 0..cluster.len() {
            let mut conn = cluster.client(i).await.expect("connect");
            let info: String = redis::cmd("INFO")
                .arg("commandstats")
                .arg("stats")
                .arg("cpu")
                .query_async(&mut conn)
                .await
                .expect("INFO");
            for line in info.lines().map(str::trim) {
                if let Some((name, rest)) = line.strip_prefix("cmdstat_").and_then(|l| l.split_once(':')) {
                    let calls = rest
                        .split(',')
                        .find_map(|kv| kv.strip_prefix("calls="))
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0);
                    *reading.calls.entry(name.to_ascii_lowercase()).or_default() += calls;
                } else if let Some(v) = line.strip_prefix("total_net_input_bytes:") {
                    reading.bytes_in += v.parse::<u64>().unwrap_or(0);
                } else if let Some(v) = line
                    .strip_prefix("used_cpu_user:")
                    .or_else(|| line.strip_prefix("used_cpu_sys:"))
                {
                    reading.cpu_us += v.parse::<f64>().unwrap_or(0.0) * 1e6;
                }
            }
        }
        reading
    }
}
