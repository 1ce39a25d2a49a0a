//! The `probe` subcommand: one of an operation's two probe clients
//! (`quorlock_chaos::compose::operations::probe`), run inside a container of its own on the
//! networks of the masters its host reaches. It acts on the run's timeline (the run's start as a
//! wall-clock instant) and writes its lock operations, its notes and its totals to stdout as JSON
//! lines, as the `client` containers do.

use std::process::ExitCode;
use std::time::Duration;

use quorlock_chaos::compose::operations::probe::{self, ProbeOptions, Role};
use quorlock_chaos::compose::wire::{ClientLine, WireStats};
use quorlock_chaos::RunClock;

use crate::client::{origin, print_lines};
use crate::scenarios::UnsafeArg;

/// Which probe, on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RoleArg {
    /// Built before the operation; holds through it.
    First,
    /// Built after it; tries while the first holds.
    Second,
}

/// Arguments of `probe`.
#[derive(Debug, clap::Args)]
pub struct ProbeArgs {
    /// Which probe.
    #[arg(long, value_enum)]
    role: RoleArg,
    /// Every master's URL, comma-separated, in master order.
    #[arg(long, value_delimiter = ',', required = true)]
    nodes: Vec<String>,
    /// The witness's URL (the probes' board is there too).
    #[arg(long)]
    witness: String,
    /// Its client number in the run.
    #[arg(long)]
    client: usize,
    /// Its lock's TTL.
    #[arg(long, value_parser = crate::duration::parse)]
    ttl: Duration,
    /// How long its first attempt keeps trying.
    #[arg(long, value_parser = crate::duration::parse)]
    first_try: Duration,
    /// Its client's per-master timeout.
    #[arg(long, value_parser = crate::duration::parse)]
    node_timeout: Duration,
    /// The masters its host reaches (indexes, comma-separated), waited for until checked.
    #[arg(long, value_delimiter = ',', required = true)]
    reaches: Vec<usize>,
    /// The lock keys' prefix.
    #[arg(long, default_value = "quorlock-chaos:")]
    key_prefix: String,
    /// The run's start, in milliseconds since the Unix epoch.
    #[arg(long)]
    start_ms: u64,
    /// The operation's control whose rule its client switches off.
    #[arg(long = "unsafe", value_enum)]
    unsafe_mode: Option<UnsafeArg>,
}

/// Runs the probe; exit 0 with every line written, 2 when it could not run, 64 on bad arguments.
pub async fn run(args: ProbeArgs) -> ExitCode {
    let control = match args.unsafe_mode.map(UnsafeArg::control) {
        None => None,
        Some(Some(control)) => Some(control),
        Some(None) => {
            eprintln!("error: a probe runs an operation's control, not the clients' unsafe modes");
            return ExitCode::from(64);
        }
    };
    let opts = ProbeOptions {
        role: match args.role {
            RoleArg::First => Role::First,
            RoleArg::Second => Role::Second,
        },
        nodes: args.nodes,
        witness: args.witness,
        client: args.client,
        ttl: args.ttl,
        first_try: args.first_try,
        node_timeout: args.node_timeout,
        reaches: args.reaches,
        key_prefix: args.key_prefix,
        control,
    };
    let clock = RunClock::starting_at(origin(args.start_ms).await);
    let out = match probe::run(&opts, clock).await {
        Ok(out) => out,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let lines = out
        .records
        .into_iter()
        .map(ClientLine::Record)
        .chain(out.notes.into_iter().map(ClientLine::Note))
        .chain(std::iter::once(ClientLine::Stats(WireStats::from(out.stats))));
    print_lines(lines)
}
