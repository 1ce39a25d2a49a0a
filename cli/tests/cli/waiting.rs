//! The visible wait, seen through a pseudo-terminal as a person sees it: while the lock is held
//! elsewhere, one line on stderr names the key, the wait so far, the holder and the time to its
//! expiry; the line is erased when the lock is taken. With `-q`, nothing.

use std::process::Command;
use std::time::Duration;

use expectrl::session::OsSession as Session;
use expectrl::{Eof, Expect, Regex};
use redis::AsyncCommands;

use super::common::{cluster, locks};
use super::{BIN, LIMIT};

/// `quorlock run -w WAIT ... KEY -- true` on a pseudo-terminal, with `extra` options.
fn on_terminal(nodes: &str, key: &str, wait: &str, extra: &[&str]) -> Session {
    let mut cmd = Command::new(BIN);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("QUORLOCK_") {
            cmd.env_remove(name);
        }
    }
    cmd.args(["run", "--nodes", nodes, "--node-timeout", "200ms", "-w", wait])
        .args(extra)
        .args([key, "--", "true"]);
    let mut session = Session::spawn(cmd).expect("spawn quorlock on a pseudo-terminal");
    session.set_expect_timeout(Some(LIMIT));
    session
}

/// Waits, off the async runtime, for `needle` in the session's output; returns all output read.
async fn expect(mut session: Session, needle: &'static str) -> (Session, String) {
    tokio::task::spawn_blocking(move || {
        let found = session
            .expect(Regex(needle))
            .unwrap_or_else(|e| panic!("no {needle:?} on the terminal: {e}"));
        let seen =
            String::from_utf8_lossy(found.before()).into_owned() + &String::from_utf8_lossy(found.as_bytes());
        (session, seen)
    })
    .await
    .expect("the terminal reader")
}

/// Reads the rest of the output, and the exit code.
pub(super) async fn finish(mut session: Session) -> (String, i32) {
    tokio::task::spawn_blocking(move || {
        let rest = session.expect(Eof).expect("quorlock ended");
        let rest = String::from_utf8_lossy(rest.as_bytes()).into_owned();
        let status = session.get_process().wait().expect("wait for quorlock");
        let code = match status {
            expectrl::process::unix::WaitStatus::Exited(_, code) => code,
            other => panic!("quorlock did not exit: {other:?}"),
        };
        (rest, code)
    })
    .await
    .expect("the terminal reader")
}

#[tokio::test]
async fn the_waiting_line_names_the_holder_and_is_erased_once_the_lock_is_taken() {
    let c = cluster(3).await;
    let nodes = c.urls().join(",");
    let held = locks(&c)
        .await
        .acquire("busy-pty", Duration::from_secs(30))
        .await
        .expect("hold");
    let session = on_terminal(&nodes, "busy-pty", "60s", &[]);
    let (session, seen) = expect(
        session,
        r#"quorlock: waiting [0-9.]+m?s for "busy-pty": held by token [0-9a-f]{8}, expires in [0-9.]+s"#,
    )
    .await;
    assert!(
        seen.contains(&format!("token {}", &held.token()[..8])),
        "{seen:?}"
    );
    assert!(seen.contains("\r\x1b[2K"), "drawn in place: {seen:?}");
    held.release().await.expect("release");
    let (rest, code) = finish(session).await;
    assert_eq!(code, 0, "{rest:?}");
    // The last thing on the terminal erases the line, and no line is drawn after it.
    let erased = rest.rfind("\r\x1b[2K").expect("the line is erased");
    assert!(
        !rest[erased..].contains("waiting"),
        "the line is still there: {rest:?}"
    );
}

#[tokio::test]
async fn a_value_of_another_client_is_named_as_such_and_quiet_draws_nothing() {
    let c = cluster(3).await;
    let nodes = c.urls().join(",");
    for i in 0..3 {
        let mut conn = c.client(i).await.expect("connect");
        let _: () = conn
            .set_ex("foreign", "someone-else", 30)
            .await
            .expect("SET another client's lock");
    }
    let session = on_terminal(&nodes, "foreign", "60s", &[]);
    let (session, _) = expect(session, r#"held by another client, expires in [0-9.]+s"#).await;
    drop(session);

    let session = on_terminal(&nodes, "foreign", "1s", &["-q"]);
    let (rest, code) = finish(session).await;
    assert_eq!(code, 75, "{rest:?}");
    assert!(!rest.contains("waiting"), "-q draws no line: {rest:?}");
    assert_eq!(rest.trim(), "", "-q prints nothing for a held lock: {rest:?}");
}
