//! One seed, end to end: a single-threaded tokio runtime on the paused clock, the world (masters,
//! store, network, faults) on one task, the real quorlock clients on others, then the heal, the
//! settle, the leak scans and the checks. Everything random is drawn from generators seeded by
//! the one seed, so the same seed gives the same history, byte for byte; the history's SHA-1 is
//! the run's fingerprint.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use quorlock::Quorlock;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use redis::AsyncCommands;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::checks::{self, Check, Finding};
use super::client::{SimLink, StoreConn, Wire};
use super::clock::ClientClock;
use super::context::{Behaviour, ClientCtx};
use super::controls::Control;
use super::env::SimEnv;
use super::fault::{plan, plan_stalls, ClockStall, PlanShape, Planned};
use super::master::{Flavor, MasterConfig, Persistence, SimMaster};
use super::operations::{merge, plan_for_control, plan_operations, plan_rollbacks, OperationsShape};
use super::profile::Profile;
use super::record::{CallKind, SimRecord};
use super::wire::{Incoming, LeftKey};
use super::workload::run_client;
use super::world::{MasterClock, Node, World, WorldLog};
use super::SimError;
use crate::history::FaultWindow;

/// Some day in 2023, in ms since the epoch: where the simulated clocks start.
const T0: u64 = 1_700_000_000_000;
/// Lock masters.
pub const MASTERS: usize = 5;
/// Clients.
pub const CLIENTS: usize = 6;
/// The TTLs asked for, in ms.
const TTL_MS: (u64, u64) = (200, 1_000);
/// Master and client clock rates stay within this many ppm of true time, each drawn on its own.
///
/// Inside the default drift allowance, `ttl * 0.01 + 2 ms`: a key's expiry is timed on a master's
/// clock, its holder's validity on the client's. The worst pair is a client slow by `a` ppm and a
/// master fast by `b`: the client's validity (at most `ttl - drift` on its clock) ends after
/// `(ttl - drift) / (1 - a)` of true time, the key after `ttl / (1 + b)`. Safe while
/// `(ttl - drift) * (1 + b) <= ttl * (1 - a)`; with `drift >= ttl / 100`, while
/// `99 * b + 100 * a <= 1_000_000` (in ppm). At 4,000 each: 796,000, so the client's validity ends
/// at least `ttl * 0.002` before the key's expiry (0.4 ms at the shortest TTL of 200 ms), plus the
/// 2 ms the allowance adds, plus the time the request took to reach the master.
const MAX_PPM: i64 = 4_000;
const _: () = assert!(99 * MAX_PPM + 100 * MAX_PPM <= 1_000_000);
/// Under the `client-clock-stall` control, the mean gap between the end of one of a client's clock
/// stalls and the start of its next. Unlike a master's clock jump, which must hit a majority
/// within one TTL to show, a single stalled holder shows: one stall every few seconds per client
/// (a stall in progress about a third of the time) is enough for most seeds to catch one.
const STALL_GAP_MS: u64 = 4_000;
/// The mean gap between operations, in runs with them (on top of the classic faults').
const OPERATIONS_GAP_MS: u64 = 1_500;
/// Under the `vm-rollback` control, the mean gap between rollbacks: like a clock jump, a rollback
/// must take a held key from a majority within one TTL to show.
const ROLLBACK_GAP_MS: u64 = 200;
/// The fault of a holder paused past its validity for less than its lock-delay, then writing.
pub const PAUSED_INSIDE_LOCK_DELAY: &str = "holder paused past its validity, inside its lock-delay";

/// The same pause longer than the lock-delay (the control `pause-past-lock-delay`).
pub const PAUSED_PAST_LOCK_DELAY: &str = "holder paused past its validity and its lock-delay (out of model)";

/// The keys a filler writes start with this (no lock key does): they are no leak.
pub const FILLER_PREFIX: &str = "filler:";
/// The client number the final reads of the store are made under, apart from every client's.
const FINAL_READER: usize = usize::MAX;

/// What one seed runs.
#[derive(Debug, Clone, Copy)]
pub struct SeedConfig {
    /// The seed.
    pub seed: u64,
    /// Simulated time during which clients start calls.
    pub simulated: Duration,
    /// The negative control, if any.
    pub control: Option<Control>,
    /// Runs the classic mix alone, whatever the seed's profile would draw (see `profile.rs`): a
    /// seed found before the operations existed replays the history it was found with.
    pub classic: bool,
}

/// What one seed found.
#[derive(Debug, Clone, Default)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// Lock calls made.
    pub attempts: u64,
    /// Lock calls that acquired.
    pub acquisitions: u64,
    /// Faults injected.
    pub faults: u64,
    /// Commands run on lock masters.
    pub commands: u64,
    /// Violations found, each with the check that found it.
    pub violations: Vec<Finding>,
    /// Acknowledged witness updates that were lost.
    pub lost_updates: u64,
    /// Keys left behind after the settle.
    pub leaked_keys: Vec<String>,
    /// Simulated time, the settle included.
    pub simulated: Duration,
    /// SHA-1 of the serialized history.
    pub history_hash: String,
    /// Fenced writes the store rejected as stale (paused holders among them).
    pub stale_rejected: u64,
    /// Acquisitions per kind, by the kind's name (`Read` and `Write` apart).
    pub by_kind: BTreeMap<String, u64>,
    /// Holds kept alive by the watchdog.
    pub kept_alive: u64,
    /// Holds that called `extend`, and how many of those extends succeeded.
    pub extends: (u64, u64),
    /// Holds whose holder learnt that its lock was lost (and stopped writing).
    pub lost_signals: u64,
    /// Whether the seed ran with operations (see `profile.rs`), and every kind on shared names.
    pub operations: (bool, bool),
    /// Faults started, by type.
    pub faults_by_kind: BTreeMap<String, u64>,
    /// What the operations caused (late requests run, `BUSY` and `OOM` replies, writes lost by
    /// crashes, keys evicted, ...).
    pub effects: BTreeMap<String, u64>,
    /// Out of model: what happened (a VM rollback, ...). A run with notes is judged all the same:
    /// its violations are reported, never excused.
    pub notes: Vec<String>,
}

impl SeedOutcome {
    /// `true` when every check passed.
    pub fn passed(&self) -> bool {
        self.violations.is_empty() && self.lost_updates == 0 && self.leaked_keys.is_empty()
    }

    /// `true` if `check` found something in this seed.
    pub fn fired(&self, check: Check) -> bool {
        match check {
            Check::LostUpdates => self.lost_updates > 0,
            Check::LeakedKeys => !self.leaked_keys.is_empty(),
            _ => self.violations.iter().any(|v| v.check == check),
        }
    }

    /// `true` if the check `control` targets found something: any other failure (a leak, a
    /// liveness complaint) does not count as catching it.
    pub fn caught(&self, control: Control) -> bool {
        self.fired(control.target())
    }
}

/// Runs one seed.
pub fn run_seed(config: SeedConfig) -> Result<SeedOutcome, SimError> {
    run(config, true)
}

/// Runs one seed of a control that removes a mechanism of the library (its workload, masters and
/// plan) with the mechanism left in place: the twin that shows the control's violations come
/// from the removal, not from what the control runs.
pub fn run_with_mechanism(control: Control, seed: u64, simulated: Duration) -> Result<SeedOutcome, SimError> {
    let config = SeedConfig {
        seed,
        simulated,
        control: Some(control),
        classic: false,
    };
    run(config, false)
}

fn run(config: SeedConfig, remove: bool) -> Result<SeedOutcome, SimError> {
    on_paused_clock(simulate(config, remove))
}

/// Runs `run` to its end on a single-threaded runtime whose clock is paused (it jumps to the next
/// timer whenever every task waits), with the local tasks it spawns.
pub(crate) fn on_paused_clock<T>(
    run: impl std::future::Future<Output = Result<T, SimError>>,
) -> Result<T, SimError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| SimError::Runtime(e.to_string()))?;
    let local = tokio::task::LocalSet::new();
    runtime.block_on(local.run_until(run))
}

fn flavor(i: u64) -> Flavor {
    match i % 3 {
        0 => Flavor::Redis70,
        1 => Flavor::Valkey81,
        _ => Flavor::Valkey91,
    }
}

async fn simulate(config: SeedConfig, remove: bool) -> Result<SeedOutcome, SimError> {
    let start = Instant::now();
    let mut rng = StdRng::seed_from_u64(config.seed);
    let control = config.control;
    let run_ms = u64::try_from(config.simulated.as_millis()).unwrap_or(u64::MAX);
    // What this seed's masters and clients are set up with beyond the classic run, from a
    // generator of its own: the classic draws below stay what they were.
    let mut ops_rng = Profile::generator(config.seed);
    let profile = if config.classic {
        Profile::classic(MASTERS, CLIENTS, TTL_MS, ops_rng.random())
    } else {
        Profile::draw(&mut ops_rng, control, MASTERS, CLIENTS, TTL_MS, run_ms)
    };
    let mut nodes = Vec::with_capacity(MASTERS);
    for setup in profile.masters.iter().take(MASTERS) {
        let durable = control != Some(Control::WipeWithoutGrace) && rng.random_bool(0.5)
            || Profile::durable_masters(control);
        let persistence = if setup.everysec {
            Persistence::AofEverysec
        } else if durable {
            Persistence::AofAlways
        } else {
            Persistence::None
        };
        let seed = rng.random();
        let mut clock = MasterClock {
            base: T0 + rng.random_range(0..10_000),
            ppm: rng.random_range(-MAX_PPM..=MAX_PPM),
            jumped: 0,
        };
        // The drift allowance matters most between a fast master and a slow client: that control
        // runs every pair so, at the edge of the model's rates.
        if control == Some(Control::WithoutDriftAllowance) {
            clock.ppm = MAX_PPM;
        }
        // Started an hour before the run: a master that just started is rightly kept out of every
        // majority for the restart grace, which is a fault of its own (see `Fault::Crash`).
        let started = clock.base - 3_600_000;
        let mut master_config = MasterConfig::new(flavor(rng.random()), persistence, seed);
        if let Some((limit, policy)) = setup.memory {
            master_config = master_config.with_memory(limit, policy);
        }
        let mut master = SimMaster::new(master_config, started)?;
        master.set_replicas(u64::from(setup.replica));
        nodes.push(Node::new(master, clock));
    }
    let store_clock = MasterClock {
        base: T0,
        ppm: 0,
        jumped: 0,
    };
    let store = Node::new(
        SimMaster::new(MasterConfig::new(Flavor::Valkey91, Persistence::AofAlways, 0), T0)?,
        store_clock,
    );
    let mut faults: Vec<Planned> = plan(
        &mut rng,
        PlanShape {
            masters: MASTERS,
            clients: CLIENTS,
            run_ms,
            // Wipes and clock jumps must hit a majority inside one TTL to show (a jump on a single
            // master leaves the holder's other grants standing); they come often in those controls.
            mean_gap_ms: match control {
                Some(Control::WipeWithoutGrace) => 150,
                Some(Control::ClockJump) => 300,
                _ => 1_500,
            },
            clock_jump_ms: (control == Some(Control::ClockJump)).then_some(TTL_MS.1 * 2),
            instant_crashes: control == Some(Control::WipeWithoutGrace),
        },
    );
    // The fair order is only judged far from faults: that control runs without any. A control
    // that removes another mechanism runs only what that mechanism answers.
    if control == Some(Control::FairSkipsQueue) {
        faults.clear();
    }
    let focused = control.and_then(|c| plan_for_control(&mut ops_rng, c, MASTERS, run_ms));
    if let Some(focused) = focused {
        faults = focused;
    } else if profile.operations {
        let shape = OperationsShape {
            masters: MASTERS,
            clients: profile.clients.len(),
            run_ms,
            mean_gap_ms: OPERATIONS_GAP_MS,
            limited: (0..MASTERS)
                .filter(|&m| profile.masters[m].memory.is_some())
                .collect(),
            keep_connections: control == Some(Control::KeptConnections),
        };
        faults = merge(faults, plan_operations(&mut ops_rng, &shape));
    }
    if control == Some(Control::VmRollback) {
        faults = merge(
            faults,
            plan_rollbacks(&mut ops_rng, MASTERS, run_ms, ROLLBACK_GAP_MS),
        );
    }
    // Drawn after everything else is planned and only under their control, so that no other run
    // draws differently.
    let suspended = control == Some(Control::WithoutCommitKeyCheck);
    let stalls: Vec<ClockStall> = if control == Some(Control::ClientClockStall) || suspended {
        plan_stalls(&mut rng, CLIENTS, run_ms, TTL_MS.1 * 2, STALL_GAP_MS)
    } else {
        Vec::new()
    };
    let world_ops = (profile.operations || control == Some(Control::VmRollback))
        .then(|| StdRng::seed_from_u64(profile.seed));
    let world = World::new(
        start,
        StdRng::seed_from_u64(rng.random()),
        nodes,
        store,
        faults,
        world_ops,
    );
    let stats = world.stats();
    let log = world.log();
    let (tx, rx) = mpsc::unbounded_channel();
    let world_task = tokio::task::spawn_local(world.run(rx));

    let kinds: &'static [CallKind] = match control {
        Some(Control::PauseUnfenced | Control::IgnoreValidity | Control::PastLockDelay) => &[CallKind::Plain],
        Some(Control::FairSkipsQueue) => &[CallKind::Fair],
        Some(
            Control::WithoutReplacedRule | Control::WithoutDurabilityRule | Control::WithoutEvictionRule,
        ) => &[CallKind::Plain],
        Some(Control::WithoutPermitsCheck) => &[CallKind::Semaphore],
        Some(Control::WithoutReadersCheck) => &[CallKind::Read, CallKind::FencedWrite],
        Some(Control::WithoutEpochCheck | Control::WithoutCommitKeyCheck) => &[CallKind::Fenced],
        _ if profile.operations => &CallKind::EVERY,
        _ => &CallKind::ALL,
    };
    // A lock-delay: longer than every pause (twice the TTL of the paused lock) in the seeds that
    // have one and in the control's twin; shorter than every pause in the control itself.
    let lock_delay = match control {
        Some(Control::PastLockDelay) if remove => Some(Duration::from_millis(TTL_MS.0 / 2)),
        Some(Control::PastLockDelay) => Some(Duration::from_millis(4 * profile.max_ttl_ms)),
        None if profile.lock_delay => Some(Duration::from_millis(4 * profile.max_ttl_ms)),
        _ => None,
    };
    let records: Arc<Mutex<Vec<SimRecord>>> = Arc::default();
    let until = start + config.simulated;
    let mut clients = Vec::with_capacity(profile.clients.len());
    for (c, setup) in profile.clients.iter().enumerate() {
        // The classic clients draw from the classic generator; the one started mid-run, from the
        // operations'.
        let draws: &mut StdRng = if c < CLIENTS { &mut rng } else { &mut ops_rng };
        // Each client's clock runs at its own rate (see `MAX_PPM`), its timers stop while it is
        // paused, and under its control, the clock itself stands still during the client's stalls.
        let mut ppm = draws.random_range(-MAX_PPM..=MAX_PPM);
        if control == Some(Control::WithoutDriftAllowance) {
            ppm = -MAX_PPM;
        }
        let clock = ClientClock::new(start, ppm).with_stalls(
            stalls
                .iter()
                .filter(|s| s.client == c)
                .map(|s| (Duration::from_millis(s.at_ms), Duration::from_millis(s.ms))),
        );
        let wire = Wire::new(c, tx.clone(), clock.clone());
        if suspended {
            // A suspended VM: in each of its stalls, the process stops too.
            let windows: Vec<ClockStall> = stalls.iter().filter(|s| s.client == c).cloned().collect();
            let (clock, wire) = (clock.clone(), wire.clone());
            tokio::task::spawn_local(async move {
                for stall in windows {
                    tokio::time::sleep_until(start + Duration::from_millis(stall.at_ms)).await;
                    let length = Duration::from_millis(stall.ms);
                    clock.pause(length);
                    wire.freeze(length);
                }
            });
        }
        let mut builder = Quorlock::builder()
            .environment(Arc::new(SimEnv::new(draws.random(), clock.clone(), T0)))
            .enforce_restart_grace(control != Some(Control::WipeWithoutGrace))
            .refuse_evicting_masters(!(remove && control == Some(Control::WithoutEvictionRule)));
        if let Some(mechanism) = control.and_then(Control::mechanism).filter(|_| remove) {
            builder = builder.unsafe_without_for_tests(mechanism);
        }
        if let Some(delay) = lock_delay {
            builder = builder.lock_delay(delay);
        }
        if let Some(grace) = setup.grace {
            // A configured grace must cover the keys' whole life: the TTL plus the lock-delay.
            builder = builder.restart_grace(grace + lock_delay.unwrap_or_default());
        }
        if let Some(every) = setup.health_refresh {
            builder = builder.health_refresh(every);
        }
        if control == Some(Control::QuorumOfOne) {
            builder = builder.master(Arc::new(SimLink::new(c % MASTERS, wire.clone())));
        } else {
            for m in 0..MASTERS {
                builder = builder.master(Arc::new(SimLink::new(m, wire.clone())));
            }
        }
        let behaviour = Behaviour {
            resources: 2,
            ttl_ms: setup.ttl_ms,
            ignore_validity: control == Some(Control::IgnoreValidity),
            pause_unfenced: control == Some(Control::PauseUnfenced) || lock_delay.is_some(),
            to_validity_end: control == Some(Control::WithoutDriftAllowance),
            kinds,
            shared: profile.shared_keys,
            permits: setup.permits,
            first_ttl_ms: setup.first_ttl_ms,
        };
        let ctx_rng = StdRng::seed_from_u64(draws.random());
        let records = Arc::clone(&records);
        let begins = start + Duration::from_millis(setup.starts_at_ms);
        let client = async move {
            let locks = builder.build().await.map_err(|e| SimError::Client {
                client: c,
                message: e.to_string(),
            })?;
            Ok::<_, SimError>(ClientCtx {
                id: c,
                locks,
                store: StoreConn::new(wire.clone()),
                wire,
                clock,
                rng: ctx_rng,
                start,
                until,
                behaviour,
                records,
            })
        };
        if setup.starts_at_ms == 0 {
            // Built before the next client is set up, as the classic run always did.
            let ctx = client.await?;
            clients.push(tokio::task::spawn_local(async move {
                run_client(ctx).await;
                Ok(())
            }));
        } else {
            // Started mid-run: built then, as a new process would be.
            clients.push(tokio::task::spawn_local(async move {
                tokio::time::sleep_until(begins).await;
                run_client(client.await?).await;
                Ok::<(), SimError>(())
            }));
        }
    }
    tokio::time::sleep_until(until).await;
    let _ = tx.send(Incoming::HealAll);
    for client in clients {
        if let Ok(Err(e)) = client.await {
            return Err(e);
        }
    }
    // Everything settled with every master reachable: no key may stay without a deadline, and
    // once the longest TTL and heartbeat have passed (and the lock-delay after them), none at all.
    let mut leaked = leaks(&tx, false).await;
    tokio::time::sleep(checks::QUIET_BEFORE + lock_delay.unwrap_or_default()).await;
    leaked.extend(leaks(&tx, true).await);

    let records = std::mem::take(&mut *records.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    let mut writes: BTreeMap<String, u64> = BTreeMap::new();
    for key in records.iter().flat_map(|r| r.written.iter()) {
        *writes.entry(key.clone()).or_default() += 1;
    }
    let mut finals = BTreeMap::new();
    let mut store = StoreConn::new(Wire::new(FINAL_READER, tx.clone(), ClientClock::true_rate(start)));
    for key in writes.keys() {
        let value: Option<u64> = store.get(key).await.unwrap_or(None);
        finals.insert(key.clone(), value.unwrap_or(0));
    }
    let simulated = Instant::now().saturating_duration_since(start);
    // Background tasks of the clients may still hold the network; the world stops here.
    world_task.abort();
    drop(tx);

    let WorldLog {
        windows: mut fault_windows,
        by_kind: faults_by_kind,
        effects,
        notes,
    } = log.borrow().clone();
    fault_windows.extend(stalls.iter().map(|s| FaultWindow {
        start: Duration::from_millis(s.at_ms),
        end: Duration::from_millis(s.at_ms.saturating_add(s.ms)),
        label: s.label(),
    }));
    let windows = fault_windows;
    let violations = checks::findings(&records, &windows);
    let lost_updates = checks::lost_updates(&writes, &finals);
    let world = stats.get();
    let mut outcome = SeedOutcome {
        seed: config.seed,
        attempts: records.len() as u64,
        acquisitions: records.iter().filter(|r| r.lock.acquired.is_some()).count() as u64,
        faults: world.faults + stalls.len() as u64,
        commands: world.commands,
        violations,
        lost_updates,
        leaked_keys: leaked
            .iter()
            .map(|k| format!("m{} {}", k.master, k.key))
            .collect(),
        simulated,
        history_hash: String::new(),
        stale_rejected: records.iter().map(|r| u64::from(r.stale)).sum(),
        by_kind: BTreeMap::new(),
        kept_alive: records.iter().filter(|r| r.kept_alive).count() as u64,
        extends: (
            records.iter().filter(|r| r.extended.is_some()).count() as u64,
            records.iter().filter(|r| r.extended == Some(true)).count() as u64,
        ),
        lost_signals: records.iter().filter(|r| r.lost.is_some()).count() as u64,
        operations: (profile.operations, profile.shared_keys),
        faults_by_kind,
        effects,
        notes,
    };
    if !stalls.is_empty() {
        *outcome
            .faults_by_kind
            .entry("client clock stall (out of model)".to_owned())
            .or_default() += stalls.len() as u64;
    }
    let paused = records.iter().filter(|r| r.paused).count() as u64;
    if lock_delay.is_some() && paused > 0 {
        let name = if remove && control == Some(Control::PastLockDelay) {
            PAUSED_PAST_LOCK_DELAY
        } else {
            PAUSED_INSIDE_LOCK_DELAY
        };
        *outcome.faults_by_kind.entry(name.to_owned()).or_default() += paused;
    }
    for r in records.iter().filter(|r| r.lock.acquired.is_some()) {
        *outcome
            .by_kind
            .entry(format!("{:?}", r.kind).to_lowercase())
            .or_default() += 1;
    }
    outcome.history_hash = history_hash(&records, &windows, &finals, &outcome);
    Ok(outcome)
}

/// Keys on the masters that should not be there: without a deadline (or any, with `all`, but for a
/// hand-off queue, which outlives a lost leave by design), other than the fencing counters and the
/// masters' records, which live forever by design.
async fn leaks(tx: &mpsc::UnboundedSender<Incoming>, all: bool) -> Vec<LeftKey> {
    let (reply, rx) = oneshot::channel();
    if tx.send(Incoming::Keys(reply)).is_err() {
        return Vec::new();
    }
    rx.await
        .unwrap_or_default()
        .into_iter()
        .filter(|k| !crate::leaks::permanent(&k.key, "") && !k.key.starts_with(FILLER_PREFIX))
        .filter(|k| all || !k.expires)
        // A hand-off queue whose leave was lost to a fault lives out its QUEUE_LIFE: no leak while
        // it has a deadline (the first scan finds one without).
        .filter(|k| !(all && k.expires && k.key.ends_with(quorlock::config::WAITERS_SUFFIX)))
        .collect()
}

/// SHA-1 of every record, fault and final counter, in the order the run produced them.
fn history_hash(
    records: &[SimRecord],
    faults: &[FaultWindow],
    finals: &BTreeMap<String, u64>,
    outcome: &SeedOutcome,
) -> String {
    let mut text = String::new();
    for f in faults {
        let _ = writeln!(text, "fault {:?} {:?} {}", f.start, f.end, f.label);
    }
    for r in records {
        let _ = writeln!(text, "{}", r.history_line());
    }
    for (key, value) in finals {
        let _ = writeln!(text, "final {key} {value}");
    }
    let _ = writeln!(
        text,
        "commands {} faults {} leaked {:?} simulated {:?}",
        outcome.commands, outcome.faults, outcome.leaked_keys, outcome.simulated
    );
    sha1_smol::Sha1::from(text.as_bytes()).digest().to_string()
}
