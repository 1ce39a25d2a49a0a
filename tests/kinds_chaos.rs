//! The semaphore and the read-write lock under the in-model faults, judged by the chaos checker's
//! rules "at most P holders of a semaphore" and "no reader overlaps a writer": each client cut off
//! from a different master (the majority-counting counterexample, as partitions), and a minority
//! of masters killed mid-run. The negative control runs majority counting under the same
//! partitions and must be caught. Each run prints its counts.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::cluster;
use quorlock_chaos::checker::{overlaps, reader_writer_overlaps, too_many_holders};
use quorlock_chaos::kinds_workload::{run, KindsHistory, KindsMode, KindsOptions};
use quorlock_chaos::opening::{Opening, PLAYERS};
use quorlock_chaos::{Cluster, History, ProxyGroup, RunClock};

const RUN: Duration = Duration::from_secs(3);

fn options(clients: usize, mode: KindsMode, seed: u64) -> KindsOptions {
    KindsOptions {
        clients,
        resource: "kinds".into(),
        ttl: Duration::from_secs(2),
        hold: (Duration::from_millis(10), Duration::from_millis(80)),
        node_timeout: Duration::from_millis(150),
        seed,
        mode,
        key_prefix: "quorlock-chaos:".into(),
        opening: None,
    }
}

fn history() -> KindsHistory {
    let clock = RunClock::new();
    KindsHistory {
        holds: History::new(clock),
        reads: History::new(clock),
    }
}

/// Runs `opts` with one proxy group per client, group `g` cut off from master `g % masters`,
/// the first three clients taking a permit in turn before anyone runs freely, each keeping it
/// until all three have tried: with three masters, client 0 counts on masters 1 and 2, client 1
/// on 0 and 2, client 2 on 0 and 1, so majority counting holds three permits at once every
/// time. The construction, not the timing, makes the counterexample.
async fn partitioned(c: &Cluster, opts: &KindsOptions) -> KindsHistory {
    let proxies = ProxyGroup::start(c, opts.clients).await.expect("proxies");
    // The masters were in use before the cut: a client that reached them all wrote their records
    // (a client built during the cut takes a master without one for one that lost its data).
    common::locks(c).await;
    for group in 0..opts.clients {
        proxies.partition(group, &[group % c.len()]).expect("partition");
    }
    let urls: Vec<Vec<String>> = (0..opts.clients).map(|g| proxies.urls(g)).collect();
    let history = history();
    let opts = KindsOptions {
        opening: Some(Opening::local(PLAYERS, Arc::default(), 0)),
        ..opts.clone()
    };
    run(&opts, &urls, &history, RUN).await.expect("workload");
    proxies.heal();
    history
}

#[tokio::test]
async fn a_semaphore_never_exceeds_its_permits_when_each_client_misses_a_different_master() {
    let c = cluster(3).await;
    let opts = options(6, KindsMode::Semaphore(2), 1);
    let history = partitioned(&c, &opts).await;
    let records = history.holds.records();
    let held = records.iter().filter(|r| r.acquired.is_some()).count();
    let excess = too_many_holders(&records, 2);
    eprintln!(
        "semaphore, partitions: {held} holds of {} attempts, {} excesses",
        records.len(),
        excess.len()
    );
    assert!(held > 0, "no permit was ever held");
    assert!(excess.is_empty(), "{excess:?}");
}

#[tokio::test]
async fn majority_counting_is_caught_when_each_client_misses_a_different_master() {
    let c = cluster(3).await;
    let opts = options(6, KindsMode::MajorityCounting(2), 1);
    let history = partitioned(&c, &opts).await;
    let records = history.holds.records();
    let held = records.iter().filter(|r| r.acquired.is_some()).count();
    let excess = too_many_holders(&records, 2);
    eprintln!(
        "majority counting, partitions: {held} holds of {} attempts, {} excesses",
        records.len(),
        excess.len()
    );
    assert!(
        !excess.is_empty(),
        "the checker missed majority counting's extra holders"
    );
    assert!(excess.iter().all(|e| e.holders.len() > 2));
    // The opening round's three players held at once.
    assert!(
        excess
            .iter()
            .any(|e| (0..PLAYERS).all(|p| e.holders.iter().any(|h| h.client == p))),
        "{excess:?}"
    );
}

#[tokio::test]
async fn a_semaphore_never_exceeds_its_permits_with_a_minority_killed() {
    let mut c = cluster(5).await;
    let opts = options(8, KindsMode::Semaphore(3), 2);
    let history = history();
    let urls = vec![c.urls()];
    let work = run(&opts, &urls, &history, RUN);
    let kill = async {
        tokio::time::sleep(RUN / 3).await;
        c.kill(0).expect("kill");
        c.kill(1).expect("kill");
    };
    let (taken, ()) = tokio::join!(work, kill);
    let records = history.holds.records();
    let excess = too_many_holders(&records, 3);
    eprintln!(
        "semaphore, kill 2 of 5: {} holds of {} attempts, {} excesses",
        taken.expect("workload"),
        records.len(),
        excess.len()
    );
    assert!(excess.is_empty(), "{excess:?}");
}

#[tokio::test]
async fn no_reader_overlaps_a_writer_under_partitions_and_a_kill() {
    let mut c = cluster(3).await;
    let opts = options(6, KindsMode::ReadWrite(3), 3);
    let proxies = ProxyGroup::start(&c, opts.clients).await.expect("proxies");
    // In use before the cut (see `partitioned`).
    common::locks(&c).await;
    for group in 0..opts.clients {
        proxies.partition(group, &[group % 3]).expect("partition");
    }
    let urls: Vec<Vec<String>> = (0..opts.clients).map(|g| proxies.urls(g)).collect();
    let history = history();
    let work = run(&opts, &urls, &history, RUN);
    let heal_then_kill = async {
        tokio::time::sleep(RUN / 3).await;
        proxies.heal();
        c.kill(2).expect("kill");
    };
    let (taken, ()) = tokio::join!(work, heal_then_kill);
    let (writes, reads) = (history.holds.records(), history.reads.records());
    let count = |r: &[quorlock_chaos::LockRecord]| r.iter().filter(|r| r.acquired.is_some()).count();
    let crossed = reader_writer_overlaps(&reads, &writes);
    let doubled = overlaps(&writes);
    eprintln!(
        "read-write, partitions then kill 1 of 3: {} holds ({} reads, {} writes), {} reader/writer overlaps, {} writer overlaps",
        taken.expect("workload"),
        count(&reads),
        count(&writes),
        crossed.len(),
        doubled.len()
    );
    assert!(
        count(&reads) > 0 && count(&writes) > 0,
        "both kinds of hold were taken"
    );
    assert!(crossed.is_empty(), "{crossed:?}");
    assert!(doubled.is_empty(), "{doubled:?}");
}
