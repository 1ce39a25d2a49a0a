//! With the `serde` feature, what operations report (an inspection, a release, a master's
//! failure, the health snapshot) goes to JSON with stable field names and comes back equal.

mod common;

use std::time::Duration;

use common::{builder, cluster};
use quorlock::{HealthSnapshot, Inspection, NodeErrorKind, NodeFailure, Released};
use serde_json::{json, Value};

const TTL: Duration = Duration::from_secs(5);

fn round_trip<T>(value: &T) -> Value
where
    T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let json = serde_json::to_value(value).expect("serialize");
    let back: T = serde_json::from_value(json.clone()).expect("deserialize");
    assert_eq!(&back, value);
    json
}

#[tokio::test]
async fn reports_go_to_json_and_back() {
    let mut c = cluster(3).await;
    let locks = builder(&c).build().await.expect("build");
    let guard = locks.acquire("s:held", TTL).await.expect("acquire");

    let inspection: Inspection = locks.inspect("s:held").await.expect("inspect");
    let json = round_trip(&inspection);
    assert_eq!(json["resource"], "s:held");
    assert_eq!(json["quorum"], 2);
    assert_eq!(json["masters"][0]["state"]["Ok"]["token"], guard.token());
    assert!(json["masters"][0]["state"]["Ok"]["ttl"]["secs"].is_u64());

    c.pause(2).expect("SIGSTOP master 2");
    let released: Released = guard.release().await.expect("release");
    let json = round_trip(&released);
    assert_eq!(json["masters"], 3);
    assert!(json["held"].as_u64().is_some_and(|held| held >= 2));
    assert!(json["failures"].is_array());

    locks.settle().await;

    let health: HealthSnapshot = locks.health();
    let json = round_trip(&health);
    assert_eq!(json["quorum"], 2);
    assert_eq!(json["masters"].as_array().map(Vec::len), Some(3));
    assert_eq!(json["masters"][0]["ignored"], Value::Null);
    assert_eq!(json["masters"][0]["fsync_always"], true);
    c.resume(2).expect("SIGCONT master 2");
}

#[test]
fn node_error_kinds_are_snake_case_and_details_are_their_message() {
    let kinds = [
        (NodeErrorKind::Timeout, json!("timeout")),
        (NodeErrorKind::WrongType, json!("wrong_type")),
        (
            NodeErrorKind::Server("ERR boom".into()),
            json!({"server": "ERR boom"}),
        ),
        (
            NodeErrorKind::Restarted {
                uptime: Duration::from_secs(1),
                remaining: Duration::from_secs(2),
            },
            json!({"restarted": {"uptime": {"secs": 1, "nanos": 0}, "remaining": {"secs": 2, "nanos": 0}}}),
        ),
    ];
    for (kind, expected) in kinds {
        assert_eq!(round_trip(&kind), expected);
    }
    let failure: NodeFailure =
        serde_json::from_value(json!({"node": 1, "addr": "10.0.0.2:6379", "kind": "timeout"}))
            .expect("deserialize");
    assert_eq!(failure.kind, NodeErrorKind::Timeout);
    assert_eq!(failure.to_string(), "master 1 (10.0.0.2:6379): timed out");
    round_trip(&failure);
    let ignored = serde_json::to_value(quorlock::Ignored::RestartGrace).expect("serialize");
    assert_eq!(ignored, json!("restart_grace"));
}
