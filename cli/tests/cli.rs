//! The `quorlock` binary against real masters: exclusion between processes, exit codes, a lost
//! lock stopping the command, signals releasing the lock (after the command's whole group is
//! gone), acquire/release from scripts reaching a slow master before the exit, status, the
//! warnings shown by default, and the restart grace on fresh masters.
//!
//! Each item of the command's interface has a module of its own under `cli/`: flock's flags and
//! the environment (`flags`), secrets off the command line (`secrets`), TLS (`tls`), the JSON
//! schemas (`json`), completions and the man page (`completions`), the waiting line through a
//! pseudo-terminal (`waiting`), the voice of warnings and errors (`voice`), bad input refused as
//! the library refuses it (`bad_input`), `--key-prefix` on the masters (`key_prefix`), and how
//! much is said: `-v` and `QUORLOCK_QUIET` (`verbosity`).

#[path = "cli/bad_input.rs"]
mod bad_input;
mod common;
#[path = "cli/completions.rs"]
mod completions;
#[path = "cli/flags.rs"]
mod flags;
#[path = "cli/json.rs"]
mod json;
#[path = "cli/key_prefix.rs"]
mod key_prefix;
#[path = "cli/kinds.rs"]
mod kinds;
#[path = "cli/secrets.rs"]
mod secrets;
#[path = "cli/tls.rs"]
mod tls;
#[path = "../../tests/tls_pki/mod.rs"]
mod tls_pki;
#[path = "cli/verbosity.rs"]
mod verbosity;
#[path = "cli/voice.rs"]
mod voice;
#[path = "cli/waiting.rs"]
mod waiting;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use common::{cluster, eventually, holders, locks};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use quorlock_chaos::{Cluster, ProxyGroup, ProxyMode};
use serde_json::Value;
use tokio::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_quorlock");
/// Generous bound on any one invocation on a loaded machine; never a speed assertion.
const LIMIT: Duration = Duration::from_secs(60);

/// `quorlock --nodes <cluster> --node-timeout 200ms ARGS...`, output captured.
fn quorlock(c: &Cluster, args: &[&str]) -> Command {
    quorlock_on(&c.urls(), "200ms", args)
}

/// `quorlock --nodes <urls> --node-timeout <node_timeout> ARGS...`, output captured.
fn quorlock_on(urls: &[String], node_timeout: &str, args: &[&str]) -> Command {
    let mut cmd = bare();
    cmd.arg("--nodes")
        .arg(urls.join(","))
        .args(["--node-timeout", node_timeout])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// `quorlock` with none of its variables from this process's environment, output captured.
fn bare() -> Command {
    let mut cmd = Command::new(BIN);
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy().into_owned();
        if name.starts_with("QUORLOCK_") || name == "REDISCLI_AUTH" || name == "RUST_LOG" {
            cmd.env_remove(name);
        }
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// The last line of stdout, as JSON (a run's report follows the command's own output).
fn json_of(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"))
}

/// Runs to completion within [`LIMIT`].
async fn output(mut cmd: Command) -> Output {
    tokio::time::timeout(LIMIT, cmd.output())
        .await
        .expect("quorlock finished in time")
        .expect("quorlock ran")
}

async fn finish(child: Child) -> Output {
    tokio::time::timeout(LIMIT, child.wait_with_output())
        .await
        .expect("quorlock finished in time")
        .expect("quorlock ran")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("quorlock exited, not killed")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `status --json`, with a majority of masters answering (exit 0).
async fn status_json(c: &Cluster, key: &str) -> Value {
    status_exiting(c, key, 0).await
}

/// `status --json`, checking its exit code: 69 when fewer than a majority answered.
async fn status_exiting(c: &Cluster, key: &str, expected: i32) -> Value {
    let out = output(quorlock(c, &["status", "--json", key])).await;
    assert_eq!(code(&out), expected, "{}", stderr(&out));
    serde_json::from_slice(&out.stdout).expect("status --json prints JSON")
}

fn shell(script: &str, dir: &Path) -> String {
    format!("cd '{}' && {script}", dir.display())
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "quorlock-cli-{name}-{}-{:x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[tokio::test]
async fn ten_concurrent_runs_never_overlap() {
    let c = cluster(3).await;
    let dir = temp_dir("exclusion");
    let script = shell(
        r#"echo "enter $QUORLOCK_TOKEN" >> log; sleep 0.05; echo "exit $QUORLOCK_TOKEN" >> log"#,
        &dir,
    );
    let runs: Vec<Child> = (0..10)
        .map(|_| {
            quorlock(
                &c,
                &[
                    "run", "--ttl", "5s", "--wait", "50s", "shared", "--", "sh", "-c", &script,
                ],
            )
            .spawn()
            .expect("spawn quorlock")
        })
        .collect();
    for run in runs {
        let out = finish(run).await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
    }
    let log = std::fs::read_to_string(dir.join("log")).expect("log");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 20, "{log}");
    let mut tokens = std::collections::HashSet::new();
    for pair in lines.chunks(2) {
        let token = pair[0]
            .strip_prefix("enter ")
            .expect("an enter line opens each interval");
        assert_eq!(pair[1], format!("exit {token}"), "intervals overlap:\n{log}");
        assert!(tokens.insert(token.to_owned()), "token reused:\n{log}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_held_key_gives_exit_75_and_the_command_never_runs() {
    let c = cluster(3).await;
    let dir = temp_dir("busy");
    let held = locks(&c)
        .await
        .acquire("busy", Duration::from_secs(20))
        .await
        .expect("acquire");
    let out = output(quorlock(
        &c,
        &[
            "run",
            "--wait",
            "300ms",
            "busy",
            "--",
            "sh",
            "-c",
            &shell("touch ran", &dir),
        ],
    ))
    .await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("held by another holder"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        stderr(&out).trim().lines().count(),
        1,
        "one line: {}",
        stderr(&out)
    );
    assert!(!dir.join("ran").exists());
    held.release().await.expect("release");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_commands_exit_code_and_environment_pass_through() {
    let c = cluster(3).await;
    let check_env = r#"test "$QUORLOCK_KEY" = codes && test ${#QUORLOCK_TOKEN} -eq 32 && test "$QUORLOCK_VALIDITY_MS" -gt 0 || exit 99; exit 7"#;
    let out = output(quorlock(&c, &["run", "codes", "--", "sh", "-c", check_env])).await;
    assert_eq!(code(&out), 7, "{}", stderr(&out));
    let out = output(quorlock(&c, &["run", "codes", "--", "sh", "-c", "kill -KILL $$"])).await;
    assert_eq!(code(&out), 128 + 9, "killed by SIGKILL: {}", stderr(&out));
    let out = output(quorlock(&c, &["run", "codes", "--", "no-such-command-here"])).await;
    assert_eq!(code(&out), 127, "{}", stderr(&out));
    // Every run released its lock on the way out.
    assert_eq!(holders(&c, &[0, 1, 2], "codes").await, 0);
}

#[tokio::test]
async fn a_majority_stopped_mid_run_stops_the_command_with_exit_76() {
    let mut c = cluster(3).await;
    let dir = temp_dir("lost");
    let pid_file = dir.join("pid");
    let run = quorlock(
        &c,
        &[
            "run",
            "--ttl",
            "2s",
            "--grace",
            "1s",
            "stopped",
            "--",
            "sh",
            "-c",
            &shell("echo $$ > pid; exec sleep 60", &dir),
        ],
    )
    .spawn()
    .expect("spawn quorlock");
    let started = eventually(LIMIT, || async {
        std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
    })
    .await;
    assert!(started, "the command started");
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .expect("pid")
        .trim()
        .parse()
        .expect("pid");
    c.pause(0).expect("pause");
    c.pause(1).expect("pause");
    let out = finish(run).await;
    assert_eq!(code(&out), 76, "{}", stderr(&out));
    assert!(stderr(&out).contains("lost"), "{}", stderr(&out));
    assert!(kill(Pid::from_raw(pid), None).is_err(), "the command was stopped");
    // Two of three masters paused: a partial view.
    assert_eq!(status_exiting(&c, "stopped", 69).await["held"], false);
    c.resume(0).expect("resume");
    c.resume(1).expect("resume");
    let free = eventually(Duration::from_secs(10), || async {
        let state = status_json(&c, "stopped").await;
        state["held"] == false && state["reachable"] == 3
    })
    .await;
    assert!(
        free,
        "not held once the masters are back: {}",
        status_json(&c, "stopped").await
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn sigterm_to_quorlock_stops_the_command_and_releases_at_once() {
    let c = cluster(3).await;
    let run = quorlock(&c, &["run", "--ttl", "60s", "term", "--", "sleep", "60"])
        .spawn()
        .expect("spawn quorlock");
    let held = eventually(LIMIT, || async { holders(&c, &[0, 1, 2], "term").await == 3 }).await;
    assert!(held, "the lock was taken");
    let pid = run.id().expect("running");
    kill(Pid::from_raw(i32::try_from(pid).expect("pid")), Signal::SIGTERM).expect("signal quorlock");
    let out = finish(run).await;
    assert_eq!(
        code(&out),
        128 + 15,
        "the command died of the forwarded SIGTERM: {}",
        stderr(&out)
    );
    // Released on every master before quorlock exited: not after 60 s.
    assert_eq!(holders(&c, &[0, 1, 2], "term").await, 0, "released everywhere");
}

/// `acquire`, `release` and `run` return at the majority, but the process exits only once a slower
/// master got its part: checked at once after each exit.
#[tokio::test]
async fn a_slow_master_gets_the_key_and_loses_it_before_quorlock_exits() {
    let c = cluster(3).await;
    let proxies = ProxyGroup::start(&c, 1).await.expect("proxies");
    proxies
        .set_master_mode(2, ProxyMode::Latency(Duration::from_millis(200)))
        .expect("latency");
    let urls = proxies.urls(0);
    let out = output(quorlock_on(&urls, "2s", &["acquire", "--ttl", "30s", "slow"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let token = String::from_utf8(out.stdout).expect("utf-8").trim().to_owned();
    assert_eq!(
        holders(&c, &[0, 1, 2], "slow").await,
        3,
        "the slow master's SET was cut off"
    );
    let out = output(quorlock_on(&urls, "2s", &["release", "slow", &token])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        holders(&c, &[0, 1, 2], "slow").await,
        0,
        "the slow master's release was cut off"
    );
    let out = output(quorlock_on(
        &urls,
        "2s",
        &["run", "--ttl", "30s", "slow", "--", "true"],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        holders(&c, &[0, 1, 2], "slow").await,
        0,
        "the slow master's release after the command was cut off"
    );
}

/// The library's warnings reach the user without `-v`: an even number of masters, and a master
/// that cannot be reached at start (a typo in one of three URLs leaves no fault tolerance).
#[tokio::test]
async fn warnings_about_the_masters_are_shown_by_default() {
    let c = cluster(2).await;
    let out = output(quorlock(&c, &["status", "warned"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("even number of masters"),
        "{}",
        stderr(&out)
    );
    let mut urls = c.urls();
    urls.push("redis://127.0.0.1:1".to_owned());
    let out = output(quorlock_on(&urls, "200ms", &["status", "warned"])).await;
    assert!(
        stderr(&out).contains("master not usable at build") && stderr(&out).contains("127.0.0.1:1"),
        "{}",
        stderr(&out)
    );
}

/// Masters just started without `appendfsync always` do not vote during the restart grace, and the
/// error says why; `--restart-grace 0s` lets them vote at once.
#[tokio::test]
async fn fresh_masters_without_fsync_vote_only_with_no_restart_grace() {
    let c = quorlock_chaos::Cluster::start_with(quorlock_chaos::ClusterOptions {
        masters: 3,
        appendfsync_always: false,
        ..quorlock_chaos::ClusterOptions::default()
    })
    .await
    .expect("start masters");
    let run = |grace| {
        quorlock(
            &c,
            &[
                "--restart-grace",
                grace,
                "run",
                "--wait",
                "0s",
                "fresh",
                "--",
                "true",
            ],
        )
    };
    // A grace far longer than the test: the outcome does not hang on how fast the masters started.
    let out = output(run("1h")).await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("without appendfsync always; vote ignored"),
        "{}",
        stderr(&out)
    );
    let out = output(run("0s")).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

/// Whether process `pid` is running: a zombie (exited, not reaped) is not.
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        !matches!(state, Some('Z' | 'X') | None)
    })
}

/// A stop reaches what the command left running: a background job that ignores the forwarded
/// signal outlives the command, and is killed at the end of the grace period, before the release.
#[tokio::test]
async fn a_background_job_that_ignores_the_stop_is_killed_before_the_release() {
    let c = cluster(3).await;
    let dir = temp_dir("group");
    let job = dir.join("job");
    let script = shell(
        "sh -c 'trap \"\" TERM INT; echo $$ > job.tmp; mv job.tmp job; sleep 60' >/dev/null 2>&1 & wait",
        &dir,
    );
    let run = quorlock(
        &c,
        &[
            "run", "--ttl", "60s", "--grace", "300ms", "group", "--", "sh", "-c", &script,
        ],
    )
    .spawn()
    .expect("spawn quorlock");
    let started = eventually(LIMIT, || async { job.exists() }).await;
    assert!(started, "the background job never started");
    let pid = std::fs::read_to_string(&job).expect("job pid");
    let pid = pid.trim();
    assert!(running(pid), "the background job is running");
    let quorlock_pid = run.id().expect("running");
    kill(
        Pid::from_raw(i32::try_from(quorlock_pid).expect("pid")),
        Signal::SIGTERM,
    )
    .expect("signal quorlock");
    let out = finish(run).await;
    assert_eq!(code(&out), 128 + 15, "{}", stderr(&out));
    assert!(!running(pid), "the background job outlived quorlock");
    assert_eq!(holders(&c, &[0, 1, 2], "group").await, 0, "released");
    std::fs::remove_dir_all(&dir).ok();
}

/// quorlock killed by SIGKILL can neither renew nor release: the command, the job it left in the
/// background and its foreground child must all stop with it, not run on without the lock.
#[tokio::test]
async fn the_command_and_its_children_die_with_a_killed_quorlock() {
    let c = cluster(3).await;
    let dir = temp_dir("tether");
    // Not `shell`: its `cd ... &&` would go to the background with the job.
    let script = format!(
        "cd '{}' || exit 1; sleep 60 & echo $! > job.tmp; mv job.tmp job; echo $$ > shell.tmp; mv shell.tmp shell; sleep 60; echo ran-on > after",
        dir.display()
    );
    let mut run = quorlock(&c, &["run", "--ttl", "60s", "tether", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn quorlock");
    let started = eventually(LIMIT, || async {
        dir.join("job").exists() && dir.join("shell").exists()
    })
    .await;
    assert!(started, "the command never started");
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .expect("pid file")
            .trim()
            .to_owned()
    };
    let (job, shell_pid) = (read("job"), read("shell"));
    assert!(running(&job) && running(&shell_pid), "the command is running");
    run.start_kill().expect("SIGKILL quorlock");
    run.wait().await.expect("quorlock killed");
    let gone = eventually(LIMIT, || async { !running(&job) && !running(&shell_pid) }).await;
    assert!(gone, "the command or its background job outlived quorlock");
    assert!(
        !dir.join("after").exists(),
        "the command went on after quorlock died"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test]
async fn acquire_release_and_status_with_one_master_down() {
    let mut c = cluster(3).await;
    let out = output(quorlock(&c, &["acquire", "--ttl", "20s", "steps"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let token = String::from_utf8(out.stdout).expect("utf-8").trim().to_owned();
    assert_eq!(token.len(), 32, "the token alone on stdout: {token:?}");
    // The lock outlives the acquiring process, on every master: the acquire returns at the quorum,
    // and the process waits for the slower masters' SET before it exits.
    assert_eq!(holders(&c, &[0, 1, 2], "steps").await, 3);
    // Take down a master the lock can do without.
    let down = 1;
    let up = [0, 2];
    c.kill(down).expect("kill");

    let state = status_json(&c, "steps").await;
    assert_eq!(state["held"], true, "{state}");
    assert_eq!(state["holder"], token.as_str(), "{state}");
    assert_eq!(state["reachable"], 2, "{state}");
    assert_eq!(state["nodes"][down]["reachable"], false, "{state}");
    for &i in &up {
        assert_eq!(state["nodes"][i]["token"], token.as_str(), "{state}");
        let pttl = state["nodes"][i]["pttl_ms"].as_u64().expect("pttl");
        assert!(pttl > 0 && pttl <= 20_000, "{state}");
    }
    let table = output(quorlock(&c, &["status", "steps"])).await;
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(
        table.contains("is held") && table.contains("unreachable"),
        "{table}"
    );

    let out = output(quorlock(
        &c,
        &["release", "steps", "0123456789abcdef0123456789abcdef"],
    ))
    .await;
    assert_eq!(code(&out), 76, "a wrong token releases nothing: {}", stderr(&out));
    let out = output(quorlock(&c, &["release", "steps", &token])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let state = status_json(&c, "steps").await;
    assert_eq!(state["held"], false, "{state}");
    assert_eq!(state["nodes"][up[0]]["token"], Value::Null, "{state}");

    // With a majority down the state is still printed, but the exit says it is partial.
    c.kill(up[1]).expect("kill");
    let state = status_exiting(&c, "steps", 69).await;
    assert_eq!(state["reachable"], 1, "{state}");
}

#[tokio::test]
async fn usage_and_config_errors_have_their_own_codes() {
    let out = output({
        let mut cmd = bare();
        cmd.args(["status", "k"]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 78, "{}", stderr(&out));
    assert!(stderr(&out).contains("QUORLOCK_NODES"), "{}", stderr(&out));
    let out = output({
        let mut cmd = bare();
        cmd.args(["run", "--ttl", "30", "k", "--", "true"]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"30\""),
        "names the bad value: {}",
        stderr(&out)
    );
    assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
    // A zero TTL or node timeout is a bad flag like any other, refused before any master is asked.
    for flags in [["--ttl", "0s"], ["--node-timeout", "0ms"]] {
        let out = output({
            let mut cmd = bare();
            cmd.args(["--nodes", "redis://127.0.0.1:1", "acquire"])
                .args(flags)
                .arg("k");
            cmd
        })
        .await;
        assert_eq!(code(&out), 64, "{flags:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("greater than zero"), "{}", stderr(&out));
    }
}

#[tokio::test]
async fn fencing_tokens_strictly_increase_across_runs() {
    let c = cluster(3).await;
    let mut last = 0u64;
    for _ in 0..4 {
        let out = output(quorlock(
            &c,
            &[
                "run",
                "--fence",
                "fenced",
                "--",
                "sh",
                "-c",
                "echo $QUORLOCK_FENCE",
            ],
        ))
        .await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let fence: u64 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("QUORLOCK_FENCE is a number");
        assert!(fence > last, "fencing token {fence} after {last}");
        last = fence;
    }
    let out = output(quorlock(
        &c,
        &["run", "plain", "--", "sh", "-c", r#"test -z "$QUORLOCK_FENCE""#],
    ))
    .await;
    assert_eq!(code(&out), 0, "no fencing token without --fence");
}

/// The PTTL of `key` on every master of `c`, in milliseconds (-2 where it is absent).
async fn pttls(c: &Cluster, key: &str) -> Vec<i64> {
    let mut out = Vec::new();
    for i in 0..c.len() {
        let mut conn = c.client(i).await.expect("connect to master");
        out.push(
            redis::cmd("PTTL")
                .arg(key)
                .query_async(&mut conn)
                .await
                .expect("PTTL"),
        );
    }
    out
}

/// Runs `quorlock run --ttl 2s [--lock-delay DELAY] KEY -- sleep 60`, stops it with SIGSTOP once it
/// holds the lock, lets four seconds pass (two TTLs: its validity has ended, and a key without a
/// delay has expired), and tries the lock once from a library client. Returns that attempt's
/// outcome and the key's PTTLs read after it.
async fn stopped_holder(c: &Cluster, key: &str, delay: Option<&str>) -> (bool, Vec<i64>) {
    let mut args = vec!["run", "--ttl", "2s"];
    if let Some(delay) = delay {
        args.extend(["--lock-delay", delay]);
    }
    args.extend([key, "--", "sleep", "60"]);
    let run = quorlock(c, &args).spawn().expect("spawn quorlock");
    let held = eventually(LIMIT, || async { holders(c, &[0, 1, 2], key).await == 3 }).await;
    assert!(held, "the lock was taken");
    let pid = Pid::from_raw(i32::try_from(run.id().expect("running")).expect("pid"));
    kill(pid, Signal::SIGSTOP).expect("stop quorlock");
    tokio::time::sleep(Duration::from_secs(4)).await;
    let taken = locks(c)
        .await
        .lock(key, Duration::from_secs(1))
        .try_acquire()
        .await;
    let after = pttls(c, key).await;
    kill(pid, Signal::SIGKILL).expect("kill quorlock");
    drop(run);
    (taken.is_ok(), after)
}

/// Lock-delay through the CLI: a holder process stopped (SIGSTOP) past its validity keeps its lock
/// closed to every client for the delay, its key set for the TTL plus the delay by the watchdog's
/// renewals; the control without `--lock-delay` is overlapped once the TTL has passed.
#[tokio::test]
async fn a_stopped_holder_keeps_its_lock_closed_for_the_lock_delay() {
    let c = cluster(3).await;
    let (taken, after) = stopped_holder(&c, "stopped:delay", Some("30s")).await;
    assert!(
        !taken,
        "nobody takes the lock of a holder stopped inside its lock-delay"
    );
    assert!(
        after.iter().filter(|ms| **ms > 10_000).count() >= 2,
        "the key lives the TTL plus the delay on a majority: {after:?}"
    );
    let (taken, after) = stopped_holder(&c, "stopped:none", None).await;
    assert!(
        taken,
        "without a lock-delay the stopped holder's lock is taken: {after:?}"
    );
}
