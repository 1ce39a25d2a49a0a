//! Negative controls: deliberately unsafe clients and an out-of-model client stall, run end
//! to end against real masters. The checker must report violations for each, which proves
//! that a clean in-model run means something.
//!
//! The violations are built, not left to timing. The unsafe clients open with a round played
//! in turns on one resource (`quorlock_chaos::opening`): two single-master clients on different
//! masters both hold it and read the witness before either writes; a client that ignores its
//! validity is followed by one that takes the lock as it expires and reads the same value. The
//! stalled client of `client-pause` stays stalled until another client has written, and the
//! others keep going until its stall is over. Each control must be caught by its own check.

use std::time::Duration;

use quorlock_chaos::drive;
use quorlock_chaos::run::{RunOptions, RunReport, Verdict};
use quorlock_chaos::scenario;
use quorlock_chaos::workload::ClientMode;

/// Seed of a control; `QUORLOCK_CHAOS_SEED` overrides it to replay another run.
fn seed(default: u64) -> u64 {
    std::env::var("QUORLOCK_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn options(name: &str, mode: ClientMode, seed: u64) -> RunOptions {
    let mut opts = RunOptions::new(*scenario::find(name).unwrap());
    opts.masters = 3;
    opts.clients = 6;
    opts.resources = 1;
    opts.mode = mode;
    opts.seed = seed;
    println!(
        "negative control: scenario {name}, {} clients, seed {seed}",
        mode.name()
    );
    opts
}

/// The checker's evidence, printed with every failed assertion.
fn evidence(report: &RunReport) -> String {
    format!(
        "\n{}\n(replay with QUORLOCK_CHAOS_SEED={})",
        report.summary(),
        report.options.seed
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_of_one_master_per_client_shows_overlaps_and_lost_updates() {
    // Two clients per master, each client locking through its master alone: clients of
    // different masters never see each other's keys.
    let mut opts = options("none", ClientMode::SingleMaster, seed(101));
    opts.duration = Duration::from_secs(3);
    opts.ttl = Duration::from_secs(1);
    let report = drive::run(opts).await.unwrap();
    assert!(
        !report.overlaps.is_empty(),
        "no overlap detected{}",
        evidence(&report)
    );
    assert!(
        report.lost_updates.lost > 0,
        "no lost update detected{}",
        evidence(&report)
    );
    assert_eq!(report.verdict, Verdict::Fail, "{}", evidence(&report));
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("caught by its own check (overlaps)")),
        "{}",
        evidence(&report)
    );
    // The opening round's players 0 and 1 (masters 0 and 1) held r0 at once.
    assert!(
        report.overlaps.iter().any(|o| {
            let pair = [o.first.client, o.second.client];
            pair.contains(&0) && pair.contains(&1)
        }),
        "{}",
        evidence(&report)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holding_past_the_validity_and_writing_anyway_loses_updates() {
    // Holds of 2-3 TTLs without a validity check: each lock expires mid-hold, a waiting
    // client takes it and reads the same counter value before the first writer writes.
    let mut opts = options("none", ClientMode::IgnoreValidity, seed(202));
    opts.clients = 4;
    opts.duration = Duration::from_secs(3);
    opts.ttl = Duration::from_millis(300);
    let report = drive::run(opts).await.unwrap();
    assert!(
        report.lost_updates.lost > 0,
        "no lost update detected{}",
        evidence(&report)
    );
    assert!(report.stats.late_writes > 0, "{}", evidence(&report));
    // The timestamps alone show nothing here: each hold's safe interval ends with its
    // validity. Only the witness sees what the client did after that.
    assert_eq!(report.verdict, Verdict::Fail, "{}", evidence(&report));
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("caught by its own check (lost updates)")),
        "{}",
        evidence(&report)
    );
    // The opening round alone loses two increments: its three players all read 0.
    assert!(report.lost_updates.lost >= 2, "{}", evidence(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_stalled_past_its_validity_without_fencing_loses_updates() {
    // The client-pause scenario stalls a client for two TTLs between its validity check
    // and its write, twice; the others keep incrementing the only counter meanwhile.
    // A stall lands at the chosen client's next write, which a client starved of the only
    // resource may reach late; the long tail after the second request (at 60%) leaves
    // the others time to increment under it anyway.
    let mut opts = options("client-pause", ClientMode::Safe, seed(303));
    opts.clients = 4;
    opts.duration = Duration::from_secs(6);
    opts.ttl = Duration::from_millis(500);
    let report = drive::run(opts).await.unwrap();
    let stalls = report
        .applied
        .iter()
        .filter(|f| matches!(f.action, quorlock_chaos::FaultAction::PauseClient(..)))
        .count();
    assert_eq!(stalls, 2, "{}", evidence(&report));
    assert!(
        report.lost_updates.lost > 0,
        "no lost update detected{}",
        evidence(&report)
    );
    assert!(report.stats.late_writes > 0, "{}", evidence(&report));
    // Out of model: reported, not failed.
    assert_ne!(report.verdict, Verdict::Fail, "{}", evidence(&report));
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("lost increments observed")),
        "{}",
        evidence(&report)
    );
}
