//! `quorlock acquire` and `quorlock release`: a lock held across several steps of a script.
//!
//! `acquire` takes the lock and prints its token, then exits *without* releasing it; the lock lives
//! for `--ttl` unless a later `quorlock release KEY TOKEN` ends it sooner. The token is the proof
//! of ownership: only its holder can release the lock. `release` takes the token as an argument,
//! from `QUORLOCK_TOKEN`, or from stdin, so that it need not appear in the process list.

use std::io::IsTerminal;
use std::time::Duration;

use quorlock::{Guard, Quorlock, ReleaseError};
use tokio::time::Instant;

use crate::args::{AcquireArgs, ReleaseArgs};
use crate::connect::{take, Masters};
use crate::duration::show;
use crate::exit::{self, Failure, OK};
use crate::report::{millis, Report};
use crate::signals::Signals;
use crate::waiting::Watch;
use crate::{secrets, voice, waiting};

/// Takes the lock and prints its token (or the report with `--json`, printed by the caller).
///
/// # Errors
/// Not acquired within `--wait` (75, or `-E N` when held elsewhere), interrupted (128 + signal),
/// or a configuration error.
pub async fn acquire(args: AcquireArgs, signals: &mut Signals, report: &mut Report) -> Result<u8, Failure> {
    let masters = Masters {
        args: args.masters.clone(),
        restart_grace: args.lock.restart_grace,
        lock_delay: args.lock.lock_delay,
    };
    masters
        .with_client(args.lock.wait(), |locks| {
            acquire_with(locks, args, signals, report)
        })
        .await
}

async fn acquire_with(
    locks: Quorlock,
    args: AcquireArgs,
    signals: &mut Signals,
    report: &mut Report,
) -> Result<u8, Failure> {
    report.set("ttl_ms", millis(args.lock.ttl));
    let started = Instant::now();
    let acquired = tokio::select! {
        acquired = waiting::while_waiting(&locks, &args.key, Watch::Lock, take(&locks, &args.key, args.lock.ttl, args.lock.fence)) => acquired,
        signal = signals.recv() => {
            report.set("waited_ms", millis(started.elapsed()));
            return Err(Failure::new(
                exit::signaled(signal as i32),
                format!("{signal} while waiting for the lock on {:?}", args.key),
            ));
        }
    };
    report.set("waited_ms", millis(started.elapsed()));
    let guard = acquired.map_err(|e| Failure::not_acquired(e, args.lock.conflict_exit_code))?;
    let validity = guard.validity();
    report.set("token", guard.token());
    report.set("fence", guard.fencing_token());
    report.set("validity_ms", millis(validity));
    if !args.json {
        match guard.fencing_token() {
            Some(fence) => println!("{} {fence}", guard.token()),
            None => println!("{}", guard.token()),
        }
    }
    if std::io::stderr().is_terminal() {
        voice::note(&format!(
            "acquired {:?}, valid for {}; release it with: quorlock release {:?} {}",
            args.key,
            show(validity),
            args.key,
            guard.token()
        ));
    }
    keep_held(guard);
    Ok(OK)
}

/// Leaves the lock on the masters when this process exits: a guard releases on drop, and here the
/// release belongs to a later `quorlock release`. Nothing else of the guard is left: the process
/// only settles (the round's requests to the slower masters) and ends.
fn keep_held(guard: Guard) {
    std::mem::forget(guard);
}

/// Releases the lock held under the given token (the argument, `QUORLOCK_TOKEN`, or stdin).
///
/// # Errors
/// No token anywhere (64), not held by this token on a majority (76: it had expired, or the token
/// is wrong), unconfirmed (69: too many masters unreachable), or a configuration error.
pub async fn release(args: ReleaseArgs, report: &mut Report) -> Result<u8, Failure> {
    if args.token.is_none() && std::io::stdin().is_terminal() {
        voice::note("no TOKEN given: type it, then Enter");
    }
    let token = secrets::token(args.token.clone(), std::io::stdin().lock())?;
    let masters = Masters {
        args: args.masters.clone(),
        restart_grace: None,
        lock_delay: None,
    };
    masters
        .with_client(Duration::ZERO, |locks| async move {
            let released = locks.release_token(&args.key, &token).await;
            let (outcome, counts) = match &released {
                Ok(released) => {
                    tracing::debug!(held = released.held, masters = released.masters, "lock released");
                    ("released", Some((released.held, released.masters)))
                }
                Err(ReleaseError::TakenOver { held, masters, .. }) => ("taken_over", Some((*held, *masters))),
                Err(ReleaseError::Absent { held, masters, .. }) => ("absent", Some((*held, *masters))),
                Err(ReleaseError::Expired { held, masters, .. }) => ("expired", Some((*held, *masters))),
                Err(ReleaseError::Unconfirmed { held, masters, .. }) => {
                    ("unconfirmed", Some((*held, *masters)))
                }
                Err(_) => ("refused", None),
            };
            report.set("outcome", outcome);
            if let Some((held, masters)) = counts {
                report.set("held", held);
                report.set("masters", masters);
            }
            released?;
            Ok(OK)
        })
        .await
}
