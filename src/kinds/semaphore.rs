//! The counting semaphore: at most `permits` holders of a resource at once, decided slot by slot.
//!
//! Permit `i` is an ordinary lock on the slot key `prefix + SEMAPHORE_TAG + resource + ":slot:" +
//! i`, taken at the usual majority, so each slot has at most one holder and the semaphore at most
//! `permits` (the argument, and why counting permits per master is unsafe, is in
//! [`crate::core::semaphore`] and `docs/safety.md`). A round aims at one slot: every master takes it
//! for our token if it is free there (one round trip on a free semaphore), and otherwise names the
//! first slot it has free. A lost round is cleaned up like a plain lock's, and the next round aims
//! at the slot most masters named, at once, a few times within one attempt; when none is free the
//! retry loop waits for the release of any slot. A held permit is a plain lock on its slot key, so
//! extend, release, the watchdog, the lost signal and release on drop are the plain lock's.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use redis::Value;

use crate::client::{Guard, Inner};
use crate::core::semaphore::{aim, check_permits, in_use_elsewhere, reaim, Reaim, SlotReply};
use crate::core::{RetryPlan, Timing};
use crate::error::{AcquireError, InputError, NodeErrorKind};
use crate::link::Call;
use crate::lua::{eval, int_reply, SEMAPHORE_ACQUIRE, SEMAPHORE_EXTEND};
use crate::names::ttl_millis;
use crate::ops::{LockOps, PlainLock};

/// A held permit: the plain lock on its slot key, and which slot it is. Its extend also keeps the
/// semaphore's permits key alive (`semaphore_extend.lua`), so that key outlives every slot held.
struct Permit {
    lock: PlainLock,
    slot: u32,
    /// The slot key and the permits key, for the extend.
    keys: [String; 2],
    token: Arc<str>,
    permits: u32,
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("lock", &self.lock)
            .field("slot", &self.slot)
            .finish()
    }
}

impl LockOps for Permit {
    fn extend(&self, ttl_ms: u64) -> Call {
        let mut cmd = eval(&SEMAPHORE_EXTEND, &self.keys);
        cmd.push(&*self.token).push(ttl_ms).push(self.permits);
        Call::Script(cmd)
    }

    fn release(&self) -> Call {
        self.lock.release()
    }

    fn cleanup(&self) -> Call {
        self.lock.cleanup()
    }

    fn permit(&self) -> Option<u32> {
        Some(self.slot)
    }
}

/// One semaphore request: the resource, its slot keys and its permits key (the acquire script's
/// keys, in that order), and the slot to aim at next.
struct Semaphore<'a> {
    resource: &'a str,
    keys: Arc<[String]>,
    permits: u32,
    aim: AtomicU32,
}

/// Acquires one of `permits` permits of `resource`: retrying within `plan`, or one attempt when
/// `plan` is `None` (a few rounds at most, re-aiming at a slot the masters named free).
pub(crate) async fn acquire(
    inner: &Arc<Inner>,
    resource: &str,
    permits: u32,
    ttl: Duration,
    plan: Option<RetryPlan>,
) -> Result<Guard, AcquireError> {
    let permits = check_permits(permits).map_err(InputError::from)?;
    let timing = inner.check(resource, ttl)?;
    let keys: Vec<String> = inner.names().slots(resource, permits);
    let mut script_keys = keys.clone();
    script_keys.push(inner.names().semaphore_permits(resource));
    // A random first aim spreads clients that start together over the free slots.
    let first = inner.entropy().between(0, u64::from(permits - 1));
    let sem = Semaphore {
        resource,
        keys: script_keys.into(),
        permits,
        aim: AtomicU32::new(u32::try_from(first).unwrap_or(0)),
    };
    match plan {
        Some(plan) => {
            inner
                .retrying_woken(resource, plan, keys, || attempt(inner, &sem, timing))
                .await
        }
        None => attempt(inner, &sem, timing).await,
    }
}

/// Rounds until one wins, the masters name no other free slot, or
/// [`ROUNDS_PER_ATTEMPT`](crate::core::semaphore::ROUNDS_PER_ATTEMPT) are made.
async fn attempt(inner: &Arc<Inner>, sem: &Semaphore<'_>, timing: Timing) -> Result<Guard, AcquireError> {
    let mut rounds = 0;
    loop {
        let slot = sem.aim.load(Ordering::Relaxed);
        let (result, hints) = round(inner, sem, slot, timing).await;
        rounds += 1;
        let error = match result {
            Ok(guard) => return Ok(guard),
            Err(error) => error,
        };
        match reaim(aim(&hints), slot, rounds, error.is_retryable()) {
            Reaim::Again(next) => sem.aim.store(next, Ordering::Relaxed),
            Reaim::Stop(next) => {
                if let Some(next) = next {
                    sem.aim.store(next, Ordering::Relaxed);
                }
                return Err(error);
            }
        }
    }
}

/// One quorum round aiming at `slot`: the guard, or the error and the free slots masters named.
async fn round(
    inner: &Arc<Inner>,
    sem: &Semaphore<'_>,
    slot: u32,
    timing: Timing,
) -> (Result<Guard, AcquireError>, Vec<SlotReply>) {
    let token = match inner.entropy().token() {
        Ok(token) => token,
        Err(error) => return (Err(error), Vec::new()),
    };
    // Aims come from `0..permits` and from hints checked against the permits.
    let index = usize::try_from(slot % sem.permits).unwrap_or_default();
    let Some(key) = sem.keys.get(index) else {
        let what = format!("slot {slot} of the semaphore {:?}", sem.resource);
        return (Err(InputError::Unsupported { what }.into()), Vec::new());
    };
    let permits_key = sem.keys.last().cloned().unwrap_or_default();
    let permit = Permit {
        lock: PlainLock::sharing(&Arc::from(key.as_str()), &token),
        slot,
        keys: [key.clone(), permits_key],
        token: Arc::clone(&token),
        permits: sem.permits,
    };
    let key: Arc<str> = Arc::from(key.as_str());
    let mut cmd = eval(&SEMAPHORE_ACQUIRE, &sem.keys);
    cmd.push(&*token)
        .push(ttl_millis(timing.ttl()))
        .push(slot)
        .push(sem.permits);
    let cmd = Arc::new(cmd);
    let ops: Arc<dyn LockOps> = Arc::new(permit);
    let hints: Arc<Mutex<Vec<SlotReply>>> = Arc::new(Mutex::new(Vec::new()));
    let permits = sem.permits;
    let result = inner
        .acquire_round(sem.resource, key, token, timing, ops, |link| {
            let hints = Arc::clone(&hints);
            link.run_script(&cmd).map(move |reply| {
                let code = match reply? {
                    Value::Array(items) => {
                        return match mismatch_reply(&items) {
                            Some(in_use) => Err(NodeErrorKind::PermitsMismatch { in_use }),
                            None => Err(NodeErrorKind::Protocol(
                                format!("semaphore acquire answered {items:?}").into(),
                            )),
                        }
                    }
                    other => int_reply(other, "semaphore acquire")?,
                };
                match SlotReply::from_code(code, permits) {
                    Some(SlotReply::Took) => Ok(()),
                    Some(hint) => {
                        hints.lock().unwrap_or_else(PoisonError::into_inner).push(hint);
                        Err(NodeErrorKind::Held)
                    }
                    None => Err(NodeErrorKind::Protocol(
                        format!(
                            "semaphore acquire answered {code}, expected -1, -2 or a slot below {permits}"
                        )
                        .into(),
                    )),
                }
            })
        })
        .await;
    let hints = std::mem::take(&mut *hints.lock().unwrap_or_else(PoisonError::into_inner));
    // Holders counting another number of permits: refused with both numbers, and not retried.
    let result = result.map_err(
        |error| match in_use_elsewhere(error.failures().iter().map(|f| &f.kind)) {
            Some(in_use) => AcquireError::PermitsMismatch {
                resource: sem.resource.to_owned(),
                asked: sem.permits,
                in_use,
            },
            None => error,
        },
    );
    (result, hints)
}

/// The permits in `{-3, n}`, the acquire script's answer when holders there count `n` permits.
fn mismatch_reply(items: &[Value]) -> Option<u32> {
    match items {
        [Value::Int(-3), Value::Int(n)] => u32::try_from(*n).ok(),
        _ => None,
    }
}
