//! `quorlock-chaos`: the harness's command line. `list` shows the named fault scenarios;
//! `run --scenario NAME` runs one against local masters and reports whether RedLock's
//! guarantees held.

mod scenarios;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Chaos harness for quorlock.
#[derive(Debug, Parser)]
#[command(name = "quorlock-chaos", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the fault scenarios
    List,
    /// Run one scenario and report (exit 0 pass or inconclusive, 1 violation, 2 harness failure)
    Run(scenarios::RunArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    match Cli::parse().command {
        Command::List => scenarios::list(),
        Command::Run(args) => scenarios::run(args).await,
    }
}
