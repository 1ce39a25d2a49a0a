//! Checks that a master started with a [`FakeClock`] follows clock jumps while it runs
//! (when this redis-server build can run under libfaketime at all).

use quorlock_chaos::{faketime, redis_server_path, Cluster, ClusterOptions, FakeClock};
use redis::AsyncCommands;

async fn server_time(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (secs, _micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.unwrap();
    secs
}

/// A fake clock usable with redis-server here, or `None` with the reason printed.
async fn usable_clock() -> Option<FakeClock> {
    let clock = match FakeClock::new() {
        Ok(clock) => clock,
        Err(e) => {
            eprintln!("skipping: {e}");
            return None;
        }
    };
    match faketime::probe(&redis_server_path().unwrap(), &clock).await {
        Ok(()) => Some(clock),
        Err(e) => {
            eprintln!("skipping: {e}");
            None
        }
    }
}

#[tokio::test]
async fn a_forward_jump_expires_keys_early() {
    let Some(clock) = usable_clock().await else {
        return;
    };
    let opts = ClusterOptions {
        masters: 2,
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
    let Ok(clock) = FakeClock::new() else {
        eprintln!("skipping: libfaketime not installed");
        return;
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
