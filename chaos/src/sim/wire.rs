//! What travels between the simulated clients and the simulated world: requests on a
//! connection, their replies, and the harness's own orders (faults, leak scans). Both sides
//! share only these types and one unbounded channel, so the client side stays `Send` while the
//! masters (which hold a Lua state) live on the world's single task.

use futures::channel::mpsc as fmpsc;
use quorlock::seam::Message;
use quorlock::NodeErrorKind;
use redis::Value;
use tokio::sync::oneshot;

/// One command's arguments, its name first.
pub type Args = Vec<Vec<u8>>;

/// Which connection of a client to a master a request travels on. Each is its own FIFO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Conn {
    /// The shared connection: acquires, releases, health checks.
    Shared,
    /// The watchdog's batch connection.
    Batch,
    /// A pub/sub connection, by its id.
    Sub(u64),
}

/// Replies to a list of commands, or why none came.
pub type Replies = Result<Vec<Value>, NodeErrorKind>;

/// What a request asks of a master.
#[derive(Debug)]
pub enum Op {
    /// Runs `cmds` in order and answers the replies of `count` of them after skipping `skip`.
    Commands {
        /// The commands.
        cmds: Vec<Args>,
        /// Replies not wanted (script loads ahead of a batch).
        skip: usize,
        /// Replies wanted.
        count: usize,
        /// Where the replies go.
        reply: oneshot::Sender<Replies>,
    },
    /// Opens the pub/sub connection named by the request's [`Conn::Sub`].
    Open {
        /// Where messages published on its channels go.
        messages: fmpsc::UnboundedSender<Message>,
        /// Answered once the connection is open.
        reply: oneshot::Sender<Result<(), NodeErrorKind>>,
    },
    /// `SUBSCRIBE` (or `UNSUBSCRIBE` when `on` is false) on a pub/sub connection.
    Subscribe {
        /// The channel.
        channel: String,
        /// Subscribe or unsubscribe.
        on: bool,
        /// Answered once the server confirmed.
        reply: oneshot::Sender<Result<(), NodeErrorKind>>,
    },
}

/// A request from client `client` to master `master` on connection `conn`.
#[derive(Debug)]
pub struct Envelope {
    /// The sending client (the store's clients count from 0 too; see [`Endpoint`]).
    pub client: usize,
    /// The destination.
    pub master: Endpoint,
    /// The connection.
    pub conn: Conn,
    /// What is asked.
    pub op: Op,
}

/// A destination in the world: a lock master, or the store that holds the protected resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Endpoint {
    /// Lock master `i`.
    Master(usize),
    /// The protected resource's store (never faulted: it is the witness).
    Store,
}

/// A key left on a master, for the leak checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftKey {
    /// The master.
    pub master: usize,
    /// The key.
    pub key: String,
    /// Whether it has a deadline.
    pub expires: bool,
}

/// Everything the world's task receives.
#[derive(Debug)]
pub enum Incoming {
    /// A request from a client.
    Request(Envelope),
    /// The batch connection of `client` to `master` closes (the next batch reopens it).
    CloseBatch {
        /// The client.
        client: usize,
        /// The master.
        master: usize,
    },
    /// Client `client`'s process stops for `ms` (a pause, as in a GC): nothing it sends leaves
    /// and nothing sent to it is read until it resumes; its own timers still run.
    Freeze {
        /// The client.
        client: usize,
        /// How long, in ms of simulated time.
        ms: u64,
    },
    /// Heal every fault now (the end of a run).
    HealAll,
    /// Lists the keys alive on every lock master now.
    Keys(oneshot::Sender<Vec<LeftKey>>),
}
