//! The simulation's negative controls: each breaks one assumption RedLock's safety rests on,
//! and the checks must report violations within a few seeds. A control that passes would mean
//! the simulation cannot see that failure.

use std::time::Duration;

use quorlock_chaos::sim::checks::Check;
use quorlock_chaos::sim::controls::Control;
use quorlock_chaos::sim::fence_watch::MAJORITY_LOST;
use quorlock_chaos::sim::run::{
    run_seed, run_with_mechanism, SeedConfig, SeedOutcome, PAUSED_INSIDE_LOCK_DELAY, PAUSED_PAST_LOCK_DELAY,
};

/// Seeds tried per control before the test gives up (each finds violations in its first seeds: the
/// eviction control, the latest, at seed 10 since the hand-off queue).
const SEEDS: u64 = 20;

/// The first seed, from 0, at which the control's own check fires. The seeds are fixed and the
/// simulation replays a seed exactly, so this is the same seed on every run: the test cannot
/// pass on one run and fail on the next. A failure of another check does not count.
fn caught(control: Control) -> u64 {
    let mut others = Vec::new();
    for seed in 0..SEEDS {
        let outcome = run_seed(SeedConfig {
            seed,
            simulated: Duration::from_secs(20),
            control: Some(control),
            classic: false,
        })
        .expect("a run");
        if outcome.caught(control) {
            assert!(
                triggered(control, &outcome),
                "control {control}: caught at seed {seed} without what it aims at: {outcome:?}"
            );
            println!("control {control}: caught by {} at seed {seed}", control.target());
            return seed;
        }
        others.extend(outcome.violations.iter().map(ToString::to_string).take(3));
    }
    panic!(
        "control {control}: its own check ({}) fired in none of seeds 0..{SEEDS}; other findings: {others:?}",
        control.target()
    );
}

/// Whether the run went through what `control` aims at, so that a catch is the removed
/// mechanism's and not an accident's: the operations it plans took effect, and the kinds it
/// checks were taken.
fn triggered(control: Control, outcome: &SeedOutcome) -> bool {
    let effect = |name: &str| outcome.effects.get(name).copied().unwrap_or(0) > 0;
    let fault = |prefix: &str| outcome.faults_by_kind.keys().any(|k| k.starts_with(prefix));
    let kind = |name: &str| outcome.by_kind.get(name).copied().unwrap_or(0) > 0;
    match control {
        Control::WithoutReplacedRule => fault("replica promoted") || fault("server replaced"),
        Control::WithoutDurabilityRule => effect("crashes that lost the last writes (everysec)"),
        Control::WithoutEvictionRule => effect("keys evicted"),
        Control::WithoutDriftAllowance => kind("plain"),
        Control::WithoutPermitsCheck => kind("semaphore"),
        Control::WithoutReadersCheck => kind("read") && kind("fencedwrite"),
        Control::WithoutEpochCheck => effect(MAJORITY_LOST) && kind("fenced"),
        Control::WithoutCommitKeyCheck => kind("fenced") && outcome.faults > 0,
        Control::PastLockDelay => fault(PAUSED_PAST_LOCK_DELAY),
        _ => true,
    }
}

#[test]
fn a_quorum_of_one_is_caught() {
    caught(Control::QuorumOfOne);
}

#[test]
fn ignoring_validity_is_caught() {
    caught(Control::IgnoreValidity);
}

#[test]
fn a_pause_past_validity_without_fencing_is_caught() {
    caught(Control::PauseUnfenced);
}

#[test]
fn wiped_restarts_without_grace_are_caught() {
    caught(Control::WipeWithoutGrace);
}

#[test]
fn clock_jumps_beyond_the_drift_allowance_are_caught() {
    caught(Control::ClockJump);
}

#[test]
fn clients_clocks_that_stand_still_while_they_run_are_caught() {
    caught(Control::ClientClockStall);
}

#[test]
fn vm_rollbacks_with_the_same_run_id_are_caught() {
    caught(Control::VmRollback);
}

/// Seed 5002 found it in model, as the plan then had it: a plain holder with exactly a majority,
/// one master of it replaced behind a proxy that kept every connection, and a writer on the same
/// name granted by the new server before any client's check saw the swap. Out of model since (see
/// `Control::KeptConnections`). The hand-off queue changed every history, and 5002 no longer
/// meets the situation; seed 211 does (7 of seeds 200..2199 are caught), and is replayed: its
/// history hash pins it, and the situation must still occur in it.
#[test]
fn a_server_swapped_behind_kept_connections_is_caught_at_seed_211() {
    let control = Control::KeptConnections;
    let outcome = run_seed(SeedConfig {
        seed: 211,
        simulated: Duration::from_secs(30),
        control: Some(control),
        classic: false,
    })
    .expect("a run");
    assert!(outcome.caught(control), "{outcome:#?}");
    assert!(
        outcome
            .faults_by_kind
            .contains_key("server replaced, connections kept"),
        "{:?}",
        outcome.faults_by_kind
    );
    assert_eq!(outcome.history_hash, "40c9f925b86a327305cff003cb0def6f0d50c6a5");
    // In model, the same seed keeps the connections of no swap, and passes.
    let in_model = run_seed(SeedConfig {
        control: None,
        ..SeedConfig {
            seed: 211,
            simulated: Duration::from_secs(30),
            control: None,
            classic: false,
        }
    })
    .expect("a run");
    assert!(in_model.passed(), "{:#?}", in_model.violations);
}

#[test]
fn a_fair_lock_that_skips_its_queue_is_caught() {
    caught(Control::FairSkipsQueue);
}

/// The same fair-only, fault-free runs with the switch off pass: what the control catches is the
/// skipped queue check, not its workload, and the switch changes nothing while off.
#[test]
fn the_fair_control_without_its_switch_passes() {
    for seed in 0..3 {
        let outcome =
            run_with_mechanism(Control::FairSkipsQueue, seed, Duration::from_secs(20)).expect("a run");
        assert!(outcome.passed(), "seed {seed}: {outcome:#?}");
        assert!(
            outcome.by_kind.get("fair").is_some_and(|&n| n > 50),
            "{outcome:?}"
        );
    }
}

#[test]
fn promoted_or_replaced_majorities_without_the_replaced_master_rule_are_caught() {
    caught(Control::WithoutReplacedRule);
}

#[test]
fn lowered_then_crashed_majorities_without_the_durability_rule_are_caught() {
    caught(Control::WithoutDurabilityRule);
}

#[test]
fn evicting_majorities_without_the_eviction_rule_are_caught() {
    caught(Control::WithoutEvictionRule);
}

#[test]
fn validities_without_the_drift_allowance_are_caught() {
    caught(Control::WithoutDriftAllowance);
}

#[test]
fn semaphores_of_other_counts_without_the_permits_check_are_caught() {
    caught(Control::WithoutPermitsCheck);
}

#[test]
fn fenced_writers_without_the_readers_check_are_caught() {
    caught(Control::WithoutReadersCheck);
}

#[test]
fn lost_increments_without_the_epoch_check_are_caught() {
    caught(Control::WithoutEpochCheck);
}

/// Its check fires within the seeds; but the same check fires on some seeds with the key check in
/// place (see `each_removed_mechanism_in_place_passes_the_same_runs`): its suspended clients'
/// token order is out of model whatever the library does, so this catch alone does not prove the
/// key check. A judge of what each commit found on the masters would.
#[test]
fn commits_without_the_key_check_in_suspended_clients_are_caught() {
    caught(Control::WithoutCommitKeyCheck);
}

/// The checks that judge safety: a control's twin with its mechanism in place must pass every
/// one. Liveness may complain there, since what those runs do to a majority at once (promote it,
/// crash it, fill its memory) rightly keeps it out of every quorum for a while.
const SAFETY: [Check; 7] = [
    Check::Exclusion,
    Check::AllOrNothing,
    Check::Fencing,
    Check::FairOrder,
    Check::Semaphore,
    Check::ReadWrite,
    Check::LostUpdates,
];

/// Each control that removes a mechanism, run with the mechanism left in place on the seeds the
/// control is caught on and a few more: no safety check fires, and the operations it aims at did
/// happen (what it catches comes from the removal, not from its workload or plan).
#[test]
fn each_removed_mechanism_in_place_passes_the_same_runs() {
    for control in Control::ALL.into_iter().filter(|c| c.with_operations()) {
        for seed in 0..6 {
            let outcome = run_with_mechanism(control, seed, Duration::from_secs(20)).expect("a run");
            // A suspended client's hold outlives its lock whatever the library does, and a
            // suspended client's acquire can return, with the token of its early first round,
            // after a later holder's lock ended: its twin cannot keep mutual exclusion nor the
            // token order (the suspended writer's write is still refused as stale). It keeps every
            // other check. So this twin does not show that the control's own catch (the token
            // order) comes from the removed check: with the check in place the same finding
            // appears on some seeds (2, 13, 15, 25 of 0..30; 12, 14, 24, 25 before the hand-off
            // queue changed the histories), which is why that control is not counted as proven.
            let kept = |c: &Check| {
                !(control.breaks_exclusion_anyway() && matches!(c, Check::Exclusion | Check::Fencing))
            };
            let fired: Vec<Check> = SAFETY
                .into_iter()
                .filter(kept)
                .filter(|c| outcome.fired(*c))
                .collect();
            assert!(
                fired.is_empty() && outcome.leaked_keys.is_empty(),
                "control {control}, mechanism in place, seed {seed}: {fired:?} fired: {:#?}",
                outcome.violations
            );
            if control == Control::WithoutEvictionRule {
                // The rule in place refuses the votes of the evicting majority: nothing is taken.
                assert_eq!(
                    outcome.acquisitions, 0,
                    "control {control}, seed {seed}: {outcome:?}"
                );
            } else {
                assert!(
                    outcome.acquisitions > 20,
                    "control {control}, seed {seed}: {outcome:?}"
                );
            }
        }
    }
}

#[test]
fn holders_paused_past_their_lock_delay_are_caught() {
    caught(Control::PastLockDelay);
}

/// The control's twin: the same seeds, the same paused holders of unfenced locks writing after
/// their validity ended, under a lock-delay longer than every pause. Nothing is lost.
#[test]
fn holders_paused_inside_their_lock_delay_lose_no_update() {
    for seed in 0..6 {
        let outcome =
            run_with_mechanism(Control::PastLockDelay, seed, Duration::from_secs(20)).expect("a run");
        let paused = outcome
            .faults_by_kind
            .get(PAUSED_INSIDE_LOCK_DELAY)
            .copied()
            .unwrap_or(0);
        assert!(paused > 0, "seed {seed}: holders paused: {outcome:?}");
        let fired: Vec<Check> = SAFETY.into_iter().filter(|c| outcome.fired(*c)).collect();
        assert!(
            fired.is_empty() && outcome.leaked_keys.is_empty(),
            "lock-delay longer than the pauses, seed {seed}: {fired:?} fired: {:#?}",
            outcome.violations
        );
        assert!(outcome.acquisitions > 20, "seed {seed}: {outcome:?}");
    }
}

#[test]
fn control_names_round_trip_and_unknown_ones_are_refused() {
    for control in Control::ALL {
        assert_eq!(control.name().parse::<Control>(), Ok(control));
    }
    let err = "quorum-of-two".parse::<Control>().expect_err("not a control");
    assert!(err.to_string().contains("quorum-of-one"), "{err}");
}
