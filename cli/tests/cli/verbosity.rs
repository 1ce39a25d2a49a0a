//! How much quorlock says, as `--help` documents it: `-v` adds debug lines on stderr (stdout, a
//! token or the `--json` report, stays as it is; `RUST_LOG` overrides the levels), and
//! `QUORLOCK_QUIET` silences what `-q` does (warnings, the waiting line, a lock held elsewhere) and
//! nothing else: other errors still print, and stdout is untouched. `-q` itself is covered in
//! `flags`, `voice` and `waiting`.

use std::process::Output;
use std::time::Duration;

use expectrl::session::OsSession as Session;
use tokio::process::Command;

use super::common::{cluster, locks};
use super::{bare, code, json_of, output, stderr, BIN, LIMIT};

/// `quorlock SUB --nodes NODES --node-timeout 200ms REST...`.
fn on(nodes: &str, sub: &str, rest: &[&str]) -> Command {
    let mut cmd = bare();
    cmd.arg(sub)
        .args(["--nodes", nodes, "--node-timeout", "200ms"])
        .args(rest);
    cmd
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `quorlock: debug: ` and `quorlock: info: ` lines of stderr.
fn verbose_lines(out: &Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with("quorlock: debug: ") || l.starts_with("quorlock: info: "))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn verbose_logs_on_stderr_and_leaves_stdout_alone() {
    let c = cluster(3).await;
    let nodes = c.urls().join(",");

    // Healthy masters: nothing on stderr by default.
    let out = output(on(&nodes, "run", &["quiet-by-default", "--", "true"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "stderr without -v");

    // -v: what quorlock did, in its voice, on stderr; the command's own output alone on stdout.
    let out = output(on(
        &nodes,
        "run",
        &["-v", "verbose", "--", "echo", "from-the-command"],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stderr(&out);
    for needle in [
        "quorlock: info: lock acquired (key: verbose; validity_ms: ",
        "quorlock: debug: command started (pid: ",
        "quorlock: debug: lock released (",
    ] {
        assert!(text.contains(needle), "-v lacks {needle:?}:\n{text}");
    }
    for line in text.lines() {
        assert!(
            line.starts_with("quorlock: "),
            "not in quorlock's voice: {line:?}"
        );
    }
    assert_eq!(stdout(&out), "from-the-command\n");

    // -v before the subcommand counts the same.
    let out = output({
        let mut cmd = bare();
        cmd.args(["-v", "run", "--nodes", &nodes, "--node-timeout", "200ms"])
            .args(["early", "--", "true"]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("quorlock: info: lock acquired (key: early;"),
        "{}",
        stderr(&out)
    );

    // -v with --json: stdout is still the command's output, then one JSON object.
    let out = output(on(&nodes, "run", &["-v", "--json", "j", "--", "echo", "out"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!verbose_lines(&out).is_empty(), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 2, "{text:?}");
    assert_eq!(text.lines().next(), Some("out"), "{text:?}");
    let report = json_of(&out);
    assert_eq!(
        (report["ok"].as_bool(), report["command"].as_str()),
        (Some(true), Some("run"))
    );
    let out = output(on(&nodes, "status", &["-vv", "--json", "j"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let state: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("status -vv --json: stdout is one JSON object");
    assert_eq!(state["held"], false, "{state}");

    // -v with acquire: stdout is the token alone, as scripts read it.
    let out = output(on(&nodes, "acquire", &["-v", "--ttl", "5s", "tok"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!verbose_lines(&out).is_empty(), "{}", stderr(&out));
    let token = stdout(&out);
    assert!(
        token.len() == 33 && token.ends_with('\n') && token.trim().chars().all(|ch| ch.is_ascii_hexdigit()),
        "the token alone on stdout: {token:?}"
    );
    let out = output(on(&nodes, "release", &["tok", token.trim()])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    // RUST_LOG overrides the levels -v sets, both ways.
    let out = output({
        let mut cmd = on(&nodes, "run", &["-v", "logged", "--", "true"]);
        cmd.env("RUST_LOG", "quorlock=warn");
        cmd
    })
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "RUST_LOG=quorlock=warn beats -v");
    let out = output({
        let mut cmd = on(&nodes, "run", &["logged", "--", "true"]);
        cmd.env("RUST_LOG", "quorlock=debug");
        cmd
    })
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("quorlock: debug: command started"),
        "RUST_LOG=quorlock=debug without -v: {}",
        stderr(&out)
    );
}

#[tokio::test]
async fn quorlock_quiet_silences_warnings_and_held_locks_and_nothing_else() {
    let c = cluster(2).await;
    // Two live masters and a closed port: a warning about it (and a majority without it).
    let nodes = format!("{},redis://127.0.0.1:1", c.urls().join(","));
    let quiet = |value: &str, sub: &str, rest: &[&str]| {
        let mut cmd = on(&nodes, sub, rest);
        cmd.env("QUORLOCK_QUIET", value);
        cmd
    };

    // Set: the warning is not printed. Unset or falsey: it is.
    let out = output(quiet("1", "run", &["-n", "warned", "--", "true"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "QUORLOCK_QUIET=1 prints no warning");
    let out = output(on(&nodes, "run", &["-n", "warned", "--", "true"])).await;
    assert!(
        stderr(&out).starts_with("quorlock: warning: master not usable at build"),
        "unset: {}",
        stderr(&out)
    );
    for value in ["0", "false", "no"] {
        let out = output(quiet(value, "status", &["warned"])).await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("quorlock: warning: master not usable at build"),
            "QUORLOCK_QUIET={value} is not quiet: {}",
            stderr(&out)
        );
    }

    // A lock held elsewhere: nothing said, with or without -E; the exit code still tells.
    let held = locks(&c)
        .await
        .acquire("held", Duration::from_secs(30))
        .await
        .expect("hold");
    let out = output(quiet("1", "run", &["-n", "held", "--", "true"])).await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "",
        "QUORLOCK_QUIET=1 prints nothing for a held lock"
    );
    let out = output(quiet("true", "run", &["-n", "-E", "0", "held", "--", "true"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "the cron idiom through the environment");
    let out = output(on(&nodes, "run", &["-n", "held", "--", "true"])).await;
    assert!(
        stderr(&out).contains("held by another holder"),
        "unset: {}",
        stderr(&out)
    );
    // stdout is not silenced: the --json report still comes.
    let out = output(quiet("1", "acquire", &["--json", "-n", "held"])).await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert_eq!(stderr(&out), "");
    assert_eq!(json_of(&out)["refused"], "held");
    held.release().await.expect("release");
    // Nor the token.
    let out = output(quiet("1", "acquire", &["--ttl", "5s", "tok"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim().len(), 32, "the token");
    assert_eq!(stderr(&out), "");

    // Other errors still print: no majority, a bad URL.
    let down = "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3";
    let out = output({
        let mut cmd = on(down, "run", &["-n", "k", "--", "true"]);
        cmd.env("QUORLOCK_QUIET", "1");
        cmd
    })
    .await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("quorlock: gave up on \"k\"") && stderr(&out).lines().count() == 1,
        "only the error: {}",
        stderr(&out)
    );
    let out = output({
        let mut cmd = on("not-a-url", "status", &["k"]);
        cmd.env("QUORLOCK_QUIET", "1");
        cmd
    })
    .await;
    assert_eq!(code(&out), 78, "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("quorlock: invalid Redis master URL \"not-a-url\""),
        "{}",
        stderr(&out)
    );
}

/// `quorlock run -w 2s ... KEY -- true` on a pseudo-terminal, with `quiet` as `QUORLOCK_QUIET`.
fn on_terminal(nodes: &str, key: &str, quiet: Option<&str>) -> Session {
    let mut cmd = std::process::Command::new(BIN);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("QUORLOCK_") {
            cmd.env_remove(name);
        }
    }
    if let Some(value) = quiet {
        cmd.env("QUORLOCK_QUIET", value);
    }
    cmd.args(["run", "--nodes", nodes, "--node-timeout", "200ms", "-w", "2s"])
        .args([key, "--", "true"]);
    let mut session = Session::spawn(cmd).expect("spawn quorlock on a pseudo-terminal");
    session.set_expect_timeout(Some(LIMIT));
    session
}

#[tokio::test]
async fn quorlock_quiet_draws_no_waiting_line_on_a_terminal() {
    let c = cluster(3).await;
    let nodes = c.urls().join(",");
    let held = locks(&c)
        .await
        .acquire("quiet-pty", Duration::from_secs(30))
        .await
        .expect("hold");
    let (rest, code) = super::waiting::finish(on_terminal(&nodes, "quiet-pty", None)).await;
    assert_eq!(code, 75, "{rest:?}");
    assert!(
        rest.contains("quorlock: waiting "),
        "unset: the line is drawn: {rest:?}"
    );
    let (rest, code) = super::waiting::finish(on_terminal(&nodes, "quiet-pty", Some("1"))).await;
    assert_eq!(code, 75, "{rest:?}");
    assert_eq!(rest.trim(), "", "QUORLOCK_QUIET=1 draws nothing: {rest:?}");
    held.release().await.expect("release");
}
