//! The read-write lock: any number of readers, or one writer, each decided by the usual majority.
//!
//! On each master the lock is three keys (`names.rs`): the writer key, holding the writer's token
//! like a plain lock (it is the plain lock's key on the resource, so a write, a plain lock and a
//! fenced lock on one resource exclude each other, and a plain lock keeps readers out too, though
//! it does not wait for them); the readers, a sorted set of reader tokens scored by their expiry on the
//! master's own clock; and the waiting writers, a sorted set of waiter ids with a short expiry. The
//! scripts apply the rules of [`crate::core::rwlock`]: a read is refused while a writer holds or
//! waits there, a write while a writer or an unexpired reader holds there, and a write refused
//! because of readers leaves its waiter id, which keeps new readers out (writer preference). Any two
//! majorities share a master, so no reader's hold overlaps a writer's.
//!
//! The write hold is a plain lock on the writer key, so its extend, release and watchdog are the
//! plain lock's (a fenced write, `write().fenced()`, is the fenced lock's two rounds whose first
//! round applies the write rule: see `fenced.rs`); a read hold extends and releases its own entry. Every hold is an ordinary
//! [`Guard`]. A writer that gives up, succeeds or is dropped takes its waiter id off every master
//! from a task; one that crashes leaves it to lapse, which blocks new readers for at most the TTL
//! it asked for.
//!
//! Neither kind is reentrant and a read is never upgraded to a write: a writer waits for every
//! reader, its own included, so a holder of a read that asks for the write waits until its read is
//! released or expires. Two readers upgrading at once would each wait for the other; a release
//! first, then a write, cannot deadlock.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tracing::{debug, warn};

use crate::background::Background;
use crate::client::{Guard, Inner};
use crate::core::rwlock::RwReply;
use crate::core::{RetryPlan, Timing};
use crate::error::{AcquireError, NodeErrorKind};
use crate::kinds::fenced::{self, Claim};
use crate::kinds::write_hold::write_ops;
use crate::link::{Call, Masters};
use crate::lua::{eval, int_reply, Found, RW_LEAVE, RW_READ, RW_READ_EXTEND, RW_READ_RELEASE, RW_WRITE};
use crate::names::{release_channel, ttl_millis};
use crate::ops::LockOps;

/// The three keys of one read-write lock.
#[derive(Debug, Clone)]
struct Keys {
    writer: String,
    readers: String,
    waiting: String,
}

impl Keys {
    fn new(inner: &Inner, resource: &str) -> Self {
        let [writer, readers, waiting] = inner.names().rwlock(resource);
        Self {
            writer,
            readers,
            waiting,
        }
    }

    fn all(&self) -> [&str; 3] {
        [&self.writer, &self.readers, &self.waiting]
    }
}

/// A read hold: our entry among the readers.
struct ReadHold {
    readers: Arc<str>,
    token: Arc<str>,
    channel: String,
}

impl fmt::Debug for ReadHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token stays out of logs: whoever has it can extend or release the hold.
        f.debug_struct("ReadHold")
            .field("readers", &self.readers)
            .finish_non_exhaustive()
    }
}

impl LockOps for ReadHold {
    fn extend(&self, ttl_ms: u64) -> Call {
        let mut cmd = eval(&RW_READ_EXTEND, &[&*self.readers]);
        cmd.push(&*self.token).push(ttl_ms);
        Call::Script(cmd)
    }

    fn release(&self) -> Call {
        let mut cmd = eval(&RW_READ_RELEASE, &[&*self.readers]);
        cmd.push(&*self.token).push(&self.channel);
        Call::Script(cmd)
    }

    fn cleanup(&self) -> Call {
        let mut cmd = eval(&RW_READ_RELEASE, &[&*self.readers]);
        cmd.push(&*self.token).push("");
        Call::Script(cmd)
    }

    fn is_read(&self) -> Option<bool> {
        Some(true)
    }
}

/// Reads a read or write script's answer as a vote.
fn vote(reply: Result<redis::Value, NodeErrorKind>, what: &str) -> Result<(), NodeErrorKind> {
    let code = int_reply(reply?, what)?;
    match RwReply::from_code(code) {
        Some(RwReply::Granted) => Ok(()),
        Some(_) => Err(NodeErrorKind::Held),
        None => Err(NodeErrorKind::Protocol(
            format!("{what} answered {code}, expected 1, -1, -2 or -3").into(),
        )),
    }
}

/// Acquires a read hold of `resource`: retrying within `plan` (woken by a writer's release or
/// departure), or one round when `plan` is `None`.
pub(crate) async fn acquire_read(
    inner: &Arc<Inner>,
    resource: &str,
    ttl: Duration,
    plan: Option<RetryPlan>,
) -> Result<Guard, AcquireError> {
    let timing = inner.check(resource, ttl)?;
    let keys = Keys::new(inner, resource);
    match plan {
        Some(plan) => {
            let wake = vec![keys.writer.clone()];
            inner
                .retrying_woken(resource, plan, wake, || {
                    read_round(inner, resource, &keys, timing)
                })
                .await
        }
        None => read_round(inner, resource, &keys, timing).await,
    }
}

async fn read_round(
    inner: &Arc<Inner>,
    resource: &str,
    keys: &Keys,
    timing: Timing,
) -> Result<Guard, AcquireError> {
    let token = inner.entropy().token()?;
    let mut cmd = eval(&RW_READ, &keys.all());
    cmd.push(&*token).push(ttl_millis(timing.ttl()));
    let cmd = Arc::new(cmd);
    let readers: Arc<str> = Arc::from(keys.readers.as_str());
    let hold = ReadHold {
        readers: Arc::clone(&readers),
        token: Arc::clone(&token),
        channel: release_channel(&keys.readers),
    };
    let ops: Arc<dyn LockOps> = Arc::new(hold);
    inner
        .acquire_round(resource, readers, token, timing, ops, |link| {
            link.run_script(&cmd).map(|reply| vote(reply, "read acquire"))
        })
        .await
}

/// Acquires the write hold of `resource`: retrying within `plan` (woken by a writer's release or
/// the last reader's), or one round when `plan` is `None`. While readers refuse it, this writer
/// waits on those masters and keeps new readers out; it leaves when the call ends, however it ends.
///
/// With `fenced`, each round is a fenced acquisition (`fenced.rs`) whose first round applies the
/// write rule and draws the fencing counter in one script per master: the guard carries a
/// fencing token, larger than every earlier writer's and every earlier fenced lock's.
pub(crate) async fn acquire_write(
    inner: &Arc<Inner>,
    resource: &str,
    ttl: Duration,
    plan: Option<RetryPlan>,
    fenced: bool,
) -> Result<Guard, AcquireError> {
    let timing = inner.check(resource, ttl)?;
    let keys = Keys::new(inner, resource);
    let waiter = Waiter {
        id: inner.entropy().id(),
        keys: keys.clone(),
        masters: Arc::clone(inner.masters()),
        background: inner.background().clone(),
    };
    // Leaves on every path out of this call, a dropped future included.
    let waiter = LeaveOnDrop(waiter);
    let w = &waiter.0;
    let round = || async move {
        if fenced {
            fenced_write_round(inner, resource, w, timing).await
        } else {
            write_round(inner, resource, w, timing).await
        }
    };
    let guard = match plan {
        Some(plan) => {
            let wake = vec![keys.writer.clone(), keys.readers.clone()];
            inner.retrying_woken(resource, plan, wake, round).await?
        }
        None => round().await?,
    };
    fenced::record_token(&guard);
    Ok(guard)
}

/// One fenced acquisition of the write hold (both rounds).
async fn fenced_write_round(
    inner: &Arc<Inner>,
    resource: &str,
    waiter: &Waiter,
    timing: Timing,
) -> Result<Guard, AcquireError> {
    let keys = &waiter.keys;
    let claim = Claim::Write {
        keys: keys.all(),
        waiter: &waiter.id,
        // As a plain write: a refused writer waits for as long as it asked to hold the lock.
        wait_ms: ttl_millis(timing.ttl()),
    };
    fenced::fenced_round(inner, resource, timing, &claim).await
}

async fn write_round(
    inner: &Arc<Inner>,
    resource: &str,
    waiter: &Waiter,
    timing: Timing,
) -> Result<Guard, AcquireError> {
    let token = inner.entropy().token()?;
    let ttl_ms = ttl_millis(timing.ttl());
    let keys = &waiter.keys;
    let mut cmd = eval(&RW_WRITE, &keys.all());
    // A refused writer waits for as long as it asked to hold the lock: long enough to span the
    // pauses between its rounds, and no longer than a crashed writer's key would block anyone.
    cmd.push(&*token).push(ttl_ms).push(&waiter.id).push(ttl_ms);
    let cmd = Arc::new(cmd);
    let key: Arc<str> = Arc::from(keys.writer.as_str());
    let ops: Arc<dyn LockOps> = write_ops(&key, &token);
    inner
        .acquire_round(resource, key, token, timing, ops, |link| {
            link.run_script(&cmd).map(|reply| vote(reply, "write acquire"))
        })
        .await
}

/// A writer's waiter id, and what it needs to leave every master.
#[derive(Clone)]
struct Waiter {
    id: String,
    keys: Keys,
    masters: Arc<Masters>,
    background: Background,
}

impl Waiter {
    /// Takes the waiter id off every master; a failure only leaves it to lapse.
    async fn leave(&self) {
        let mut cmd = eval(&RW_LEAVE, &[&self.keys.waiting]);
        cmd.push(&self.id).push(release_channel(&self.keys.writer));
        let cmd = Arc::new(cmd);
        let replies = crate::fanout::all(self.masters.iter().map(|link| {
            link.run_script(&cmd)
                .map(|reply| reply.and_then(Found::from_reply))
        }))
        .await;
        for (node, reply) in replies.into_iter().enumerate() {
            if let Err(error) = reply {
                warn!(node, %error, "could not take a waiting writer off a master; it lapses with its TTL");
            }
        }
    }
}

/// Leaves from a task when dropped.
struct LeaveOnDrop(Waiter);

impl Drop for LeaveOnDrop {
    fn drop(&mut self) {
        let waiter = self.0.clone();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let background = waiter.background.clone();
                background.spawn_on(&handle, async move {
                    waiter.leave().await;
                    debug!(waiter = %waiter.id, "writer left the waiting writers");
                });
            }
            Err(_) => warn!(
                waiter = %waiter.id,
                "no async runtime to take a waiting writer off the masters from; it lapses with its TTL"
            ),
        }
    }
}
