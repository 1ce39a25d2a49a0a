//! `quorlock-chaos`: the harness's command line.
//!
//! - `list` shows the named fault scenarios and operations; `run --scenario NAME` runs one
//!   against local masters (an operation: against compose services) and reports whether
//!   RedLock's guarantees held.
//! - `client` and `probe` are what the containers of a compose run execute.
//! - `demo` starts 5 local masters, runs contending workers through master failures, and shows the
//!   quorum at work. It lives here rather than in the `quorlock` binary because it needs this
//!   harness, and the harness depends on the lock library: the other way round would be a cycle.
//! - `simulate` runs the real client against simulated masters, networks and clocks, seed after
//!   seed on a paused clock; any failure replays from its seed.
//! - `herd` measures the hand-off on one hot key in that simulation, for W waiting processes (or,
//!   with `--real`, between real `quorlock run` processes on local masters).

mod client;
mod demo;
mod duration;
mod herd;
mod herd_real;
mod probe;
mod progress;
mod report;
mod scenarios;
mod signals;
mod simulate;
mod workers;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tokio::signal::unix::{signal, SignalKind};

use crate::signals::{INTERRUPTED, TERMINATED};

/// Exit code when the demo's checks found a violation.
const CHECKS_FAILED: u8 = 1;
/// Exit code when redis-server is missing (`EX_UNAVAILABLE`).
const MISSING_REDIS: u8 = 69;
/// Exit code when the harness itself failed (`EX_SOFTWARE`).
const HARNESS_FAILED: u8 = 70;

/// Chaos harness for quorlock.
#[derive(Debug, Parser)]
#[command(name = "quorlock-chaos", version, args_override_self = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the fault scenarios
    List,
    /// Run one scenario and report (exit 0 pass, 1 violation, 2 harness failure, 3 inconclusive)
    Run(scenarios::RunArgs),
    /// Run one client group's slice of a run's workload and print its history as JSON lines
    /// (what each client container runs with `run --clients-in-containers`)
    Client(client::ClientArgs),
    /// Run one of an operation's two probe clients and print its history as JSON lines (what
    /// each probe container runs with `run --scenario failover|runtime-downgrade|eviction`)
    Probe(probe::ProbeArgs),
    /// Start 5 local masters, run contending workers, kill 2 then 3 masters, restore them, and
    /// print a summary and an SVG timeline
    Demo {
        /// Where to write the SVG timeline
        #[arg(long, value_name = "PATH", default_value = "quorlock-demo.svg")]
        svg: PathBuf,
        /// Length of each of the 4 phases (at least 500ms)
        #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = duration::parse)]
        phase: Duration,
        /// Number of contending workers (split over 2 resources)
        #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
        workers: u16,
        /// Where the masters run: local redis-server processes, or containers of a compose
        /// project of the demo's own (removed at the end)
        #[arg(long, value_enum, default_value_t = scenarios::BackendArg::Process)]
        backend: scenarios::BackendArg,
        /// Compose file(s) for `--backend compose`, the first the base, each further one layered over it
        #[arg(long, value_name = "FILE", default_value = "chaos/docker/compose.masters.yml")]
        compose_file: Vec<PathBuf>,
    },
    /// Run the real client against simulated masters, network and clocks, seed by seed, and
    /// check every history (exit 0 pass, 1 violation, or, with --control, 1 if none was caught)
    Simulate(simulate::SimulateArgs),
    /// Measure the hand-off on one hot key in the simulation: W waiting processes, plain and fair,
    /// the masters' commands per hand-off and its latency (exit 1 if two holds overlapped)
    Herd(herd::HerdArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    match Cli::parse().command {
        Command::List => scenarios::list(),
        Command::Run(args) => scenarios::run(args).await,
        Command::Client(args) => client::run(args).await,
        Command::Probe(args) => probe::run(args).await,
        Command::Demo {
            svg,
            phase,
            workers,
            backend,
            compose_file,
        } => {
            let masters = match backend {
                scenarios::BackendArg::Process => demo::Masters::Process,
                scenarios::BackendArg::Compose => demo::Masters::Compose(compose_file),
            };
            run_demo(svg, phase, workers, masters).await
        }
        // Each seed builds its own single-threaded runtime, which cannot run inside this one.
        Command::Simulate(args) => tokio::task::spawn_blocking(move || simulate::run(args))
            .await
            .unwrap_or_else(|_| ExitCode::from(HARNESS_FAILED)),
        // Real processes need the masters on this runtime's long-lived threads.
        Command::Herd(args) if args.real.is_some() => match &args.real {
            Some(cli) => herd_real::run(args.waiters(), cli).await,
            None => ExitCode::from(HARNESS_FAILED),
        },
        Command::Herd(args) => tokio::task::spawn_blocking(move || herd::run(args))
            .await
            .unwrap_or_else(|_| ExitCode::from(HARNESS_FAILED)),
    }
}

/// Runs the demo, stopping every master it started on Ctrl-C or SIGTERM.
async fn run_demo(svg: PathBuf, phase: Duration, workers: u16, masters: demo::Masters) -> ExitCode {
    if phase < Duration::from_millis(500) {
        eprintln!("quorlock-chaos: --phase {phase:?} must be at least 500ms");
        return ExitCode::from(64);
    }
    let options = demo::Options {
        svg,
        phase,
        workers: usize::from(workers),
        masters,
    };
    let (mut interrupt, mut terminate) =
        match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
            (Ok(i), Ok(t)) => (i, t),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("quorlock-chaos: cannot catch signals: {e}");
                return ExitCode::from(HARNESS_FAILED);
            }
        };
    // Dropping the demo on a signal drops its cluster, which stops every master it started.
    let outcome = tokio::select! {
        outcome = demo::run(options) => outcome,
        _ = interrupt.recv() => Err(demo::Stop::Interrupted(INTERRUPTED)),
        _ = terminate.recv() => Err(demo::Stop::Interrupted(TERMINATED)),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(CHECKS_FAILED),
        Err(demo::Stop::MissingRedis) => {
            eprintln!("{}", demo::INSTALL_HINT);
            ExitCode::from(MISSING_REDIS)
        }
        Err(demo::Stop::Failed(message)) => {
            eprintln!("\nquorlock-chaos: {message}");
            ExitCode::from(HARNESS_FAILED)
        }
        Err(demo::Stop::Interrupted(code)) => {
            eprintln!("\nquorlock-chaos: interrupted; every master the demo started is stopped");
            ExitCode::from(code)
        }
    }
}
