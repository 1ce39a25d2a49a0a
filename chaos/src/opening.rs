//! The opening round of a negative control: its first clients act one at a time, in client
//! order, each keeping what it took until every one of them has had its turn. A control exists
//! to show that the checker catches a violation; racing clients show it only when the timing
//! happens to line up, so a CI gate built on them fails now and then on no change. Played in
//! turns, the counterexample is built rather than hoped for: two single-master clients on
//! different masters both hold the lock and both read the witness before either writes; a
//! client that ignores its validity is followed by one that takes the expired lock and reads
//! the same value; majority-counting clients, each cut off from a different master, fill every
//! master's permits with more holders than there are permits.
//!
//! The board that says whose turn it is lives in-process ([`Opening::local`], for the kinds'
//! clients, which always run in the harness's process) or on the witness Redis
//! ([`Opening::on_witness`], which every lock client reaches, in-process or in a container of
//! its own). Every wait is bounded by [`PATIENCE`], so a client that never takes its turn (a
//! container that did not start) delays the others but never hangs the run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

/// How many clients play the opening round (`0`: none): the first three, enough for two
/// holders on different masters whether the clients run in one group or, as in containers,
/// in two (client `c` is client `c / groups` of group `c % groups`).
pub const PLAYERS: usize = 3;

/// The opening round's holds take this many times the run's TTL, so that they outlast the
/// round however long each turn takes (a turn that reaches a cut-off master waits out its
/// node timeout, a quarter of the TTL, once per slot it tries).
pub const TTL_FACTOR: u32 = 3;

/// The longest any client waits for its turn or for the round to end.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How often a waiting client looks at the board.
const POLL: Duration = Duration::from_millis(5);

/// The key on the witness that counts the turns taken (cleared with the witness's counters
/// before every run).
pub const WITNESS_KEY: &str = "witness:opening";

/// Whose turn it is: the number of turns taken so far.
#[derive(Clone)]
pub struct Opening {
    board: Board,
    players: usize,
}

#[derive(Clone)]
enum Board {
    /// In this process, with the count of faults applied that the round waits for.
    Local {
        turns: Arc<AtomicUsize>,
        faults: Arc<AtomicUsize>,
        faults_needed: usize,
    },
    /// On the witness, under [`WITNESS_KEY`].
    Witness {
        conn: MultiplexedConnection,
        key: String,
    },
}

impl std::fmt::Debug for Opening {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let board = match &self.board {
            Board::Local { faults_needed, .. } => format!("local, after {faults_needed} faults"),
            Board::Witness { key, .. } => format!("witness key {key}"),
        };
        f.debug_struct("Opening")
            .field("players", &self.players)
            .field("board", &board)
            .finish()
    }
}

impl Opening {
    /// A round of `players` clients in this process, which starts once `faults` counts
    /// `faults_needed` faults applied (the cut a counterexample needs in place first).
    pub fn local(players: usize, faults: Arc<AtomicUsize>, faults_needed: usize) -> Opening {
        Opening {
            board: Board::Local {
                turns: Arc::default(),
                faults,
                faults_needed,
            },
            players,
        }
    }

    /// A round of `players` clients that may run in several processes, counted on the witness
    /// under [`WITNESS_KEY`] (cleared before the run).
    pub fn on_witness(players: usize, conn: MultiplexedConnection) -> Opening {
        Opening {
            board: Board::Witness {
                conn,
                key: WITNESS_KEY.to_owned(),
            },
            players,
        }
    }

    /// How many clients play.
    pub fn players(&self) -> usize {
        self.players
    }

    /// `true` if client `id` plays the round (the others wait for its end).
    pub fn plays(&self, id: usize) -> bool {
        id < self.players
    }

    /// Waits until it is client `id`'s turn (or [`PATIENCE`] has passed).
    pub async fn my_turn(&self, id: usize) {
        self.until(|turns| turns >= id).await;
    }

    /// Ends the current player's turn.
    pub async fn pass(&self) {
        match &self.board {
            Board::Local { turns, .. } => {
                turns.fetch_add(1, Ordering::SeqCst);
            }
            Board::Witness { conn, key } => {
                let mut conn = conn.clone();
                let _: redis::RedisResult<u64> = conn.incr(key, 1).await;
            }
        }
    }

    /// Waits until every player has had its turn (or [`PATIENCE`] has passed).
    pub async fn over(&self) {
        let players = self.players;
        self.until(|turns| turns >= players).await;
    }

    /// Waits until the faults are in place and `done(turns)` holds.
    async fn until(&self, done: impl Fn(usize) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while Instant::now() < deadline {
            if self.ready().await && done(self.turns().await) {
                return;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn ready(&self) -> bool {
        match &self.board {
            Board::Local {
                faults,
                faults_needed,
                ..
            } => faults.load(Ordering::SeqCst) >= *faults_needed,
            Board::Witness { .. } => true,
        }
    }

    async fn turns(&self) -> usize {
        match &self.board {
            Board::Local { turns, .. } => turns.load(Ordering::SeqCst),
            Board::Witness { conn, key } => {
                let mut conn = conn.clone();
                let taken: redis::RedisResult<Option<usize>> = conn.get(key).await;
                taken.ok().flatten().unwrap_or(0)
            }
        }
    }
}
