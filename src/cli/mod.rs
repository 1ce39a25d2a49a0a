//! The `quorlock` command-line tool, one concern per module:
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
//! - `demo`: `quorlock demo`, handed over to the demo binary.

pub mod args;
pub mod child;
pub mod connect;
pub mod demo;
pub mod duration;
pub mod exit;
pub mod handoff;
pub mod run;
pub mod signals;
pub mod status;
pub mod tether;

use args::{Cli, Command};
use connect::Masters;
use exit::{Failure, SOFTWARE};
use signals::Signals;

/// Runs the parsed command line and returns the exit code.
///
/// # Errors
/// The command's [`Failure`], to be printed as one line on stderr.
pub async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let masters = Masters {
        nodes: cli.nodes,
        node_timeout: cli.node_timeout,
        restart_grace: cli.restart_grace,
    };
    let catch = || Signals::catch().map_err(|e| Failure::new(SOFTWARE, format!("cannot catch signals: {e}")));
    match cli.command {
        Command::Run(args) => run::run(args, &masters, &mut catch()?).await,
        Command::Acquire(args) => handoff::acquire(args, &masters, &mut catch()?).await,
        Command::Release(args) => handoff::release(args, &masters).await,
        Command::Status(args) => status::status(args, &masters).await,
        Command::Demo(args) => Err(demo::demo(args)),
    }
}
