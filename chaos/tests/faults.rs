//! Applies every fault action to a real cluster with proxies and checks its effect.

use std::time::Duration;

use quorlock_chaos::clock::MasterClocks;
use quorlock_chaos::faults::{apply, FaultTargets};
use quorlock_chaos::{ClientPauses, Cluster, DataMode, FaultAction, ProxyGroup, ProxyMode};
use redis::AsyncCommands;

#[tokio::test]
async fn every_action_reaches_its_target() {
    let mut cluster = Cluster::start(4).await.unwrap();
    let proxies = ProxyGroup::start(&cluster, 2).await.unwrap();
    let mut clocks = MasterClocks::emulated();
    let clients = ClientPauses::new();

    let mut conn = cluster.client(2).await.unwrap();
    let _: () = conn.pset_ex("lock:a", "t", 10_000).await.unwrap();

    let actions = [
        FaultAction::Kill(0),
        FaultAction::Pause(1),
        FaultAction::Latency(0, Duration::from_millis(5)),
        FaultAction::Blackhole(1),
        FaultAction::Partition {
            group: 1,
            masters: vec![2],
        },
        FaultAction::Reset(3),
        FaultAction::ClockJump(2, Duration::from_secs(20)),
        FaultAction::PauseClient(4, Duration::from_secs(3)),
    ];
    for action in &actions {
        let mut targets = FaultTargets {
            backend: &mut cluster,
            proxies: Some(&proxies),
            clocks: &mut clocks,
            clients: &clients,
        };
        apply(action, &mut targets).await.unwrap();
    }
    assert!(!cluster.is_running(0));
    assert!(cluster.is_paused(1));
    for group in 0..2 {
        assert_eq!(
            proxies.proxy(group, 0).unwrap().mode(),
            ProxyMode::Latency(Duration::from_millis(5))
        );
        assert_eq!(proxies.proxy(group, 1).unwrap().mode(), ProxyMode::Blackhole);
        assert_eq!(proxies.proxy(group, 3).unwrap().mode(), ProxyMode::Reset);
    }
    // Through a resetting proxy the master answers nothing.
    let refused = tokio::time::timeout(Duration::from_secs(10), async {
        let client = redis::Client::open(proxies.urls(0)[3].as_str())?;
        let mut through = client.get_multiplexed_async_connection().await?;
        redis::cmd("PING").query_async::<String>(&mut through).await
    })
    .await
    .expect("a connection through a resetting proxy neither failed nor answered");
    assert!(refused.is_err(), "{refused:?}");
    assert_eq!(proxies.proxy(0, 2).unwrap().mode(), ProxyMode::PassThrough);
    assert_eq!(proxies.proxy(1, 2).unwrap().mode(), ProxyMode::Blackhole);
    let gone: Option<String> = conn.get("lock:a").await.unwrap();
    assert_eq!(gone, None, "the clock jump did not expire the key");
    assert_eq!(clients.take(4), Some(Duration::from_secs(3)));

    for action in [
        FaultAction::Restart(0, DataMode::Keep),
        FaultAction::Resume(1),
        FaultAction::HealNetwork,
    ] {
        let mut targets = FaultTargets {
            backend: &mut cluster,
            proxies: Some(&proxies),
            clocks: &mut clocks,
            clients: &clients,
        };
        apply(&action, &mut targets).await.unwrap();
    }
    assert!(cluster.is_running(0) && !cluster.is_paused(1));
    assert!((0..2).all(|g| (0..4).all(|m| proxies.proxy(g, m).unwrap().mode() == ProxyMode::PassThrough)));
    let client = redis::Client::open(proxies.urls(1)[3].as_str()).unwrap();
    let mut healed = client.get_multiplexed_async_connection().await.unwrap();
    let pong: String = redis::cmd("PING").query_async(&mut healed).await.unwrap();
    assert_eq!(pong, "PONG");
}

#[tokio::test]
async fn network_faults_without_proxies_are_an_error() {
    let mut cluster = Cluster::start(1).await.unwrap();
    let mut clocks = MasterClocks::emulated();
    let clients = ClientPauses::new();
    let mut targets = FaultTargets {
        backend: &mut cluster,
        proxies: None,
        clocks: &mut clocks,
        clients: &clients,
    };
    let err = apply(&FaultAction::Blackhole(0), &mut targets).await.unwrap_err();
    assert!(err.to_string().contains("blackhole m0"), "{err}");
}
