//! `--key-prefix` given on the command line: the key written on the masters really carries the
//! prefix (seen on each master through a raw connection while the command runs), the lock excludes
//! another invocation with the same prefix (given after or before the subcommand, or beating
//! `QUORLOCK_KEY_PREFIX`), and another prefix is another lock. The environment variable alone is
//! covered in `flags`.

use std::process::Output;

use redis::AsyncCommands;
use tokio::process::Command;

use super::common::{cluster, eventually, holders};
use super::{bare, code, finish, json_of, output, shell, stderr, temp_dir, LIMIT};

/// `quorlock SUB --nodes <cluster> --node-timeout 200ms REST...`.
fn on(c: &quorlock_chaos::Cluster, sub: &str, rest: &[&str]) -> Command {
    let mut cmd = bare();
    cmd.arg(sub)
        .args(["--nodes", &c.urls().join(","), "--node-timeout", "200ms"])
        .args(rest);
    cmd
}

/// Exit 75, said as a lock held elsewhere.
fn held_elsewhere(out: &Output, what: &str) {
    assert_eq!(code(out), 75, "{what}: {}", stderr(out));
    assert!(
        stderr(out).contains("held by another holder"),
        "{what}: {}",
        stderr(out)
    );
}

#[tokio::test]
async fn the_prefix_is_on_the_masters_key_and_the_lock_excludes_its_second_taker() {
    let c = cluster(3).await;
    let dir = temp_dir("key-prefix");
    let script = shell(
        r#"echo "$QUORLOCK_KEY $QUORLOCK_TOKEN" > token.tmp; mv token.tmp token; while [ ! -e stop ]; do sleep 0.05; done"#,
        &dir,
    );
    let first = on(
        &c,
        "run",
        &[
            "--key-prefix",
            "p:",
            "--ttl",
            "20s",
            "pk",
            "--",
            "sh",
            "-c",
            &script,
        ],
    )
    .spawn()
    .expect("spawn quorlock");
    let started = eventually(LIMIT, || async { dir.join("token").exists() }).await;
    assert!(started, "the command never started");
    let seen = std::fs::read_to_string(dir.join("token")).expect("token");
    let (key, token) = seen.trim().split_once(' ').expect("key and token");
    assert_eq!(key, "pk", "QUORLOCK_KEY is the key as given, without the prefix");

    // On every master, through a raw connection: the prefixed key holds the run's token, and
    // nothing is written under any other name.
    let on_all = eventually(LIMIT, || async { holders(&c, &[0, 1, 2], "p:pk").await == 3 }).await;
    assert!(on_all, "p:pk is not on every master");
    for i in 0..3 {
        let mut conn = c.client(i).await.expect("connect to master");
        let value: Option<String> = conn.get("p:pk").await.expect("GET");
        assert_eq!(value.as_deref(), Some(token), "master {i}");
        let keys = c.keys(i, "*").await.expect("KEYS");
        assert!(
            keys.iter().all(|k| k.starts_with("p:")),
            "master {i}: a key without the prefix: {keys:?}"
        );
    }
    assert_eq!(holders(&c, &[0, 1, 2], "pk").await, 0, "the bare key was written");

    // The same prefix, however it is given: the lock is held.
    let touch = format!("touch '{}'", dir.join("ran").display());
    let out = output(on(&c, "run", &["--key-prefix", "p:", "-n", "pk", "-c", &touch])).await;
    held_elsewhere(&out, "run --key-prefix p:");
    let out = output({
        let mut cmd = bare();
        cmd.args(["--key-prefix", "p:", "run", "--nodes", &c.urls().join(",")])
            .args(["--node-timeout", "200ms", "-n", "pk", "-c", &touch]);
        cmd
    })
    .await;
    held_elsewhere(&out, "--key-prefix before run");
    let out = output({
        let mut cmd = on(&c, "acquire", &["--key-prefix", "p:", "-n", "pk"]);
        cmd.env("QUORLOCK_KEY_PREFIX", "other:");
        cmd
    })
    .await;
    held_elsewhere(&out, "acquire --key-prefix p: over QUORLOCK_KEY_PREFIX");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "", "no token printed");
    assert!(!dir.join("ran").exists(), "a second run got the lock");

    // status finds it under the prefix, and names the stored key.
    let out = output(on(&c, "status", &["--key-prefix", "p:", "--json", "pk"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let state = json_of(&out);
    assert_eq!(state["held"], true, "{state}");
    assert_eq!(state["holder"], token, "{state}");
    assert_eq!(state["stored_key"], "p:pk", "{state}");

    // Another prefix, or none, is another lock: taken at once, and released.
    let out = output(on(&c, "run", &["--key-prefix", "q:", "-n", "pk", "--", "true"])).await;
    assert_eq!(code(&out), 0, "another prefix: {}", stderr(&out));
    let out = output(on(&c, "run", &["-n", "pk", "--", "true"])).await;
    assert_eq!(code(&out), 0, "no prefix: {}", stderr(&out));
    assert_eq!(holders(&c, &[0, 1, 2], "q:pk").await, 0);
    assert_eq!(holders(&c, &[0, 1, 2], "pk").await, 0);

    std::fs::write(dir.join("stop"), "").expect("stop the command");
    let out = finish(first).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        holders(&c, &[0, 1, 2], "p:pk").await,
        0,
        "released on every master"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
