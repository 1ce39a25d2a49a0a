//! The simulation's negative controls: each breaks one assumption RedLock's safety rests on,
//! and the checks must report violations within a few seeds. A control that passes would mean
//! the simulation cannot see that failure.

use std::time::Duration;

use quorlock_chaos::sim::controls::Control;
use quorlock_chaos::sim::run::{run_fair_without_skipping, run_seed, SeedConfig};

/// Seeds tried per control before the test gives up (each finds violations in its first seeds).
const SEEDS: u64 = 10;

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

#[test]
fn a_fair_lock_that_skips_its_queue_is_caught() {
    caught(Control::FairSkipsQueue);
}

/// The same fair-only, fault-free runs with the switch off pass: what the control catches is the
/// skipped queue check, not its workload, and the switch changes nothing while off.
#[test]
fn the_fair_control_without_its_switch_passes() {
    for seed in 0..3 {
        let outcome = run_fair_without_skipping(seed, Duration::from_secs(20)).expect("a run");
        assert!(outcome.passed(), "seed {seed}: {outcome:#?}");
        assert!(
            outcome.by_kind.get("fair").is_some_and(|&n| n > 50),
            "{outcome:?}"
        );
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
