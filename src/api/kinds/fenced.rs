//! The fenced kind: a plain lock that comes with a fencing token backed by a majority of masters.
//!
//! RedLock alone cannot protect a resource from a holder that pauses past its validity (GC,
//! SIGSTOP, swap): the holder still believes it holds the lock and writes late. A fencing token lets
//! the resource itself refuse such writes: every holder gets a number larger than any earlier
//! holder's, and the resource rejects a token lower than the highest it has seen (see
//! [`crate::FencedStore`], and the SQL pattern in its docs).
//!
//! A fenced acquire makes two rounds, each decided by the same tally as a plain acquire:
//! 1. on every master, `SET key token NX PX ttl` and, only if that succeeded, `INCR` the master's
//!    fencing counter (one per master, shared by every resource); the token is the largest counter
//!    among the majority that granted the lock;
//! 2. on the masters that granted it, while our key still holds our token, raise the counter to the
//!    token. The token is issued only when a majority confirmed, inside the validity of the whole
//!    acquisition; otherwise everything is released and the acquisition failed.
//!
//! Fencing is a wrapper around a kind ([`Fenceable`]: the plain lock, and the write hold, whose
//! first round applies the write rule), not a flag threaded through each. Both rounds are counted
//! by the one round driver (`round.rs`); masters that lost their counter are repaired by
//! `mechanisms/fencing.rs`.
//!
//! Why the tokens of successive holders strictly increase, why a holder paused between the rounds
//! gets no token at all, and how a master that lost its counter is repaired, is argued in
//! [`crate::core::fencing`] and checked there by a model of N masters under arbitrary interleavings.
//! The guarantee needs no clock: it holds while every master either keeps its data or is repaired
//! before it votes again, which this client enforces (a missing or regressed counter refuses to
//! vote; a restart without `appendfsync always` triggers a repair after the grace period).

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use redis::Value;
use tracing::{debug, info, warn};

use crate::api::kinds::kind::{Ctx, Fenceable, FencingArgs, Held, Won};
use crate::base::error::{AcquireError, NodeErrorKind};
use crate::base::lua::{eval, Found, Lua, FENCE_COMMIT, FENCE_COMMIT_BLIND};
use crate::base::names::ttl_millis;
use crate::core::fencing::{after_repair, fencing_token, AcquireReply, AfterRepair};
use crate::core::{Decision, Timing};
use crate::mechanisms::fanout::Fanout;
use crate::mechanisms::fencing::repair;
use crate::mechanisms::ops::LockOps;
use crate::mechanisms::release::ReleaseOnDrop;
use crate::mechanisms::removal::Mechanism;
use crate::mechanisms::round::{Read, Round, Votes};
use crate::seam::link::Link;

/// A kind acquired with a fencing token: each attempt is [`attempt`]'s two rounds around the
/// kind's own call, the rest of the acquire (its checks, waits and guard) the kind's.
#[derive(Debug)]
pub(crate) struct Fenced<K>(pub(crate) K);

/// One fenced acquisition of `kind`, with another try each time a repair made masters usable
/// again.
///
/// Masters become usable again either by this client's repair or by another client's: when several
/// clients make the first fenced acquire on fresh masters at once, one of them starts the counters
/// while the others' repairs read them half set up, and each such read frees the masters already
/// set up. Every further try needs at least one more master usable than before, so there are at
/// most as many as there are masters. A read that finds too few set up yet, while another client is
/// evidently setting them up, is made again after a short pause (at most once per master): the
/// core's [`after_repair`] decides which.
pub(crate) async fn attempt<K: Fenceable>(
    round: Round<'_>,
    ctx: Ctx<'_>,
    kind: &K,
    timing: Timing,
) -> Result<Won<K::Hold>, AcquireError> {
    round.check_health();
    let n = round.masters.len();
    let health = round.health;
    let waiting = || (0..n).filter(|i| health.needs_fence_repair(*i)).count();
    let repair = || repair(round.masters, health, round.names, ctx.entropy.wall_ms());
    repair().await;
    let mut result = two_rounds(round, ctx, kind, timing).await;
    for _ in 0..n {
        match &result {
            Err(err) if asked_for_repair(err) => {
                let before = waiting();
                let mut pauses = 0;
                loop {
                    let outcome = repair().await;
                    match after_repair(outcome.repaired, before, waiting(), outcome.under_way, pauses, n) {
                        AfterRepair::Retry => break,
                        AfterRepair::Pause => {
                            round.clock.sleep(SET_UP_PAUSE).await;
                            pauses += 1;
                        }
                        AfterRepair::Stop => return result,
                    }
                }
                result = two_rounds(round, ctx, kind, timing).await;
            }
            _ => break,
        }
    }
    result
}

/// How long a fenced attempt waits for another client that is setting the counters up, before it
/// reads them again (at most once per master).
const SET_UP_PAUSE: Duration = Duration::from_millis(10);

fn asked_for_repair(err: &AcquireError) -> bool {
    err.failures()
        .iter()
        .any(|f| f.kind == NodeErrorKind::FenceRepair)
}

/// Round 1 on one master: the vote, and the counter when granted.
async fn acquire_on<K: Fenceable>(
    round: Round<'_>,
    ctx: Ctx<'_>,
    node: &Link,
    kind: &K,
    held: &Held<K::Hold>,
    ttl_ms: u64,
) -> Read<u64> {
    let index = node.index();
    let health = round.health;
    if health.needs_fence_repair(index) {
        return Read::vote(Err(NodeErrorKind::FenceRepair));
    }
    // The master's epoch is checked against the run_id read on this very connection; without one
    // (a check is under way) the vote could not be vouched for anyway.
    let Some(run_id) = health.verified_run_id(node) else {
        return Read::vote(Err(NodeErrorKind::Unverified));
    };
    let (counter, epoch) = (ctx.names.fence_counter(), ctx.names.fence_epoch());
    let run_id = if ctx.config.removed.has(Mechanism::FenceEpoch) {
        held_epoch(node, &epoch).await.unwrap_or(run_id)
    } else {
        run_id
    };
    let fencing = FencingArgs {
        counter: &counter,
        epoch: &epoch,
        floor: health.fence_floor(index),
        run_id: &run_id,
    };
    let cmd = kind.fenced_call(held, ttl_ms, fencing);
    let reply = match node.run_script(&cmd).await {
        Ok(Value::Int(n)) => match kind.fenced_reply(n) {
            Some(reply) => reply,
            None => {
                return Read::vote(Err(NodeErrorKind::Protocol(
                    format!("fenced acquire returned {n}").into(),
                )))
            }
        },
        Ok(other) => {
            return Read::vote(Err(NodeErrorKind::Protocol(
                format!("fenced acquire answered {other:?}").into(),
            )))
        }
        Err(kind) => return Read::vote(Err(kind)),
    };
    let (index, addr) = (index, node.addr());
    match reply {
        AcquireReply::Granted(value) => {
            health.raise_fence_floor(index, value);
            Read::noting(Ok(()), value)
        }
        AcquireReply::Held => Read::vote(Err(NodeErrorKind::Held)),
        AcquireReply::NewEpoch => {
            info!(
                node = index,
                addr,
                "fencing epoch is not the master's run_id (it restarted, or is new); its counter is repaired before it votes again"
            );
            health.mark_fence_epoch(index);
            Read::vote(Err(NodeErrorKind::FenceRepair))
        }
        // A fresh master, or one that lost its data: the repair tells which, from what the
        // others hold, and warns only about the second.
        AcquireReply::Uninitialized => {
            debug!(
                node = index,
                addr, "no fencing counter on the master; it is set up before it votes"
            );
            health.mark_fence_absent(index);
            Read::vote(Err(NodeErrorKind::FenceRepair))
        }
        AcquireReply::Regressed => {
            warn!(
                node = index,
                addr,
                "fencing counter behind what this client saw (the master lost writes); it is repaired before it votes again"
            );
            health.mark_fence_repair(index);
            Read::vote(Err(NodeErrorKind::FenceRepair))
        }
    }
}

/// Out of model, for the negative control that removes the epoch check
/// (`Mechanism::FenceEpoch`) only: the epoch the master holds, which the round then sends as the
/// `run_id` it vouches for, so that the script's epoch check always passes.
async fn held_epoch(node: &Link, epoch: &str) -> Option<String> {
    let mut get = redis::cmd("GET");
    get.arg(epoch);
    match node.query(Arc::new(get)).await {
        Ok(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(&bytes).into_owned()),
        _ => None,
    }
}

/// Both rounds of one fenced acquisition; on any failure the key is released on every master.
async fn two_rounds<K: Fenceable>(
    round: Round<'_>,
    ctx: Ctx<'_>,
    kind: &K,
    timing: Timing,
) -> Result<Won<K::Hold>, AcquireError> {
    let held = kind.hold(&ctx)?;
    let counter = ctx.names.fence_counter();
    // The key's life: the TTL plus any lock-delay (the validity counts from the TTL alone).
    let ttl_ms = ttl_millis(timing.key_ttl());
    let resource = kind.resource();
    // The fenced lock is a plain lock on the wire, the fenced write a write hold: extend and
    // release are theirs.
    let ops: Arc<dyn LockOps> = Arc::clone(&held.hold) as Arc<dyn LockOps>;
    let mut cleanup = ReleaseOnDrop::new(round.release(), Arc::clone(&ops));

    // Round 1. Its requests borrow the round, so the ones still in flight at the decision are
    // dropped, not finished: a master that misses a fenced lock's `SET` only makes the lock's
    // majority smaller.
    let mut first: Votes<'_, u64> = round.votes(timing);
    let mut pending: Fanout<_> = round
        .masters
        .iter()
        .map(|node| {
            let held = &held;
            (
                node.index(),
                Box::pin(acquire_on(round, ctx, node, kind, held, ttl_ms)),
            )
        })
        .collect();
    let decision = round.decide(&mut first, &mut pending).await;
    drop(pending);
    let granted: Vec<usize> = first.said_yes().collect();
    let counters = first.take_notes();
    let fence = fencing_token(
        counters
            .iter()
            .filter(|(i, _)| granted.contains(i))
            .map(|(_, value)| *value),
    );
    let fence = match (decision, fence) {
        (Decision::Acquired { .. }, Some(fence)) => fence,
        _ => {
            // Released before the error is returned, as a plain round does.
            let silent: Vec<bool> = (0..round.masters.len()).map(|i| first.silent(i)).collect();
            round
                .release()
                .failed_round(
                    &ops,
                    |i| silent.get(i).copied().unwrap_or(false),
                    first.failures(),
                )
                .await;
            cleanup.disarm();
            return Err(first.error(resource, timing, round.clock.now()));
        }
    };
    debug!(
        fence,
        granted = granted.len(),
        "round 1 granted; committing the token"
    );

    // Round 2, decided against the validity of the whole acquisition (same start).
    let mut commit: Votes<'_, ()> = Votes::new(round.masters, timing, first.started());
    let now = round.clock.now();
    for i in (0..round.masters.len()).filter(|i| !granted.contains(i)) {
        commit.refuse(i, now);
    }
    let script = if ctx.config.removed.has(Mechanism::FenceCommitKey) {
        &FENCE_COMMIT_BLIND
    } else {
        &FENCE_COMMIT
    };
    let mut pending: Fanout<_> = granted
        .iter()
        .filter_map(|i| round.masters.get(*i))
        .map(|node| {
            let (key, counter, token) = (&held.key, &counter, &held.token);
            (
                node.index(),
                Box::pin(commit_on(node, script, key, counter, token, fence)),
            )
        })
        .collect();
    let decision = round.decide(&mut commit, &mut pending).await;
    drop(pending);
    match decision {
        Decision::Acquired { valid_until, .. } => {
            for i in commit.said_yes() {
                round.health.raise_fence_floor(i, fence);
            }
            cleanup.disarm();
            Ok(Won {
                held,
                valid_until: tokio::time::Instant::from_std(valid_until),
                fence: Some(fence),
                turn: None,
            })
        }
        _ => {
            // A master may still take the key if its round-1 request is in flight, or hold it
            // uncommitted if its commit is.
            let in_flight: Vec<bool> = (0..round.masters.len())
                .map(|i| first.silent(i) || commit.silent(i))
                .collect();
            // The masters that said no in round 1 count as no here too: their reasons as well.
            let refused = first.failures().drain(..).filter(|f| !granted.contains(&f.node));
            let refused: Vec<_> = refused.collect();
            commit.failures().extend(refused);
            round
                .release()
                .failed_round(
                    &ops,
                    |i| in_flight.get(i).copied().unwrap_or(false),
                    commit.failures(),
                )
                .await;
            cleanup.disarm();
            Err(commit.error(resource, timing, round.clock.now()))
        }
    }
}

/// Round 2 on one master, with `script` (the commit, or a negative control's blind one).
async fn commit_on(
    node: &Link,
    script: &'static Lua,
    key: &str,
    counter: &str,
    token: &str,
    fence: u64,
) -> Read<()> {
    let mut call = eval(script, &[key, counter]);
    call.push(token).push(fence);
    Read::vote(
        node.run_script(&call)
            .map(|reply| reply.and_then(Found::from_reply).and_then(Found::into_result))
            .await,
    )
}
