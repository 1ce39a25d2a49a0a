//! Many seeds: runs them one after the other (for a count, or until a wall-clock budget is
//! spent), adds up what they found, and reports it as text or JSON, with the one command line
//! that replays each failing seed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::checks::Finding;
use super::controls::Control;
use super::run::{run_seed, SeedConfig, SeedOutcome};
use super::SimError;

/// Which seeds to run.
#[derive(Debug, Clone, Copy)]
pub struct Sweep {
    /// The first seed.
    pub first: u64,
    /// How many seeds at most.
    pub count: u64,
    /// Stop starting seeds once this much wall-clock time has passed.
    pub budget: Option<Duration>,
    /// Simulated time per seed.
    pub simulated: Duration,
    /// The negative control, if any.
    pub control: Option<Control>,
}

/// A failing seed, and how to replay it.
#[derive(Debug, Clone, Serialize)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The command line that replays it.
    pub replay: String,
    /// Its violations (the first few), each with the check that found it.
    pub violations: Vec<Finding>,
    /// Its lost updates.
    pub lost_updates: u64,
    /// Its leaked keys.
    pub leaked_keys: Vec<String>,
}

/// The totals of a sweep, as `--json` prints them.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Seeds run.
    pub seeds: u64,
    /// The first seed and the last one run.
    pub seed_range: (u64, u64),
    /// The negative control, if any.
    pub control: Option<String>,
    /// Lock calls made.
    pub attempts: u64,
    /// Lock calls that acquired.
    pub acquisitions: u64,
    /// Commands run on lock masters.
    pub commands: u64,
    /// Faults injected.
    pub faults: u64,
    /// Violations found.
    pub violations: u64,
    /// Violations per check ("mutual exclusion", "semaphore", "read-write", "fair", ...).
    pub violations_by_check: BTreeMap<String, u64>,
    /// Acknowledged updates lost.
    pub lost_updates: u64,
    /// Keys left behind.
    pub leaked_keys: u64,
    /// Fenced writes the store rejected as stale.
    pub stale_rejected: u64,
    /// Acquisitions per kind.
    pub by_kind: BTreeMap<String, u64>,
    /// Holds kept alive by the watchdog.
    pub kept_alive: u64,
    /// Holds that called `extend`.
    pub extends: u64,
    /// Of those, the extends that succeeded.
    pub extends_ok: u64,
    /// Holds whose holder learnt that its lock was lost.
    pub lost_signals: u64,
    /// Seeds that ran with operations (the others ran the classic mix alone).
    pub seeds_with_operations: u64,
    /// Of those, the seeds that put every kind on the same resource names.
    pub seeds_with_shared_keys: u64,
    /// Faults started, by type.
    pub faults_by_type: BTreeMap<String, u64>,
    /// What the operations caused, summed over the seeds.
    pub effects: BTreeMap<String, u64>,
    /// Seeds with out-of-model notes (a VM rollback, ...); their violations count all the same.
    pub out_of_model_seeds: u64,
    /// The first few out-of-model notes, each with its seed.
    pub notes: Vec<String>,
    /// The first seed that failed, if any.
    pub first_failing_seed: Option<u64>,
    /// For a control: the check that must catch it.
    pub target: Option<String>,
    /// For a control: the seeds in which its own check fired.
    pub caught_seeds: u64,
    /// For a control: the first seed in which its own check fired (how soon it was caught).
    pub first_caught_seed: Option<u64>,
    /// Simulated seconds.
    pub simulated_seconds: f64,
    /// Wall-clock seconds.
    pub wall_seconds: f64,
    /// Acquisitions per wall-clock minute.
    pub acquisitions_per_wall_minute: f64,
    /// Simulated seconds per wall-clock second.
    pub speedup: f64,
    /// The history hash of a single seed; for several, the hash of their hashes in order.
    pub history_hash: String,
    /// Failing seeds (the first 20).
    pub failures: Vec<Failure>,
}

/// The command line that replays `seed`.
pub fn replay_command(seed: u64, simulated: Duration, control: Option<Control>) -> String {
    let mut line = format!(
        "cargo run -p quorlock-chaos --release -- simulate --seed {seed} --simulated {}s",
        simulated.as_secs()
    );
    if let Some(control) = control {
        line.push_str(&format!(" --control {control}"));
    }
    line
}

/// Runs the sweep, calling `each` after every seed.
pub fn sweep(plan: Sweep, mut each: impl FnMut(&SeedOutcome)) -> Result<Summary, SimError> {
    let began = Instant::now();
    let mut summary = Summary {
        seeds: 0,
        seed_range: (plan.first, plan.first),
        control: plan.control.map(|c| c.name().to_owned()),
        attempts: 0,
        acquisitions: 0,
        commands: 0,
        faults: 0,
        violations: 0,
        violations_by_check: BTreeMap::new(),
        lost_updates: 0,
        leaked_keys: 0,
        stale_rejected: 0,
        by_kind: BTreeMap::new(),
        kept_alive: 0,
        extends: 0,
        extends_ok: 0,
        lost_signals: 0,
        seeds_with_operations: 0,
        seeds_with_shared_keys: 0,
        faults_by_type: BTreeMap::new(),
        effects: BTreeMap::new(),
        out_of_model_seeds: 0,
        notes: Vec::new(),
        first_failing_seed: None,
        target: plan.control.map(|c| c.target().name().to_owned()),
        caught_seeds: 0,
        first_caught_seed: None,
        simulated_seconds: 0.0,
        wall_seconds: 0.0,
        acquisitions_per_wall_minute: 0.0,
        speedup: 0.0,
        history_hash: String::new(),
        failures: Vec::new(),
    };
    let mut hashes = String::new();
    for seed in plan.first..plan.first.saturating_add(plan.count) {
        if plan.budget.is_some_and(|budget| began.elapsed() >= budget) {
            break;
        }
        let outcome = run_seed(SeedConfig {
            seed,
            simulated: plan.simulated,
            control: plan.control,
            classic: false,
        })?;
        summary.seeds += 1;
        summary.seed_range.1 = seed;
        summary.attempts += outcome.attempts;
        summary.acquisitions += outcome.acquisitions;
        summary.commands += outcome.commands;
        summary.faults += outcome.faults;
        summary.violations += outcome.violations.len() as u64;
        for violation in &outcome.violations {
            *summary
                .violations_by_check
                .entry(violation.check.name().to_owned())
                .or_default() += 1;
        }
        if plan.control.is_some_and(|c| outcome.caught(c)) {
            summary.caught_seeds += 1;
            summary.first_caught_seed.get_or_insert(seed);
        }
        summary.lost_updates += outcome.lost_updates;
        summary.leaked_keys += outcome.leaked_keys.len() as u64;
        summary.stale_rejected += outcome.stale_rejected;
        for (kind, n) in &outcome.by_kind {
            *summary.by_kind.entry(kind.clone()).or_default() += n;
        }
        summary.kept_alive += outcome.kept_alive;
        summary.extends += outcome.extends.0;
        summary.extends_ok += outcome.extends.1;
        summary.lost_signals += outcome.lost_signals;
        summary.seeds_with_operations += u64::from(outcome.operations.0);
        summary.seeds_with_shared_keys += u64::from(outcome.operations.1);
        for (kind, n) in &outcome.faults_by_kind {
            *summary.faults_by_type.entry(kind.clone()).or_default() += n;
        }
        for (effect, n) in &outcome.effects {
            *summary.effects.entry(effect.clone()).or_default() += n;
        }
        if !outcome.notes.is_empty() {
            summary.out_of_model_seeds += 1;
            for note in outcome.notes.iter().take(2) {
                if summary.notes.len() < 20 {
                    summary.notes.push(format!("seed {seed}: {note}"));
                }
            }
        }
        if !outcome.passed() && summary.first_failing_seed.is_none() {
            summary.first_failing_seed = Some(seed);
        }
        summary.simulated_seconds += outcome.simulated.as_secs_f64();
        hashes.push_str(&outcome.history_hash);
        hashes.push('\n');
        if summary.seeds == 1 {
            summary.history_hash = outcome.history_hash.clone();
        }
        if !outcome.passed() && summary.failures.len() < 20 {
            summary.failures.push(Failure {
                seed,
                replay: replay_command(seed, plan.simulated, plan.control),
                violations: outcome.violations.iter().take(5).cloned().collect(),
                lost_updates: outcome.lost_updates,
                leaked_keys: outcome.leaked_keys.iter().take(5).cloned().collect(),
            });
        }
        each(&outcome);
    }
    if summary.seeds > 1 {
        summary.history_hash = sha1_smol::Sha1::from(hashes.as_bytes()).digest().to_string();
    }
    summary.wall_seconds = began.elapsed().as_secs_f64();
    if summary.wall_seconds > 0.0 {
        summary.acquisitions_per_wall_minute = summary.acquisitions as f64 * 60.0 / summary.wall_seconds;
        summary.speedup = summary.simulated_seconds / summary.wall_seconds;
    }
    Ok(summary)
}
