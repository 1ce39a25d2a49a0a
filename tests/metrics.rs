//! Every metric in docs/metrics.md moves in a scenario that should move it, read through a
//! recording recorder: acquisitions by outcome, waits and rounds, holds, losses by cause, renewals
//! and their failures, node errors by master, and the ignored-masters gauge for a master that is
//! SIGSTOPped and for masters within their restart grace.
//!
//! The recorder is process-wide, so the scenarios run one after another in a single test.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use common::{builder, cluster, eventually};
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use metrics_util::MetricKind;
use quorlock::metrics as names;
use quorlock::{Ignored, ReleaseError};
use quorlock_chaos::{Cluster, ClusterOptions};
use redis::AsyncCommands;

/// A metric with its labels, sorted.
type Series = (String, Vec<(String, String)>);

/// What the recorder held, accumulated over its snapshots (each one resets counters and gauges to
/// zero and drains histograms): counters and gauges as their total, histograms as the number of
/// samples.
struct Recorded {
    snapshotter: Snapshotter,
    values: HashMap<Series, f64>,
}

impl Recorded {
    fn install() -> Self {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        recorder.install().expect("install the recorder");
        Self {
            snapshotter,
            values: HashMap::new(),
        }
    }

    /// Reads the recorder into the totals.
    fn read(&mut self) {
        for (key, _, _, value) in self.snapshotter.snapshot().into_vec() {
            let kind = key.kind();
            let (key, labels) = key.key().clone().into_parts();
            let mut labels: Vec<(String, String)> = labels
                .into_iter()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            let series = (key.as_str().to_owned(), labels);
            let delta = match (kind, value) {
                (MetricKind::Counter, DebugValue::Counter(v)) => v as f64,
                // quorlock only moves its gauges up and down, never sets them.
                (MetricKind::Gauge, DebugValue::Gauge(v)) => v.into_inner(),
                (MetricKind::Histogram, DebugValue::Histogram(samples)) => samples.len() as f64,
                _ => continue,
            };
            *self.values.entry(series).or_default() += delta;
        }
    }

    /// The value of `name` with exactly `labels` (0 when never recorded).
    fn get(&mut self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.read();
        let mut labels: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        labels.sort();
        self.values
            .get(&(name.to_owned(), labels))
            .copied()
            .unwrap_or(0.0)
    }

    /// The sum of `name` over every series whose labels include `labels`.
    fn sum(&mut self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.read();
        self.values
            .iter()
            .filter(|((n, l), _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))
            })
            .map(|(_, v)| *v)
            .sum()
    }
}

const TTL: Duration = Duration::from_secs(5);

fn acquisitions(kind: &'static str, outcome: &'static str) -> [(&'static str, &'static str); 2] {
    [(names::LABEL_KIND, kind), (names::LABEL_OUTCOME, outcome)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_metric_moves() {
    let mut m = Recorded::install();
    let mut c = cluster(3).await;
    let a = builder(&c)
        .health_refresh(Duration::from_millis(200))
        .build()
        .await
        .expect("build");
    let b = builder(&c).build().await.expect("build");

    // Acquired, held, released: acquisitions, the wait, the round, the gauge and the hold time.
    let guard = a.acquire("m:plain", TTL).await.expect("acquire");
    assert_eq!(
        m.get(names::ACQUISITIONS, &acquisitions("plain", "acquired")),
        1.0
    );
    assert_eq!(
        m.get(names::ACQUIRE_WAIT, &acquisitions("plain", "acquired")),
        1.0
    );
    assert!(m.get(names::ROUND, &[(names::LABEL_OUTCOME, "majority")]) >= 1.0);
    assert_eq!(m.get(names::HELD, &[]), 1.0);

    // Contended (one round refused by a holder), then timed out (the wait ran out).
    let err = b.try_acquire("m:plain", TTL).await.expect_err("held by a");
    assert!(err.is_contended(), "{err}");
    assert_eq!(
        m.get(names::ACQUISITIONS, &acquisitions("plain", "contended")),
        1.0
    );
    assert!(m.get(names::ROUND, &[(names::LABEL_OUTCOME, "no_majority")]) >= 1.0);
    let err = b
        .lock("m:plain", TTL)
        .wait(Duration::from_millis(100))
        .acquire()
        .await
        .expect_err("held by a");
    assert!(err.is_timeout(), "{err}");
    assert_eq!(
        m.get(names::ACQUISITIONS, &acquisitions("plain", "timed_out")),
        1.0
    );
    assert_eq!(
        m.get(names::ACQUIRE_WAIT, &acquisitions("plain", "timed_out")),
        1.0
    );
    // Refusals by a healthy master are not node errors.
    assert_eq!(m.sum(names::NODE_ERRORS, &[]), 0.0);

    guard.release().await.expect("release");
    assert_eq!(m.get(names::HELD, &[]), 0.0);
    assert_eq!(m.get(names::HOLD, &[]), 1.0);

    // Each kind is labelled as itself.
    let fenced = a.lock("m:fenced", TTL).fenced().acquire().await.expect("fenced");
    fenced.release().await.expect("release");
    assert_eq!(
        m.get(names::ACQUISITIONS, &acquisitions("fenced", "acquired")),
        1.0
    );
    let multi = a.lock_all(["m:x", "m:y"], TTL).acquire().await.expect("multi");
    multi.release().await.expect("release");
    assert_eq!(
        m.get(names::ACQUISITIONS, &acquisitions("multi", "acquired")),
        1.0
    );

    // A guard dropped without release leaves the held set too.
    drop(a.acquire("m:dropped", TTL).await.expect("acquire"));
    assert_eq!(m.get(names::HELD, &[]), 0.0);
    assert_eq!(m.get(names::HOLD, &[]), 4.0);

    // Renewals: a kept-alive lock renews; once another token sits on every master, the renewal
    // fails and the lock is lost to the other holder.
    let kept = a
        .acquire("m:kept", Duration::from_millis(600))
        .await
        .expect("acquire");
    kept.keep_alive();
    assert!(
        eventually(Duration::from_secs(3), || {
            let renewed = m.get(names::RENEWALS, &[]) >= 1.0;
            async move { renewed }
        })
        .await,
        "no renewal recorded"
    );
    assert_eq!(m.get(names::RENEWAL_FAILURES, &[]), 0.0);
    for i in 0..c.len() {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn.pset_ex("m:kept", "someone-else", 5_000).await.expect("SET");
    }
    tokio::time::timeout(Duration::from_secs(3), kept.lost())
        .await
        .expect("the watchdog finds the lock lost");
    assert!(m.get(names::RENEWAL_FAILURES, &[]) >= 1.0);
    assert_eq!(m.get(names::LOST, &[(names::LABEL_CAUSE, "taken_over")]), 1.0);
    // Releasing a lock already known lost does not count it again.
    assert!(kept.release().await.is_err());
    assert_eq!(m.sum(names::LOST, &[]), 1.0);

    // An extend that finds the key gone everywhere.
    let gone = a.acquire("m:gone", TTL).await.expect("acquire");
    for i in 0..c.len() {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn.del("m:gone").await.expect("DEL");
    }
    assert!(gone.extend(TTL).await.is_err());
    assert_eq!(m.get(names::LOST, &[(names::LABEL_CAUSE, "extend_failed")]), 1.0);
    drop(gone);

    // A lock whose validity ran out before its release.
    let short = a
        .acquire("m:short", Duration::from_millis(500))
        .await
        .expect("acquire");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let err = short.release().await.expect_err("expired");
    assert!(matches!(err, ReleaseError::Expired { .. }), "{err}");
    assert_eq!(m.get(names::LOST, &[(names::LABEL_CAUSE, "expired")]), 1.0);

    // A released key gone from a majority while the guard still counts it valid.
    let vanished = a.acquire("m:vanished", TTL).await.expect("acquire");
    for i in 0..c.len() {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn.del("m:vanished").await.expect("DEL");
    }
    assert!(vanished.release().await.is_err());
    assert_eq!(m.get(names::LOST, &[(names::LABEL_CAUSE, "vanished")]), 1.0);

    // A SIGSTOPped master: its timeouts are node errors under its address (here from the
    // release, which waits for every master in the background) ...
    let paused_addr = format!("127.0.0.1:{}", c.port(2));
    c.pause(2).expect("SIGSTOP master 2");
    let guard = a
        .try_acquire("m:paused", TTL)
        .await
        .expect("two of three grant it");
    guard.release().await.expect("release");
    a.settle().await;
    let timeouts = [
        (names::LABEL_MASTER, paused_addr.as_str()),
        (names::LABEL_KIND, "timeout"),
    ];
    assert!(m.get(names::NODE_ERRORS, &timeouts) >= 1.0, "{:?}", m.values);
    // ... and once a round waited for it in vain, it counts as ignored (unreachable) until it
    // answers again. Two masters down: no majority.
    c.pause(1).expect("SIGSTOP master 1");
    let err = a.try_acquire("m:paused", TTL).await.expect_err("one of three");
    assert!(err.is_unavailable(), "{err}");
    assert_eq!(
        m.get(names::ACQUISITIONS, &acquisitions("plain", "no_quorum")),
        1.0
    );
    assert_eq!(
        m.get(names::MASTERS_IGNORED, &[(names::LABEL_REASON, "unreachable")]),
        2.0
    );
    let health = a.health();
    assert_eq!(health.masters[2].ignored, Some(Ignored::Unreachable));
    assert!(health.masters[2]
        .last_error
        .as_ref()
        .is_some_and(|k| k.is_unreachable()));
    assert_eq!(health.masters[0].ignored, None);
    assert_eq!(health.counting(), 1);
    assert!(!health.has_quorum());
    c.resume(1).expect("SIGCONT master 1");
    c.resume(2).expect("SIGCONT master 2");
    // Back: the next rounds and health checks (every 200 ms here) hear from both again.
    assert!(
        eventually(Duration::from_secs(5), || {
            let back = m.get(names::MASTERS_IGNORED, &[(names::LABEL_REASON, "unreachable")]) == 0.0;
            let a = a.clone();
            async move {
                if let Ok(guard) = a.try_acquire("m:paused", TTL).await {
                    let _ = guard.release().await;
                }
                back
            }
        })
        .await,
        "the resumed masters still count as unreachable"
    );
    assert!(a
        .health()
        .masters
        .iter()
        .all(|h| h.counts() && h.round_trip.is_some()));

    // Masters without AOF, freshly started: within their restart grace, ignored for that reason.
    let fresh = Cluster::start_with(ClusterOptions {
        masters: 3,
        appendfsync_always: false,
        ..ClusterOptions::default()
    })
    .await
    .expect("start masters");
    let graced = builder(&fresh)
        .restart_grace(Duration::from_secs(60))
        .build()
        .await
        .expect("build");
    assert_eq!(
        m.get(names::MASTERS_IGNORED, &[(names::LABEL_REASON, "restart_grace")]),
        3.0
    );
    // They persist less than every write: at risk, for that reason only.
    assert_eq!(
        m.get(names::MASTERS_AT_RISK, &[(names::LABEL_RISK, "weak_persistence")]),
        3.0
    );
    assert_eq!(
        m.get(names::MASTERS_AT_RISK, &[(names::LABEL_RISK, "eviction")]),
        0.0
    );
    let err = graced
        .try_acquire("m:graced", TTL)
        .await
        .expect_err("every master is in its grace");
    assert!(err.is_unavailable(), "{err}");
    assert!(m.sum(names::NODE_ERRORS, &[(names::LABEL_KIND, "restarted")]) >= 2.0);
    let health = graced.health();
    assert!(!health.has_quorum());
    assert!(health
        .masters
        .iter()
        .all(|h| h.ignored == Some(Ignored::RestartGrace)
            && h.counts_again_in.is_some_and(|d| d > Duration::from_secs(30))
            && h.fsync_always == Some(false)));
    // A client that is gone takes its share of the gauge with it.
    drop(graced);
    assert!(
        eventually(Duration::from_secs(5), || {
            let gone = m.get(names::MASTERS_IGNORED, &[(names::LABEL_REASON, "restart_grace")]) == 0.0;
            async move { gone }
        })
        .await,
        "a dropped client's ignored masters stay in the gauge"
    );
    assert_eq!(
        m.get(names::MASTERS_AT_RISK, &[(names::LABEL_RISK, "weak_persistence")]),
        0.0,
        "a dropped client's masters at risk stay in the gauge"
    );

    a.settle().await;
    b.settle().await;
}
