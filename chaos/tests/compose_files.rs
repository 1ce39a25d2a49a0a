//! The compose files are what `docker compose` itself accepts: the root `docker-compose.yml`
//! as users run it (with `image: redis:7.2` from their registry), the same file with
//! `chaos/compose.local.yml` layered over it (the offline image, never pulled, every resource
//! labelled for the sweep), and the harness's own `chaos/docker/compose.masters.yml` (five
//! masters, each alone on its network). Checked with `docker compose config`, which needs no
//! engine, only the Compose v2 plugin; without it the test records its skip and passes, unless
//! `QUORLOCK_REQUIRE_DOCKER=1` makes that a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use quorlock_chaos::skip::{skip, Need};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `docker compose -p check -f FILE... config [ARGS]` with `env`, or `None` without Compose v2.
fn config(files: &[&str], args: &[&str], env: &[(&str, &str)]) -> Option<Result<String, String>> {
    let works = Command::new("docker")
        .args(["compose", "version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !works {
        skip(
            Need::Docker,
            "the compose files are not validated",
            "`docker compose version` does not work here",
        );
        return None;
    }
    let mut cmd = Command::new("docker");
    cmd.current_dir(repo()).args(["compose", "-p", "check"]);
    for f in files {
        cmd.args(["-f", f]);
    }
    cmd.arg("config").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    Some(if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    })
}

#[test]
fn the_root_file_keeps_the_registry_image() {
    let Some(out) = config(&["docker-compose.yml"], &["--format", "json"], &[]) else {
        return;
    };
    let doc: serde_json::Value = serde_json::from_str(&out.unwrap()).unwrap();
    let services = doc["services"].as_object().unwrap();
    assert_eq!(services.len(), 5);
    for (i, (name, service)) in services.iter().enumerate() {
        assert_eq!(name, &format!("redis{}", i + 1));
        assert_eq!(service["image"], "redis:7.2", "{name}");
        assert_eq!(
            service["ports"][0]["published"],
            format!("{}", 7001 + i),
            "{name}"
        );
    }
}

#[test]
fn the_local_override_swaps_in_the_offline_image_and_labels_everything() {
    let files = ["docker-compose.yml", "chaos/compose.local.yml"];
    let env = [("QUORLOCK_CHAOS_RUN", "7-0123456789abcdef")];
    let Some(out) = config(&files, &["--format", "json"], &env) else {
        return;
    };
    let doc: serde_json::Value = serde_json::from_str(&out.unwrap()).unwrap();
    let services = doc["services"].as_object().unwrap();
    assert_eq!(services.len(), 5);
    for (i, (name, service)) in services.iter().enumerate() {
        assert_eq!(service["image"], "quorlock-master:local", "{name}");
        assert_eq!(service["pull_policy"], "never", "{name}");
        assert_eq!(
            service["labels"]["quorlock.chaos.run"], "7-0123456789abcdef",
            "{name}"
        );
        // Only the image changes: the ports and the fsync-always command stay the root file's.
        assert_eq!(
            service["ports"][0]["published"],
            format!("{}", 7001 + i),
            "{name}"
        );
        assert!(service["command"]
            .to_string()
            .contains("\"--appendfsync\",\"always\""));
    }
    assert_eq!(
        doc["networks"]["default"]["labels"]["quorlock.chaos.run"],
        "7-0123456789abcdef"
    );
    let volumes = doc["volumes"].as_object().unwrap();
    assert_eq!(volumes.len(), 5);
    for (name, v) in volumes {
        assert_eq!(
            v["labels"]["quorlock.chaos.run"], "7-0123456789abcdef",
            "volume {name}"
        );
    }
}

#[test]
fn the_harness_masters_each_sit_on_their_own_network_at_the_ports_given() {
    let env = [
        ("QUORLOCK_CHAOS_RUN", "7-0123456789abcdef"),
        ("QUORLOCK_M1_PORT", "17001"),
        ("QUORLOCK_M5_PORT", "17005"),
    ];
    let Some(out) = config(&["chaos/docker/compose.masters.yml"], &["--format", "json"], &env) else {
        return;
    };
    let doc: serde_json::Value = serde_json::from_str(&out.unwrap()).unwrap();
    let services = doc["services"].as_object().unwrap();
    assert_eq!(services.len(), 5);
    for (i, (name, service)) in services.iter().enumerate() {
        assert_eq!(name, &format!("m{}", i + 1));
        let networks: Vec<&String> = service["networks"].as_object().unwrap().keys().collect();
        assert_eq!(networks, vec![name], "{name} alone on its own network");
        assert_eq!(service["image"], "quorlock-master:local");
        assert_eq!(service["pull_policy"], "never");
        assert_eq!(service["labels"]["quorlock.chaos.run"], "7-0123456789abcdef");
        assert!(service["cap_add"].to_string().contains("NET_ADMIN"));
        let command = service["command"].to_string();
        assert!(command.contains("\"--appendfsync\",\"always\""), "{command}");
    }
    assert_eq!(services["m1"]["ports"][0]["published"], "17001");
    assert_eq!(services["m5"]["ports"][0]["published"], "17005");
    // Unset, the port is ephemeral rather than a fixed one that could collide.
    assert!(services["m3"]["ports"][0].get("published").is_none());
    for kind in ["networks", "volumes"] {
        let all = doc[kind].as_object().unwrap();
        assert_eq!(all.len(), 5, "{kind}");
        for (name, v) in all {
            assert_eq!(
                v["labels"]["quorlock.chaos.run"], "7-0123456789abcdef",
                "{kind} {name}"
            );
        }
    }
}

#[test]
fn a_broken_override_is_refused() {
    let dir = std::env::temp_dir().join(format!("quorlock-compose-{:016x}", rand::random::<u64>()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yml");
    std::fs::write(&bad, "services:\n  redis1:\n    ports: 7001\n").unwrap();
    let outcome = config(&["docker-compose.yml", bad.to_str().unwrap()], &["-q"], &[]);
    let _ = std::fs::remove_dir_all(&dir);
    let Some(outcome) = outcome else {
        return;
    };
    assert!(outcome.is_err(), "a port that is not a list must be refused");
}
