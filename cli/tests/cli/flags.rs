//! flock's flags with flock's meaning (`-w`, `-n`, `-E`, `-c`), every option from the
//! environment, the command line winning over it, and each subcommand's help naming only its own
//! options with their variables.

use std::time::Duration;

use super::common::{cluster, holders, locks};
use super::{bare, code, output, quorlock, stderr, temp_dir};

#[tokio::test]
async fn nonblock_and_the_conflict_exit_code_make_a_held_lock_a_quiet_skip() {
    let c = cluster(3).await;
    let dir = temp_dir("flags-skip");
    let held = locks(&c)
        .await
        .acquire("skip", Duration::from_secs(20))
        .await
        .expect("acquire");
    let touch = format!("touch '{}'", dir.join("ran").display());
    // -n: one attempt, exit 75 and one line when the lock is held.
    let out = output(quorlock(&c, &["run", "-n", "skip", "-c", &touch])).await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("held by another holder"),
        "{}",
        stderr(&out)
    );
    // -E 0 -q: the cron idiom, exit 0 and nothing printed.
    let out = output(quorlock(
        &c,
        &["run", "-n", "-E", "0", "-q", "skip", "-c", &touch],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "-q prints nothing for a held lock");
    // -E N without -q still says why.
    let out = output(quorlock(
        &c,
        &["acquire", "--nonblock", "--conflict-exit-code", "3", "skip"],
    ))
    .await;
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("held by another holder"),
        "{}",
        stderr(&out)
    );
    assert!(!dir.join("ran").exists(), "the command ran without the lock");
    held.release().await.expect("release");
    // -c runs a shell string through sh -c, under the lock, with its environment.
    let script = format!(
        "test -n \"$QUORLOCK_TOKEN\" && echo \"$QUORLOCK_KEY\" > '{}' && exit 4",
        dir.join("ran").display()
    );
    let out = output(quorlock(&c, &["run", "-w", "5s", "skip", "-c", &script])).await;
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(dir.join("ran")).expect("ran").trim(),
        "skip"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn the_conflict_exit_code_is_not_for_masters_that_do_not_answer() {
    // Nothing listens on these ports: no majority, which is not a conflict.
    let out = output({
        let mut cmd = bare();
        cmd.args([
            "run",
            "--nodes",
            "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3",
            "-n",
            "-E",
            "0",
            "-q",
            "k",
            "--",
            "true",
        ]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not acquired"),
        "still said with -q: {}",
        stderr(&out)
    );
}

#[tokio::test]
async fn every_option_from_the_environment_and_the_command_line_wins() {
    let c = cluster(3).await;
    let env = |cmd: &mut tokio::process::Command| {
        cmd.env("QUORLOCK_NODES", c.urls().join(","))
            .env("QUORLOCK_NODE_TIMEOUT", "200ms")
            .env("QUORLOCK_TTL", "7s")
            .env("QUORLOCK_WAIT", "2s")
            .env("QUORLOCK_KEY_PREFIX", "env:")
            .env("QUORLOCK_JSON", "1");
    };
    let out = output({
        let mut cmd = bare();
        env(&mut cmd);
        cmd.args(["acquire", "prefixed"]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let report = super::json_of(&out);
    assert_eq!(report["ttl_ms"], 7000, "QUORLOCK_TTL: {report}");
    assert_eq!(
        holders(&c, &[0, 1, 2], "env:prefixed").await,
        3,
        "QUORLOCK_KEY_PREFIX"
    );
    assert_eq!(holders(&c, &[0, 1, 2], "prefixed").await, 0);

    // The same lock again: -n on the command line beats QUORLOCK_WAIT, QUORLOCK_CONFLICT_EXIT_CODE
    // applies, and --ttl beats QUORLOCK_TTL.
    let out = output({
        let mut cmd = bare();
        env(&mut cmd);
        cmd.env("QUORLOCK_CONFLICT_EXIT_CODE", "9")
            .args(["acquire", "-n", "--ttl", "3s", "prefixed"]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 9, "{}", stderr(&out));
    let report = super::json_of(&out);
    assert_eq!(report["ttl_ms"], 3000, "{report}");
    assert_eq!(report["refused"], "held", "{report}");

    // QUORLOCK_NONBLOCK, and a bad value in the environment is named like a bad flag.
    let out = output({
        let mut cmd = bare();
        env(&mut cmd);
        cmd.env_remove("QUORLOCK_WAIT")
            .env("QUORLOCK_NONBLOCK", "yes")
            .args(["acquire", "prefixed"]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("after 1 attempt in"),
        "one attempt: {}",
        stderr(&out)
    );
    let out = output({
        let mut cmd = bare();
        env(&mut cmd);
        cmd.env("QUORLOCK_TTL", "30").args(["acquire", "prefixed"]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    assert!(stderr(&out).contains("\"30\""), "{}", stderr(&out));
}

#[tokio::test]
async fn rival_options_are_refused_by_name() {
    let out = output({
        let mut cmd = bare();
        cmd.args([
            "status",
            "--nodes",
            "redis://127.0.0.1:1",
            "--nodes-file",
            "/nonexistent",
            "k",
        ]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    assert!(stderr(&out).contains("--nodes-file"), "{}", stderr(&out));
    let out = output({
        let mut cmd = bare();
        cmd.args(["run", "-n", "--wait", "1s", "k", "--", "true"]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    let out = output({
        let mut cmd = bare();
        cmd.args(["run", "k", "-c", "true", "--", "true"]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 64, "-c and CMD both: {}", stderr(&out));
}

#[tokio::test]
async fn each_subcommands_help_names_its_options_and_their_variables() {
    let help = |args: &'static [&'static str]| async move {
        let out = output({
            let mut cmd = bare();
            cmd.args(args);
            cmd
        })
        .await;
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let run = help(&["run", "--help"]).await;
    for needle in [
        "-w, --wait",
        "-n, --nonblock",
        "-E, --conflict-exit-code",
        "-c, --command",
        "QUORLOCK_TTL",
        "QUORLOCK_WAIT",
        "QUORLOCK_NONBLOCK",
        "QUORLOCK_CONFLICT_EXIT_CODE",
        "QUORLOCK_GRACE",
        "QUORLOCK_RESTART_GRACE",
        "QUORLOCK_NODES",
        "QUORLOCK_NODES_FILE",
        "QUORLOCK_NODE_TIMEOUT",
        "QUORLOCK_KEY_PREFIX",
        "QUORLOCK_TLS_CA",
        "QUORLOCK_TLS_CERT",
        "QUORLOCK_TLS_KEY",
        "QUORLOCK_PASSWORD",
        "REDISCLI_AUTH",
        "visible to other users",
    ] {
        assert!(run.contains(needle), "run --help lacks {needle:?}:\n{run}");
    }
    for sub in [&["status", "--help"][..], &["release", "--help"][..]] {
        let text = help(sub).await;
        assert!(
            !text.contains("--restart-grace") && !text.contains("--ttl"),
            "{sub:?}:\n{text}"
        );
        assert!(text.contains("visible to other users"), "{sub:?}:\n{text}");
    }
    assert!(help(&["release", "--help"]).await.contains("QUORLOCK_TOKEN"));
    let demo = help(&["demo", "--help"]).await;
    assert!(demo.contains("Usage: quorlock demo"), "{demo}");
    assert!(
        !demo.contains("quorlock-chaos") && !demo.contains("--nodes"),
        "{demo}"
    );
}
