//! The compose backend against a real Docker engine: a project of five masters from the
//! offline image comes up, its masters are killed, paused, restarted with their volume kept
//! or wiped, and cut off with `docker network disconnect`, each checked from the outside; and
//! nothing labelled with the run is left once the project is gone, even what a killed run
//! left behind; and a partition through client containers of their own is judged like any
//! run. Without an engine (or without `docker compose`) the tests record their skip and pass,
//! unless `QUORLOCK_REQUIRE_DOCKER=1` (as `chaos/test` sets it where Docker runs) makes that a
//! failure; `chaos/tests/compose.rs` covers the exact calls with a fake `docker` either way.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use quorlock_chaos::compose::drive as compose_drive;
use quorlock_chaos::compose::project::{ComposeProject, ProjectSpec};
use quorlock_chaos::compose::sweep::RUN_LABEL;
use quorlock_chaos::run::RunOptions;
use quorlock_chaos::skip::{skip, Need};
use quorlock_chaos::{scenario, FaultAction};
use quorlock_chaos::{Backend, Compose, DataMode};
use redis::AsyncCommands;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `true` when a real engine with Compose v2 and the master image are here; builds the image
/// (cached by its inputs) when only it is missing.
fn engine() -> bool {
    let works = |args: &[&str]| {
        Command::new("docker")
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !works(&["info"]) || !works(&["compose", "version"]) {
        skip(
            Need::Docker,
            "the real compose test does not run",
            "no Docker engine with Compose v2 here (`docker info` or `docker compose version` fails)",
        );
        return false;
    }
    if !works(&["image", "inspect", "quorlock-master:local"]) {
        let status = Command::new(repo().join("chaos/docker/build-image"))
            .status()
            .expect("running chaos/docker/build-image");
        assert!(status.success(), "chaos/docker/build-image failed");
    }
    true
}

/// One test of this file at a time: every project's start sweeps the leftovers of dead runs, so a
/// project started beside the sweeping test would remove the stale resources that test made to be
/// swept, before it counted them.
static ENGINE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn up() -> ComposeProject {
    let mut spec = ProjectSpec::new(repo().join("chaos/docker/compose.masters.yml"));
    spec.ready_timeout = Duration::from_secs(90);
    ComposeProject::up(spec)
        .await
        .expect("docker compose up of the masters")
}

/// Every resource of `kind` (`ps -a`, `network ls`, `volume ls`) labelled with `run_id`.
fn labelled(kind: &[&str], run_id: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args(kind)
        .args(["-q", "--filter", &format!("label={RUN_LABEL}={run_id}")])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(String::from)
        .collect()
}

fn leftovers(run_id: &str) -> Vec<String> {
    let mut all = labelled(&["ps", "-a"], run_id);
    all.extend(labelled(&["network", "ls"], run_id));
    all.extend(labelled(&["volume", "ls"], run_id));
    all
}

async fn conn(url: &str) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    let client = redis::Client::open(url)?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_millis(500)))
        .set_response_timeout(Some(Duration::from_millis(500)));
    client.get_multiplexed_async_connection_with_config(&config).await
}

async fn ping(url: &str) -> bool {
    match conn(url).await {
        Ok(mut c) => redis::cmd("PING").query_async::<String>(&mut c).await.is_ok(),
        Err(_) => false,
    }
}

async fn get(url: &str, key: &str) -> Option<String> {
    let mut c = conn(url).await.expect("connecting to a master");
    c.get(key).await.expect("GET")
}

async fn set(url: &str, key: &str) {
    let mut c = conn(url).await.expect("connecting to a master");
    let _: () = c.set(key, "held").await.expect("SET");
}

#[tokio::test]
async fn masters_are_killed_paused_restarted_and_cut_off_for_real() {
    if !engine() {
        return;
    }
    let _one = ENGINE.lock().await;
    let project = up().await;
    let run_id = project.run_id().to_string();
    let mut compose: Compose = project.compose().unwrap();
    let backend: &mut dyn Backend = &mut compose;
    assert_eq!(backend.name(), "compose");
    assert_eq!(backend.len(), 5);
    let urls = backend.urls();
    for url in &urls {
        assert!(ping(url).await, "{url} answers once up");
    }
    // Each master on its own network: five networks, five volumes, five containers.
    assert_eq!(labelled(&["network", "ls"], &run_id).len(), 5);
    assert_eq!(labelled(&["volume", "ls"], &run_id).len(), 5);
    assert_eq!(labelled(&["ps", "-a"], &run_id).len(), 5);

    // Kill, then restart keeping the volume: the fsynced key is back.
    set(&urls[0], "kept").await;
    backend.kill(0).await.unwrap();
    assert!(!ping(&urls[0]).await, "a killed master does not answer");
    backend.restart(0, DataMode::Keep).await.unwrap();
    assert_eq!(get(&urls[0], "kept").await.as_deref(), Some("held"));

    // Restart wiping the volume: the key is gone, the master answers on the same port.
    set(&urls[1], "wiped").await;
    backend.restart(1, DataMode::Wipe).await.unwrap();
    assert_eq!(get(&urls[1], "wiped").await, None);

    // Pause: the master holds connections but answers nothing; resume: it answers again.
    backend.pause(2).await.unwrap();
    assert!(!ping(&urls[2]).await, "a paused master does not answer");
    backend.resume(2).await.unwrap();
    assert!(ping(&urls[2]).await, "a resumed master answers");

    // Cut off: unreachable, though still running with its data; connected back: reachable.
    set(&urls[3], "cut").await;
    compose.disconnect(3).await.unwrap();
    assert!(!ping(&urls[3]).await, "a disconnected master is unreachable");
    compose.disconnect(3).await.unwrap();
    compose.connect(3).await.unwrap();
    let mut back = false;
    for _ in 0..50 {
        if ping(&urls[3]).await {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(back, "a reconnected master answers on its port again");
    assert_eq!(get(&urls[3], "cut").await.as_deref(), Some("held"));

    let swept = project.down().unwrap();
    assert_eq!(
        (swept.containers, swept.networks, swept.volumes),
        (5, 5, 5),
        "{swept:?}"
    );
    assert_eq!(leftovers(&run_id), Vec::<String>::new());
    for url in &urls {
        assert!(!ping(url).await, "{url} is gone with its project");
    }
}

#[tokio::test]
async fn a_killed_runs_leftovers_are_swept_and_a_dropped_project_leaves_nothing() {
    if !engine() {
        return;
    }
    let _one = ENGINE.lock().await;
    // What a harness killed with SIGKILL leaves: labelled resources of a process that is gone.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let stale = format!("{dead}-00000000deadbeef");
    let label = format!("{RUN_LABEL}={stale}");
    let made = |args: &[&str]| {
        let out = Command::new("docker").args(args).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    made(&[
        "network",
        "create",
        "--label",
        &label,
        &format!("qlchaos-{stale}-net"),
    ]);
    made(&[
        "volume",
        "create",
        "--label",
        &label,
        &format!("qlchaos-{stale}-vol"),
    ]);
    made(&[
        "create",
        "--label",
        &label,
        "--name",
        &format!("qlchaos-{stale}-c"),
        "quorlock-master:local",
    ]);
    assert_eq!(leftovers(&stale).len(), 3);

    let project = up().await;
    let run_id = project.run_id().to_string();
    assert_eq!(
        leftovers(&stale),
        Vec::<String>::new(),
        "the sweep on start removes them"
    );
    // Another test's start may have swept them first; either way they are gone.
    let swept = project.swept();
    if swept.runs.contains(&stale) {
        assert!(
            swept.containers >= 1 && swept.networks >= 1 && swept.volumes >= 1,
            "{swept:?}"
        );
    }
    // A live run (this one) is not swept by another start.
    assert_eq!(leftovers(&run_id).len(), 15);

    // Dropping the guard (the path of an error or a signal) removes everything of the run.
    drop(project);
    assert_eq!(leftovers(&run_id), Vec::<String>::new());
}

#[tokio::test]
async fn clients_in_containers_are_partitioned_for_real_and_leave_nothing() {
    if !engine() {
        return;
    }
    let _one = ENGINE.lock().await;
    let project = up().await;
    let run_id = project.run_id().to_string();
    let mut opts = RunOptions::new(*scenario::find("partition").unwrap());
    opts.clients = 4;
    opts.resources = 2;
    opts.ttl = Duration::from_secs(1);
    opts.duration = Duration::from_secs(6);
    opts.seed = 20_261_126;
    let binary = Path::new(env!("CARGO_BIN_EXE_quorlock-chaos"));
    let report = compose_drive::run(opts, &project, binary).await.unwrap();
    assert_eq!(report.backend, "compose");
    assert!(report.overlaps.is_empty(), "{:?}", report.overlaps);
    assert!(
        report.acquired_without_majority.is_empty(),
        "{:?}",
        report.acquired_without_majority
    );
    assert_eq!(report.lost_updates.lost, 0);
    assert!(report.leaks.is_empty(), "{:?}", report.leaks);
    // Both groups' containers reported, and the partition really was applied.
    for group in 0..2 {
        assert!(
            report
                .records
                .iter()
                .any(|r| r.client % 2 == group && r.acquired.is_some()),
            "group {group} acquired nothing"
        );
    }
    assert!(report
        .applied
        .iter()
        .any(|f| matches!(f.action, FaultAction::Partition { .. })));
    // Two client containers and a witness beside the five masters, all labelled with the run.
    assert_eq!(labelled(&["ps", "-a"], &run_id).len(), 8);
    drop(project);
    assert_eq!(leftovers(&run_id), Vec::<String>::new());
}
