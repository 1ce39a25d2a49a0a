//! Bad input, rejected with a typed error that names it: before anything reaches a master, or at
//! `build()` from what the masters answer (credentials, one server under two names).

mod common;

use std::time::Duration;

use common::{cluster, locks};
use quorlock::{AcquireError, BuildError, InputError, Quorlock};
use quorlock_chaos::{Cluster, ClusterOptions};

#[tokio::test]
async fn no_masters_is_an_error() {
    let err = Quorlock::builder().build().await.expect_err("N = 0");
    assert!(matches!(err, BuildError::NoNodes), "{err}");
}

#[tokio::test]
async fn an_invalid_url_is_named_without_its_password() {
    let err = Quorlock::builder()
        .node("redis://user:hunter2@host:notaport")
        .build()
        .await
        .expect_err("bad URL");
    let msg = err.to_string();
    assert!(matches!(err, BuildError::InvalidUrl { .. }), "{msg}");
    assert!(msg.contains("host:notaport"), "{msg}");
    assert!(!msg.contains("hunter2"), "{msg}");
    let err = Quorlock::builder()
        .node("http://example")
        .build()
        .await
        .expect_err("bad scheme");
    assert!(matches!(err, BuildError::InvalidUrl { .. }), "{err}");
    // Each says what is wrong, not only that it did not parse.
    for (url, reason) in [
        ("http://example:6379", "the scheme must be redis://"),
        ("redis://127.0.0.1:70000", "invalid port number"),
        ("redis://127.0.0.1:0", "port 0"),
        ("not-a-url", "not a URL"),
        ("localhost:6379", "not a URL"),
        ("redis://:6379", "empty host"),
        (
            "redis://127.0.0.1:6379/-1",
            "a database number (0, 1, ...) or nothing, not /-1",
        ),
        ("redis://127.0.0.1:6379/db", "not /db"),
    ] {
        let err = Quorlock::builder().node(url).build().await.expect_err("bad URL");
        assert!(
            matches!(err, BuildError::InvalidUrl { .. }) && err.to_string().contains(reason),
            "{url}: {err}"
        );
    }
}

#[tokio::test]
async fn a_duplicate_master_is_refused() {
    let err = Quorlock::builder()
        .nodes([
            "redis://127.0.0.1:1",
            "redis://127.0.0.1:2",
            "redis://127.0.0.1:1",
        ])
        .build()
        .await
        .expect_err("duplicate");
    assert!(
        matches!(
            err,
            BuildError::DuplicateNode {
                first: 0,
                second: 2,
                ..
            }
        ),
        "{err}"
    );
}

/// The same server under another name is found by its `run_id`, as it would vote twice.
#[tokio::test]
async fn one_server_under_two_names_is_refused() {
    let c = cluster(3).await;
    let mut urls = c.urls();
    let alias = urls[1].replace("127.0.0.1", "localhost");
    assert_ne!(alias, urls[1], "the URL names 127.0.0.1");
    urls.push(alias);
    let err = Quorlock::builder()
        .nodes(urls)
        .build()
        .await
        .expect_err("master 1 twice");
    assert!(
        matches!(
            err,
            BuildError::SameServer {
                first: 1,
                second: 3,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("localhost"), "{err}");
}

#[tokio::test]
async fn zero_delay_with_jitter_is_refused() {
    let err = Quorlock::builder()
        .node("redis://127.0.0.1:1")
        .retry_delay(Duration::ZERO)
        .retry_jitter(Duration::from_millis(5))
        .build()
        .await
        .expect_err("zero delay with jitter");
    assert!(matches!(err, BuildError::InvalidRetry(_)), "{err}");
}

#[tokio::test]
async fn bad_ttls_and_names_are_refused_before_sending() {
    let c = cluster(1).await;
    let locks = locks(&c).await;
    let input = |r: Result<quorlock::Guard, AcquireError>| match r {
        Err(AcquireError::Input(e)) => e,
        Err(other) => panic!("expected an input error, got {other}"),
        Ok(_) => panic!("expected an input error, got a lock"),
    };
    assert_eq!(
        input(locks.acquire("", Duration::from_secs(1)).await),
        InputError::EmptyResource
    );
    assert_eq!(
        input(locks.acquire("r", Duration::ZERO).await),
        InputError::ZeroTtl
    );
    assert!(matches!(
        input(locks.acquire("r", Duration::from_secs(90_000)).await),
        InputError::TtlTooLarge { .. }
    ));
    // 1 ms is below its own drift allowance (2 ms + 1%).
    let e = input(locks.try_acquire("r", Duration::from_millis(1)).await);
    assert!(
        matches!(
            e,
            InputError::NodeTimeoutNotBelowTtl { .. } | InputError::Timing(_)
        ),
        "{e}"
    );
    // The node timeout (200 ms in tests) must be shorter than the TTL.
    let e = input(locks.try_acquire("r", Duration::from_millis(150)).await);
    assert!(matches!(e, InputError::NodeTimeoutNotBelowTtl { .. }), "{e}");
    assert!(e.to_string().contains("150ms"), "{e}");
    let tight = Quorlock::builder()
        .node(c.url(0))
        .node_timeout(Duration::from_micros(100))
        .build()
        .await
        .expect("build");
    let e = input(tight.try_acquire("r", Duration::from_millis(2)).await);
    assert!(matches!(e, InputError::Timing(_)), "{e}");
}

#[tokio::test]
async fn an_even_number_of_masters_works() {
    let c = cluster(2).await;
    let locks = locks(&c).await;
    assert_eq!(locks.quorum(), 2);
    common::cycle(&locks, "even", Duration::from_secs(5)).await;
}

#[tokio::test]
async fn acl_users_work_and_passwords_stay_out_of_debug_and_errors() {
    let opts = ClusterOptions {
        masters: 3,
        acl_user: Some(("locker".into(), "s3cr3t-pw".into())),
        ..ClusterOptions::default()
    };
    let c = Cluster::start_with(opts)
        .await
        .expect("start masters with an ACL user");
    let urls = c.urls();
    assert!(urls[0].contains("s3cr3t-pw"));
    let locks = Quorlock::builder()
        .nodes(urls.clone())
        .build()
        .await
        .expect("ACL user authenticates");
    assert!(!format!("{locks:?}").contains("s3cr3t-pw"));
    let guard = locks
        .acquire("acl", Duration::from_secs(5))
        .await
        .expect("acquire");
    assert!(!format!("{guard:?}").contains("s3cr3t-pw"));
    guard.release().await.expect("release");
    // The wrong password: a clear error naming the master, never the password.
    let wrong: Vec<String> = urls.iter().map(|u| u.replace("s3cr3t-pw", "wrong-pw")).collect();
    let err = Quorlock::builder()
        .nodes(wrong)
        .build()
        .await
        .expect_err("auth must fail");
    let msg = err.to_string();
    assert!(matches!(err, BuildError::Auth { node: 0, .. }), "{msg}");
    assert!(msg.contains("authentication failed"), "{msg}");
    assert!(!msg.contains("wrong-pw") && !msg.contains("s3cr3t-pw"), "{msg}");
}

#[tokio::test]
async fn requirepass_masters_work() {
    let opts = ClusterOptions {
        masters: 3,
        password: Some("pa55".into()),
        ..ClusterOptions::default()
    };
    let c = Cluster::start_with(opts)
        .await
        .expect("start masters with requirepass");
    let locks = Quorlock::builder().nodes(c.urls()).build().await.expect("build");
    common::cycle(&locks, "pw", Duration::from_secs(5)).await;
    let no_pw: Vec<String> = (0..3)
        .map(|i| format!("redis://127.0.0.1:{}", c.port(i)))
        .collect();
    let err = Quorlock::builder()
        .nodes(no_pw)
        .build()
        .await
        .expect_err("no password");
    assert!(matches!(err, BuildError::Auth { .. }), "{err}");
    // The server's words, as it sent them.
    assert!(
        err.to_string().contains("NOAUTH Authentication required"),
        "{err}"
    );
}

#[tokio::test]
async fn resp3_urls_are_refused_with_a_reason() {
    let err = Quorlock::builder()
        .node("redis://127.0.0.1:6399/?protocol=resp3")
        .build()
        .await
        .expect_err("RESP3 lock connections are refused");
    assert!(matches!(err, BuildError::InvalidUrl { .. }), "{err}");
    assert!(err.to_string().contains("RESP3"), "{err}");
}

#[tokio::test]
async fn an_endless_wait_is_accepted_and_bounded_by_the_attempt_count() {
    let c = cluster(1).await;
    let holder = locks(&c).await;
    let _held = holder
        .acquire("forever", Duration::from_secs(10))
        .await
        .expect("acquire");
    let waiter = Quorlock::builder()
        .node(c.url(0))
        .wait(Duration::MAX)
        .max_attempts(2)
        .retry_delay(Duration::from_millis(10))
        .retry_jitter(Duration::ZERO)
        .wake_on_release(false)
        .build()
        .await
        .expect("build");
    let err = waiter
        .acquire("forever", Duration::from_secs(10))
        .await
        .expect_err("held elsewhere");
    assert!(
        matches!(err, AcquireError::Exhausted { attempts: 2, .. }),
        "{err}"
    );
}
