//! Parsing the command line, after clap: where an option was given decides which value counts.
//!
//! - Options given before the subcommand (`quorlock --nodes URL,... run ...`, where earlier
//!   versions took them) count as given on the command line, unless the subcommand got its own.
//! - The command line wins over the environment: `--nodes-file F` with `QUORLOCK_NODES` exported
//!   reads F, and `-n` with `QUORLOCK_WAIT` set does not wait. Two rival options given at the same
//!   level (`--nodes` and `--nodes-file`, `-n` and `--wait`) are a usage error that names them.

use std::ffi::OsString;

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};

use crate::args::{Cli, Command, Early, LockArgs, MasterArgs, NODES_ENV, NODES_FILE_ENV};

/// Parses `args` (the program name first) into the command line to run.
///
/// # Errors
/// clap's error for a bad command line (help and version included), or a usage error for rival
/// options.
pub fn parse_from<I, T>(args: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let matches = Cli::command().try_get_matches_from(args)?;
    let mut cli = Cli::from_arg_matches(&matches)?;
    let Some((_, sub)) = matches.subcommand() else {
        return Ok(cli);
    };
    let early = cli.early.clone();
    let resolved = match &mut cli.command {
        Command::Run(args) => resolve_lock(&early, &mut args.lock, sub)
            .and_then(|()| resolve_masters(&early, &mut args.masters, sub)),
        Command::Acquire(args) => resolve_lock(&early, &mut args.lock, sub)
            .and_then(|()| resolve_masters(&early, &mut args.masters, sub)),
        Command::Release(args) => resolve_masters(&early, &mut args.masters, sub),
        Command::Status(args) => resolve_masters(&early, &mut args.masters, sub),
        Command::Demo(_) | Command::Completions(_) | Command::Man(_) => Ok(()),
    };
    resolved.map_err(|message| Cli::command().error(ErrorKind::ArgumentConflict, message))?;
    Ok(cli)
}

/// Where a value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum From {
    Nowhere,
    Environment,
    CommandLine,
}

/// Where the subcommand's option `id`, present as `present`, came from, counting an early copy.
fn source(sub: &ArgMatches, id: &str, present: bool, early: bool) -> From {
    if early || sub.value_source(id) == Some(ValueSource::CommandLine) {
        From::CommandLine
    } else if present {
        From::Environment
    } else {
        From::Nowhere
    }
}

/// `early` when the subcommand did not get `id` on its own command line.
fn prefer_early<T>(sub: &ArgMatches, id: &str, own: &mut Option<T>, early: &Option<T>)
where
    T: Clone,
{
    if early.is_some() && sub.value_source(id) != Some(ValueSource::CommandLine) {
        own.clone_from(early);
    }
}

fn resolve_masters(early: &Early, masters: &mut MasterArgs, sub: &ArgMatches) -> Result<(), String> {
    prefer_early(sub, "nodes", &mut masters.nodes, &early.nodes);
    prefer_early(sub, "nodes_file", &mut masters.nodes_file, &early.nodes_file);
    prefer_early(
        sub,
        "node_timeout",
        &mut masters.node_timeout,
        &early.node_timeout,
    );
    prefer_early(sub, "key_prefix", &mut masters.key_prefix, &early.key_prefix);
    prefer_early(sub, "tls_ca", &mut masters.tls_ca, &early.tls_ca);
    prefer_early(sub, "tls_cert", &mut masters.tls_cert, &early.tls_cert);
    prefer_early(sub, "tls_key", &mut masters.tls_key, &early.tls_key);
    masters.verbose = masters.verbose.saturating_add(early.verbose);
    masters.quiet |= early.quiet;

    let nodes = source(sub, "nodes", masters.nodes.is_some(), early.nodes.is_some());
    let file = source(
        sub,
        "nodes_file",
        masters.nodes_file.is_some(),
        early.nodes_file.is_some(),
    );
    match (nodes, file) {
        (From::CommandLine, From::CommandLine) => {
            return Err("--nodes and --nodes-file both list the masters: give one".into())
        }
        (From::Environment, From::Environment) => {
            return Err(format!(
                "{NODES_ENV} and {NODES_FILE_ENV} are both set: unset one, or give --nodes or --nodes-file"
            ))
        }
        (From::CommandLine, From::Environment) => masters.nodes_file = None,
        (From::Environment, From::CommandLine) => masters.nodes = None,
        _ => {}
    }
    if masters.tls_cert.is_some() != masters.tls_key.is_some() {
        return Err("--tls-cert and --tls-key go together: give both, or neither".into());
    }
    Ok(())
}

fn resolve_lock(early: &Early, lock: &mut LockArgs, sub: &ArgMatches) -> Result<(), String> {
    prefer_early(
        sub,
        "restart_grace",
        &mut lock.restart_grace,
        &early.restart_grace,
    );
    let wait = source(sub, "wait", lock.wait.is_some(), false);
    let nonblock = source(sub, "nonblock", lock.nonblock, false);
    match (wait, nonblock) {
        (From::CommandLine, From::CommandLine) | (From::Environment, From::Environment) => Err(format!(
            "{} ask for opposite waits: give one",
            if wait == From::CommandLine {
                "-w/--wait and -n/--nonblock"
            } else {
                "QUORLOCK_WAIT and QUORLOCK_NONBLOCK"
            }
        )),
        (From::CommandLine, From::Environment) => {
            lock.nonblock = false;
            Ok(())
        }
        (From::Environment, From::CommandLine) => {
            lock.wait = None;
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn masters(cli: &Cli) -> &MasterArgs {
        match &cli.command {
            Command::Run(a) => &a.masters,
            Command::Acquire(a) => &a.masters,
            Command::Release(a) => &a.masters,
            Command::Status(a) => &a.masters,
            other => panic!("no masters: {other:?}"),
        }
    }

    #[test]
    fn options_before_the_subcommand_still_count() {
        let cli = parse_from([
            "quorlock",
            "--nodes",
            "redis://a:1",
            "--node-timeout",
            "200ms",
            "-v",
            "--restart-grace",
            "0s",
            "run",
            "k",
            "--",
            "true",
        ])
        .expect("parses");
        assert_eq!(masters(&cli).nodes.as_deref(), Some("redis://a:1"));
        assert_eq!(masters(&cli).node_timeout, Some(Duration::from_millis(200)));
        assert_eq!(masters(&cli).verbose, 1);
        let Command::Run(run) = &cli.command else { panic!() };
        assert_eq!(run.lock.restart_grace, Some(Duration::ZERO));
    }

    #[test]
    fn the_subcommands_own_option_wins_over_an_early_one() {
        let cli = parse_from([
            "quorlock",
            "--nodes",
            "redis://a:1",
            "status",
            "--nodes",
            "redis://b:2",
            "k",
        ])
        .expect("parses");
        assert_eq!(masters(&cli).nodes.as_deref(), Some("redis://b:2"));
    }

    #[test]
    fn rival_options_on_the_command_line_are_refused_by_name() {
        let err = parse_from([
            "quorlock",
            "status",
            "--nodes",
            "redis://a:1",
            "--nodes-file",
            "f",
            "k",
        ])
        .expect_err("rivals");
        assert!(err.to_string().contains("--nodes-file"), "{err}");
        let err = parse_from(["quorlock", "run", "-n", "-w", "1s", "k", "--", "true"]).expect_err("rivals");
        assert!(err.to_string().contains("-n/--nonblock"), "{err}");
        let err = parse_from(["quorlock", "status", "--tls-cert", "c.pem", "k"]).expect_err("no key");
        assert!(err.to_string().contains("--tls-key"), "{err}");
    }
}
