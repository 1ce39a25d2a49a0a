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
use std::sync::Arc;

use redis::Value;

use futures::future::BoxFuture;

use crate::api::client::request::{Choose, Request};
use crate::api::client::Guard;
use crate::api::kinds::kind::{Ctx, Held, Kind, Lost, Wait};
use crate::api::lock::Lock;
use crate::base::error::{AcquireError, InputError, NodeErrorKind};
use crate::base::lua::{eval, int_reply, lua};
use crate::core::semaphore::{aim, check_permits, in_use_elsewhere, reaim, Reaim, SlotReply};
use crate::mechanisms::ops::{LockOps, PlainLock};
use crate::mechanisms::removal::Mechanism;
use crate::mechanisms::round::Read;
use crate::seam::link::Call;

lua! {
    /// A semaphore's acquire: take the slot aimed at, or name the first free slot.
    static SEMAPHORE_ACQUIRE = include_str!("../../scripts/semaphore_acquire.lua");
    /// A permit's extend: its slot's compare-and-PEXPIRE, keeping the semaphore's permits key alive.
    static SEMAPHORE_EXTEND = concat!(
        include_str!("../../scripts/token_common.lua"),
        include_str!("../../scripts/semaphore_extend.lua")
    );
}

/// A held permit: the plain lock on its slot key, and which slot it is. Its extend also keeps the
/// semaphore's permits key alive (`semaphore_extend.lua`), so that key outlives every slot held.
pub(crate) struct Permit {
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
#[derive(Debug)]
pub(crate) struct Semaphore {
    resource: String,
    keys: Vec<String>,
    permits: u32,
    aim: AtomicU32,
}

impl Semaphore {
    /// A request for one of `permits` permits of `resource`.
    ///
    /// # Errors
    /// Zero permits, or more than [`MAX_PERMITS`](crate::kinds::MAX_PERMITS): checked before any
    /// key is named.
    pub(crate) fn new(ctx: &Ctx<'_>, resource: String, permits: u32) -> Result<Self, InputError> {
        let permits = check_permits(permits).map_err(InputError::from)?;
        let mut keys = ctx.names.slots(&resource, permits);
        let permits_key = ctx.names.semaphore_permits(&resource);
        if ctx.config.removed.has(Mechanism::SemaphorePermits) {
            // A negative control: holders of other counts never read this one's.
            keys.push(format!("{permits_key}:{permits}"));
        } else {
            keys.push(permits_key);
        }
        // A random first aim spreads clients that start together over the free slots.
        let first = ctx.entropy.between(0, u64::from(permits - 1));
        Ok(Self {
            resource,
            keys,
            permits,
            aim: AtomicU32::new(u32::try_from(first).unwrap_or(0)),
        })
    }
}

impl Kind for Semaphore {
    type Hold = Permit;
    /// The free slot a master named when it refused.
    type Note = SlotReply;
    /// The permits this request counts.
    type Reads = u32;

    fn resource(&self) -> &str {
        &self.resource
    }

    /// A release of any slot.
    fn wait(&self) -> Wait {
        let slots = self.keys.len().saturating_sub(1);
        Wait::Released(self.keys.iter().take(slots).cloned().collect())
    }

    fn hold(&self, ctx: &Ctx<'_>) -> Result<Held<Permit>, AcquireError> {
        let slot = self.aim.load(Ordering::Relaxed);
        // Aims come from `0..permits` and from hints checked against the permits.
        let index = usize::try_from(slot % self.permits).unwrap_or_default();
        let Some(key) = self.keys.get(index) else {
            let what = format!("slot {slot} of the semaphore {:?}", self.resource);
            return Err(InputError::Unsupported { what }.into());
        };
        let permits_key = self.keys.last().cloned().unwrap_or_default();
        Held::fresh(ctx, &Arc::from(key.as_str()), |key, token| Permit {
            lock: PlainLock::sharing(key, token),
            slot,
            keys: [key.to_string(), permits_key],
            token: Arc::clone(token),
            permits: self.permits,
        })
    }

    fn call(&self, held: &Held<Permit>, ttl_ms: u64) -> Call {
        let mut cmd = eval(&SEMAPHORE_ACQUIRE, &self.keys);
        cmd.push(&*held.token)
            .push(ttl_ms)
            .push(held.hold.slot)
            .push(self.permits);
        Call::Script(cmd)
    }

    fn reads(&self) -> u32 {
        self.permits
    }

    fn read(permits: u32, reply: Value) -> Read<SlotReply> {
        let code = match reply {
            Value::Array(items) => {
                return Read::vote(Err(match mismatch_reply(&items) {
                    Some(in_use) => NodeErrorKind::PermitsMismatch { in_use },
                    None => NodeErrorKind::Protocol(format!("semaphore acquire answered {items:?}").into()),
                }))
            }
            other => match int_reply(other, "semaphore acquire") {
                Ok(code) => code,
                Err(kind) => return Read::vote(Err(kind)),
            },
        };
        match SlotReply::from_code(code, permits) {
            Some(SlotReply::Took) => Read::vote(Ok(())),
            Some(hint) => Read::noting(Err(NodeErrorKind::Held), hint),
            None => Read::vote(Err(NodeErrorKind::Protocol(
                format!("semaphore acquire answered {code}, expected -1, -2 or a slot below {permits}")
                    .into(),
            ))),
        }
    }

    /// Holders counting another number of permits: refused with both numbers, and not retried.
    /// Otherwise the next round aims at the slot most masters named free, a few times within one
    /// attempt (`core::semaphore::reaim`).
    fn lost(&self, error: AcquireError, notes: Vec<(usize, SlotReply)>, round: usize) -> Lost {
        if let Some(in_use) = in_use_elsewhere(error.failures().iter().map(|f| &f.kind)) {
            return Lost::Stop(AcquireError::PermitsMismatch {
                resource: self.resource.clone(),
                asked: self.permits,
                in_use,
            });
        }
        let hints: Vec<SlotReply> = notes.into_iter().map(|(_, hint)| hint).collect();
        let slot = self.aim.load(Ordering::Relaxed);
        match reaim(aim(&hints), slot, round, error.is_retryable()) {
            Reaim::Again(next) => {
                self.aim.store(next, Ordering::Relaxed);
                Lost::Again
            }
            Reaim::Stop(next) => {
                if let Some(next) = next {
                    self.aim.store(next, Ordering::Relaxed);
                }
                Lost::Stop(error)
            }
        }
    }
}

/// The permits in `{-3, n}`, the acquire script's answer when holders there count `n` permits.
fn mismatch_reply(items: &[Value]) -> Option<u32> {
    match items {
        [Value::Int(-3), Value::Int(n)] => u32::try_from(*n).ok(),
        _ => None,
    }
}

/// The semaphore as a request's kind, with its permits.
#[derive(Debug)]
struct SemaphoreChoice(u32);

impl Choose for SemaphoreChoice {
    fn name(&self) -> &'static str {
        "semaphore"
    }

    fn acquire<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Guard, AcquireError>> {
        request.one(self, |ctx, resource| Ok(Semaphore::new(ctx, resource, self.0)?))
    }
}

impl Lock<'_> {
    /// Asks for one of `permits` permits of a counting semaphore: at most `permits` holders at
    /// once, each holding a slot ([`Guard::permit`]). Every permit is an ordinary lock on its own
    /// slot key, decided by a majority, so a semaphore tolerates failed masters as a lock does.
    /// A semaphore uses its own keys, so it does not exclude a plain lock on the same resource.
    /// Every holder must ask with the same `permits`.
    pub fn permits(self, permits: u32) -> Self {
        self.choose(SemaphoreChoice(permits))
    }
}
