//! The seam at the masters: the one narrow interface through which the client talks to a master.
//!
//! Every mechanism above it (the round, release, the watchdog, waits, fencing, health checks) sends
//! a command and gets back the master's reply, or a classified failure within a timeout; the
//! watchdog also sends batches on a connection of their own, and waits subscribe to channels. That
//! is all a master has to do. redis-rs connections are the production implementation (`redis_rs.rs`);
//! a simulated master (an in-memory keyspace behind a simulated network, on a simulated clock)
//! stands behind the same trait, so the whole client runs unchanged against it.
//!
//! Each request owns what it sends and is boxed once by the implementation, so a request can
//! outlive the round that sent it (the slower masters of a won round finish in a task) at the cost
//! of one allocation per master, as a fan-out of boxed requests always had.

pub(crate) mod clock;
pub(crate) mod link;
pub(crate) mod redis_rs;
pub(crate) mod tls;
pub(crate) mod token;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use redis::{Cmd, Pipeline, Value};

use crate::base::error::NodeErrorKind;

/// A master's reply as the server sent it (a server error is `Ok(Value::ServerError(..))`), or
/// why none came: [`NodeErrorKind::Timeout`], [`NodeErrorKind::Connection`],
/// [`NodeErrorKind::Auth`] or [`NodeErrorKind::Protocol`].
pub type Reply = Result<Value, NodeErrorKind>;

/// One request in flight to one master.
pub type Request = Pin<Box<dyn Future<Output = Reply> + Send + 'static>>;

/// A batch in flight to one master: the replies of the commands asked for, in order.
pub type BatchRequest = Pin<Box<dyn Future<Output = Result<Vec<Value>, NodeErrorKind>> + Send + 'static>>;

/// A pub/sub connection being opened.
pub type Subscribing = Pin<Box<dyn Future<Output = Result<Subscriber, NodeErrorKind>> + Send + 'static>>;

/// A `SUBSCRIBE` or `UNSUBSCRIBE` in flight.
pub type Control = Pin<Box<dyn Future<Output = Result<(), NodeErrorKind>> + Send + 'static>>;

/// One master, as the client needs it.
///
/// Implementations bound every request by the timeout given and classify every failure to get a
/// reply; they never panic on a bad reply. A restart of the master must drop the connection and
/// count in [`Master::disconnects`]: the client trusts no vote from a new connection before it has
/// read the master's identity on it again.
pub trait Master: Send + Sync + 'static {
    /// `host:port`, without credentials: how logs and errors name this master.
    fn addr(&self) -> &str;

    /// Sends `cmd` on the master's shared connection and returns its reply within `timeout`.
    ///
    /// Commands sent on the shared connection run on the master in the order they were sent.
    fn send(&self, cmd: Arc<Cmd>, timeout: Duration) -> Request;

    /// Sends the commands of `pipeline` on the master's shared connection, one after the other and
    /// ahead of anything sent later, and returns every reply in order within `timeout`.
    ///
    /// By default each command is sent with [`Master::send`] once the one before has answered;
    /// an implementation that can write them at once should.
    fn send_pipeline(&self, pipeline: Arc<Pipeline>, timeout: Duration) -> BatchRequest {
        let requests: Vec<Request> = pipeline
            .cmd_iter()
            .map(|cmd| self.send(Arc::new(cmd.clone()), timeout))
            .collect();
        Box::pin(async move {
            let mut replies = Vec::with_capacity(requests.len());
            for request in requests {
                replies.push(request.await?);
            }
            Ok(replies)
        })
    }

    /// Sends `batch` as one pipeline on the master's batch connection (its own, so a large batch
    /// never queues ahead of acquires and releases), and returns the replies of `count` commands
    /// after skipping the first `skip`, within `timeout`.
    fn send_batch(&self, batch: Arc<Pipeline>, skip: usize, count: usize, timeout: Duration) -> BatchRequest;

    /// Closes the batch connection, so the buffers a large batch grew are not kept; the next batch
    /// opens it again.
    fn close_batch_connection(&self) {}

    /// Opens a pub/sub connection within `timeout`.
    fn subscriber(&self, timeout: Duration) -> Subscribing;

    /// How many times the shared connection has been lost so far.
    fn disconnects(&self) -> u64;
}

impl fmt::Debug for dyn Master {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Master").field("addr", &self.addr()).finish()
    }
}

/// An open pub/sub connection: what subscribes and unsubscribes, and the messages that arrive.
pub struct Subscriber {
    /// Sends `SUBSCRIBE` and `UNSUBSCRIBE` on the connection.
    pub control: Box<dyn SubscriberControl>,
    /// The messages of every subscribed channel, until the connection closes.
    pub messages: Pin<Box<dyn Stream<Item = Message> + Send + 'static>>,
}

impl fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscriber").finish_non_exhaustive()
    }
}

/// Subscribes and unsubscribes on one pub/sub connection.
pub trait SubscriberControl: Send + Sync {
    /// Subscribes to `channel`; done once the server confirmed it.
    fn subscribe(&self, channel: &str) -> Control;
    /// Unsubscribes from `channel`.
    fn unsubscribe(&self, channel: &str) -> Control;
}

/// A message published on a subscribed channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The channel it was published on.
    pub channel: String,
    /// What was published (release announcements carry a token or a ticket id).
    pub payload: String,
}

/// A timer of an [`Environment`]'s clock: done once that clock reads its deadline.
pub type Timer = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Where a client draws its randomness, its wall-clock time and its monotonic clock, when the
/// application supplies them (the deterministic simulation does, so that one seed gives one
/// history, and so that each simulated client's clock runs at a rate of its own and stops while
/// the client is paused).
pub trait Environment: Send + Sync + 'static {
    /// Fills `bytes` with random bytes: lock tokens, owner and ticket ids, retry jitter.
    fn fill(&self, bytes: &mut [u8]);
    /// Milliseconds since the Unix epoch: the time a fair ticket is stamped with.
    fn wall_clock_ms(&self) -> u64;
    /// The client's monotonic clock: every validity, deadline, renewal and timeout is measured on
    /// it. Tokio's clock by default. It must never go backwards.
    fn now(&self) -> tokio::time::Instant {
        tokio::time::Instant::now()
    }
    /// A timer that completes once [`Environment::now`] reads `deadline` or later (at once if it
    /// already does). Tokio's timer by default; an implementation that changes `now` must change
    /// this with it.
    fn sleep_until(&self, deadline: tokio::time::Instant) -> Timer {
        Box::pin(tokio::time::sleep_until(deadline))
    }
}
