//! What a lock kind is: a value that supplies its keys, its acquire call, how a master's reply
//! reads, how it waits between attempts and what its hold extends and releases with. One generic
//! path (`client/acquire.rs`) does everything else for every kind: the checks, the local queue,
//! the retry and its waits, the round, the departure on the way out, and the guard.
//!
//! A kind sees a narrow [`Ctx`] (the key names, the entropy, the configuration), never the client.
//! Fencing is not a kind but a wrapper around one ([`Fenceable`], `fenced.rs`): the plain lock and
//! the write hold take it.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use tokio::time::Instant;

use crate::base::error::{AcquireError, InputError};
use crate::base::lua::ScriptCall;
use crate::base::names::Names;
use crate::mechanisms::coalesce::Turn;
use crate::mechanisms::config::Config;
use crate::mechanisms::ops::LockOps;
use crate::mechanisms::round::Read;
use crate::seam::link::Call;
use crate::seam::token::Entropy;

/// What a kind may use to build its keys and its holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx<'a> {
    /// The client's key and channel names.
    pub(crate) names: &'a Names,
    /// Where tokens, ids and tickets come from.
    pub(crate) entropy: &'a Entropy,
    /// The checked configuration.
    pub(crate) config: &'a Config,
}

/// One round's hold: the key the guard names, the token the lock holds, and how it is extended
/// and released.
#[derive(Debug)]
pub(crate) struct Held<H> {
    /// The key (or, for a set, the keys as one label) the guard reports.
    pub(crate) key: Arc<str>,
    /// The token the lock holds while it is ours.
    pub(crate) token: Arc<str>,
    /// The kind's extend and release.
    pub(crate) hold: Arc<H>,
}

impl<H> Held<H> {
    /// A hold of `key` under a fresh token, made by `hold` from the key and the token.
    ///
    /// # Errors
    /// When no token can be drawn.
    pub(crate) fn fresh(
        ctx: &Ctx<'_>,
        key: &Arc<str>,
        hold: impl FnOnce(&Arc<str>, &Arc<str>) -> H,
    ) -> Result<Self, AcquireError> {
        let token = ctx.entropy.token()?;
        Ok(Self {
            hold: Arc::new(hold(key, &token)),
            key: Arc::clone(key),
            token,
        })
    }
}

/// Refuses an empty resource name.
///
/// # Errors
/// [`InputError::EmptyResource`].
pub(crate) fn named(resource: &str) -> Result<(), InputError> {
    if resource.is_empty() {
        return Err(InputError::EmptyResource);
    }
    Ok(())
}

/// A won acquisition, before it becomes a guard.
#[derive(Debug)]
pub(crate) struct Won<H> {
    /// What is held.
    pub(crate) held: Held<H>,
    /// When the lock stops being valid.
    pub(crate) valid_until: Instant,
    /// The fencing token, for a fenced acquisition.
    pub(crate) fence: Option<u64>,
    /// This process's local turn on the key, held until the guard is released.
    pub(crate) turn: Option<Turn>,
}

/// How a kind waits between attempts.
#[derive(Debug)]
pub(crate) enum Wait {
    /// Queued for `key` (`mechanisms/handoff.rs`): until a release hands it over, an announced
    /// release of any of the `also` keys, or the keys' expiry on a majority, or a jittered delay
    /// when masters fail rather than refuse (the plain lock's wait, and the write hold's).
    ReleasedOrExpired {
        /// The key the waiter queues for, whose release hands it on.
        key: Arc<str>,
        /// Keys whose announced releases wake it too, and whose expiry it waits for as well.
        also: Vec<String>,
    },
    /// A jittered delay, cut short by an announced release of any of these keys.
    Released(Vec<String>),
    /// A jittered delay of at most `cap`, cut short by a release on `key` that names `name` (the
    /// fair lock's turn).
    Named {
        /// The lock's key, whose release channel names the next waiter.
        key: Arc<str>,
        /// What the announcement names when it is this waiter's turn.
        name: String,
        /// The longest pause between rounds.
        cap: Duration,
    },
}

/// What a lost round leads to.
#[derive(Debug)]
pub(crate) enum Lost {
    /// Another round at once, within the same attempt (a semaphore aiming at another slot).
    Again,
    /// The attempt ends with this error; the retry loop decides whether another follows.
    Stop(AcquireError),
}

/// What a script sent to every master on the way out of an acquire says, for its logs.
#[derive(Debug)]
pub(crate) struct Departure {
    /// The script that takes the waiter off a master.
    pub(crate) call: ScriptCall,
    /// Who is leaving, for the logs.
    pub(crate) who: String,
    /// What a failure leaves behind, for the logs.
    pub(crate) lapses: &'static str,
}

/// A lock kind: everything the generic acquire path needs to know about it.
pub(crate) trait Kind: Send + Sync {
    /// How a held lock of this kind is extended and released.
    type Hold: LockOps;
    /// What a master's reply tells besides its vote.
    type Note: Send + 'static;
    /// What reading a reply needs of the request (a count, a permit number), copied into each
    /// request so that the requests still in flight at the decision need nothing else.
    type Reads: Copy + Send + Sync + 'static;

    /// The name errors, logs and the guard use: the resource, or the set's names.
    fn resource(&self) -> &str;

    /// Checks the kind's own arguments (the TTL is the path's), before anything is sent: by
    /// default, that the resource has a name.
    ///
    /// # Errors
    /// What makes the request invalid.
    fn check(&self) -> Result<(), InputError> {
        named(self.resource())
    }

    /// How to wait between attempts.
    fn wait(&self) -> Wait;

    /// The key whose local turn this process's waiters queue on, if the kind queues.
    fn local_turn(&self) -> Option<&Arc<str>> {
        None
    }

    /// The hold of the next round (a fresh token, for most kinds).
    ///
    /// # Errors
    /// When no token can be drawn, or the request cannot be built.
    fn hold(&self, ctx: &Ctx<'_>) -> Result<Held<Self::Hold>, AcquireError>;

    /// The acquire call of `held` for a TTL of `ttl_ms`.
    fn call(&self, held: &Held<Self::Hold>, ttl_ms: u64) -> Call;

    /// What [`Kind::read`] needs of this request.
    fn reads(&self) -> Self::Reads;

    /// Reads one master's reply to the acquire call, with what `reads` gave.
    fn read(reads: Self::Reads, reply: Value) -> Read<Self::Note>;

    /// A round of `held` won over `masters` masters, with the notes of the replies.
    fn won(&self, _held: &Held<Self::Hold>, _notes: Vec<(usize, Self::Note)>, _masters: usize) {}

    /// Round `round` (from 1) of an attempt was lost with `error`, and the replies noted `notes`.
    fn lost(&self, error: AcquireError, _notes: Vec<(usize, Self::Note)>, _round: usize) -> Lost {
        Lost::Stop(error)
    }

    /// What takes this request's waiter off every master when the acquire ends, if it leaves one.
    fn departure(&self) -> Option<Departure> {
        None
    }
}

/// The fencing arguments of one master's first fenced round.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FencingArgs<'a> {
    /// The master's fencing counter key.
    pub(crate) counter: &'a str,
    /// The master's fencing epoch key.
    pub(crate) epoch: &'a str,
    /// The lowest counter value this client accepts from the master.
    pub(crate) floor: u64,
    /// The `run_id` read on this connection, which the epoch must match.
    pub(crate) run_id: &'a str,
}

/// A kind that can carry a fencing token: its first fenced round takes the lock and draws the
/// counter in one script per master.
pub(crate) trait Fenceable: Kind {
    /// The first round's script on one master.
    fn fenced_call(&self, held: &Held<Self::Hold>, ttl_ms: u64, fencing: FencingArgs<'_>) -> ScriptCall;

    /// Reads the first round's integer answer.
    fn fenced_reply(&self, code: i64) -> Option<crate::core::fencing::AcquireReply>;
}
