//! A visible wait: while an acquire waits on a terminal, one status line on stderr says for which
//! key, for how long so far, who holds it (a quorlock token, or "another client" for a value no
//! quorlock client wrote), and how long until the holder's key expires.
//!
//! The line is erased when the acquire ends, taken or not. Nothing is drawn when stderr is not a
//! terminal, or with `-q`. The holder comes from [`Quorlock::inspect`], polled every
//! [`INSPECT_EVERY`] from a task of its own, so a slow master never holds up the acquire itself;
//! the line is redrawn every [`REDRAW_EVERY`] from the last answer.

use std::future::Future;
use std::io::IsTerminal;
use std::time::Duration;

use quorlock::{Inspection, Quorlock};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::duration::show;
use crate::voice;

/// How often the lock is inspected while waiting: a modest load on the masters.
pub const INSPECT_EVERY: Duration = Duration::from_millis(500);
/// How often the line is redrawn (the wait and the time left count).
pub const REDRAW_EVERY: Duration = Duration::from_millis(100);
/// No line for an acquire that ends sooner than this: nothing flashes for a free lock.
const FIRST_DRAW: Duration = Duration::from_millis(200);
/// The longest key shown in full.
const KEY_WIDTH: usize = 32;

/// Runs `acquire`, showing the status line meanwhile when stderr is a terminal and not quiet.
/// Dropped half-way (a stop signal), it stops inspecting and erases the line all the same.
pub async fn while_waiting<T>(locks: &Quorlock, key: &str, acquire: impl Future<Output = T>) -> T {
    if !std::io::stderr().is_terminal() || voice::quiet() {
        return acquire.await;
    }
    let started = Instant::now();
    let (tx, mut rx) = watch::channel::<Option<(Inspection, Instant)>>(None);
    let _showing = Showing(tokio::spawn({
        let locks = locks.clone();
        let key = key.to_owned();
        async move {
            let mut every = tokio::time::interval(INSPECT_EVERY);
            loop {
                every.tick().await;
                if let Ok(inspection) = locks.inspect(&key).await {
                    if tx.send(Some((inspection, Instant::now()))).is_err() {
                        return;
                    }
                }
            }
        }
    }));
    tokio::pin!(acquire);
    let mut redraw = tokio::time::interval_at(started + FIRST_DRAW, REDRAW_EVERY);
    loop {
        tokio::select! {
            biased;
            outcome = &mut acquire => return outcome,
            _ = redraw.tick() => {
                let now = Instant::now();
                let seen = rx.borrow_and_update();
                let view = seen.as_ref().map(|(inspection, at)| (inspection, now.saturating_duration_since(*at)));
                voice::status(&line(key, now - started, view));
            }
        }
    }
}

/// The inspecting task while the line is shown: on drop, the task stops and the line goes.
struct Showing(tokio::task::JoinHandle<()>);

impl Drop for Showing {
    fn drop(&mut self) {
        self.0.abort();
        voice::clear_status();
    }
}

/// The status line: `quorlock: waiting 3.2s for "key": held by token 1a2b3c4d, expires in 12.3s`.
/// `view` is the last inspection and how long ago it was answered.
pub fn line(key: &str, waited: Duration, view: Option<(&Inspection, Duration)>) -> String {
    let shown_key = if key.chars().count() > KEY_WIDTH {
        format!("{:?}...", key.chars().take(KEY_WIDTH).collect::<String>())
    } else {
        format!("{key:?}")
    };
    let mut out = format!("quorlock: waiting {} for {shown_key}", show(waited));
    let Some((inspection, age)) = view else {
        return out;
    };
    out.push_str(": ");
    if inspection.reachable() < inspection.quorum {
        out.push_str(&format!(
            "{} of {} masters answer, {} needed",
            inspection.reachable(),
            inspection.masters.len(),
            inspection.quorum
        ));
        return out;
    }
    let Some((token, _)) = inspection.leading() else {
        out.push_str("free, taking it");
        return out;
    };
    out.push_str("held by ");
    out.push_str(&holder(token));
    // The time left on the masters holding that token: the soonest expiry, counted down.
    let ttl = inspection
        .masters
        .iter()
        .filter(|m| m.token() == Some(token))
        .filter_map(|m| m.state.as_ref().ok().and_then(|h| h.as_ref()).and_then(|h| h.ttl))
        .min();
    match ttl {
        Some(ttl) => out.push_str(&format!(", expires in {}", show(ttl.saturating_sub(age)))),
        None => out.push_str(", with no expiry"),
    }
    out
}

/// Who holds a lock, from the value of its key: a quorlock token (32 lowercase hex digits, a
/// UUID) by its first 8 digits, anything else as another client.
pub fn holder(value: &str) -> String {
    let quorlock = value.len() == 32
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if quorlock {
        format!("token {}", &value[..8])
    } else {
        "another client".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quorlock::{Holding, MasterState, NodeErrorKind};

    fn inspection(states: Vec<Result<Option<Holding>, NodeErrorKind>>) -> Inspection {
        let quorum = states.len() / 2 + 1;
        let masters = states
            .into_iter()
            .enumerate()
            .map(|(node, state)| MasterState::new(node, format!("127.0.0.1:{node}"), state))
            .collect();
        Inspection::new("k", "k", quorum, masters)
    }

    fn held(token: &str, ttl_ms: u64) -> Result<Option<Holding>, NodeErrorKind> {
        Ok(Some(Holding::new(token, Some(Duration::from_millis(ttl_ms)))))
    }

    const TOKEN: &str = "1a2b3c4d5e6f708192a3b4c5d6e7f809";

    #[test]
    fn a_quorlock_holder_is_named_by_its_token_with_the_soonest_expiry_counted_down() {
        let i = inspection(vec![
            held(TOKEN, 9_000),
            held(TOKEN, 8_000),
            Err(NodeErrorKind::Timeout),
        ]);
        let text = line(
            "orders",
            Duration::from_millis(3_200),
            Some((&i, Duration::from_millis(500))),
        );
        assert_eq!(
            text,
            "quorlock: waiting 3.2s for \"orders\": held by token 1a2b3c4d, expires in 7.5s"
        );
    }

    #[test]
    fn another_clients_value_and_the_lack_of_a_majority_are_said_plainly() {
        let i = inspection(vec![held("not-ours", 900), held("not-ours", 900), Ok(None)]);
        let text = line("k", Duration::from_millis(50), Some((&i, Duration::ZERO)));
        assert!(
            text.ends_with("held by another client, expires in 900ms"),
            "{text}"
        );
        let down = inspection(vec![
            Err(NodeErrorKind::Timeout),
            Err(NodeErrorKind::Timeout),
            Ok(None),
        ]);
        let text = line("k", Duration::ZERO, Some((&down, Duration::ZERO)));
        assert!(text.ends_with("1 of 3 masters answer, 2 needed"), "{text}");
        assert_eq!(line("k", Duration::ZERO, None), "quorlock: waiting 0ms for \"k\"");
    }

    #[test]
    fn long_keys_are_cut_and_tokens_are_recognised_strictly() {
        let key = "x".repeat(100);
        assert!(line(&key, Duration::ZERO, None).len() < 80);
        assert_eq!(holder(TOKEN), "token 1a2b3c4d");
        assert_eq!(holder(&TOKEN.to_uppercase()), "another client");
        assert_eq!(holder(&TOKEN[..31]), "another client");
    }
}
