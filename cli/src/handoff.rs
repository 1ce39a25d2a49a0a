//! `quorlock acquire` and `quorlock release`: a lock held across several steps of a script.
//!
//! `acquire` takes the lock and prints its token, then exits *without* releasing it; the lock lives
//! for `--ttl` unless a later `quorlock release KEY TOKEN` ends it sooner. The token is the proof
//! of ownership: only its holder can release the lock.

use std::io::IsTerminal;

use quorlock::{Guard, Quorlock};
use serde_json::json;

use crate::args::{AcquireArgs, ReleaseArgs};
use crate::connect::{take, Masters};
use crate::duration::show;
use crate::exit::{self, Failure, OK};
use crate::signals::Signals;

/// Takes the lock and prints its token (or JSON with `--json`).
///
/// # Errors
/// Not acquired within `--wait` (75), interrupted (128 + signal), or a configuration error.
pub async fn acquire(args: AcquireArgs, masters: &Masters, signals: &mut Signals) -> Result<u8, Failure> {
    masters
        .with_client(args.lock.wait, |locks| acquire_with(locks, args, signals))
        .await
}

async fn acquire_with(locks: Quorlock, args: AcquireArgs, signals: &mut Signals) -> Result<u8, Failure> {
    let guard = tokio::select! {
        acquired = take(&locks, &args.key, args.lock.ttl, args.lock.fence) => acquired?,
        signal = signals.recv() => {
            return Err(Failure::new(
                exit::signaled(signal as i32),
                format!("{signal} while waiting for the lock on {:?}", args.key),
            ));
        }
    };
    let validity = guard.validity();
    if args.json {
        let out = json!({
            "key": args.key,
            "token": guard.token(),
            "validity_ms": u64::try_from(validity.as_millis()).unwrap_or(u64::MAX),
            "ttl_ms": u64::try_from(args.lock.ttl.as_millis()).unwrap_or(u64::MAX),
            "fence": guard.fencing_token(),
        });
        println!("{out}");
    } else if let Some(fence) = guard.fencing_token() {
        println!("{} {fence}", guard.token());
    } else {
        println!("{}", guard.token());
    }
    if std::io::stderr().is_terminal() {
        eprintln!(
            "quorlock: acquired {:?}, valid for {}; release it with: quorlock release {:?} {}",
            args.key,
            show(validity),
            args.key,
            guard.token()
        );
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

/// Releases the lock held under the given token.
///
/// # Errors
/// Not held by this token on a majority (76: it had expired, or the token is wrong), unconfirmed
/// (69: too many masters unreachable), or a configuration error.
pub async fn release(args: ReleaseArgs, masters: &Masters) -> Result<u8, Failure> {
    masters
        .with_client(std::time::Duration::ZERO, |locks| async move {
            let released = locks.release_token(&args.key, &args.token).await?;
            tracing::debug!(held = released.held, masters = released.masters, "lock released");
            Ok(OK)
        })
        .await
}
