//! quorlock side by side with the other Rust RedLock crates and the raw command floor, in one run,
//! on the same local masters.
//!
//! Contenders: quorlock; rslock 0.10 (async); redlock 2.0 (blocking, driven from blocking threads);
//! and the floor, the same `SET key token NX PX ttl` and `DEL` sent concurrently to all N masters
//! with no lock logic. Rows:
//! 1. uncontended acquire+release latency, p50/p99, at N = 1, 3, 5 (samples interleaved, each round
//!    in a shuffled order);
//! 2. the same at N = 5 with one and with two masters SIGSTOPped (peers get a bounded number of
//!    samples, each bounded in time: they may take seconds, or hang);
//! 3. throughput: 256 tasks on distinct keys for a fixed time; acquisitions/s, and CPU time per
//!    acquisition of this process (`getrusage`) and of the masters (`/proc/PID/stat`), from which
//!    it estimates the ceiling of any client that releases by a compare-and-delete script;
//! 4. contended hand-off on one key with 16 waiters, each library with its own retry loop: time from
//!    the start of a release to the next acquisition;
//! 5. memory per held lock: RSS growth over 10,000 held locks, each extended once, measured in a
//!    fresh child process per library.
//!
//! `cargo bench --bench peers [-- --quick] [-- --json] [-- --rows 1,3]`

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{ratio, show, Args, Floor, FloorRelease, Json, SampleOrder, Stats, TTL};
use quorlock::config::DEFAULT_NODE_TIMEOUT;
use quorlock::Quorlock;
use quorlock_chaos::Cluster;

const USAGE: &str = "peers benchmark: cargo bench --bench peers -- [--quick] [--json] [--samples N] \
                     [--seconds S] [--rows 1,2,3,4,5] [--only floor,script-floor,quorlock,rslock,redlock (row 3)]";
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
    /// The floor releasing with quorlock's compare-and-delete script by SHA1 (row 3 only). Last:
    /// the other rows index arrays by the first four.
    ScriptFloor,
}

impl Lib {
    const ALL: [Lib; 4] = [Lib::Floor, Lib::Quorlock, Lib::Rslock, Lib::Redlock];
    const LOCKS: [Lib; 3] = [Lib::Quorlock, Lib::Rslock, Lib::Redlock];
    /// Row 3 also measures the script floor, which tells the wire format's cost from the client's.
    const THROUGHPUT: [Lib; 5] = [
        Lib::Floor,
        Lib::ScriptFloor,
        Lib::Quorlock,
        Lib::Rslock,
        Lib::Redlock,
    ];

    fn name(self) -> &'static str {
        match self {
            Lib::Floor => "floor",
            Lib::ScriptFloor => "script-floor",
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
    if let Some(code) = memory_child() {
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
        json = json.arr("row3_throughput", row3(args).await);
    }
    if args.row(4) {
        json = json.arr("row4_handoff", row4(args, uncontended5).await);
    }
    if args.row(5) {
        json = json.arr("row5_memory", row5(args).await);
    }
    Report { json }
}

/// Row 1: uncontended latency at N = 1, 3, 5. Returns the JSON cells and quorlock's N = 5 p50.
async fn row1(args: &Args) -> (Vec<Json>, Option<[Duration; 4]>) {
    let samples = args.samples(1000, 100);
    let mut cells = Vec::new();
    let mut rows = Vec::new();
    let mut at5 = None;
    for n in [1, 3, 5] {
        let cluster = common::masters(n).await;
        let clients = Clients::new(&cluster).await;
        let key = "bench:peers:latency";
        eprintln!("row 1, N = {n}: {samples} samples per library, interleaved");
        for _ in 0..20 {
            for lib in Lib::ALL {
                let _ = clients.once(lib, key).await;
            }
        }
        let mut taken: [Vec<Duration>; 4] = Default::default();
        let mut failed = [0usize; 4];
        let mut order = SampleOrder::new();
        for _ in 0..samples {
            for which in order.next::<4>() {
                match clients.once(Lib::ALL[which], key).await {
                    Ok(d) => taken[which].push(d),
                    Err(e) => {
                        if failed[which] == 0 {
                            eprintln!("  {} sample failed: {e}", Lib::ALL[which].name());
                        }
                        failed[which] += 1;
                    }
                }
            }
        }
        let stats: Vec<Stats> = taken.iter().map(|t| Stats::of(t)).collect();
        let floor = stats[0];
        let mut cell = Json::object().num("masters", n as f64);
        let mut row = vec![n.to_string()];
        for (i, lib) in Lib::ALL.iter().enumerate() {
            let s = stats[i];
            cell = cell.obj(
                lib.name(),
                s.json()
                    .num("failures", failed[i] as f64)
                    .num("p50_vs_floor", ratio(s.p50, floor.p50))
                    .num("p99_vs_floor", ratio(s.p99, floor.p99)),
            );
            row.push(if *lib == Lib::Floor {
                format!("{} / {}", show(s.p50), show(s.p99))
            } else {
                format!(
                    "{} / {} ({:.2}×)",
                    show(s.p50),
                    show(s.p99),
                    ratio(s.p50, floor.p50)
                )
            });
        }
        if n == 5 {
            at5 = Some([stats[0].p50, stats[1].p50, stats[2].p50, stats[3].p50]);
        }
        cells.push(cell);
        rows.push(row);
    }
    if !args.json {
        common::table(
            "Row 1: uncontended acquire+release, p50 / p99 (p50 vs floor)",
            &["N", "floor", "quorlock", "rslock 0.10", "redlock 2.0"],
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

/// Passes per library in row 3, alternating between libraries; the median pass is reported, and
/// the ratios between libraries are also taken pass by pass (see [`paired`]).
const THROUGHPUT_PASSES: usize = 5;

/// Row 3: 256 tasks on distinct keys for a fixed time, per library. Each library runs
/// [`THROUGHPUT_PASSES`] passes, alternating with the others so that a slow spell of the machine
/// hits them alike, and the pass with the median rate is reported.
async fn row3(args: &Args) -> Vec<Json> {
    let phase = args.seconds(5.0, 1.0);
    let passes = if args.quick { 1 } else { THROUGHPUT_PASSES };
    let n = 5;
    let cluster = common::masters(n).await;
    let clients = Clients::new(&cluster).await;
    let libs: Vec<Lib> = Lib::THROUGHPUT
        .into_iter()
        .filter(|l| args.lib(l.name()))
        .collect();
    // Every master's, or none (then the masters' CPU is not reported).
    let pids: Vec<u32> = (0..n)
        .map(|i| cluster.pid(i))
        .collect::<Option<_>>()
        .unwrap_or_default();
    let mut passes_of: Vec<Vec<Pass>> = vec![Vec::new(); libs.len()];
    for pass in 0..passes {
        for (i, &lib) in libs.iter().enumerate() {
            eprintln!(
                "row 3, N = {n}, pass {}/{passes}: {} with {TASKS} tasks for {phase:?}",
                pass + 1,
                lib.name()
            );
            passes_of[i].push(throughput_pass(&clients, &pids, lib, phase).await);
        }
    }
    // Pass by pass, in the order they ran: neighbouring passes share the machine's state.
    let rates_of = |l: Lib| -> Vec<f64> {
        libs.iter()
            .position(|x| *x == l)
            .map(|i| passes_of[i].iter().map(|p| p.rate).collect())
            .unwrap_or_default()
    };
    let vs_rslock = paired(&rates_of(Lib::Quorlock), &rates_of(Lib::Rslock));
    let vs_script = paired(&rates_of(Lib::Quorlock), &rates_of(Lib::ScriptFloor));
    // Each library's median pass by rate.
    let results: Vec<(Lib, Pass)> = libs
        .iter()
        .zip(passes_of)
        .map(|(&lib, mut runs)| {
            runs.sort_by(|a, b| a.rate.total_cmp(&b.rate));
            (lib, runs[runs.len() / 2])
        })
        .collect();
    let result_of = |l: Lib| results.iter().find(|r| r.0 == l).map(|r| r.1);
    let floor = result_of(Lib::Floor);
    let floor_rate = floor.map_or(f64::NAN, |f| f.rate);
    let floor_cpu = floor.map_or(Duration::ZERO, |f| f.cpu);
    let ceiling = script_ceiling(floor, result_of(Lib::ScriptFloor));
    let mut cells = vec![Json::object()
        .str("paired_ratios", "pass by pass")
        .num("quorlock_vs_rslock_median", vs_rslock.0)
        .num("quorlock_vs_rslock_min", vs_rslock.1)
        .num("quorlock_vs_rslock_max", vs_rslock.2)
        .num("quorlock_vs_script_floor_median", vs_script.0)
        .num("quorlock_vs_script_floor_min", vs_script.1)
        .num("quorlock_vs_script_floor_max", vs_script.2)
        .num("script_release_ceiling_vs_floor", ceiling.unwrap_or(f64::NAN))];
    let mut rows = Vec::new();
    for (lib, pass) in &results {
        let masters_us = pass.masters_cpu.map_or(f64::NAN, common::micros);
        let busy = pass
            .masters_cpu
            .map_or(f64::NAN, |m| pass.rate * (pass.cpu + m).as_secs_f64());
        cells.push(
            Json::object()
                .str("library", lib.name())
                .num("masters", n as f64)
                .num("tasks", TASKS as f64)
                .num("seconds", phase.as_secs_f64())
                .num("passes", passes as f64)
                .num("acquisitions_per_s", pass.rate)
                .num("vs_floor", pass.rate / floor_rate)
                .num("cpu_us_per_acquisition", common::micros(pass.cpu))
                .num("cpu_vs_floor", ratio(pass.cpu, floor_cpu))
                .num("masters_cpu_us_per_acquisition", masters_us)
                .num("cores_busy", busy)
                .num("failed_attempts", pass.failed as f64),
        );
        rows.push(vec![
            lib.name().to_owned(),
            format!("{:.0}", pass.rate),
            format!("{:.2}×", pass.rate / floor_rate),
            format!("{:.1} µs", common::micros(pass.cpu)),
            format!("{:.2}×", ratio(pass.cpu, floor_cpu)),
            format!("{masters_us:.1} µs"),
            format!("{busy:.2}"),
            pass.failed.to_string(),
        ]);
    }
    if !args.json {
        // Only the comparisons whose libraries both ran (`--only` may leave some out).
        let compared: Vec<String> = [("rslock", Lib::Rslock, vs_rslock), ("script floor", Lib::ScriptFloor, vs_script)]
            .into_iter()
            .filter_map(|(name, other, (median, min, max))| {
                let ratio = result_of(Lib::Quorlock)?.rate / result_of(other)?.rate;
                Some(format!(
                    "quorlock / {name} = {ratio:.2}×, pass by pass median {median:.2}× (range {min:.2}-{max:.2}×)"
                ))
            })
            .collect();
        let compared = if compared.is_empty() {
            String::new()
        } else {
            format!(" ({})", compared.join("; "))
        };
        common::table(
            &format!(
                "Row 3: throughput, N = {n}, {TASKS} tasks on distinct keys, median of {passes} \
                 passes of {phase:?}{compared}"
            ),
            &[
                "library",
                "acquisitions/s",
                "vs floor",
                "CPU per acquisition",
                "CPU vs floor",
                "masters' CPU per acquisition",
                "cores busy",
                "failed attempts",
            ],
            &rows,
        );
        if let Some((ceiling, cores)) = ceiling.zip(common::cores()) {
            println!(
                "Ceiling for any client that releases by the compare-and-delete script: {ceiling:.2}× the \
                 floor (all {cores} cores busy, the masters' CPU per acquisition of the script floor, the \
                 client's of the floor).\n"
            );
        }
    }
    cells
}

/// The most a client releasing by quorlock's compare-and-delete script could reach, as a ratio to
/// the floor's throughput, when CPU is what bounds it (masters and client share the cores): every
/// core busy, the masters spending on each acquisition what they spent for the script floor, and
/// the client no more than the floor's. `None` unless both passes ran, the masters' CPU was read and
/// the number of cores is known.
fn script_ceiling(floor: Option<Pass>, script: Option<Pass>) -> Option<f64> {
    let (floor, script) = (floor?, script?);
    let per_acquisition = floor.cpu + script.masters_cpu?;
    let cores = common::cores()?;
    (!per_acquisition.is_zero()).then(|| cores as f64 / per_acquisition.as_secs_f64() / floor.rate)
}

/// The ratios `a[i] / b[i]` of passes run side by side: their median, minimum and maximum (NaN
/// when either library did not run).
fn paired(a: &[f64], b: &[f64]) -> (f64, f64, f64) {
    let mut ratios: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
    if ratios.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    ratios.sort_by(f64::total_cmp);
    (ratios[ratios.len() / 2], ratios[0], ratios[ratios.len() - 1])
}

/// One pass of row 3 for `lib`: acquisitions per second, the CPU time per acquisition of this
/// process and of the masters (pids `masters`), and failed attempts.
async fn throughput_pass(clients: &Clients, masters: &[u32], lib: Lib, phase: Duration) -> Pass {
    let done = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = common::cpu_time();
    let masters_cpu0 = common::processes_cpu_time(masters);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (done, failed, stop) = (done.clone(), failed.clone(), stop.clone());
        let key = format!("bench:peers:tput:{}:{t}", lib.name());
        let clients = clients.clone();
        if lib == Lib::Redlock {
            tasks.push(tokio::task::spawn_blocking(move || {
                while !stop.load(Ordering::Relaxed) {
                    match clients.redlock.lock(key.as_bytes(), TTL_MS) {
                        Ok(Some(lock)) => {
                            clients.redlock.unlock(&lock);
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        } else {
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    // Each library as a caller would use it: quorlock's `acquire` backs off
                    // between failed rounds (rslock's `lock` retries on its own).
                    let result = match lib {
                        Lib::Quorlock => match clients.quorlock.acquire(&key, TTL).await {
                            Ok(guard) => guard.release().await.map(drop).map_err(|e| e.to_string()),
                            Err(e) => Err(e.to_string()),
                        },
                        _ => clients.once(lib, &key).await.map(drop),
                    };
                    match result {
                        Ok(_) => done.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }));
        }
    }
    tokio::time::sleep(phase).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = t0.elapsed();
    let done_at_stop = done.load(Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    let cpu = common::cpu_time().saturating_sub(cpu0);
    let masters_cpu = common::processes_cpu_time(masters)
        .zip(masters_cpu0)
        .map(|(after, before)| after.saturating_sub(before));
    let total = u32::try_from(done.load(Ordering::Relaxed).max(1)).unwrap_or(u32::MAX);
    Pass {
        rate: done_at_stop as f64 / elapsed.as_secs_f64(),
        cpu: cpu / total,
        masters_cpu: masters_cpu.map(|m| m / total),
        failed: failed.load(Ordering::Relaxed),
    }
}

/// What one pass of row 3 measured.
#[derive(Debug, Clone, Copy)]
struct Pass {
    /// Acquisitions per second.
    rate: f64,
    /// This process's CPU time per acquisition.
    cpu: Duration,
    /// The masters' CPU time per acquisition, all masters together (`None` when `/proc` could not
    /// be read).
    masters_cpu: Option<Duration>,
    /// Failed attempts.
    failed: usize,
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

/// Row 5: RSS growth per held lock, each library in a fresh child process.
async fn row5(args: &Args) -> Vec<Json> {
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
fn memory_child() -> Option<i32> {
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
