//! The masters as the mechanisms use them: each master behind the seam, with its position, its
//! per-node timeout, the scripts cached on its current connection, the native commands its server
//! offers, and its replies read into what they mean for a lock.
//!
//! The seam ([`crate::seam::Master`]) only sends and receives. What every mechanism then needs of a
//! reply is written once here, over any implementation: a server error becomes a classified
//! [`NodeErrorKind`], a `SET NX` a yes or a no, and a script call goes by SHA1 once the script is
//! known to be cached on the master's current connection (see `lua.rs`), falling back to its source
//! on `NOSCRIPT`. A plain lock's release and extend go as native commands (`DELIFEQ`,
//! `SET ... IFEQ`) to a master whose server was read to offer them on its current connection, and as
//! scripts everywhere else, so a mixed fleet works: each master gets what it supports. Every future here owns what it needs and borrows nothing, so the requests still
//! in flight when a round is decided can finish in a task.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use redis::{Cmd, ErrorKind, Pipeline, ServerErrorKind, Value};

use crate::base::error::{classify, NodeErrorKind, NodeFailure};
use crate::base::lua::{ScriptCall, SCRIPTS};
use crate::core::capabilities::Capabilities;
use crate::seam::{BatchRequest, Master, Request};

/// One master of a client.
pub(crate) struct Link {
    index: usize,
    master: Arc<dyn Master>,
    timeout: Duration,
    /// Per script of `lua.rs`, one more than the disconnect count under which an `EVAL` of it last
    /// succeeded on the shared connection (0: never): the script is cached on the current
    /// connection's server while this equals `disconnects + 1`.
    cached: Arc<[AtomicU64; SCRIPTS]>,
    /// The native commands of the server read on the connection of one disconnect count: that
    /// count plus one, shifted left by 8, with the capability bits below (0: not read yet).
    native: AtomicU64,
}

/// `DELIFEQ` in [`Link::native`]'s bits.
const DELIFEQ: u64 = 1;
/// `SET ... IFEQ` in [`Link::native`]'s bits.
const SET_IFEQ: u64 = 2;

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("index", &self.index)
            .field("addr", &self.addr())
            .finish()
    }
}

impl Link {
    /// Master `index` of the list, whose commands are bounded by `timeout`.
    pub(crate) fn new(index: usize, master: Arc<dyn Master>, timeout: Duration) -> Self {
        Self {
            index,
            master,
            timeout,
            cached: Arc::new(std::array::from_fn(|_| AtomicU64::new(0))),
            native: AtomicU64::new(0),
        }
    }

    /// Records what the server read on the connection of disconnect count `epoch` offers; it holds
    /// until that connection is lost (a restart may bring another server).
    pub(crate) fn note_capabilities(&self, capabilities: Capabilities, epoch: u64) {
        let bits =
            (u64::from(capabilities.delifeq) * DELIFEQ) | (u64::from(capabilities.set_ifeq) * SET_IFEQ);
        self.native
            .store((epoch.wrapping_add(1) << 8) | bits, Ordering::Release);
    }

    /// What the server on the current connection offers natively; nothing until it was read.
    pub(crate) fn capabilities(&self) -> Capabilities {
        let native = self.native.load(Ordering::Acquire);
        if native >> 8 != (self.disconnects().wrapping_add(1) & (u64::MAX >> 8)) {
            return Capabilities::default();
        }
        Capabilities {
            delifeq: native & DELIFEQ != 0,
            set_ifeq: native & SET_IFEQ != 0,
        }
    }

    /// The master's position in the configured list.
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// `host:port`, without credentials.
    pub(crate) fn addr(&self) -> &str {
        self.master.addr()
    }

    /// How many times the shared connection has been lost so far.
    pub(crate) fn disconnects(&self) -> u64 {
        self.master.disconnects()
    }

    /// The master behind the seam, for the mechanisms that use its other connections.
    pub(crate) fn master(&self) -> &Arc<dyn Master> {
        &self.master
    }

    /// Sends `cmd` within the per-node timeout; a server error comes back classified.
    pub(crate) fn query(&self, cmd: Arc<Cmd>) -> Query {
        self.query_within(cmd, self.timeout)
    }

    /// As [`Link::query`], within `timeout`.
    pub(crate) fn query_within(&self, cmd: Arc<Cmd>, timeout: Duration) -> Query {
        Query(self.master.send(cmd, timeout))
    }

    /// Runs a script call: by SHA1 when this connection is known to have run the script, else (or
    /// on `NOSCRIPT`) with its source, which caches it for the next calls.
    pub(crate) fn run_script(&self, call: &ScriptCall) -> ScriptRequest {
        let slot = call.script().slot();
        let epoch = self.disconnects();
        let cached = self
            .cached
            .get(slot)
            .is_some_and(|s| s.load(Ordering::Acquire) == epoch.wrapping_add(1));
        let state = if cached {
            State::BySha(self.master.send(Arc::clone(call.by_sha()), self.timeout))
        } else {
            State::WithSource {
                request: self.master.send(Arc::new(call.with_source()), self.timeout),
                epoch,
            }
        };
        ScriptRequest {
            master: Arc::clone(&self.master),
            cached: Arc::clone(&self.cached),
            call: call.clone(),
            timeout: self.timeout,
            state,
        }
    }

    /// Sends a compare-and-act call of a lock's kind: a script by SHA1 where it can, else the
    /// command as built.
    pub(crate) fn call(&self, call: &Call) -> CallRequest {
        match call {
            Call::Script(call) => CallRequest::Script(self.run_script(call)),
            Call::Command(cmd) => CallRequest::Query(self.query(Arc::clone(cmd))),
            Call::CompareDelete {
                key,
                token,
                announce,
                script,
                native,
            } => {
                // A release hands the key on, which only the script can: `DELIFEQ` serves the
                // cleanup of a failed attempt, which nobody waits for.
                if *announce || !self.capabilities().delifeq {
                    return CallRequest::Script(self.run_script(script));
                }
                // Built for the first master that takes it, and shared by the others.
                let pipe = native.get_or_init(|| Arc::new(compare_delete(key, token)));
                let request = self.master.send_pipeline(Arc::clone(pipe), self.timeout);
                CallRequest::Native(self.native(key, Step::Delete(request)))
            }
            Call::CompareExtend { key, script, .. } => match call.native_extend() {
                Some(cmd) if self.capabilities().set_ifeq => {
                    let request = self.master.send(Arc::new(cmd), self.timeout);
                    CallRequest::Native(self.native(key, Step::Extend(request)))
                }
                _ => CallRequest::Script(self.run_script(script)),
            },
        }
    }

    fn native(&self, key: &Arc<str>, step: Step) -> NativeRequest {
        NativeRequest {
            master: Arc::clone(&self.master),
            key: Arc::clone(key),
            timeout: self.timeout,
            step,
        }
    }

    /// Checks that the master answers, allowing `timeout` (a first connection may take longer than
    /// a command).
    pub(crate) async fn ping(&self, timeout: Duration) -> Result<(), NodeErrorKind> {
        self.query_within(Arc::new(redis::cmd("PING")), timeout)
            .await
            .map(drop)
    }
}

/// `DELIFEQ key token`: a plain lock's native compare-and-delete, sized before it is written. It
/// serves the cleanup of a failed attempt; a release, which hands the key on to a waiter, is the
/// script.
pub(crate) fn compare_delete(key: &str, token: &str) -> Pipeline {
    let mut pipe = Pipeline::with_capacity(1);
    let mut delete = Cmd::with_capacity(3, 16 + key.len() + token.len());
    delete.arg("DELIFEQ").arg(key).arg(token);
    pipe.add_command(delete);
    pipe
}

/// `SET key token IFEQ token PX ttl`: a plain lock's native compare-and-extend.
pub(crate) fn compare_extend(key: &str, token: &str, ttl_ms: u64) -> Cmd {
    let mut cmd = Cmd::with_capacity(7, 40 + key.len() + 2 * token.len());
    cmd.arg("SET")
        .arg(key)
        .arg(token)
        .arg("IFEQ")
        .arg(token)
        .arg("PX")
        .arg(ttl_ms);
    cmd
}

/// A reply with server errors classified, as every mechanism reads it.
fn extract(reply: Result<Value, NodeErrorKind>) -> Result<Value, NodeErrorKind> {
    reply?.extract_error().map_err(|err| classify(&err))
}

/// A command in flight: the master's reply, a server error classified.
pub(crate) struct Query(Request);

impl Future for Query {
    type Output = Result<Value, NodeErrorKind>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx).map(extract)
    }
}

enum State {
    /// `EVALSHA` sent.
    BySha(Request),
    /// `EVAL` sent, when the disconnect count was `epoch`.
    WithSource {
        request: Request,
        epoch: u64,
    },
    Done,
}

/// A script call in flight: `EVALSHA` first where the script is cached, `EVAL` otherwise or when the
/// master answers `NOSCRIPT` (nothing ran then).
pub(crate) struct ScriptRequest {
    master: Arc<dyn Master>,
    cached: Arc<[AtomicU64; SCRIPTS]>,
    call: ScriptCall,
    timeout: Duration,
    state: State,
}

impl ScriptRequest {
    fn slot(&self) -> Option<&AtomicU64> {
        self.cached.get(self.call.script().slot())
    }
}

impl Future for ScriptRequest {
    type Output = Result<Value, NodeErrorKind>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        loop {
            match &mut this.state {
                State::BySha(request) => {
                    let reply = match request.as_mut().poll(cx) {
                        Poll::Ready(reply) => reply,
                        Poll::Pending => return Poll::Pending,
                    };
                    match reply.map(Value::extract_error) {
                        Ok(Err(err)) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                            // Nothing ran: the cache was flushed under us. Send the source instead.
                            if let Some(slot) = this.slot() {
                                slot.store(0, Ordering::Release);
                            }
                            let epoch = this.master.disconnects();
                            let request = this.master.send(Arc::new(this.call.with_source()), this.timeout);
                            this.state = State::WithSource { request, epoch };
                        }
                        Ok(Err(err)) => {
                            this.state = State::Done;
                            return Poll::Ready(Err(classify(&err)));
                        }
                        Ok(Ok(value)) => {
                            this.state = State::Done;
                            return Poll::Ready(Ok(value));
                        }
                        Err(kind) => {
                            this.state = State::Done;
                            return Poll::Ready(Err(kind));
                        }
                    }
                }
                State::WithSource { request, epoch } => {
                    let epoch = *epoch;
                    let reply = match request.as_mut().poll(cx) {
                        Poll::Ready(reply) => extract(reply),
                        Poll::Pending => return Poll::Pending,
                    };
                    this.state = State::Done;
                    // Only a success on the connection it was sent on, with no loss since, vouches
                    // for the cache.
                    if reply.is_ok() && this.master.disconnects() == epoch {
                        if let Some(slot) = this.slot() {
                            slot.store(epoch.wrapping_add(1), Ordering::Release);
                        }
                    }
                    return Poll::Ready(reply);
                }
                State::Done => {
                    return Poll::Ready(Err(NodeErrorKind::Protocol(
                        "a script request was polled after it completed".into(),
                    )))
                }
            }
        }
    }
}

/// What a lock kind sends to extend or release its lock on a master.
///
/// Every call answers as the compare-and-act scripts do: `1` when the lock was ours and the call
/// acted on it, `0` when the key was absent, `-1` when another token holds it.
#[derive(Debug, Clone)]
pub(crate) enum Call {
    /// A script of the kind's, by SHA1 where the connection has it cached.
    Script(ScriptCall),
    /// One command, built once for every master of a round (the plain lock's `SET NX`).
    Command(Arc<Cmd>),
    /// A plain lock's compare-and-delete: a release is `script`, which hands the key on; a failed
    /// attempt's cleanup is `DELIFEQ` where the master has it.
    CompareDelete {
        /// The lock's key.
        key: Arc<str>,
        /// Our token.
        token: Arc<str>,
        /// Whether this is a release, which hands the key on to the next waiter (only the script
        /// can: `DELIFEQ` cannot look at the queue), or a failed attempt's cleanup, which does
        /// not and goes natively where the master can.
        announce: bool,
        /// The same release as a script.
        script: ScriptCall,
        /// The native release, built once for every master of one release that has `DELIFEQ`
        /// (empty until the first of them takes it).
        native: OnceLock<Arc<Pipeline>>,
    },
    /// A plain lock's compare-and-extend: `SET key token IFEQ token PX ttl` where the master has
    /// it, else `script`.
    CompareExtend {
        /// The lock's key.
        key: Arc<str>,
        /// Our token.
        token: Arc<str>,
        /// The new TTL in milliseconds.
        ttl_ms: u64,
        /// The same extend as a script.
        script: ScriptCall,
    },
}

impl Call {
    /// A plain lock's compare-and-extend in its native form, `SET key token IFEQ token PX ttl`,
    /// for the masters that have it; `None` for every other call.
    pub(crate) fn native_extend(&self) -> Option<Cmd> {
        match self {
            Call::CompareExtend {
                key, token, ttl_ms, ..
            } => Some(compare_extend(key, token, *ttl_ms)),
            _ => None,
        }
    }
}

/// A [`Call`] in flight.
pub(crate) enum CallRequest {
    /// A script call.
    Script(ScriptRequest),
    /// A command.
    Query(Query),
    /// A native compare-and-act.
    Native(NativeRequest),
}

impl Future for CallRequest {
    type Output = Result<Value, NodeErrorKind>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.get_mut() {
            CallRequest::Script(request) => Pin::new(request).poll(cx),
            CallRequest::Query(request) => Pin::new(request).poll(cx),
            CallRequest::Native(request) => Pin::new(request).poll(cx),
        }
    }
}

/// Where a native compare-and-act stands.
enum Step {
    /// `DELIFEQ` and `PUBLISH` sent.
    Delete(BatchRequest),
    /// `SET ... IFEQ` sent.
    Extend(Request),
    /// The native command did not act: `EXISTS` tells an absent key from another holder's.
    Which(Request),
    Done,
}

/// A native compare-and-act in flight, answering as the scripts do (`1`, `0` or `-1`).
///
/// A native command only says whether it acted. When it did not, the same connection is asked
/// whether the key exists, to tell an expired (or released) lock from one another holder took:
/// a holder that took the key in between is reported as holding it, which it then does.
pub(crate) struct NativeRequest {
    master: Arc<dyn Master>,
    key: Arc<str>,
    timeout: Duration,
    step: Step,
}

impl Future for NativeRequest {
    type Output = Result<Value, NodeErrorKind>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        loop {
            let acted = match &mut this.step {
                Step::Delete(request) => match request.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(kind)) => Err(kind),
                    Poll::Ready(Ok(replies)) => match replies.into_iter().next() {
                        Some(reply) => extract(Ok(reply)).and_then(|reply| match reply {
                            Value::Int(1) => Ok(true),
                            Value::Int(0) => Ok(false),
                            other => Err(NodeErrorKind::Protocol(
                                format!("DELIFEQ answered {other:?}").into(),
                            )),
                        }),
                        None => Err(NodeErrorKind::Protocol("no reply to DELIFEQ".into())),
                    },
                },
                Step::Extend(request) => match request.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(reply) => extract(reply).and_then(|reply| match reply {
                        Value::Okay => Ok(true),
                        Value::SimpleString(s) if s == "OK" => Ok(true),
                        Value::Nil => Ok(false),
                        other => Err(NodeErrorKind::Protocol(
                            format!("SET IFEQ answered {other:?}").into(),
                        )),
                    }),
                },
                Step::Which(request) => {
                    let reply = match request.as_mut().poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(reply) => extract(reply),
                    };
                    this.step = Step::Done;
                    return Poll::Ready(reply.and_then(|reply| match reply {
                        Value::Int(0) => Ok(Value::Int(0)),
                        Value::Int(1) => Ok(Value::Int(-1)),
                        other => Err(NodeErrorKind::Protocol(
                            format!("EXISTS answered {other:?}").into(),
                        )),
                    }));
                }
                Step::Done => {
                    return Poll::Ready(Err(NodeErrorKind::Protocol(
                        "a native request was polled after it completed".into(),
                    )))
                }
            };
            match acted {
                Ok(true) => {
                    this.step = Step::Done;
                    return Poll::Ready(Ok(Value::Int(1)));
                }
                Ok(false) => {
                    let mut exists = redis::cmd("EXISTS");
                    exists.arg(&*this.key);
                    this.step = Step::Which(this.master.send(Arc::new(exists), this.timeout));
                }
                Err(kind) => {
                    this.step = Step::Done;
                    return Poll::Ready(Err(kind));
                }
            }
        }
    }
}

/// The masters of one client, in configured order.
#[derive(Debug)]
pub(crate) struct Masters {
    links: Vec<Link>,
}

impl Masters {
    /// The masters, in configured order (each link's index is its position).
    pub(crate) fn new(links: Vec<Link>) -> Self {
        Self { links }
    }

    /// How many masters there are.
    pub(crate) fn len(&self) -> usize {
        self.links.len()
    }

    /// Every master, in configured order.
    pub(crate) fn iter(&self) -> std::slice::Iter<'_, Link> {
        self.links.iter()
    }

    /// Master `index`, if there is one.
    pub(crate) fn get(&self, index: usize) -> Option<&Link> {
        self.links.get(index)
    }

    /// The address of master `index`, or `?`.
    pub(crate) fn addr(&self, index: usize) -> &str {
        self.links.get(index).map(Link::addr).unwrap_or("?")
    }

    /// Master `index`'s failure, as errors report it.
    pub(crate) fn failure(&self, index: usize, kind: NodeErrorKind) -> NodeFailure {
        crate::base::metrics::node_error(self.addr(index), &kind);
        NodeFailure {
            node: index,
            addr: self.addr(index).to_owned(),
            kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cleanup as it was written before it was sized up front.
    fn unsized_cleanup(key: &str, token: &str) -> Pipeline {
        let mut pipe = redis::pipe();
        pipe.cmd("DELIFEQ").arg(key).arg(token);
        pipe
    }

    #[test]
    fn the_native_cleanup_is_the_same_on_the_wire_however_it_is_built() {
        for key in ["", "k", "orders:42", "a key with spaces", "clé-ü"] {
            let token = "0123456789abcdef0123456789abcdef";
            assert_eq!(
                compare_delete(key, token).get_packed_pipeline(),
                unsized_cleanup(key, token).get_packed_pipeline(),
                "{key:?}"
            );
        }
        // It can fail: another token is another cleanup.
        assert_ne!(
            compare_delete("k", "t1").get_packed_pipeline(),
            unsized_cleanup("k", "t2").get_packed_pipeline()
        );
    }
}
