//! The command run under the lock: spawned in its own process group, signalled as a group.
//!
//! A command is often a shell with children of its own (`sh -c 'a && b'`). When the lock is lost,
//! all of them must stop, not only the shell, so the command leads a new process group and every
//! signal goes to the whole group.

use std::ffi::OsString;
use std::io;
use std::process::ExitStatus;

use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tracing::{debug, warn};

use crate::cli::exit::Failure;

/// A running command and its process group.
#[derive(Debug)]
pub struct Supervised {
    child: Child,
    group: Pid,
}

/// Starts `command` (program and arguments) with `env` added to quorlock's environment.
///
/// # Errors
/// A failure with exit code 127 when the program is not found, 126 when it cannot be executed.
pub fn spawn(command: &[OsString], env: &[(&str, String)]) -> Result<Supervised, Failure> {
    let Some((program, args)) = command.split_first() else {
        return Err(Failure::new(
            crate::cli::exit::USAGE,
            "no command given after the key",
        ));
    };
    let mut cmd = Command::new(program);
    cmd.args(args).process_group(0);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let child = cmd
        .spawn()
        .map_err(|e| Failure::spawn(&program.to_string_lossy(), &e))?;
    let pid = child.id().and_then(|id| i32::try_from(id).ok()).ok_or_else(|| {
        Failure::new(
            crate::cli::exit::SOFTWARE,
            "the command started without a process id",
        )
    })?;
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

    /// Waits for the command to exit (cancel safe).
    ///
    /// # Errors
    /// When waiting on the child fails.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }
}
