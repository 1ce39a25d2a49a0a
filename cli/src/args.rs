//! The command line: commands, options, defaults and the help text with examples.
//!
//! Everything a user types is declared here, in one place, so `--help` and the parser cannot
//! disagree. Durations go through [`crate::duration::parse`].

use std::ffi::OsString;
use std::time::Duration;

use clap::{ArgAction, Args, Parser, Subcommand};

use crate::duration;

/// Default `--ttl`: how long a lock lives on the masters unless renewed.
pub const DEFAULT_TTL: &str = "30s";
/// Default `--wait`: how long to keep trying when the lock is held.
pub const DEFAULT_WAIT: &str = "10s";
/// Default `--grace`: how long a command gets between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: &str = "5s";
/// The environment variable that lists the masters when `--nodes` is not given.
pub const NODES_ENV: &str = "QUORLOCK_NODES";

const EXAMPLES: &str = "\
Examples:
  export QUORLOCK_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
  quorlock run nightly-report -- ./report.sh --full     # one runner at a time, cluster-wide
  quorlock run --wait 0s --ttl 2m deploy -- make deploy  # give up at once if a deploy runs
  TOKEN=$(quorlock acquire --ttl 10m migrate)            # hold a lock across script steps
  read TOKEN FENCE < <(quorlock acquire --fence migrate)  # with a fencing token
  quorlock release migrate \"$TOKEN\"
  quorlock status migrate --json
  quorlock demo                                           # 5 local masters, failures, a timeline

Exit codes:
  0-255  run: the command's own exit code; 128+N when it was killed by signal N
  64     usage error: unknown option, bad duration, missing command
  69     release unconfirmed, or status partial: fewer than a majority of masters answered;
         demo: quorlock-chaos not found
  70     internal error: signals could not be caught, or the command's status was lost
  75     the lock was not acquired within --wait (held elsewhere, or no majority reachable)
  76     the lock was lost while the command ran, or had expired before release
  78     configuration error: no masters (--nodes or QUORLOCK_NODES), bad URL, bad credentials
  126    the command could not be executed; 127: the command was not found";

const RUN_HELP: &str = "\
The command runs in its own process group with QUORLOCK_KEY, QUORLOCK_TOKEN and
QUORLOCK_VALIDITY_MS in its environment, and QUORLOCK_FENCE with --fence. If the lock is lost, the group gets SIGTERM, then SIGKILL
after --grace, and quorlock exits 76. Ctrl-C, SIGTERM and SIGHUP are forwarded to the group (SIGKILL
follows after --grace, at once on a second signal); the lock is released as soon as the command ends,
and after such a stop only once nothing of its group is left running. If quorlock itself is killed
(kill -9, the OOM killer), the group gets SIGKILL: nothing runs on without the lock.

Examples:
  quorlock run backup -- pg_dump -f /backups/db.sql mydb
  quorlock run --ttl 10s --wait 1m --grace 2s cron:cleanup -- sh -c 'cleanup && vacuum'
  quorlock run --fence ledger -- sh -c './apply-batch --fencing-token $QUORLOCK_FENCE'";

/// Runs commands under a distributed lock held on a majority of independent Redis masters.
#[derive(Debug, Parser)]
#[command(name = "quorlock", version, after_help = EXAMPLES)]
pub struct Cli {
    /// The Redis masters, comma-separated: redis://[user:pass@]host:port[/db],...
    #[arg(long, global = true, value_name = "URL,...", env = NODES_ENV, hide_env_values = true)]
    pub nodes: Option<String>,

    /// Bound on each request to one master; a slower master counts as a no [default: 50ms]
    #[arg(long, global = true, value_name = "DURATION", value_parser = duration::positive)]
    pub node_timeout: Option<Duration>,

    /// Ignore votes of a master restarted this recently without appendfsync always [default: the TTL]
    ///
    /// Such a master may have lost locks it granted. Set it to the longest TTL any client of these
    /// masters uses. 0s turns the guard off: safe only when a master that lost its data is
    /// restarted by hand after the longest TTL (or for a local try-out on fresh masters).
    #[arg(long, global = true, value_name = "DURATION", value_parser = duration::parse)]
    pub restart_grace: Option<Duration>,

    /// Log more of what quorlock does on stderr than its warnings (-v: debug, -vv: trace; RUST_LOG overrides)
    #[arg(short, long, global = true, action = ArgAction::Count)]
    pub verbose: u8,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a command while holding the lock on KEY, and release it when the command ends
    #[command(after_help = RUN_HELP)]
    Run(RunArgs),
    /// Take the lock on KEY and print its token, for a script that releases it later
    Acquire(AcquireArgs),
    /// Release the lock on KEY taken by `quorlock acquire`, given its token
    Release(ReleaseArgs),
    /// Show each master's view of the lock on KEY, and whether a majority holds it
    Status(StatusArgs),
    /// Start 5 local masters, run contending workers through master failures, draw a timeline
    #[command(disable_help_flag = true)]
    Demo(DemoArgs),
}

/// How long a lock lives and how long to wait for it.
#[derive(Debug, Args)]
pub struct LockArgs {
    /// Lifetime of the lock on the masters
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_TTL, value_parser = duration::positive)]
    pub ttl: Duration,

    /// How long to keep trying while the lock is held elsewhere (0s: one attempt)
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_WAIT, value_parser = duration::parse)]
    pub wait: Duration,

    /// Also take a fencing token: a number larger than every earlier holder's, for the protected
    /// resource to reject writes of stale holders
    #[arg(long)]
    pub fence: bool,
}

/// `quorlock run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// TTL and wait.
    #[command(flatten)]
    pub lock: LockArgs,

    /// Time the command gets to exit after SIGTERM before it is killed
    #[arg(long, value_name = "DURATION", default_value = DEFAULT_GRACE, value_parser = duration::parse)]
    pub grace: Duration,

    /// The lock's name (the key on every master)
    #[arg(value_name = "KEY")]
    pub key: String,

    /// The command and its arguments (after `--`)
    #[arg(
        value_name = "CMD",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<OsString>,
}

/// `quorlock acquire`.
#[derive(Debug, Args)]
pub struct AcquireArgs {
    /// TTL and wait.
    #[command(flatten)]
    pub lock: LockArgs,

    /// Print {"key", "token", "validity_ms", "ttl_ms", "fence"} as JSON instead of the bare token
    /// (with --fence: the token, a space, and the fencing token)
    #[arg(long)]
    pub json: bool,

    /// The lock's name (the key on every master)
    #[arg(value_name = "KEY")]
    pub key: String,
}

/// `quorlock release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The lock's name
    #[arg(value_name = "KEY")]
    pub key: String,

    /// The token `quorlock acquire` printed
    #[arg(value_name = "TOKEN")]
    pub token: String,
}

/// `quorlock status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print the state as one JSON object
    #[arg(long)]
    pub json: bool,

    /// The lock's name
    #[arg(value_name = "KEY")]
    pub key: String,
}

/// `quorlock demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Passed on to the demo: --svg PATH, --phase SECONDS, --workers N, --help
    #[arg(value_name = "ARGS", trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<OsString>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_options_then_key_then_command() {
        let cli = Cli::try_parse_from([
            "quorlock",
            "run",
            "--ttl",
            "2s",
            "--nodes",
            "redis://a:1",
            "k",
            "--",
            "sh",
            "-c",
            "exit 3",
        ])
        .expect("parses");
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.lock.ttl, Duration::from_secs(2));
        assert_eq!(run.lock.wait, Duration::from_secs(10));
        assert_eq!(run.key, "k");
        assert_eq!(run.command, ["sh", "-c", "exit 3"]);
        assert_eq!(cli.nodes.as_deref(), Some("redis://a:1"));
    }

    #[test]
    fn the_command_keeps_its_own_flags() {
        let cli = Cli::try_parse_from(["quorlock", "run", "k", "--", "ls", "--ttl", "-v"]).expect("parses");
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.command, ["ls", "--ttl", "-v"]);
        assert_eq!(cli.verbose, 0);
    }

    #[test]
    fn bad_durations_and_missing_commands_are_refused() {
        assert!(Cli::try_parse_from(["quorlock", "run", "--ttl", "30", "k", "--", "true"]).is_err());
        assert!(Cli::try_parse_from(["quorlock", "run", "k"]).is_err());
    }
}
