//! Messages in one voice: the library's warnings print as `quorlock: warning: ...` lines like the
//! command's own errors, an unreachable master is warned about once, and attempts are counted in
//! English.

use super::common::cluster;
use super::{code, output, quorlock_on, stderr};

#[tokio::test]
async fn an_unreachable_master_is_one_warning_line_in_quorlocks_voice() {
    let c = cluster(2).await;
    let mut urls = c.urls();
    urls.push("redis://127.0.0.1:1".to_owned());
    let out = output(quorlock_on(
        &urls,
        "200ms",
        &["run", "-w", "0s", "voiced", "--", "true"],
    ))
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stderr(&out);
    let about_it: Vec<&str> = text.lines().filter(|l| l.contains("127.0.0.1:1")).collect();
    assert_eq!(about_it.len(), 1, "warned about once:\n{text}");
    for line in text.lines() {
        assert!(
            line.starts_with("quorlock: "),
            "not in quorlock's voice: {line:?}\n{text}"
        );
        assert!(!line.contains(" WARN "), "a raw tracing line: {line:?}");
    }
    assert!(about_it[0].starts_with("quorlock: warning: "), "{text}");
    // -q: no warnings at all.
    let out = output(quorlock_on(&urls, "200ms", &["status", "-q", "voiced"])).await;
    assert_eq!(stderr(&out), "", "-q prints no warnings");
}
