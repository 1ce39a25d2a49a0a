//! Short end-to-end chaos runs: real masters, real quorlock clients, real faults.
//! Kept small (3 masters, a few seconds) so the suite stays fast.

use std::time::Duration;

use quorlock_chaos::drive;
use quorlock_chaos::run::{RunOptions, Verdict};
use quorlock_chaos::{scenario, FaultAction};

fn options(name: &str) -> RunOptions {
    let mut opts = RunOptions::new(*scenario::find(name).unwrap());
    opts.duration = Duration::from_millis(2500);
    opts.masters = 3;
    opts.clients = 4;
    opts.resources = 2;
    opts.ttl = Duration::from_millis(600);
    opts.seed = 7;
    opts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_free_run_records_holds_and_passes() {
    let report = drive::run(options("none")).await.unwrap();
    assert_ne!(report.verdict, Verdict::Fail, "{}", report.summary());
    assert!(
        report.records.iter().any(|r| r.acquired.is_some()),
        "{}",
        report.summary()
    );
    assert!(report.overlaps.is_empty());
    assert!(report.leaks.is_empty(), "{:?}", report.leaks);
    assert_eq!(report.lost_updates.lost, 0);
    assert!(report.applied.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_majority_blocks_acquisitions_and_is_healed() {
    let report = drive::run(options("kill-majority")).await.unwrap();
    assert!(
        report.acquired_without_majority.is_empty(),
        "{}",
        report.summary()
    );
    assert_ne!(report.verdict, Verdict::Fail, "{}", report.summary());
    let kills = report
        .applied
        .iter()
        .filter(|f| matches!(f.action, FaultAction::Kill(_)))
        .count();
    let restarts = report
        .applied
        .iter()
        .filter(|f| matches!(f.action, FaultAction::Restart(..)))
        .count();
    assert_eq!((kills, restarts), (2, 2), "{}", report.summary());
    assert_eq!(report.fault_windows.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_group_cannot_acquire() {
    let report = drive::run(options("partition")).await.unwrap();
    assert!(
        report.acquired_without_majority.is_empty(),
        "{}",
        report.summary()
    );
    assert_ne!(report.verdict, Verdict::Fail, "{}", report.summary());
    assert!(report
        .applied
        .iter()
        .any(|f| f.action == FaultAction::HealNetwork));
}
