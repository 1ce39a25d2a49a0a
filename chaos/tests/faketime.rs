//! Checks that a master started with a [`FakeClock`] follows clock jumps while it runs. Debian's
//! redis-server is built with jemalloc, which deadlocks under libfaketime, so the test runs the
//! first server that can run under it: the one `QUORLOCK_TEST_SERVER` selects, else a Valkey
//! build (theirs use libc's malloc). Without libfaketime or any such server it records a skip,
//! which fails where every server is required (`chaos/test`).

use quorlock_chaos::skip::{skip, Need};
use quorlock_chaos::{faketime, Cluster, ClusterOptions, FakeClock, Server};
use redis::AsyncCommands;

async fn server_time(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (secs, _micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    secs
}

/// A fake clock and a server that runs under it, or `None` with the skip recorded.
async fn usable_clock() -> Option<(FakeClock, Server)> {
    let clock = match FakeClock::new() {
        Ok(clock) => clock,
        Err(e) => {
            skip(Need::Servers, "no clock jump is tried", &e.to_string());
            return None;
        }
    };
    let selected = Server::from_env().expect("QUORLOCK_TEST_SERVER names a server");
    let mut reasons = Vec::new();
    for server in std::iter::once(selected).chain(Server::ALL) {
        let binary = match server.binary() {
            Ok(binary) => binary,
            Err(e) => {
                reasons.push(e.to_string());
                continue;
            }
        };
        match faketime::probe(&binary, &clock).await {
            Ok(()) => return Some((clock, server)),
            Err(e) => reasons.push(e.to_string()),
        }
    }
    skip(
        Need::Servers,
        "no clock jump is tried",
        &format!(
            "no installed server runs under libfaketime: {}",
            reasons.join("; ")
        ),
    );
    None
}

#[tokio::test]
async fn a_forward_jump_expires_keys_early() {
    let Some((clock, server)) = usable_clock().await else {
        return;
    };
    println!("{server} under libfaketime");
    let opts = ClusterOptions {
        masters: 2,
        server: Some(server),
        ..ClusterOptions::default()
    };
    let cluster = Cluster::start_with_env(opts, vec![clock.env()]).await.unwrap();
    let mut faked = cluster.client(0).await.unwrap();
    let mut real = cluster.client(1).await.unwrap();

    let before = server_time(&mut faked).await;
    let _: () = faked.set_ex("k", "v", 600).await.unwrap();
    let _: () = real.set_ex("k", "v", 600).await.unwrap();

    clock.set_offset_secs(3600).unwrap();
    let after = server_time(&mut faked).await;
    assert!(after >= before + 3600, "clock did not jump: {before} -> {after}");
    let gone: Option<String> = faked.get("k").await.unwrap();
    assert_eq!(gone, None, "key survived a jump past its TTL");
    let kept: Option<String> = real.get("k").await.unwrap();
    assert_eq!(kept.as_deref(), Some("v"));
}

#[tokio::test]
async fn the_probe_reports_a_program_it_cannot_run() {
    let clock = match FakeClock::new() {
        Ok(clock) => clock,
        Err(e) => return skip(Need::Servers, "the probe is not tried", &e.to_string()),
    };
    let err = faketime::probe(std::path::Path::new("false"), &clock)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("false"), "{err}");
}

#[tokio::test]
async fn env_for_more_masters_than_exist_is_rejected() {
    let opts = ClusterOptions {
        masters: 1,
        ..ClusterOptions::default()
    };
    let err = Cluster::start_with_env(opts, vec![Vec::new(), Vec::new()])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("2 masters"), "{err}");
}
