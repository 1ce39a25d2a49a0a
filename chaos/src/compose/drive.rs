//! One chaos run whose clients are containers too: the masters of a compose project, one
//! client container per group and a witness container, faults applied on schedule (to the
//! masters through [`Compose`], partitions by disconnecting a group's container from masters'
//! networks), then the heal, the TTL waited out, the leak scan, and the same judgement as every
//! other run ([`verdict::assess`]).
//!
//! It is a driver of its own rather than a mode of `crate::drive` because the clients are not
//! in this process: their history comes back as JSON lines when their containers exit, and
//! network faults are cuts between hosts rather than proxy modes.

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::clients::{ContainerClients, SliceArgs};
use super::project::ComposeProject;
use super::Compose;
use crate::availability::{self, AppliedFault};
use crate::backend::Backend;
use crate::clock::MasterClocks;
use crate::error::HarnessError;
use crate::faults::FaultAction;
use crate::history::RunClock;
use crate::leaks::scan_lock_keys;
use crate::run::{Kind, RunOptions, RunReport};
use crate::scenario::ScheduleParams;
use crate::verdict::{self, Evidence};
use crate::workload::{self, ClientMode, WorkloadOptions, WorkloadStats};

/// The time a client container gets, beyond the run, to finish and report.
pub(crate) const REPORT_GRACE: Duration = Duration::from_secs(60);
/// How far ahead of the containers' start the run's start is set: time for the clients to
/// read it and connect.
pub(crate) const START_LEAD: Duration = Duration::from_millis(1500);

/// Runs `opts.scenario` against `project`'s masters with the clients in containers running
/// `binary` (this program, `quorlock-chaos`).
///
/// # Errors
/// When a fault needs the in-process proxies or clients (latency, blackhole, reset, client
/// pauses), or docker, a container or a master fails.
pub async fn run(
    opts: RunOptions,
    project: &ComposeProject,
    binary: &Path,
) -> Result<RunReport, HarnessError> {
    opts.validate()?;
    if opts.scenario.is_operation() {
        return Err(HarnessError::InvalidOptions(format!(
            "{} is an operation, which compose::operations runs, not a fault schedule",
            opts.scenario.name
        )));
    }
    if opts.kind != Kind::Lock {
        return Err(HarnessError::InvalidOptions(format!(
            "clients in containers run plain locks only, not the {} kind; run it without clients in containers",
            opts.kind.name()
        )));
    }
    let mut compose = project.compose()?;
    let masters = compose.len();
    let scenario = opts.scenario;
    let schedule = scenario.schedule(&ScheduleParams {
        seed: opts.seed,
        duration: opts.duration,
        masters,
        ttl: opts.ttl,
        clients: opts.clients,
    });
    if let Some(f) = schedule.iter().find(|f| {
        matches!(
            f.action,
            FaultAction::Latency(..)
                | FaultAction::Blackhole(_)
                | FaultAction::Reset(_)
                | FaultAction::PauseClient(..)
        )
    }) {
        return Err(HarnessError::InvalidOptions(format!(
            "scenario {} needs `{}`, which only in-process clients (behind the harness's proxies) can have; \
             run it without clients in containers",
            scenario.name, f.action
        )));
    }
    let groups = scenario.groups();
    if opts.clients < groups {
        return Err(HarnessError::InvalidOptions(format!(
            "scenario {} has {groups} client groups, so it needs at least {groups} clients, got {}",
            scenario.name, opts.clients
        )));
    }
    let common = client_args(&opts, &compose);
    let mut clients =
        ContainerClients::create(&compose, project.run_id(), binary, &SliceArgs { common }, groups).await?;
    workload::reset_witness(clients.witness_host_url(), opts.resources).await?;

    // The run's zero is the wall-clock instant handed to the containers once they run.
    let start = clients.start(START_LEAD).await?;
    let ahead = start.duration_since(SystemTime::now()).unwrap_or_default();
    let clock = RunClock::starting_at(std::time::Instant::now() + ahead);

    let mut clocks = MasterClocks::emulated();
    let mut applied = Vec::with_capacity(schedule.len());
    for fault in schedule.iter().filter(|f| f.at < opts.duration) {
        tokio::time::sleep_until(tokio::time::Instant::from_std(clock.start() + fault.at)).await;
        applied.push(apply(&fault.action, &mut compose, &mut clients, &mut clocks, clock).await?);
    }
    let outputs = tokio::time::timeout(opts.duration + REPORT_GRACE, clients.collect())
        .await
        .map_err(|_| {
            HarnessError::Workload(format!(
                "the client containers did not finish within {:?} of the run's start",
                opts.duration + REPORT_GRACE
            ))
        })??;
    let mut records = Vec::new();
    let mut stats = WorkloadStats::default();
    for out in outputs {
        records.extend(out.records);
        stats = add(stats, out.stats);
    }
    records.sort_by_key(|r| r.invoked);
    let run_end = records
        .iter()
        .filter_map(|r| r.released.or(r.acquired).or(Some(r.invoked)))
        .max()
        .unwrap_or_default()
        .max(clock.now().min(opts.duration));

    heal_everything(&mut compose, &mut clients, &mut clocks, clock, &mut applied).await?;
    let healed = clock.now();
    let settle = healed + opts.ttl + opts.ttl / 2;
    tokio::time::sleep_until(tokio::time::Instant::from_std(clock.start() + settle)).await;
    let mut notes = vec![format!(
        "clients ran in {groups} container(s) of their own, one per group; partitions disconnected them from the masters' networks"
    )];
    let key_prefix = WorkloadOptions::new(opts.clients, opts.ttl, opts.seed).key_prefix;
    let observations = scan_lock_keys(&compose.urls(), &key_prefix, clock, &mut notes).await;
    let witness_total = workload::witness_total(clients.witness_host_url(), opts.resources).await?;
    if schedule
        .iter()
        .any(|f| matches!(f.action, FaultAction::ClockJump(..)))
    {
        notes.push("clock jumps are emulated by shifting TTLs on the compose backend".into());
    }
    Ok(verdict::assess(Evidence {
        backend: "compose",
        masters,
        options: opts,
        run_end,
        healed,
        records,
        reads: Vec::new(),
        applied,
        stats,
        witness_total,
        observations,
        notes,
    }))
}

/// The arguments every client container's `quorlock-chaos client` gets besides its group: the
/// workload's shape, the witness, the clients' mode and the masters by their service names (which
/// the containers resolve on the masters' networks).
pub(crate) fn client_args(opts: &RunOptions, compose: &Compose) -> Vec<String> {
    let mut common = vec![
        format!("--clients={}", opts.clients),
        format!("--resources={}", opts.resources),
        format!("--ttl={}ms", opts.ttl.as_millis()),
        format!("--seed={}", opts.seed),
        format!("--duration={}ms", opts.duration.as_millis()),
        format!("--witness={}", WITNESS_IN_CONTAINERS),
    ];
    match opts.mode {
        ClientMode::Safe => {}
        mode => common.push(format!("--unsafe={}", mode.name())),
    }
    common.push(format!("--nodes={}", node_urls(compose).join(",")));
    common
}

/// The witness as containers of the run reach it.
pub(crate) const WITNESS_IN_CONTAINERS: &str = "redis://witness:6379";

/// Every master's URL as containers reach it: by its service name, on its network.
pub(crate) fn node_urls(compose: &Compose) -> Vec<String> {
    let o = compose.options();
    o.services.iter().map(|s| o.credentials.url(s, 6379)).collect()
}

/// The totals of two sets of clients.
pub(crate) fn add(a: WorkloadStats, b: WorkloadStats) -> WorkloadStats {
    WorkloadStats {
        increments: a.increments + b.increments,
        late_writes: a.late_writes + b.late_writes,
        skipped: a.skipped + b.skipped,
        acquire_failures: a.acquire_failures + b.acquire_failures,
        release_failures: a.release_failures + b.release_failures,
        witness_errors: a.witness_errors + b.witness_errors,
    }
}

async fn apply(
    action: &FaultAction,
    compose: &mut Compose,
    clients: &mut ContainerClients,
    clocks: &mut MasterClocks,
    clock: RunClock,
) -> Result<AppliedFault, HarnessError> {
    let started = clock.now();
    match action {
        FaultAction::Kill(m) => Compose::kill(compose, *m).await?,
        FaultAction::Pause(m) => Compose::pause(compose, *m).await?,
        FaultAction::Resume(m) => Compose::resume(compose, *m).await?,
        FaultAction::Restart(m, data) => Compose::restart(compose, *m, *data).await?,
        FaultAction::Partition { group, masters } => clients.partition(*group, masters).await?,
        FaultAction::HealNetwork => clients.heal().await?,
        FaultAction::ClockJump(m, forward) => clocks.jump(*m, &compose.url(*m), *forward).await?,
        other => {
            return Err(HarnessError::InvalidOptions(format!(
                "`{other}` cannot be applied with clients in containers"
            )))
        }
    }
    Ok(AppliedFault {
        started,
        finished: clock.now(),
        action: action.clone(),
    })
}

/// Applies the actions that heal whatever the run left broken ([`availability::heal_actions`]):
/// resumes paused masters, restarts killed ones keeping their data, and reconnects cut client
/// groups.
async fn heal_everything(
    compose: &mut Compose,
    clients: &mut ContainerClients,
    clocks: &mut MasterClocks,
    clock: RunClock,
    applied: &mut Vec<AppliedFault>,
) -> Result<(), HarnessError> {
    for action in availability::heal_actions(applied) {
        let done = apply(&action, compose, clients, clocks, clock).await?;
        applied.push(done);
    }
    Ok(())
}
