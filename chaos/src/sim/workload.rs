//! What each simulated client does: a seeded loop of lock calls through the real quorlock API
//! (plain, fenced with a `FencedStore`, reentrant with nesting, multi-resource, fair, a semaphore
//! of [`SEMAPHORE_PERMITS`] permits, and the read and write holds of a read-write lock), and a
//! record of every call on the simulated clock for the checks. What a holder does inside its hold
//! (the witness writes, keep-alive and extend) is in `hold.rs`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorlock::{FencedStore, LockOwner, Quorlock};
use rand::rngs::StdRng;
use rand::RngExt;
use tokio::time::Instant;

use super::client::{StoreConn, Wire};
use super::clock::ClientClock;
use super::hold::hold;

/// The permits of every semaphore the workload uses.
pub const SEMAPHORE_PERMITS: u32 = 2;

/// The lock kinds the workload uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A plain lock.
    Plain,
    /// A fenced lock whose holder writes through a `FencedStore`.
    Fenced,
    /// A reentrant lock, sometimes re-entered by its owner.
    Reentrant,
    /// Two resources at once.
    Multi,
    /// A fair (first come, first served) lock.
    Fair,
    /// A permit of a semaphore of [`SEMAPHORE_PERMITS`] permits.
    Semaphore,
    /// A read hold of a read-write lock.
    Read,
    /// The write hold of a read-write lock (on the same resources as [`Kind::Read`]).
    Write,
}

impl Kind {
    /// Every kind, in a fixed order.
    pub const ALL: [Kind; 8] = [
        Kind::Plain,
        Kind::Fenced,
        Kind::Reentrant,
        Kind::Multi,
        Kind::Fair,
        Kind::Semaphore,
        Kind::Read,
        Kind::Write,
    ];

    /// The prefix of this kind's resources: kinds never share keys, except the read and write
    /// holds of one read-write lock.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Fenced => "fenced",
            Kind::Reentrant => "reentrant",
            Kind::Multi => "multi",
            Kind::Fair => "fair",
            Kind::Semaphore => "semaphore",
            Kind::Read | Kind::Write => "rw",
        }
    }
}

/// One lock call and, if it succeeded, its hold; times are simulated offsets from the run start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRecord {
    /// The client.
    pub client: usize,
    /// The kind.
    pub kind: Kind,
    /// The resources asked for (one, or several for multi).
    pub resources: Vec<String>,
    /// The resources the guard said it held (multi: must be all of them).
    pub held: Vec<String>,
    /// When `acquire` was called.
    pub invoked: Duration,
    /// When `acquire` was called by the client's own clock (an offset from the run start): fair
    /// tickets are stamped on the client's wall clock, which runs with it, so calls of different
    /// clients are queued in the order of these, not of their true times.
    pub stamped: Duration,
    /// The wait given to the call.
    pub wait: Duration,
    /// The TTL asked for.
    pub ttl: Duration,
    /// When `acquire` succeeded.
    pub acquired: Option<Duration>,
    /// The end of the validity the guard reported.
    pub validity_end: Option<Duration>,
    /// When the holder called release: it acts no more after this.
    pub releasing: Option<Duration>,
    /// When the release returned (or the acquire failed).
    pub ended: Duration,
    /// Whether the release was confirmed by a majority.
    pub released_ok: bool,
    /// The fencing token, for fenced holds.
    pub fencing: Option<u64>,
    /// Why the acquire failed.
    pub error: Option<String>,
    /// The witness counters whose update the store accepted, one entry per write.
    pub written: Vec<String>,
    /// Fenced writes the store rejected as stale.
    pub stale: u32,
    /// The holder paused (as for a GC) inside its hold.
    pub paused: bool,
    /// A nested re-entry by the same owner succeeded inside this hold.
    pub reentered: bool,
    /// The semaphore slot the guard said it held.
    pub permit: Option<u32>,
    /// The hold was kept alive by the watchdog, for longer than its TTL.
    pub kept_alive: bool,
    /// The holder called `extend` once: whether it succeeded.
    pub extended: Option<bool>,
    /// When the holder learnt that the lock was lost (the watchdog's signal, a failed extend); it
    /// wrote nothing after this.
    pub lost: Option<Duration>,
}

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
    /// The kinds used.
    pub kinds: &'static [Kind],
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

/// Runs the client's loop until `until`, then settles its background work.
pub async fn run_client(mut ctx: ClientCtx) {
    let owner = LockOwner::from(format!("owner-c{}", ctx.id));
    let fenced = FencedStore::new(ctx.store.clone());
    while Instant::now() < ctx.until {
        let kind = ctx.behaviour.kinds[ctx.rng.random_range(0..ctx.behaviour.kinds.len())];
        let r = ctx.rng.random_range(0..ctx.behaviour.resources);
        let resources = match kind {
            Kind::Multi => {
                let other = (r + 1 + ctx.rng.random_range(0..ctx.behaviour.resources.max(2) - 1))
                    % ctx.behaviour.resources.max(2);
                vec![format!("multi:{r}"), format!("multi:{other}")]
            }
            _ => vec![format!("{}:{r}", kind.name())],
        };
        let (lo, hi) = ctx.behaviour.ttl_ms;
        let ttl = Duration::from_millis(ctx.rng.random_range(lo..=hi));
        let wait = Duration::from_millis(ctx.rng.random_range(0..=1_500));
        let record = one_call(&mut ctx, &owner, &fenced, kind, resources, ttl, wait).await;
        ctx.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(record);
        let think = ctx.rng.random_range(0..=20);
        ctx.clock.sleep(Duration::from_millis(think)).await;
    }
    ctx.locks.settle().await;
}

async fn one_call(
    ctx: &mut ClientCtx,
    owner: &LockOwner,
    fenced: &FencedStore<StoreConn>,
    kind: Kind,
    resources: Vec<String>,
    ttl: Duration,
    wait: Duration,
) -> SimRecord {
    let invoked = ctx.at();
    let mut record = SimRecord {
        client: ctx.id,
        kind,
        resources: resources.clone(),
        held: Vec::new(),
        invoked,
        stamped: ctx.clock.now().saturating_duration_since(ctx.start),
        wait,
        ttl,
        acquired: None,
        validity_end: None,
        releasing: None,
        ended: invoked,
        released_ok: false,
        fencing: None,
        error: None,
        written: Vec::new(),
        stale: 0,
        paused: false,
        reentered: false,
        permit: None,
        kept_alive: false,
        extended: None,
        lost: None,
    };
    let lock = match kind {
        Kind::Multi => ctx.locks.lock_all(resources.iter().map(String::as_str), ttl),
        _ => ctx.locks.lock(&resources[0], ttl),
    };
    let lock = match kind {
        Kind::Fenced => lock.fenced(),
        Kind::Reentrant => lock.reentrant(owner),
        Kind::Fair => lock.fair(),
        Kind::Semaphore => lock.permits(SEMAPHORE_PERMITS),
        Kind::Read => lock.read(),
        Kind::Write => lock.write(),
        Kind::Plain | Kind::Multi => lock,
    };
    let guard = match lock.wait(wait).acquire().await {
        Ok(guard) => guard,
        Err(e) => {
            record.error = Some(e.to_string());
            record.ended = ctx.at();
            return record;
        }
    };
    record.acquired = Some(ctx.at());
    record.held = guard.resources().into_iter().map(str::to_owned).collect();
    record.fencing = guard.fencing_token();
    record.permit = guard.permit();
    if kind == Kind::Reentrant && ctx.rng.random_ratio(1, 3) {
        if let Ok(inner) = ctx
            .locks
            .lock(&resources[0], ttl)
            .reentrant(owner)
            .try_acquire()
            .await
        {
            record.reentered = true;
            let _ = inner.release().await;
        }
    }
    hold(ctx, fenced, &guard, &mut record).await;
    // A holder that ignores its validity believes it holds until it releases; the others, until
    // the last validity the guard confirmed (extended by keep-alive or extend), on the client's
    // clock, mapped to true time.
    record.validity_end = (!ctx.behaviour.ignore_validity).then(|| ctx.offset(guard.valid_until()));
    record.releasing = Some(ctx.at());
    let released = guard.release().await;
    record.released_ok = released.is_ok();
    record.ended = ctx.at();
    record
}
