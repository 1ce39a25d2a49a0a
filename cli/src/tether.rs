//! The command dies with quorlock: a small process between the two that kills the command's group
//! when quorlock is gone.
//!
//! `quorlock run` releases the lock when the command ends and stops the command when the lock is
//! lost. Both need quorlock alive. Killed by SIGKILL (the OOM killer, `kill -9`), it can do neither:
//! the command would run on while the lock expires and another holder starts. So the command is not
//! started directly. quorlock starts itself again as `quorlock __tethered PID PROGRAM ARGS...` in
//! the command's new process group, and that process:
//! - asks the kernel for a signal when its parent dies (`PR_SET_PDEATHSIG`) and, on it, SIGKILLs
//!   the whole group, so a shell's children and background jobs go too, not only the shell;
//! - starts the command, which inherits the group, the environment and the standard streams, and
//!   gets the default signal mask;
//! - catches the stop signals quorlock forwards to the group (they are for the command), and exits
//!   as the command did: with its code, killed by the same signal where it can be (SIGKILL, and
//!   any signal this process has no handler for), else with `128 + N`, which quorlock turns into
//!   the same exit code.
//!
//! Nothing here needs `unsafe`: the parent-death signal is set in the process itself, not between
//! `fork` and `exec`, and checked against the parent's process id so that a parent that died before
//! it was set is seen too.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use nix::sys::prctl::set_pdeathsig;
use nix::sys::signal::{killpg, raise, Signal};
use nix::unistd::{getpgrp, getppid, Pid};
use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};

use crate::exit::{self, Failure, SOFTWARE, USAGE};

/// The hidden first argument that makes `quorlock` the process between itself and the command.
pub const ARG: &str = "__tethered";

/// What the kernel sends when the parent dies. Any other sender is told apart by the parent id.
const PARENT_DIED: Signal = Signal::SIGUSR2;

/// The arguments that start `command` tethered to this process.
pub fn arguments(command: &[OsString]) -> Vec<OsString> {
    let mut args = Vec::with_capacity(command.len() + 2);
    args.push(ARG.into());
    args.push(std::process::id().to_string().into());
    args.extend(command.iter().cloned());
    args
}

/// The command line of the process between quorlock and a command.
#[derive(Debug)]
pub struct Tethered {
    parent: Pid,
    program: OsString,
    args: Vec<OsString>,
}

/// `Some` when this process was started as the process between quorlock and a command: what to run,
/// or a usage failure for a malformed command line. `None` for any other command line.
pub fn requested() -> Option<Result<Tethered, Failure>> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != ARG {
        return None;
    }
    let parent = args
        .next()
        .and_then(|pid| pid.to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid > 0);
    let program = args.next();
    Some(match (parent, program) {
        (Some(parent), Some(program)) => Ok(Tethered {
            parent: Pid::from_raw(parent),
            program,
            args: args.collect(),
        }),
        _ => Err(Failure::new(
            USAGE,
            format!("{ARG} is for quorlock's own use: {ARG} PARENT-PID PROGRAM [ARGS...]"),
        )),
    })
}

impl Tethered {
    /// Runs the command and returns the exit code to end with.
    ///
    /// # Errors
    /// The command could not be started (126, 127), or signals could not be caught (70).
    pub async fn run(self) -> Result<u8, Failure> {
        tethered(self.parent, &self.program, &self.args).await
    }
}

/// Runs `program` until it exits, or kills its group once `parent` is gone.
async fn tethered(parent: Pid, program: &OsString, args: &[OsString]) -> Result<u8, Failure> {
    let failed = |what: &str, err: &dyn std::fmt::Display| Failure::new(SOFTWARE, format!("{what}: {err}"));
    // The stops quorlock forwards to the group are for the command: caught here, they no longer end
    // this process. The command starts with the default actions (handlers do not survive `exec`).
    let mut stops = Vec::new();
    for kind in [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ] {
        stops.push(signal(kind).map_err(|e| failed("cannot catch signals", &e))?);
    }
    let mut parent_died =
        signal(SignalKind::from_raw(PARENT_DIED as i32)).map_err(|e| failed("cannot catch signals", &e))?;
    set_pdeathsig(PARENT_DIED).map_err(|e| failed("cannot tie the command to quorlock's life", &e))?;
    if getppid() != parent {
        // quorlock died before the signal was set: it can no longer release nor stop anything.
        return Ok(SOFTWARE);
    }
    let mut child = Command::new(program)
        .args(args)
        .spawn()
        .map_err(|e| Failure::spawn(&program.to_string_lossy(), &e))?;
    loop {
        tokio::select! {
            status = child.wait() => {
                return match status {
                    Ok(status) => Ok(exit_as(status)),
                    Err(err) => {
                        let _ = killpg(getpgrp(), Signal::SIGKILL);
                        Err(failed("lost track of the command", &err))
                    }
                };
            }
            _ = parent_died.recv() => {
                // Reparented: quorlock is gone, and with it the lock's renewal and release.
                if getppid() != parent {
                    let _ = killpg(getpgrp(), Signal::SIGKILL);
                }
            }
        }
    }
}

/// The exit code that reports how the command ended, after trying to end this process the same
/// way: by the same signal, which only works for a signal this process does not catch itself, and
/// not tried when the command dumped core (this process would dump a second one).
fn exit_as(status: ExitStatus) -> u8 {
    if let Some(signal) = status.signal().and_then(|s| Signal::try_from(s).ok()) {
        if !status.core_dumped() {
            let _ = raise(signal);
        }
    }
    exit::of_child(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_follows_the_marker_and_this_process_id() {
        let args = arguments(&["sh".into(), "-c".into(), "exit 3".into()]);
        assert_eq!(args[0], ARG);
        assert_eq!(args[1], std::process::id().to_string().as_str());
        assert_eq!(&args[2..], ["sh", "-c", "exit 3"]);
    }
}
