//! One Redis master: its connection, its per-node timeout, and the classification of its errors.
//!
//! Each master gets exactly one multiplexed, reconnecting connection (a redis-rs
//! `ConnectionManager`), shared by every task in the process: a command costs no connection setup
//! and no lock on the connection. Every command is bounded by the per-node timeout, so a master that
//! is paused, blackholed or refusing connections costs at most that long and never holds up the
//! requests sent to the other masters, which run concurrently. A refused connection fails at once
//! and is retried on the next command; it never blocks on a multi-second reconnect loop. Each
//! connection queues up to [`PIPELINE_BUFFER`] requests before a sender has to wait for room:
//! redis-rs's default of 50 made hundreds of concurrent tasks park on the queue and wake again.
//!
//! A plain lock's release and extend go out as `EVALSHA` once this connection has run them as
//! `EVAL` (see `lua.rs`): a master restart always drops the connection and starts a new epoch here,
//! so a script is sent by SHA1 only to a server process known to have it cached, and a `NOSCRIPT`
//! reply falls back to `EVAL` at once. Other scripts (lock kinds, fencing) still carry their source.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ErrorKind, RedisError, ServerErrorKind, Value};

use crate::error::{redact_url, BuildError, NodeErrorKind};
use crate::lua::{ScriptCall, SCRIPTS};

/// Compare-and-delete, publishing the release on the resource's channel.
pub(crate) const RELEASE_SCRIPT: &str = include_str!("scripts/release.lua");
/// Compare-and-PEXPIRE.
pub(crate) const EXTEND_SCRIPT: &str = include_str!("scripts/extend.lua");

/// Requests a master's shared connection queues before senders wait for room (redis-rs: 50).
const PIPELINE_BUFFER: usize = 1024;

/// What a compare-and-act script found on one master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// Our token was there, and the script acted on it.
    Ours,
    /// The key was absent.
    Absent,
    /// Another token holds the key.
    Other,
}

impl Found {
    fn from_reply(reply: i64) -> Result<Self, NodeErrorKind> {
        match reply {
            1 => Ok(Found::Ours),
            0 => Ok(Found::Absent),
            -1 => Ok(Found::Other),
            other => Err(NodeErrorKind::Protocol(format!(
                "script returned {other}, expected 1, 0 or -1"
            ))),
        }
    }

    /// As a vote outcome: only `Ours` is a yes.
    pub(crate) fn into_result(self) -> Result<(), NodeErrorKind> {
        match self {
            Found::Ours => Ok(()),
            Found::Absent => Err(NodeErrorKind::Absent),
            Found::Other => Err(NodeErrorKind::Held),
        }
    }
}

/// A connection to one master.
#[derive(Clone)]
pub(crate) struct Node {
    index: usize,
    addr: String,
    client: Client,
    conn: ConnectionManager,
    timeout: Duration,
    /// How many commands failed on a lost or refused connection. A restart of the master always
    /// drops the connection, and the connection manager only reconnects after a command failed on
    /// it, so an unchanged count since a check of the master's `run_id` means no reply since came
    /// from a restarted master.
    disconnects: Arc<AtomicU64>,
    /// Per script of `lua.rs`, one more than the disconnect count under which an `EVAL` of it last
    /// succeeded on the shared connection (0: never): the script is cached on the current
    /// connection's server while this equals `disconnects + 1`.
    cached: Arc<[AtomicU64; SCRIPTS]>,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never derive Debug here: the client holds the password.
        f.debug_struct("Node")
            .field("index", &self.index)
            .field("addr", &self.addr)
            .finish()
    }
}

impl Node {
    /// Parses `url` and prepares a lazy connection; nothing is sent yet.
    #[allow(dead_code)]
    pub(crate) fn new(
        index: usize,
        url: &str,
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Self, BuildError> {
        Self::with_roots(index, url, timeout, connect_timeout, None)
    }

    /// As [`Node::new`], trusting `roots` (PEM) for a `rediss://` URL instead of the system store.
    pub(crate) fn with_roots(
        index: usize,
        url: &str,
        timeout: Duration,
        connect_timeout: Duration,
        roots: Option<&[u8]>,
    ) -> Result<Self, BuildError> {
        let invalid = |reason: String| BuildError::InvalidUrl {
            url: redact_url(url),
            reason,
        };
        if let Some(reason) = what_is_wrong_with(url) {
            return Err(invalid(reason));
        }
        let client = crate::tls::open_client(url, roots)
            .map_err(|e| invalid(e.map_or_else(|reason| reason, |e| describe(&e))))?;
        let addr = client.get_connection_info().addr().to_string();
        if client
            .get_connection_info()
            .redis_settings()
            .protocol()
            .supports_resp3()
        {
            // Over RESP3 the connection manager also reconnects on a server push, with no failed
            // command for `bounded` to count, and the restart guard would trust the new connection.
            return Err(invalid(
                "RESP3 is not supported for lock masters; remove the protocol=resp3 parameter".into(),
            ));
        }
        // No response timeout inside redis-rs: `bounded` already puts the node timeout on every
        // command, and a second timer per command would only cost.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None)
            .set_number_of_retries(0)
            .set_pipeline_buffer_size(PIPELINE_BUFFER);
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| invalid(describe(&e)))?;
        Ok(Self {
            index,
            addr,
            client,
            conn,
            timeout,
            disconnects: Arc::new(AtomicU64::new(0)),
            cached: Arc::new(std::array::from_fn(|_| AtomicU64::new(0))),
        })
    }

    /// How many times the shared connection has been lost so far.
    pub(crate) fn disconnects(&self) -> u64 {
        self.disconnects.load(Ordering::SeqCst)
    }

    /// The master's position in the configured list.
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// `host:port`, without credentials.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// The redis-rs client, for connections other than the shared one (pub/sub, renewals).
    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Runs one request with the per-node timeout and classifies its failure.
    ///
    /// Not an `async fn`: one would keep `request` in its state next to the timeout that owns it,
    /// doubling the size of every per-master future a fan-out allocates (the connection manager's
    /// own request future is over a kilobyte). The timeout starts when this is called, and needs a
    /// Tokio runtime then: build the future where it is polled.
    fn bounded<T, F>(
        &self,
        timeout: Duration,
        request: F,
    ) -> impl Future<Output = Result<T, NodeErrorKind>> + use<'_, T, F>
    where
        F: Future<Output = Result<T, RedisError>>,
    {
        tokio::time::timeout(timeout, request).map(move |outcome| match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => {
                let kind = classify(&err);
                if matches!(kind, NodeErrorKind::Connection(_)) || err.is_unrecoverable_error() {
                    // The connection manager reconnects after this (a lost connection, a reply it
                    // could not parse, a failed handshake): no reply from the new connection is
                    // trusted before the master's identity is checked again.
                    self.disconnects.fetch_add(1, Ordering::SeqCst);
                }
                Err(kind)
            }
            Err(_) => Err(NodeErrorKind::Timeout),
        })
    }

    /// Sends an already built command and returns the raw reply.
    pub(crate) fn query<'a>(
        &'a self,
        cmd: &'a redis::Cmd,
    ) -> impl Future<Output = Result<Value, NodeErrorKind>> + use<'a> {
        let mut conn = self.conn.clone();
        self.bounded(self.timeout, async move {
            conn.send_packed_command(cmd).await?.extract_error()
        })
    }

    /// `SET key token NX PX ttl`, pre-built once per round: `Ok` when we got the key.
    pub(crate) fn set_nx<'a>(
        &'a self,
        cmd: &'a redis::Cmd,
    ) -> impl Future<Output = Result<(), NodeErrorKind>> + use<'a> {
        self.query(cmd).map(|reply| match reply? {
            Value::Okay => Ok(()),
            Value::SimpleString(s) if s == "OK" => Ok(()),
            Value::Nil => Err(NodeErrorKind::Held),
            other => Err(NodeErrorKind::Protocol(format!("SET NX answered {other:?}"))),
        })
    }

    /// Runs a compare-and-act script and reads its 1 / 0 / -1 answer.
    pub(crate) async fn script(&self, cmd: &redis::Cmd) -> Result<Found, NodeErrorKind> {
        found(self.query(cmd).await?)
    }

    /// Runs a compare-and-act script call: by SHA1 when this connection is known to have run the
    /// script, else (or on `NOSCRIPT`) with its source, which caches it for the next calls.
    pub(crate) async fn run_script(&self, call: &ScriptCall) -> Result<Found, NodeErrorKind> {
        let slot = self.cached.get(call.script().slot);
        let epoch = self.disconnects();
        if slot.is_some_and(|s| s.load(Ordering::Acquire) == epoch.wrapping_add(1)) {
            let mut conn = self.conn.clone();
            let cmd = call.by_sha();
            let reply = self
                .bounded(self.timeout, async move {
                    match conn.send_packed_command(cmd).await?.extract_error() {
                        // Nothing ran: the cache was flushed under us. Send the source instead.
                        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => Ok(None),
                        other => other.map(Some),
                    }
                })
                .await?;
            if let Some(reply) = reply {
                return found(reply);
            }
            if let Some(slot) = slot {
                slot.store(0, Ordering::Release);
            }
        }
        let epoch = self.disconnects();
        let reply = self.query(&call.with_source()).await?;
        // Only a success on the connection it was sent on, with no loss since, vouches for the cache.
        if let Some(slot) = slot {
            if self.disconnects() == epoch {
                slot.store(epoch.wrapping_add(1), Ordering::Release);
            }
        }
        found(reply)
    }

    /// Checks that the master answers, allowing `timeout` for a first connection.
    pub(crate) async fn ping(&self, timeout: Duration) -> Result<(), NodeErrorKind> {
        let mut conn = self.conn.clone();
        let cmd = redis::cmd("PING");
        self.bounded(timeout, async move {
            conn.send_packed_command(&cmd).await?.extract_error()
        })
        .await
        .map(drop)
    }
}

/// Reads a compare-and-act script's 1 / 0 / -1 answer.
fn found(reply: Value) -> Result<Found, NodeErrorKind> {
    match reply {
        Value::Int(reply) => Found::from_reply(reply),
        other => Err(NodeErrorKind::Protocol(format!("script answered {other:?}"))),
    }
}

/// The message of a redis-rs error, without anything that could carry credentials.
fn describe(err: &RedisError) -> String {
    // A server's error reads as the server sent it ("NOAUTH Authentication required."), not as
    // redis-rs formats it; only server errors have a code.
    let mut text = match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => err.to_string(),
    };
    if text.contains('@') {
        text = redact_url(&text);
    }
    text
}

/// Schemes redis-rs connects with: TCP, TLS, and a Unix socket.
const SCHEMES: [&str; 7] = [
    "redis",
    "rediss",
    "valkey",
    "valkeys",
    "unix",
    "redis+unix",
    "valkey+unix",
];

/// Why `url` cannot name a master, in words (redis-rs only says that it did not parse); `None`
/// when nothing is found wrong here, which leaves the rest to redis-rs.
fn what_is_wrong_with(url: &str) -> Option<String> {
    const HOW: &str = "not a URL; write it as redis://host:6379 (or rediss:// for TLS)";
    // `localhost:6379` parses, as a URL of scheme `localhost`.
    if !url.contains("://") {
        return Some(HOW.to_owned());
    }
    let parsed = match url::Url::parse(url) {
        Ok(parsed) => parsed,
        Err(url::ParseError::RelativeUrlWithoutBase) => return Some(HOW.to_owned()),
        Err(err) => return Some(err.to_string()),
    };
    if !SCHEMES.contains(&parsed.scheme()) {
        return Some(format!(
            "the scheme must be redis:// or rediss:// (or unix:// for a socket), not {}://",
            parsed.scheme()
        ));
    }
    if parsed.port() == Some(0) {
        return Some("port 0 is not a port a master can listen on".to_owned());
    }
    None
}

/// Sorts a redis-rs error into what it means for the lock.
pub(crate) fn classify(err: &RedisError) -> NodeErrorKind {
    let code = err.code().unwrap_or_default();
    if code == "WRONGTYPE" || err.to_string().contains("WRONGTYPE") {
        return NodeErrorKind::WrongType;
    }
    if err.kind() == ErrorKind::AuthenticationFailed || matches!(code, "NOAUTH" | "WRONGPASS" | "NOPERM") {
        return NodeErrorKind::Auth(describe(err));
    }
    if err.is_timeout() {
        return NodeErrorKind::Timeout;
    }
    if err.is_io_error() || err.is_connection_refusal() || err.is_connection_dropped() {
        return NodeErrorKind::Connection(describe(err));
    }
    match err.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => NodeErrorKind::Protocol(describe(err)),
        _ => NodeErrorKind::Server(describe(err)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fan-out allocates one of these futures per master per round and per release, so each
    /// must hold the connection manager's request future once: an `async fn` wrapper that keeps
    /// its argument next to the timeout owning it doubles the allocation and the copy.
    #[tokio::test]
    async fn per_master_futures_hold_the_request_once() {
        let node = Node::new(
            0,
            "redis://127.0.0.1:1",
            Duration::from_millis(50),
            Duration::from_millis(50),
        )
        .expect("valid url");
        let cmd = redis::cmd("PING");
        let mut conn = node.conn.clone();
        let request = std::mem::size_of_val(&conn.send_packed_command(&cmd));
        let call = crate::lua::RELEASE.call(1, 2, 2).arg("k").arg("t");
        let sizes = [
            ("query", std::mem::size_of_val(&node.query(&cmd))),
            ("set_nx", std::mem::size_of_val(&node.set_nx(&cmd))),
            ("run_script", std::mem::size_of_val(&node.run_script(&call))),
        ];
        for (name, size) in sizes {
            assert!(
                size < request * 3 / 2,
                "{name}: {size} bytes for a {request}-byte request future"
            );
        }
    }
}
