//! The `list` and `run` subcommands: list the named scenarios, or run one (or several in
//! turn) against local redis-server masters (or docker compose services) and print the
//! reports and a results table.
//!
//! `run` exits with 0 when every run passed, 1 when a required property failed (in any of the
//! scenarios run; for a negative control, when its own check caught it), 2 when the harness
//! itself failed, and 3 when a run was inconclusive: nothing failed, but it could not show what
//! it should (no hold taken, no critical section completed, lost increments put down to load,
//! a negative control whose own check never fired). Inconclusive is never a pass.
//!
//! `--kind semaphore|rwlock` runs the other kinds under the same scenarios (`--permits P` for
//! the semaphore). `--unsafe MODE` runs deliberately unsafe clients (a negative control): the
//! check it targets must then find violations, so the expected exit code is 1;
//! `majority-counting` is the semaphore's control.
//!
//! The operations (`failover`, `runtime-downgrade`, `eviction`, or `operations` for all three)
//! run on the compose backend only, from `chaos/docker/compose.operations.yml` unless
//! `--compose-file` says otherwise, with every client in a container; each takes its own control
//! (`--unsafe count-replaced-masters`, `durability-from-report`, `count-evicting-masters`), which
//! switches one rule of quorlock's off in the operation's probes.
//! While it runs, a progress line goes to stderr.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::ValueEnum;
use quorlock_chaos::compose::drive as compose_drive;
use quorlock_chaos::compose::operations::control::Control;
use quorlock_chaos::compose::operations::drive as operations_drive;
use quorlock_chaos::compose::project::{ComposeProject, ProjectSpec};
use quorlock_chaos::drive::{self, Progress};
use quorlock_chaos::run::{BackendChoice, Kind, RunOptions, RunReport, Verdict};
use quorlock_chaos::scenario::OPERATIONS;
use quorlock_chaos::workload::ClientMode;
use quorlock_chaos::HarnessError;
use quorlock_chaos::{scenario, ComposeOptions, Scenario, SCENARIOS};

use crate::signals::Signals;

/// Arguments of `run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Scenario name (see `list`), a comma-separated list, or `all`, `in-model`,
    /// `out-of-model` (the fault schedules), `operations` (the compose operations), run in turn
    /// with one seed, then a results table.
    #[arg(long)]
    scenario: String,
    /// How long clients run, e.g. 30s, 1500ms, 2m.
    #[arg(long, default_value = "30s", value_parser = crate::duration::parse)]
    duration: Duration,
    /// Number of masters (process backend).
    #[arg(long, default_value_t = 5)]
    masters: usize,
    /// Number of concurrent clients.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Number of resources the clients compete for.
    #[arg(long, default_value_t = 4)]
    resources: usize,
    /// Lock TTL.
    #[arg(long, default_value = "2s", value_parser = crate::duration::parse)]
    ttl: Duration,
    /// Seed of the schedule and the clients (random if not given; always reported).
    #[arg(long)]
    seed: Option<u64>,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Write an SVG timeline of the run to this file.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Where the masters run.
    #[arg(long, value_enum, default_value_t = BackendArg::Process)]
    backend: BackendArg,
    /// Compose file(s) for `--backend compose`, the first the base and each further one layered
    /// over it. Each scenario brings up a project of its own from them (`docker compose up`),
    /// labelled `quorlock.chaos.run=<id>`, and takes it down again, volumes included. Default:
    /// `chaos/docker/compose.masters.yml`, and `chaos/docker/compose.operations.yml` for the
    /// operations.
    #[arg(long, value_name = "FILE")]
    compose_file: Vec<PathBuf>,
    /// With `--backend compose`: the services are already up (`redis1`..`redis5` of the first
    /// `--compose-file` on 127.0.0.1:7001-7005); fault them but neither start nor remove them.
    #[arg(long)]
    compose_running: bool,
    /// With `--backend compose`: run the clients in containers of their own (one per client
    /// group, this program mounted in) beside a witness container, so that a partition
    /// disconnects real hosts. Scenarios whose faults need the harness's proxies (latency,
    /// blackhole, reset) or in-process clients (client-pause) are refused.
    #[arg(long)]
    clients_in_containers: bool,
    /// Witness Redis URL (a local redis-server is started if not given).
    #[arg(long)]
    witness: Option<String>,
    /// Negative control: run deliberately unsafe clients; the checker must report violations.
    /// `single-master` and `ignore-validity` run plain locks; `majority-counting` needs
    /// `--kind semaphore`; the last three are the operations' (each with its own operation).
    #[arg(long = "unsafe", value_enum)]
    unsafe_mode: Option<UnsafeArg>,
    /// What the clients take: plain locks (over `--resources`, with the witness), a counting
    /// semaphore of `--permits` permits, or the read-write lock (both of these on one resource).
    #[arg(long, value_enum, default_value_t = KindArg::Lock)]
    kind: KindArg,
    /// Permits of the semaphore (`--kind semaphore`).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..))]
    permits: u32,
    /// No progress line on stderr.
    #[arg(long)]
    quiet: bool,
}

/// The unsafe client behaviours `--unsafe` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UnsafeArg {
    /// Each client locks through a single master (a quorum of 1), clients spread over masters.
    SingleMaster,
    /// Clients hold for 2-3 TTLs and write without re-checking their validity.
    IgnoreValidity,
    /// Semaphore permits counted on each master and held on a simple majority of them.
    MajorityCounting,
    /// The failover's: the probes count a promoted replica's votes at once (a restart grace of 0).
    CountReplacedMasters,
    /// The runtime downgrade's: the probes judge a restart's durability by what it reports (a
    /// restart grace of 0).
    DurabilityFromReport,
    /// The eviction's: the probes count a master that may evict keys.
    CountEvictingMasters,
}

impl UnsafeArg {
    /// The clients' unsafe mode it names, `None` for an operation's control.
    pub fn client_mode(self) -> Option<ClientMode> {
        match self {
            UnsafeArg::SingleMaster => Some(ClientMode::SingleMaster),
            UnsafeArg::IgnoreValidity => Some(ClientMode::IgnoreValidity),
            UnsafeArg::MajorityCounting => Some(ClientMode::MajorityCounting),
            UnsafeArg::CountReplacedMasters
            | UnsafeArg::DurabilityFromReport
            | UnsafeArg::CountEvictingMasters => None,
        }
    }

    /// The operation's control it names, `None` for the clients' unsafe modes.
    pub fn control(self) -> Option<Control> {
        match self {
            UnsafeArg::CountReplacedMasters => Some(Control::CountReplacedMasters),
            UnsafeArg::DurabilityFromReport => Some(Control::DurabilityFromReport),
            UnsafeArg::CountEvictingMasters => Some(Control::CountEvictingMasters),
            UnsafeArg::SingleMaster | UnsafeArg::IgnoreValidity | UnsafeArg::MajorityCounting => None,
        }
    }
}

/// The kinds `--kind` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KindArg {
    /// The plain lock.
    Lock,
    /// The counting semaphore.
    Semaphore,
    /// The read-write lock.
    Rwlock,
}

impl KindArg {
    fn with_permits(self, permits: u32) -> Kind {
        match self {
            KindArg::Lock => Kind::Lock,
            KindArg::Semaphore => Kind::Semaphore(permits),
            KindArg::Rwlock => Kind::RwLock,
        }
    }
}

/// Every this often, a progress line when stderr is not a terminal (a terminal gets one
/// line rewritten every second).
const LOGGED_PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Formats one progress line.
fn progress_line(p: &Progress) -> String {
    format!(
        "{:>6.1}s / {:.0}s  {} attempts, {} acquired, {} faults applied",
        p.elapsed.as_secs_f64(),
        p.duration.as_secs_f64(),
        p.attempts,
        p.acquisitions,
        p.faults
    )
}

/// Where `run` starts the masters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// Local redis-server children.
    Process,
    /// docker compose services.
    Compose,
}

/// `list`: one line per scenario, the fault schedules then the operations.
pub fn list() -> ExitCode {
    let mut out = std::io::stdout().lock();
    for s in SCENARIOS.iter().chain(&OPERATIONS) {
        let model = if s.in_model { "in-model" } else { "out-of-model" };
        let _ = writeln!(out, "{:<32} {:<13} {}", s.name, model, s.summary);
    }
    ExitCode::SUCCESS
}

/// The scenarios `--scenario` names: one name, a comma-separated list, or `all`,
/// `in-model`, `out-of-model` (of the fault schedules), `operations`.
fn select_scenarios(spec: &str) -> Result<Vec<Scenario>, String> {
    let all = || SCENARIOS.iter().copied();
    match spec {
        "all" => Ok(all().collect()),
        "in-model" => Ok(all().filter(|s| s.in_model).collect()),
        "out-of-model" => Ok(all().filter(|s| !s.in_model).collect()),
        "operations" => Ok(OPERATIONS.to_vec()),
        list => list
            .split(',')
            .map(|name| scenario::find(name.trim()).copied().map_err(|e| e.to_string()))
            .collect(),
    }
}

/// `FILE.svg` for one scenario, `FILE-NAME.svg` for each of several.
fn svg_path(path: &Path, scenario: &str, several: bool) -> PathBuf {
    if !several {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map_or_else(|| "chaos".into(), |s| s.to_string_lossy());
    let ext = path
        .extension()
        .map_or_else(|| "svg".into(), |e| e.to_string_lossy());
    path.with_file_name(format!("{stem}-{scenario}.{ext}"))
}

/// `run`: each selected scenario in turn, its report on stdout (text or one JSON object per
/// line), optionally an SVG file each; then (without `--json`) a results table.
pub async fn run(args: RunArgs) -> ExitCode {
    let scenarios = match select_scenarios(&args.scenario) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "error: {e}");
            return ExitCode::from(2);
        }
    };
    let several = scenarios.len() > 1;
    let seed = args.seed.unwrap_or_else(rand::random);
    let mut rows = Vec::new();
    let (mut failed, mut unsure) = (false, Vec::new());
    for scenario in scenarios {
        match run_one(&args, scenario, seed, several).await {
            Ok(report) => {
                failed |= report.verdict == Verdict::Fail;
                if report.verdict == Verdict::Inconclusive {
                    let reasons: Vec<&str> = report.reasons.iter().map(|r| r.text.as_str()).collect();
                    unsure.push(format!("{}: {}", scenario.name, reasons.join("; ")));
                }
                rows.push(report.table_row());
            }
            Err(code) => return code,
        }
    }
    if !args.json {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", RunReport::table_header());
        for row in &rows {
            let _ = writeln!(out, "{row}");
        }
    }
    // Inconclusive is not a pass: a run that could not show what it should says so, on stderr
    // whatever the output format, and exits with its own code.
    for line in &unsure {
        let _ = writeln!(std::io::stderr(), "INCONCLUSIVE {line}");
    }
    if failed {
        ExitCode::from(1)
    } else if !unsure.is_empty() {
        ExitCode::from(INCONCLUSIVE)
    } else {
        ExitCode::SUCCESS
    }
}

/// Exit code of `run` when no property failed but a run could not show what it should (no hold
/// taken, a negative control whose own check never fired, lost increments put down to load).
pub const INCONCLUSIVE: u8 = 3;

/// The clients' mode and the operation's control `--unsafe` asks for `scenario`: a clients' mode
/// for the fault schedules, the operation's own control for an operation.
fn modes(args: &RunArgs, scenario: Scenario) -> Result<(ClientMode, Option<Control>), String> {
    let Some(arg) = args.unsafe_mode else {
        return Ok((ClientMode::Safe, None));
    };
    match (arg.client_mode(), arg.control(), scenario.is_operation()) {
        (Some(mode), _, false) => Ok((mode, None)),
        (_, Some(control), true) if control.operation() == scenario.kind => {
            Ok((ClientMode::Safe, Some(control)))
        }
        _ => {
            let own = Control::ALL
                .iter()
                .find(|c| c.operation() == scenario.kind)
                .map(|c| format!("its control is {}", c.name()));
            Err(format!(
                "--unsafe {} does not apply to {} ({})",
                arg.to_possible_value()
                    .map_or_else(String::new, |v| v.get_name().to_string()),
                scenario.name,
                own.unwrap_or_else(|| "single-master, ignore-validity or majority-counting apply".into())
            ))
        }
    }
}

/// The compose files of a run of `scenario`: `--compose-file` as given, else the harness's own.
fn compose_files(args: &RunArgs, scenario: Scenario) -> Vec<PathBuf> {
    if !args.compose_file.is_empty() {
        return args.compose_file.clone();
    }
    vec![PathBuf::from(if scenario.is_operation() {
        "chaos/docker/compose.operations.yml"
    } else {
        "chaos/docker/compose.masters.yml"
    })]
}

/// One scenario: run it with a progress line, write its SVG, print its report.
async fn run_one(
    args: &RunArgs,
    scenario: Scenario,
    seed: u64,
    several: bool,
) -> Result<RunReport, ExitCode> {
    // Brought up first so that a signal from here on drops it, which takes it down.
    let mut signals = Signals::new().map_err(|e| {
        let _ = writeln!(std::io::stderr(), "error: cannot catch signals: {e}");
        ExitCode::from(2)
    })?;
    let (mode, control) = modes(args, scenario).map_err(|e| {
        let _ = writeln!(std::io::stderr(), "error: {e}");
        ExitCode::from(2)
    })?;
    let files = compose_files(args, scenario);
    let mut project = None;
    let backend = match args.backend {
        BackendArg::Process => BackendChoice::Process,
        BackendArg::Compose if args.compose_running => {
            let mut options = ComposeOptions::new(files.first().cloned().unwrap_or_default());
            options.overrides = files.iter().skip(1).cloned().collect();
            BackendChoice::Compose(Box::new(options))
        }
        BackendArg::Compose => {
            let spec = ProjectSpec {
                files: files.clone(),
                ..ProjectSpec::new("")
            };
            let _ = writeln!(
                std::io::stderr(),
                "bringing up {} with docker compose",
                files
                    .iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" + ")
            );
            let up = tokio::select! {
                up = ComposeProject::up(spec) => up,
                code = signals.recv() => return Err(code),
            };
            match up {
                Ok(p) => {
                    if !p.swept().is_empty() {
                        let _ = writeln!(std::io::stderr(), "swept what killed runs left: {:?}", p.swept());
                    }
                    let options = p.options().clone();
                    project = Some(p);
                    BackendChoice::Compose(Box::new(options))
                }
                Err(e) => {
                    let _ = writeln!(std::io::stderr(), "error: bringing up the compose masters: {e}");
                    return Err(ExitCode::from(2));
                }
            }
        }
    };
    let opts = RunOptions {
        scenario,
        duration: args.duration,
        masters: args.masters,
        clients: args.clients,
        resources: args.resources,
        ttl: args.ttl,
        seed,
        backend,
        witness_url: args.witness.clone(),
        mode,
        kind: args.kind.with_permits(args.permits),
    };
    let _ = writeln!(
        std::io::stderr(),
        "running {} ({}) with seed {}{}",
        opts.scenario.name,
        match opts.kind {
            Kind::Semaphore(p) => format!("semaphore of {p} permits"),
            kind => kind.name().to_string(),
        },
        opts.seed,
        match control {
            Some(control) => format!(" and UNSAFE {} probes ({})", control.name(), control.switch()),
            None if opts.mode.is_unsafe() => format!(" and UNSAFE {} clients", opts.mode.name()),
            None => String::new(),
        }
    );
    let terminal = std::io::stderr().is_terminal();
    let quiet = args.quiet;
    let mut last_logged = Duration::ZERO;
    let on_progress = move |p: Progress| {
        if quiet {
            return;
        }
        let mut err = std::io::stderr().lock();
        if terminal {
            let _ = write!(err, "\r{}\x1b[K", progress_line(&p));
        } else if p.elapsed >= last_logged + LOGGED_PROGRESS_EVERY {
            last_logged = p.elapsed;
            let _ = writeln!(err, "{}", progress_line(&p));
        }
    };
    // On a signal the run is dropped, then the project (containers, networks, volumes).
    // The operations always run their clients in containers.
    let in_containers = match (&project, args.clients_in_containers || scenario.is_operation()) {
        (Some(project), true) => Some(project),
        (None, true) => {
            let _ = writeln!(
                std::io::stderr(),
                "error: {} needs --backend compose without --compose-running",
                if scenario.is_operation() {
                    scenario.name
                } else {
                    "--clients-in-containers"
                }
            );
            return Err(ExitCode::from(2));
        }
        (_, false) => None,
    };
    let run = async {
        match in_containers {
            Some(project) => {
                let binary = std::env::current_exe()
                    .map_err(|e| HarnessError::Workload(format!("finding this program to mount it: {e}")))?;
                if scenario.is_operation() {
                    operations_drive::run(opts, control, project, &binary).await
                } else {
                    compose_drive::run(opts, project, &binary).await
                }
            }
            None => drive::run_with_progress(opts, on_progress).await,
        }
    };
    let outcome = tokio::select! {
        outcome = run => outcome,
        code = signals.recv() => {
            drop(project);
            let _ = writeln!(std::io::stderr(), "\ninterrupted; the run's masters are removed");
            return Err(code);
        }
    };
    if let Some(project) = project {
        if let Err(e) = project.down() {
            let _ = writeln!(std::io::stderr(), "warning: {e}; the next compose run sweeps it");
        }
    }
    let mut err = std::io::stderr().lock();
    if terminal && !quiet {
        let _ = writeln!(err);
    }
    let report = match outcome {
        Ok(report) => report,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return Err(ExitCode::from(2));
        }
    };
    if let Some(path) = &args.svg {
        let path = svg_path(path, scenario.name, several);
        if let Err(e) = std::fs::write(&path, report.svg()) {
            let _ = writeln!(err, "error: writing {}: {e}", path.display());
            return Err(ExitCode::from(2));
        }
    }
    let text = if args.json {
        match report.to_json() {
            Ok(json) => json,
            Err(e) => {
                let _ = writeln!(err, "error: {e}");
                return Err(ExitCode::from(2));
            }
        }
    } else {
        report.summary()
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_sets_and_svg_names() {
        let names =
            |spec: &str| -> Vec<&str> { select_scenarios(spec).unwrap().iter().map(|s| s.name).collect() };
        assert_eq!(names("latency"), vec!["latency"]);
        assert_eq!(names("none, blackhole"), vec!["none", "blackhole"]);
        assert_eq!(names("all").len(), SCENARIOS.len());
        assert_eq!(names("in-model").len(), 12);
        assert_eq!(
            names("out-of-model"),
            vec!["restart-minority-wipe-immediate", "clock-jump", "client-pause"]
        );
        assert!(select_scenarios("none,nope").unwrap_err().contains("nope"));
        let p = Path::new("out/run.svg");
        assert_eq!(svg_path(p, "latency", false), PathBuf::from("out/run.svg"));
        assert_eq!(svg_path(p, "latency", true), PathBuf::from("out/run-latency.svg"));
    }

    #[derive(Debug, clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: RunArgs,
    }

    #[test]
    fn a_full_run_line_parses() {
        use clap::Parser as _;
        let parsed = Wrapper::try_parse_from([
            "run",
            "--scenario",
            "kill-minority",
            "--duration",
            "10s",
            "--masters",
            "3",
            "--clients",
            "4",
            "--seed",
            "42",
            "--json",
            "--svg",
            "out.svg",
        ])
        .unwrap();
        let args = parsed.args;
        assert_eq!(args.duration, Duration::from_secs(10));
        assert_eq!((args.masters, args.clients, args.seed), (3, 4, Some(42)));
        assert!(args.json);
        assert_eq!(args.svg, Some(PathBuf::from("out.svg")));
        assert_eq!(args.backend, BackendArg::Process);
        assert_eq!(args.kind.with_permits(args.permits), Kind::Lock);
    }

    #[test]
    fn kinds_and_their_control_parse() {
        use clap::Parser as _;
        let parse = |extra: &[&str]| {
            let mut line = vec!["run", "--scenario", "partition"];
            line.extend_from_slice(extra);
            Wrapper::try_parse_from(line).map(|w| w.args)
        };
        let args = parse(&["--kind", "semaphore"]).unwrap();
        assert_eq!(args.kind.with_permits(args.permits), Kind::Semaphore(2));
        let args = parse(&[
            "--kind",
            "semaphore",
            "--permits",
            "3",
            "--unsafe",
            "majority-counting",
        ])
        .unwrap();
        assert_eq!(args.kind.with_permits(args.permits), Kind::Semaphore(3));
        assert_eq!(
            args.unsafe_mode.and_then(UnsafeArg::client_mode),
            Some(ClientMode::MajorityCounting)
        );
        let args = parse(&["--kind", "rwlock"]).unwrap();
        assert_eq!(args.kind.with_permits(args.permits), Kind::RwLock);
        assert!(parse(&["--kind", "semaphore", "--permits", "0"]).is_err());
        assert!(parse(&["--kind", "mutex"]).is_err());
    }
}
