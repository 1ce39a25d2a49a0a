//! From the parsed command line to the command that runs: one place that maps each subcommand
//! to its module, sets the voice (`-q`, `-v`), and prints the `--json` report, success or not.

use crate::args::{Cli, Command, MasterArgs};
use crate::exit::{Failure, SOFTWARE};
use crate::report::Report;
use crate::signals::Signals;
use crate::{completions, logging, voice};

/// Runs the parsed command line and returns the exit code.
///
/// # Errors
/// The command's [`Failure`], to be printed as one line on stderr.
pub async fn dispatch(cli: Cli) -> Result<u8, Failure> {
    let catch = || Signals::catch().map_err(|e| Failure::new(SOFTWARE, format!("cannot catch signals: {e}")));
    let (json, mut report) = match &cli.command {
        Command::Run(a) => (a.json, Report::new("run", &a.key)),
        Command::Acquire(a) => (a.json, Report::new("acquire", &a.key)),
        Command::Release(a) => (a.json, Report::new("release", &a.key)),
        Command::Status(a) => (a.json, Report::new("status", &a.key)),
        Command::Demo(_) | Command::Completions(_) | Command::Man(_) => (false, Report::new("", "")),
    };
    let outcome = match cli.command {
        Command::Run(args) => {
            speak(&args.masters);
            crate::run::run(args, &mut catch()?, &mut report).await
        }
        Command::Acquire(args) => {
            speak(&args.masters);
            crate::handoff::acquire(args, &mut catch()?, &mut report).await
        }
        Command::Release(args) => {
            speak(&args.masters);
            crate::handoff::release(args, &mut report).await
        }
        Command::Status(args) => {
            speak(&args.masters);
            crate::status::status(args, &mut report).await
        }
        Command::Demo(args) => Err(crate::demo::demo(args)),
        Command::Completions(args) => Ok(completions::completions(&args)),
        Command::Man(args) => completions::man(&args),
    };
    if json {
        println!("{}", report.finish(&outcome));
    }
    outcome
}

/// Sets the voice from `-q` and `-v`.
fn speak(masters: &MasterArgs) {
    voice::set_quiet(masters.quiet);
    logging::init(masters.verbose);
}
