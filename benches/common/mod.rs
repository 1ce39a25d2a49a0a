//! What the benchmarks share: command-line options, local masters of the server
//! `QUORLOCK_TEST_SERVER` selects, the command floors (raw, script, native, early-quorum), the
//! masters' command statistics, percentiles, process CPU time and RSS, and a small JSON writer.
//!
//! Every figure a benchmark reports is meant to be read as a ratio against another figure from the
//! same run (the floor, or quorlock healthy), because absolute times on a shared machine move.
#![allow(dead_code)]

use std::fmt::Write as _;
use std::time::{Duration, Instant};

mod commandstats;
mod floor;

use quorlock::{Guard, Quorlock};
use quorlock_chaos::{Cluster, ClusterOptions};
use rand::Rng;

// Each benchmark uses some of these.
#[allow(unused_imports)]
pub use commandstats::CommandStats;
#[allow(unused_imports)]
pub use floor::{server, Floor, FloorRelease, Wait};

/// quorlock's compare-and-delete script, byte for byte.
pub const RELEASE_SCRIPT: &str = concat!(
    include_str!("../../src/scripts/token_common.lua"),
    include_str!("../../src/scripts/release.lua")
);

/// Requests queued per connection before senders wait, as quorlock's `node.rs` sets it.
pub const PIPELINE_BUFFER: usize = 1024;

/// The lock TTL every benchmark uses: long enough that no lock expires mid-sample.
pub const TTL: Duration = Duration::from_secs(10);

/// Command-line options shared by the benchmarks.
#[derive(Debug, Clone)]
pub struct Args {
    /// A short smoke run: few samples, short phases.
    pub quick: bool,
    /// Print one JSON document instead of tables.
    pub json: bool,
    /// Samples per latency cell (overrides the mode's default).
    pub samples: Option<usize>,
    /// Seconds per throughput phase (overrides the mode's default).
    pub seconds: Option<f64>,
    /// Rows to run (all when empty).
    pub rows: Vec<u32>,
    /// Libraries to run in the throughput row (all when empty), for profiling one at a time.
    pub only: Vec<String>,
}

impl Args {
    /// Parses the process arguments. `cargo bench` adds `--bench`, which is accepted and ignored.
    pub fn parse(usage: &str) -> Args {
        let mut args = Args {
            quick: false,
            json: false,
            samples: None,
            seconds: None,
            rows: Vec::new(),
            only: Vec::new(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(arg) = it.next() {
            match arg.as_str() {
                "--quick" => args.quick = true,
                "--json" => args.json = true,
                "--bench" => {}
                "--samples" => args.samples = Some(number(&mut it, "--samples")),
                "--seconds" => args.seconds = Some(number(&mut it, "--seconds")),
                "--rows" => {
                    let list: String = it.next().unwrap_or_default();
                    args.rows = list.split(',').map(|r| parse_or_exit(r, "--rows")).collect();
                }
                "--only" => {
                    let list: String = it.next().unwrap_or_default();
                    args.only = list.split(',').map(str::to_owned).collect();
                }
                "-h" | "--help" => {
                    eprintln!("{usage}");
                    std::process::exit(0);
                }
                // libtest-style filters passed through by `cargo bench NAME` are ignored.
                _ => {}
            }
        }
        args
    }

    /// Whether library `name` was selected.
    pub fn lib(&self, name: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == name)
    }

    /// Whether row `row` was selected.
    pub fn row(&self, row: u32) -> bool {
        self.rows.is_empty() || self.rows.contains(&row)
    }

    /// Samples per latency cell: `full` normally, `quick` in quick mode, or the override.
    pub fn samples(&self, full: usize, quick: usize) -> usize {
        self.samples.unwrap_or(if self.quick { quick } else { full })
    }

    /// Length of a timed phase.
    pub fn seconds(&self, full: f64, quick: f64) -> Duration {
        Duration::from_secs_f64(self.seconds.unwrap_or(if self.quick { quick } else { full }))
    }
}

fn number<T: std::str::FromStr>(it: &mut impl Iterator<Item = String>, flag: &str) -> T {
    parse_or_exit(&it.next().unwrap_or_default(), flag)
}

fn parse_or_exit<T: std::str::FromStr>(text: &str, flag: &str) -> T {
    match text.trim().parse() {
        Ok(v) => v,
        Err(_) => {
            eprintln!("{flag}: cannot parse {text:?}");
            std::process::exit(2);
        }
    }
}

/// Starts `n` masters of the server `QUORLOCK_TEST_SERVER` selects (Redis 7.0 when unset), without
/// fsync: the benchmarks measure the client, not the disk.
pub async fn masters(n: usize) -> Cluster {
    Cluster::start_with(ClusterOptions {
        masters: n,
        appendfsync_always: false,
        ..ClusterOptions::default()
    })
    .await
    .unwrap_or_else(|e| {
        eprintln!("cannot start {n} {} masters: {e}", server().name());
        std::process::exit(1);
    })
}

/// quorlock on `cluster` with every setting at its default.
pub async fn quorlock(cluster: &Cluster) -> Quorlock {
    quorlock_with(cluster, quorlock::config::DEFAULT_NODE_TIMEOUT).await
}

/// quorlock on `cluster` with every setting at its default but the node timeout.
pub async fn quorlock_with(cluster: &Cluster, node_timeout: Duration) -> Quorlock {
    Quorlock::builder()
        .nodes(cluster.urls())
        .node_timeout(node_timeout)
        // The benchmark started these masters a moment ago; none of them restarted under a lock,
        // so their votes count at once (the client still verifies each master's identity).
        .restart_grace(std::time::Duration::ZERO)
        .build()
        .await
        .unwrap_or_else(|e| {
            eprintln!("cannot build quorlock: {e}");
            std::process::exit(1);
        })
}

/// One quorlock acquire + release, through `acquire` as callers use it (local queue and retry loop
/// included); returns the two phase times.
pub async fn quorlock_once(locks: &Quorlock, key: &str) -> Result<(Duration, Duration), String> {
    let t0 = Instant::now();
    let guard: Guard = locks.acquire(key, TTL).await.map_err(|e| e.to_string())?;
    let t1 = Instant::now();
    guard.release().await.map_err(|e| e.to_string())?;
    Ok((t1 - t0, t1.elapsed()))
}

/// The order in which interleaved contenders take their next sample: a fresh shuffle per round,
/// from a fixed seed so that runs repeat. A rotation (`(i + k) % K`) would let each contender
/// follow the same other one in most rounds, and whatever that one leaves behind (a worker
/// thread still awake, a connection's task still running) would then always land on it.
pub struct SampleOrder(rand::rngs::StdRng);

impl SampleOrder {
    pub fn new() -> Self {
        use rand::SeedableRng;
        Self(rand::rngs::StdRng::seed_from_u64(0x5eed_0001))
    }

    /// The contenders `0..K` in the order of the next round.
    pub fn next<const K: usize>(&mut self) -> [usize; K] {
        use rand::seq::SliceRandom;
        let mut order: [usize; K] = std::array::from_fn(|k| k);
        order.shuffle(&mut self.0);
        order
    }
}

/// A 128-bit random token as 32 hex digits, like quorlock's.
pub fn token() -> String {
    let mut bytes = [0u8; 16];
    rand::rng().fill_bytes(&mut bytes);
    let mut out = String::with_capacity(32);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Percentiles of a set of samples.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stats {
    /// How many samples.
    pub count: usize,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Mean.
    pub mean: Duration,
}

impl Stats {
    /// Nearest-rank percentiles of `samples`.
    pub fn of(samples: &[Duration]) -> Stats {
        if samples.is_empty() {
            return Stats::default();
        }
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let rank = |p: f64| -> Duration {
            let idx = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
            sorted[idx]
        };
        let total: Duration = sorted.iter().sum();
        Stats {
            count: sorted.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            mean: total / sorted.len() as u32,
        }
    }

    /// The JSON object for these stats, in microseconds.
    pub fn json(&self) -> Json {
        Json::object()
            .num("samples", self.count as f64)
            .num("p50_us", micros(self.p50))
            .num("p99_us", micros(self.p99))
            .num("mean_us", micros(self.mean))
    }
}

/// A duration in microseconds, with sub-microsecond precision.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// A duration for a table cell: µs below 10 ms, ms above.
pub fn show(d: Duration) -> String {
    if d < Duration::from_millis(10) {
        format!("{:.0} µs", micros(d))
    } else {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    }
}

/// `a / b` as a ratio, NaN when `b` is zero.
pub fn ratio(a: Duration, b: Duration) -> f64 {
    if b.is_zero() {
        f64::NAN
    } else {
        a.as_secs_f64() / b.as_secs_f64()
    }
}

/// CPU time (user + system) this process has used so far, from `getrusage(RUSAGE_SELF)`.
pub fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: `usage` points to writable memory the size of `rusage`; getrusage fills it in, and it
    // was zeroed beforehand, so it is initialised even if the call failed.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// The cores this process may run on, when the system says.
pub fn cores() -> Option<usize> {
    std::thread::available_parallelism().ok().map(usize::from)
}

/// CPU time (user + system) that the processes `pids` (the masters) have used so far, from
/// `/proc/PID/stat`, to the kernel's clock tick (10 ms on most kernels); `None` when there are no
/// pids or one cannot be read.
pub fn processes_cpu_time(pids: &[u32]) -> Option<Duration> {
    if pids.is_empty() {
        return None;
    }
    // SAFETY: sysconf only reads a system constant.
    let ticks_per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let ticks_per_s = u64::try_from(ticks_per_s).ok().filter(|t| *t > 0)?;
    let mut ticks = 0u64;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name, in parentheses, may hold spaces: count fields after its last `)`.
        // There, field 0 is the state and fields 11 and 12 are utime and stime.
        let (_, after_name) = stat.rsplit_once(')')?;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        for field in [11, 12] {
            ticks += fields.get(field)?.parse::<u64>().ok()?;
        }
    }
    Some(
        Duration::from_secs(ticks / ticks_per_s)
            + Duration::from_secs_f64((ticks % ticks_per_s) as f64 / ticks_per_s as f64),
    )
}

/// Resident set size of this process in bytes, from `/proc/self/statm`, after handing freed heap
/// pages back to the OS (so that transient garbage does not count as held memory).
pub fn rss_bytes() -> u64 {
    // SAFETY: malloc_trim only releases free memory held by the allocator; it takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap_or(4096)
}

/// The machine, for the report: CPU model, logical CPUs, the masters' server version (redis-server,
/// or the Valkey build `QUORLOCK_TEST_SERVER` selects).
pub fn machine() -> Json {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|m| m.trim().to_owned())
        .unwrap_or_else(|| "unknown".into());
    let cpus = cores().unwrap_or(0);
    let server = quorlock_chaos::redis_server_path().unwrap_or_else(|_| "redis-server".into());
    let redis = std::process::Command::new(server)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    Json::object()
        .str("cpu", &model)
        .num("cpus", cpus as f64)
        .str("redis_server", &redis)
}

/// A tiny JSON value builder: enough for flat reports with named fields.
#[derive(Debug, Clone)]
pub struct Json(String, bool);

impl Json {
    /// An empty object.
    pub fn object() -> Json {
        Json("{".into(), true)
    }

    fn key(mut self, key: &str) -> Json {
        if !self.1 {
            self.0.push(',');
        }
        self.1 = false;
        self.0.push_str(&quote(key));
        self.0.push(':');
        self
    }

    /// Adds a number field (non-finite numbers become `null`).
    pub fn num(self, key: &str, value: f64) -> Json {
        let mut s = self.key(key);
        if value.is_finite() {
            let _ = write!(s.0, "{}", (value * 1000.0).round() / 1000.0);
        } else {
            s.0.push_str("null");
        }
        s
    }

    /// Adds a string field.
    pub fn str(self, key: &str, value: &str) -> Json {
        let mut s = self.key(key);
        s.0.push_str(&quote(value));
        s
    }

    /// Adds a boolean field.
    pub fn bool(self, key: &str, value: bool) -> Json {
        let mut s = self.key(key);
        s.0.push_str(if value { "true" } else { "false" });
        s
    }

    /// Adds a nested object field.
    pub fn obj(self, key: &str, value: Json) -> Json {
        let mut s = self.key(key);
        s.0.push_str(&value.finish());
        s
    }

    /// Adds an array of objects.
    pub fn arr(self, key: &str, values: Vec<Json>) -> Json {
        let mut s = self.key(key);
        s.0.push('[');
        let items: Vec<String> = values.into_iter().map(Json::finish).collect();
        s.0.push_str(&items.join(","));
        s.0.push(']');
        s
    }

    /// The text of the object.
    pub fn finish(mut self) -> String {
        self.0.push('}');
        self.0
    }
}

fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Prints a table with aligned columns to stdout.
pub fn table(title: &str, header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths.get(i).copied().unwrap_or(0)))
            .collect();
        println!("| {} |", padded.join(" | "));
    };
    println!("\n{title}");
    line(header.to_vec());
    println!(
        "|{}|",
        widths
            .iter()
            .map(|w| "-".repeat(w + 2))
            .collect::<Vec<_>>()
            .join("|")
    );
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
}

/// The multi-threaded runtime every benchmark runs on; exits with a message if it cannot start.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("cannot start the runtime: {e}");
            std::process::exit(1);
        })
}
