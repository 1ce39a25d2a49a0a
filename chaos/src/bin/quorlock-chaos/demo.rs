//! The demo's script: 5 local masters, contending workers, and four phases.
//!
//! 1. all 5 masters up;
//! 2. masters 0 and 1 killed: 3 of 5 are still a majority, and the work goes on;
//! 3. master 2 killed too: only 2 of 5 answer, and every acquisition is refused, with the reason;
//! 4. the three restarted: the work resumes.
//!
//! Then a summary table (refusals split into contention, the lock doing its job, and no majority,
//! the faults), the checks over the whole run (no two holders at once, no lost update, nothing
//! acquired without a majority), and an SVG timeline: a lane per worker, the faults, the restore,
//! a rate panel (acquisitions, refusals by reason, p99 latency per 100 ms), a legend, and a zoomed
//! strip around each change that shows every hold. Every master is a child process of
//! the [`Cluster`], which stops them all when it is dropped: at the end, on an error, or when the
//! demo is interrupted. With `--backend compose` the masters are containers of a compose project
//! of the demo's own instead, killed and started by `docker compose`, and the project is removed
//! (containers, networks, volumes) when it is dropped, in the same three cases.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use quorlock::Quorlock;
use quorlock_chaos::compose::project::{ComposeProject, ProjectSpec};
use quorlock_chaos::svg::{self, Annotations, Marker, SvgOptions};
use quorlock_chaos::{
    checker, redis_server_path, servers::ServerError, Backend, Cluster, DataMode, FaultWindow, HarnessError,
    History, RunClock,
};

use crate::progress::Progress;
use crate::report::{self, Row};
use crate::workers::{self, Board, PhaseStats, TTL};

/// Masters the demo starts.
const MASTERS: usize = 5;
/// The resources the workers compete for.
const RESOURCES: [&str; 2] = ["orders", "invoices"];
/// How often the progress line is redrawn.
const TICK: Duration = Duration::from_millis(100);
/// Per-master timeout: generous for a loaded laptop, small next to the TTL.
const NODE_TIMEOUT: Duration = Duration::from_millis(100);

/// What to tell someone without redis-server.
pub const INSTALL_HINT: &str = "\
quorlock demo needs redis-server, which is not on PATH. Install it with one of:
  sudo apt-get install redis-server      # Debian, Ubuntu
  brew install redis                     # macOS
  chaos/demo                             # from a source checkout: installs it, then runs the demo
or run five masters with `docker compose up -d` (docker-compose.yml in the repository) and point
`quorlock --nodes redis://127.0.0.1:7001,...` at them.";

/// The demo's settings.
#[derive(Debug, Clone)]
pub struct Options {
    /// Where the SVG timeline goes.
    pub svg: PathBuf,
    /// Length of each phase.
    pub phase: Duration,
    /// Number of workers.
    pub workers: usize,
    /// Where the masters run.
    pub masters: Masters,
}

/// Where the demo's masters run.
#[derive(Debug, Clone)]
pub enum Masters {
    /// Local redis-server children.
    Process,
    /// A compose project of the demo's own, from these files (the first the base).
    Compose(Vec<PathBuf>),
}

/// Why the demo stopped early.
#[derive(Debug)]
pub enum Stop {
    /// redis-server is not installed.
    MissingRedis,
    /// The harness failed (a master did not start, a file could not be written).
    Failed(String),
    /// A signal ended the demo; the exit code to use.
    Interrupted(u8),
}

/// Runs the demo; `Ok(true)` when every check passed.
///
/// # Errors
/// [`Stop::MissingRedis`] without redis-server, [`Stop::Failed`] when the harness fails.
pub async fn run(options: Options) -> Result<bool, Stop> {
    // The project (compose) is held until the end; dropping it removes the containers.
    let (mut cluster, _project, place): (Box<dyn Backend>, Option<ComposeProject>, String) =
        match &options.masters {
            Masters::Process => {
                redis_server_path().map_err(|e| match e {
                    HarnessError::Server(ServerError::RedisMissing { .. }) => Stop::MissingRedis,
                    // A Valkey build selected by QUORLOCK_TEST_SERVER: its error names its install command.
                    other => failed("finding the masters' server", other),
                })?;
                let cluster = Cluster::start(MASTERS)
                    .await
                    .map_err(|e| failed("starting the masters", e))?;
                let ports: Vec<String> = (0..MASTERS).map(|i| cluster.port(i).to_string()).collect();
                let place = format!(
                    "{MASTERS} independent redis-server masters on 127.0.0.1 ports {}",
                    ports.join(", ")
                );
                (Box::new(cluster), None, place)
            }
            Masters::Compose(files) => {
                let spec = ProjectSpec {
                    files: files.clone(),
                    ..ProjectSpec::new("")
                };
                let project = ComposeProject::up(spec)
                    .await
                    .map_err(|e| failed("bringing up the compose masters", e))?;
                let compose = project
                    .compose()
                    .map_err(|e| failed("reaching the compose masters", e))?;
                if compose.len() != MASTERS {
                    return Err(failed(
                        "counting the compose masters",
                        format!(
                            "the demo needs {MASTERS} services, the files define {}",
                            compose.len()
                        ),
                    ));
                }
                let ports: Vec<String> = project.options().ports.iter().map(u16::to_string).collect();
                let place = format!(
                    "{MASTERS} independent masters, containers of compose project {}, on 127.0.0.1 ports {}",
                    project.name(),
                    ports.join(", ")
                );
                (Box::new(compose), Some(project), place)
            }
        };
    println!("quorlock demo: {place}");
    println!(
        "{} workers compete for {:?}, each hold a read-modify-write that only the lock keeps correct (TTL {:?}).\n",
        options.workers, RESOURCES, TTL
    );
    let locks = Quorlock::builder()
        .nodes(cluster.urls())
        .node_timeout(NODE_TIMEOUT)
        .build()
        .await
        .map_err(|e| failed("connecting", e))?;
    let clock = RunClock::new();
    let history = History::new(clock);
    let board = Arc::new(Board::new(4, RESOURCES.len(), history.clone()));
    let progress = Progress::new();
    let pool = workers::spawn(&locks, &board, options.workers, &RESOURCES);
    let mut rows = Vec::new();

    let phase = |index: usize, name: &str, up: usize| Row {
        name: format!("{}. {name}", index + 1),
        up,
        masters: MASTERS,
        stats: Default::default(),
    };

    let row = phase(0, "all masters up", MASTERS);
    rows.push(play(&board, &progress, 0, row, options.phase).await);

    let first_kill = clock.now();
    for i in [0, 1] {
        cluster.kill(i).await.map_err(|e| failed("killing a master", e))?;
    }
    println!("killed masters 0 and 1: 3 of 5 remain, still a majority; the work goes on");
    let row = phase(1, "masters 0, 1 killed", MASTERS - 2);
    rows.push(play(&board, &progress, 1, row, options.phase).await);

    let second_kill = clock.now();
    cluster.kill(2).await.map_err(|e| failed("killing a master", e))?;
    println!("killed master 2 as well: only 2 of 5 remain, no majority; every acquisition must be refused");
    let row = phase(2, "master 2 killed too", MASTERS - 3);
    let no_majority_start = clock.now();
    let row = play(&board, &progress, 2, row, options.phase).await;
    let no_majority_end = clock.now();
    if let Some((_, reason)) = &row.stats.reason {
        println!("refused for want of a majority, as it must be: {reason}");
    }
    rows.push(row);

    for i in [0, 1, 2] {
        cluster
            .restart(i, DataMode::Keep)
            .await
            .map_err(|e| failed("restarting a master", e))?;
    }
    let healed = clock.now();
    println!("restarted masters 0, 1 and 2: all 5 are back");
    let row = phase(3, "masters restored", MASTERS);
    rows.push(play(&board, &progress, 3, row, options.phase).await);

    workers::stop(&board, pool).await;
    let run_end = clock.now();
    drop(locks);
    drop(cluster);
    drop(_project);

    let faults = vec![
        FaultWindow {
            start: first_kill,
            end: healed,
            label: "master 0 killed".into(),
        },
        FaultWindow {
            start: first_kill,
            end: healed,
            label: "master 1 killed".into(),
        },
        FaultWindow {
            start: second_kill,
            end: healed,
            label: "master 2 killed: no majority".into(),
        },
    ];
    for fault in &faults {
        history.push_fault(fault.clone());
    }
    let records = history.records();
    println!("\n{}", report::table(&rows));

    let overlaps = checker::overlaps(&records);
    let (increments, counted) = board.witness();
    let lost = checker::lost_updates(increments, counted);
    let without_majority = checker::acquisitions_within(&records, &[(no_majority_start, no_majority_end)]);
    let worked = |i: usize| rows.get(i).is_some_and(|r| r.stats.acquired > 0);
    let live = worked(0) && worked(1) && worked(3);
    println!(
        "checks: {} overlapping holds, {} lost updates of {} increments, {} acquisitions without a majority, work in every phase with a majority: {}",
        overlaps.len(),
        lost.lost,
        lost.expected,
        without_majority.len(),
        if live { "yes" } else { "NO" }
    );

    let marker = |at, label: &str| Marker {
        at,
        label: label.to_owned(),
    };
    let notes = Annotations {
        restores: vec![marker(healed, "masters 0, 1, 2 restored")],
        transitions: vec![
            marker(first_kill, "masters 0, 1 killed"),
            marker(second_kill, "master 2 killed: no majority"),
            marker(healed, "masters 0, 1, 2 restored"),
        ],
        refusals: Some(board.refusals()),
    };
    let drawing = svg::picture(
        &records,
        &faults,
        run_end,
        &SvgOptions {
            title: format!(
                "quorlock demo: {} workers, {MASTERS} masters; 2 killed, then a 3rd, then restored",
                options.workers
            ),
            client_lanes: true,
            ..SvgOptions::default()
        },
        &notes,
    );
    if let Some(dir) = options.svg.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| failed("creating the timeline's directory", e))?;
    }
    std::fs::write(&options.svg, drawing).map_err(|e| failed("writing the timeline", e))?;
    println!(
        "timeline of every hold, a lane per worker, with the faults, the rates and a zoom on each change: {}",
        options.svg.display()
    );
    println!("all masters stopped.");

    let ok = overlaps.is_empty() && lost.lost == 0 && without_majority.is_empty() && live;
    if !ok {
        println!("a check FAILED: see above");
    }
    Ok(ok)
}

/// The harness failed while `what`.
fn failed(what: &str, err: impl std::fmt::Display) -> Stop {
    Stop::Failed(format!("{what}: {err}"))
}

/// Runs one phase for `length`, redrawing the progress line, and returns its row.
async fn play(board: &Board, progress: &Progress, index: usize, mut row: Row, length: Duration) -> Row {
    board.enter(index);
    let started = tokio::time::Instant::now();
    let mut ticker = tokio::time::interval(TICK);
    while started.elapsed() < length {
        ticker.tick().await;
        progress.update(&line(&row.name, started.elapsed(), &board.stats(index)));
    }
    row.stats = board.stats(index);
    progress.finish(&line(&row.name, length, &row.stats));
    row
}

/// A phase's progress: acquisitions, and refusals by reason.
fn line(name: &str, elapsed: Duration, stats: &PhaseStats) -> String {
    format!(
        "  {name:<24} {:>4.1}s  acquired {:>5}  refused: contention {:>5}, no majority {:>5}",
        elapsed.as_secs_f64(),
        stats.acquired,
        stats.contention,
        stats.no_majority
    )
}
