//! Secrets off the command line: masters from `--nodes-file`, a password from `QUORLOCK_PASSWORD`
//! or `REDISCLI_AUTH` for URLs that carry none, and `release`'s token from stdin or
//! `QUORLOCK_TOKEN`.

use std::process::Stdio;

use quorlock_chaos::{Cluster, ClusterOptions};
use tokio::io::AsyncWriteExt;

use super::common::{cluster, holders};
use super::{bare, code, finish, output, stderr, temp_dir};

/// Masters that require `password`, and their URLs without it.
async fn protected(password: &str) -> (Cluster, Vec<String>) {
    let c = Cluster::start_with(ClusterOptions {
        masters: 3,
        password: Some(password.to_owned()),
        ..ClusterOptions::default()
    })
    .await
    .expect("start masters with a password");
    let urls = (0..3)
        .map(|i| format!("redis://127.0.0.1:{}", c.port(i)))
        .collect();
    (c, urls)
}

#[tokio::test]
async fn masters_from_a_file_and_the_password_from_the_environment() {
    let (c, urls) = protected("s3cret-pw").await;
    let dir = temp_dir("nodes-file");
    let file = dir.join("masters");
    std::fs::write(&file, format!("# three masters\n{}\n\n", urls.join("\n"))).expect("write");
    let run = |password_env: Option<(&'static str, &'static str)>| {
        let mut cmd = bare();
        cmd.args(["run", "--nodes-file"]).arg(&file).args([
            "--node-timeout",
            "500ms",
            "-w",
            "5s",
            "filed",
            "--",
            "true",
        ]);
        if let Some((name, value)) = password_env {
            cmd.env(name, value);
        }
        cmd
    };
    let out = output(run(None)).await;
    assert_eq!(
        code(&out),
        78,
        "no password: the masters refuse: {}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("s3cret-pw"));
    for name in ["QUORLOCK_PASSWORD", "REDISCLI_AUTH"] {
        let out = output(run(Some((name, "s3cret-pw")))).await;
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
    }
    let out = output(run(Some(("QUORLOCK_PASSWORD", "wrong-pw")))).await;
    assert_eq!(code(&out), 78, "{}", stderr(&out));
    assert!(
        !stderr(&out).contains("wrong-pw"),
        "the password is never printed: {}",
        stderr(&out)
    );

    // QUORLOCK_NODES_FILE, and a file that cannot be read names itself.
    let out = output({
        let mut cmd = bare();
        cmd.env("QUORLOCK_NODES_FILE", &file)
            .env("QUORLOCK_PASSWORD", "s3cret-pw")
            .args(["status", "--node-timeout", "500ms", "filed"]);
        cmd
    })
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let missing = dir.join("missing");
    let out = output({
        let mut cmd = bare();
        cmd.arg("status").arg("--nodes-file").arg(&missing).arg("filed");
        cmd
    })
    .await;
    assert_eq!(code(&out), 78, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&missing.display().to_string()),
        "{}",
        stderr(&out)
    );
    drop(c);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn release_reads_the_token_from_stdin_or_the_environment() {
    let c = cluster(3).await;
    let nodes = c.urls().join(",");
    let with_nodes = |args: &[&str]| {
        let mut cmd = bare();
        cmd.env("QUORLOCK_NODES", &nodes)
            .env("QUORLOCK_NODE_TIMEOUT", "200ms")
            .args(args);
        cmd
    };
    // The whole output of `acquire --fence` on stdin: its first word is the token.
    let out = output(with_nodes(&["acquire", "--fence", "piped"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(holders(&c, &[0, 1, 2], "piped").await, 3);
    let mut release = with_nodes(&["release", "piped"]);
    release.stdin(Stdio::piped());
    let mut child = release.spawn().expect("spawn release");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(printed.as_bytes())
        .await
        .expect("write the token");
    drop(stdin);
    let out = finish(child).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(holders(&c, &[0, 1, 2], "piped").await, 0);

    // QUORLOCK_TOKEN.
    let out = output(with_nodes(&["acquire", "from-env"])).await;
    let token = String::from_utf8(out.stdout).expect("utf-8").trim().to_owned();
    let mut release = with_nodes(&["release", "from-env"]);
    release.env("QUORLOCK_TOKEN", &token);
    let out = output(release).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(holders(&c, &[0, 1, 2], "from-env").await, 0);

    // No token anywhere (stdin empty): a usage error that says where it may come from.
    let out = output(with_nodes(&["release", "from-env"])).await;
    assert_eq!(code(&out), 64, "{}", stderr(&out));
    assert!(stderr(&out).contains("QUORLOCK_TOKEN"), "{}", stderr(&out));
}
