//! The production master: a redis-rs connection to one Redis (or Valkey) server, behind the seam.
//!
//! Each master gets exactly one multiplexed, reconnecting connection (a redis-rs
//! `ConnectionManager`), shared by every task in the process: a command costs no connection setup
//! and no lock on the connection. Every command is bounded by the timeout it is sent with, so a
//! master that is paused, blackholed or refusing connections costs at most that long and never holds
//! up the requests sent to the other masters, which run concurrently. A refused connection fails at
//! once and is retried on the next command; it never blocks on a multi-second reconnect loop. Each
//! connection queues up to [`PIPELINE_BUFFER`] requests before a sender has to wait for room:
//! redis-rs's default of 50 made hundreds of concurrent tasks park on the queue and wake again.
//!
//! The watchdog's batches travel on a second connection, opened on first use and closed on request
//! (after a large batch), and waits open pub/sub connections of their own.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, Cmd, Pipeline, RedisError};

use crate::base::error::{classify, describe, redact_url, BuildError, NodeErrorKind};
use crate::seam::{
    BatchRequest, Control, Master, Message, Request, Subscriber, SubscriberControl, Subscribing,
};

/// Requests a master's shared connection queues before senders wait for room (redis-rs: 50).
const PIPELINE_BUFFER: usize = 1024;

/// A connection to one master over redis-rs.
pub(crate) struct Node {
    addr: String,
    client: Client,
    conn: ConnectionManager,
    connect_timeout: Duration,
    /// How many commands failed on a lost or refused connection. A restart of the master always
    /// drops the connection, and the connection manager only reconnects after a command failed on
    /// it, so an unchanged count since a check of the master's `run_id` means no reply since came
    /// from a restarted master.
    disconnects: Arc<AtomicU64>,
    /// The batch connection, opened on first use.
    batches: Mutex<Option<ConnectionManager>>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never derive Debug here: the client holds the password.
        f.debug_struct("Node").field("addr", &self.addr).finish()
    }
}

impl Node {
    /// Parses `url` and prepares a lazy connection, trusting `roots` (PEM) for a `rediss://` URL
    /// instead of the system store, and presenting `identity` when given; nothing is sent yet.
    pub(crate) fn open(
        url: &str,
        connect_timeout: Duration,
        roots: Option<&[u8]>,
        identity: Option<&crate::seam::tls::ClientIdentity>,
    ) -> Result<Self, BuildError> {
        let invalid = |reason: String| BuildError::InvalidUrl {
            url: redact_url(url),
            reason,
        };
        if let Some(reason) = what_is_wrong_with(url) {
            return Err(invalid(reason));
        }
        let client = crate::seam::tls::open_client(url, roots, identity)
            .map_err(|e| invalid(e.map_or_else(|reason| reason, |e| describe(&e))))?;
        let addr = client.get_connection_info().addr().to_string();
        if client
            .get_connection_info()
            .redis_settings()
            .protocol()
            .supports_resp3()
        {
            // Over RESP3 the connection manager also reconnects on a server push, with no failed
            // command to count, and the restart guard would trust the new connection.
            return Err(invalid(
                "RESP3 is not supported for lock masters; remove the protocol=resp3 parameter".into(),
            ));
        }
        // No response timeout inside redis-rs: every request carries its own, and a second timer
        // per command would only cost.
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None)
            .set_number_of_retries(0)
            .set_pipeline_buffer_size(PIPELINE_BUFFER);
        let conn = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| invalid(describe(&e)))?;
        Ok(Self {
            addr,
            client,
            conn,
            connect_timeout,
            disconnects: Arc::new(AtomicU64::new(0)),
            batches: Mutex::new(None),
        })
    }

    /// The batch connection, opened lazily on first use.
    fn batch_connection(&self) -> Result<ConnectionManager, NodeErrorKind> {
        let mut slot = self.batches.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(conn) = slot.as_ref() {
            return Ok(conn.clone());
        }
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.connect_timeout))
            .set_number_of_retries(0);
        let conn =
            ConnectionManager::new_lazy_with_config(self.client.clone(), config).map_err(|e| classify(&e))?;
        *slot = Some(conn.clone());
        Ok(conn)
    }
}

impl Node {
    /// One command on the shared connection, bounded by `timeout`: what [`Master::send`] boxes.
    ///
    /// The timeout is built inside, next to the request it owns, so the request's future (the
    /// connection manager's is over a kilobyte) is held once, not copied into a wrapper beside it.
    fn request(
        &self,
        cmd: Arc<Cmd>,
        timeout: Duration,
    ) -> impl std::future::Future<Output = crate::seam::Reply> + Send + 'static {
        let mut conn = self.conn.clone();
        let disconnects = Arc::clone(&self.disconnects);
        async move {
            match tokio::time::timeout(timeout, conn.send_packed_command(&cmd)).await {
                Ok(Ok(value)) => Ok(value),
                Ok(Err(err)) => Err(failed(&disconnects, &err)),
                Err(_) => Err(NodeErrorKind::Timeout),
            }
        }
    }
}

/// A failure on the shared connection, counted when the connection manager will reconnect after it
/// (a lost connection, a reply it could not parse, a failed handshake): no reply from the new
/// connection is trusted before the master's identity is checked again.
fn failed(disconnects: &AtomicU64, err: &RedisError) -> NodeErrorKind {
    let kind = classify(err);
    if matches!(kind, NodeErrorKind::Connection(_)) || err.is_unrecoverable_error() {
        disconnects.fetch_add(1, Ordering::SeqCst);
    }
    kind
}

impl Master for Node {
    fn addr(&self) -> &str {
        &self.addr
    }

    fn send(&self, cmd: Arc<Cmd>, timeout: Duration) -> Request {
        Box::pin(self.request(cmd, timeout))
    }

    fn send_pipeline(&self, pipeline: Arc<Pipeline>, timeout: Duration) -> BatchRequest {
        let mut conn = self.conn.clone();
        let disconnects = Arc::clone(&self.disconnects);
        Box::pin(async move {
            let count = pipeline.len();
            match tokio::time::timeout(timeout, conn.send_packed_commands(&pipeline, 0, count)).await {
                Ok(Ok(values)) => Ok(values),
                Ok(Err(err)) => Err(failed(&disconnects, &err)),
                Err(_) => Err(NodeErrorKind::Timeout),
            }
        })
    }

    fn send_batch(&self, batch: Arc<Pipeline>, skip: usize, count: usize, timeout: Duration) -> BatchRequest {
        let conn = self.batch_connection();
        Box::pin(async move {
            let mut conn = conn?;
            match tokio::time::timeout(timeout, conn.send_packed_commands(&batch, skip, count)).await {
                Ok(Ok(values)) => Ok(values),
                Ok(Err(err)) => Err(classify(&err)),
                Err(_) => Err(NodeErrorKind::Timeout),
            }
        })
    }

    fn close_batch_connection(&self) {
        *self.batches.lock().unwrap_or_else(PoisonError::into_inner) = None;
    }

    fn subscriber(&self, timeout: Duration) -> Subscribing {
        let client = self.client.clone();
        Box::pin(async move {
            let pubsub = match tokio::time::timeout(timeout, client.get_async_pubsub()).await {
                Ok(opened) => opened.map_err(|e| classify(&e))?,
                Err(_) => return Err(NodeErrorKind::Timeout),
            };
            let (sink, stream) = pubsub.split();
            let messages = stream.map(|msg| Message {
                channel: msg.get_channel_name().to_owned(),
                payload: msg.get_payload::<String>().unwrap_or_default(),
            });
            Ok(Subscriber {
                control: Box::new(Sink(sink)),
                messages: Box::pin(messages),
            })
        })
    }

    fn disconnects(&self) -> u64 {
        self.disconnects.load(Ordering::SeqCst)
    }
}

/// The sending half of a redis-rs pub/sub connection.
struct Sink(redis::aio::PubSubSink);

impl SubscriberControl for Sink {
    fn subscribe(&self, channel: &str) -> Control {
        let (mut sink, channel) = (self.0.clone(), channel.to_owned());
        Box::pin(async move { sink.subscribe(channel).await.map_err(|e| classify(&e)) })
    }

    fn unsubscribe(&self, channel: &str) -> Control {
        let (mut sink, channel) = (self.0.clone(), channel.to_owned());
        Box::pin(async move { sink.unsubscribe(channel).await.map_err(|e| classify(&e)) })
    }
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
    // redis-rs reads the path as a signed database number: `/-1` would only fail at the first
    // connection, as `SELECT -1`.
    let db = parsed.path().trim_matches('/');
    if !parsed.scheme().ends_with("unix") && !db.is_empty() && db.parse::<u32>().is_err() {
        return Some(format!(
            "the path must be a database number (0, 1, ...) or nothing, not /{db}"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fan-out allocates one of these requests per master per round and per release, so each
    /// must hold the connection manager's request future once: a wrapper that keeps it next to
    /// the timeout owning it doubles the allocation and the copy. What the fan-out itself keeps
    /// per master is a pointer to it.
    #[tokio::test]
    async fn per_master_requests_hold_the_request_once() {
        let node =
            Node::open("redis://127.0.0.1:1", Duration::from_millis(50), None, None).expect("valid url");
        let cmd = Arc::new(redis::cmd("PING"));
        let mut conn = node.conn.clone();
        let request = std::mem::size_of_val(&conn.send_packed_command(&cmd));
        let ours = std::mem::size_of_val(&node.request(Arc::clone(&cmd), Duration::from_millis(50)));
        assert!(
            ours < request * 3 / 2,
            "{ours} bytes for a {request}-byte request future"
        );
        let link = crate::seam::link::Link::new(0, Arc::new(node), Duration::from_millis(50));
        let held = [("query", std::mem::size_of_val(&link.query(Arc::clone(&cmd))))];
        for (name, size) in held {
            assert!(
                size <= 2 * std::mem::size_of::<usize>(),
                "{name}: {size} bytes kept inline"
            );
        }
    }
}
