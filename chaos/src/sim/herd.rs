//! The hand-off on one hot key, measured in the simulation: `W` separate simulated processes (each
//! a quorlock client of its own, as `quorlock run` invocations are) start at once and wait for the
//! same lock; each holds it for 50 ms once, releases it and stops. What one hand-off costs the
//! masters (their `SET`, `EVAL` and `EVALSHA` commands and their release announcements, per
//! acquisition) and how long it takes (from a release to the next holder's grant, in simulated
//! time) show whether the hand-off grows with the number of waiters: a thundering herd on the
//! release announcement sends every waiter's attempt to every master.
//!
//! No fault and no clock drift: the herd is a cost, not a safety question, and the same seed
//! gives the same numbers. The holds are checked all the same: no two overlap.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use quorlock::Quorlock;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::client::{SimLink, Wire};
use super::clock::ClientClock;
use super::env::SimEnv;
use super::master::{Flavor, MasterConfig, Persistence, SimMaster};
use super::world::{MasterClock, Node, World};
use super::SimError;

/// Some day in 2023, in ms since the epoch: where the herd's clocks start.
const T0: u64 = 1_700_000_000_000;
/// Lock masters.
const MASTERS: usize = 5;
/// How long each holder holds the lock.
const HOLD: Duration = Duration::from_millis(50);
/// The lock's TTL.
const TTL: Duration = Duration::from_secs(10);
/// How long each waiter is willing to wait, far beyond the herd's length.
const WAIT: Duration = Duration::from_secs(600);

/// One herd.
#[derive(Debug, Clone, Copy)]
pub struct HerdConfig {
    /// Waiting processes.
    pub waiters: usize,
    /// Fair locks instead of plain ones.
    pub fair: bool,
    /// The seed.
    pub seed: u64,
    /// Each client's `max_attempts`; `None` for the library's default (100), under which a waiter
    /// woken by every release of a long herd runs out of attempts long before its wait.
    pub max_attempts: Option<u32>,
    /// The control: every process built without the hand-off queue
    /// (`Mechanism::HandOffQueue`), so every release is announced to every waiting process.
    pub without_queue: bool,
}

/// What one herd cost.
#[derive(Debug, Clone, PartialEq)]
pub struct HerdOutcome {
    /// Waiting processes.
    pub waiters: usize,
    /// Fair locks.
    pub fair: bool,
    /// Acquisitions (every waiter's, when none gave up).
    pub acquisitions: usize,
    /// `SET`, `EVAL` and `EVALSHA` commands on the masters per acquisition, from the moment every
    /// process was built (their start-up checks left out; the release of each hold counted in).
    pub acquire_side_per_handoff: f64,
    /// Release announcements published per acquisition.
    pub published_per_handoff: f64,
    /// Median time from a release to the next holder's grant, in simulated ms.
    pub handoff_p50_ms: f64,
    /// Worst such time, in simulated ms.
    pub handoff_max_ms: f64,
    /// Pairs of holds that overlapped (must be 0).
    pub overlaps: usize,
    /// Waiters whose acquire failed, and the first failure's message.
    pub gave_up: (usize, Option<String>),
}

/// One hold, in simulated time from the start.
#[derive(Debug, Clone, Copy)]
struct Held {
    granted: Duration,
    released: Duration,
}

/// Runs one herd on a paused single-threaded runtime.
pub fn run_herd(config: HerdConfig) -> Result<HerdOutcome, SimError> {
    super::run::on_paused_clock(herd(config))
}

async fn herd(config: HerdConfig) -> Result<HerdOutcome, SimError> {
    let start = Instant::now();
    let mut rng = StdRng::seed_from_u64(config.seed);
    let mut nodes = Vec::with_capacity(MASTERS);
    for m in 0..MASTERS {
        let master = SimMaster::new(
            MasterConfig::new(Flavor::Valkey91, Persistence::AofAlways, rng.random()),
            T0 - 3_600_000,
        )?;
        let clock = MasterClock {
            base: T0 + m as u64,
            ppm: 0,
            jumped: 0,
        };
        nodes.push(Node::new(master, clock));
    }
    let store = Node::new(
        SimMaster::new(MasterConfig::new(Flavor::Valkey91, Persistence::AofAlways, 0), T0)?,
        MasterClock {
            base: T0,
            ppm: 0,
            jumped: 0,
        },
    );
    let world = World::new(
        start,
        StdRng::seed_from_u64(rng.random()),
        nodes,
        store,
        Vec::new(),
        None,
    );
    let stats = world.stats();
    let (tx, rx) = mpsc::unbounded_channel();
    let world_task = tokio::task::spawn_local(world.run(rx));

    let holds: Arc<Mutex<Vec<Held>>> = Arc::default();
    let failures: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut clients = Vec::with_capacity(config.waiters);
    let mut built = Vec::with_capacity(config.waiters);
    for c in 0..config.waiters {
        let clock = ClientClock::new(start, 0);
        let wire = Wire::new(c, tx.clone(), clock.clone());
        let mut builder =
            Quorlock::builder().environment(Arc::new(SimEnv::new(rng.random(), clock.clone(), T0)));
        for m in 0..MASTERS {
            builder = builder.master(Arc::new(SimLink::new(m, wire.clone())));
        }
        if let Some(attempts) = config.max_attempts {
            builder = builder.max_attempts(attempts);
        }
        if config.without_queue {
            builder = builder.unsafe_without_for_tests(quorlock::config::Mechanism::HandOffQueue);
        }
        // Every process is up before any of them asks: what is measured is the herd, not the
        // clients' start-up checks.
        let locks = builder.build().await.map_err(|e| SimError::Client {
            client: c,
            message: e.to_string(),
        })?;
        built.push((locks, clock));
    }
    let before = stats.get();
    for (locks, clock) in built {
        let holds = Arc::clone(&holds);
        let failures = Arc::clone(&failures);
        let fair = config.fair;
        clients.push(tokio::task::spawn_local(async move {
            let lock = locks.lock("hot", TTL).wait(WAIT);
            let lock = if fair { lock.fair() } else { lock };
            match lock.acquire().await {
                Err(e) => failures
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(e.to_string()),
                Ok(guard) => {
                    let granted = Instant::now().saturating_duration_since(start);
                    clock.sleep(HOLD).await;
                    let released = Instant::now().saturating_duration_since(start);
                    let _ = guard.release().await;
                    holds
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(Held { granted, released });
                }
            }
            locks.settle().await;
        }));
    }
    for client in clients {
        let _ = client.await;
    }
    world_task.abort();
    drop(tx);

    let mut holds = std::mem::take(&mut *holds.lock().unwrap_or_else(PoisonError::into_inner));
    holds.sort_by_key(|h| h.granted);
    let mut overlaps = 0;
    let mut latest = Duration::ZERO;
    for h in &holds {
        if h.granted < latest {
            overlaps += 1;
        }
        latest = latest.max(h.released);
    }
    let mut gaps: Vec<f64> = holds
        .windows(2)
        .map(|w| w[1].granted.saturating_sub(w[0].released).as_secs_f64() * 1_000.0)
        .collect();
    gaps.sort_by(f64::total_cmp);
    let world = stats.get();
    let per = |n: u64| n as f64 / holds.len().max(1) as f64;
    Ok(HerdOutcome {
        waiters: config.waiters,
        fair: config.fair,
        acquisitions: holds.len(),
        acquire_side_per_handoff: per(world.sets_and_scripts - before.sets_and_scripts),
        published_per_handoff: per(world.published - before.published),
        handoff_p50_ms: gaps.get(gaps.len() / 2).copied().unwrap_or(0.0),
        handoff_max_ms: gaps.last().copied().unwrap_or(0.0),
        overlaps,
        gave_up: {
            let failures = failures.lock().unwrap_or_else(PoisonError::into_inner);
            (failures.len(), failures.first().cloned())
        },
    })
}
