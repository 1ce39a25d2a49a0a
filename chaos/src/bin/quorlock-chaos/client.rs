//! The `client` subcommand: one group's slice of a run's workload, run inside a container of
//! its own so that a partition (`docker network disconnect`) splits real hosts. It runs the
//! same clients as the in-process workload against the masters and the witness it is given,
//! on the run's timeline (the run's start as a wall-clock instant), and writes every lock
//! operation, then its totals, to stdout as JSON lines for the harness to read back.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use quorlock_chaos::compose::wire::{ClientLine, WireStats};
use quorlock_chaos::workload::{self, ClientMode, WorkloadOptions};
use quorlock_chaos::{ClientPauses, History, LockRecord, RunClock};

use crate::scenarios::UnsafeArg;

/// Arguments of `client`.
#[derive(Debug, clap::Args)]
pub struct ClientArgs {
    /// Master URLs, comma-separated, in master order.
    #[arg(long, value_delimiter = ',', required = true)]
    nodes: Vec<String>,
    /// The witness's URL.
    #[arg(long)]
    witness: String,
    /// This group's index; its clients are the run's clients `group`, `group + groups`, ...
    #[arg(long, default_value_t = 0)]
    group: usize,
    /// Number of groups in the run.
    #[arg(long, default_value_t = 1)]
    groups: usize,
    /// Number of clients in the whole run.
    #[arg(long)]
    clients: usize,
    /// Number of resources.
    #[arg(long, default_value_t = 4)]
    resources: usize,
    /// Lock TTL.
    #[arg(long, default_value = "2s", value_parser = crate::duration::parse)]
    ttl: Duration,
    /// The run's seed.
    #[arg(long)]
    seed: u64,
    /// How long clients run, from the run's start.
    #[arg(long, value_parser = crate::duration::parse)]
    duration: Duration,
    /// The run's start, in milliseconds since the Unix epoch.
    #[arg(long, required_unless_present = "start_file", conflicts_with = "start_file")]
    start_ms: Option<u64>,
    /// A file that will hold the run's start (milliseconds since the Unix epoch); the client
    /// waits for it to appear.
    #[arg(long, value_name = "PATH")]
    start_file: Option<std::path::PathBuf>,
    /// Negative control: unsafe clients.
    #[arg(long = "unsafe", value_enum)]
    unsafe_mode: Option<UnsafeArg>,
    /// Out of model, for an operation's control: every client here runs without this mechanism
    /// of the library (replaced-master, durability-over-time).
    #[arg(long, value_parser = quorlock_chaos::compose::operations::control::mechanism_named)]
    without: Option<quorlock::config::Mechanism>,
}

/// Runs the slice; exit 0 with every line written, 2 when the workload could not run.
pub async fn run(args: ClientArgs) -> ExitCode {
    if args.groups == 0 || args.group >= args.groups {
        eprintln!(
            "error: --group {} must be below --groups {}",
            args.group, args.groups
        );
        return ExitCode::from(64);
    }
    // This group's clients: every `groups`-th of the run's, starting at `group`.
    let mine = (args.group..args.clients).step_by(args.groups).count();
    if mine == 0 {
        eprintln!(
            "error: group {} of {} has no clients among {}",
            args.group, args.groups, args.clients
        );
        return ExitCode::from(64);
    }
    let start_ms = match (args.start_ms, &args.start_file) {
        (Some(ms), _) => ms,
        (None, Some(path)) => match wait_for_start(path).await {
            Ok(ms) => ms,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        },
        (None, None) => {
            eprintln!("error: --start-ms or --start-file is required");
            return ExitCode::from(64);
        }
    };
    let origin = origin(start_ms).await;
    let history = History::new(RunClock::starting_at(origin));
    let mode = match args.unsafe_mode.map(UnsafeArg::client_mode) {
        None => ClientMode::Safe,
        Some(Some(mode)) => mode,
        Some(None) => {
            eprintln!("error: the operations' controls run in their probes, not in background clients");
            return ExitCode::from(64);
        }
    };
    if mode == ClientMode::MajorityCounting {
        eprintln!("error: --unsafe majority-counting runs the semaphore, which container clients do not run");
        return ExitCode::from(64);
    }
    let seed = args.seed ^ (args.group as u64).wrapping_mul(0xA076_1D64_78BD_642F);
    let opts = WorkloadOptions {
        resources: args.resources,
        ..WorkloadOptions::new(mine, args.ttl, seed)
    }
    .with_mode(mode);
    // This group's clients among the run's, and the run's opening round (played across every
    // group's container, on the witness).
    let opts = WorkloadOptions {
        slice: (args.group, args.groups),
        opening_players: workload::opening_players(mode, args.clients),
        without: args.without,
        ..opts
    };
    let stats = workload::run(
        &opts,
        std::slice::from_ref(&args.nodes),
        &args.witness,
        &history,
        &ClientPauses::new(),
        args.duration,
    )
    .await;
    let stats = match stats {
        Ok(stats) => stats,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let records = history.records();
    // Each record's client, numbered here within this group, is numbered within the whole run.
    let lines = records
        .into_iter()
        .map(|r| {
            ClientLine::Record(LockRecord {
                client: r.client * args.groups + args.group,
                ..r
            })
        })
        .chain(std::iter::once(ClientLine::Stats(WireStats::from(stats))));
    print_lines(lines)
}

/// The run's zero on this process's monotonic clock, from the run's start in milliseconds since
/// the Unix epoch; a container started early waits for it.
pub async fn origin(start_ms: u64) -> Instant {
    let start = UNIX_EPOCH + Duration::from_millis(start_ms);
    match start.duration_since(SystemTime::now()) {
        Ok(ahead) => {
            let origin = Instant::now() + ahead;
            tokio::time::sleep(ahead).await;
            origin
        }
        Err(late) => Instant::now()
            .checked_sub(late.duration())
            .unwrap_or_else(Instant::now),
    }
}

/// Writes `lines` to stdout, one JSON object each, for the harness to read back: exit 0 with
/// every line written, 2 otherwise.
pub fn print_lines(lines: impl IntoIterator<Item = ClientLine>) -> ExitCode {
    let mut out = std::io::stdout().lock();
    for line in lines {
        let text = match serde_json::to_string(&line) {
            Ok(text) => text,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(2);
            }
        };
        if writeln!(out, "{text}").is_err() {
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}

/// How long a client waits for its start file.
const START_FILE_WAIT: Duration = Duration::from_secs(120);

/// Polls `path` until it holds the start, then returns it.
async fn wait_for_start(path: &std::path::Path) -> Result<u64, String> {
    let deadline = Instant::now() + START_FILE_WAIT;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return text.trim().parse().map_err(|e| {
                format!(
                    "{} holds {text:?}, not a start in milliseconds: {e}",
                    path.display()
                )
            });
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{} did not appear within {START_FILE_WAIT:?}",
                path.display()
            ));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
