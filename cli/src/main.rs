//! `quorlock`: run any command under a distributed lock held on a majority of independent Redis
//! masters (`flock(1)` across machines), take and release locks from scripts, inspect a lock, and
//! start the demo. See `quorlock --help` for the commands, examples and exit codes.

//!
//! One concern per module:
//! - `args`: the command line and its help text;
//! - `duration`: human durations (`30s`, `500ms`, `2m`);
//! - `connect`: masters from `--nodes` / `QUORLOCK_NODES`, and the client built from them;
//! - `exit`: the documented exit codes and the one-line failure;
//! - `signals`: the stop signals caught and forwarded;
//! - `child`: the command, in its own process group;
//! - `tether`: the process between quorlock and the command, which kills the command's group if
//!   quorlock dies;
//! - `run`: `quorlock run`, the command under the lock;
//! - `handoff`: `quorlock acquire` / `quorlock release` for scripts;
//! - `status`: `quorlock status`;
//! - `demo`: `quorlock demo`, handed over to the demo binary;
//! - `dispatch`: from the parsed command line to the module that runs it.

#![forbid(unsafe_code)]

mod args;
mod child;
mod connect;
mod demo;
mod dispatch;
mod duration;
mod exit;
mod handoff;
mod run;
mod signals;
mod status;
mod tether;

use std::future::Future;
use std::io::IsTerminal;
use std::process::ExitCode;

use clap::error::ErrorKind;
use clap::Parser;
use tracing_subscriber::EnvFilter;

use args::Cli;
use exit::{Failure, OK, SOFTWARE, USAGE};

fn main() -> ExitCode {
    if let Some(tethered) = tether::requested() {
        return match tethered {
            Ok(tethered) => block_on(tethered.run()),
            Err(failure) => fail(&failure),
        };
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return ExitCode::from(usage(&err)),
    };
    logging(cli.verbose);
    block_on(dispatch::dispatch(cli))
}

/// Runs `work` on a single-threaded runtime and turns its result into the exit code.
fn block_on(work: impl Future<Output = Result<u8, Failure>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            return fail(&Failure::new(
                SOFTWARE,
                format!("cannot start the async runtime: {err}"),
            ))
        }
    };
    match runtime.block_on(work) {
        Ok(code) => ExitCode::from(code),
        Err(failure) => fail(&failure),
    }
}

/// Prints `failure` as one line and returns its exit code.
fn fail(failure: &Failure) -> ExitCode {
    eprintln!("quorlock: {failure}");
    ExitCode::from(failure.code)
}

/// Prints help or version as asked, or a parse error as one line, and returns the exit code.
fn usage(err: &clap::Error) -> u8 {
    match err.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = err.print();
            OK
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = err.print();
            USAGE
        }
        _ => {
            // clap's message is its first paragraph (a list of missing arguments continues it).
            let rendered = err.render().to_string();
            let message: Vec<&str> = rendered
                .lines()
                .take_while(|line| !line.trim().is_empty())
                .map(str::trim)
                .collect();
            let message = message.join(" ");
            let message = message.strip_prefix("error: ").unwrap_or(&message);
            eprintln!("quorlock: {message} (see --help)");
            USAGE
        }
    }
}

/// Warnings of the library go to stderr (an even number of masters, a master unreachable at
/// start, replicas attached); `-v` adds debug output, `-vv` trace output; `RUST_LOG` overrides. The
/// persistence warnings (target `quorlock::persistence`: no AOF, `appendfsync` below `always`),
/// which the restart grace already answers, are left to `-v`: they would otherwise come with every
/// invocation on such masters.
fn logging(verbose: u8) {
    let default = match verbose {
        0 => "quorlock=warn,quorlock::persistence=error",
        1 => "quorlock=debug",
        _ => "quorlock=trace,redis=debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let output = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .compact();
    if verbose == 0 {
        output.without_time().with_target(false).init();
    } else {
        output.init();
    }
}
