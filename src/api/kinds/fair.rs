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
use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use futures::future::BoxFuture;

use crate::api::client::request::{Choose, Request};
use crate::api::client::Guard;
use crate::api::kinds::kind::{named, Ctx, Departure, Held, Kind, Wait};
use crate::api::lock::Lock;
use crate::base::error::{AcquireError, InputError, NodeErrorKind};
use crate::base::lua::{eval, int_reply, lua, Lua, ScriptCall, EXTEND};
use crate::base::names::{release_channel, ttl_millis, FAIR_DEADLINES_SUFFIX, FAIR_QUEUE_SUFFIX, FAIR_TAG};
use crate::mechanisms::ops::LockOps;
use crate::mechanisms::removal::Mechanism;
use crate::mechanisms::round::Read;
use crate::seam::link::Call;
use crate::seam::token::Entropy;

lua! {
    /// A fair lock's acquire: queue the ticket and take the lock at the head of the queue.
    static ACQUIRE = concat!(
        include_str!("../../scripts/fair_common.lua"),
        include_str!("../../scripts/fair_acquire.lua")
    );
    /// Out of model, for the simulation's negative control only
    /// (`QuorlockBuilder::unsafe_without_for_tests(Mechanism::FairQueue)`): the fair acquire with
    /// its queue check taken out, so that a later ticket can take a free lock ahead of earlier
    /// waiters. In every build, though only a build with the `seam` feature can ask for it.
    static FAIR_ACQUIRE_SKIPPING_QUEUE = concat!(
        include_str!("../../scripts/fair_common.lua"),
        include_str!("../../scripts/fair_skip_queue_for_tests.lua"),
        include_str!("../../scripts/fair_acquire.lua")
    );
    /// A fair lock's release, naming the next live waiter.
    static FAIR_RELEASE = concat!(
        include_str!("../../scripts/fair_common.lua"),
        include_str!("../../scripts/fair_release.lua")
    );
    /// A fair waiter leaving the queue.
    static LEAVE = concat!(
        include_str!("../../scripts/fair_common.lua"),
        include_str!("../../scripts/fair_leave.lua")
    );
}

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
    fn new(ctx: &Ctx<'_>, resource: &str, ticket: Ticket, token: Arc<str>) -> Self {
        let lock = ctx.names.tagged(FAIR_TAG, resource);
        let queue = format!("{lock}{FAIR_QUEUE_SUFFIX}");
        let deadlines = format!("{lock}{FAIR_DEADLINES_SUFFIX}");
        let channel = release_channel(&lock);
        let acquire_script = if ctx.config.removed.has(Mechanism::FairQueue) {
            &FAIR_ACQUIRE_SKIPPING_QUEUE
        } else {
            &ACQUIRE
        };
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

/// A fair lock request: its waiter (the ticket and the token, one for every round of the
/// request) and how long its ticket lives without a heartbeat.
#[derive(Debug)]
pub(crate) struct Fair {
    resource: String,
    waiter: Arc<FairWaiter>,
    heartbeat: Duration,
}

impl Fair {
    /// A request for the fair lock on `resource` with `options`; its ticket is recorded on the
    /// current span.
    ///
    /// # Errors
    /// When no token can be drawn.
    pub(crate) fn new(ctx: &Ctx<'_>, resource: String, options: FairOptions) -> Result<Self, AcquireError> {
        let ticket = options.ticket.unwrap_or_else(|| Ticket::drawn(ctx.entropy));
        tracing::Span::current().record("ticket", ticket.id());
        let token = ctx.entropy.token()?;
        Ok(Self {
            waiter: Arc::new(FairWaiter::new(ctx, &resource, ticket, token)),
            resource,
            heartbeat: options.heartbeat,
        })
    }
}

impl Kind for Fair {
    type Hold = FairWaiter;
    type Note = ();
    type Reads = ();

    fn resource(&self) -> &str {
        &self.resource
    }

    fn check(&self) -> Result<(), InputError> {
        named(&self.resource)?;
        if self.heartbeat.is_zero() {
            return Err(InputError::ZeroHeartbeat);
        }
        Ok(())
    }

    /// At least every third of the heartbeat, so the ticket never lapses, and at once when a
    /// release names this waiter's ticket.
    fn wait(&self) -> Wait {
        Wait::Named {
            key: Arc::clone(&self.waiter.keys[0]),
            name: self.waiter.ticket.id.clone(),
            cap: self.heartbeat / 3,
        }
    }

    /// The waiter's own key and token serve every round and the guard: no copy per round.
    fn hold(&self, _ctx: &Ctx<'_>) -> Result<Held<FairWaiter>, AcquireError> {
        Ok(Held {
            key: Arc::clone(&self.waiter.keys[0]),
            token: Arc::clone(&self.waiter.token),
            hold: Arc::clone(&self.waiter),
        })
    }

    /// Queue (or stay queued) on every master and take the lock where we are first.
    fn call(&self, held: &Held<FairWaiter>, ttl_ms: u64) -> Call {
        Call::Script(held.hold.acquire_cmd(ttl_ms, ttl_millis(self.heartbeat)))
    }

    fn reads(&self) {}

    fn read((): (), reply: Value) -> Read<()> {
        Read::vote(int_reply(reply, "fair acquire").and_then(|code| match code {
            1 => Ok(()),
            -1 => Err(NodeErrorKind::Held),
            0 => Err(NodeErrorKind::Queued),
            other => Err(NodeErrorKind::Protocol(
                format!("fair acquire answered {other}, expected 1, 0 or -1").into(),
            )),
        }))
    }

    /// Out of the queue on every master: at once on failure, from a task otherwise (the ticket may
    /// linger on masters that did not grant the lock).
    fn departure(&self) -> Option<Departure> {
        Some(Departure {
            call: self.waiter.leave_cmd(),
            who: format!("fair ticket {}", self.waiter.ticket.id),
            lapses: "the ticket lapses with its heartbeat",
        })
    }
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

/// The fair lock as a request's kind, with its options.
#[derive(Debug)]
struct FairChoice(FairOptions);

impl Choose for FairChoice {
    fn name(&self) -> &'static str {
        "fair"
    }

    fn acquire<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Guard, AcquireError>> {
        request.one(self, |ctx, resource| Fair::new(ctx, resource, self.0.clone()))
    }
}

impl Lock<'_> {
    /// Asks for a fair lock, served in the order waiters arrived, with the default
    /// [`FairOptions`]. A fair lock uses its own keys, so it does not exclude a plain lock on the
    /// same resource.
    pub fn fair(self) -> Self {
        self.fair_with(FairOptions::default())
    }

    /// Asks for a fair lock with `options` (a heartbeat, or a ticket drawn earlier).
    pub fn fair_with(self, options: FairOptions) -> Self {
        self.choose(FairChoice(options))
    }
}
