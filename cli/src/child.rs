//! The command run under the lock: spawned in its own process group, signalled as a group.
//!
//! A command is often a shell with children of its own (`sh -c 'a && b'`). When the lock is lost,
//! all of them must stop, not only the shell, so the command leads a new process group and every
//! signal goes to the whole group. A member may outlive the command itself (a background job that
//! ignores the signal, as `sh` makes its `&` jobs ignore SIGINT): after a stop, the lock is only
//! released once the whole group is gone, SIGKILLed at the end of the grace period if need be.
//! The group is led by quorlock's own tether (see `tether`), which starts the command in it and
//! kills the group if quorlock dies.

use std::ffi::OsString;
use std::io;
use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::exit::Failure;
use crate::tether;

/// This program, for starting the command through it.
const SELF: &str = "/proc/self/exe";

/// How often a stopped command's group is looked at while it is still running.
const GROUP_POLL: Duration = Duration::from_millis(50);
/// How long a group may outlive its SIGKILL (a process in uninterruptible sleep) before the lock is
/// released regardless, with a warning.
const AFTER_KILL: Duration = Duration::from_secs(1);

/// A running command and its process group.
#[derive(Debug)]
pub struct Supervised {
    child: Child,
    group: Pid,
}

/// Starts `command` (program and arguments) with `env` added to quorlock's environment.
///
/// # Errors
/// A failure with exit code 127 when the program is not found, 126 when it cannot be executed. When
/// it is started through the tether, the tether reports these the same way, as the command's exit.
pub fn spawn(command: &[OsString], env: &[(&str, String)]) -> Result<Supervised, Failure> {
    let Some((program, args)) = command.split_first() else {
        return Err(Failure::new(crate::exit::USAGE, "no command given after the key"));
    };
    // Through quorlock itself (see `tether`), so that the command does not outlive quorlock; straight
    // when this system has no `/proc/self/exe` to start it from.
    let (mut cmd, started) = if Path::new(SELF).exists() {
        let mut cmd = Command::new(SELF);
        cmd.arg0("quorlock").args(tether::arguments(command));
        (cmd, SELF.into())
    } else {
        warn!("no {SELF}: the command is not stopped if quorlock is killed");
        let mut cmd = Command::new(program);
        cmd.args(args);
        (cmd, program.to_string_lossy())
    };
    cmd.process_group(0);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let child = cmd.spawn().map_err(|e| Failure::spawn(&started, &e))?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| Failure::new(crate::exit::SOFTWARE, "the command started without a process id"))?;
    debug!(pid, "command started");
    Ok(Supervised {
        child,
        group: Pid::from_raw(pid),
    })
}

impl Supervised {
    /// Sends `signal` to the command's whole process group.
    pub fn signal(&self, signal: Signal) {
        match killpg(self.group, signal) {
            // The group is gone: the command and everything it started have exited.
            Ok(()) | Err(Errno::ESRCH) => {
                debug!(group = self.group.as_raw(), %signal, "signalled the command")
            }
            Err(err) => warn!(group = self.group.as_raw(), %signal, %err, "could not signal the command"),
        }
    }

    /// After a stop was asked for and the command itself has exited: waits until no process of its
    /// group is left running, sending SIGKILL to the group at `kill_at` (the end of the grace
    /// period). Gives up, with a warning, when the group outlives its SIGKILL by [`AFTER_KILL`].
    pub async fn clear_group(&self, kill_at: Instant) {
        let mut killed = false;
        loop {
            let running = running_in_group(self.group);
            if running == 0 {
                return;
            }
            let now = Instant::now();
            if !killed && now >= kill_at {
                debug!(running, "the command's group outlived it; killing the group");
                self.signal(Signal::SIGKILL);
                killed = true;
            } else if killed && now >= kill_at + AFTER_KILL {
                warn!(
                    group = self.group.as_raw(),
                    running, "processes of the command's group are still running after SIGKILL"
                );
                return;
            }
            tokio::time::sleep(GROUP_POLL).await;
        }
    }

    /// Waits for the command to exit (cancel safe).
    ///
    /// # Errors
    /// When waiting on the child fails.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }
}

/// How many processes of process group `group` are running. The kernel says whether the group has
/// any member at all; only when it has are they looked up in `/proc`, where zombies (exited, not yet
/// reaped, which a container's init may never do) do not count. Members the kernel knows of but
/// `/proc` does not show (another user's, under `hidepid`) count as running.
fn running_in_group(group: Pid) -> usize {
    if killpg(group, None) == Err(Errno::ESRCH) {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 1;
    };
    let (mut seen, mut running) = (0, 0);
    for stat in entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|entry| std::fs::read_to_string(entry.path().join("stat")).ok())
    {
        if let Some((pgrp, state)) = group_and_state(&stat) {
            if pgrp == group.as_raw() {
                seen += 1;
                if state != 'Z' && state != 'X' {
                    running += 1;
                }
            }
        }
    }
    if seen == 0 {
        1
    } else {
        running
    }
}

/// The process group and state of a `/proc/PID/stat` line: `pid (comm) state ppid pgrp ...`, where
/// `comm` may itself contain spaces and parentheses.
fn group_and_state(stat: &str) -> Option<(i32, char)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((pgrp, state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_and_state_are_read_past_any_command_name() {
        assert_eq!(
            group_and_state("4242 (sleep) S 1 4240 4240 0 -1 4194304 90 0"),
            Some((4240, 'S'))
        );
        assert_eq!(group_and_state("77 (a) (b c) Z 1 70 70 0 -1"), Some((70, 'Z')));
        assert_eq!(group_and_state("garbage"), None);
        assert_eq!(group_and_state("1 (x) R 0 notanumber"), None);
    }

    #[test]
    fn this_process_group_is_running_and_a_free_group_is_not() {
        let ours = nix::unistd::getpgrp();
        assert!(running_in_group(ours) >= 1);
        // Group ids are process ids; the largest allowed pid is never a live group here.
        assert_eq!(running_in_group(Pid::from_raw(4_194_304)), 0);
    }
}
