//! One chaos run end to end: start the masters (process or compose backend), a witness and
//! the proxies, run the workload while the scenario's faults are injected on schedule, heal
//! everything, look for leaked keys, then hand the history to the checker and decide a
//! verdict. The report renders as text, JSON or an SVG timeline.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::time::Duration;

use redis::AsyncCommands;

use crate::availability::{self, AppliedFault};
use crate::backend::Backend;
use crate::checker::{self, KeyObservation, Liveness, LostUpdates, Overlap};
use crate::clock::MasterClocks;
use crate::cluster::{Cluster, ClusterOptions};
use crate::compose::{Compose, ComposeOptions};
use crate::credentials::Credentials;
use crate::error::HarnessError;
use crate::faketime::{self, FakeClock};
use crate::faults::{self, ClientPauses, FaultAction, FaultTargets, ScheduledFault};
use crate::history::{FaultWindow, History, LockRecord, RunClock};
use crate::json::Json;
use crate::proxy::ProxyGroup;
use crate::scenario::{Scenario, ScheduleParams};
use crate::server::{connect, redis_server_path};
use crate::svg::{self, SvgOptions};
use crate::workload::{self, ClientMode, WorkloadOptions, WorkloadStats};

/// Where the masters run.
#[derive(Debug, Clone)]
pub enum BackendChoice {
    /// Local `redis-server` children.
    Process,
    /// Services of a docker compose file (already up).
    Compose(Box<ComposeOptions>),
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The scenario.
    pub scenario: Scenario,
    /// How long clients run.
    pub duration: Duration,
    /// Number of masters (process backend; compose uses its service count).
    pub masters: usize,
    /// Number of concurrent clients.
    pub clients: usize,
    /// Number of resources they compete for.
    pub resources: usize,
    /// Lock TTL.
    pub ttl: Duration,
    /// Seed of the schedule and the clients.
    pub seed: u64,
    /// Where the masters run.
    pub backend: BackendChoice,
    /// Witness Redis URL; `None` starts a local one.
    pub witness_url: Option<String>,
    /// Safe clients, or an unsafe negative control that must produce violations.
    pub mode: ClientMode,
}

impl RunOptions {
    /// Defaults: 30 s, 5 masters, 16 clients, 4 resources, TTL 2 s, seed 1, process backend,
    /// safe clients.
    pub fn new(scenario: Scenario) -> RunOptions {
        RunOptions {
            scenario,
            duration: Duration::from_secs(30),
            masters: 5,
            clients: 16,
            resources: 4,
            ttl: Duration::from_secs(2),
            seed: 1,
            backend: BackendChoice::Process,
            witness_url: None,
            mode: ClientMode::Safe,
        }
    }
}

/// The outcome of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every required property held.
    Pass,
    /// Nothing failed, but the run could not show what it should (see the reasons).
    Inconclusive,
    /// A required property was violated.
    Fail,
}

/// Everything a run found.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The scenario run.
    pub scenario: Scenario,
    /// Options used.
    pub options: RunOptions,
    /// Backend name.
    pub backend: &'static str,
    /// Number of masters.
    pub masters: usize,
    /// When the last client finished (offset from the run start).
    pub run_end: Duration,
    /// Every lock operation.
    pub records: Vec<LockRecord>,
    /// Successful acquisitions.
    pub acquisitions: usize,
    /// Successful acquisitions whose attempt or hold overlapped a fault while it was active
    /// (a restart: while it took place).
    pub acquisitions_under_faults: usize,
    /// Every fault applied, the final heal included.
    pub applied: Vec<AppliedFault>,
    /// Labelled fault windows.
    pub fault_windows: Vec<FaultWindow>,
    /// Mutual-exclusion violations.
    pub overlaps: Vec<Overlap>,
    /// Acquisitions that succeeded while their client's group could not reach a majority.
    pub acquired_without_majority: Vec<LockRecord>,
    /// The witness check.
    pub lost_updates: LostUpdates,
    /// Workload totals.
    pub stats: WorkloadStats,
    /// Progress while a majority was reachable, and recovery after heals.
    pub liveness: Liveness,
    /// Lock keys left behind.
    pub leaks: Vec<KeyObservation>,
    /// Remarks (clock method, skipped checks).
    pub notes: Vec<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why the verdict is not a plain pass.
    pub reasons: Vec<String>,
}

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
    validate(&opts)?;
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

    // The witness must never be faulted: its own process, or a URL given by the user.
    let local_witness;
    let witness_url = match &opts.witness_url {
        Some(url) => url.clone(),
        None => {
            local_witness = Cluster::start(1).await?;
            local_witness.url(0)
        }
    };
    reset_witness(&witness_url, opts.resources).await?;

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

    let clients = workload::run(
        &wopts,
        &group_urls,
        &witness_url,
        &history,
        &pauses,
        opts.duration,
    );
    let injected = std::sync::atomic::AtomicUsize::new(0);
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

    // Wait out the TTL, then every lock key left is a leak.
    let settle = healed + opts.ttl + opts.ttl / 2;
    tokio::time::sleep_until(tokio::time::Instant::from_std(clock.start() + settle)).await;
    let observations = scan_lock_keys(&m.backend.urls(), &wopts.key_prefix, clock, &mut notes).await;
    let actual = workload::witness_total(&witness_url, opts.resources).await?;

    let records = history.records();
    let fault_windows = availability::fault_windows(&applied, run_end);
    for window in &fault_windows {
        history.push_fault(window.clone());
    }
    let overlaps = checker::overlaps(&records);
    let acquisitions = records.iter().filter(|r| r.acquired.is_some()).count();
    let spans = availability::fault_spans(&applied, run_end);
    let acquisitions_under_faults = checker::acquisitions_during(&records, &spans, run_end);
    let mut acquired_without_majority = Vec::new();
    let mut liveness = Liveness {
        attempts: 0,
        successes: 0,
        success_rate: 1.0,
        recovery: Vec::new(),
    };
    for group in 0..groups {
        let mine: Vec<LockRecord> = records
            .iter()
            .filter(|r| r.client % groups == group)
            .cloned()
            .collect();
        let down = availability::no_majority_windows(&applied, masters, group, run_end);
        acquired_without_majority.extend(checker::acquisitions_within(&mine, &down));
        let up = availability::majority_windows(&down, run_end);
        let heals = availability::heals(&down, run_end);
        let live = checker::liveness(&mine, &up, &heals);
        liveness.attempts += live.attempts;
        liveness.successes += live.successes;
        liveness.recovery.extend(live.recovery);
    }
    if liveness.attempts > 0 {
        liveness.success_rate = liveness.successes as f64 / liveness.attempts as f64;
    }
    let lost_updates = checker::lost_updates(stats.increments, actual);
    let leaks = checker::leaks(&observations, healed, opts.ttl);

    let mut report = RunReport {
        scenario,
        backend: m.backend.name(),
        masters,
        options: opts,
        run_end,
        records,
        acquisitions,
        acquisitions_under_faults,
        applied,
        fault_windows,
        overlaps,
        acquired_without_majority,
        lost_updates,
        stats,
        liveness,
        leaks,
        notes,
        verdict: Verdict::Pass,
        reasons: Vec::new(),
    };
    judge(&mut report);
    Ok(report)
}

fn validate(opts: &RunOptions) -> Result<(), HarnessError> {
    let bad = |what: String| Err(HarnessError::InvalidOptions(what));
    if opts.masters == 0 {
        return bad("masters must be at least 1, got 0".into());
    }
    if opts.clients == 0 {
        return bad("clients must be at least 1, got 0".into());
    }
    if opts.resources == 0 {
        return bad("resources must be at least 1, got 0".into());
    }
    if opts.ttl < Duration::from_millis(100) {
        return bad(format!("ttl must be at least 100ms, got {:?}", opts.ttl));
    }
    if opts.duration.is_zero() {
        return bad("duration must be positive, got 0s".into());
    }
    Ok(())
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

async fn reset_witness(url: &str, resources: usize) -> Result<(), HarnessError> {
    let mut conn = connect(url, Duration::from_secs(5))
        .await
        .map_err(|e| HarnessError::redis("connecting to the witness", e))?;
    let keys: Vec<String> = (0..resources)
        .map(|i| workload::witness_key(&workload::resource_name(i)))
        .collect();
    let _: () = conn
        .del(&keys)
        .await
        .map_err(|e| HarnessError::redis("clearing the witness counters", e))?;
    Ok(())
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

/// Resumes paused masters, restarts killed ones (keeping data) and heals the network.
async fn heal_everything(
    m: &mut Masters,
    proxies: &ProxyGroup,
    pauses: &ClientPauses,
    clock: RunClock,
    applied: &mut Vec<AppliedFault>,
) -> Result<(), HarnessError> {
    let mut killed = BTreeSet::new();
    let mut paused = BTreeSet::new();
    let mut network = false;
    for f in applied.iter() {
        match &f.action {
            FaultAction::Kill(i) => {
                killed.insert(*i);
                paused.remove(i);
            }
            FaultAction::Pause(i) => {
                paused.insert(*i);
            }
            FaultAction::Resume(i) => {
                paused.remove(i);
            }
            FaultAction::Restart(i, _) => {
                killed.remove(i);
                paused.remove(i);
            }
            FaultAction::Latency(..)
            | FaultAction::Blackhole(_)
            | FaultAction::Reset(_)
            | FaultAction::Partition { .. } => network = true,
            FaultAction::HealNetwork => network = false,
            FaultAction::ClockJump(..) | FaultAction::PauseClient(..) => {}
        }
    }
    let mut heal: Vec<FaultAction> = paused.into_iter().map(FaultAction::Resume).collect();
    heal.extend(
        killed
            .into_iter()
            .map(|i| FaultAction::Restart(i, crate::cluster::DataMode::Keep)),
    );
    if network {
        heal.push(FaultAction::HealNetwork);
    }
    for action in heal {
        let done = apply_now(&action, m, proxies, pauses, clock).await?;
        applied.push(done);
    }
    Ok(())
}

/// `KEYS prefix*` and `PTTL` on every master, directly (not through proxies).
async fn scan_lock_keys(
    urls: &[String],
    prefix: &str,
    clock: RunClock,
    notes: &mut Vec<String>,
) -> Vec<KeyObservation> {
    let mut found = Vec::new();
    for (master, url) in urls.iter().enumerate() {
        let scanned: redis::RedisResult<Vec<(String, i64)>> = async {
            let mut conn = connect(url, Duration::from_secs(5)).await?;
            let keys: Vec<String> = conn.keys(format!("{prefix}*")).await?;
            let mut out = Vec::with_capacity(keys.len());
            for key in keys {
                let pttl: i64 = conn.pttl(&key).await?;
                out.push((key, pttl));
            }
            Ok(out)
        }
        .await;
        match scanned {
            Ok(keys) => found.extend(keys.into_iter().filter(|(_, pttl)| *pttl != -2).map(
                |(key, pttl_ms)| KeyObservation {
                    master,
                    key,
                    pttl_ms,
                    observed_at: clock.now(),
                },
            )),
            Err(e) => notes.push(format!("could not scan m{master} for leaked keys: {e}")),
        }
    }
    found
}

/// Sets the verdict and its reasons from the findings.
pub fn judge(report: &mut RunReport) {
    let mut fail = Vec::new();
    let mut unsure = Vec::new();
    let control = report.options.mode;
    // A negative control is judged as strictly as an in-model run: its violations must show.
    let in_model = report.scenario.in_model || control.is_unsafe();
    if !report.acquired_without_majority.is_empty() {
        fail.push(format!(
            "{} acquisitions succeeded while their client could not reach a majority",
            report.acquired_without_majority.len()
        ));
    }
    let violations = !report.overlaps.is_empty() || report.lost_updates.lost > 0;
    if in_model {
        if !report.overlaps.is_empty() {
            fail.push(format!(
                "{} pairs of holders overlapped inside their validity",
                report.overlaps.len()
            ));
        }
        if report.lost_updates.lost > 0 {
            let msg = format!("{} witness increments were lost", report.lost_updates.lost);
            if report.stats.late_writes == 0 || control.is_unsafe() {
                fail.push(msg);
            } else {
                unsure.push(format!(
                    "{msg}, but {} writes completed after their validity (the machine is too loaded for the TTL)",
                    report.stats.late_writes
                ));
            }
        }
        if !report.leaks.is_empty() {
            fail.push(format!("{} lock keys outlived their TTL", report.leaks.len()));
        }
        if report.stats.increments == 0 {
            unsure.push("no critical section completed, so the witness showed nothing".into());
        }
        if control.is_unsafe() {
            if violations {
                report.notes.push(format!(
                    "negative control ({} clients): the checker detected {} overlaps and {} lost increments, as it must",
                    control.name(),
                    report.overlaps.len(),
                    report.lost_updates.lost
                ));
            } else {
                unsure.push(format!(
                    "negative control ({} clients) showed no violation: the run was too short or too idle to expose the unsafe clients",
                    control.name()
                ));
            }
        }
    } else if violations {
        report.notes.push(format!(
            "out of model: {} overlaps and {} lost increments observed, as this scenario allows",
            report.overlaps.len(),
            report.lost_updates.lost
        ));
    } else {
        report
            .notes
            .push("out of model: no violation observed this time (one is possible, not certain)".into());
    }
    report.verdict = if !fail.is_empty() {
        Verdict::Fail
    } else if !unsure.is_empty() {
        Verdict::Inconclusive
    } else {
        Verdict::Pass
    };
    report.reasons = fail.into_iter().chain(unsure).collect();
}

impl RunReport {
    /// A human-readable summary.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let o = &self.options;
        let _ =
            writeln!(
            s,
            "scenario {} ({}), seed {}, {} backend, {} masters, {} clients, {} resources, ttl {:?}, {:.1}s",
            self.scenario.name,
            if self.scenario.in_model { "in model" } else { "out of model" },
            o.seed,
            self.backend,
            self.masters,
            o.clients,
            o.resources,
            o.ttl,
            self.run_end.as_secs_f64()
        );
        if o.mode.is_unsafe() {
            let _ = writeln!(s, "clients: {} (UNSAFE, a negative control)", o.mode.name());
        }
        let _ = writeln!(
            s,
            "operations: {} attempts, {} acquired ({} under faults), {} increments ({} late), {} skipped, {} release failures",
            self.records.len(),
            self.acquisitions,
            self.acquisitions_under_faults,
            self.stats.increments,
            self.stats.late_writes,
            self.stats.skipped,
            self.stats.release_failures
        );
        for f in &self.applied {
            let _ = writeln!(
                s,
                "fault {:>8.3}s..{:>8.3}s  {}",
                f.started.as_secs_f64(),
                f.finished.as_secs_f64(),
                f.action
            );
        }
        let _ = writeln!(
            s,
            "safety: {} overlaps, {} acquisitions without majority, witness {} expected / {} actual ({} lost)",
            self.overlaps.len(),
            self.acquired_without_majority.len(),
            self.lost_updates.expected,
            self.lost_updates.actual,
            self.lost_updates.lost
        );
        for o in self.overlaps.iter().take(10) {
            let _ = writeln!(
                s,
                "  overlap on {} for {:?}: client {} token {} and client {} token {}",
                o.resource, o.overlap, o.first.client, o.first.token, o.second.client, o.second.token
            );
        }
        let _ = writeln!(
            s,
            "liveness: {}/{} attempts succeeded while a majority was reachable ({:.0}%)",
            self.liveness.successes,
            self.liveness.attempts,
            self.liveness.success_rate * 100.0
        );
        for (heal, first) in &self.liveness.recovery {
            match first {
                Some(d) => {
                    let _ = writeln!(
                        s,
                        "  healed at {:.3}s, first success {:?} later",
                        heal.as_secs_f64(),
                        d
                    );
                }
                None => {
                    let _ = writeln!(s, "  healed at {:.3}s, no success afterwards", heal.as_secs_f64());
                }
            }
        }
        let _ = writeln!(s, "leaks: {}", self.leaks.len());
        for note in &self.notes {
            let _ = writeln!(s, "note: {note}");
        }
        let _ = writeln!(s, "verdict: {:?}", self.verdict);
        for reason in &self.reasons {
            let _ = writeln!(s, "  {reason}");
        }
        s
    }

    /// The header of the results table (Markdown) whose rows are [`RunReport::table_row`].
    pub fn table_header() -> String {
        [
            "| scenario | model | seed | duration | acquisitions | under faults | violations | lost updates | leaked keys | success (majority up) | verdict |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        .join("\n")
    }

    /// This run as one row of the results table.
    pub fn table_row(&self) -> String {
        let model = match (self.scenario.in_model, self.options.mode.is_unsafe()) {
            (_, true) => format!("unsafe {}", self.options.mode.name()),
            (true, false) => "in".to_string(),
            (false, false) => "out".to_string(),
        };
        format!(
            "| {} | {model} | {} | {:.0}s | {} | {} | {} | {} | {} | {:.1}% | {} |",
            self.scenario.name,
            self.options.seed,
            self.options.duration.as_secs_f64(),
            self.acquisitions,
            self.acquisitions_under_faults,
            self.overlaps.len() + self.acquired_without_majority.len(),
            self.lost_updates.lost,
            self.leaks.len(),
            self.liveness.success_rate * 100.0,
            format!("{:?}", self.verdict).to_lowercase()
        )
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Json {
        let o = &self.options;
        let record = |r: &LockRecord| {
            Json::obj([
                ("client", Json::usize(r.client)),
                ("resource", Json::str(r.resource.clone())),
                ("token", Json::str(r.token.clone())),
                ("invoked_ms", Json::ms(r.invoked)),
                ("acquired_ms", Json::opt_ms(r.acquired)),
                ("validity_end_ms", Json::opt_ms(r.validity_end)),
                ("released_ms", Json::opt_ms(r.released)),
                ("fencing", r.fencing.map_or(Json::Null, Json::uint)),
                ("error", r.error.clone().map_or(Json::Null, Json::Str)),
            ])
        };
        Json::obj([
            ("scenario", Json::str(self.scenario.name)),
            ("in_model", Json::Bool(self.scenario.in_model)),
            ("seed", Json::uint(o.seed)),
            ("clients_mode", Json::str(o.mode.name())),
            ("acquisitions", Json::usize(self.acquisitions)),
            (
                "acquisitions_under_faults",
                Json::usize(self.acquisitions_under_faults),
            ),
            (
                "violations",
                Json::usize(self.overlaps.len() + self.acquired_without_majority.len()),
            ),
            ("lost_updates", Json::uint(self.lost_updates.lost)),
            ("success_rate_majority_up", Json::Num(self.liveness.success_rate)),
            ("leaked_keys", Json::usize(self.leaks.len())),
            ("backend", Json::str(self.backend)),
            ("masters", Json::usize(self.masters)),
            ("clients", Json::usize(o.clients)),
            ("resources", Json::usize(o.resources)),
            ("ttl_ms", Json::ms(o.ttl)),
            ("duration_ms", Json::ms(o.duration)),
            ("run_end_ms", Json::ms(self.run_end)),
            ("verdict", Json::str(format!("{:?}", self.verdict).to_lowercase())),
            (
                "reasons",
                Json::Arr(self.reasons.iter().cloned().map(Json::Str).collect()),
            ),
            (
                "notes",
                Json::Arr(self.notes.iter().cloned().map(Json::Str).collect()),
            ),
            (
                "faults",
                Json::Arr(
                    self.applied
                        .iter()
                        .map(|f| {
                            Json::obj([
                                ("started_ms", Json::ms(f.started)),
                                ("finished_ms", Json::ms(f.finished)),
                                ("action", Json::str(f.action.to_string())),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "stats",
                Json::obj([
                    ("attempts", Json::usize(self.records.len())),
                    (
                        "acquired",
                        Json::usize(self.records.iter().filter(|r| r.acquired.is_some()).count()),
                    ),
                    ("increments", Json::uint(self.stats.increments)),
                    ("late_writes", Json::uint(self.stats.late_writes)),
                    ("skipped", Json::uint(self.stats.skipped)),
                    ("acquire_failures", Json::uint(self.stats.acquire_failures)),
                    ("release_failures", Json::uint(self.stats.release_failures)),
                    ("witness_errors", Json::uint(self.stats.witness_errors)),
                ]),
            ),
            (
                "overlaps",
                Json::Arr(
                    self.overlaps
                        .iter()
                        .map(|v| {
                            Json::obj([
                                ("resource", Json::str(v.resource.clone())),
                                ("overlap_ms", Json::ms(v.overlap)),
                                ("first", record(&v.first)),
                                ("second", record(&v.second)),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "acquired_without_majority",
                Json::Arr(self.acquired_without_majority.iter().map(record).collect()),
            ),
            (
                "witness",
                Json::obj([
                    ("expected", Json::uint(self.lost_updates.expected)),
                    ("actual", Json::uint(self.lost_updates.actual)),
                    ("lost", Json::uint(self.lost_updates.lost)),
                    ("unaccounted", Json::uint(self.lost_updates.unaccounted)),
                ]),
            ),
            (
                "liveness",
                Json::obj([
                    ("attempts", Json::usize(self.liveness.attempts)),
                    ("successes", Json::usize(self.liveness.successes)),
                    ("success_rate", Json::Num(self.liveness.success_rate)),
                    (
                        "recovery",
                        Json::Arr(
                            self.liveness
                                .recovery
                                .iter()
                                .map(|(heal, first)| {
                                    Json::obj([
                                        ("healed_ms", Json::ms(*heal)),
                                        ("first_success_after_ms", Json::opt_ms(*first)),
                                    ])
                                })
                                .collect(),
                        ),
                    ),
                ]),
            ),
            (
                "leaks",
                Json::Arr(
                    self.leaks
                        .iter()
                        .map(|l| {
                            Json::obj([
                                ("master", Json::usize(l.master)),
                                ("key", Json::str(l.key.clone())),
                                ("pttl_ms", Json::Int(i128::from(l.pttl_ms))),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("records", Json::Arr(self.records.iter().map(record).collect())),
        ])
    }

    /// The run as an SVG timeline.
    pub fn svg(&self) -> String {
        let opts = SvgOptions {
            title: format!(
                "{} (seed {}, {:?}): {} overlaps, {} lost",
                self.scenario.name,
                self.options.seed,
                self.verdict,
                self.overlaps.len(),
                self.lost_updates.lost
            ),
            ..SvgOptions::default()
        };
        svg::timeline(&self.records, &self.fault_windows, self.run_end, &opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario;

    fn report(name: &str) -> RunReport {
        let scenario = *scenario::find(name).unwrap();
        RunReport {
            scenario,
            options: RunOptions::new(scenario),
            backend: "process",
            masters: 5,
            run_end: Duration::from_secs(10),
            records: Vec::new(),
            acquisitions: 0,
            acquisitions_under_faults: 0,
            applied: Vec::new(),
            fault_windows: Vec::new(),
            overlaps: Vec::new(),
            acquired_without_majority: Vec::new(),
            lost_updates: checker::lost_updates(10, 10),
            stats: WorkloadStats {
                increments: 10,
                ..WorkloadStats::default()
            },
            liveness: checker::liveness(&[], &[], &[]),
            leaks: Vec::new(),
            notes: Vec::new(),
            verdict: Verdict::Pass,
            reasons: Vec::new(),
        }
    }

    fn hold(client: usize, from: u64, to: u64) -> LockRecord {
        let mut r = LockRecord::invoked(client, "r0", Duration::from_millis(from));
        r.acquired = Some(Duration::from_millis(from));
        r.validity_end = Some(Duration::from_millis(to));
        r
    }

    #[test]
    fn a_clean_in_model_run_passes() {
        let mut r = report("kill-minority");
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Pass, "{:?}", r.reasons);
    }

    #[test]
    fn overlaps_fail_an_in_model_run_but_not_an_out_of_model_one() {
        let overlaps = checker::overlaps(&[hold(0, 0, 100), hold(1, 50, 150)]);
        assert_eq!(overlaps.len(), 1);
        let mut r = report("partition");
        r.overlaps = overlaps.clone();
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Fail);
        assert!(r.reasons[0].contains("overlapped"), "{:?}", r.reasons);

        let mut r = report("client-pause");
        r.overlaps = overlaps;
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Pass);
        assert!(r.notes.iter().any(|n| n.contains("1 overlaps")), "{:?}", r.notes);
    }

    #[test]
    fn lost_updates_fail_unless_writes_were_late() {
        let mut r = report("none");
        r.lost_updates = checker::lost_updates(10, 8);
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Fail);
        r.stats.late_writes = 1;
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Inconclusive);
    }

    #[test]
    fn a_negative_control_fails_when_caught_and_is_inconclusive_when_not() {
        let mut r = report("none");
        r.options.mode = ClientMode::IgnoreValidity;
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Inconclusive);
        assert!(r.reasons[0].contains("showed no violation"), "{:?}", r.reasons);

        // Late writes excuse nothing here: they are what the unsafe clients do.
        let mut r = report("none");
        r.options.mode = ClientMode::IgnoreValidity;
        r.lost_updates = checker::lost_updates(10, 7);
        r.stats.late_writes = 10;
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Fail, "{:?}", r.reasons);
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("3 lost increments, as it must")),
            "{:?}",
            r.notes
        );
        assert!(r.summary().contains("UNSAFE"));
        assert!(r.table_row().contains("| unsafe ignore-validity |"));
    }

    #[test]
    fn an_acquisition_without_majority_fails_any_scenario() {
        let mut r = report("clock-jump");
        r.acquired_without_majority = vec![hold(0, 10, 20)];
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Fail);
    }

    #[test]
    fn leaks_fail_and_an_idle_run_is_inconclusive() {
        let mut r = report("none");
        r.leaks = vec![KeyObservation {
            master: 0,
            key: "quorlock-chaos:r0".into(),
            pttl_ms: -1,
            observed_at: Duration::from_secs(12),
        }];
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Fail);
        let mut r = report("none");
        r.stats.increments = 0;
        judge(&mut r);
        assert_eq!(r.verdict, Verdict::Inconclusive);
    }

    #[test]
    fn reports_render_as_text_json_and_svg() {
        let mut r = report("none");
        r.records = vec![hold(0, 0, 100)];
        judge(&mut r);
        assert!(r.summary().contains("verdict: Pass"));
        let json = r.to_json().to_string();
        assert!(json.starts_with("{\"scenario\":\"none\""), "{json}");
        assert!(json.contains("\"verdict\":\"pass\""));
        assert!(r.svg().contains("class=\"hold\""));
        let row = r.table_row();
        assert!(row.starts_with("| none | in | 1 | 30s | 0 |"), "{row}");
        assert!(row.ends_with("| pass |"), "{row}");
        let columns = |line: &str| line.matches('|').count();
        let header = RunReport::table_header();
        assert!(
            header.lines().all(|line| columns(line) == columns(&row)),
            "{header}"
        );
    }

    #[test]
    fn bad_options_are_rejected_with_the_value() {
        let mut opts = RunOptions::new(*scenario::find("none").unwrap());
        opts.ttl = Duration::from_millis(5);
        let err = validate(&opts).unwrap_err().to_string();
        assert!(err.contains("5ms"), "{err}");
        opts.ttl = Duration::from_secs(1);
        opts.clients = 0;
        assert!(validate(&opts).is_err());
    }
}
