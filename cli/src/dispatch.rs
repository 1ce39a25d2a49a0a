//! From the parsed command line to the command that runs: one place that maps each subcommand
//! to its module.

use crate::args::{Cli, Command};
use crate::connect::Masters;
use crate::exit::{Failure, SOFTWARE};
use crate::signals::Signals;

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
        Command::Run(args) => crate::run::run(args, &masters, &mut catch()?).await,
        Command::Acquire(args) => crate::handoff::acquire(args, &masters, &mut catch()?).await,
        Command::Release(args) => crate::handoff::release(args, &masters).await,
        Command::Status(args) => crate::status::status(args, &masters).await,
        Command::Demo(args) => Err(crate::demo::demo(args)),
    }
}
