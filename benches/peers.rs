//! quorlock side by side with the other Rust RedLock crates and the command floors, in one run, on
//! the same local masters of the server `QUORLOCK_TEST_SERVER` selects (`redis`, the default,
//! `valkey-8.1` or `valkey-9.1`).
//!
//! Contenders: quorlock; rslock 0.10 (async); redlock 2.0 (blocking, driven from blocking threads);
//! and the floors, with no lock logic over one multiplexed connection per master: the raw floor
//! (`SET key token NX PX ttl`, then a blind `DEL`, each to all N masters and waiting for all), the
//! script floor (quorlock's compare-and-delete script in place of `DEL`), the native floor
//! (`DELIFEQ` in place of `DEL`, Valkey 9 only), and the early-quorum floor (the `SET` and the
//! release quorlock sends on this server, each returning at the q-th reply). Rows:
//! 1. uncontended acquire+release latency, p50/p99, at N = 1, 3, 5, 7, against the early-quorum
//!    floor (samples interleaved, each round in a shuffled order);
//! 2. the same at N = 5 with one and with two masters SIGSTOPped (peers get a bounded number of
//!    samples, each bounded in time: they may take seconds, or hang);
//! 3. throughput: 256 tasks on distinct keys for a fixed time; acquisitions/s, and CPU time per
//!    acquisition of this process (`getrusage`) and of the masters (`/proc/PID/stat`), from which
//!    it estimates the ceiling of any client that releases by a compare-and-delete script, and the
//!    masters' command time per lock cycle from `INFO commandstats`;
//! 4. contended hand-off on one key with 16 waiters, each library with its own retry loop: time from
//!    the start of a release to the next acquisition;
//! 5. memory per held lock: RSS growth over 10,000 held locks, each extended once, measured in a
//!    fresh child process per library.
//!
//! `QUORLOCK_TEST_SERVER=valkey-9.1 cargo bench --bench peers [-- --quick] [-- --json] [-- --rows 1,3]`

mod common;
#[path = "peers/memory.rs"]
mod memory;
#[path = "peers/throughput.rs"]
mod throughput;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{ratio, show, Args, Floor, FloorRelease, Json, SampleOrder, Stats, TTL};
use quorlock::config::DEFAULT_NODE_TIMEOUT;
use quorlock::Quorlock;
use quorlock_chaos::Cluster;

const USAGE: &str = "peers benchmark: cargo bench --bench peers -- [--quick] [--json] [--samples N] \
                     [--seconds S] [--rows 1,2,3,4,5] \
                     [--only floor,script-floor,native-floor,quorum-floor,quorlock,rslock,redlock (row 3)]";
/// TTL in milliseconds, for the crates that take a number.
const TTL_MS: usize = TTL.as_millis() as usize;
/// Concurrent tasks in the throughput row.
const TASKS: usize = 256;
/// Waiters on the one key in the hand-off row.
const WAITERS: usize = 16;
/// Longest a single peer sample with paused masters may take before it is reported as hung.
const PAUSED_SAMPLE_LIMIT: Duration = Duration::from_secs(5);

/// The libraries compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lib {
    Floor,
    Quorlock,
    Rslock,
    Redlock,
    /// The floor releasing with quorlock's compare-and-delete script by SHA1 (row 3 only). After
    /// the first four: the other rows index arrays by them.
    ScriptFloor,
    /// The floor releasing with `DELIFEQ` (row 3, on servers that have it).
    NativeFloor,
    /// The early-quorum floor: the `SET` and quorlock's release to all N, each phase returning at
    /// the q-th reply.
    QuorumFloor,
}

impl Lib {
    const LOCKS: [Lib; 3] = [Lib::Quorlock, Lib::Rslock, Lib::Redlock];
    /// Row 1: the reference is the early-quorum floor.
    const LATENCY: [Lib; 5] = [
        Lib::Floor,
        Lib::QuorumFloor,
        Lib::Quorlock,
        Lib::Rslock,
        Lib::Redlock,
    ];
    /// Row 3 also measures the other floors, which tell the wire format's cost from the client's
    /// (the native floor runs only where the masters have `DELIFEQ`).
    const THROUGHPUT: [Lib; 7] = [
        Lib::Floor,
        Lib::ScriptFloor,
        Lib::NativeFloor,
        Lib::QuorumFloor,
        Lib::Quorlock,
        Lib::Rslock,
        Lib::Redlock,
    ];

    fn name(self) -> &'static str {
        match self {
            Lib::Floor => "floor",
            Lib::ScriptFloor => "script-floor",
            Lib::NativeFloor => "native-floor",
            Lib::QuorumFloor => "quorum-floor",
            Lib::Quorlock => "quorlock",
            Lib::Rslock => "rslock",
            Lib::Redlock => "redlock",
        }
    }
}

/// One client of each library on one cluster.
#[derive(Clone)]
struct Clients {
    floor: Arc<Floor>,
    quorlock: Quorlock,
    rslock: rslock::LockManager,
    redlock: Arc<redlock::RedLock>,
}

impl Clients {
    async fn new(cluster: &Cluster) -> Clients {
        let urls = cluster.urls();
        Clients {
            floor: Arc::new(Floor::connect(cluster, DEFAULT_NODE_TIMEOUT).await),
            quorlock: common::quorlock(cluster).await,
            rslock: rslock::LockManager::new(urls.clone()),
            redlock: Arc::new(redlock::RedLock::new(urls)),
        }
    }

    /// One uncontended acquire + release of `key`; the time it took.
    async fn once(&self, lib: Lib, key: &str) -> Result<Duration, String> {
        match lib {
            Lib::Floor => self.floor.once(key).await.map(|(a, r)| a + r),
            Lib::ScriptFloor => self
                .floor
                .once_with(key, FloorRelease::EvalSha)
                .await
                .map(|(a, r)| a + r),
            Lib::NativeFloor => self
                .floor
                .once_with(key, FloorRelease::DelIfEq)
                .await
                .map(|(a, r)| a + r),
            Lib::QuorumFloor => self.floor.once_quorum(key).await.map(|(a, r)| a + r),
            Lib::Quorlock => common::quorlock_once(&self.quorlock, key)
                .await
                .map(|(a, r)| a + r),
            Lib::Rslock => {
                let t0 = Instant::now();
                let lock = self
                    .rslock
                    .lock(key, TTL)
                    .await
                    .map_err(|e| format!("rslock: {e}"))?;
                self.rslock.unlock(&lock).await;
                Ok(t0.elapsed())
            }
            Lib::Redlock => {
                let (rl, key) = (Arc::clone(&self.redlock), key.to_owned());
                // Timed inside the blocking thread: the hop to it is not redlock's cost.
                tokio::task::spawn_blocking(move || {
                    let t0 = Instant::now();
                    match rl.lock(key.as_bytes(), TTL_MS) {
                        Ok(Some(lock)) => {
                            rl.unlock(&lock);
                            Ok(t0.elapsed())
                        }
                        Ok(None) => Err("redlock: not acquired".to_owned()),
                        Err(e) => Err(format!("redlock: {e}")),
                    }
                })
                .await
                .map_err(|e| format!("redlock thread: {e}"))?
            }
        }
    }
}

fn main() {
    let args = Args::parse(USAGE);
    if let Some(code) = memory::memory_child() {
        std::process::exit(code);
    }
    let runtime = common::runtime();
    let report = runtime.block_on(run(&args));
    if args.json {
        println!("{}", report.json.finish());
    }
    // Blocking threads stuck on a paused master (redlock has no read timeout) must not hold the
    // process open.
    runtime.shutdown_timeout(Duration::from_secs(1));
}

/// What the run found, as JSON (the tables are printed as rows finish).
struct Report {
    json: Json,
}

async fn run(args: &Args) -> Report {
    let mut json = Json::object()
        .str("bench", "peers")
        .str("server", common::server().name())
        .str("mode", if args.quick { "quick" } else { "full" })
        .num("ttl_ms", TTL.as_millis() as f64)
        .num(
            "quorlock_node_timeout_ms",
            DEFAULT_NODE_TIMEOUT.as_millis() as f64,
        )
        .obj("machine", common::machine());
    let mut uncontended5 = None;
    if args.row(1) {
        let (row, p50) = row1(args).await;
        uncontended5 = p50;
        json = json.arr("row1_latency", row);
    }
    if args.row(2) {
        json = json.arr("row2_paused", row2(args).await);
    }
    if args.row(3) {
        json = json.arr("row3_throughput", throughput::row3(args).await);
    }
    if args.row(4) {
        json = json.arr("row4_handoff", row4(args, uncontended5).await);
    }
    if args.row(5) {
        json = json.arr("row5_memory", memory::row5(args).await);
    }
    Report { json }
}

/// Row 1's target: quorlock's p50 at most this times the early-quorum floor's.
const TARGET_VS_QUORUM: f64 = 1.1;

/// Row 1: uncontended latency at N = 1, 3, 5, 7. Returns the JSON cells and the N = 5 p50 of the
/// floor and the three libraries (indexed by `Lib as usize`).
async fn row1(args: &Args) -> (Vec<Json>, Option<[Duration; 4]>) {
    let samples = args.samples(1000, 100);
    let mut cells = Vec::new();
    let mut rows = Vec::new();
    let mut at5 = None;
    const K: usize = Lib::LATENCY.len();
    for n in [1, 3, 5, 7] {
        let cluster = common::masters(n).await;
        let clients = Clients::new(&cluster).await;
        // A key per library, all of one length: the slower masters' share of one library's
        // release, still in flight when the next one starts, must not meet a key of the same name.
        let keys: Vec<String> = (0..K).map(|i| format!("bench:peers:latency:{i}")).collect();
        eprintln!("row 1, N = {n}: {samples} samples per library, interleaved");
        for _ in 0..20 {
            for (lib, key) in Lib::LATENCY.iter().zip(&keys) {
                let _ = clients.once(*lib, key).await;
            }
        }
        let mut taken: [Vec<Duration>; K] = Default::default();
        let mut failed = [0usize; K];
        let mut order = SampleOrder::new();
        for _ in 0..samples {
            for which in order.next::<K>() {
                match clients.once(Lib::LATENCY[which], &keys[which]).await {
                    Ok(d) => taken[which].push(d),
                    Err(e) => {
                        if failed[which] == 0 {
                            eprintln!("  {} sample failed: {e}", Lib::LATENCY[which].name());
                        }
                        failed[which] += 1;
                    }
                }
            }
        }
        let stats: Vec<Stats> = taken.iter().map(|t| Stats::of(t)).collect();
        let of = |lib: Lib| {
            Lib::LATENCY
                .iter()
                .position(|l| *l == lib)
                .map_or_else(Stats::default, |i| stats[i])
        };
        let (floor, quorum) = (of(Lib::Floor), of(Lib::QuorumFloor));
        let mut cell = Json::object().num("masters", n as f64);
        let mut row = vec![n.to_string()];
        for (i, lib) in Lib::LATENCY.iter().enumerate() {
            let s = stats[i];
            let vs = ratio(s.p50, quorum.p50);
            let mut entry = s
                .json()
                .num("failures", failed[i] as f64)
                .num("p50_vs_floor", ratio(s.p50, floor.p50))
                .num("p50_vs_quorum_floor", vs)
                .num("p99_vs_quorum_floor", ratio(s.p99, quorum.p99));
            if *lib == Lib::Quorlock {
                entry = entry.bool("target_met", vs <= TARGET_VS_QUORUM);
            }
            cell = cell.obj(lib.name(), entry);
            row.push(match lib {
                Lib::QuorumFloor => format!("{} / {}", show(s.p50), show(s.p99)),
                Lib::Quorlock => format!(
                    "{} / {} (**{vs:.2}×**, {})",
                    show(s.p50),
                    show(s.p99),
                    if vs <= TARGET_VS_QUORUM { "met" } else { "not met" }
                ),
                _ => format!("{} / {} ({vs:.2}×)", show(s.p50), show(s.p99)),
            });
        }
        if n == 5 {
            at5 = Some([
                of(Lib::Floor).p50,
                of(Lib::Quorlock).p50,
                of(Lib::Rslock).p50,
                of(Lib::Redlock).p50,
            ]);
        }
        cells.push(cell);
        rows.push(row);
    }
    if !args.json {
        common::table(
            &format!(
                "Row 1 on {}: uncontended acquire+release, p50 / p99 (p50 vs the early-quorum floor; target for \
                 quorlock ≤ {TARGET_VS_QUORUM}×)",
                common::server().name()
            ),
            &[
                "N",
                "raw floor (all N)",
                "early-quorum floor",
                "quorlock",
                "rslock 0.10",
                "redlock 2.0",
            ],
            &rows,
        );
    }
    (cells, at5)
}

/// Row 2: N = 5 with one, then two masters SIGSTOPped, against each library's healthy figure.
async fn row2(args: &Args) -> Vec<Json> {
    let q_samples = args.samples(300, 50);
    let peer_samples = if args.quick { 3 } else { 20 };
    let mut cluster = common::masters(5).await;
    let clients = Clients::new(&cluster).await;
    let mut healthy = [Duration::ZERO; 4];
    for lib in Lib::LOCKS {
        let mut taken = Vec::new();
        let key = format!("bench:peers:paused:{}", lib.name());
        for _ in 0..q_samples.min(200) {
            if let Ok(d) = clients.once(lib, &key).await {
                taken.push(d);
            }
        }
        healthy[lib as usize] = Stats::of(&taken).p50;
    }
    let mut cells = Vec::new();
    let mut rows = Vec::new();
    // redlock blocks with no read timeout on a stopped master: its stuck threads are collected here
    // and only finish after the resume.
    let mut stuck = Vec::new();
    for paused in 1..=2 {
        let index = 5 - paused;
        if let Err(e) = cluster.pause(index) {
            eprintln!("cannot SIGSTOP master {index}: {e}");
            std::process::exit(1);
        }
        eprintln!("row 2, N = 5 with {paused} SIGSTOPped");
        let mut cell = Json::object().num("masters", 5.0).num("paused", paused as f64);
        let mut row = vec![format!("5, {paused} paused")];
        for lib in Lib::LOCKS {
            let samples = if lib == Lib::Quorlock {
                q_samples
            } else {
                peer_samples
            };
            let (mut taken, mut failed, mut hung) = (Vec::new(), 0usize, false);
            // A key per library and cell: a hung peer's half-taken key must not block the next one.
            let key = format!("bench:peers:paused:{}:{paused}", lib.name());
            for _ in 0..samples {
                let (sample, key) = (clients.clone(), key.clone());
                let task = tokio::spawn(async move { sample.once(lib, &key).await });
                let abort = task.abort_handle();
                match tokio::time::timeout(PAUSED_SAMPLE_LIMIT, task).await {
                    Ok(Ok(Ok(d))) => taken.push(d),
                    Ok(Ok(Err(_))) | Ok(Err(_)) => failed += 1,
                    Err(_) => {
                        hung = true;
                        abort.abort();
                        stuck.push(abort);
                        break;
                    }
                }
            }
            let s = Stats::of(&taken);
            let vs = ratio(s.p50, healthy[lib as usize]);
            cell = cell.obj(
                lib.name(),
                s.json()
                    .num("failures", failed as f64)
                    .bool("hung", hung)
                    .num("healthy_p50_us", common::micros(healthy[lib as usize]))
                    .num("p50_vs_healthy", if s.count == 0 { f64::NAN } else { vs }),
            );
            row.push(if hung {
                format!(
                    "no answer within {:?} (blocks until the master resumes)",
                    PAUSED_SAMPLE_LIMIT
                )
            } else if s.count == 0 {
                format!("all {failed} attempts failed")
            } else {
                format!(
                    "{} / {} ({:.1}× healthy{})",
                    show(s.p50),
                    show(s.p99),
                    vs,
                    if failed > 0 {
                        format!(", {failed} failed")
                    } else {
                        String::new()
                    }
                )
            });
        }
        cells.push(cell);
        rows.push(row);
    }
    for index in 3..5 {
        let _ = cluster.resume(index);
    }
    if !args.json {
        common::table(
            &format!(
                "Row 2: N = 5 with masters SIGSTOPped, p50 / p99 (vs each library's healthy p50); \
                 quorlock {q_samples} samples, peers {peer_samples}, each bounded by {PAUSED_SAMPLE_LIMIT:?}"
            ),
            &["cluster", "quorlock", "rslock 0.10", "redlock 2.0"],
            &rows,
        );
    }
    // Give redlock's threads, unblocked by the resume, a moment to finish before the cluster goes.
    tokio::time::sleep(Duration::from_millis(200)).await;
    drop(stuck);
    cells
}

/// Row 4: 16 waiters on one key, each taking one turn per round; the time from the start of each
/// release to the next waiter's acquisition.
async fn row4(args: &Args, uncontended5: Option<[Duration; 4]>) -> Vec<Json> {
    let rounds = if args.quick { 2 } else { 10 };
    let round_limit = Duration::from_secs(60);
    let n = 5;
    let cluster = common::masters(n).await;
    let clients = Clients::new(&cluster).await;
    let mut cells = Vec::new();
    let mut rows = Vec::new();
    for lib in Lib::LOCKS {
        eprintln!(
            "row 4, N = {n}: {} with {WAITERS} waiters, {rounds} rounds",
            lib.name()
        );
        let key = format!("bench:peers:handoff:{}", lib.name());
        let handoffs = Arc::new(Mutex::new(Vec::<Duration>::new()));
        for _ in 0..rounds {
            let base = Instant::now();
            // Nanoseconds after `base` at which the last release started; 0 before the first one.
            let released_at = Arc::new(AtomicU64::new(0));
            let mut tasks = Vec::new();
            for _ in 0..WAITERS {
                let turn = Turn {
                    base,
                    released_at: Arc::clone(&released_at),
                    handoffs: Arc::clone(&handoffs),
                };
                let (clients, key) = (clients.clone(), key.clone());
                if lib == Lib::Redlock {
                    tasks.push(tokio::task::spawn_blocking(move || {
                        // redlock's own loop: `acquire` retries until it gets the lock.
                        while let Err(e) = clients.redlock.acquire(key.as_bytes(), TTL_MS).map(|guard| {
                            turn.acquired();
                            drop(guard);
                        }) {
                            eprintln!("  redlock acquire failed: {e}");
                        }
                    }));
                } else {
                    tasks.push(tokio::spawn(async move {
                        loop {
                            if lib == Lib::Quorlock {
                                // quorlock's own loop: retries with jitter until its wait deadline.
                                if let Ok(guard) = clients.quorlock.acquire(&key, TTL).await {
                                    turn.acquired();
                                    let _ = guard.release().await;
                                    return;
                                }
                            } else if let Ok(guard) = clients.rslock.acquire(key.as_str(), TTL).await {
                                // rslock's own loop: `acquire` retries until it gets the lock.
                                turn.acquired();
                                guard.release().await;
                                return;
                            }
                        }
                    }));
                }
            }
            let _ = tokio::time::timeout(round_limit, futures::future::join_all(tasks)).await;
        }
        let samples = handoffs.lock().map(|h| h.clone()).unwrap_or_default();
        let s = Stats::of(&samples);
        let reference = uncontended5.map(|u| u[lib as usize]);
        let vs = reference.map_or(f64::NAN, |u| ratio(s.p50, u));
        cells.push(
            s.json()
                .str("library", lib.name())
                .num("masters", n as f64)
                .num("waiters", WAITERS as f64)
                .num("rounds", rounds as f64)
                .num("uncontended_p50_us", reference.map_or(f64::NAN, common::micros))
                .num("p50_vs_uncontended", vs),
        );
        rows.push(vec![
            lib.name().to_owned(),
            s.count.to_string(),
            show(s.p50),
            show(s.p99),
            if vs.is_finite() {
                format!("{vs:.1}×")
            } else {
                "-".into()
            },
        ]);
    }
    if !args.json {
        common::table(
            &format!(
                "Row 4: hand-off on one key, N = {n}, {WAITERS} waiters taking one turn each per round, \
                 each library's own retry loop"
            ),
            &["library", "hand-offs", "p50", "p99", "p50 vs uncontended (row 1)"],
            &rows,
        );
    }
    cells
}

/// One waiter's turn in a hand-off round.
struct Turn {
    base: Instant,
    released_at: Arc<AtomicU64>,
    handoffs: Arc<Mutex<Vec<Duration>>>,
}

impl Turn {
    /// Called right after acquiring: records the gap since the previous release started, then marks
    /// the start of this holder's release (which follows at once).
    fn acquired(&self) {
        let now = self.base.elapsed();
        let at = self.released_at.swap(0, Ordering::AcqRel);
        if at != 0 {
            if let Ok(mut h) = self.handoffs.lock() {
                h.push(now.saturating_sub(Duration::from_nanos(at)));
            }
        }
        let mark = u64::try_from(self.base.elapsed().as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        self.released_at.store(mark, Ordering::Release);
    }
}
