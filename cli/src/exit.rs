//! The CLI's exit codes, and the one-line failure every command reports on stderr.
//!
//! Scripts branch on these codes, so each has one documented meaning. They follow `sysexits.h`
//! where a meaning fits, and shells' conventions for a command that could not run or was killed.

use std::fmt;
use std::io;
use std::process::ExitStatus;

use quorlock::{AcquireError, BuildError, ReleaseError};

/// Success.
pub const OK: u8 = 0;
/// The command line is wrong: an unknown flag, a bad duration, a missing command (`EX_USAGE`).
pub const USAGE: u8 = 64;
/// Too many masters unreachable to confirm a release (`EX_UNAVAILABLE`); also: the demo is not
/// installed next to this binary.
pub const UNAVAILABLE: u8 = 69;
/// Something failed inside quorlock itself (`EX_SOFTWARE`).
pub const SOFTWARE: u8 = 70;
/// The lock was not acquired within `--wait`: it is held by another holder, or no majority of
/// masters answered (`EX_TEMPFAIL`: try again later).
pub const NOT_ACQUIRED: u8 = 75;
/// The lock was lost: while the command ran (`run`), or before it was released (`release`, or
/// `run` finding at release time that the lock had expired).
pub const LOST: u8 = 76;
/// The masters are not configured or not usable: no `--nodes` and no `QUORLOCK_NODES`, an invalid
/// URL, rejected credentials (`EX_CONFIG`).
pub const CONFIG: u8 = 78;
/// The command was found but could not be executed (as in shells).
pub const CANNOT_EXECUTE: u8 = 126;
/// The command was not found (as in shells).
pub const NOT_FOUND: u8 = 127;
/// A command killed by signal N exits with `SIGNALED + N` (as in shells).
pub const SIGNALED: u8 = 128;

/// A command's failure: the exit code and the line printed on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The process exit code.
    pub code: u8,
    /// One line saying what went wrong, naming the bad value.
    pub message: String,
}

impl Failure {
    /// A failure with `code` and `message`.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The command could not be started.
    pub fn spawn(program: &str, err: &io::Error) -> Self {
        let code = match err.kind() {
            io::ErrorKind::NotFound => NOT_FOUND,
            _ => CANNOT_EXECUTE,
        };
        Self::new(code, format!("cannot run {program:?}: {err}"))
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, always: a multi-line cause would break log scrapers and `2>` redirections.
        f.write_str(&self.message.replace('\n', " "))
    }
}

impl From<BuildError> for Failure {
    fn from(err: BuildError) -> Self {
        Self::new(CONFIG, err.to_string())
    }
}

impl From<AcquireError> for Failure {
    fn from(err: AcquireError) -> Self {
        let code = match err {
            AcquireError::Input(_) => USAGE,
            _ => NOT_ACQUIRED,
        };
        Self::new(code, err.to_string())
    }
}

impl From<ReleaseError> for Failure {
    fn from(err: ReleaseError) -> Self {
        let code = match err {
            ReleaseError::Input(_) => USAGE,
            ReleaseError::Expired { .. } => LOST,
            _ => UNAVAILABLE,
        };
        Self::new(code, err.to_string())
    }
}

/// The exit code that reports a child's exit status: its own code, or `128 + N` for signal N.
pub fn of_child(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(SOFTWARE),
        (None, Some(signal)) => signaled(signal),
        (None, None) => SOFTWARE,
    }
}

/// The exit code for death by signal `signal`.
pub fn signaled(signal: i32) -> u8 {
    u8::try_from(i32::from(SIGNALED) + signal).unwrap_or(u8::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn child_codes_pass_through_and_signals_add_128() {
        assert_eq!(of_child(ExitStatus::from_raw(0)), 0);
        assert_eq!(of_child(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(of_child(ExitStatus::from_raw(15)), 143);
        assert_eq!(of_child(ExitStatus::from_raw(9)), 137);
    }

    #[test]
    fn messages_are_one_line() {
        let f = Failure::new(CONFIG, "a\nb");
        assert_eq!(f.to_string(), "a b");
    }
}
