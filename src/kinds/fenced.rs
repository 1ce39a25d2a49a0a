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
//! Both rounds are the client's round (`round.rs`); masters that lost their counter are repaired by
//! `fence.rs`.
//!
//! Why the tokens of successive holders strictly increase, why a holder paused between the rounds
//! gets no token at all, and how a master that lost its counter is repaired, is argued in
//! [`crate::core::fencing`] and checked there by a model of N masters under arbitrary interleavings.
//! The guarantee needs no clock: it holds while every master either keeps its data or is repaired
//! before it votes again, which this client enforces (a missing or regressed counter refuses to
//! vote; a restart without `appendfsync always` triggers a repair after the grace period).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;
use tracing::{debug, info, warn, Span};

use crate::client::{Guard, Inner};
use crate::core::fencing::{after_repair, fencing_token, AcquireReply, AfterRepair};
use crate::core::round::round_error;
use crate::core::rwlock::fenced_write_reply;
use crate::core::{Decision, RetryPlan, Tally, Timing, Vote};
use crate::error::{AcquireError, NodeErrorKind};
use crate::fanout::Fanout;
use crate::fence::repair;
use crate::kinds::write_hold::write_ops;
use crate::link::Link;
use crate::lua::{eval, Found, ScriptCall, FENCE_ACQUIRE, FENCE_COMMIT, RW_WRITE_FENCED};
use crate::names::{ttl_millis, Names};
use crate::ops::{LockOps, PlainLock};
use crate::release::ReleaseOnDrop;

/// Acquires `resource` with a fencing token: retrying within `plan`, or one acquisition (both
/// rounds) when `plan` is `None`. The token is recorded on the current span.
pub(crate) async fn acquire(
    inner: &Arc<Inner>,
    resource: &str,
    ttl: Duration,
    plan: Option<RetryPlan>,
) -> Result<Guard, AcquireError> {
    let timing = check(inner, resource, ttl)?;
    let guard = match plan {
        Some(plan) => {
            inner
                .retrying_woken(resource, plan, vec![inner.names().key(resource)], || {
                    fenced_round(inner, resource, timing, &Claim::Plain)
                })
                .await?
        }
        None => fenced_round(inner, resource, timing, &Claim::Plain).await?,
    };
    record_token(&guard);
    Ok(guard)
}

/// Records a guard's fencing token on the current span.
pub(crate) fn record_token(guard: &Guard) {
    if let Some(token) = guard.fencing_token() {
        Span::current().record("token", token);
    }
}

/// What the first round takes on each master while it draws the counter.
#[derive(Debug)]
pub(crate) enum Claim<'a> {
    /// The plain lock's key, by `SET NX`: the fenced lock.
    Plain,
    /// The writer key of a read-write lock, under the write rule (refused while a writer or an
    /// unexpired reader holds there; refused because of readers, `waiter` waits there for
    /// `wait_ms`): the fenced write.
    Write {
        /// The writer, the readers and the waiting writers.
        keys: [&'a str; 3],
        /// The writer's waiter id, one for every round of its acquire.
        waiter: &'a str,
        /// How long a writer refused because of readers waits on that master.
        wait_ms: u64,
    },
}

impl Claim<'_> {
    /// The key whose token the commit checks and the guard holds.
    fn key(&self, inner: &Inner, resource: &str) -> Arc<str> {
        match self {
            Claim::Plain => inner.names().shared_key(resource),
            Claim::Write {
                keys: [writer, ..], ..
            } => Arc::from(*writer),
        }
    }

    /// How the hold is extended and released: as a plain lock on `key`, or as a write hold.
    fn ops(&self, key: &Arc<str>, token: &Arc<str>) -> Arc<dyn LockOps> {
        match self {
            Claim::Plain => Arc::new(PlainLock::sharing(key, token)),
            Claim::Write { .. } => write_ops(key, token),
        }
    }

    /// The first round's script on one master.
    fn command(
        &self,
        names: &Names,
        key: &str,
        token: &str,
        ttl_ms: u64,
        floor: u64,
        run_id: &str,
    ) -> ScriptCall {
        let (counter, epoch) = (names.fence_counter(), names.fence_epoch());
        match self {
            Claim::Plain => {
                let mut call = eval(&FENCE_ACQUIRE, &[key, &counter, &epoch]);
                call.push(token).push(ttl_ms).push(floor).push(run_id);
                call
            }
            Claim::Write {
                keys,
                waiter,
                wait_ms,
            } => {
                let mut call = eval(&RW_WRITE_FENCED, &[keys[0], keys[1], keys[2], &counter, &epoch]);
                call.push(token)
                    .push(ttl_ms)
                    .push(*waiter)
                    .push(*wait_ms)
                    .push(floor)
                    .push(run_id);
                call
            }
        }
    }

    /// Reads the first round's integer answer.
    fn reply(&self, code: i64) -> Option<AcquireReply> {
        match self {
            Claim::Plain => AcquireReply::from_reply(code),
            Claim::Write { .. } => fenced_write_reply(code),
        }
    }
}

fn check(inner: &Inner, resource: &str, ttl: Duration) -> Result<Timing, AcquireError> {
    if resource.is_empty() {
        return Err(crate::error::InputError::EmptyResource.into());
    }
    Ok(inner.check_ttl(ttl)?)
}

/// One fenced acquisition of `claim`, with another try each time a repair made masters usable
/// again.
///
/// Masters become usable again either by this client's repair or by another client's: when several
/// clients make the first fenced acquire on fresh masters at once, one of them starts the counters
/// while the others' repairs read them half set up, and each such read frees the masters already
/// set up. Every further try needs at least one more master usable than before, so there are at
/// most as many as there are masters. A read that finds too few set up yet, while another client is
/// evidently setting them up, is made again after a short pause (at most once per master).
pub(crate) async fn fenced_round(
    inner: &Arc<Inner>,
    resource: &str,
    timing: Timing,
    claim: &Claim<'_>,
) -> Result<Guard, AcquireError> {
    inner.round().check_health();
    let n = inner.masters().len();
    let waiting = || (0..n).filter(|i| inner.health().needs_fence_repair(*i)).count();
    let repair = || {
        repair(
            inner.masters(),
            inner.health(),
            inner.names(),
            inner.entropy().wall_ms(),
        )
    };
    repair().await;
    let mut result = two_rounds(inner, resource, timing, claim).await;
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
                            inner.clock().sleep(SET_UP_PAUSE).await;
                            pauses += 1;
                        }
                        AfterRepair::Stop => return result,
                    }
                }
                result = two_rounds(inner, resource, timing, claim).await;
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
async fn acquire_on(
    inner: &Inner,
    node: &Link,
    claim: &Claim<'_>,
    key: &str,
    token: &str,
    ttl_ms: u64,
    counters: &Mutex<Vec<Option<u64>>>,
) -> Result<(), NodeErrorKind> {
    let index = node.index();
    let health = inner.health();
    if health.needs_fence_repair(index) {
        return Err(NodeErrorKind::FenceRepair);
    }
    // The master's epoch is checked against the run_id read on this very connection; without one
    // (a check is under way) the vote could not be vouched for anyway.
    let Some(run_id) = health.verified_run_id(node) else {
        return Err(NodeErrorKind::Unverified);
    };
    let cmd = claim.command(
        inner.names(),
        key,
        token,
        ttl_ms,
        health.fence_floor(index),
        &run_id,
    );
    let reply = match node.run_script(&cmd).await? {
        Value::Int(n) => claim
            .reply(n)
            .ok_or_else(|| NodeErrorKind::Protocol(format!("fenced acquire returned {n}").into()))?,
        other => {
            return Err(NodeErrorKind::Protocol(
                format!("fenced acquire answered {other:?}").into(),
            ))
        }
    };
    match reply {
        AcquireReply::Granted(value) => {
            health.raise_fence_floor(index, value);
            if let Some(slot) = counters
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_mut(index)
            {
                *slot = Some(value);
            }
            Ok(())
        }
        AcquireReply::Held => Err(NodeErrorKind::Held),
        AcquireReply::NewEpoch => {
            info!(
                node = index,
                addr = node.addr(),
                "fencing epoch is not the master's run_id (it restarted, or is new); its counter is repaired before it votes again"
            );
            health.mark_fence_epoch(index);
            Err(NodeErrorKind::FenceRepair)
        }
        AcquireReply::Uninitialized => {
            // A fresh master, or one that lost its data: the repair tells which, from what the
            // others hold, and warns only about the second.
            debug!(
                node = index,
                addr = node.addr(),
                "no fencing counter on the master; it is set up before it votes"
            );
            health.mark_fence_absent(index);
            Err(NodeErrorKind::FenceRepair)
        }
        AcquireReply::Regressed => {
            warn!(
                node = index,
                addr = node.addr(),
                "fencing counter behind what this client saw (the master lost writes); it is repaired before it votes again"
            );
            health.mark_fence_repair(index);
            Err(NodeErrorKind::FenceRepair)
        }
    }
}

/// Round 2 on one master.
async fn commit_on(
    node: &Link,
    key: &str,
    counter: &str,
    token: &str,
    fence: u64,
) -> Result<(), NodeErrorKind> {
    let mut call = eval(&FENCE_COMMIT, &[key, counter]);
    call.push(token).push(fence);
    Found::from_reply(node.run_script(&call).await?)?.into_result()
}

/// Both rounds of one fenced acquisition; on any failure the key is released on every master.
async fn two_rounds(
    inner: &Arc<Inner>,
    resource: &str,
    timing: Timing,
    claim: &Claim<'_>,
) -> Result<Guard, AcquireError> {
    let key = claim.key(inner, resource);
    let counter = inner.names().fence_counter();
    let token = inner.entropy().token()?;
    let ttl_ms = ttl_millis(timing.ttl());
    let round = inner.round();
    let n = round.masters.len();
    // The fenced lock is a plain lock on the wire, the fenced write a write hold: extend and
    // release are theirs.
    let ops = claim.ops(&key, &token);
    let mut cleanup = ReleaseOnDrop::new(round.release(), Arc::clone(&ops));
    let started = inner.clock().now();

    // Round 1. Its requests borrow the round, so the ones still in flight at the decision are
    // dropped, not finished: a master that misses a fenced lock's `SET` only makes the lock's
    // majority smaller.
    let counters = Mutex::new(vec![None; n]);
    let mut tally = Tally::new(n, timing, started.into_std());
    let mut pending: Fanout<_> = round
        .masters
        .iter()
        .map(|node| {
            let (key, token, counters) = (&key, &token, &counters);
            (
                node.index(),
                Box::pin(acquire_on(inner, node, claim, key, token, ttl_ms, counters)),
            )
        })
        .collect();
    let mut failures = Vec::new();
    let decision = round.decide(&mut tally, &mut pending, &mut failures).await;
    drop(pending);
    let counters = counters.into_inner().unwrap_or_else(PoisonError::into_inner);
    let granted: Vec<usize> = (0..n).filter(|i| tally.vote(*i) == Some(Vote::Yes)).collect();
    let fence = fencing_token(granted.iter().filter_map(|i| counters.get(*i).copied().flatten()));
    let fence = match (decision, fence) {
        (Decision::Acquired { .. }, Some(fence)) => fence,
        (decision, _) => {
            // Released before the error is returned, as a plain round does.
            round
                .release()
                .failed_round(&ops, |i| tally.vote(i).is_none(), &mut failures)
                .await;
            cleanup.disarm();
            return Err(round_error(
                resource,
                &tally,
                decision,
                inner.clock().now().saturating_duration_since(started),
                timing,
                failures,
            ));
        }
    };
    debug!(
        fence,
        granted = granted.len(),
        "round 1 granted; committing the token"
    );

    // Round 2, decided against the validity of the whole acquisition (same start).
    let mut commit = Tally::new(n, timing, started.into_std());
    let now = inner.clock().now().into_std();
    for i in (0..n).filter(|i| !granted.contains(i)) {
        commit.handle_reply(i, Vote::No, now);
    }
    let mut pending: Fanout<_> = granted
        .iter()
        .filter_map(|i| round.masters.get(*i))
        .map(|node| {
            let (key, counter, token) = (&key, &counter, &token);
            (
                node.index(),
                Box::pin(commit_on(node, key, counter, token, fence)),
            )
        })
        .collect();
    let mut commit_failures = Vec::new();
    let decision = round
        .decide(&mut commit, &mut pending, &mut commit_failures)
        .await;
    drop(pending);
    match decision {
        Decision::Acquired { valid_until, .. } => {
            for i in (0..n).filter(|i| commit.vote(*i) == Some(Vote::Yes)) {
                inner.health().raise_fence_floor(i, fence);
            }
            cleanup.disarm();
            let guard = inner.guard(
                resource,
                key,
                token,
                ops,
                timing.ttl(),
                Instant::from_std(valid_until),
            );
            // A new guard's cell is empty, so this cannot fail.
            let _ = guard.lease().fencing_token.set(fence);
            Ok(guard)
        }
        decision => {
            // A master may still take the key if its round-1 request is in flight, or hold it
            // uncommitted if its commit is.
            let in_flight = |i| tally.vote(i).is_none() || commit.vote(i).is_none();
            // The masters that said no in round 1 count as no here too: their reasons as well.
            commit_failures.extend(failures.into_iter().filter(|f| !granted.contains(&f.node)));
            round
                .release()
                .failed_round(&ops, in_flight, &mut commit_failures)
                .await;
            cleanup.disarm();
            Err(round_error(
                resource,
                &commit,
                decision,
                inner.clock().now().saturating_duration_since(started),
                timing,
                commit_failures,
            ))
        }
    }
}
