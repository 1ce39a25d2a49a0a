//! `quorlock-chaos simulate`: the deterministic simulation from the command line. Runs seeds
//! (one, a count, or as many as a wall-clock budget allows), prints each failing seed with the
//! command line that replays it, and the totals as text or JSON.

use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use quorlock_chaos::sim::controls::Control;
use quorlock_chaos::sim::report::{replay_command, sweep, Summary, Sweep};

/// Arguments of `simulate`.
#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// Run this one seed (replays a failure).
    #[arg(long, conflicts_with_all = ["seeds", "first"])]
    seed: Option<u64>,
    /// Run this many seeds (with --minutes, at most this many).
    #[arg(long)]
    seeds: Option<u64>,
    /// The first seed of the range (default: drawn from the time, so each run covers new seeds).
    #[arg(long)]
    first: Option<u64>,
    /// Stop starting seeds after this many wall-clock minutes.
    #[arg(long)]
    minutes: Option<f64>,
    /// Simulated time per seed, e.g. 30s, 2m.
    #[arg(long, default_value = "30s", value_parser = crate::duration::parse)]
    simulated: Duration,
    /// Break one safety assumption on purpose, or remove one mechanism of the library:
    /// quorum-of-one, ignore-validity, wipe-without-grace, clock-jump, pause-unfenced,
    /// fair-skips-queue, client-clock-stall, vm-rollback, kept-connections,
    /// without-replaced-master-rule, without-drift-allowance,
    /// without-durability-rule, without-eviction-rule, without-permits-check,
    /// without-readers-check, without-epoch-check, without-commit-key-check,
    /// pause-past-lock-delay. The run then succeeds only if the control's
    /// own check (exclusion, lost updates, fair order, semaphore, read-write, fencing) reports
    /// violations.
    #[arg(long)]
    control: Option<Control>,
    /// Print the totals as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs the simulation; exit 0 when the checks came out as they should (nothing found, or for a
/// control, its own check fired), 1 when not, 70 when the simulation itself could not run.
pub fn run(args: SimulateArgs) -> ExitCode {
    let (first, count) = match (args.seed, args.seeds, args.minutes) {
        (Some(seed), _, _) => (seed, 1),
        (None, seeds, minutes) => {
            let first = args.first.unwrap_or_else(fresh_first_seed);
            let count = seeds.unwrap_or(if minutes.is_some() { u64::MAX / 2 } else { 100 });
            (first, count)
        }
    };
    let budget = args
        .minutes
        .filter(|m| m.is_finite() && *m > 0.0)
        .map(|m| Duration::from_secs_f64(m * 60.0));
    let plan = Sweep {
        first,
        count,
        budget,
        simulated: args.simulated,
        control: args.control,
    };
    if !args.json {
        eprintln!(
            "simulating seeds from {first} ({} simulated per seed{})",
            humantime::format_duration(args.simulated),
            args.control.map(|c| format!(", control {c}")).unwrap_or_default()
        );
    }
    let control = args.control;
    let summary = sweep(plan, |outcome| {
        if !outcome.passed() && control.is_none() {
            eprintln!(
                "seed {} FAILED: {} violations, {} lost updates, {} leaked keys\n  replay: {}",
                outcome.seed,
                outcome.violations.len(),
                outcome.lost_updates,
                outcome.leaked_keys.len(),
                replay_command(outcome.seed, args.simulated, control)
            );
            for v in outcome.violations.iter().take(5) {
                eprintln!("  {v}");
            }
            for k in outcome.leaked_keys.iter().take(5) {
                eprintln!("  leaked: {k}");
            }
        }
    });
    let summary = match summary {
        Ok(summary) => summary,
        Err(e) => {
            eprintln!("quorlock-chaos simulate: {e}");
            return ExitCode::from(70);
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&summary) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("quorlock-chaos simulate: {e}");
                return ExitCode::from(70);
            }
        }
    } else {
        print_text(&summary);
    }
    // A control succeeds only when its own check fired; an in-model run only when nothing did.
    let as_it_must = match control {
        Some(_) => summary.first_caught_seed.is_some(),
        None => summary.violations + summary.lost_updates + summary.leaked_keys == 0,
    };
    if as_it_must {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn print_text(s: &Summary) {
    println!(
        "seeds {}..={} ({}){}",
        s.seed_range.0,
        s.seed_range.1,
        s.seeds,
        s.control
            .as_deref()
            .map(|c| format!(", control {c}"))
            .unwrap_or_default()
    );
    println!(
        "acquisitions {} of {} calls, {} master commands, {} faults, {} stale fenced writes rejected",
        s.acquisitions, s.attempts, s.commands, s.faults, s.stale_rejected
    );
    let kinds: Vec<String> = s.by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
    println!("acquisitions by kind: {}", kinds.join(", "));
    println!(
        "{} holds kept alive, {} extends ({} succeeded), {} loss signals heard",
        s.kept_alive, s.extends, s.extends_ok, s.lost_signals
    );
    println!(
        "violations {}, lost updates {}, leaked keys {}{}",
        s.violations,
        s.lost_updates,
        s.leaked_keys,
        s.first_failing_seed
            .map(|seed| format!(", first failing seed {seed}"))
            .unwrap_or_default()
    );
    println!(
        "simulated {:.0} s in {:.1} s wall: {:.0}x real time, {:.0} acquisitions per wall minute",
        s.simulated_seconds, s.wall_seconds, s.speedup, s.acquisitions_per_wall_minute
    );
    println!("history hash {}", s.history_hash);
    if !s.violations_by_check.is_empty() {
        let checks: Vec<String> = s
            .violations_by_check
            .iter()
            .map(|(check, n)| format!("{check} {n}"))
            .collect();
        println!("violations by check: {}", checks.join(", "));
    }
    if let (Some(control), Some(target)) = (&s.control, &s.target) {
        match s.first_caught_seed {
            Some(seed) => println!(
                "control {control}: caught by its own check ({target}) in {} of {} seeds, first at seed {seed}, as it must be",
                s.caught_seeds, s.seeds
            ),
            None if s.violations + s.lost_updates + s.leaked_keys > 0 => println!(
                "control {control}: NOT caught: its own check ({target}) never fired; other checks did, which does not count"
            ),
            None => println!("control {control}: NO violation found: the checks are blind to it"),
        }
    }
}

/// A first seed drawn from the time, so that each run covers seeds no run covered before.
fn fresh_first_seed() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    now.wrapping_mul(1_000)
}
