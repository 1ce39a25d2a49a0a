//! Every installed server (redis-server 7.0, Valkey 8.1, Valkey 9.1) starts through the harness
//! and is the build it claims to be: `INFO` names the expected server and version, and the native
//! commands its version has answer. The server `QUORLOCK_TEST_SERVER` selects must be installed,
//! and so must all three where `CI=true` or `QUORLOCK_REQUIRE_SERVERS=1` (`chaos/test` installs
//! them with `chaos/ensure-servers`): a test run that silently skipped the server it was asked
//! for would prove nothing. Elsewhere a missing server is a recorded skip.

use quorlock_chaos::servers::{ServerInfo, SERVER_ENV};
use quorlock_chaos::skip::{skip, Need};
use quorlock_chaos::{Cluster, ClusterOptions, HarnessError, Server};

/// The servers to start: the installed ones; a required one that is missing fails the test.
fn servers_to_check() -> Vec<Server> {
    let selected = Server::from_env().expect("QUORLOCK_TEST_SERVER names a server");
    let mut servers = Vec::new();
    for server in Server::ALL {
        match server.binary() {
            Ok(_) => servers.push(server),
            Err(e) if server == selected => panic!("{SERVER_ENV} selects {server}, which cannot run: {e}"),
            Err(e) => skip(Need::Servers, &format!("{server} is not checked"), &e.to_string()),
        }
    }
    servers
}

async fn info(cluster: &Cluster, i: usize) -> ServerInfo {
    let mut conn = cluster.client(i).await.unwrap();
    let text: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .unwrap();
    ServerInfo::parse(&text).unwrap_or_else(|| panic!("INFO server without version or run_id:\n{text}"))
}

#[tokio::test]
async fn the_selected_server_is_installed() {
    let selected = Server::from_env().unwrap();
    if let Err(e) = selected.binary() {
        panic!("{SERVER_ENV} selects {selected}, but: {e}");
    }
}

#[tokio::test]
async fn each_installed_server_starts_and_reports_its_version() {
    for server in servers_to_check() {
        let cluster = Cluster::start_with(ClusterOptions {
            masters: 2,
            password: Some("pw".into()),
            server: Some(server),
            ..ClusterOptions::default()
        })
        .await
        .unwrap_or_else(|e| panic!("starting 2 {server} masters: {e}"));
        let a = info(&cluster, 0).await;
        let b = info(&cluster, 1).await;
        for got in [&a, &b] {
            assert!(
                got.is(server),
                "{server} masters must report {} {}, got {got:?}",
                server.family(),
                server.expected_version()
            );
            assert_eq!(got.commands(), server.commands(), "{server}: {got:?}");
        }
        assert_ne!(a.run_id, b.run_id, "{server}: two masters, two run ids");
    }
}

#[tokio::test]
async fn native_commands_answer_where_the_version_has_them() {
    for server in servers_to_check() {
        let cluster = Cluster::start_with(ClusterOptions {
            masters: 1,
            server: Some(server),
            ..ClusterOptions::default()
        })
        .await
        .unwrap_or_else(|e| panic!("starting a {server} master: {e}"));
        let mut conn = cluster.client(0).await.unwrap();
        let _: () = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .query_async(&mut conn)
            .await
            .unwrap();
        let commands = server.commands();

        let set_ifeq: redis::RedisResult<Option<String>> = redis::cmd("SET")
            .arg(&["k", "v2", "IFEQ", "v", "PX", "1000"])
            .query_async(&mut conn)
            .await;
        if commands.set_ifeq {
            assert_eq!(
                set_ifeq.unwrap().as_deref(),
                Some("OK"),
                "{server}: SET IFEQ with the value"
            );
            let pttl: i64 = redis::cmd("PTTL").arg("k").query_async(&mut conn).await.unwrap();
            assert!((1..=1000).contains(&pttl), "{server}: PX applies, PTTL {pttl}");
            let other: Option<String> = redis::cmd("SET")
                .arg(&["k", "v3", "IFEQ", "nope"])
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(other, None, "{server}: SET IFEQ with another value sets nothing");
        } else {
            assert!(set_ifeq.is_err(), "{server} has no SET IFEQ, yet: {set_ifeq:?}");
        }

        let delifeq: redis::RedisResult<i64> = redis::cmd("DELIFEQ")
            .arg(&["k", "nope"])
            .query_async(&mut conn)
            .await;
        if commands.delifeq {
            assert_eq!(delifeq.unwrap(), 0, "{server}: DELIFEQ with another value");
            let current: String = redis::cmd("GET").arg("k").query_async(&mut conn).await.unwrap();
            let deleted: i64 = redis::cmd("DELIFEQ")
                .arg("k")
                .arg(&current)
                .query_async(&mut conn)
                .await
                .unwrap();
            assert_eq!(deleted, 1, "{server}: DELIFEQ with the value");
        } else {
            let err = delifeq.expect_err("no DELIFEQ before Valkey 9");
            assert!(err.to_string().contains("unknown command"), "{server}: {err}");
        }
    }
}

#[tokio::test]
async fn an_unknown_server_name_is_an_error_naming_the_known_ones() {
    let err = "valkey-9".parse::<Server>().unwrap_err();
    let err = HarnessError::from(err).to_string();
    assert!(err.contains("valkey-9.1"), "{err}");
}
