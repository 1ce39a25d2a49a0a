//! The delayed restart, enforced by the client: a master that restarted without its data within the
//! grace period is kept out of every majority, and the negative control shows the double grant the
//! RedLock spec predicts when the check is off. Also the warnings `build()` gives about replicas and
//! persistence.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{builder, eventually};
use quorlock::{AcquireError, NodeErrorKind};
use quorlock_chaos::{Cluster, ClusterOptions, DataMode};
use redis::AsyncCommands;

const TTL: Duration = Duration::from_secs(3);

async fn no_aof(masters: usize) -> Cluster {
    Cluster::start_with(ClusterOptions {
        masters,
        appendfsync_always: false,
        ..ClusterOptions::default()
    })
    .await
    .expect("start masters")
}

fn restarted_failure(err: &AcquireError, node: usize) -> Option<NodeErrorKind> {
    err.failures()
        .iter()
        .find(|f| f.node == node)
        .map(|f| f.kind.clone())
}

/// "Restart a minority with data wiped, immediately": A holds `orders` on masters 0 and 1 (2 is
/// busy); master 0 restarts empty at once. With the check on, nobody else gets `orders` while A's
/// lock is valid; with it off, a second client is granted it by masters 0 and 2.
#[tokio::test]
async fn a_master_restarted_without_data_is_kept_out_until_the_grace_passes() {
    let mut c = no_aof(3).await;
    let safe = builder(&c).build().await.expect("build");
    let unchecked = builder(&c)
        .enforce_restart_grace(false)
        .build()
        .await
        .expect("build");
    // Freshly started masters without AOF may just have lost their data: at first, none counts.
    // The round fails as soon as two have said no, so the third may not be named.
    let err = safe
        .try_acquire("warmup", TTL)
        .await
        .expect_err("fresh masters are in their grace");
    let restarted = err
        .failures()
        .iter()
        .filter(|f| matches!(f.kind, NodeErrorKind::Restarted { .. }))
        .count();
    assert!(restarted >= 2, "{err}");
    assert!(
        eventually(Duration::from_secs(8), || async {
            match safe.try_acquire("warmup", TTL).await {
                Ok(g) => g.release().await.is_ok(),
                Err(_) => false,
            }
        })
        .await,
        "masters never came out of their grace"
    );

    // A holds `orders` on masters 0 and 1 only: master 2 is busy with a short-lived foreign value.
    let mut m2 = c.client(2).await.expect("connect");
    let _: () = m2.pset_ex("orders", "foreign", 300).await.expect("SET");
    let a = unchecked
        .try_acquire("orders", TTL)
        .await
        .expect("A acquires on 0 and 1");
    assert!(
        eventually(Duration::from_secs(2), || async {
            common::value(&c, 2, "orders").await.is_none()
        })
        .await
    );

    c.restart(0, DataMode::Wipe)
        .await
        .expect("restart master 0 empty");
    assert_eq!(
        common::value(&c, 0, "orders").await,
        None,
        "master 0 lost A's key"
    );

    // With the check on: refused for as long as A's lock is valid, and master 0 is named.
    let mut saw_restarted = false;
    while !a.is_lost() {
        match safe.try_acquire("orders", TTL).await {
            Ok(g) => {
                let still_valid = !a.is_lost();
                drop(g);
                assert!(
                    !still_valid,
                    "granted while A's lock was valid: the restarted master voted"
                );
                break;
            }
            Err(err) => {
                // Kept out by its reported uptime, or (the longer of the two here) by its record:
                // it came back without one, so it waits the grace from when a client first saw it.
                if let Some(
                    NodeErrorKind::Restarted { remaining, .. } | NodeErrorKind::Replaced { remaining, .. },
                ) = restarted_failure(&err, 0)
                {
                    assert!(remaining <= TTL + Duration::from_millis(150), "{err}");
                    saw_restarted = true;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    assert!(saw_restarted, "master 0 was never reported as restarted");
    drop(a);
}

/// The negative control of the scenario above: with the check off, the restarted master's vote
/// makes a second holder while the first is still valid.
#[tokio::test]
async fn without_the_check_a_restarted_master_grants_a_held_lock() {
    let mut c = no_aof(3).await;
    let first = builder(&c)
        .enforce_restart_grace(false)
        .build()
        .await
        .expect("build");
    let second = builder(&c)
        .enforce_restart_grace(false)
        .build()
        .await
        .expect("build");
    let mut m2 = c.client(2).await.expect("connect");
    let _: () = m2.pset_ex("orders", "foreign", 300).await.expect("SET");
    let a = first
        .try_acquire("orders", TTL)
        .await
        .expect("A acquires on 0 and 1");
    assert!(
        eventually(Duration::from_secs(2), || async {
            common::value(&c, 2, "orders").await.is_none()
        })
        .await
    );
    c.restart(0, DataMode::Wipe)
        .await
        .expect("restart master 0 empty");
    let b = second
        .acquire("orders", TTL)
        .await
        .expect("with the check off, masters 0 and 2 grant the held lock");
    // The violation, with its evidence: two holders, both inside their validity, different tokens.
    assert!(!a.is_lost() && !b.is_lost(), "both locks valid at once");
    assert_ne!(a.token(), b.token());
    assert_eq!(common::value(&c, 1, "orders").await.as_deref(), Some(a.token()));
    assert_eq!(common::value(&c, 0, "orders").await.as_deref(), Some(b.token()));
}

/// A client built after the restart learns the uptime at `build()` and ignores the master at once.
#[tokio::test]
async fn a_client_built_after_the_restart_ignores_the_master_at_once() {
    let mut c = no_aof(3).await;
    c.restart(1, DataMode::Wipe).await.expect("restart");
    let fresh = builder(&c)
        .restart_grace(Duration::from_secs(30))
        .build()
        .await
        .expect("build");
    let err = fresh
        .try_acquire("x", TTL)
        .await
        .expect_err("all masters are within the grace");
    // The round fails as soon as two masters are refused; each refusal names the restart.
    assert!(err.failures().len() >= 2, "{err}");
    assert!(
        err.failures()
            .iter()
            .all(|f| matches!(f.kind, NodeErrorKind::Restarted { .. })),
        "{err}"
    );
    // Masters that persist every write count at once, even right after a restart.
    let mut durable = Cluster::start(3).await.expect("start");
    durable.restart(1, DataMode::Keep).await.expect("restart");
    let locks = builder(&durable)
        .restart_grace(Duration::from_secs(30))
        .build()
        .await
        .expect("build");
    let g = locks.try_acquire("x", TTL).await.expect("durable masters count");
    g.release().await.expect("release");
}

/// Collects log lines written through `tracing`.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("logs")).into_owned()
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("logs").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn capture() -> (Logs, tracing::subscriber::DefaultGuard) {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

#[tokio::test]
async fn build_warns_once_per_master_about_weak_persistence() {
    let c = no_aof(3).await;
    let (logs, _guard) = capture();
    let _locks = builder(&c).build().await.expect("build");
    let text = logs.text();
    assert_eq!(text.matches("master runs without AOF").count(), 3, "{text}");

    let everysec = Cluster::start_with(ClusterOptions {
        masters: 1,
        extra_args: vec!["--appendfsync".into(), "everysec".into()],
        ..ClusterOptions::default()
    })
    .await
    .expect("start");
    let (logs, _guard) = capture();
    let _locks = builder(&everysec).build().await.expect("build");
    let text = logs.text();
    assert!(
        text.contains("less than appendfsync always") && text.contains("everysec"),
        "{text}"
    );

    // A durable master draws no warning.
    let durable = Cluster::start(1).await.expect("start");
    let (logs, _guard) = capture();
    let _locks = builder(&durable).build().await.expect("build");
    assert_eq!(logs.text(), "");
}

#[tokio::test]
async fn build_says_when_config_is_disabled() {
    let c = Cluster::start_with(ClusterOptions {
        masters: 1,
        extra_args: vec!["--rename-command".into(), "CONFIG".into(), "\"\"".into()],
        ..ClusterOptions::default()
    })
    .await
    .expect("start");
    let (logs, _guard) = capture();
    let _locks = builder(&c).build().await.expect("build");
    let text = logs.text();
    assert!(
        text.contains("could not check the master's appendfsync policy"),
        "{text}"
    );
}

#[tokio::test]
async fn build_warns_about_attached_replicas() {
    let c = Cluster::start(2).await.expect("start");
    let mut replica = c.client(1).await.expect("connect");
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(c.port(0))
        .query_async(&mut replica)
        .await
        .expect("REPLICAOF");
    let attached = eventually(Duration::from_secs(10), || async {
        let mut m0 = c.client(0).await.expect("connect");
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query_async(&mut m0)
            .await
            .expect("INFO");
        info.contains("connected_slaves:1")
    })
    .await;
    assert!(attached, "the replica never attached");
    let (logs, _guard) = capture();
    let _locks = quorlock::Quorlock::builder()
        .node(c.url(0))
        .build()
        .await
        .expect("build");
    let text = logs.text();
    assert!(
        text.contains("master has replicas attached") && text.contains("replicas=1"),
        "{text}"
    );
}
