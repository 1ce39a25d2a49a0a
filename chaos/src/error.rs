//! The harness's one error type, so tests can `?` any harness call and get a message that
//! names the master, port or file involved.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while driving the harness.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The selected server (`QUORLOCK_TEST_SERVER`) is unknown, missing or not the pinned build.
    #[error(transparent)]
    Server(#[from] crate::servers::ServerError),

    /// libfaketime is not installed, so clock faults cannot run.
    #[error(
        "libfaketime was not found (searched {searched}); install it with \
         `apt-get install libfaketime` (Debian/Ubuntu) or `brew install libfaketime` (macOS), \
         or set QUORLOCK_LIBFAKETIME to the library's path"
    )]
    FaketimeMissing {
        /// Where the harness looked.
        searched: String,
    },

    /// libfaketime is installed but the program cannot run under it.
    #[error("{program} cannot run under libfaketime: {reason}")]
    FaketimeIncompatible {
        /// The program that was probed.
        program: String,
        /// What went wrong.
        reason: String,
    },

    /// The workload could not run (e.g. the lock library rejected its settings).
    #[error("workload: {0}")]
    Workload(String),

    /// No scenario has this name.
    #[error("unknown scenario {name:?}; known scenarios: {known}")]
    UnknownScenario {
        /// The name asked for.
        name: String,
        /// Every known name.
        known: String,
    },

    /// A master index outside `0..len`.
    #[error("no master with index {index}: the cluster has {len} masters")]
    NoSuchMaster {
        /// The index that was asked for.
        index: usize,
        /// How many masters exist.
        len: usize,
    },

    /// A client group index outside `0..groups`.
    #[error("no client group {group}: there are {groups} groups")]
    NoSuchGroup {
        /// The group that was asked for.
        group: usize,
        /// How many groups exist.
        groups: usize,
    },

    /// The master is not running (it was killed or it exited).
    #[error("master {index} (port {port}) is not running")]
    NotRunning {
        /// Master index.
        index: usize,
        /// Its port.
        port: u16,
    },

    /// The master is stopped with SIGSTOP and cannot answer.
    #[error("master {index} (port {port}) is paused")]
    Paused {
        /// Master index.
        index: usize,
        /// Its port.
        port: u16,
    },

    /// A `ClusterOptions` value that cannot work.
    #[error("invalid cluster options: {0}")]
    InvalidOptions(String),

    /// An I/O operation of the harness failed.
    #[error("{context}: {source}")]
    Io {
        /// What the harness was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A Redis command issued by the harness failed.
    #[error("{context}: {source}")]
    Redis {
        /// What the harness was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: redis::RedisError,
    },

    /// Sending a signal to a child process failed.
    #[error("sending {signal} to pid {pid} failed: {source}")]
    Signal {
        /// Target process id.
        pid: u32,
        /// Signal name.
        signal: &'static str,
        /// The underlying error.
        #[source]
        source: nix::Error,
    },

    /// An external command (e.g. `docker compose`) failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Exit status as text.
        status: String,
        /// What it wrote to stderr.
        stderr: String,
    },

    /// A master did not answer PING in time after a restart.
    #[error("master {index} at {url} did not answer PING within {waited:?}")]
    NotReady {
        /// Master index.
        index: usize,
        /// URL probed (credentials included as configured).
        url: String,
        /// How long the harness waited.
        waited: Duration,
    },

    /// A master did not answer PING within the startup bound.
    #[error(
        "master {index} (port {port}) did not answer PING within {waited:?}; log tail ({log}):\n{log_tail}"
    )]
    StartTimeout {
        /// Master index.
        index: usize,
        /// Its port.
        port: u16,
        /// How long the harness waited.
        waited: Duration,
        /// Log file that was read.
        log: PathBuf,
        /// Last lines of the log.
        log_tail: String,
    },

    /// A master's process exited during startup.
    #[error("master {index} (port {port}) exited during startup ({status}); log tail ({log}):\n{log_tail}")]
    Exited {
        /// Master index.
        index: usize,
        /// Its port.
        port: u16,
        /// Exit status as text.
        status: String,
        /// Log file that was read.
        log: PathBuf,
        /// Last lines of the log.
        log_tail: String,
    },

    /// A report could not be written as JSON.
    #[error("writing the report as JSON: {0}")]
    Json(#[source] serde_json::Error),

    /// No port could be bound for a master after several attempts.
    #[error("master {index} could not bind a port after {attempts} attempts (last tried {port})")]
    PortUnavailable {
        /// Master index.
        index: usize,
        /// Last port tried.
        port: u16,
        /// How many attempts were made.
        attempts: u32,
    },
}

impl HarnessError {
    /// Wraps an I/O error with what the harness was doing.
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        HarnessError::Io {
            context: context.into(),
            source,
        }
    }

    /// Wraps a Redis error with what the harness was doing.
    pub(crate) fn redis(context: impl Into<String>, source: redis::RedisError) -> Self {
        HarnessError::Redis {
            context: context.into(),
            source,
        }
    }
}
