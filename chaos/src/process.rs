//! Child-process plumbing for the process backend: spawning a child that dies with the
//! thread that spawned it, stopping and continuing it with signals (returning once the stop
//! is in effect), and killing and reaping it.
//!
//! It is a file of its own so that the crate's one `unsafe` block (the `pre_exec` hook that
//! asks the kernel for a parent-death signal) is confined here, away from the cluster logic.

use std::fs;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::Duration;

use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;

use crate::error::HarnessError;

/// Spawns `cmd`; the child gets SIGKILL when the spawning thread of this process goes away.
pub(crate) fn spawn(cmd: &mut Command) -> io::Result<Child> {
    die_with_parent(cmd);
    cmd.spawn()
}

/// Makes the child receive SIGKILL when the spawning thread of this process goes away.
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child between fork and exec. It only calls
    // prctl(2) and getppid(2), which are async-signal-safe, and builds io::Errors from raw
    // OS codes, which does not allocate; it takes no locks and touches no shared state.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// The child's process id as `nix` wants it.
pub(crate) fn pid_of(child: &Child) -> Pid {
    Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX))
}

/// Stops the process with SIGSTOP; returns once it is stopped (bounded, best effort).
pub(crate) fn stop(pid: Pid) -> Result<(), HarnessError> {
    send(pid, Signal::SIGSTOP)?;
    wait_for_stopped(pid, true);
    Ok(())
}

/// Continues the process with SIGCONT; returns once it is no longer stopped (bounded, best
/// effort).
pub(crate) fn cont(pid: Pid) -> Result<(), HarnessError> {
    send(pid, Signal::SIGCONT)?;
    wait_for_stopped(pid, false);
    Ok(())
}

fn send(pid: Pid, sig: Signal) -> Result<(), HarnessError> {
    signal::kill(pid, sig).map_err(|source| HarnessError::Signal {
        pid: u32::try_from(pid.as_raw()).unwrap_or(0),
        signal: sig.as_str(),
        source,
    })
}

/// Kills the child with SIGKILL and waits for it to exit.
///
/// # Errors
/// When waiting for the child fails.
pub(crate) fn kill_and_reap(child: &mut Child) -> io::Result<()> {
    // Ignore errors from kill: the child may have exited already; wait() tells.
    let _ = child.kill();
    child.wait().map(|_| ())
}

/// Continues the child in case it is stopped, kills it and reaps it, ignoring every error:
/// for cleanup, where nothing more can be done about a failure.
pub(crate) fn discard(mut child: Child) {
    let _ = signal::kill(pid_of(&child), Signal::SIGCONT);
    let _ = child.kill();
    let _ = child.wait();
}

/// Waits (bounded, best effort via /proc) until the process is stopped or no longer stopped,
/// so that a pause is in effect when `stop` returns.
fn wait_for_stopped(pid: Pid, stopped: bool) {
    let stat_path = format!("/proc/{}/stat", pid.as_raw());
    for _ in 0..200 {
        let Ok(stat) = fs::read_to_string(&stat_path) else {
            return;
        };
        // Format: "pid (comm) S ..."; comm may contain spaces, so split after the last ')'.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        match state {
            Some('T') | Some('t') if stopped => return,
            Some(s) if !stopped && s != 'T' && s != 't' => return,
            None => return,
            _ => std::thread::sleep(Duration::from_millis(5)),
        }
    }
}
