//! The command line: commands, options, their environment variables, defaults, and the help text
//! with examples.
//!
//! Everything a user types is declared here, in one place, so `--help`, the completions, the man
//! page and the parser cannot disagree. Each subcommand takes only the options it uses. Every
//! option can also come from a `QUORLOCK_*` environment variable, which `--help` names; the command
//! line wins over the environment (see `cmdline`). Durations go through [`crate::duration`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::FalseyValueParser;
use clap::{ArgAction, Args, Parser, Subcommand};

use crate::duration;

/// Default `--ttl`: how long a lock lives on the masters unless renewed.
pub const DEFAULT_TTL: &str = "30s";
/// Default `--wait`: how long to keep trying when the lock is held.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// Default `--grace`: how long a command gets between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: &str = "5s";
/// The environment variable that lists the masters when `--nodes` is not given.
pub const NODES_ENV: &str = "QUORLOCK_NODES";
/// The environment variable that names a file of masters when `--nodes-file` is not given.
pub const NODES_FILE_ENV: &str = "QUORLOCK_NODES_FILE";
/// The environment variables a password is read from, in order (the second as `redis-cli` does).
pub const PASSWORD_ENVS: [&str; 2] = ["QUORLOCK_PASSWORD", "REDISCLI_AUTH"];
/// The environment variable `release` reads the token from when none is given.
pub const TOKEN_ENV: &str = "QUORLOCK_TOKEN";

/// The warning about secrets, in every help text that takes masters.
macro_rules! secrets {
    () => {
        "Secrets: arguments are visible to other users of this machine (ps, /proc). Keep passwords out of
them: list the masters in a file (--nodes-file, one URL a line) or in QUORLOCK_NODES, give a
password in QUORLOCK_PASSWORD (or REDISCLI_AUTH, as redis-cli reads it) for masters whose URL has
none, and pass release's token on stdin or in QUORLOCK_TOKEN."
    };
}

const SECRETS: &str = secrets!();

const EXAMPLES: &str = concat!(
    "\
Examples:
  export QUORLOCK_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
  quorlock run nightly-report -- ./report.sh --full     # one runner at a time, cluster-wide
  quorlock run -n -E 0 deploy -c 'make deploy'          # skip quietly if a deploy runs
  quorlock run -w 2m --ttl 2m deploy -- make deploy     # wait up to 2 minutes for it
  TOKEN=$(quorlock acquire --ttl 10m migrate)            # hold a lock across script steps
  echo \"$TOKEN\" | quorlock release migrate               # the token from stdin
  quorlock status migrate --json
  quorlock demo                                          # 5 local masters, failures, a timeline

",
    secrets!(),
    "

Exit codes:
  0-255  run: the command's own exit code; 128+N when it was killed by signal N
  64     usage error: unknown option, bad duration, missing command
  69     release unconfirmed, or status partial: fewer than a majority of masters answered;
         demo: quorlock-chaos not found
  70     internal error: signals could not be caught, or the command's status was lost
  75     the lock was not acquired within --wait (held elsewhere, or no majority reachable);
         -E N turns the first case (held elsewhere) into N
  76     the lock was lost while the command ran, or had expired before release
  78     configuration error: no masters, bad URL, unreadable file, bad credentials
  126    the command could not be executed; 127: the command was not found"
);

const RUN_HELP: &str = concat!(
    "\
The command runs in its own process group with QUORLOCK_KEY, QUORLOCK_TOKEN and
QUORLOCK_VALIDITY_MS in its environment, and QUORLOCK_FENCE with --fence. If the lock is lost, the
group gets SIGTERM, then SIGKILL after --grace, and quorlock exits 76. Ctrl-C, SIGTERM and SIGHUP are
forwarded to the group (SIGKILL follows after --grace, at once on a second signal); the lock is
released as soon as the command ends, and after such a stop only once nothing of its group is left
running. If quorlock itself is killed (kill -9, the OOM killer), the group gets SIGKILL: nothing runs
on without the lock. While it waits on a terminal, one line on stderr says who holds the lock.

Examples:
  quorlock run backup -- pg_dump -f /backups/db.sql mydb
  quorlock run -w 1m --ttl 10s --grace 2s cron:cleanup -c 'cleanup && vacuum'
  quorlock run -n -E 0 -q hourly -- ./hourly.sh           # cron: skip silently when busy
  quorlock run --fence ledger -c './apply-batch --fencing-token $QUORLOCK_FENCE'
  quorlock run -s catalog -- ./export.sh                  # shared: many at once, none with a writer

A run takes KEY exclusively by default (flock -x; -x/--exclusive says so explicitly): it excludes
--shared runs, other exclusive runs, `quorlock acquire KEY`, and plain or fenced locks on KEY taken
by the library or by another RedLock client. While --shared runs hold KEY it waits, and keeps new
ones out. A --shared run (flock -s) is refused while KEY is held exclusively or by a plain lock.

",
    secrets!()
);

/// Runs commands under a distributed lock held on a majority of independent Redis masters.
#[derive(Debug, Parser)]
#[command(name = "quorlock", version, after_help = EXAMPLES)]
pub struct Cli {
    /// Options given before the subcommand, as in `quorlock --nodes URL,... run ...`.
    #[command(flatten)]
    pub early: Early,

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
    #[command(after_help = SECRETS)]
    Acquire(AcquireArgs),
    /// Release the lock on KEY taken by `quorlock acquire`, given its token
    #[command(after_help = SECRETS)]
    Release(ReleaseArgs),
    /// Show each master's view of the lock on KEY, and whether a majority holds it
    #[command(after_help = SECRETS)]
    Status(StatusArgs),
    /// Start 5 local masters, run contending workers through master failures, draw a timeline
    Demo(DemoArgs),
    /// Print a shell completion script: quorlock completions bash > /etc/bash_completion.d/quorlock
    Completions(CompletionsArgs),
    /// Print the man page (roff): quorlock man > quorlock.1, quorlock man run > quorlock-run.1
    Man(ManArgs),
}

/// The masters, and how to talk to them: every command that reaches the masters takes these.
/// Its `Debug` hides `--nodes`, whose URLs may carry passwords.
#[derive(Clone, Default, Args)]
#[command(next_help_heading = "Masters")]
pub struct MasterArgs {
    /// The Redis masters, comma-separated: `redis://[user:pass@]host:port[/db],...` (visible to
    /// other users: prefer --nodes-file or the environment for URLs with passwords)
    #[arg(long, value_name = "URL,...", env = NODES_ENV, hide_env_values = true)]
    pub nodes: Option<String>,

    /// A file listing the masters, one URL a line (blank lines and # comments skipped)
    #[arg(long, value_name = "FILE", env = NODES_FILE_ENV)]
    pub nodes_file: Option<PathBuf>,

    /// Bound on each request to one master; a slower master counts as a no [default: 50ms]
    #[arg(long, value_name = "DURATION", env = "QUORLOCK_NODE_TIMEOUT", value_parser = duration::positive)]
    pub node_timeout: Option<Duration>,

    /// Put this before KEY to form the key on the masters
    #[arg(long, value_name = "PREFIX", env = "QUORLOCK_KEY_PREFIX")]
    pub key_prefix: Option<String>,

    /// Trust the CA certificates in FILE (PEM) for rediss:// masters, instead of the system store
    #[arg(long, value_name = "FILE", env = "QUORLOCK_TLS_CA")]
    pub tls_ca: Option<PathBuf>,

    /// Present the client certificate (chain) in FILE (PEM) to rediss:// masters; with --tls-key
    #[arg(long, value_name = "FILE", env = "QUORLOCK_TLS_CERT")]
    pub tls_cert: Option<PathBuf>,

    /// The private key (PEM) of --tls-cert
    #[arg(long, value_name = "FILE", env = "QUORLOCK_TLS_KEY")]
    pub tls_key: Option<PathBuf>,

    /// Log more of what quorlock does on stderr (-v: debug, -vv: trace; RUST_LOG overrides)
    #[arg(short, long, action = ArgAction::Count)]
    pub verbose: u8,

    /// Print no warnings, no waiting line, and nothing when the lock is held elsewhere; other
    /// errors still print
    #[arg(short, long, env = "QUORLOCK_QUIET", value_parser = FalseyValueParser::new())]
    pub quiet: bool,
}

/// How long a lock lives and how long to wait for it: `run` and `acquire`.
#[derive(Debug, Clone, Args)]
pub struct LockArgs {
    /// Lifetime of the lock on the masters (renewed while `run`'s command runs)
    #[arg(long, value_name = "DURATION", env = "QUORLOCK_TTL", default_value = DEFAULT_TTL, value_parser = duration::positive)]
    pub ttl: Duration,

    /// How long to keep trying while the lock is held elsewhere (0s: one attempt) [default: 10s]
    #[arg(short, long, value_name = "DURATION", env = "QUORLOCK_WAIT", value_parser = duration::parse)]
    pub wait: Option<Duration>,

    /// Fail at once if the lock is held elsewhere: --wait 0s
    #[arg(short, long, env = "QUORLOCK_NONBLOCK", value_parser = FalseyValueParser::new())]
    pub nonblock: bool,

    /// Exit with N instead of 75 when the lock is held elsewhere (not when too few masters answer)
    #[arg(short = 'E', long, value_name = "N", env = "QUORLOCK_CONFLICT_EXIT_CODE")]
    pub conflict_exit_code: Option<u8>,

    /// Also take a fencing token: a number larger than every earlier holder's, for the protected
    /// resource to reject writes of stale holders
    #[arg(long)]
    pub fence: bool,

    /// Ignore votes of a master restarted this recently without appendfsync always [default: the TTL]
    ///
    /// Such a master may have lost locks it granted. Set it to the longest TTL any client of these
    /// masters uses. 0s turns the guard off: safe only when a master that lost its data is
    /// restarted by hand after the longest TTL (or for a local try-out on fresh masters).
    #[arg(long, value_name = "DURATION", env = "QUORLOCK_RESTART_GRACE", value_parser = duration::parse)]
    pub restart_grace: Option<Duration>,

    /// Keep the lock closed this long after it expires (Chubby's lock-delay) [default: none]
    ///
    /// The key lives TTL + DURATION on the masters while this process counts its validity from
    /// the TTL: a holder that was paused or crashed past its validity cannot overlap the next
    /// holder if it acts again within the delay. A clean release opens the lock at once.
    #[arg(long, value_name = "DURATION", env = "QUORLOCK_LOCK_DELAY", value_parser = duration::parse)]
    pub lock_delay: Option<Duration>,
}

impl LockArgs {
    /// How long an acquire keeps trying: `--wait`, 0 with `--nonblock`, else the default.
    pub fn wait(&self) -> Duration {
        if self.nonblock {
            Duration::ZERO
        } else {
            self.wait.unwrap_or(DEFAULT_WAIT)
        }
    }
}

/// `quorlock run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The lock's name (the key on every master)
    #[arg(value_name = "KEY")]
    pub key: String,

    /// The command and its arguments (after `--`)
    #[arg(
        value_name = "CMD",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required_unless_present = "shell"
    )]
    pub command: Vec<OsString>,

    /// Run this shell command with sh -c, instead of CMD
    #[arg(
        short = 'c',
        long = "command",
        value_name = "SHELL-COMMAND",
        conflicts_with = "command"
    )]
    pub shell: Option<OsString>,

    /// TTL and wait.
    #[command(flatten)]
    pub lock: LockArgs,

    /// Take one of P permits of the semaphore KEY instead of the lock: at most P commands run at
    /// once (the slot taken is in QUORLOCK_PERMIT)
    #[arg(long, value_name = "P", conflicts_with_all = ["shared", "exclusive", "fence"], value_parser = clap::value_parser!(u32).range(1..=i64::from(quorlock::kinds::MAX_PERMITS)))]
    pub permits: Option<u32>,

    /// Take a read hold of the read-write lock KEY, shared with other --shared runs (flock -s);
    /// refused while an exclusive run or a plain lock holds KEY, or an exclusive run waits for it
    #[arg(short = 's', long, conflicts_with_all = ["exclusive", "fence"])]
    pub shared: bool,

    /// Take KEY exclusively (flock -x): the default, so this flag only says it out loud
    ///
    /// An exclusive run takes the write hold of the read-write lock KEY, whose key is the plain
    /// lock's: it excludes --shared runs, other exclusive runs, `quorlock acquire KEY`, and plain
    /// or fenced locks on KEY taken by the library or another RedLock client. While readers hold
    /// KEY it waits, and keeps new readers out. With --fence it also takes a fencing token.
    #[arg(short = 'x', long)]
    pub exclusive: bool,

    /// Time the command gets to exit after SIGTERM before it is killed
    #[arg(long, value_name = "DURATION", env = "QUORLOCK_GRACE", default_value = DEFAULT_GRACE, value_parser = duration::parse)]
    pub grace: Duration,

    /// When the command has ended, print one JSON object (schema 1) on stdout, after its output
    #[arg(long, env = "QUORLOCK_JSON", value_parser = FalseyValueParser::new())]
    pub json: bool,

    /// The masters.
    #[command(flatten)]
    pub masters: MasterArgs,
}

/// What `quorlock run` takes on its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// One of this many permits of a semaphore.
    Permit(u32),
    /// A read hold of a read-write lock.
    Shared,
    /// The write hold of a read-write lock (with a fencing token when asked): exclusive of
    /// readers, other writers and the plain lock on the same key.
    Exclusive {
        /// Whether to take a fencing token.
        fence: bool,
    },
}

impl RunArgs {
    /// What to take on the key: a permit, a read hold, or (the default, or `--exclusive`) the
    /// write hold, fenced with `--fence`.
    pub fn hold(&self) -> Hold {
        match (self.permits, self.shared) {
            (Some(permits), _) => Hold::Permit(permits),
            (None, true) => Hold::Shared,
            (None, false) => Hold::Exclusive {
                fence: self.lock.fence,
            },
        }
    }

    /// The program and its arguments: CMD, or `sh -c SHELL-COMMAND`.
    pub fn argv(&self) -> Vec<OsString> {
        match &self.shell {
            Some(script) => vec!["sh".into(), "-c".into(), script.clone()],
            None => self.command.clone(),
        }
    }
}

/// `quorlock acquire`.
#[derive(Debug, Args)]
pub struct AcquireArgs {
    /// The lock's name (the key on every master)
    #[arg(value_name = "KEY")]
    pub key: String,

    /// TTL and wait.
    #[command(flatten)]
    pub lock: LockArgs,

    /// Print one JSON object (schema 1) instead of the bare token (with --fence: the token, a
    /// space, and the fencing token)
    #[arg(long, env = "QUORLOCK_JSON", value_parser = FalseyValueParser::new())]
    pub json: bool,

    /// The masters.
    #[command(flatten)]
    pub masters: MasterArgs,
}

/// `quorlock release`.
#[derive(Debug, Args)]
pub struct ReleaseArgs {
    /// The lock's name
    #[arg(value_name = "KEY")]
    pub key: String,

    /// The token `quorlock acquire` printed; read from stdin when not given here nor in the
    /// environment (its first word: `quorlock acquire --fence` output works as it is)
    #[arg(value_name = "TOKEN", env = TOKEN_ENV, hide_env_values = true)]
    pub token: Option<String>,

    /// Print one JSON object (schema 1)
    #[arg(long, env = "QUORLOCK_JSON", value_parser = FalseyValueParser::new())]
    pub json: bool,

    /// The masters.
    #[command(flatten)]
    pub masters: MasterArgs,
}

/// `quorlock status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The lock's name
    #[arg(value_name = "KEY")]
    pub key: String,

    /// Print the state as one JSON object (schema 1)
    #[arg(long, env = "QUORLOCK_JSON", value_parser = FalseyValueParser::new())]
    pub json: bool,

    /// Show the semaphore KEY of P permits: which permits are held and which free
    #[arg(long, value_name = "P", conflicts_with = "rw", value_parser = clap::value_parser!(u32).range(1..=i64::from(quorlock::kinds::MAX_PERMITS)))]
    pub permits: Option<u32>,

    /// Show the read-write lock KEY: its writer, readers and waiting writers
    #[arg(long)]
    pub rw: bool,

    /// The masters.
    #[command(flatten)]
    pub masters: MasterArgs,
}

/// `quorlock demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Where to write the SVG timeline
    #[arg(long, value_name = "PATH", default_value = "quorlock-demo.svg")]
    pub svg: PathBuf,

    /// Length of each of the 4 phases (at least 500ms)
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = duration::positive)]
    pub phase: Duration,

    /// Number of contending workers (split over 2 resources)
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub workers: u16,
}

/// `quorlock completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete in
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

/// `quorlock man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The page of this command (quorlock-COMMAND(1)) instead of quorlock(1)
    #[arg(value_name = "COMMAND", value_parser = ["run", "acquire", "release", "status", "demo", "completions", "man"])]
    pub command: Option<String>,
}

/// The options of [`MasterArgs`] and `--restart-grace` given before the subcommand, where
/// earlier versions took them (`quorlock --nodes URL,... run ...`). Hidden from the help, which
/// shows them with each subcommand; read from the command line only (the environment is read for
/// the subcommand's own copy). Its `Debug` shows nothing of it: `--nodes` may carry passwords.
#[derive(Clone, Default, Args)]
pub struct Early {
    #[arg(long = "nodes", id = "early_nodes", hide = true)]
    pub nodes: Option<String>,
    #[arg(long = "nodes-file", id = "early_nodes_file", hide = true)]
    pub nodes_file: Option<PathBuf>,
    #[arg(long = "node-timeout", id = "early_node_timeout", hide = true, value_parser = duration::positive)]
    pub node_timeout: Option<Duration>,
    #[arg(long = "key-prefix", id = "early_key_prefix", hide = true)]
    pub key_prefix: Option<String>,
    #[arg(long = "tls-ca", id = "early_tls_ca", hide = true)]
    pub tls_ca: Option<PathBuf>,
    #[arg(long = "tls-cert", id = "early_tls_cert", hide = true)]
    pub tls_cert: Option<PathBuf>,
    #[arg(long = "tls-key", id = "early_tls_key", hide = true)]
    pub tls_key: Option<PathBuf>,
    #[arg(long = "restart-grace", id = "early_restart_grace", hide = true, value_parser = duration::parse)]
    pub restart_grace: Option<Duration>,
    #[arg(short = 'v', long = "verbose", id = "early_verbose", hide = true, action = ArgAction::Count)]
    pub verbose: u8,
    #[arg(short = 'q', long = "quiet", id = "early_quiet", hide = true)]
    pub quiet: bool,
}

impl std::fmt::Debug for MasterArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterArgs")
            .field("nodes", &self.nodes.as_ref().map(|_| "<hidden>"))
            .field("nodes_file", &self.nodes_file)
            .field("node_timeout", &self.node_timeout)
            .field("key_prefix", &self.key_prefix)
            .field("tls_ca", &self.tls_ca)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("verbose", &self.verbose)
            .field("quiet", &self.quiet)
            .finish()
    }
}

impl std::fmt::Debug for Early {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Early").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    fn run_of(cli: Cli) -> RunArgs {
        match cli.command {
            Command::Run(run) => run,
            other => panic!("not run: {other:?}"),
        }
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
        let run = run_of(cli);
        assert_eq!(run.lock.ttl, Duration::from_secs(2));
        assert_eq!(run.lock.wait(), Duration::from_secs(10));
        assert_eq!(run.key, "k");
        assert_eq!(run.argv(), ["sh", "-c", "exit 3"]);
        assert_eq!(run.masters.nodes.as_deref(), Some("redis://a:1"));
    }

    #[test]
    fn the_command_keeps_its_own_flags() {
        let cli = Cli::try_parse_from(["quorlock", "run", "k", "--", "ls", "--ttl", "-v"]).expect("parses");
        let run = run_of(cli);
        assert_eq!(run.command, ["ls", "--ttl", "-v"]);
        assert_eq!(run.masters.verbose, 0);
    }

    #[test]
    fn flock_flags_short_and_long() {
        let cli =
            Cli::try_parse_from(["quorlock", "run", "-n", "-E", "0", "k", "-c", "echo hi"]).expect("parses");
        let run = run_of(cli);
        assert_eq!(run.lock.wait(), Duration::ZERO);
        assert_eq!(run.lock.conflict_exit_code, Some(0));
        assert_eq!(run.argv(), ["sh", "-c", "echo hi"]);
        let cli = Cli::try_parse_from(["quorlock", "run", "-w", "1m", "k", "--", "true"]).expect("parses");
        assert_eq!(run_of(cli).lock.wait(), Duration::from_secs(60));
    }

    #[test]
    fn bad_durations_and_missing_commands_are_refused() {
        assert!(Cli::try_parse_from(["quorlock", "run", "--ttl", "30", "k", "--", "true"]).is_err());
        assert!(Cli::try_parse_from(["quorlock", "run", "k"]).is_err());
        assert!(Cli::try_parse_from(["quorlock", "run", "k", "-c", "true", "--", "true"]).is_err());
    }

    #[test]
    fn each_subcommand_shows_only_its_options() {
        let mut cli = Cli::command();
        cli.build();
        let longs = |name: &str| -> Vec<String> {
            let sub = cli.find_subcommand(name).expect("subcommand");
            sub.get_arguments()
                .filter(|a| !a.is_hide_set())
                .filter_map(|a| a.get_long().map(str::to_owned))
                .collect()
        };
        for name in ["status", "release"] {
            let options = longs(name);
            assert!(
                !options.iter().any(|o| o == "restart-grace" || o == "ttl"),
                "{name}: {options:?}"
            );
            assert!(options.iter().any(|o| o == "nodes"), "{name}: {options:?}");
        }
        for name in ["demo", "completions", "man"] {
            let options = longs(name);
            assert!(!options.iter().any(|o| o == "nodes"), "{name}: {options:?}");
        }
        assert!(longs("run").iter().any(|o| o == "restart-grace"));
    }
}
