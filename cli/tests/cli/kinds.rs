//! `run --permits P` (a semaphore, as `consul lock -n`), `run --shared` and `run --exclusive` (a
//! read-write lock, as `flock -s` and `flock -x`), and `status --permits` / `status --rw`.

use std::time::Duration;

use tokio::process::Child;

use super::common::{cluster, locks};
use super::{code, finish, output, quorlock, shell, stderr, temp_dir};

#[tokio::test]
async fn at_most_p_runs_hold_a_permit_at_once() {
    let c = cluster(3).await;
    let dir = temp_dir("permits");
    let script = shell(
        r#"echo "+ $QUORLOCK_PERMIT" >> log; sleep 0.2; echo "- $QUORLOCK_PERMIT" >> log"#,
        &dir,
    );
    let runs: Vec<Child> = (0..5)
        .map(|_| {
            quorlock(
                &c,
                &[
                    "run",
                    "--permits",
                    "2",
                    "--ttl",
                    "5s",
                    "--wait",
                    "50s",
                    "pool",
                    "--",
                    "sh",
                    "-c",
                    &script,
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
    let (mut inside, mut most) = (0i32, 0i32);
    let mut slots = std::collections::BTreeSet::new();
    for line in log.lines() {
        match line.split_once(' ') {
            Some(("+", slot)) => {
                inside += 1;
                slots.insert(slot.to_owned());
            }
            Some(("-", _)) => inside -= 1,
            _ => panic!("unexpected line {line:?} in\n{log}"),
        }
        most = most.max(inside);
    }
    assert_eq!(log.lines().count(), 10, "{log}");
    assert!(most <= 2, "{most} runs at once with 2 permits:\n{log}");
    assert!(slots.iter().all(|s| s == "0" || s == "1"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn shared_runs_share_and_an_exclusive_run_waits_for_them() {
    let c = cluster(3).await;
    let reader = locks(&c)
        .await
        .acquire_read("table", Duration::from_secs(20))
        .await
        .expect("a reader");
    let out = output(quorlock(&c, &["run", "-s", "-n", "table", "-c", "true"])).await;
    assert_eq!(code(&out), 0, "a second reader runs: {}", stderr(&out));
    let out = output(quorlock(&c, &["run", "-x", "-n", "table", "-c", "true"])).await;
    assert_eq!(code(&out), 75, "a reader holds it: {}", stderr(&out));
    let out = output(quorlock(&c, &["status", "--rw", "--json", "table"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(status["readers"].as_array().map(Vec::len), Some(1), "{status}");
    assert_eq!(status["writer"], serde_json::Value::Null, "{status}");
    reader.release().await.expect("release");
    let out = output(quorlock(
        &c,
        &["run", "-x", "--wait", "5s", "table", "-c", "true"],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let out = output(quorlock(
        &c,
        &["run", "-s", "--permits", "2", "table", "-c", "true"],
    ))
    .await;
    assert_eq!(
        code(&out),
        64,
        "--shared and --permits conflict: {}",
        stderr(&out)
    );
}

#[tokio::test]
async fn status_shows_permits_held_and_free() {
    let c = cluster(3).await;
    let held = locks(&c)
        .await
        .acquire_permit("slots", 3, Duration::from_secs(20))
        .await
        .expect("a permit");
    let out = output(quorlock(&c, &["status", "--permits", "3", "--json", "slots"])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        (status["held"].as_u64(), status["free"].as_u64()),
        (Some(1), Some(2)),
        "{status}"
    );
    let out = output(quorlock(&c, &["status", "--permits", "3", "slots"])).await;
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("1 of 3 permits held, 2 free"), "{table}");
    assert!(table.contains(held.token()), "{table}");
    held.release().await.expect("release");
}

#[tokio::test]
async fn a_default_run_and_a_shared_run_exclude_each_other() {
    let c = cluster(3).await;
    let dir = temp_dir("rw-default");
    let marker = dir.join("held");
    let hold = |flags: &[&str]| {
        let mut argv = vec!["run", "--ttl", "10s"];
        argv.extend_from_slice(flags);
        let script = format!("touch '{}'; sleep 5", marker.display());
        let mut argv: Vec<String> = argv.into_iter().map(str::to_owned).collect();
        argv.extend(["shared-k".to_owned(), "-c".to_owned(), script]);
        argv
    };
    for (holder, other, what) in [
        (
            &["-s"][..],
            &[][..],
            "a shared run holds: the default run must wait",
        ),
        (
            &[][..],
            &["-s"][..],
            "a default run holds: a shared run must wait",
        ),
        (
            &[][..],
            &[][..],
            "a default run holds: another default run must wait",
        ),
        (
            &["-s"][..],
            &["-x"][..],
            "a shared run holds: an explicit -x run must wait",
        ),
    ] {
        let _ = std::fs::remove_file(&marker);
        let argv = hold(holder);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let running = quorlock(&c, &argv).spawn().expect("spawn the holder");
        for _ in 0..200 {
            if marker.exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(marker.exists(), "the holder never ran ({what})");
        let mut argv = vec!["run", "-n", "-E", "9"];
        argv.extend_from_slice(other);
        argv.extend(["shared-k", "-c", "true"]);
        let out = output(quorlock(&c, &argv)).await;
        assert_eq!(code(&out), 9, "{what}: {}", stderr(&out));
        let out = finish(running).await;
        assert_eq!(code(&out), 0, "{what}: the holder: {}", stderr(&out));
    }
    // The default run also excludes a plain lock on the key, taken by the library.
    let plain = locks(&c)
        .await
        .try_acquire("shared-k", Duration::from_secs(10))
        .await
        .expect("free again");
    let out = output(quorlock(&c, &["run", "-n", "shared-k", "-c", "true"])).await;
    assert_eq!(code(&out), 75, "a plain lock holds it: {}", stderr(&out));
    let out = output(quorlock(&c, &["run", "-n", "-s", "shared-k", "-c", "true"])).await;
    assert_eq!(code(&out), 75, "a plain lock holds it: {}", stderr(&out));
    plain.release().await.expect("release");
    // With --fence, the default run is a fenced write.
    let out = output(quorlock(
        &c,
        &[
            "run",
            "-n",
            "--fence",
            "shared-k",
            "-c",
            "test -n \"$QUORLOCK_FENCE\"",
        ],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}
