//! Checks each proxy mode against a real master: pass-through, latency, blackhole, reset,
//! and partitions between client groups and masters.

use std::net::SocketAddr;
use std::time::Duration;

use quorlock_chaos::{Cluster, DataMode, Proxy, ProxyGroup, ProxyMode};
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Bound for things that must happen; generous so a loaded machine does not flake.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long a blackholed request is given to (wrongly) answer.
const SILENCE: Duration = Duration::from_millis(200);

fn target(cluster: &Cluster, i: usize) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], cluster.port(i)))
}

async fn connect(url: &str) -> MultiplexedConnection {
    let client = redis::Client::open(url).unwrap();
    tokio::time::timeout(PATIENCE, client.get_multiplexed_async_connection())
        .await
        .expect("connecting timed out")
        .unwrap()
}

async fn ping(conn: &mut MultiplexedConnection) -> redis::RedisResult<String> {
    redis::cmd("PING").query_async(conn).await
}

/// Sends a RESP PING on a raw socket and reads the reply (or the error / EOF).
async fn raw_ping(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    stream.write_all(b"*1\r\n$4\r\nPING\r\n").await?;
    let mut buf = [0u8; 64];
    let n = stream.read(&mut buf).await?;
    Ok(buf[..n].to_vec())
}

fn url(proxy: &Proxy) -> String {
    format!("redis://127.0.0.1:{}", proxy.port())
}

#[tokio::test]
async fn pass_through_forwards_commands() {
    let cluster = Cluster::start(1).await.unwrap();
    let proxy = Proxy::start(target(&cluster, 0)).await.unwrap();
    assert_eq!(proxy.mode(), ProxyMode::PassThrough);
    let mut conn = connect(&url(&proxy)).await;
    let _: () = conn.set("k", "v").await.unwrap();
    let v: String = conn.get("k").await.unwrap();
    assert_eq!(v, "v");
    assert_eq!(cluster.keys(0, "*").await.unwrap(), vec!["k"]);
    assert_eq!(proxy.active_connections(), 1);
}

#[tokio::test]
async fn latency_delays_but_still_answers() {
    let cluster = Cluster::start(1).await.unwrap();
    let proxy = Proxy::start(target(&cluster, 0)).await.unwrap();
    let mut conn = connect(&url(&proxy)).await;
    proxy.set_mode(ProxyMode::Latency(Duration::from_millis(80)));
    let started = tokio::time::Instant::now();
    let pong = tokio::time::timeout(PATIENCE, ping(&mut conn))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pong, "PONG");
    // Both directions were delayed: a lower bound, which load cannot break.
    assert!(started.elapsed() >= Duration::from_millis(160));
    // New connections work too.
    let mut fresh = connect(&url(&proxy)).await;
    assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
}

#[tokio::test]
async fn blackhole_swallows_requests_and_heal_resets_tainted_connections() {
    let cluster = Cluster::start(1).await.unwrap();
    let proxy = Proxy::start(target(&cluster, 0)).await.unwrap();
    let mut raw = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(raw_ping(&mut raw).await.unwrap(), b"+PONG\r\n");

    proxy.set_mode(ProxyMode::Blackhole);
    // Existing connection: no answer.
    let silent = tokio::time::timeout(SILENCE, raw_ping(&mut raw)).await;
    assert!(silent.is_err(), "blackholed PING answered: {silent:?}");
    // New connection: accepted, but no answer either.
    let mut during = TcpStream::connect(proxy.addr()).await.unwrap();
    let silent = tokio::time::timeout(SILENCE, raw_ping(&mut during)).await;
    assert!(silent.is_err(), "blackholed PING answered: {silent:?}");
    // A key written during the blackhole never reaches the master.
    let mut writer = TcpStream::connect(proxy.addr()).await.unwrap();
    let set = b"*3\r\n$3\r\nSET\r\n$4\r\nlost\r\n$1\r\n1\r\n";
    writer.write_all(set).await.unwrap();
    // Wait until the proxy has swallowed all three requests (two PINGs and the SET).
    let sent = (2 * b"*1\r\n$4\r\nPING\r\n".len() + set.len()) as u64;
    tokio::time::timeout(PATIENCE, async {
        while proxy.blackholed_bytes() < sent {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the proxy did not read the blackholed requests");

    proxy.set_mode(ProxyMode::PassThrough);
    // Connections that lost bytes are reset rather than resumed out of step.
    for stream in [&mut raw, &mut during, &mut writer] {
        let mut buf = [0u8; 64];
        let after = tokio::time::timeout(PATIENCE, stream.read(&mut buf))
            .await
            .expect("tainted connection was not closed");
        assert!(matches!(after, Ok(0) | Err(_)), "{after:?}");
    }
    assert!(cluster.keys(0, "lost").await.unwrap().is_empty());
    let mut fresh = connect(&url(&proxy)).await;
    assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
}

#[tokio::test]
async fn an_idle_connection_survives_a_blackhole() {
    let cluster = Cluster::start(1).await.unwrap();
    let proxy = Proxy::start(target(&cluster, 0)).await.unwrap();
    let mut raw = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(raw_ping(&mut raw).await.unwrap(), b"+PONG\r\n");
    proxy.set_mode(ProxyMode::Blackhole);
    proxy.set_mode(ProxyMode::PassThrough);
    let pong = tokio::time::timeout(PATIENCE, raw_ping(&mut raw))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(pong, b"+PONG\r\n");
}

#[tokio::test]
async fn reset_closes_existing_and_new_connections() {
    let cluster = Cluster::start(1).await.unwrap();
    let proxy = Proxy::start(target(&cluster, 0)).await.unwrap();
    let mut raw = TcpStream::connect(proxy.addr()).await.unwrap();
    assert_eq!(raw_ping(&mut raw).await.unwrap(), b"+PONG\r\n");

    proxy.set_mode(ProxyMode::Reset);
    let mut buf = [0u8; 64];
    let after = tokio::time::timeout(PATIENCE, raw.read(&mut buf))
        .await
        .expect("existing connection was not reset");
    assert!(matches!(after, Ok(0) | Err(_)), "{after:?}");

    // New connections are reset right after accept.
    let refused = tokio::time::timeout(PATIENCE, async {
        match TcpStream::connect(proxy.addr()).await {
            Ok(mut s) => raw_ping(&mut s).await,
            Err(e) => Err(e),
        }
    })
    .await
    .expect("new connection was neither refused nor reset");
    assert!(
        refused.is_err() || matches!(&refused, Ok(b) if b.is_empty()),
        "{refused:?}"
    );

    proxy.set_mode(ProxyMode::PassThrough);
    let mut fresh = connect(&url(&proxy)).await;
    assert_eq!(ping(&mut fresh).await.unwrap(), "PONG");
}

#[tokio::test]
async fn partition_cuts_one_group_from_some_masters_only() {
    let cluster = Cluster::start(3).await.unwrap();
    let proxies = ProxyGroup::start(&cluster, 2).await.unwrap();
    assert_eq!(proxies.groups(), 2);
    assert_eq!(proxies.masters(), 3);
    let g0 = proxies.urls(0);
    let g1 = proxies.urls(1);
    assert_eq!(g0.len(), 3);
    assert_ne!(g0, g1);

    proxies.partition(0, &[0, 1]).unwrap();
    for (group, master, reachable) in [
        (0, 0, false),
        (0, 1, false),
        (0, 2, true),
        (1, 0, true),
        (1, 1, true),
        (1, 2, true),
    ] {
        let addr = proxies.proxy(group, master).unwrap().addr();
        let mut raw = TcpStream::connect(addr).await.unwrap();
        let wait = if reachable { PATIENCE } else { SILENCE };
        let answer = tokio::time::timeout(wait, raw_ping(&mut raw)).await;
        match answer {
            Ok(Ok(reply)) => assert!(
                reachable && reply == b"+PONG\r\n",
                "group {group} -> master {master}: {reply:?}"
            ),
            other => assert!(!reachable, "group {group} -> master {master}: {other:?}"),
        }
    }

    proxies.heal();
    for url in &g0 {
        let mut conn = connect(url).await;
        assert_eq!(ping(&mut conn).await.unwrap(), "PONG");
    }
    assert!(proxies.proxy(2, 0).is_err());
    assert!(proxies.proxy(0, 3).is_err());
}

#[tokio::test]
async fn proxies_follow_a_restarted_master() {
    let mut cluster = Cluster::start(1).await.unwrap();
    let proxies = ProxyGroup::start(&cluster, 1).await.unwrap();
    let url = proxies.urls(0).remove(0);
    cluster.restart(0, DataMode::Wipe).await.unwrap();
    let mut conn = connect(&url).await;
    assert_eq!(ping(&mut conn).await.unwrap(), "PONG");
}
