//! What one simulated client runs with: its quorlock handle, its connections into the world, its
//! own clock and generator, and how it behaves ([`ClientCtx`], [`Behaviour`]). Shared by the
//! client's loop (`workload`) and what its holders do (`hold`), so that neither depends on the
//! other for it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorlock::Quorlock;
use rand::rngs::StdRng;
use tokio::time::Instant;

use super::client::{StoreConn, Wire};
use super::clock::ClientClock;
use super::record::{CallKind, SimRecord};

/// How the clients behave; the negative controls turn the unsafe switches on.
#[derive(Debug, Clone, Copy)]
pub struct Behaviour {
    /// Resources per kind.
    pub resources: usize,
    /// Shortest and longest TTL asked for, in ms.
    pub ttl_ms: (u64, u64),
    /// Out of model: a holder keeps writing until it releases, whatever its validity says.
    pub ignore_validity: bool,
    /// Out of model: holders of unfenced locks pause past their validity and then write.
    pub pause_unfenced: bool,
    /// In model: a holder keeps its lock to the last instant of its validity, then releases (a
    /// critical section that uses all the time the lock promises).
    pub to_validity_end: bool,
    /// The kinds used.
    pub kinds: &'static [CallKind],
    /// Every kind on the same resource names (`shared:N`), each promise of exclusion checked.
    pub shared: bool,
    /// The permits of its semaphores.
    pub permits: u32,
    /// The TTL of its first call, in ms, if it must be this one.
    pub first_ttl_ms: Option<u64>,
}

/// What one client needs.
pub struct ClientCtx {
    /// The client's number.
    pub id: usize,
    /// Its quorlock handle.
    pub locks: Quorlock,
    /// Its connection to the store.
    pub store: StoreConn,
    /// Its way into the world, through which a pause holds the client's traffic.
    pub wire: Wire,
    /// Its own clock (quorlock's, through its environment), which a pause stops too.
    pub clock: ClientClock,
    /// Its generator for workload choices.
    pub rng: StdRng,
    /// The run's start.
    pub start: Instant,
    /// When to stop starting calls.
    pub until: Instant,
    /// How it behaves.
    pub behaviour: Behaviour,
    /// Where records go.
    pub records: Arc<Mutex<Vec<SimRecord>>>,
}

impl ClientCtx {
    /// Now, in true time, as an offset from the run start (records are on true time).
    pub(crate) fn at(&self) -> Duration {
        Instant::now().saturating_duration_since(self.start)
    }

    /// `instant`, a reading of the client's clock, as an offset in true time from the run start:
    /// the first true instant at which the client's clock reads it, rounded down to the
    /// nanosecond. Rounded down, a safe interval's end is never stated later than the client could
    /// believe it (a later end could show an overlap that never was); it is at most 1 ns early,
    /// and everything else in a run happens on whole milliseconds of true time, so no event falls
    /// between the two roundings and none is hidden either.
    pub(crate) fn offset(&self, instant: Instant) -> Duration {
        self.clock
            .true_at_or_before(instant)
            .saturating_duration_since(self.start)
    }
}
