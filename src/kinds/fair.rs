//! The fair lock: waiters are served first come, first served, by the order of their tickets.
//!
//! A waiter draws one [`Ticket`] when it starts waiting: its time in milliseconds and a random id
//! that breaks ties. Every round puts the ticket in a sorted set (the queue) on every master, always
//! with the ticket's own score, and refreshes the waiter's heartbeat deadline there. A master grants
//! the lock only to the first live waiter of its queue. Because every master orders the same tickets
//! the same way, the masters agree on the head even when a waiter reached only some of them, or when
//! their queues held different things before: after one round of each live waiter, every reachable
//! master has every live ticket in the same order, and only the earliest can take any master.
//!
//! A waiter that stops calling (crashed, partitioned) is purged once its heartbeat deadline passes,
//! so it blocks the queue for at most one heartbeat. A waiter that gives up or is dropped leaves the
//! queue at once. Release deletes the lock and publishes the next live waiter's ticket id on the
//! release channel, where the waiting client listens so it retries at once. Tickets are ordered by the waiters' wall clocks: clients whose clocks disagree
//! by more than the time between their arrivals may be served in the order of their clocks.
//!
//! The ticket only orders the queue. The lock itself holds a fresh random token drawn for each
//! acquisition, as a plain lock does: a ticket can be cloned and reused, and its id is published to
//! every listener on the release channel, so it must not be what proves ownership. A master that
//! holds the lock under any other token refuses the round, even when the ticket is at the head.

use std::cmp::Ordering;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::Notify;
use tracing::{debug, warn};

use crate::background::Background;
use crate::client::{Guard, Inner};
use crate::clock::Clock;
use crate::core::{RetryPlan, Timing};
use crate::error::{AcquireError, InputError, NodeErrorKind};
use crate::link::{Call, Masters};
use crate::lua::{
    eval, int_reply, Found, Lua, ScriptCall, EXTEND, FAIR_ACQUIRE as ACQUIRE, FAIR_LEAVE as LEAVE,
    FAIR_RELEASE,
};
use crate::names::{release_channel, ttl_millis, FAIR_DEADLINES_SUFFIX, FAIR_QUEUE_SUFFIX, FAIR_TAG};
use crate::ops::LockOps;
use crate::pubsub::Waiter;
use crate::retry::policy::Sleep;
use crate::token::Entropy;

/// How long a waiter stays in the queue without a heartbeat by default: 5 s. A waiter refreshes it
/// on every round (at least every third of it), so only a waiter that stopped calling lapses.
pub const DEFAULT_FAIR_HEARTBEAT: Duration = Duration::from_secs(5);

/// A waiter's place in a fair lock's queue: its time in milliseconds since the Unix epoch, then a
/// random id that breaks ties. Tickets compare in the order the masters serve them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ticket {
    at_ms: u64,
    id: String,
}

impl Ticket {
    /// A ticket for now, with a fresh random 128-bit id.
    pub fn new() -> Self {
        Self::drawn(&Entropy::Os)
    }

    /// A ticket for now on `entropy`'s clock, with an id drawn from it.
    pub(crate) fn drawn(entropy: &Entropy) -> Self {
        Self {
            at_ms: entropy.wall_ms(),
            id: entropy.id(),
        }
    }

    /// The ticket's time, in milliseconds since the Unix epoch (its score in the queue).
    pub fn at_ms(&self) -> u64 {
        self.at_ms
    }

    /// The ticket's random id: its member in the queue, and what release notifications name. It is
    /// not the lock's value: every acquisition holds the lock under its own fresh token.
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Default for Ticket {
    fn default() -> Self {
        Self::new()
    }
}

impl Ord for Ticket {
    fn cmp(&self, other: &Self) -> Ordering {
        // A sorted set orders by score, then by member bytes: the same order here.
        (self.at_ms, self.id.as_bytes()).cmp(&(other.at_ms, other.id.as_bytes()))
    }
}

impl PartialOrd for Ticket {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// How a fair acquire waits: its heartbeat, and optionally a ticket drawn earlier.
#[derive(Clone, Debug)]
#[must_use = "options do nothing until given to a fair lock request (`Lock::fair_with`)"]
pub struct FairOptions {
    heartbeat: Duration,
    ticket: Option<Ticket>,
}

impl Default for FairOptions {
    fn default() -> Self {
        Self {
            heartbeat: DEFAULT_FAIR_HEARTBEAT,
            ticket: None,
        }
    }
}

impl FairOptions {
    /// The defaults: a [`DEFAULT_FAIR_HEARTBEAT`] heartbeat and a ticket drawn when waiting starts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets how long this waiter stays queued without a heartbeat (default
    /// [`DEFAULT_FAIR_HEARTBEAT`]). Shorter skips crashed waiters sooner; it must stay well above a
    /// round trip to the masters.
    pub fn heartbeat(mut self, heartbeat: Duration) -> Self {
        self.heartbeat = heartbeat;
        self
    }

    /// Waits with `ticket` instead of drawing one when waiting starts.
    pub fn ticket(mut self, ticket: Ticket) -> Self {
        self.ticket = Some(ticket);
        self
    }
}

/// One acquisition of a fair lock: its keys, its ticket (its place in the queue), the token the lock
/// holds while it is ours, and how that lock is extended and released.
pub(crate) struct FairWaiter {
    /// The lock, the queue, the deadlines.
    keys: [Arc<str>; 3],
    ticket: Ticket,
    /// Drawn for this acquisition alone: the lock's value while we hold it.
    token: Arc<str>,
    channel: String,
    /// The acquire script: [`ACQUIRE`], unless a test broke the lock on purpose.
    acquire_script: &'static Lua,
}

impl fmt::Debug for FairWaiter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token stays out of logs: whoever has it can extend or release the lock.
        f.debug_struct("FairWaiter")
            .field("key", &self.keys[0])
            .field("ticket", &self.ticket)
            .finish_non_exhaustive()
    }
}

impl FairWaiter {
    fn new(inner: &Inner, resource: &str, ticket: Ticket, token: Arc<str>) -> Self {
        let lock = inner.names().tagged(FAIR_TAG, resource);
        let queue = format!("{lock}{FAIR_QUEUE_SUFFIX}");
        let deadlines = format!("{lock}{FAIR_DEADLINES_SUFFIX}");
        let channel = release_channel(&lock);
        #[cfg(feature = "seam")]
        let acquire_script = if inner.config().unsafe_fair_skips_queue {
            &crate::lua::FAIR_ACQUIRE_SKIPPING_QUEUE
        } else {
            &ACQUIRE
        };
        #[cfg(not(feature = "seam"))]
        let acquire_script = &ACQUIRE;
        Self {
            keys: [lock.into(), queue.into(), deadlines.into()],
            ticket,
            token,
            channel,
            acquire_script,
        }
    }

    fn acquire_cmd(&self, ttl_ms: u64, heartbeat_ms: u64) -> ScriptCall {
        let mut cmd = eval(self.acquire_script, &self.keys);
        cmd.push(&self.ticket.id)
            .push(self.ticket.at_ms)
            .push(ttl_ms)
            .push(heartbeat_ms)
            .push(&*self.token);
        cmd
    }

    fn leave_cmd(&self) -> ScriptCall {
        let mut cmd = eval(&LEAVE, &self.keys);
        cmd.push(&self.ticket.id).push(&self.channel);
        cmd
    }

    /// Takes the ticket out of the queue on every master; failures only cost a heartbeat.
    async fn leave(&self, masters: &Masters) {
        let cmd = Arc::new(self.leave_cmd());
        let replies = crate::fanout::all(masters.iter().map(|link| {
            link.run_script(&cmd)
                .map(|reply| reply.and_then(Found::from_reply))
        }))
        .await;
        for (node, reply) in replies.into_iter().enumerate() {
            if let Err(error) = reply {
                warn!(node, %error, "could not leave the fair queue on a master; the ticket lapses with its heartbeat");
            }
        }
    }
}

impl LockOps for FairWaiter {
    fn extend(&self, ttl_ms: u64) -> Call {
        let mut cmd = eval(&EXTEND, &self.keys[..1]);
        cmd.push(&*self.token).push(ttl_ms);
        Call::Script(cmd)
    }

    fn release(&self) -> Call {
        let mut cmd = eval(&FAIR_RELEASE, &self.keys);
        cmd.push(&*self.token).push(&self.channel).push(&self.ticket.id);
        Call::Script(cmd)
    }
}

/// Wakes a waiting fair acquire as soon as a release or a leave names its ticket.
///
/// The wait listens on the lock's release channel through the process's shared pub/sub
/// connections (one per master, see `wait.rs`), for messages that carry our ticket id: however many
/// fair waiters a process has, each master sees one subscriber. The subscription starts in the
/// background at once, so a release right after the first round is not missed, and is renewed
/// before each pause on masters that reconnected. Between rounds the waiter sleeps until its turn is
/// announced or its jittered delay ends, whichever comes first: the delay stays the fallback (a
/// master that could not be subscribed to, a message missed while connecting), so waking is only
/// ever faster.
struct Wake {
    waiter: Arc<Waiter>,
    turn: Arc<Notify>,
    timeout: Duration,
    /// The longest pause between rounds: a third of the heartbeat, so the ticket never lapses.
    cap: Duration,
    subscribing: Option<tokio::task::JoinHandle<()>>,
    /// The client's clock, which the pauses are measured on.
    clock: Clock,
}

impl Wake {
    fn start(inner: &Inner, waiter: &FairWaiter, cap: Duration) -> Self {
        let mut listener = inner.waits().waiter(&waiter.keys[0]);
        let turn = listener.named(&waiter.ticket.id);
        let listener = Arc::new(listener);
        let timeout = inner.config().node_timeout;
        // In the background nothing waits on it: a first connection gets the connect timeout.
        let first = inner.config().connect_timeout;
        let subscribing = tokio::runtime::Handle::try_current().ok().map(|handle| {
            let listener = Arc::clone(&listener);
            handle.spawn(async move {
                let masters = listener.listen(first).await;
                debug!(masters, "listening for our turn");
            })
        });
        Self {
            waiter: listener,
            turn,
            timeout,
            cap,
            subscribing,
            clock: inner.clock().clone(),
        }
    }

    /// Sleeps for `delay`, or less if our turn is announced meanwhile (or was, since the last pause).
    fn pause(&self, delay: Duration) -> impl Future<Output = ()> + 'static {
        let (turn, waiter, timeout) = (Arc::clone(&self.turn), Arc::clone(&self.waiter), self.timeout);
        let clock = self.clock.clone();
        async move {
            let until = clock.deadline(delay);
            // Re-subscribes on masters that reconnected (a no-op otherwise), within this pause.
            let _ = clock.timeout_at(until, waiter.listen(timeout)).await;
            tokio::select! {
                // In a fixed order: one seed, one history (the simulation runs this on a paused clock).
                biased;
                () = clock.sleep_until(until) => {}
                () = turn.notified() => debug!("woken by a release naming our ticket"),
            }
        }
    }
}

impl Sleep for Wake {
    fn sleep(&self, delay: Duration, _contended: bool) -> impl Future<Output = ()> + Send {
        self.pause(delay.min(self.cap))
    }
}

impl Drop for Wake {
    fn drop(&mut self) {
        if let Some(subscribing) = self.subscribing.take() {
            subscribing.abort();
        }
    }
}

/// Leaves the queue from a spawned task unless disarmed: the cancel-safety net of a fair wait, and
/// the tidy-up after success (the ticket may linger on masters that did not grant the lock).
struct LeaveOnDrop {
    armed: Option<(Arc<Masters>, Background, Arc<FairWaiter>)>,
}

impl LeaveOnDrop {
    fn disarm(&mut self) {
        self.armed = None;
    }
}

impl Drop for LeaveOnDrop {
    fn drop(&mut self) {
        let Some((masters, background, waiter)) = self.armed.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                background.spawn_on(&handle, async move {
                    waiter.leave(&masters).await;
                    debug!(ticket = waiter.ticket.id(), "left the fair queue");
                });
            }
            Err(_) => {
                warn!(
                    ticket = waiter.ticket.id(),
                    "no async runtime to leave the fair queue from; the ticket lapses with its heartbeat"
                )
            }
        }
    }
}

/// Acquires the fair lock on `resource`, waiting in its queue: retrying within `plan` (at least
/// every third of the heartbeat, and at once when a release names this waiter's ticket), or one
/// round when `plan` is `None`. On any error the ticket has left the queue.
pub(crate) async fn acquire(
    inner: &Arc<Inner>,
    resource: &str,
    ttl: Duration,
    options: FairOptions,
    plan: Option<RetryPlan>,
) -> Result<Guard, AcquireError> {
    let (timing, waiter) = prepare(inner, resource, ttl, options.ticket, options.heartbeat)?;
    let heartbeat_ms = ttl_millis(options.heartbeat);
    match plan {
        Some(plan) => {
            let wake = Wake::start(inner, &waiter, options.heartbeat / 3);
            let wait = inner.retrying(resource, plan, wake, || {
                round(inner, resource, &waiter, timing, heartbeat_ms)
            });
            queued(inner, &waiter, wait).await
        }
        None => {
            let once = round(inner, resource, &waiter, timing, heartbeat_ms);
            queued(inner, &waiter, once).await
        }
    }
}

/// Checks the arguments and sets up the waiter with a fresh token, recording its ticket on the
/// current span.
fn prepare(
    inner: &Inner,
    resource: &str,
    ttl: Duration,
    ticket: Option<Ticket>,
    heartbeat: Duration,
) -> Result<(Timing, Arc<FairWaiter>), AcquireError> {
    let timing = inner.check(resource, ttl)?;
    if heartbeat.is_zero() {
        return Err(InputError::ZeroHeartbeat.into());
    }
    let ticket = ticket.unwrap_or_else(|| Ticket::drawn(inner.entropy()));
    tracing::Span::current().record("ticket", ticket.id());
    let token = inner.entropy().token()?;
    Ok((timing, Arc::new(FairWaiter::new(inner, resource, ticket, token))))
}

/// Runs `wait` while `waiter` is queued: on failure it leaves the queue before returning; on success,
/// or when dropped part-way, it leaves from a spawned task.
async fn queued<F>(inner: &Arc<Inner>, waiter: &Arc<FairWaiter>, wait: F) -> Result<Guard, AcquireError>
where
    F: Future<Output = Result<Guard, AcquireError>>,
{
    let mut leave = LeaveOnDrop {
        armed: Some((
            Arc::clone(inner.masters()),
            inner.background().clone(),
            Arc::clone(waiter),
        )),
    };
    let result = wait.await;
    if result.is_err() {
        leave.disarm();
        waiter.leave(inner.masters()).await;
    }
    result
}

/// One quorum round: queue (or stay queued) on every master and take the lock where we are first.
async fn round(
    inner: &Arc<Inner>,
    resource: &str,
    waiter: &Arc<FairWaiter>,
    timing: Timing,
    heartbeat_ms: u64,
) -> Result<Guard, AcquireError> {
    let cmd = Arc::new(waiter.acquire_cmd(ttl_millis(timing.ttl()), heartbeat_ms));
    let ops: Arc<dyn LockOps> = Arc::clone(waiter) as Arc<dyn LockOps>;
    // The waiter's own key serves the round and its guard: no copy per round.
    let key = Arc::clone(&waiter.keys[0]);
    let token = Arc::clone(&waiter.token);
    inner
        .acquire_round(resource, key, token, timing, ops, |link| {
            link.run_script(&cmd)
                .map(|reply| match int_reply(reply?, "fair acquire")? {
                    1 => Ok(()),
                    -1 => Err(NodeErrorKind::Held),
                    0 => Err(NodeErrorKind::Queued),
                    other => Err(NodeErrorKind::Protocol(
                        format!("fair acquire answered {other}, expected 1, 0 or -1").into(),
                    )),
                })
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tickets_order_by_time_then_id() {
        let early = Ticket {
            at_ms: 10,
            id: "ff".into(),
        };
        let late = Ticket {
            at_ms: 11,
            id: "00".into(),
        };
        let tie = Ticket {
            at_ms: 10,
            id: "fe".into(),
        };
        assert!(early < late);
        assert!(tie < early);
        let fresh = Ticket::new();
        assert_eq!(fresh.id().len(), 32);
        assert_ne!(fresh, Ticket::new());
    }

    #[test]
    fn debug_leaves_the_token_out() {
        let token = "0123456789abcdef0123456789abcdef";
        let waiter = FairWaiter {
            keys: ["p:l".into(), "p:l:queue".into(), "p:l:deadlines".into()],
            ticket: Ticket {
                at_ms: 10,
                id: "ff".into(),
            },
            token: token.into(),
            channel: "c".into(),
            acquire_script: &ACQUIRE,
        };
        let shown = format!("{waiter:?}");
        assert!(shown.contains("p:l") && shown.contains("ff"), "{shown}");
        assert!(!shown.contains(token), "{shown}");
    }
}
