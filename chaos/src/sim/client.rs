//! The client's side of the simulated network: quorlock's [`Master`] seam implemented over the
//! world's channel, so the unchanged client talks to simulated masters, and a
//! [`redis::aio::ConnectionLike`] over the same channel for the store a `FencedStore` guards.
//! Every request is written to the world when it is made and bounded by the caller's timeout on
//! the client's own clock (its rate, and no timeout fires while the client is paused); a lost
//! connection counts in [`Master::disconnects`], as the redis-rs implementation counts it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc as fmpsc;
use quorlock::seam::{BatchRequest, Control, Master, Request, Subscriber, SubscriberControl, Subscribing};
use quorlock::NodeErrorKind;
use redis::{Cmd, Pipeline, RedisFuture, Value};
use tokio::sync::{mpsc, oneshot};

use super::clock::ClientClock;
use super::wire::{Args, Conn, Endpoint, Envelope, Incoming, Op, Replies};

fn args_of(cmd: &Cmd) -> Args {
    cmd.args_iter()
        .filter_map(|arg| match arg {
            redis::Arg::Simple(bytes) => Some(bytes.to_vec()),
            _ => None,
        })
        .collect()
}

/// The world's end of the channel, shared by every connection of one client, and the clock that
/// client bounds its requests with.
#[derive(Debug, Clone)]
pub struct Wire {
    client: usize,
    tx: mpsc::UnboundedSender<Incoming>,
    clock: ClientClock,
}

impl Wire {
    /// Client `client`'s way into the world, its requests timed on `clock`.
    pub fn new(client: usize, tx: mpsc::UnboundedSender<Incoming>, clock: ClientClock) -> Wire {
        Wire { client, tx, clock }
    }

    /// The clock this client's requests are timed on.
    pub fn clock(&self) -> &ClientClock {
        &self.clock
    }

    /// Stops this client's traffic both ways for `pause` (see [`Incoming::Freeze`]).
    pub fn freeze(&self, pause: Duration) {
        let ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX);
        let _ = self.tx.send(Incoming::Freeze {
            client: self.client,
            ms,
        });
    }

    fn post(&self, master: Endpoint, conn: Conn, op: Op) {
        // A closed world means the run is over; the request's reply channel then reads as lost.
        let _ = self.tx.send(Incoming::Request(Envelope {
            client: self.client,
            master,
            conn,
            op,
        }));
    }

    fn commands(
        &self,
        master: Endpoint,
        conn: Conn,
        cmds: Vec<Args>,
        skip: usize,
        count: usize,
    ) -> oneshot::Receiver<Replies> {
        let (reply, rx) = oneshot::channel();
        self.post(
            master,
            conn,
            Op::Commands {
                cmds,
                skip,
                count,
                reply,
            },
        );
        rx
    }
}

fn lost() -> NodeErrorKind {
    NodeErrorKind::Connection("connection reset (simulated)".into())
}

/// Awaits a reply within `timeout` on `clock` (so the timeout runs at the client's rate and does
/// not fire while it is paused), counting a lost connection in `disconnects`.
async fn await_reply<T>(
    rx: oneshot::Receiver<Result<T, NodeErrorKind>>,
    timeout: Duration,
    clock: &ClientClock,
    disconnects: Option<&AtomicU64>,
) -> Result<T, NodeErrorKind> {
    let timer = clock.sleep_until(clock.deadline(timeout));
    let result = tokio::select! {
        // The reply first, as `tokio::time::timeout` polls: one ready at the deadline still counts.
        biased;
        reply = rx => match reply {
            Err(_) => Err(lost()),
            Ok(result) => result,
        },
        () = timer => Err(NodeErrorKind::Timeout),
    };
    if let (Err(NodeErrorKind::Connection(_)), Some(counter)) = (&result, disconnects) {
        counter.fetch_add(1, Ordering::SeqCst);
    }
    result
}

/// One simulated master as client `client` sees it.
#[derive(Debug)]
pub struct SimLink {
    addr: String,
    master: usize,
    wire: Wire,
    disconnects: Arc<AtomicU64>,
    next_sub: Arc<AtomicU64>,
}

impl SimLink {
    /// Master `master` through `wire`.
    pub fn new(master: usize, wire: Wire) -> SimLink {
        SimLink {
            addr: format!("sim-m{master}:6379"),
            master,
            wire,
            disconnects: Arc::new(AtomicU64::new(0)),
            next_sub: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Master for SimLink {
    fn addr(&self) -> &str {
        &self.addr
    }

    fn send(&self, cmd: Arc<Cmd>, timeout: Duration) -> Request {
        let rx = self.wire.commands(
            Endpoint::Master(self.master),
            Conn::Shared,
            vec![args_of(&cmd)],
            0,
            1,
        );
        let disconnects = Arc::clone(&self.disconnects);
        let clock = self.wire.clock.clone();
        Box::pin(async move {
            let mut values = await_reply(rx, timeout, &clock, Some(&disconnects)).await?;
            values
                .pop()
                .ok_or_else(|| NodeErrorKind::Protocol("no reply (simulated)".into()))
        })
    }

    fn send_pipeline(&self, pipeline: Arc<Pipeline>, timeout: Duration) -> BatchRequest {
        let cmds: Vec<Args> = pipeline.cmd_iter().map(args_of).collect();
        let count = cmds.len();
        let rx = self
            .wire
            .commands(Endpoint::Master(self.master), Conn::Shared, cmds, 0, count);
        let disconnects = Arc::clone(&self.disconnects);
        let clock = self.wire.clock.clone();
        Box::pin(async move { await_reply(rx, timeout, &clock, Some(&disconnects)).await })
    }

    fn send_batch(&self, batch: Arc<Pipeline>, skip: usize, count: usize, timeout: Duration) -> BatchRequest {
        let cmds: Vec<Args> = batch.cmd_iter().map(args_of).collect();
        let rx = self
            .wire
            .commands(Endpoint::Master(self.master), Conn::Batch, cmds, skip, count);
        let clock = self.wire.clock.clone();
        Box::pin(async move { await_reply(rx, timeout, &clock, None).await })
    }

    fn close_batch_connection(&self) {
        let _ = self.wire.tx.send(Incoming::CloseBatch {
            client: self.wire.client,
            master: self.master,
        });
    }

    fn subscriber(&self, timeout: Duration) -> Subscribing {
        let id = self.next_sub.fetch_add(1, Ordering::SeqCst);
        let (messages, stream) = fmpsc::unbounded();
        let (reply, rx) = oneshot::channel();
        self.wire.post(
            Endpoint::Master(self.master),
            Conn::Sub(id),
            Op::Open { messages, reply },
        );
        let control = SubControl {
            master: self.master,
            id,
            wire: self.wire.clone(),
            timeout,
        };
        let clock = self.wire.clock.clone();
        Box::pin(async move {
            await_reply(rx, timeout, &clock, None).await?;
            Ok(Subscriber {
                control: Box::new(control),
                messages: Box::pin(stream),
            })
        })
    }

    fn disconnects(&self) -> u64 {
        self.disconnects.load(Ordering::SeqCst)
    }
}

/// `SUBSCRIBE` and `UNSUBSCRIBE` on one simulated pub/sub connection.
struct SubControl {
    master: usize,
    id: u64,
    wire: Wire,
    timeout: Duration,
}

impl SubControl {
    fn change(&self, channel: &str, on: bool) -> Control {
        let (reply, rx) = oneshot::channel();
        self.wire.post(
            Endpoint::Master(self.master),
            Conn::Sub(self.id),
            Op::Subscribe {
                channel: channel.to_owned(),
                on,
                reply,
            },
        );
        let timeout = self.timeout;
        let clock = self.wire.clock.clone();
        Box::pin(async move { await_reply(rx, timeout, &clock, None).await })
    }
}

impl SubscriberControl for SubControl {
    fn subscribe(&self, channel: &str) -> Control {
        self.change(channel, true)
    }

    fn unsubscribe(&self, channel: &str) -> Control {
        self.change(channel, false)
    }
}

/// A connection to the store that holds the protected resource, for `FencedStore` and the
/// unfenced witness.
#[derive(Debug, Clone)]
pub struct StoreConn {
    wire: Wire,
}

/// How long a store request may take before it counts as failed (the store is never faulted, so
/// this only bounds a bug).
const STORE_TIMEOUT: Duration = Duration::from_secs(5);

impl StoreConn {
    /// The store, through `wire`.
    pub fn new(wire: Wire) -> StoreConn {
        StoreConn { wire }
    }

    fn run(
        &self,
        cmds: Vec<Args>,
        skip: usize,
        count: usize,
    ) -> impl std::future::Future<Output = redis::RedisResult<Vec<Value>>> {
        let rx = self
            .wire
            .commands(Endpoint::Store, Conn::Shared, cmds, skip, count);
        let clock = self.wire.clock.clone();
        async move {
            await_reply(rx, STORE_TIMEOUT, &clock, None)
                .await
                .map_err(|e| redis::RedisError::from(std::io::Error::other(e.to_string())))
        }
    }
}

impl redis::aio::ConnectionLike for StoreConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        let run = self.run(vec![args_of(cmd)], 0, 1);
        Box::pin(async move {
            let mut values = run.await?;
            let value = values.pop().unwrap_or(Value::Nil);
            value.extract_error()
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        let run = self.run(pipeline.cmd_iter().map(args_of).collect(), offset, count);
        Box::pin(run)
    }

    fn get_db(&self) -> i64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use tokio::time::Instant;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_request_times_out_on_the_clients_clock_and_not_during_a_pause() {
        let start = Instant::now();
        // 0.4 % slow: a 1,000 ms timeout on the client's clock is 1,004.016 ms of true time.
        let clock = ClientClock::new(start, -4_000);
        let (_keep, rx) = oneshot::channel::<Result<(), NodeErrorKind>>();
        let reply = await_reply(rx, Duration::from_millis(1_000), &clock, None).await;
        assert_eq!(reply, Err(NodeErrorKind::Timeout));
        assert_eq!(Instant::now() - start, Duration::from_millis(1_005));
        // Paused for 2 s: a 100 ms timeout fires only when the pause is over.
        clock.pause(Duration::from_secs(2));
        let (_keep, rx) = oneshot::channel::<Result<(), NodeErrorKind>>();
        let reply = await_reply(rx, Duration::from_millis(100), &clock, None).await;
        assert_eq!(reply, Err(NodeErrorKind::Timeout));
        assert_eq!(Instant::now() - start, Duration::from_millis(3_005));
        // A reply that came in time is taken, and a dropped sender is a lost connection.
        let (tx, rx) = oneshot::channel();
        let _ = tx.send(Ok(7));
        assert_eq!(await_reply(rx, Duration::ZERO, &clock, None).await, Ok(7));
        let (tx, rx) = oneshot::channel::<Result<(), NodeErrorKind>>();
        drop(tx);
        let counter = AtomicU64::new(0);
        assert!(matches!(
            await_reply(rx, Duration::from_secs(1), &clock, Some(&counter)).await,
            Err(NodeErrorKind::Connection(_))
        ));
        assert_eq!(counter.load(Ordering::SeqCst), 1);
    }
}
