//! `quorlock-chaos herd --real CLI`: the hand-off on one hot key between real processes. For each
//! W, five fresh local masters, then W `quorlock run -w 600s --ttl 10s KEY -- sleep 0.05` processes
//! started at once (the CLI at the path given); the masters' own `INFO commandstats` tell what the
//! herd cost them, per hand-off. One uncontended `quorlock run` on the same masters first says what
//! a process costs alone (its start-up checks, one acquire, one release), so the table can show
//! what waiting added. What BENCHMARKS.md's real-process table reports.

use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use quorlock_chaos::Cluster;
use redis::AsyncCommands;

/// Lock masters.
const MASTERS: usize = 5;

/// What the masters counted: acquire-side commands (`SET`, `EVAL`, `EVALSHA`) and `PUBLISH`.
#[derive(Debug, Clone, Copy, Default)]
struct Counted {
    acquire_side: u64,
    published: u64,
}

async fn counted(cluster: &Cluster) -> Result<Counted, String> {
    let mut total = Counted::default();
    for i in 0..MASTERS {
        let mut conn = cluster.client(i).await.map_err(|e| e.to_string())?;
        let info: String = redis::cmd("INFO")
            .arg("commandstats")
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
        for line in info.lines() {
            let Some((name, rest)) = line.strip_prefix("cmdstat_").and_then(|l| l.split_once(':')) else {
                continue;
            };
            let calls: u64 = rest
                .split(',')
                .find_map(|f| f.strip_prefix("calls="))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            match name {
                "set" | "eval" | "evalsha" => total.acquire_side += calls,
                "publish" => total.published += calls,
                _ => {}
            }
        }
    }
    Ok(total)
}

async fn reset(cluster: &Cluster) -> Result<(), String> {
    for i in 0..MASTERS {
        let mut conn = cluster.client(i).await.map_err(|e| e.to_string())?;
        let _: () = conn.del("hot").await.map_err(|e| e.to_string())?;
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(&mut conn)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Runs `waiters` processes at once on `key`; returns how many succeeded.
async fn herd(cli: &Path, urls: &str, key: &str, waiters: usize) -> Result<usize, String> {
    let mut children = Vec::with_capacity(waiters);
    for _ in 0..waiters {
        let child = tokio::process::Command::new(cli)
            .args([
                "run",
                "-w",
                "600s",
                "--ttl",
                "10s",
                "--restart-grace",
                "0s",
                key,
                "--",
                "sleep",
                "0.05",
            ])
            .env("QUORLOCK_NODES", urls)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", cli.display()))?;
        children.push(child);
    }
    let mut ok = 0;
    for mut child in children {
        if child.wait().await.map_err(|e| e.to_string())?.success() {
            ok += 1;
        }
    }
    Ok(ok)
}

/// Prints the table; exit 0, or 1 when a process failed.
pub async fn run(waiters: &[usize], cli: &Path) -> ExitCode {
    println!("| waiting processes W | SET/EVAL/EVALSHA per hand-off | of which one process alone | PUBLISH per hand-off | wall ms per hand-off |");
    println!("|---|---|---|---|---|");
    let mut ok = true;
    for &w in waiters {
        let row = async {
            let cluster = Cluster::start(MASTERS).await.map_err(|e| e.to_string())?;
            let urls = cluster.urls().join(",");
            reset(&cluster).await?;
            if herd(cli, &urls, "alone", 1).await? != 1 {
                return Err("the uncontended run failed".to_owned());
            }
            let alone = counted(&cluster).await?;
            reset(&cluster).await?;
            let started = Instant::now();
            let served = herd(cli, &urls, "hot", w).await?;
            let wall = started.elapsed();
            let herd = counted(&cluster).await?;
            Ok::<_, String>((served, alone, herd, wall))
        }
        .await;
        match row {
            Ok((served, alone, herd, wall)) => {
                let per = |n: u64| n as f64 / w.max(1) as f64;
                println!(
                    "| {w} | {:.1} | {} | {:.2} | {:.0} |",
                    per(herd.acquire_side),
                    alone.acquire_side,
                    per(herd.published),
                    wall.as_secs_f64() * 1_000.0 / w.max(1) as f64,
                );
                if served != w {
                    eprintln!("herd --real W={w}: {served} of {w} processes succeeded");
                    ok = false;
                }
            }
            Err(e) => {
                eprintln!("herd --real W={w}: {e}");
                return ExitCode::from(crate::HARNESS_FAILED);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::CHECKS_FAILED)
    }
}
