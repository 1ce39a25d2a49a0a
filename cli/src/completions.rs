//! `quorlock completions SHELL` and `quorlock man`: the shell completion script and the man page,
//! both generated from the command line declared in `args`, so they never drift from it.

use std::io::Write;

use clap::CommandFactory;

use crate::args::{Cli, CompletionsArgs, ManArgs};
use crate::exit::{Failure, OK, SOFTWARE};

/// Prints the completion script for the shell asked for on stdout.
pub fn completions(args: &CompletionsArgs) -> u8 {
    let mut command = Cli::command();
    clap_complete::generate(
        args.shell,
        &mut command,
        "quorlock",
        &mut std::io::stdout().lock(),
    );
    OK
}

/// Prints the man page (roff) on stdout: quorlock(1), or quorlock-COMMAND(1), the page its
/// SUBCOMMANDS section refers to.
///
/// # Errors
/// A [`SOFTWARE`] failure when stdout cannot be written.
pub fn man(args: &ManArgs) -> Result<u8, Failure> {
    let mut command = Cli::command();
    command.build();
    let command = match &args.command {
        None => command,
        Some(name) => match command.find_subcommand(name) {
            Some(sub) => sub.clone().name(format!("quorlock-{name}")),
            None => return Err(Failure::new(SOFTWARE, format!("no command {name:?}"))),
        },
    };
    let mut page = Vec::new();
    clap_mangen::Man::new(command)
        .render(&mut page)
        .map_err(|e| Failure::new(SOFTWARE, format!("cannot render the man page: {e}")))?;
    std::io::stdout()
        .lock()
        .write_all(&page)
        .map_err(|e| Failure::new(SOFTWARE, format!("cannot write the man page: {e}")))?;
    Ok(OK)
}
