//! Bad input given to the command, refused as the library refuses it (its `inputs` tests): an
//! invalid master URL, a password the masters refuse, too few masters reachable. Each is one line
//! on stderr naming what is wrong, with the exit code `--help` documents for it, never a panic,
//! never a password, and nothing left behind on the masters that did answer.

use std::process::Output;

use quorlock_chaos::{Cluster, ClusterOptions};
use serde_json::Value;
use tokio::process::Command;

use super::common::cluster;
use super::{bare, code, json_of, output, stderr, temp_dir};

/// `--help`'s exit code for a bad URL and rejected credentials.
const CONFIG: i32 = 78;
/// `--help`'s exit code for a lock not acquired within `--wait` (no majority reachable).
const NOT_ACQUIRED: i32 = 75;
/// `--help`'s exit code for a release fewer than a majority of masters confirmed.
const UNAVAILABLE: i32 = 69;

/// `quorlock SUB --nodes NODES --node-timeout 300ms REST...`.
fn on(sub: &str, nodes: &str, rest: &[&str]) -> Command {
    let mut cmd = bare();
    cmd.arg(sub)
        .args(["--nodes", nodes, "--node-timeout", "300ms"])
        .args(rest);
    cmd
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Not a panic (Rust's message, or its exit code 101), and exactly one line on stderr.
fn one_line_no_panic(out: &Output, what: &str) {
    let err = stderr(out);
    assert!(
        !err.contains("panicked") && code(out) != 101,
        "{what}: a panic: {err}"
    );
    assert_eq!(err.lines().count(), 1, "{what}: one line: {err:?}");
    assert!(err.starts_with("quorlock: "), "{what}: {err:?}");
}

/// Neither stdout nor stderr shows `secret`.
fn hidden(out: &Output, secret: &str, what: &str) {
    assert!(
        !stderr(out).contains(secret),
        "{what}: the password on stderr: {}",
        stderr(out)
    );
    assert!(
        !stdout(out).contains(secret),
        "{what}: the password on stdout: {}",
        stdout(out)
    );
}

/// The codes asserted here are the ones `quorlock --help` documents for these cases.
#[tokio::test]
async fn the_exit_codes_asserted_here_are_the_documented_ones() {
    let out = output({
        let mut cmd = bare();
        cmd.arg("--help");
        cmd
    })
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let help = stdout(&out);
    let documented = |fragment: &str| -> i32 {
        let line = help
            .lines()
            .find(|line| line.contains(fragment))
            .unwrap_or_else(|| panic!("--help says nothing of {fragment:?}:\n{help}"));
        line.split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no code on {line:?}"))
    };
    assert_eq!(documented("bad URL"), CONFIG);
    assert_eq!(documented("bad credentials"), CONFIG);
    assert_eq!(documented("no majority reachable"), NOT_ACQUIRED);
    assert_eq!(documented("release unconfirmed"), UNAVAILABLE);
}

/// Every URL the library refuses, refused by every command that takes masters: exit 78, one line
/// naming the URL as given and what is wrong with it, the command not run.
#[tokio::test]
async fn an_invalid_url_is_a_config_error_naming_it() {
    let dir = temp_dir("bad-url");
    let touch = format!("touch '{}'", dir.join("ran").display());
    let bad = [
        ("not-a-url", "not a URL; write it as redis://host:6379"),
        ("localhost:6379", "not a URL"),
        ("redis://host:99999", "invalid port number"),
        ("redis://127.0.0.1:0", "port 0"),
        (
            "http://127.0.0.1:6379",
            "the scheme must be redis:// or rediss:// (or unix:// for a socket), not http://",
        ),
        ("ftp://127.0.0.1:21", "not ftp://"),
        ("redis://:6379", "empty host"),
        ("redis://127.0.0.1:6379/?protocol=resp3", "RESP3 is not supported"),
    ];
    for (url, reason) in bad {
        let named = format!("quorlock: invalid Redis master URL {url:?}: ");
        let invocations: [(&str, Vec<&str>); 4] = [
            ("run", vec!["k", "-c", &touch]),
            ("acquire", vec!["k"]),
            ("release", vec!["k", "0123456789abcdef0123456789abcdef"]),
            ("status", vec!["k"]),
        ];
        for (sub, rest) in invocations {
            let what = format!("{sub} with {url}");
            let out = output(on(sub, url, &rest)).await;
            assert_eq!(code(&out), CONFIG, "{what}: {}", stderr(&out));
            one_line_no_panic(&out, &what);
            assert!(stderr(&out).starts_with(&named), "{what}: {}", stderr(&out));
            assert!(stderr(&out).contains(reason), "{what}: {}", stderr(&out));
            assert_eq!(stdout(&out), "", "{what}: nothing on stdout");
        }
        // --json: the same failure in the report.
        let out = output(on("status", url, &["--json", "k"])).await;
        assert_eq!(code(&out), CONFIG, "{url}: {}", stderr(&out));
        let report = json_of(&out);
        assert_eq!(report["exit_code"], CONFIG, "{report}");
        assert_eq!(report["ok"], false, "{report}");
        let error = report["error"].as_str().expect("error");
        assert!(
            error.contains(&format!("{url:?}")) && error.contains(reason),
            "{report}"
        );
    }
    assert!(!dir.join("ran").exists(), "a command ran with a bad URL");

    // One bad URL among good ones is named, wherever the list came from; the reachable ones are
    // not even tried.
    let list = "redis://127.0.0.1:1,not-a-url,redis://127.0.0.1:2";
    let file = dir.join("masters");
    std::fs::write(&file, list.replace(',', "\n")).expect("write the masters file");
    let from_file = {
        let mut cmd = bare();
        cmd.arg("status").arg("--nodes-file").arg(&file).arg("k");
        cmd
    };
    let from_env = {
        let mut cmd = bare();
        cmd.env("QUORLOCK_NODES", list).args(["status", "k"]);
        cmd
    };
    for (what, cmd) in [
        ("--nodes", on("status", list, &["k"])),
        ("file", from_file),
        ("env", from_env),
    ] {
        let out = output(cmd).await;
        assert_eq!(code(&out), CONFIG, "{what}: {}", stderr(&out));
        one_line_no_panic(&out, what);
        assert!(
            stderr(&out).starts_with("quorlock: invalid Redis master URL \"not-a-url\": not a URL"),
            "{what}: {}",
            stderr(&out)
        );
    }

    // A master listed twice would vote twice.
    let out = output(on(
        "run",
        "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:1",
        &["k", "-c", &touch],
    ))
    .await;
    assert_eq!(code(&out), CONFIG, "{}", stderr(&out));
    one_line_no_panic(&out, "duplicate");
    assert!(
        stderr(&out).contains("master 127.0.0.1:1 is listed twice (positions 0 and 2)"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.join("ran").exists(), "a command ran with a duplicate master");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bad URL is named without its password: neither the URL's own nor the environment's.
#[tokio::test]
async fn an_invalid_url_is_named_without_its_password() {
    let out = output(on("acquire", "redis://user:hunter2@host:notaport", &["k"])).await;
    assert_eq!(code(&out), CONFIG, "{}", stderr(&out));
    one_line_no_panic(&out, "URL password");
    assert!(
        stderr(&out).contains("\"redis://***@host:notaport\": invalid port number"),
        "{}",
        stderr(&out)
    );
    hidden(&out, "hunter2", "URL password");
    // QUORLOCK_PASSWORD is added to a URL that parses, which the library then refuses.
    let out = output({
        let mut cmd = on("status", "redis://127.0.0.1:6379/not-a-db", &["--json", "k"]);
        cmd.env("QUORLOCK_PASSWORD", "env-hunter2");
        cmd
    })
    .await;
    assert_eq!(code(&out), CONFIG, "{}", stderr(&out));
    one_line_no_panic(&out, "env password");
    assert!(
        stderr(&out).contains("127.0.0.1:6379/not-a-db"),
        "{}",
        stderr(&out)
    );
    hidden(&out, "env-hunter2", "env password");
}

/// Three masters with `requirepass`, and the password they require.
async fn protected() -> (Cluster, &'static str) {
    let right = "right-pw-7c1e";
    let c = Cluster::start_with(ClusterOptions {
        masters: 3,
        password: Some(right.to_owned()),
        ..ClusterOptions::default()
    })
    .await
    .expect("start masters with requirepass");
    (c, right)
}

fn urls_with(c: &Cluster, userinfo: &[&str]) -> String {
    (0..c.len())
        .map(|i| format!("redis://{}@127.0.0.1:{}", userinfo[i % userinfo.len()], c.port(i)))
        .collect::<Vec<_>>()
        .join(",")
}

/// A wrong password in the URLs: exit 78 and one line naming the master that refused it, from
/// every command, with or without `-vv` and `--json`; no password on stdout or stderr.
#[tokio::test]
async fn a_refused_password_is_a_config_error_that_never_prints_it() {
    let (c, right) = protected().await;
    let wrong = "wrong-pw-5d2a";
    let dir = temp_dir("bad-password");
    let touch = format!("touch '{}'", dir.join("ran").display());
    let refused_by_0 = format!("authentication failed on master 0 (127.0.0.1:{})", c.port(0));

    for userinfo in [format!(":{wrong}"), format!("default:{wrong}")] {
        let nodes = urls_with(&c, &[&userinfo]);
        let invocations: [(&str, Vec<&str>); 4] = [
            ("run", vec!["-w", "2s", "k", "-c", &touch]),
            ("acquire", vec!["-w", "2s", "k"]),
            ("release", vec!["k", "0123456789abcdef0123456789abcdef"]),
            ("status", vec!["k"]),
        ];
        for (sub, rest) in invocations {
            let what = format!("{sub} as {userinfo:?}");
            let out = output(on(sub, &nodes, &rest)).await;
            assert_eq!(code(&out), CONFIG, "{what}: {}", stderr(&out));
            one_line_no_panic(&out, &what);
            assert!(stderr(&out).contains(&refused_by_0), "{what}: {}", stderr(&out));
            assert_eq!(stdout(&out), "", "{what}");
            hidden(&out, wrong, &what);
            hidden(&out, right, &what);
        }
        // -vv (the redis client's debug events too) and --json: still not printed.
        let out = output(on(
            "run",
            &nodes,
            &["-vv", "--json", "-w", "2s", "k", "-c", &touch],
        ))
        .await;
        assert_eq!(code(&out), CONFIG, "{}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
        hidden(&out, wrong, "-vv --json");
        let report = json_of(&out);
        assert_eq!(report["exit_code"], CONFIG, "{report}");
        assert!(
            report["error"]
                .as_str()
                .is_some_and(|e| e.contains(&refused_by_0)),
            "{report}"
        );
    }

    // One master of three refusing is enough to refuse: it is named, by position and address.
    let nodes = urls_with(
        &c,
        &[&format!(":{right}"), &format!(":{right}"), &format!(":{wrong}")],
    );
    let out = output(on("run", &nodes, &["-w", "2s", "k", "-c", &touch])).await;
    assert_eq!(code(&out), CONFIG, "{}", stderr(&out));
    one_line_no_panic(&out, "master 2 refuses");
    assert!(
        stderr(&out).contains(&format!(
            "authentication failed on master 2 (127.0.0.1:{})",
            c.port(2)
        )),
        "{}",
        stderr(&out)
    );
    hidden(&out, wrong, "master 2 refuses");
    hidden(&out, right, "master 2 refuses");
    assert!(
        !dir.join("ran").exists(),
        "a command ran without the masters' consent"
    );

    // The right password, with everything logged: the command runs, the password stays unsaid.
    let nodes = urls_with(&c, &[&format!(":{right}")]);
    let out = output(on(
        "run",
        &nodes,
        &["-vv", "--json", "-w", "5s", "k", "-c", &touch],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(dir.join("ran").exists(), "the command did not run");
    assert_eq!(json_of(&out)["ok"], true);
    hidden(&out, right, "the right password, -vv");
    let _ = std::fs::remove_dir_all(&dir);
}

/// One master up, two URLs on closed ports: exit 75 with why (no majority, which masters failed),
/// from `run` and `acquire` of every kind, and no key of the attempts left on the master that
/// answered; a release there is unconfirmed (69).
#[tokio::test]
async fn an_unreachable_majority_is_not_acquired_and_leaves_nothing_behind() {
    let c = cluster(1).await;
    let nodes = format!("{},redis://127.0.0.1:1,redis://127.0.0.1:2", c.url(0));
    let dir = temp_dir("no-majority");
    let touch = format!("touch '{}'", dir.join("ran").display());
    let invocations: [(&str, Vec<&str>); 6] = [
        ("run", vec!["-w", "500ms", "maj", "-c", &touch]),
        ("run", vec!["-n", "--fence", "maj", "-c", &touch]),
        ("run", vec!["-n", "--shared", "maj", "-c", &touch]),
        ("run", vec!["-n", "--permits", "3", "maj", "-c", &touch]),
        ("acquire", vec!["-w", "500ms", "maj"]),
        ("acquire", vec!["-n", "--fence", "maj"]),
    ];
    for (sub, rest) in invocations {
        let what = format!("{sub} {rest:?}");
        let out = output(on(sub, &nodes, &rest)).await;
        assert_eq!(code(&out), NOT_ACQUIRED, "{what}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(!err.contains("panicked"), "{what}: {err}");
        let last = err.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("quorlock: gave up on \"maj\"") && last.contains("2 needed"),
            "{what}: {err}"
        );
        // Each failed master is named in the error; why (the refused connection) is in the error
        // or, where the lock kind's guard refused its vote first, in the warning at start.
        for port in ["127.0.0.1:1", "127.0.0.1:2"] {
            assert!(
                last.contains(&format!("({port}): ")),
                "{what}: {port} not named: {err}"
            );
            assert!(
                err.lines()
                    .any(|l| l.contains(port) && l.contains("connection failed")),
                "{what}: no reason for {port}: {err}"
            );
        }
        assert_eq!(stdout(&out), "", "{what}: no token printed");
        // Checked at once after the exit: the attempts' keys were released before it.
        // The record quorlock keeps on every master about the master itself stays, by design.
        let left: Vec<String> = c
            .keys(0, "*")
            .await
            .expect("KEYS on the live master")
            .into_iter()
            .filter(|k| k != "quorlock:master")
            .collect();
        assert!(
            left.is_empty(),
            "{what}: left behind on the live master: {left:?}"
        );
    }
    assert!(!dir.join("ran").exists(), "a command ran without a majority");

    // --json says why: no majority, not a conflict.
    let out = output(on("acquire", &nodes, &["--json", "-n", "maj"])).await;
    assert_eq!(code(&out), NOT_ACQUIRED, "{}", stderr(&out));
    let report: Value = json_of(&out);
    assert_eq!(report["refused"], "no_majority", "{report}");
    assert_eq!(report["exit_code"], NOT_ACQUIRED, "{report}");

    let out = output(on(
        "release",
        &nodes,
        &["maj", "0123456789abcdef0123456789abcdef"],
    ))
    .await;
    assert_eq!(code(&out), UNAVAILABLE, "{}", stderr(&out));
    assert!(
        stderr(&out)
            .lines()
            .last()
            .is_some_and(|l| l.contains("unconfirmed")),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        c.keys(0, "*").await.expect("KEYS"),
        vec!["quorlock:master".to_owned()],
        "only the master's own record is left"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
