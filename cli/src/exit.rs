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
/// masters answered (`EX_TEMPFAIL`: try again later). `-E N` turns the first case into `N`.
pub const NOT_ACQUIRED: u8 = 75;
/// The lock was lost: while the command ran (`run`), or before it was released (`release`, or
/// `run` finding at release time that the lock had expired).
pub const LOST: u8 = 76;
/// The masters are not configured or not usable: no masters given, an invalid URL, a file that
/// cannot be read (`--nodes-file`, `--tls-*`), rejected credentials (`EX_CONFIG`).
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
    /// Why a lock was not acquired, when that is the failure.
    pub refusal: Option<Refusal>,
}

/// Why a lock was not acquired within `--wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Another holder has it (on at least one master): flock's conflict, which `-E` and `-q` are
    /// about.
    Held,
    /// Too few masters answered, or answered in time, to grant it.
    NoMajority,
}

impl Refusal {
    /// The name in JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Held => "held",
            Refusal::NoMajority => "no_majority",
        }
    }
}

impl Failure {
    /// A failure with `code` and `message`.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            refusal: None,
        }
    }

    /// The lock was not acquired; with `conflict_code` (`-E N`), a lock held elsewhere exits `N`.
    pub fn not_acquired(err: AcquireError, conflict_code: Option<u8>) -> Self {
        Self::from(err).with_conflict_code(conflict_code)
    }

    /// This failure, exiting with `conflict_code` if it is the lock being held elsewhere.
    fn with_conflict_code(mut self, conflict_code: Option<u8>) -> Self {
        if let (Some(Refusal::Held), Some(code)) = (self.refusal, conflict_code) {
            self.code = code;
        }
        self
    }

    /// Whether this is the lock being held elsewhere, which `-q` keeps quiet about.
    pub fn is_held_elsewhere(&self) -> bool {
        self.refusal == Some(Refusal::Held)
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
        let (code, refusal) = match err {
            AcquireError::Input(_) => (USAGE, None),
            AcquireError::Rng(_) => (SOFTWARE, None),
            _ if err.is_contended() => (NOT_ACQUIRED, Some(Refusal::Held)),
            _ => (NOT_ACQUIRED, Some(Refusal::NoMajority)),
        };
        Self {
            refusal,
            ..Self::new(code, err.to_string())
        }
    }
}

impl From<ReleaseError> for Failure {
    fn from(err: ReleaseError) -> Self {
        let code = match err {
            ReleaseError::Input(_) => USAGE,
            ReleaseError::Expired { .. } | ReleaseError::TakenOver { .. } | ReleaseError::Absent { .. } => {
                LOST
            }
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

    #[test]
    fn only_a_lock_held_elsewhere_takes_the_conflict_exit_code() {
        let refused = |refusal| Failure {
            refusal: Some(refusal),
            ..Failure::new(NOT_ACQUIRED, "not acquired")
        };
        let held = refused(Refusal::Held).with_conflict_code(Some(0));
        assert_eq!((held.code, held.is_held_elsewhere()), (0, true));
        let down = refused(Refusal::NoMajority).with_conflict_code(Some(0));
        assert_eq!((down.code, down.is_held_elsewhere()), (NOT_ACQUIRED, false));
        assert_eq!(refused(Refusal::Held).with_conflict_code(None).code, NOT_ACQUIRED);
        assert_eq!(Failure::new(CONFIG, "x").with_conflict_code(Some(0)).code, CONFIG);
    }
}
