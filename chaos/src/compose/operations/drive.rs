//! One operation run end to end: the project's masters (and the replica, for a failover), the
//! background clients in a container of their own with quorlock's defaults, contending for the
//! run's resources the whole run; then, a fifth of the way in, the probes on the board with the
//! operation's steps between theirs; the leak scan; the same judgement as every run
//! ([`verdict::assess`]), and for a control, whether its own check caught it ([`control::judge`]).
//!
//! The sequence, for every operation:
//!
//! 1. before the first probe: the failover cuts the replica off (its copy lags from here); the
//!    downgrade waits until master 0 has been up longer than the probes' grace (else the first
//!    probe keeps it out as a master that started within the grace without `appendfsync always`,
//!    and the crash has nothing to take), then lowers master 0's fsync;
//! 2. the first probe is built on a host that reaches masters `0..quorum` only, and says so; the
//!    downgrade checks that its client's check recorded the downgrade on master 0, then switches
//!    master 0's AOF off; the harness says go, and the first probe acquires, through master 0
//!    and the others it reaches, and says whether it holds;
//! 3. the operation: master 0 killed and its replica promoted under its name, or master 0
//!    killed and restarted without the writes since, or master 0 filled until it evicted the
//!    first probe's key; each checked to have lost that key;
//! 4. the second probe is built on a host that reaches every master, and tries.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::super::clients::{ContainerClients, SliceArgs};
use super::super::drive::{add, client_args, REPORT_GRACE, START_LEAD};
use super::super::project::ComposeProject;
use super::super::wire::ClientOutput;
use super::board::{self, Board};
use super::containers::{ProbeContainer, ProbeSpec};
use super::control::{self, Control};
use super::failover::Failover;
use super::probe::{Role, PATIENCE};
use super::{downgrade, eviction};
use crate::availability::{self, AppliedFault};
use crate::backend::Backend;
use crate::checker::{self, KeyObservation};
use crate::cluster::DataMode;
use crate::error::HarnessError;
use crate::faults::FaultAction;
use crate::history::{FaultWindow, LockRecord, RunClock};
use crate::leaks::scan_lock_keys;
use crate::run::{Kind, RunOptions, RunReport};
use crate::scenario::ScenarioKind;
use crate::verdict::{self, Evidence};
use crate::workload::{self, ClientMode, WorkloadOptions, WorkloadStats};

/// The probes' lock TTL: long enough to outlast any operation here with room to spare (a
/// failover takes about a second on an idle engine, a filler run two), so that the second probe
/// always tries while the first one's lock is valid. The probes release as soon as they are done,
/// so it does not lengthen a run.
pub const PROBE_TTL: Duration = Duration::from_secs(10);

/// Which part of the run the background clients run before the probes start.
const PROBES_AT: f64 = 0.2;

/// What an operation prepared before the clients started.
enum Prepared {
    Failover(Failover),
    Downgrade,
    Eviction,
}

/// Runs operation `opts.scenario` against `project`'s masters, with the background clients and
/// the probes in containers running `binary` (this program); with `control`, the probes switch
/// its rule off and the run must be caught by its own check.
///
/// # Errors
/// When the scenario is not an operation, the control is another operation's, the options ask
/// for what an operation does not run (another kind, an unsafe client mode, fewer than three
/// masters), or docker, a container or a master fails, or an operation could not lose the key it
/// must (the counterexample could not be built, which the run must not pass off as a pass).
pub async fn run(
    opts: RunOptions,
    control: Option<Control>,
    project: &ComposeProject,
    binary: &Path,
) -> Result<RunReport, HarnessError> {
    opts.validate()?;
    let kind = opts.scenario.kind;
    check(&opts, control)?;
    let compose = project.compose()?;
    let masters = compose.len();
    if masters < 3 {
        return Err(HarnessError::InvalidOptions(format!(
            "an operation needs at least 3 masters (a majority that is not all of them), the project has {masters}"
        )));
    }
    let quorum = masters / 2 + 1;
    let mut notes = vec![format!(
        "background clients ({}, {}) ran in a container of their own; the probes (clients {} and {}{}) in one each",
        opts.clients,
        match control.and_then(Control::everywhere) {
            Some(m) => format!("without the rule too: {}", control::mechanism_name(m)),
            None => "quorlock's defaults".to_string(),
        },
        opts.clients,
        opts.clients + 1,
        match control {
            Some(c) => format!(", UNSAFE {}: {}", c.name(), c.switch()),
            None => ", quorlock's defaults".to_string(),
        }
    )];
    let prepared = match kind {
        ScenarioKind::Failover => Prepared::Failover(Failover::prepare(&compose).await?),
        ScenarioKind::RuntimeDowngrade => Prepared::Downgrade,
        ScenarioKind::Eviction => {
            notes.push(eviction::prepare(&compose).await?);
            Prepared::Eviction
        }
        _ => {
            return Err(HarnessError::InvalidOptions(format!(
                "{} is not an operation",
                opts.scenario.name
            )))
        }
    };

    let mut common = client_args(&opts, &compose);
    if let Some(mechanism) = control.and_then(Control::everywhere) {
        common.push(format!("--without={}", control::mechanism_name(mechanism)));
    }
    let clients =
        ContainerClients::create(&compose, project.run_id(), binary, &SliceArgs { common }, 1).await?;
    workload::reset_witness(clients.witness_host_url(), opts.resources).await?;
    let board = Board::connect(clients.witness_host_url()).await?;
    board.clear().await?;
    let start = clients.start(START_LEAD).await?;
    let ahead = start.duration_since(SystemTime::now()).unwrap_or_default();
    let clock = RunClock::starting_at(std::time::Instant::now() + ahead);
    let start_ms = start.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
    let key_prefix = WorkloadOptions::new(opts.clients, opts.ttl, opts.seed).key_prefix;
    let key = format!("{key_prefix}{}", board::RESOURCE);
    let spec = |role: Role, reaches: Vec<usize>, client: usize| ProbeSpec {
        role,
        reaches,
        client,
        ttl: PROBE_TTL,
        first_try: opts.ttl,
        node_timeout: opts.ttl / 4,
        key_prefix: key_prefix.clone(),
        start_ms,
        control,
    };
    let step = |notes: &mut Vec<String>, what: String| {
        notes.push(format!("at {:.3}s: {what}", clock.now().as_secs_f64()))
    };

    tokio::time::sleep_until(tokio::time::Instant::from_std(
        clock.start() + opts.duration.mul_f64(PROBES_AT),
    ))
    .await;
    let degraded = clock.now();
    match &prepared {
        Prepared::Failover(failover) => step(&mut notes, failover.lag(&compose).await?),
        Prepared::Downgrade => {
            step(&mut notes, downgrade::up_past(&compose, PROBE_TTL).await?);
            step(&mut notes, downgrade::lower_fsync(&compose).await?);
        }
        Prepared::Eviction => {}
    }
    let first = ProbeContainer::start(
        &compose,
        &clients,
        project.run_id(),
        binary,
        &spec(Role::First, (0..quorum).collect(), opts.clients),
    )
    .await?;
    board
        .wait(board::BUILT, PATIENCE)
        .await
        .ok_or_else(|| HarnessError::Workload("the first probe did not come up".into()))?;
    if let Prepared::Downgrade = prepared {
        step(&mut notes, downgrade::recorded(&compose, &key_prefix).await?);
        step(&mut notes, downgrade::aof_off(&compose).await?);
    }
    board.set(board::GO, "1").await?;
    let held = match board.wait(board::HELD, PATIENCE).await.as_deref() {
        Some("1") => true,
        Some(_) => false,
        None => {
            return Err(HarnessError::Workload(
                "the first probe never said whether it holds".into(),
            ))
        }
    };
    let mut applied = Vec::new();
    let operated = clock.now();
    let (what, label) = match &prepared {
        Prepared::Failover(failover) => {
            let done = failover.strike(&compose, &key, held).await?;
            applied.push(AppliedFault {
                started: operated,
                finished: clock.now(),
                action: FaultAction::Kill(0),
            });
            (done, "failover: m0 killed, its replica promoted under its name")
        }
        Prepared::Downgrade => {
            let done = downgrade::crash(&compose, &key, held).await?;
            applied.push(AppliedFault {
                started: operated,
                finished: clock.now(),
                action: FaultAction::Restart(0, DataMode::Keep),
            });
            (done, "m0 persistence lowered, then killed and restarted")
        }
        Prepared::Eviction => (
            eviction::fill(&compose, &key, held).await?,
            "m0 filled past its maxmemory",
        ),
    };
    step(&mut notes, what);
    let mut windows = vec![FaultWindow {
        start: if matches!(prepared, Prepared::Downgrade) {
            degraded
        } else {
            operated
        },
        end: clock.now(),
        label: label.into(),
    }];
    let second = ProbeContainer::start(
        &compose,
        &clients,
        project.run_id(),
        binary,
        &spec(Role::Second, (0..masters).collect(), opts.clients + 1),
    )
    .await?;

    let patience = opts.duration + REPORT_GRACE;
    let probes = async {
        let a = first.collect(&compose).await?;
        let b = second.collect(&compose).await?;
        Ok::<_, HarnessError>([a, b])
    };
    let probes = tokio::time::timeout(patience, probes)
        .await
        .map_err(|_| HarnessError::Workload(format!("the probes did not finish within {patience:?}")))??;
    let background = tokio::time::timeout(patience, clients.collect())
        .await
        .map_err(|_| {
            HarnessError::Workload(format!(
                "the client containers did not finish within {patience:?}"
            ))
        })??;
    let mut records = Vec::new();
    let mut stats = WorkloadStats::default();
    for out in background.into_iter().chain(probes) {
        let ClientOutput {
            records: mine,
            stats: theirs,
            notes: said,
        } = out;
        records.extend(mine);
        stats = add(stats, theirs);
        notes.extend(said);
    }
    records.sort_by_key(|r| r.invoked);
    let run_end = records
        .iter()
        .filter_map(|r| r.released.or(r.acquired).or(Some(r.invoked)))
        .max()
        .unwrap_or_default()
        .max(clock.now().min(opts.duration));
    let healed = clock.now();
    let settle = healed + opts.ttl + opts.ttl / 2;
    tokio::time::sleep_until(tokio::time::Instant::from_std(clock.start() + settle)).await;
    let mut urls = compose.urls();
    if let Prepared::Failover(failover) = &prepared {
        // The name m0 now reaches the promoted replica; the old master is gone.
        urls[0] = failover.url(&compose).await?;
    }
    let observations = scan_lock_keys(&urls, &key_prefix, clock, &mut notes).await;
    let observations = judge_probe_keys(observations, &records, &key, &mut notes);
    let witness_total =
        workload::witness_total(clients.witness_host_url(), opts.resources).await? + board.counter().await?;
    let mut report = verdict::assess(Evidence {
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
    });
    // The operation's own window, on the timeline and in the count of acquisitions under faults.
    let mut spans = availability::fault_spans(&report.applied, report.run_end);
    spans.append(&mut windows.clone());
    report.acquisitions_under_faults = checker::acquisitions_during(&report.records, &spans, report.run_end);
    report.fault_windows.append(&mut windows);
    if let Some(control) = control {
        control::judge(&mut report, control);
    }
    Ok(report)
}

/// Refuses what an operation run cannot do, naming it.
fn check(opts: &RunOptions, control: Option<Control>) -> Result<(), HarnessError> {
    let scenario = opts.scenario;
    if !scenario.is_operation() {
        return Err(HarnessError::InvalidOptions(format!(
            "{} is a fault schedule, not an operation; run it with compose::drive",
            scenario.name
        )));
    }
    if opts.kind != Kind::Lock {
        return Err(HarnessError::InvalidOptions(format!(
            "operations run plain locks only, not the {} kind",
            opts.kind.name()
        )));
    }
    if opts.mode != ClientMode::Safe {
        return Err(HarnessError::InvalidOptions(format!(
            "operations take their own controls, not the {} clients",
            opts.mode.name()
        )));
    }
    if let Some(c) = control.filter(|c| c.operation() != scenario.kind) {
        let own = Control::ALL
            .iter()
            .find(|o| o.operation() == scenario.kind)
            .map_or("none", |o| o.name());
        return Err(HarnessError::InvalidOptions(format!(
            "{} removes another operation's protection; {}'s control is {own}",
            c.name(),
            scenario.name
        )));
    }
    Ok(())
}

/// Keeps the observations of the probes' key out of the leak check while its own TTL
/// ([`PROBE_TTL`]) since the probes' last acquisition has not passed: the check allows the run's
/// TTL, which is shorter; a note says so for each one kept out.
fn judge_probe_keys(
    observations: Vec<KeyObservation>,
    records: &[LockRecord],
    key: &str,
    notes: &mut Vec<String>,
) -> Vec<KeyObservation> {
    let last = records
        .iter()
        .filter(|r| r.resource == board::RESOURCE)
        .filter_map(|r| r.acquired)
        .max();
    observations
        .into_iter()
        .filter(|o| {
            let within = o.key == key
                && o.pttl_ms >= 0
                && last.is_some_and(|at| o.observed_at <= at + PROBE_TTL);
            if within {
                notes.push(format!(
                    "the probes' key is still on m{} with {} ms left of its own TTL ({PROBE_TTL:?}): not judged as a leak yet",
                    o.master, o.pttl_ms
                ));
            }
            !within
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario;

    fn options(name: &str) -> RunOptions {
        RunOptions::new(*scenario::find(name).unwrap())
    }

    #[test]
    fn only_operations_with_their_own_controls_run() {
        assert!(check(&options("failover"), None).is_ok());
        assert!(check(&options("failover"), Some(Control::CountReplacedMasters)).is_ok());
        let err = check(&options("failover"), Some(Control::CountEvictingMasters))
            .unwrap_err()
            .to_string();
        assert!(err.contains("count-replaced-masters"), "{err}");
        assert!(check(&options("partition"), None).is_err());
        let mut semaphore = options("eviction");
        semaphore.kind = Kind::Semaphore(2);
        assert!(check(&semaphore, None).is_err());
        let mut unsafe_clients = options("runtime-downgrade");
        unsafe_clients.mode = ClientMode::SingleMaster;
        assert!(check(&unsafe_clients, None).is_err());
    }

    #[test]
    fn the_probes_key_is_judged_only_after_its_own_ttl() {
        let key = "quorlock-chaos:probe";
        let mut held = LockRecord::invoked(16, board::RESOURCE, Duration::from_secs(1));
        held.acquired = Some(Duration::from_secs(1));
        let seen = |key: &str, at: u64, pttl_ms: i64| KeyObservation {
            master: 1,
            key: key.into(),
            pttl_ms,
            observed_at: Duration::from_secs(at),
        };
        let mut notes = Vec::new();
        let kept = judge_probe_keys(
            vec![
                seen(key, 5, 6_000),
                seen(key, 5, -1),
                seen(key, 12, 100),
                seen("quorlock-chaos:r0", 5, 100),
            ],
            &[held],
            key,
            &mut notes,
        );
        assert_eq!(kept.len(), 3, "{kept:?}");
        assert!(kept.iter().all(|o| o.pttl_ms != 6_000));
        assert_eq!(notes.len(), 1, "{notes:?}");
    }
}
