//! `quorlock`: run any command under a distributed lock held on a majority of independent Redis
//! masters (`flock(1)` across machines), take and release locks from scripts, inspect a lock, and
//! start the demo. See `quorlock --help` for the commands, examples and exit codes.

//!
//! One concern per module:
//! - `args`: the command line, its environment variables and its help text; `cmdline`: which of
//!   an option's sources counts (before or after the subcommand, command line or environment);
//! - `duration`: human durations (`30s`, `500ms`, `2m`), humantime's grammar;
//! - `secrets`: masters from a file, a password from the environment, a token from stdin;
//! - `connect`: the masters, TLS files, and the client built from them;
//! - `exit`: the documented exit codes and the one-line failure;
//! - `voice`: everything said on stderr, in one voice; `logging`: the library's warnings in it;
//! - `waiting`: the status line while waiting for a lock on a terminal;
//! - `report`: the `--json` object (schema 1);
//! - `signals`: the stop signals caught and forwarded;
//! - `child`: the command, in its own process group;
//! - `tether`: the process between quorlock and the command, which kills the command's group if
//!   quorlock dies;
//! - `run`: `quorlock run`, the command under the lock;
//! - `handoff`: `quorlock acquire` / `quorlock release` for scripts;
//! - `status`: `quorlock status`;
//! - `demo`: `quorlock demo`, handed over to the demo binary;
//! - `completions`: `quorlock completions SHELL` and `quorlock man`;
//! - `dispatch`: from the parsed command line to the module that runs it.

#![forbid(unsafe_code)]

mod args;
mod child;
mod cmdline;
mod completions;
mod connect;
mod demo;
mod dispatch;
mod duration;
mod exit;
mod handoff;
mod logging;
mod report;
mod run;
mod secrets;
mod signals;
mod status;
mod status_kinds;
mod tether;
mod voice;
mod waiting;

use std::future::Future;
use std::process::ExitCode;

use clap::error::ErrorKind;

use exit::{Failure, OK, SOFTWARE, USAGE};

fn main() -> ExitCode {
    if let Some(tethered) = tether::requested() {
        return match tethered {
            Ok(tethered) => block_on(tethered.run()),
            Err(failure) => fail(&failure),
        };
    }
    let cli = match cmdline::parse_from(std::env::args_os()) {
        Ok(cli) => cli,
        Err(err) => return ExitCode::from(usage(&err)),
    };
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

/// Prints `failure` as one line (not the lock held elsewhere with `-q`) and returns its exit code.
fn fail(failure: &Failure) -> ExitCode {
    if !(failure.is_held_elsewhere() && voice::quiet()) {
        voice::error(&failure.to_string());
    }
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
            voice::error(&format!("{message} (see --help)"));
            USAGE
        }
    }
}
