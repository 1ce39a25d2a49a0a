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
//! round applies the write rule: see `fenced.rs`); a read hold extends and releases its own entry.
//! Every hold is an ordinary [`Guard`](crate::Guard). A writer that gives up takes its waiter id
//! off every master before its call returns; one that succeeds or is dropped, from a task; one
//! that crashes leaves it to lapse, which blocks new readers for at most the TTL it asked for.
//!
//! Neither kind is reentrant and a read is never upgraded to a write: a writer waits for every
//! reader, its own included, so a holder of a read that asks for the write waits until its read is
//! released or expires. Two readers upgrading at once would each wait for the other; a release
//! first, then a write, cannot deadlock.

use std::fmt;
use std::sync::Arc;

use redis::Value;

use futures::future::BoxFuture;

use crate::api::client::request::{Choose, Request, Target};
use crate::api::client::Guard;
use crate::api::kinds::fenced::Fenced;
use crate::api::kinds::kind::{Ctx, Departure, Fenceable, FencingArgs, Held, Kind, Wait};
use crate::api::lock::Lock;
use crate::base::error::{AcquireError, NodeErrorKind};
use crate::base::lua::{eval, int_reply, lua, ScriptCall};
use crate::base::names::{release_channel, ttl_millis};
use crate::core::fencing::AcquireReply;
use crate::core::rwlock::{fenced_write_reply, RwReply};
use crate::mechanisms::ops::{LockOps, PlainLock};
use crate::mechanisms::removal::Mechanism;
use crate::mechanisms::round::Read;
use crate::seam::link::Call;

lua! {
    /// A read lock's acquire: join the readers unless a writer holds or waits.
    static RW_READ = concat!(
        include_str!("../../scripts/rw_common.lua"),
        include_str!("../../scripts/rw_read.lua")
    );
    /// A read hold's release; the last reader announces it.
    static RW_READ_RELEASE = include_str!("../../scripts/rw_read_release.lua");
    /// A read hold's extend.
    static RW_READ_EXTEND = include_str!("../../scripts/rw_read_extend.lua");
    /// A write lock's acquire: the writer key unless a writer or readers hold; waits behind readers.
    static RW_WRITE = concat!(
        include_str!("../../scripts/rw_common.lua"),
        include_str!("../../scripts/rw_write.lua")
    );
    /// A fenced write's first round: the write rule and the fencing counter's draw, in one script.
    static RW_WRITE_FENCED = concat!(
        include_str!("../../scripts/rw_common.lua"),
        include_str!("../../scripts/rw_write_fenced.lua")
    );
    /// A waiting writer giving up.
    static RW_LEAVE = include_str!("../../scripts/rw_leave.lua");
}

/// The three keys of one read-write lock.
#[derive(Debug, Clone)]
struct Keys {
    writer: Arc<str>,
    readers: Arc<str>,
    waiting: String,
}

impl Keys {
    fn new(ctx: &Ctx<'_>, resource: &str) -> Self {
        let [writer, readers, waiting] = ctx.names.rwlock(resource);
        Self {
            writer: writer.into(),
            readers: readers.into(),
            waiting,
        }
    }

    fn all(&self) -> [&str; 3] {
        [&self.writer, &self.readers, &self.waiting]
    }
}

/// A read hold: our entry among the readers.
pub(crate) struct ReadHold {
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

/// The write hold: a plain lock on the writer key, known as a write.
#[derive(Debug)]
pub(crate) struct WriteHold(PlainLock);

impl LockOps for WriteHold {
    fn extend(&self, ttl_ms: u64) -> Call {
        self.0.extend(ttl_ms)
    }

    fn release(&self) -> Call {
        self.0.release()
    }

    fn cleanup(&self) -> Call {
        self.0.cleanup()
    }

    fn is_read(&self) -> Option<bool> {
        Some(false)
    }
}

/// Reads a read or write script's answer as a vote.
fn vote(reply: Value, what: &str) -> Read<()> {
    Read::vote(
        int_reply(reply, what).and_then(|code| match RwReply::from_code(code) {
            Some(RwReply::Granted) => Ok(()),
            Some(_) => Err(NodeErrorKind::Held),
            None => Err(NodeErrorKind::Protocol(
                format!("{what} answered {code}, expected 1, -1, -2 or -3").into(),
            )),
        }),
    )
}

/// A read hold of one resource, woken by a writer's release or departure.
#[derive(Debug)]
pub(crate) struct Reading {
    resource: String,
    keys: Keys,
}

impl Reading {
    /// A read hold of `resource`.
    pub(crate) fn new(ctx: &Ctx<'_>, resource: String) -> Self {
        Self {
            keys: Keys::new(ctx, &resource),
            resource,
        }
    }
}

impl Kind for Reading {
    type Hold = ReadHold;
    type Note = ();
    type Reads = ();

    fn resource(&self) -> &str {
        &self.resource
    }

    fn wait(&self) -> Wait {
        Wait::Released(vec![self.keys.writer.to_string()])
    }

    fn hold(&self, ctx: &Ctx<'_>) -> Result<Held<ReadHold>, AcquireError> {
        Held::fresh(ctx, &self.keys.readers, |readers, token| ReadHold {
            readers: Arc::clone(readers),
            token: Arc::clone(token),
            channel: release_channel(readers),
        })
    }

    fn call(&self, held: &Held<ReadHold>, ttl_ms: u64) -> Call {
        let mut cmd = eval(&RW_READ, &self.keys.all());
        cmd.push(&*held.token).push(ttl_ms);
        Call::Script(cmd)
    }

    fn reads(&self) {}

    fn read((): (), reply: Value) -> Read<()> {
        vote(reply, "read acquire")
    }
}

/// The write hold of one resource, woken by a writer's release or the last reader's. While
/// readers refuse it, this writer waits on those masters under its waiter id and keeps new
/// readers out; it leaves when the call ends, however it ends.
#[derive(Debug)]
pub(crate) struct Writing {
    resource: String,
    keys: Keys,
    /// The writer's waiter id, one for every round of its acquire.
    waiter: String,
    /// How long a writer refused because of readers waits on that master: as long as it asked to
    /// hold the lock, long enough to span the pauses between its rounds, and no longer than a
    /// crashed writer's key would block anyone.
    wait_ms: u64,
    /// In a negative control that removed [`Mechanism::FencedWriteReaders`] only: the key the
    /// fenced write looks for readers in instead of theirs, which no reader ever joins.
    unchecked_readers: Option<String>,
}

impl Writing {
    /// The write hold of `resource`, waiting `wait_ms` where readers refuse it.
    pub(crate) fn new(ctx: &Ctx<'_>, resource: String, wait_ms: u64) -> Self {
        let keys = Keys::new(ctx, &resource);
        let unchecked_readers = ctx
            .config
            .removed
            .has(Mechanism::FencedWriteReaders)
            .then(|| format!("{}:unchecked", keys.readers));
        Self {
            keys,
            resource,
            waiter: ctx.entropy.id(),
            wait_ms,
            unchecked_readers,
        }
    }
}

impl Kind for Writing {
    type Hold = WriteHold;
    type Note = ();
    type Reads = ();

    fn resource(&self) -> &str {
        &self.resource
    }

    /// Queued for the writer key, as a plain waiter is (its release hands the key to the first
    /// queued process), and woken by the last reader's release too.
    fn wait(&self) -> Wait {
        Wait::ReleasedOrExpired {
            key: Arc::clone(&self.keys.writer),
            also: vec![self.keys.readers.to_string()],
        }
    }

    fn hold(&self, ctx: &Ctx<'_>) -> Result<Held<WriteHold>, AcquireError> {
        Held::fresh(ctx, &self.keys.writer, |key, token| {
            WriteHold(PlainLock::sharing(key, token))
        })
    }

    fn call(&self, held: &Held<WriteHold>, ttl_ms: u64) -> Call {
        let mut cmd = eval(&RW_WRITE, &self.keys.all());
        cmd.push(&*held.token)
            .push(ttl_ms)
            .push(&self.waiter)
            .push(self.wait_ms);
        Call::Script(cmd)
    }

    fn reads(&self) {}

    fn read((): (), reply: Value) -> Read<()> {
        vote(reply, "write acquire")
    }

    fn departure(&self) -> Option<Departure> {
        let mut call = eval(&RW_LEAVE, &[&self.keys.waiting]);
        call.push(&self.waiter).push(release_channel(&self.keys.writer));
        Some(Departure {
            call,
            who: format!("waiting writer {}", self.waiter),
            lapses: "it lapses with its TTL",
        })
    }
}

/// The fenced write: the write rule and the fencing counter in one script per master.
impl Fenceable for Writing {
    fn fenced_call(&self, held: &Held<WriteHold>, ttl_ms: u64, f: FencingArgs<'_>) -> ScriptCall {
        let [writer, readers, waiting] = self.keys.all();
        let readers = self.unchecked_readers.as_deref().unwrap_or(readers);
        let mut call = eval(&RW_WRITE_FENCED, &[writer, readers, waiting, f.counter, f.epoch]);
        call.push(&*held.token)
            .push(ttl_ms)
            .push(&self.waiter)
            .push(self.wait_ms)
            .push(f.floor)
            .push(f.run_id);
        call
    }

    fn fenced_reply(&self, code: i64) -> Option<AcquireReply> {
        fenced_write_reply(code)
    }
}

/// The read hold as a request's kind.
#[derive(Debug)]
struct ReadChoice;

impl Choose for ReadChoice {
    fn name(&self) -> &'static str {
        "read"
    }

    fn fencing_refused(&self) -> String {
        "a fenced read hold (readers do not write to the resource, so a fencing token has nothing to guard; fence the writers with write().fenced())".to_owned()
    }

    fn acquire<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Guard, AcquireError>> {
        request.one(self, |ctx, resource| Ok(Reading::new(ctx, resource)))
    }
}

/// The write hold as a request's kind, fenced or not.
#[derive(Debug)]
struct WriteChoice;

impl Choose for WriteChoice {
    fn name(&self) -> &'static str {
        "write"
    }

    fn label(&self, _: &Target, fenced: bool) -> &'static str {
        if fenced {
            "fenced_write"
        } else {
            "write"
        }
    }

    fn acquire<'a>(&'a self, mut request: Request<'a>) -> BoxFuture<'a, Result<Guard, AcquireError>> {
        Box::pin(async move {
            let resource = request.fenceable_resource(self)?;
            let writing = Writing::new(&request.ctx(), resource, ttl_millis(request.ttl));
            if request.fenced {
                request.acquire(Fenced(writing)).await
            } else {
                request.acquire(writing).await
            }
        })
    }
}

impl Lock<'_> {
    /// Asks for a read hold of a read-write lock: shared with other readers, refused while a
    /// writer holds the lock or waits for it. Not reentrant, and never upgraded to a write (see
    /// the [`kinds`](crate::kinds) notes). A read is also refused while a plain or fenced lock on
    /// the same resource holds (the writer's key is the plain lock's), but a plain lock does not
    /// wait for readers: exclude readers with [`Lock::write`].
    pub fn read(self) -> Self {
        self.choose(ReadChoice)
    }
    /// Asks for the write hold of a read-write lock: exclusive of readers and other writers. While
    /// readers hold it, the writer waits on the masters that refused it, and new readers are kept
    /// out until it has written or given up. With [`Lock::fenced`], the writer also gets a fencing
    /// token. The write hold's key is the plain lock's key on `resource`, so it also excludes a
    /// plain or fenced lock on it, and RedLock clients of other libraries.
    pub fn write(self) -> Self {
        self.choose(WriteChoice)
    }
}
