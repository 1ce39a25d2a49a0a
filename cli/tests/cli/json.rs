//! `--json` on `run`, `acquire`, `release` and `status`: one object, schema 1, with the fields the
//! README documents, on success and on failure.

use std::time::Duration;

use serde_json::Value;

use super::common::{cluster, locks};
use super::{code, json_of, output, quorlock, stderr};

/// The fields every object carries: `failed` when quorlock itself failed (`error` is then its
/// message), not when it passes on a command's exit code.
fn envelope(v: &Value, command: &str, key: &str, exit_code: i32, failed: bool) {
    assert_eq!(v["schema"], 1, "{v}");
    assert_eq!(v["command"], command, "{v}");
    assert_eq!(v["key"], key, "{v}");
    assert_eq!(v["exit_code"], exit_code, "{v}");
    assert_eq!(v["ok"], exit_code == 0, "{v}");
    assert_eq!(v["error"].is_string(), failed, "{v}");
}

#[tokio::test]
async fn each_command_prints_one_object_of_schema_1() {
    let c = cluster(3).await;

    let out = output(quorlock(
        &c,
        &["acquire", "--json", "--fence", "--ttl", "20s", "j"],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    let acquired = json_of(&out);
    envelope(&acquired, "acquire", "j", 0, false);
    let token = acquired["token"].as_str().expect("token").to_owned();
    assert_eq!(token.len(), 32, "{acquired}");
    assert!(acquired["fence"].as_u64().is_some(), "{acquired}");
    assert_eq!(acquired["ttl_ms"], 20_000, "{acquired}");
    assert!(
        acquired["validity_ms"]
            .as_u64()
            .is_some_and(|v| v > 0 && v <= 20_000),
        "{acquired}"
    );
    assert!(acquired["waited_ms"].is_u64(), "{acquired}");

    let out = output(quorlock(&c, &["status", "--json", "j"])).await;
    let status = json_of(&out);
    envelope(&status, "status", "j", 0, false);
    assert_eq!(status["held"], true, "{status}");
    assert_eq!(status["holder"], token.as_str(), "{status}");
    assert_eq!(
        (status["masters"].as_u64(), status["quorum"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(status["reachable"], 3, "{status}");
    assert_eq!(status["stored_key"], "j", "{status}");
    let node = &status["nodes"][0];
    for field in ["node", "addr", "reachable", "token", "pttl_ms", "error"] {
        assert!(node.get(field).is_some(), "node field {field}: {status}");
    }

    // A refused acquire still reports, with why it was refused.
    let out = output(quorlock(&c, &["acquire", "--json", "-n", "j"])).await;
    assert_eq!(code(&out), 75, "{}", stderr(&out));
    let refused = json_of(&out);
    envelope(&refused, "acquire", "j", 75, true);
    assert_eq!(refused["refused"], "held", "{refused}");
    assert!(refused["error"]
        .as_str()
        .is_some_and(|e| e.contains("held by another holder")));

    let out = output(quorlock(&c, &["release", "--json", "j", &token])).await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let released = json_of(&out);
    envelope(&released, "release", "j", 0, false);
    assert_eq!(released["outcome"], "released", "{released}");
    assert!(released["held"].as_u64().is_some_and(|h| h >= 2), "{released}");
    assert_eq!(released["masters"], 3, "{released}");

    let out = output(quorlock(&c, &["release", "--json", "j", &token])).await;
    assert_eq!(code(&out), 76, "{}", stderr(&out));
    let again = json_of(&out);
    envelope(&again, "release", "j", 76, true);
    assert_eq!(again["outcome"], "absent", "{again}");

    // run: the report is the last line of stdout, after the command's own output.
    let out = output(quorlock(
        &c,
        &["run", "--json", "j", "-c", "echo from-the-command; exit 3"],
    ))
    .await;
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(text.lines().next(), Some("from-the-command"), "{text}");
    let ran = json_of(&out);
    envelope(&ran, "run", "j", 3, false);
    assert_eq!(ran["child_exit_code"], 3, "{ran}");
    assert_eq!(ran["child_signal"], Value::Null, "{ran}");
    assert_eq!(ran["lost"], false, "{ran}");
    assert_eq!(ran["released"], true, "{ran}");
    assert!(ran["token"].as_str().is_some_and(|t| t.len() == 32), "{ran}");

    // run refused: no token, and why.
    let held = locks(&c)
        .await
        .acquire("j", Duration::from_secs(20))
        .await
        .expect("hold");
    let out = output(quorlock(&c, &["run", "--json", "-n", "j", "--", "true"])).await;
    let refused = json_of(&out);
    envelope(&refused, "run", "j", 75, true);
    assert_eq!(refused["refused"], "held", "{refused}");
    assert!(refused.get("token").is_none(), "{refused}");
    held.release().await.expect("release");
}
