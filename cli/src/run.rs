//! `quorlock run`: take the lock, run the command while the lock is held, release it after.
//!
//! The order of events is what makes this safe to put in front of a cron job or a migration:
//! 1. acquire, waiting up to `--wait` (exit 75 if not acquired, or `-E N` when it is held
//!    elsewhere; a stop signal aborts the wait), with the status line on a terminal;
//! 2. start the command with `QUORLOCK_KEY`, `QUORLOCK_TOKEN` and `QUORLOCK_VALIDITY_MS` (and
//!    `QUORLOCK_FENCE`, the fencing token, with `--fence`; `QUORLOCK_PERMIT`, the slot, with
//!    `--permits P`); by default (or with `--exclusive`) the write hold of the read-write lock on
//!    the key, whose key is the plain lock's, fenced with `--fence`; with `--shared`, a read hold;
//! 3. while it runs, the watchdog keeps the lock alive; if the lock is lost anyway, SIGTERM the command's process
//!    group, SIGKILL it after `--grace`, and exit 76;
//! 4. forward SIGINT / SIGTERM / SIGHUP to the command (SIGKILL after `--grace`); after such a stop,
//!    wait for the whole group, not only the command (see `child`);
//! 5. release the lock the moment the command ends, and exit with the command's own code once the
//!    release has reached every master that answers (not only the majority it returned at).
//!
//! With `--json`, what happened goes into the invocation's report (see `report`).

use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use quorlock::{Guard, Quorlock, ReleaseError};
use tokio::time::Instant;
use tracing::{debug, info};

use crate::args::{Hold, RunArgs};
use crate::child::{self, Supervised};
use crate::connect::{take_hold, Masters};
use crate::duration::show;
use crate::exit::{self, Failure, LOST, SOFTWARE};
use crate::report::{millis, Report};
use crate::signals::Signals;
use crate::waiting::Watch;
use crate::{voice, waiting};

/// Runs the command under the lock on `args.key` and returns the exit code.
///
/// # Errors
/// A [`Failure`] carrying the exit code: not acquired (75, or `-E N`), lost (76), cannot run the
/// command (126/127), interrupted while waiting (128 + signal), or a configuration error.
pub async fn run(args: RunArgs, signals: &mut Signals, report: &mut Report) -> Result<u8, Failure> {
    let masters = Masters {
        args: args.masters.clone(),
        restart_grace: args.lock.restart_grace,
        lock_delay: args.lock.lock_delay,
    };
    masters
        .with_client(args.lock.wait(), |locks| run_with(locks, args, signals, report))
        .await
}

async fn run_with(
    locks: Quorlock,
    args: RunArgs,
    signals: &mut Signals,
    report: &mut Report,
) -> Result<u8, Failure> {
    report.set("ttl_ms", millis(args.lock.ttl));
    let started = Instant::now();
    let watch = match args.hold() {
        Hold::Permit(permits) => Watch::Permits(permits),
        Hold::Shared => Watch::Read,
        Hold::Exclusive { .. } => Watch::Write,
    };
    let acquired = tokio::select! {
        acquired = waiting::while_waiting(&locks, &args.key, watch, take_hold(&locks, &args.key, args.lock.ttl, args.hold())) => acquired,
        signal = signals.recv() => {
            report.set("waited_ms", millis(started.elapsed()));
            return Err(Failure::new(
                exit::signaled(signal as i32),
                format!("{signal} while waiting for the lock on {:?}; nothing was run", args.key),
            ));
        }
    };
    report.set("waited_ms", millis(started.elapsed()));
    let guard = acquired.map_err(|e| Failure::not_acquired(e, args.lock.conflict_exit_code))?;
    report.set("token", guard.token());
    report.set("fence", guard.fencing_token());
    report.set("validity_ms", millis(guard.validity()));
    info!(key = %args.key, validity_ms = guard.validity().as_millis() as u64, "lock acquired");
    // Renewed every ttl/3 by the watchdog while the command runs; `guard.lost()` fires if it fails.
    guard.keep_alive();
    let mut env = vec![
        ("QUORLOCK_KEY", args.key.clone()),
        ("QUORLOCK_TOKEN", guard.token().to_owned()),
        ("QUORLOCK_VALIDITY_MS", guard.validity().as_millis().to_string()),
    ];
    if let Some(fence) = guard.fencing_token() {
        env.push(("QUORLOCK_FENCE", fence.to_string()));
    }
    if let Some(slot) = guard.permit() {
        report.set("permit", slot);
        env.push(("QUORLOCK_PERMIT", slot.to_string()));
    }
    let mut command = match child::spawn(&args.argv(), &env) {
        Ok(command) => command,
        Err(failure) => {
            release_quietly(guard).await;
            return Err(failure);
        }
    };
    let end = supervise(&mut command, &guard, signals, args.grace).await;
    match &end {
        End::Exited(status) | End::Lost(status) => {
            use std::os::unix::process::ExitStatusExt;
            report.set("child_exit_code", status.code());
            report.set(
                "child_signal",
                status
                    .signal()
                    .map(|s| Signal::try_from(s).map_or_else(|_| s.to_string(), |s| s.to_string())),
            );
        }
        End::Unknown(_) => {}
    }
    report.set("lost", matches!(end, End::Lost(_)));
    finish(end, guard, &args, report).await
}

/// How the command ended.
#[derive(Debug)]
enum End {
    /// It exited on its own, or after a forwarded signal.
    Exited(ExitStatus),
    /// The lock was lost, and the command was stopped.
    Lost(ExitStatus),
    /// Waiting on the command failed.
    Unknown(std::io::Error),
}

/// Waits for the command, stopping it when the lock is lost and forwarding stop signals.
async fn supervise(command: &mut Supervised, guard: &Guard, signals: &mut Signals, grace: Duration) -> End {
    let mut lost = false;
    let mut kill_at: Option<Instant> = None;
    // Set with the first stop (lost lock or forwarded signal): when the group gets SIGKILL.
    let mut stopping: Option<Instant> = None;
    loop {
        let deadline = kill_at.unwrap_or_else(Instant::now);
        tokio::select! {
            biased;
            () = guard.lost(), if !lost => {
                lost = true;
                debug!("lock lost; stopping the command");
                command.signal(Signal::SIGTERM);
                stopping = Some(*kill_at.get_or_insert_with(|| Instant::now() + grace));
            }
            status = command.wait() => {
                if let Some(kill_at) = stopping {
                    // What the command started may outlive it: not past the release. A second stop
                    // signal meanwhile kills the group at once.
                    tokio::select! {
                        () = command.clear_group(kill_at) => {}
                        signal = signals.recv() => {
                            debug!(%signal, "stopped again; killing the command's group now");
                            command.clear_group(Instant::now()).await;
                        }
                    }
                }
                return match status {
                    // The lock may have run out while the command was finishing.
                    Ok(status) if lost || guard.is_lost() => End::Lost(status),
                    Ok(status) => End::Exited(status),
                    Err(err) => End::Unknown(err),
                };
            }
            signal = signals.recv() => {
                debug!(%signal, "forwarding to the command");
                command.signal(signal);
                stopping = Some(*kill_at.get_or_insert_with(|| Instant::now() + grace));
            }
            () = tokio::time::sleep_until(deadline), if kill_at.is_some() => {
                debug!("grace period over; killing the command");
                command.signal(Signal::SIGKILL);
                kill_at = None;
            }
        }
    }
}

/// Releases the lock and turns the command's end into quorlock's exit code.
async fn finish(end: End, guard: Guard, args: &RunArgs, report: &mut Report) -> Result<u8, Failure> {
    let key = &args.key;
    match end {
        End::Lost(status) => {
            report.set("released", release_quietly(guard).await);
            Err(Failure::new(
                LOST,
                format!(
                    "lock on {key:?} was lost while the command ran (not kept on a majority of masters); the command was stopped ({})",
                    describe(status)
                ),
            ))
        }
        End::Unknown(err) => {
            report.set("released", release_quietly(guard).await);
            Err(Failure::new(
                SOFTWARE,
                format!("lost track of the command: {err}"),
            ))
        }
        End::Exited(status) => {
            let released = guard.release().await;
            report.set("released", released.is_ok());
            match released {
                Ok(released) => {
                    debug!(held = released.held, masters = released.masters, "lock released");
                    Ok(exit::of_child(status))
                }
                Err(
                    err @ (ReleaseError::Expired { .. }
                    | ReleaseError::TakenOver { .. }
                    | ReleaseError::Absent { .. }),
                ) => Err(Failure::new(
                    LOST,
                    format!("the command ended ({}), but {err}", describe(status)),
                )),
                Err(err) => {
                    // The command's own result stands; the keys left behind expire with the TTL.
                    voice::warning(&format!("{err}; the rest expires within {}", show(args.lock.ttl)));
                    Ok(exit::of_child(status))
                }
            }
        }
    }
}

/// Releases a lock whose outcome no longer changes the exit code; whether the release was
/// confirmed.
async fn release_quietly(guard: Guard) -> bool {
    match guard.release().await {
        Ok(_) => true,
        Err(err) => {
            debug!(%err, "release after the command");
            false
        }
    }
}

/// "exit code 3", "killed by SIGTERM".
fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal().map(Signal::try_from)) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(Ok(signal))) => format!("killed by {signal}"),
        (None, Some(Err(_))) | (None, None) => status.to_string(),
    }
}
