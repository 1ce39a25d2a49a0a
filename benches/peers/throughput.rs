//! Row 3 of the peers benchmark: throughput of every library and floor with 256 tasks on distinct
//! keys, and what each lock cycle costs this process and the masters (their CPU time from `/proc`,
//! their command time from `INFO commandstats`). Kept apart from the latency rows because it is
//! the one row that reads the masters' own accounting.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quorlock_chaos::Cluster;

use super::{Clients, Lib, TASKS, TTL, TTL_MS};
use crate::common::{self, ratio, Args, CommandStats, Json};

/// Passes per library in row 3, alternating between libraries; the median pass is reported, and
/// the ratios between libraries are also taken pass by pass (see [`paired`]).
const THROUGHPUT_PASSES: usize = 5;

/// Row 3: 256 tasks on distinct keys for a fixed time, per library. Each library runs
/// [`THROUGHPUT_PASSES`] passes, alternating with the others so that a slow spell of the machine
/// hits them alike, and the pass with the median rate is reported.
pub(crate) async fn row3(args: &Args) -> Vec<Json> {
    let phase = args.seconds(5.0, 1.0);
    let passes = if args.quick { 1 } else { THROUGHPUT_PASSES };
    let n = 5;
    let cluster = common::masters(n).await;
    let clients = Clients::new(&cluster).await;
    let libs: Vec<Lib> = Lib::THROUGHPUT
        .into_iter()
        .filter(|l| args.lib(l.name()))
        .filter(|l| *l != Lib::NativeFloor || clients.floor.has_delifeq())
        .collect();
    // Every master's, or none (then the masters' CPU is not reported).
    let pids: Vec<u32> = (0..n)
        .map(|i| cluster.pid(i))
        .collect::<Option<_>>()
        .unwrap_or_default();
    let mut passes_of: Vec<Vec<Pass>> = vec![Vec::new(); libs.len()];
    for pass in 0..passes {
        for (i, &lib) in libs.iter().enumerate() {
            eprintln!(
                "row 3, N = {n}, pass {}/{passes}: {} with {TASKS} tasks for {phase:?}",
                pass + 1,
                lib.name()
            );
            passes_of[i].push(throughput_pass(&clients, &cluster, &pids, lib, phase).await);
        }
    }
    // Pass by pass, in the order they ran: neighbouring passes share the machine's state.
    let rates_of = |l: Lib| -> Vec<f64> {
        libs.iter()
            .position(|x| *x == l)
            .map(|i| passes_of[i].iter().map(|p| p.rate).collect())
            .unwrap_or_default()
    };
    let vs_rslock = paired(&rates_of(Lib::Quorlock), &rates_of(Lib::Rslock));
    let vs_script = paired(&rates_of(Lib::Quorlock), &rates_of(Lib::ScriptFloor));
    let vs_floor = paired(&rates_of(Lib::Quorlock), &rates_of(Lib::Floor));
    // The masters' command time per cycle, pass by pass, quorlock's over the raw floor's.
    let commands_of = |l: Lib| -> Vec<f64> {
        libs.iter()
            .position(|x| *x == l)
            .map(|i| {
                passes_of[i]
                    .iter()
                    .map(|p| p.commands.as_ref().map_or(f64::NAN, |c| c.0))
                    .collect()
            })
            .unwrap_or_default()
    };
    let commands_vs_floor = paired(&commands_of(Lib::Quorlock), &commands_of(Lib::Floor));
    // Each library's median pass by rate.
    let results: Vec<(Lib, Pass)> = libs
        .iter()
        .zip(passes_of)
        .map(|(&lib, mut runs)| {
            runs.sort_by(|a, b| a.rate.total_cmp(&b.rate));
            (lib, runs.swap_remove(runs.len() / 2))
        })
        .collect();
    let result_of = |l: Lib| results.iter().find(|r| r.0 == l).map(|r| r.1.clone());
    let floor = result_of(Lib::Floor);
    let floor_rate = floor.as_ref().map_or(f64::NAN, |f| f.rate);
    let floor_cpu = floor.as_ref().map_or(Duration::ZERO, |f| f.cpu);
    let floor_commands = floor
        .as_ref()
        .and_then(|f| f.commands.as_ref())
        .map_or(f64::NAN, |c| c.0);
    let ceiling = script_ceiling(floor.as_ref(), result_of(Lib::ScriptFloor).as_ref());
    let mut cells = vec![Json::object()
        .str("paired_ratios", "pass by pass")
        .num("quorlock_vs_rslock_median", vs_rslock.0)
        .num("quorlock_vs_rslock_min", vs_rslock.1)
        .num("quorlock_vs_rslock_max", vs_rslock.2)
        .num("quorlock_vs_script_floor_median", vs_script.0)
        .num("quorlock_vs_script_floor_min", vs_script.1)
        .num("quorlock_vs_script_floor_max", vs_script.2)
        .num("quorlock_vs_floor_median", vs_floor.0)
        .num("quorlock_vs_floor_min", vs_floor.1)
        .num("quorlock_vs_floor_max", vs_floor.2)
        .num("quorlock_vs_floor_master_commands_median", commands_vs_floor.0)
        .num("quorlock_vs_floor_master_commands_min", commands_vs_floor.1)
        .num("quorlock_vs_floor_master_commands_max", commands_vs_floor.2)
        .num("script_release_ceiling_vs_floor", ceiling.unwrap_or(f64::NAN))];
    let mut rows = Vec::new();
    for (lib, pass) in &results {
        let masters_us = pass.masters_cpu.map_or(f64::NAN, common::micros);
        let (commands_us, commands) = pass
            .commands
            .as_ref()
            .map_or((f64::NAN, ""), |(us, what)| (*us, what.as_str()));
        let busy = pass
            .masters_cpu
            .map_or(f64::NAN, |m| pass.rate * (pass.cpu + m).as_secs_f64());
        cells.push(
            Json::object()
                .str("library", lib.name())
                .num("masters", n as f64)
                .num("tasks", TASKS as f64)
                .num("seconds", phase.as_secs_f64())
                .num("passes", passes as f64)
                .num("acquisitions_per_s", pass.rate)
                .num("vs_floor", pass.rate / floor_rate)
                .num("cpu_us_per_acquisition", common::micros(pass.cpu))
                .num("cpu_vs_floor", ratio(pass.cpu, floor_cpu))
                .num("masters_cpu_us_per_acquisition", masters_us)
                .num("master_commands_us_per_cycle", commands_us)
                .num("master_commands_vs_floor", commands_us / floor_commands)
                .str("master_commands_per_cycle", commands)
                .num("cores_busy", busy)
                .num("failed_attempts", pass.failed as f64),
        );
        rows.push(vec![
            lib.name().to_owned(),
            format!("{:.0}", pass.rate),
            format!("{:.2}×", pass.rate / floor_rate),
            format!("{:.1} µs", common::micros(pass.cpu)),
            format!("{:.2}×", ratio(pass.cpu, floor_cpu)),
            format!("{masters_us:.1} µs"),
            format!("{commands_us:.2} µs ({:.2}×)", commands_us / floor_commands),
            format!("{busy:.2}"),
            pass.failed.to_string(),
        ]);
    }
    if !args.json {
        // Only the comparisons whose libraries both ran (`--only` may leave some out).
        let compared: Vec<String> = [
            ("floor", Lib::Floor, vs_floor),
            ("rslock", Lib::Rslock, vs_rslock),
            ("script floor", Lib::ScriptFloor, vs_script),
        ]
        .into_iter()
            .filter_map(|(name, other, (median, min, max))| {
                let ratio = result_of(Lib::Quorlock)?.rate / result_of(other)?.rate;
                Some(format!(
                    "quorlock / {name} = {ratio:.2}×, pass by pass median {median:.2}× (range {min:.2}-{max:.2}×)"
                ))
            })
            .collect();
        let compared = if compared.is_empty() {
            String::new()
        } else {
            format!(" ({})", compared.join("; "))
        };
        common::table(
            &format!(
                "Row 3: throughput, N = {n}, {TASKS} tasks on distinct keys, median of {passes} \
                 passes of {phase:?}{compared}"
            ),
            &[
                "library",
                "acquisitions/s",
                "vs floor",
                "CPU per acquisition",
                "CPU vs floor",
                "masters' CPU per acquisition",
                "masters' command time per cycle (vs floor)",
                "cores busy",
                "failed attempts",
            ],
            &rows,
        );
        if let Some((ceiling, cores)) = ceiling.zip(common::cores()) {
            println!(
                "Ceiling for any client that releases by the compare-and-delete script: {ceiling:.2}× the \
                 floor (all {cores} cores busy, the masters' CPU per acquisition of the script floor, the \
                 client's of the floor).\n"
            );
        }
        println!("Masters' command time per lock cycle (`INFO commandstats`, median pass; calls per cycle × µs per call):");
        for (lib, pass) in &results {
            if let Some((us, what)) = &pass.commands {
                println!("- {}: {us:.2} µs: {what}", lib.name());
            }
        }
        let quorlock = result_of(Lib::Quorlock);
        let rslock = result_of(Lib::Rslock);
        if let (Some(q), Some(f)) = (quorlock.as_ref(), floor.as_ref()) {
            let rs = rslock.as_ref().map_or(f64::NAN, |r| q.rate / r.rate);
            let on = if common::server() == quorlock_chaos::Server::Valkey91 && n == 5 {
                "the targets apply here"
            } else {
                "the targets are set for valkey-9.1 with 5 masters"
            };
            println!(
                "\nTargets ({on}): quorlock / raw floor {:.2}× (pass by pass {:.2}×, range {:.2}-{:.2}×; target ≥ \
                 0.8×), quorlock / rslock {rs:.2}× (pass by pass {:.2}×, range {:.2}-{:.2}×; target ≥ 2×), masters' \
                 command time per cycle quorlock / raw floor {:.2}× (pass by pass {:.2}×, range {:.2}-{:.2}×; \
                 target ≤ 1.3×).\n",
                q.rate / f.rate,
                vs_floor.0,
                vs_floor.1,
                vs_floor.2,
                vs_rslock.0,
                vs_rslock.1,
                vs_rslock.2,
                q.commands.as_ref().map_or(f64::NAN, |c| c.0) / floor_commands,
                commands_vs_floor.0,
                commands_vs_floor.1,
                commands_vs_floor.2,
            );
        }
    }
    cells
}

/// The most a client releasing by quorlock's compare-and-delete script could reach, as a ratio to
/// the floor's throughput, when CPU is what bounds it (masters and client share the cores): every
/// core busy, the masters spending on each acquisition what they spent for the script floor, and
/// the client no more than the floor's. `None` unless both passes ran, the masters' CPU was read and
/// the number of cores is known.
fn script_ceiling(floor: Option<&Pass>, script: Option<&Pass>) -> Option<f64> {
    let (floor, script) = (floor?, script?);
    let per_acquisition = floor.cpu + script.masters_cpu?;
    let cores = common::cores()?;
    (!per_acquisition.is_zero()).then(|| cores as f64 / per_acquisition.as_secs_f64() / floor.rate)
}

/// The ratios `a[i] / b[i]` of passes run side by side: their median, minimum and maximum (NaN
/// when either library did not run).
fn paired(a: &[f64], b: &[f64]) -> (f64, f64, f64) {
    let mut ratios: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
    if ratios.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    ratios.sort_by(f64::total_cmp);
    (ratios[ratios.len() / 2], ratios[0], ratios[ratios.len() - 1])
}

/// One pass of row 3 for `lib`: acquisitions per second, the CPU time per acquisition of this
/// process and of the masters (pids `masters`), the masters' command time per cycle, and failed
/// attempts.
async fn throughput_pass(
    clients: &Clients,
    cluster: &Cluster,
    masters: &[u32],
    lib: Lib,
    phase: Duration,
) -> Pass {
    let commands0 = CommandStats::read(cluster).await;
    let done = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = common::cpu_time();
    let masters_cpu0 = common::processes_cpu_time(masters);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (done, failed, stop) = (done.clone(), failed.clone(), stop.clone());
        let key = format!("bench:peers:tput:{}:{t}", lib.name());
        let clients = clients.clone();
        if lib == Lib::Redlock {
            tasks.push(tokio::task::spawn_blocking(move || {
                while !stop.load(Ordering::Relaxed) {
                    match clients.redlock.lock(key.as_bytes(), TTL_MS) {
                        Ok(Some(lock)) => {
                            clients.redlock.unlock(&lock);
                            done.fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {
                            failed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }));
        } else {
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    // Each library as a caller would use it: quorlock's `acquire` backs off
                    // between failed rounds (rslock's `lock` retries on its own).
                    let result = match lib {
                        Lib::Quorlock => match clients.quorlock.acquire(&key, TTL).await {
                            Ok(guard) => guard.release().await.map(drop).map_err(|e| e.to_string()),
                            Err(e) => Err(e.to_string()),
                        },
                        _ => clients.once(lib, &key).await.map(drop),
                    };
                    match result {
                        Ok(_) => done.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            }));
        }
    }
    tokio::time::sleep(phase).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = t0.elapsed();
    let done_at_stop = done.load(Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    if lib == Lib::Quorlock {
        // The slower masters' share of the last releases, so that the masters' counts hold all of
        // the pass's cycles.
        clients.quorlock.settle().await;
    }
    let cpu = common::cpu_time().saturating_sub(cpu0);
    let masters_cpu = common::processes_cpu_time(masters)
        .zip(masters_cpu0)
        .map(|(after, before)| after.saturating_sub(before));
    let cycles = done.load(Ordering::Relaxed).max(1);
    let total = u32::try_from(cycles).unwrap_or(u32::MAX);
    if lib == Lib::QuorumFloor {
        // Its slower masters' requests finish in tasks: let them land before the reading.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let commands = match (commands0, CommandStats::read(cluster).await) {
        (Some(before), Some(after)) => {
            let spent = after.since(&before);
            Some((spent.usec() as f64 / cycles as f64, spent.summary(cycles as u64)))
        }
        _ => None,
    };
    Pass {
        rate: done_at_stop as f64 / elapsed.as_secs_f64(),
        cpu: cpu / total,
        masters_cpu: masters_cpu.map(|m| m / total),
        commands,
        failed: failed.load(Ordering::Relaxed),
    }
}

/// What one pass of row 3 measured.
#[derive(Debug, Clone)]
struct Pass {
    /// Acquisitions per second.
    rate: f64,
    /// This process's CPU time per acquisition.
    cpu: Duration,
    /// The masters' CPU time per acquisition, all masters together (`None` when `/proc` could not
    /// be read).
    masters_cpu: Option<Duration>,
    /// The masters' command time per cycle in µs, all masters together, from `INFO commandstats`,
    /// and what it was spent on (`None` when a master could not be read).
    commands: Option<(f64, String)>,
    /// Failed attempts.
    failed: usize,
}
