//! Driving one chaos run: start the masters (process or compose backend), a witness and the
//! proxies, run the workload while the scenario's faults are injected on schedule, heal
//! everything, wait out the TTL and look for leaked keys, then hand what was collected to
//! `verdict`.
//!
//! This is the only layer of a run that does IO and keeps time; what it collects is plain
//! [`Evidence`], so the judgement can be tested without any of it.

use std::net::SocketAddr;
use std::time::Duration;

use crate::availability::{self, AppliedFault};
use crate::backend::Backend;
use crate::clock::MasterClocks;
use crate::cluster::{Cluster, ClusterOptions};
use crate::compose::Compose;
use crate::credentials::Credentials;
use crate::error::HarnessError;
use crate::faketime::{self, FakeClock};
use crate::faults::{self, ClientPauses, FaultAction, FaultTargets, ScheduledFault};
use crate::history::{History, LockRecord, RunClock};
use crate::kinds_workload::{self, KindsHistory, KindsMode, KindsOptions};
use crate::leaks::scan_lock_keys;
use crate::opening::{self, Opening};
use crate::proxy::ProxyGroup;
use crate::run::{BackendChoice, Kind, RunOptions, RunReport};
use crate::scenario::{ScenarioKind, ScheduleParams};
use crate::server::redis_server_path;
use crate::verdict::{self, Evidence};
use crate::workload::{self, ClientMode, WorkloadOptions, WorkloadStats};

/// Every how many acquires of a read-write lock client is a write (the rest are reads).
pub const WRITE_EVERY: usize = 3;

/// A snapshot of a run in progress, for a live progress line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Time since the run started.
    pub elapsed: Duration,
    /// How long clients run.
    pub duration: Duration,
    /// Lock attempts finished so far.
    pub attempts: usize,
    /// Of those, successful acquisitions.
    pub acquisitions: usize,
    /// Faults applied so far.
    pub faults: usize,
}

/// How often [`run_with_progress`] reports.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// Masters plus what the run needs to reach them.
struct Masters {
    backend: Box<dyn Backend>,
    targets: Vec<SocketAddr>,
    credentials: Credentials,
    clocks: MasterClocks,
}

/// Runs one scenario end to end.
///
/// # Errors
/// When the options are invalid, or the masters, witness, proxies or clients cannot be
/// started, or a fault cannot be injected.
pub async fn run(opts: RunOptions) -> Result<RunReport, HarnessError> {
    run_with_progress(opts, |_| {}).await
}

/// Runs one scenario end to end, calling `on_progress` every [`PROGRESS_INTERVAL`] while
/// the clients run.
///
/// # Errors
/// As [`run`].
pub async fn run_with_progress(
    opts: RunOptions,
    mut on_progress: impl FnMut(Progress) + Send,
) -> Result<RunReport, HarnessError> {
    opts.validate()?;
    let scenario = opts.scenario;
    let masters = match &opts.backend {
        BackendChoice::Process => opts.masters,
        BackendChoice::Compose(c) => c.services.len(),
    };
    let params = ScheduleParams {
        seed: opts.seed,
        duration: opts.duration,
        masters,
        ttl: opts.ttl,
        clients: opts.clients,
    };
    let schedule = scenario.schedule(&params);
    let mut notes = Vec::new();
    let mut m = start_masters(&opts, &schedule, &mut notes).await?;

    // The witness must never be faulted: its own process, or a URL given by the user. The
    // other kinds' workload has none.
    let local_witness;
    let witness_url = match (&opts.witness_url, opts.kind) {
        (_, Kind::Semaphore(_) | Kind::RwLock) => None,
        (Some(url), Kind::Lock) => Some(url.clone()),
        (None, Kind::Lock) => {
            local_witness = Cluster::start(1).await?;
            Some(local_witness.url(0))
        }
    };
    if let Some(url) = &witness_url {
        workload::reset_witness(url, opts.resources).await?;
    }

    let groups = scenario.groups();
    let proxies = ProxyGroup::start_for(&m.targets, groups, m.credentials.clone()).await?;
    let group_urls: Vec<Vec<String>> = (0..groups).map(|g| proxies.urls(g)).collect();

    let wopts = WorkloadOptions::new(opts.clients, opts.ttl, opts.seed);
    let wopts = WorkloadOptions {
        resources: opts.resources,
        ..wopts
    }
    .with_mode(opts.mode);
    let history = History::new(RunClock::new());
    let pauses = ClientPauses::new();
    let clock = history.clock();
    let kinds_history = KindsHistory {
        holds: history.clone(),
        reads: History::new(clock),
    };

    let injected = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let opening = kinds_opening(&opts, &schedule, std::sync::Arc::clone(&injected), &mut notes);
    let played = opening.is_some();
    let clients = async {
        match (kinds_mode(&opts), &witness_url) {
            (Some(mode), _) => {
                let kopts = KindsOptions {
                    opening,
                    ..kinds_options(&wopts, mode)
                };
                let urls = &group_urls;
                kinds_workload::run_with_pauses(&kopts, urls, &kinds_history, &pauses, opts.duration).await?;
                Ok(WorkloadStats::default())
            }
            (None, Some(witness)) => {
                workload::run(&wopts, &group_urls, witness, &history, &pauses, opts.duration).await
            }
            (None, None) => Err(HarnessError::Workload("a lock run needs a witness".into())),
        }
    };
    let injector = inject(
        &schedule,
        &mut m,
        &proxies,
        &pauses,
        clock,
        opts.duration,
        &injected,
    );
    let mut tick = tokio::time::interval(PROGRESS_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    // Scoped so that the workload's borrow of the masters ends before the heal.
    let (stats, applied) = {
        let work = async { tokio::join!(clients, injector) };
        tokio::pin!(work);
        loop {
            tokio::select! {
                done = &mut work => break done,
                _ = tick.tick() => {
                    let (attempts, acquisitions) = history.counts();
                    let (reads, read) = kinds_history.reads.counts();
                    let (attempts, acquisitions) = (attempts + reads, acquisitions + read);
                    on_progress(Progress {
                        elapsed: clock.now(),
                        duration: opts.duration,
                        attempts,
                        acquisitions,
                        faults: injected.load(std::sync::atomic::Ordering::Relaxed),
                    });
                }
            }
        }
    };
    let run_end = clock.now();
    let mut applied = applied?;
    let stats = stats?;

    heal_everything(&mut m, &proxies, &pauses, clock, &mut applied).await?;
    // A request held by a paused master or a slow proxy can still land until the heal.
    let healed = clock.now();

    // Wait out the TTL (the opening round's longer one, if it was played), then every lock key
    // left is a leak.
    let longest = if played {
        opts.ttl * opening::TTL_FACTOR
    } else {
        opts.ttl
    };
    let settle = healed + longest + opts.ttl / 2;
    tokio::time::sleep_until(tokio::time::Instant::from_std(clock.start() + settle)).await;
    let observations = scan_lock_keys(&m.backend.urls(), &wopts.key_prefix, clock, &mut notes).await;
    let actual = match &witness_url {
        Some(url) => workload::witness_total(url, opts.resources).await?,
        None => 0,
    };
    let records = history.records();
    let reads = kinds_history.reads.records();
    let stats = match opts.kind {
        Kind::Lock => stats,
        Kind::Semaphore(_) | Kind::RwLock => kinds_stats(records.iter().chain(&reads)),
    };
    if opts.kind != Kind::Lock {
        notes.push(format!(
            "the {} clients contend on one resource ({}); --resources only applies to plain locks",
            opts.kind.name(),
            workload::resource_name(0)
        ));
    }

    let report = verdict::assess(Evidence {
        backend: m.backend.name(),
        masters,
        options: opts,
        run_end,
        healed,
        records,
        reads,
        applied,
        stats,
        witness_total: actual,
        observations,
        notes,
    });
    // The history keeps the fault windows next to the records, as the report does.
    for window in &report.fault_windows {
        history.push_fault(window.clone());
    }
    Ok(report)
}

/// The opening round of a semaphore run under `split-majorities`: once every group is cut off
/// from its master, the first clients take a permit in turn and keep it until all have tried.
/// With three masters and two permits, majority counting then holds three permits at once
/// every time (client 0 counts on masters 1 and 2, client 1 on 0 and 2, client 2 on 0 and 1),
/// where quorlock's semaphore holds two: the control's counterexample, and its safe twin, built
/// rather than raced for.
fn kinds_opening(
    opts: &RunOptions,
    schedule: &[ScheduledFault],
    injected: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    notes: &mut Vec<String>,
) -> Option<Opening> {
    let split = opts.scenario.kind == ScenarioKind::SplitMajorities;
    if opts.mode == ClientMode::MajorityCounting && !(split && opts.masters == 3) {
        notes.push(
            "the majority-counting control is certain only under split-majorities with 3 masters; here it races"
                .into(),
        );
    }
    if !split || !matches!(opts.kind, Kind::Semaphore(_)) {
        return None;
    }
    // The cut: every fault scheduled at the first fault's time.
    let first = schedule.first()?.at;
    let cut = schedule.iter().take_while(|f| f.at == first).count();
    Some(Opening::local(opening::PLAYERS.min(opts.clients), injected, cut))
}

/// What the kinds' clients take, or `None` for plain locks.
fn kinds_mode(opts: &RunOptions) -> Option<KindsMode> {
    match (opts.kind, opts.mode) {
        (Kind::Lock, _) => None,
        (Kind::Semaphore(p), ClientMode::MajorityCounting) => Some(KindsMode::MajorityCounting(p)),
        (Kind::Semaphore(p), _) => Some(KindsMode::Semaphore(p)),
        (Kind::RwLock, _) => Some(KindsMode::ReadWrite(WRITE_EVERY)),
    }
}

/// The kinds' clients, with the plain lock workload's TTL, holds, timeouts, seed and key prefix,
/// on one resource.
fn kinds_options(w: &WorkloadOptions, mode: KindsMode) -> KindsOptions {
    KindsOptions {
        clients: w.clients,
        resource: workload::resource_name(0),
        ttl: w.ttl,
        hold: w.hold,
        node_timeout: w.node_timeout,
        seed: w.seed,
        mode,
        key_prefix: w.key_prefix.clone(),
        opening: None,
    }
}

/// The kinds' totals from their records: failed acquisitions and failed releases (they have no
/// witness, so no increments).
fn kinds_stats<'a>(records: impl Iterator<Item = &'a LockRecord>) -> WorkloadStats {
    let mut stats = WorkloadStats::default();
    for r in records {
        match (&r.acquired, &r.error) {
            (None, _) => stats.acquire_failures += 1,
            (Some(_), Some(e)) if e.starts_with("release") => stats.release_failures += 1,
            _ => {}
        }
    }
    stats
}

async fn start_masters(
    opts: &RunOptions,
    schedule: &[ScheduledFault],
    notes: &mut Vec<String>,
) -> Result<Masters, HarnessError> {
    match &opts.backend {
        BackendChoice::Process => {
            let jumped = schedule.iter().find_map(|f| match f.action {
                FaultAction::ClockJump(m, _) => Some(m),
                _ => None,
            });
            let mut env = Vec::new();
            let mut clocks = MasterClocks::emulated();
            if let Some(m) = jumped {
                match usable_fake_clock().await {
                    Ok(clock) => {
                        env = vec![Vec::new(); m + 1];
                        env[m] = clock.env();
                        clocks = clocks.with_fake_clock(m, clock);
                        notes.push(format!("clock jumps on m{m} use libfaketime"));
                    }
                    Err(e) => notes.push(format!(
                        "{e}; clock jumps on m{m} are emulated by shifting its keys' TTLs"
                    )),
                }
            }
            let cluster_opts = ClusterOptions {
                masters: opts.masters,
                ..ClusterOptions::default()
            };
            let cluster = Cluster::start_with_env(cluster_opts, env).await?;
            let targets = (0..cluster.len())
                .map(|i| SocketAddr::from(([127, 0, 0, 1], cluster.port(i))))
                .collect();
            let credentials = cluster.options().credentials();
            Ok(Masters {
                backend: Box::new(cluster),
                targets,
                credentials,
                clocks,
            })
        }
        BackendChoice::Compose(c) => {
            let compose = Compose::new(c.as_ref().clone())?;
            let mut targets = Vec::with_capacity(c.ports.len());
            for port in &c.ports {
                let found = tokio::net::lookup_host((c.host.as_str(), *port))
                    .await
                    .map_err(|e| HarnessError::io(format!("resolving {}:{port}", c.host), e))?
                    .next();
                match found {
                    Some(addr) => targets.push(addr),
                    None => {
                        return Err(HarnessError::InvalidOptions(format!(
                            "{}:{port} resolves to no address",
                            c.host
                        )))
                    }
                }
            }
            if schedule
                .iter()
                .any(|f| matches!(f.action, FaultAction::ClockJump(..)))
            {
                notes.push("clock jumps are emulated by shifting TTLs on the compose backend".into());
            }
            Ok(Masters {
                backend: Box::new(compose),
                targets,
                credentials: c.credentials.clone(),
                clocks: MasterClocks::emulated(),
            })
        }
    }
}

async fn usable_fake_clock() -> Result<FakeClock, HarnessError> {
    let clock = FakeClock::new()?;
    faketime::probe(&redis_server_path()?, &clock).await?;
    Ok(clock)
}

/// Applies the schedule's faults on time until `until`; later ones are left to the heal.
async fn inject(
    schedule: &[ScheduledFault],
    m: &mut Masters,
    proxies: &ProxyGroup,
    pauses: &ClientPauses,
    clock: RunClock,
    until: Duration,
    injected: &std::sync::atomic::AtomicUsize,
) -> Result<Vec<AppliedFault>, HarnessError> {
    let mut applied = Vec::with_capacity(schedule.len());
    for fault in schedule.iter().filter(|f| f.at < until) {
        tokio::time::sleep_until(tokio::time::Instant::from_std(clock.start() + fault.at)).await;
        applied.push(apply_now(&fault.action, m, proxies, pauses, clock).await?);
        injected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    Ok(applied)
}

async fn apply_now(
    action: &FaultAction,
    m: &mut Masters,
    proxies: &ProxyGroup,
    pauses: &ClientPauses,
    clock: RunClock,
) -> Result<AppliedFault, HarnessError> {
    let started = clock.now();
    let mut targets = FaultTargets {
        backend: m.backend.as_mut(),
        proxies: Some(proxies),
        clocks: &mut m.clocks,
        clients: pauses,
    };
    faults::apply(action, &mut targets).await?;
    Ok(AppliedFault {
        started,
        finished: clock.now(),
        action: action.clone(),
    })
}

/// Applies the actions that heal whatever the run left broken ([`availability::heal_actions`]).
async fn heal_everything(
    m: &mut Masters,
    proxies: &ProxyGroup,
    pauses: &ClientPauses,
    clock: RunClock,
    applied: &mut Vec<AppliedFault>,
) -> Result<(), HarnessError> {
    for action in availability::heal_actions(applied) {
        let done = apply_now(&action, m, proxies, pauses, clock).await?;
        applied.push(done);
    }
    Ok(())
}
