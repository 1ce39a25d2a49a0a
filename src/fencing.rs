//! Fenced acquisition: a lock that comes with a fencing token backed by a majority of masters.
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
//! Why the tokens of successive holders strictly increase, why a holder paused between the rounds
//! gets no token at all, and how a master that lost its counter is repaired, is argued in
//! [`crate::core::fencing`] and checked there by a model of N masters under arbitrary interleavings.
//! The guarantee needs no clock: it holds while every master either keeps its data or is repaired
//! before it votes again, which this client enforces (a missing or regressed counter refuses to
//! vote; a restart without `appendfsync always` triggers a repair after the grace period).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::stream::StreamExt;
use redis::Value;
use tracing::{debug, field, info, instrument, warn, Span};

use crate::config::{FENCE_COUNTER_KEY, FENCE_EPOCH_KEY};
use crate::coordinator::{round_error, ttl_millis, Inner, ReleaseOnDrop};
use crate::core::fencing::{fencing_token, repair_target, AcquireReply, CounterRead, RepairTarget};
use crate::core::{Decision, Tally, Timing, Vote};
use crate::error::{AcquireError, NodeErrorKind};
use crate::fanout::Fanout;
use crate::guard::Guard;
use crate::node::Node;
use crate::ops::{LockOps, PlainLock};
use crate::token::new_token;
use crate::Quorlock;

/// Round 1: SET NX and, if granted, INCR the counter.
const FENCE_ACQUIRE_SCRIPT: &str = include_str!("scripts/fence_acquire.lua");
/// Round 2: raise the counter to the token while our key holds our token.
const FENCE_COMMIT_SCRIPT: &str = include_str!("scripts/fence_commit.lua");
/// Repair: raise a counter to a value read from a majority.
const FENCE_REPAIR_SCRIPT: &str = include_str!("scripts/fence_repair.lua");

impl Quorlock {
    /// Acquires `resource` for `ttl` with a fencing token, retrying like [`Quorlock::acquire`].
    ///
    /// The guard's [`Guard::fencing_token`] is `Some`: pass it with every write to the protected
    /// resource, which must reject tokens lower than the highest it has seen.
    ///
    /// ```no_run
    /// # async fn run(locks: quorlock::Quorlock, store: quorlock::FencedStore<redis::aio::MultiplexedConnection>)
    /// #     -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// let guard = locks.acquire_fenced("account:7", Duration::from_secs(10)).await?;
    /// let token = guard.fencing_token().unwrap_or_default();
    /// let balance: u64 = store.read("balance:7", token).await?.unwrap_or(0);
    /// // Rejected with FencedError::Stale if a newer holder has read or written meanwhile.
    /// store.write("balance:7", token, balance + 10).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Quorlock::acquire`]. A commit round that fails is reported like a failed acquire round
    /// ([`AcquireError::NoQuorum`] with the commit's counts, or [`AcquireError::TooSlow`]).
    #[instrument(skip_all, fields(resource = %resource, attempt = field::Empty, token = field::Empty))]
    pub async fn acquire_fenced(
        &self,
        resource: &str,
        ttl: std::time::Duration,
    ) -> Result<Guard, AcquireError> {
        let timing = check(&self.inner, resource, ttl)?;
        let guard = self
            .inner
            .retrying_woken(resource, vec![self.inner.key(resource)], || {
                fenced_round(&self.inner, resource, timing)
            })
            .await?;
        if let Some(token) = guard.fencing_token() {
            Span::current().record("token", token);
        }
        Ok(guard)
    }

    /// Makes one fenced acquisition (both rounds), with no retries.
    ///
    /// A master found without its fencing counter is repaired first when that is already safe
    /// (then the round is made once more).
    ///
    /// # Errors
    /// As [`Quorlock::try_acquire`].
    #[instrument(skip_all, fields(resource = %resource, token = field::Empty))]
    pub async fn try_acquire_fenced(
        &self,
        resource: &str,
        ttl: std::time::Duration,
    ) -> Result<Guard, AcquireError> {
        let timing = check(&self.inner, resource, ttl)?;
        let guard = fenced_round(&self.inner, resource, timing).await?;
        if let Some(token) = guard.fencing_token() {
            Span::current().record("token", token);
        }
        Ok(guard)
    }
}

impl Guard {
    /// The fencing token of a lock taken with [`Quorlock::acquire_fenced`]; `None` for a plain lock.
    ///
    /// Tokens of successive holders of any resource on these masters strictly increase.
    pub fn fencing_token(&self) -> Option<u64> {
        self.held.fencing_token.get().copied()
    }
}

fn check(inner: &Inner, resource: &str, ttl: std::time::Duration) -> Result<Timing, AcquireError> {
    if resource.is_empty() {
        return Err(crate::error::InputError::EmptyResource.into());
    }
    Ok(inner.check_ttl(ttl)?)
}

/// The fencing counter key on every master.
fn counter_key(inner: &Inner) -> String {
    prefixed(inner, FENCE_COUNTER_KEY)
}

/// The fencing epoch key on every master.
fn epoch_key(inner: &Inner) -> String {
    prefixed(inner, FENCE_EPOCH_KEY)
}

fn prefixed(inner: &Inner, name: &str) -> String {
    let mut key = String::with_capacity(inner.config.key_prefix.len() + name.len());
    key.push_str(&inner.config.key_prefix);
    key.push_str(name);
    key
}

/// One fenced acquisition, with one more try if a repair just made masters usable again.
async fn fenced_round(inner: &Arc<Inner>, resource: &str, timing: Timing) -> Result<Guard, AcquireError> {
    crate::health::tick(inner);
    repair(inner).await;
    match two_rounds(inner, resource, timing).await {
        Err(err) if asked_for_repair(&err) && repair(inner).await > 0 => {
            two_rounds(inner, resource, timing).await
        }
        other => other,
    }
}

fn asked_for_repair(err: &AcquireError) -> bool {
    err.failures()
        .iter()
        .any(|f| f.kind == NodeErrorKind::FenceRepair)
}

/// Round 1 on one master: the vote, and the counter when granted.
async fn acquire_on(
    inner: &Inner,
    node: &Node,
    key: &str,
    counter: &str,
    token: &str,
    ttl_ms: u64,
    counters: &Mutex<Vec<Option<u64>>>,
) -> Result<(), NodeErrorKind> {
    let index = node.index();
    if inner.health.needs_fence_repair(index) {
        return Err(NodeErrorKind::FenceRepair);
    }
    // The master's epoch is checked against the run_id read on this very connection; without one
    // (a check is under way) the vote could not be vouched for anyway.
    let Some(run_id) = inner.health.verified_run_id(node) else {
        return Err(NodeErrorKind::Unverified);
    };
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(FENCE_ACQUIRE_SCRIPT)
        .arg(3)
        .arg(key)
        .arg(counter)
        .arg(epoch_key(inner))
        .arg(token)
        .arg(ttl_ms)
        .arg(inner.health.fence_floor(index))
        .arg(run_id);
    let reply = match node.query(&cmd).await? {
        Value::Int(n) => AcquireReply::from_reply(n)
            .ok_or_else(|| NodeErrorKind::Protocol(format!("fenced acquire returned {n}")))?,
        other => {
            return Err(NodeErrorKind::Protocol(format!(
                "fenced acquire answered {other:?}"
            )))
        }
    };
    match reply {
        AcquireReply::Granted(value) => {
            inner.health.raise_fence_floor(index, value);
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
            inner.health.mark_fence_epoch(index);
            Err(NodeErrorKind::FenceRepair)
        }
        AcquireReply::Uninitialized | AcquireReply::Regressed => {
            warn!(
                node = index,
                addr = node.addr(),
                ?reply,
                "fencing counter missing or behind; the master is repaired before it votes again"
            );
            inner.health.mark_fence_repair(index);
            Err(NodeErrorKind::FenceRepair)
        }
    }
}

/// Round 2 on one master.
async fn commit_on(
    node: &Node,
    key: &str,
    counter: &str,
    token: &str,
    fence: u64,
) -> Result<(), NodeErrorKind> {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(FENCE_COMMIT_SCRIPT)
        .arg(2)
        .arg(key)
        .arg(counter)
        .arg(token)
        .arg(fence);
    node.script(&cmd).await?.into_result()
}

/// Both rounds of one fenced acquisition; on any failure the key is released on every master.
async fn two_rounds(inner: &Arc<Inner>, resource: &str, timing: Timing) -> Result<Guard, AcquireError> {
    let key = inner.shared_key(resource);
    let counter = counter_key(inner);
    let token = new_token()?;
    let ttl_ms = ttl_millis(timing.ttl());
    let n = inner.nodes.len();
    // The fenced lock is a plain lock on the wire: extend and release are the plain commands.
    let ops: Arc<dyn LockOps> = Arc::new(PlainLock::sharing(&key, &token));
    let mut cleanup = ReleaseOnDrop::new(Arc::clone(inner), Arc::clone(&ops));
    let started = Instant::now();

    // Round 1.
    let counters = Mutex::new(vec![None; n]);
    let mut tally = Tally::new(n, timing, started);
    let mut pending: Fanout<_> = inner
        .nodes
        .iter()
        .map(|node| {
            let (key, counter, token, counters) = (&key, &counter, &token, &counters);
            async move {
                let result = acquire_on(inner, node, key, counter, token, ttl_ms, counters).await;
                (node.index(), result)
            }
        })
        .collect();
    let mut failures = Vec::new();
    let decision = inner.decide(&mut tally, &mut pending, &mut failures).await;
    drop(pending);
    let counters = counters.into_inner().unwrap_or_else(PoisonError::into_inner);
    let granted: Vec<usize> = (0..n).filter(|i| tally.vote(*i) == Some(Vote::Yes)).collect();
    let fence = fencing_token(granted.iter().filter_map(|i| counters.get(*i).copied().flatten()));
    let fence = match (decision, fence) {
        (Decision::Acquired { .. }, Some(fence)) => fence,
        (decision, _) => {
            // Released before the error is returned, as a plain round does.
            inner
                .release_failed(&ops, |i| tally.vote(i).is_none(), &mut failures)
                .await;
            cleanup.disarm();
            return Err(round_error(resource, &tally, decision, started, timing, failures));
        }
    };
    debug!(
        fence,
        granted = granted.len(),
        "round 1 granted; committing the token"
    );

    // Round 2, decided against the validity of the whole acquisition (same start).
    let mut commit = Tally::new(n, timing, started);
    let now = Instant::now();
    for i in (0..n).filter(|i| !granted.contains(i)) {
        commit.handle_reply(i, Vote::No, now);
    }
    let mut pending: Fanout<_> = granted
        .iter()
        .filter_map(|i| inner.nodes.get(*i))
        .map(|node| {
            let (key, counter, token) = (&key, &counter, &token);
            async move { (node.index(), commit_on(node, key, counter, token, fence).await) }
        })
        .collect();
    let mut commit_failures = Vec::new();
    let decision = inner
        .decide(&mut commit, &mut pending, &mut commit_failures)
        .await;
    drop(pending);
    match decision {
        Decision::Acquired { valid_until, .. } => {
            for i in (0..n).filter(|i| commit.vote(*i) == Some(Vote::Yes)) {
                inner.health.raise_fence_floor(i, fence);
            }
            cleanup.disarm();
            let guard = Guard::new(
                Arc::clone(inner),
                resource.to_owned(),
                key,
                token,
                ops,
                timing.ttl(),
                valid_until,
            );
            // A new guard's cell is empty, so this cannot fail.
            let _ = guard.held.fencing_token.set(fence);
            Ok(guard)
        }
        decision => {
            // A master may still take the key if its round-1 request is in flight, or hold it
            // uncommitted if its commit is.
            let in_flight = |i| tally.vote(i).is_none() || commit.vote(i).is_none();
            // The masters that said no in round 1 count as no here too: their reasons as well.
            commit_failures.extend(failures.into_iter().filter(|f| !granted.contains(&f.node)));
            inner.release_failed(&ops, in_flight, &mut commit_failures).await;
            cleanup.disarm();
            Err(round_error(
                resource,
                &commit,
                decision,
                started,
                timing,
                commit_failures,
            ))
        }
    }
}

/// Repairs the masters whose fencing counter is missing, behind, or not vouched for by their
/// current epoch, where that is safe now; returns how many were repaired.
///
/// Every master's counter and epoch are read; only a counter whose epoch is the `run_id` this client
/// verified for that master (and which is not itself waiting) is intact. A master whose epoch is
/// stale is marked for repair on the way. A full repair waits until the grace has passed since the
/// master (re)started, then raises it to the largest counter read from a majority of the *other*
/// masters with intact counters. A master that restarted with `appendfsync always` lost nothing:
/// it is raised at once to the largest intact counter read (if any), which only stamps its new
/// epoch when it is already the highest. If every master answers that it has no counter, no token
/// was ever issued: they all start at zero, each stamped with its epoch.
pub(crate) async fn repair(inner: &Arc<Inner>) -> usize {
    let n = inner.nodes.len();
    if !(0..n).any(|i| inner.health.needs_fence_repair(i)) {
        return 0;
    }
    let counter = counter_key(inner);
    let epoch = epoch_key(inner);
    let mut get = redis::cmd("MGET");
    get.arg(&counter).arg(&epoch);
    let mut reads = vec![CounterRead::Unusable; n];
    let mut pending: Fanout<_> = inner
        .nodes
        .iter()
        .map(|node| {
            let get = &get;
            async move { (node, node.query(get).await) }
        })
        .collect();
    while let Some((node, reply)) = pending.next().await {
        let i = node.index();
        let read = match reply {
            Ok(Value::Array(items)) => read_counter(inner, node, &items),
            _ => CounterRead::Unusable,
        };
        if let Some(slot) = reads.get_mut(i) {
            *slot = read;
        }
    }
    drop(pending);
    let waiting: Vec<usize> = (0..n).filter(|i| inner.health.needs_fence_repair(*i)).collect();
    let now = Instant::now();
    let intact_max = reads
        .iter()
        .filter_map(|r| match r {
            CounterRead::Present(v) => Some(*v),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let light = |i: &usize| inner.health.fence_repair_light(*i);
    let (mut plan, target): (Vec<(usize, u64)>, RepairTarget) = match repair_target(&reads) {
        RepairTarget::Bootstrap => ((0..n).map(|i| (i, 0)).collect(), RepairTarget::Bootstrap),
        RepairTarget::Raise(value) => (
            waiting
                .iter()
                .copied()
                .filter(|i| inner.health.fence_repair_due(*i, now))
                .map(|i| (i, if light(&i) { intact_max } else { value }))
                .collect(),
            RepairTarget::Raise(value),
        ),
        undecided @ RepairTarget::Undecided { .. } => (
            waiting
                .iter()
                .copied()
                .filter(light)
                .map(|i| (i, intact_max))
                .collect(),
            undecided,
        ),
    };
    if let RepairTarget::Undecided { present, required } = target {
        debug!(
            present,
            required,
            light = plan.len(),
            "fencing repair postponed: too few intact counters answered"
        );
    }
    plan.sort_unstable();
    let mut repaired = 0;
    for (i, value) in plan {
        let Some(node) = inner.nodes.get(i) else { continue };
        // The run_id the grace was judged for; the script refuses if the master restarted since.
        let Some(run_id) = inner.health.verified_run_id(node) else {
            debug!(
                node = i,
                "fencing repair skipped: the master's run_id is being checked"
            );
            continue;
        };
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(FENCE_REPAIR_SCRIPT)
            .arg(2)
            .arg(&counter)
            .arg(&epoch)
            .arg(value)
            .arg(&run_id);
        match node.query(&cmd).await {
            Ok(Value::Int(-1)) => {
                debug!(
                    node = i,
                    addr = node.addr(),
                    "fencing repair refused: the master restarted since it was checked"
                );
            }
            Ok(Value::Int(value)) => {
                let value = u64::try_from(value).unwrap_or(0);
                info!(
                    node = i,
                    addr = node.addr(),
                    counter = value,
                    "fencing counter repaired"
                );
                inner.health.fence_repaired(i, value);
                repaired += 1;
            }
            Ok(other) => {
                warn!(node = i, addr = node.addr(), reply = ?other, "fencing repair answered unexpectedly")
            }
            Err(kind) => {
                warn!(node = i, addr = node.addr(), error = %kind, "fencing repair failed; retried on the next fenced acquire")
            }
        }
    }
    repaired
}

/// Classifies one master's `[counter, epoch]`; marks it for repair if its epoch is stale.
fn read_counter(inner: &Inner, node: &Node, items: &[Value]) -> CounterRead {
    let i = node.index();
    let text = |v: Option<&Value>| match v {
        Some(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    };
    let (counter, epoch) = (text(items.first()), text(items.get(1)));
    let Some(counter) = counter else {
        // No counter: a fresh master, or one wiped (its epoch went with it).
        return CounterRead::Absent;
    };
    let Some(run_id) = inner.health.verified_run_id(node) else {
        return CounterRead::Unusable;
    };
    if epoch.as_deref() != Some(run_id.as_str()) {
        if !inner.health.needs_fence_repair(i) {
            info!(
                node = i,
                addr = node.addr(),
                "fencing epoch is stale (the master restarted); it is repaired before it votes again"
            );
            inner.health.mark_fence_epoch(i);
        }
        return CounterRead::Unusable;
    }
    if inner.health.needs_fence_repair(i) {
        return CounterRead::Unusable;
    }
    counter
        .parse()
        .map_or(CounterRead::Unusable, CounterRead::Present)
}
