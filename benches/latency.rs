//! Uncontended acquire+release latency of quorlock against the command floors, in one run, on the
//! server `QUORLOCK_TEST_SERVER` selects (`redis`, the default, `valkey-8.1` or `valkey-9.1`).
//!
//! It starts its own masters (N = 1, 3, 5, 7) and, per N, interleaves samples of quorlock (`acquire`
//! then `release`, as callers use it) with samples of two floors, over one multiplexed connection
//! per master and with no lock logic:
//! - the **early-quorum floor**, the reference: `SET key token NX PX ttl` to all N masters at once,
//!   returning at the q-th reply, then the release quorlock sends on this server (`DELIFEQ` with
//!   its announcement on Valkey 9, the compare-and-delete script elsewhere) to all N, returning at
//!   the q-th reply. No RedLock client can be faster, so the gap above it is quorlock's own work;
//! - the **raw floor**: `SET NX` and a blind `DEL`, each waiting for all N masters.
//!
//! Each round of samples takes the contenders in a shuffled order ([`SampleOrder`]), so that
//! neither a noisy neighbour nor the contender that ran just before favours any side. It then
//! pauses (SIGSTOP) one and then two of five masters and measures quorlock again, against its own
//! healthy figure from the same run.
//!
//! `QUORLOCK_TEST_SERVER=valkey-9.1 cargo bench --bench latency [-- --quick] [-- --json] [-- --samples N]`

mod common;

use std::time::Duration;

use common::{ratio, show, Args, Floor, Json, SampleOrder, Stats};

/// Row 1's target: quorlock's p50 at most this times the early-quorum floor's.
const TARGET_VS_QUORUM: f64 = 1.1;
use quorlock::config::DEFAULT_NODE_TIMEOUT;

const USAGE: &str = "latency benchmark: cargo bench --bench latency -- [--quick] [--json] [--samples N] \
                     [--profile floor|script|quorum|quorlock [--masters N]]";
/// The key each contender locks, one per contender and all of one length (each sample releases
/// it before the next one): the slower masters' share of one contender's release, still in flight
/// when the next contender starts, must not find or leave a key of the same name.
/// This one is quorlock's.
const KEY: &str = "bench:latency:q";
/// The raw floor's (and the script floor's when profiled).
const FLOOR_KEY: &str = "bench:latency:f";
/// The early-quorum floor's.
const QUORUM_KEY: &str = "bench:latency:e";
/// The node timeout of every contender under `--profile`.
const PROFILE_TIMEOUT: Duration = Duration::from_secs(2);
/// Unmeasured rounds per contender before sampling: connections warm, allocator settled.
const WARMUP: usize = 100;

/// The figures of one contender in one cell.
#[derive(Debug, Default, Clone, Copy)]
struct Phases {
    total: Stats,
    acquire: Stats,
    release: Stats,
    failures: usize,
}

impl Phases {
    fn of(samples: &[(Duration, Duration)], failures: usize) -> Phases {
        let total: Vec<Duration> = samples.iter().map(|(a, r)| *a + *r).collect();
        let acquire: Vec<Duration> = samples.iter().map(|(a, _)| *a).collect();
        let release: Vec<Duration> = samples.iter().map(|(_, r)| *r).collect();
        Phases {
            total: Stats::of(&total),
            acquire: Stats::of(&acquire),
            release: Stats::of(&release),
            failures,
        }
    }

    fn json(&self) -> Json {
        Json::object()
            .obj("acquire_release", self.total.json())
            .obj("acquire", self.acquire.json())
            .obj("release", self.release.json())
            .num("failures", self.failures as f64)
    }
}

/// One row of the report.
struct Cell {
    masters: usize,
    paused: usize,
    quorlock: Phases,
    floor: Option<Phases>,
    /// The early-quorum floor: quorlock's commands, each phase returning at the q-th reply.
    quorum_floor: Option<Phases>,
}

fn main() {
    let args = Args::parse(USAGE);
    let runtime = common::runtime();
    if let Some(what) = profile_target() {
        runtime.block_on(profile(&what, args.samples(2000, 200), profile_masters()));
        return;
    }
    let cells = runtime.block_on(run(&args));
    report(&args, &cells);
}

/// `--profile floor|script|quorum|quorlock`: only that contender, for a profiler to count.
fn profile_target() -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--profile")?;
    args.get(at + 1).cloned()
}

/// `--masters N` with `--profile`: how many masters the profiled contender uses (default 5).
fn profile_masters() -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == "--masters")
        .and_then(|at| args.get(at + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(5)
}

/// Runs `iterations` sequential acquire+release cycles of one contender on 5 masters, and nothing
/// else, so that an instruction-counting profiler (callgrind) sees the client path alone. Run it
/// twice with different counts: the difference divided by the difference in iterations is the
/// cost of one cycle, free of start-up.
async fn profile(what: &str, iterations: usize, masters: usize) {
    let cluster = common::masters(masters).await;
    // Under a profiler every request is many times slower: a node timeout that never fires keeps
    // failed samples (and their retries) out of the count.
    let locks = common::quorlock_with(&cluster, PROFILE_TIMEOUT).await;
    let floor = Floor::connect(&cluster, PROFILE_TIMEOUT).await;
    let mut failed = 0;
    let (cpu0, t0) = (common::cpu_time(), std::time::Instant::now());
    for _ in 0..iterations {
        let result = match what {
            "floor" => floor.once(FLOOR_KEY).await,
            "script" => floor.once_script(FLOOR_KEY).await,
            "quorum" => floor.once_quorum(QUORUM_KEY).await,
            _ => common::quorlock_once(&locks, KEY).await,
        };
        failed += usize::from(result.is_err());
    }
    let per = |d: Duration| show(d / u32::try_from(iterations.max(1)).unwrap_or(u32::MAX));
    eprintln!(
        "{what}: {iterations} cycles, {failed} failed; per cycle {} wall, {} CPU of this process (all threads)",
        per(t0.elapsed()),
        per(common::cpu_time() - cpu0)
    );
}

async fn run(args: &Args) -> Vec<Cell> {
    let samples = args.samples(2000, 200);
    let paused_samples = args.samples(1000, 100);
    let mut cells = Vec::new();
    for n in [1, 3, 5, 7] {
        let mut cluster = common::masters(n).await;
        let locks = common::quorlock(&cluster).await;
        let floor = Floor::connect(&cluster, DEFAULT_NODE_TIMEOUT).await;
        eprintln!(
            "N = {n} ({}): {samples} samples each of the floor, the early-quorum floor (release: {}) and \
             quorlock, interleaved",
            common::server().name(),
            floor.quorlock_release()
        );
        for _ in 0..WARMUP {
            let _ = floor.once(FLOOR_KEY).await;
            let _ = floor.once_quorum(QUORUM_KEY).await;
            let _ = common::quorlock_once(&locks, KEY).await;
        }
        let mut taken: [Vec<(Duration, Duration)>; 3] = Default::default();
        let mut failed = [0usize; 3];
        let mut order = SampleOrder::new();
        for _ in 0..samples {
            for which in order.next::<3>() {
                let result = match which {
                    0 => floor.once(FLOOR_KEY).await,
                    1 => floor.once_quorum(QUORUM_KEY).await,
                    _ => common::quorlock_once(&locks, KEY).await,
                };
                record(result, &mut taken[which], &mut failed[which]);
            }
        }
        cells.push(Cell {
            masters: n,
            paused: 0,
            quorlock: Phases::of(&taken[2], failed[2]),
            floor: Some(Phases::of(&taken[0], failed[0])),
            quorum_floor: Some(Phases::of(&taken[1], failed[1])),
        });
        if n == 5 {
            // Stop the last masters one at a time, with quorlock's connections already open.
            for paused in 1..=2 {
                let index = n - paused;
                if let Err(e) = cluster.pause(index) {
                    eprintln!("cannot SIGSTOP master {index}: {e}");
                    std::process::exit(1);
                }
                eprintln!("N = 5 with {paused} SIGSTOPped: {paused_samples} samples of quorlock");
                let (mut q, mut q_failed) = (Vec::with_capacity(paused_samples), 0);
                for _ in 0..paused_samples {
                    record(common::quorlock_once(&locks, KEY).await, &mut q, &mut q_failed);
                }
                cells.push(Cell {
                    masters: n,
                    paused,
                    quorlock: Phases::of(&q, q_failed),
                    floor: None,
                    quorum_floor: None,
                });
            }
            for index in 3..5 {
                let _ = cluster.resume(index);
            }
        }
    }
    cells
}

fn record(
    result: Result<(Duration, Duration), String>,
    samples: &mut Vec<(Duration, Duration)>,
    failed: &mut usize,
) {
    match result {
        Ok(sample) => samples.push(sample),
        Err(e) => {
            if *failed == 0 {
                eprintln!("a sample failed (counted, not timed): {e}");
            }
            *failed += 1;
        }
    }
}

/// quorlock's healthy N = 5 cell, the reference of the paused cells.
fn healthy5(cells: &[Cell]) -> Option<&Cell> {
    cells.iter().find(|c| c.masters == 5 && c.paused == 0)
}

fn report(args: &Args, cells: &[Cell]) {
    let healthy = healthy5(cells).map(|c| c.quorlock.total);
    let server = common::server();
    if args.json {
        let rows = cells
            .iter()
            .map(|c| {
                let mut row = Json::object()
                    .num("masters", c.masters as f64)
                    .num("paused", c.paused as f64)
                    .obj("quorlock", c.quorlock.json());
                if let Some(f) = &c.floor {
                    row = row
                        .obj("floor", f.json())
                        .num("p50_vs_floor", ratio(c.quorlock.total.p50, f.total.p50))
                        .num("p99_vs_floor", ratio(c.quorlock.total.p99, f.total.p99));
                }
                if let Some(f) = &c.quorum_floor {
                    let vs = ratio(c.quorlock.total.p50, f.total.p50);
                    row = row
                        .obj("quorum_floor", f.json())
                        .num("p50_vs_quorum_floor", vs)
                        .num("p99_vs_quorum_floor", ratio(c.quorlock.total.p99, f.total.p99))
                        .bool("target_met", vs <= TARGET_VS_QUORUM);
                }
                if let (Some(h), true) = (healthy, c.paused > 0) {
                    row = row.num("p50_vs_healthy", ratio(c.quorlock.total.p50, h.p50));
                }
                row
            })
            .collect();
        let doc = Json::object()
            .str("bench", "latency")
            .str("server", server.name())
            .str("mode", if args.quick { "quick" } else { "full" })
            .num("ttl_ms", common::TTL.as_millis() as f64)
            .num("node_timeout_ms", DEFAULT_NODE_TIMEOUT.as_millis() as f64)
            .num("target_p50_vs_quorum_floor", TARGET_VS_QUORUM)
            .obj("machine", common::machine())
            .arr("cells", rows);
        println!("{}", doc.finish());
        return;
    }
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|c| {
            let q = &c.quorlock;
            let (quorum, vs) = match (&c.quorum_floor, healthy) {
                (Some(f), _) => {
                    let vs = ratio(q.total.p50, f.total.p50);
                    (
                        format!("{} / {}", show(f.total.p50), show(f.total.p99)),
                        format!(
                            "**{vs:.2}×** (p99 {:.2}×) {}",
                            ratio(q.total.p99, f.total.p99),
                            if vs <= TARGET_VS_QUORUM { "met" } else { "not met" }
                        ),
                    )
                }
                (None, Some(h)) => ("-".into(), format!("{:.2}× healthy", ratio(q.total.p50, h.p50))),
                (None, None) => ("-".into(), "-".into()),
            };
            let phases = match &c.quorum_floor {
                Some(f) => format!(
                    "{} / {}  ·  {} / {}",
                    show(q.acquire.p50),
                    show(f.acquire.p50),
                    show(q.release.p50),
                    show(f.release.p50)
                ),
                None => format!("{} / -  ·  {} / -", show(q.acquire.p50), show(q.release.p50)),
            };
            let raw = match &c.floor {
                Some(f) => format!("{} ({:.2}×)", show(f.total.p50), ratio(q.total.p50, f.total.p50)),
                None => "-".into(),
            };
            vec![
                c.masters.to_string(),
                c.paused.to_string(),
                quorum,
                format!("{} / {}", show(q.total.p50), show(q.total.p99)),
                vs,
                raw,
                phases,
                format!(
                    "{}",
                    q.failures + c.floor.map_or(0, |f| f.failures) + c.quorum_floor.map_or(0, |f| f.failures)
                ),
            ]
        })
        .collect();
    common::table(
        &format!(
            "acquire+release latency on {} ({} mode, TTL {:?}, node timeout {:?}; target: quorlock p50 ≤ \
             {TARGET_VS_QUORUM}× the early-quorum floor's)",
            server.name(),
            if args.quick { "quick" } else { "full" },
            common::TTL,
            DEFAULT_NODE_TIMEOUT
        ),
        &[
            "N",
            "paused",
            "early-quorum floor p50 / p99",
            "quorlock p50 / p99",
            "quorlock p50 vs early-quorum floor",
            "raw floor p50 (q ×)",
            "acquire p50 q/eq-floor · release p50 q/eq-floor",
            "failed",
        ],
        &rows,
    );
}
