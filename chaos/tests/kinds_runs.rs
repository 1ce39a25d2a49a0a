//! Whole chaos runs (`drive::run`, as `quorlock-chaos run --kind ...` does them) of the semaphore
//! and the read-write lock under in-model scenarios, judged by the run's verdict: no excess over
//! the permits, no read inside a write, no two writes at once, no acquisition without a majority,
//! no leaked key. The negative control counts permits per master on a simple majority under
//! `split-majorities` on three masters (each client group cut off from a different master),
//! with an opening round played in turns, and must be caught by the semaphore's bound.
//!
//! Each run is seeded (printed; `QUORLOCK_CHAOS_SEED` replays another seed) and lasts 3 s.

use std::time::Duration;

use quorlock_chaos::drive;
use quorlock_chaos::run::{Kind, RunOptions, RunReport, Verdict};
use quorlock_chaos::scenario;
use quorlock_chaos::workload::ClientMode;

/// Seed of the runs; `QUORLOCK_CHAOS_SEED` overrides it.
fn seed() -> u64 {
    std::env::var("QUORLOCK_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_127)
}

fn options(name: &str, kind: Kind, mode: ClientMode) -> RunOptions {
    let mut opts = RunOptions::new(*scenario::find(name).unwrap());
    opts.masters = 5;
    opts.clients = 10;
    opts.ttl = Duration::from_secs(1);
    opts.duration = Duration::from_secs(3);
    opts.seed = seed();
    opts.kind = kind;
    opts.mode = mode;
    println!(
        "scenario {name}, kind {}, {} clients, seed {}",
        kind.name(),
        mode.name(),
        opts.seed
    );
    opts
}

fn evidence(report: &RunReport) -> String {
    format!(
        "\n{}\n(replay with QUORLOCK_CHAOS_SEED={})",
        report.summary(),
        report.options.seed
    )
}

/// Runs `name` with safe clients of `kind` and checks that every rule held.
async fn run_safe(name: &str, kind: Kind) -> RunReport {
    let report = drive::run(options(name, kind, ClientMode::Safe)).await.unwrap();
    let evidence = evidence(&report);
    println!("{}", report.table_row());
    let kinds = report.kinds.as_ref().expect("a kinds run has kind findings");
    assert!(kinds.excesses.is_empty(), "more holders than permits{evidence}");
    assert!(kinds.reader_writer.is_empty(), "a read inside a write{evidence}");
    assert!(report.overlaps.is_empty(), "two writes at once{evidence}");
    assert!(
        report.acquired_without_majority.is_empty(),
        "acquired without a reachable majority{evidence}"
    );
    assert!(report.leaks.is_empty(), "keys leaked{evidence}");
    assert_eq!(report.verdict, Verdict::Pass, "{evidence}");
    assert!(report.acquisitions > 0, "nothing was ever held{evidence}");
    if kind == Kind::RwLock {
        let writes = report.records.iter().filter(|r| r.acquired.is_some()).count();
        let reads = kinds.reads.iter().filter(|r| r.acquired.is_some()).count();
        assert!(
            writes > 0 && reads > 0,
            "both reads and writes were held{evidence}"
        );
    }
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_keeps_its_permits_with_a_minority_killed() {
    let report = run_safe("kill-minority", Kind::Semaphore(2)).await;
    assert!(report.acquisitions_under_faults > 0, "{}", evidence(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_keeps_its_permits_when_each_group_misses_a_different_master() {
    run_safe("split-majorities", Kind::Semaphore(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_keeps_its_permits_across_a_partition() {
    run_safe("partition", Kind::Semaphore(3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_read_overlaps_a_write_with_a_minority_killed() {
    let report = run_safe("kill-minority", Kind::RwLock).await;
    assert!(report.acquisitions_under_faults > 0, "{}", evidence(&report));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_read_overlaps_a_write_when_each_group_misses_a_different_master() {
    run_safe("split-majorities", Kind::RwLock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_read_overlaps_a_write_with_a_minority_paused() {
    run_safe("pause-minority-short", Kind::RwLock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn majority_counting_is_caught_holding_more_permits_than_there_are() {
    // Three masters, each group cut off from a different one, and the opening round played in
    // turns: clients 0, 1 and 2 count on masters {1, 2}, {0, 2} and {0, 1} and all three hold
    // one of the two permits at once, every run. (With clients racing instead, a 3 s run with
    // no fault missed it about one run in four.)
    let mut opts = options(
        "split-majorities",
        Kind::Semaphore(2),
        ClientMode::MajorityCounting,
    );
    opts.masters = 3;
    let report = drive::run(opts).await.unwrap();
    let evidence = evidence(&report);
    println!("{}", report.table_row());
    let kinds = report.kinds.as_ref().expect("a kinds run has kind findings");
    assert!(
        !kinds.excesses.is_empty(),
        "the checker missed majority counting's extra holders{evidence}"
    );
    assert!(kinds.excesses.iter().all(|e| e.holders.len() > 2), "{evidence}");
    // The opening round's three players held at once.
    assert!(
        kinds
            .excesses
            .iter()
            .any(|e| (0..3).all(|p| e.holders.iter().any(|h| h.client == p))),
        "{evidence}"
    );
    assert_eq!(report.verdict, Verdict::Fail, "{evidence}");
    assert!(
        report
            .notes
            .iter()
            .any(|n| n.contains("caught by its own check (semaphore excess)")),
        "{evidence}"
    );
}

/// The control's safe twin: the same construction with quorlock's semaphore never holds more
/// than its permits (the third player is refused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_refuses_the_third_player_of_the_counterexample() {
    let mut opts = options("split-majorities", Kind::Semaphore(2), ClientMode::Safe);
    opts.masters = 3;
    let report = drive::run(opts).await.unwrap();
    let evidence = evidence(&report);
    let kinds = report.kinds.as_ref().expect("a kinds run has kind findings");
    assert!(kinds.excesses.is_empty(), "more holders than permits{evidence}");
    assert_eq!(report.verdict, Verdict::Pass, "{evidence}");
    // Players 0 and 1 took the two permits in the opening round; player 2's first try failed.
    let first = |c: usize| report.records.iter().find(|r| r.client == c).cloned();
    assert!(first(0).and_then(|r| r.acquired).is_some(), "{evidence}");
    assert!(first(1).and_then(|r| r.acquired).is_some(), "{evidence}");
    assert!(
        first(2).is_some_and(|r| r.acquired.is_none()),
        "{:#?}{evidence}",
        report
            .records
            .iter()
            .filter(|r| r.client < 3)
            .take(6)
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_control_with_the_wrong_kind_is_refused_before_anything_starts() {
    let opts = options("none", Kind::RwLock, ClientMode::MajorityCounting);
    let err = drive::run(opts).await.unwrap_err().to_string();
    assert!(err.contains("read-write"), "{err}");
}

/// Every key the kinds' clients write must start with the prefix the leak scan reads, or a key
/// they leave behind would never be found.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_key_of_the_kinds_is_under_the_scanned_prefix() {
    use quorlock_chaos::kinds_workload::{self, KindsHistory, KindsMode, KindsOptions};
    use quorlock_chaos::workload::WorkloadOptions;
    use quorlock_chaos::{Cluster, History, RunClock};

    let prefix = WorkloadOptions::new(1, Duration::from_secs(1), 1).key_prefix;
    let cluster = Cluster::start(3).await.unwrap();
    let modes = [
        KindsMode::Semaphore(2),
        KindsMode::ReadWrite(2),
        KindsMode::MajorityCounting(2),
    ];
    for mode in modes {
        let opts = KindsOptions {
            clients: 4,
            resource: "r0".into(),
            ttl: Duration::from_secs(2),
            hold: (Duration::from_millis(300), Duration::from_millis(400)),
            node_timeout: Duration::from_millis(250),
            seed: seed(),
            mode,
            key_prefix: prefix.clone(),
            opening: None,
        };
        let clock = RunClock::new();
        let history = KindsHistory {
            holds: History::new(clock),
            reads: History::new(clock),
        };
        let urls = vec![cluster.urls()];
        let work = kinds_workload::run(&opts, &urls, &history, Duration::from_millis(1500));
        // Every key seen on any master, sampled every 50 ms while the clients run.
        let sample = async {
            let mut seen = std::collections::BTreeSet::new();
            let mut conns = Vec::new();
            for url in cluster.urls() {
                let client = redis::Client::open(url).unwrap();
                conns.push(client.get_multiplexed_async_connection().await.unwrap());
            }
            for _ in 0..25 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                for conn in &mut conns {
                    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(conn).await.unwrap();
                    seen.extend(keys);
                }
            }
            seen
        };
        let (taken, keys) = tokio::join!(work, sample);
        assert!(taken.unwrap() > 0, "{mode:?}: nothing held");
        println!("{mode:?}: {keys:?}");
        assert!(!keys.is_empty(), "{mode:?}: no key seen while holds were taken");
        assert!(
            keys.iter().all(|k| k.starts_with(&prefix)),
            "{mode:?}: keys outside {prefix:?}: {keys:?}"
        );
    }
}
