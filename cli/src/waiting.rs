//! A visible wait: while an acquire waits on a terminal, one status line on stderr says for which
//! key, for how long so far, who holds it (a quorlock token, or "another client" for a value no
//! quorlock client wrote), and how long until the holder's key expires. For a permit it counts the
//! permits held; for a read it names the writer or the writers waiting ahead of it; for a write
//! (the default of `run`), the writer or the readers it waits for.
//!
//! The line is erased when the acquire ends, taken or not. Nothing is drawn when stderr is not a
//! terminal, or with `-q`. The holders come from [`Quorlock::inspect`] (or the semaphore's and the
//! read-write lock's inspections), polled every [`INSPECT_EVERY`] from a task of its own, so a slow
//! master never holds up the acquire itself; the line is redrawn every [`REDRAW_EVERY`] from the
//! last answer.

use std::future::Future;
use std::io::IsTerminal;
use std::time::Duration;

use quorlock::{Inspection, Quorlock, RwInspection, SemaphoreInspection};
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
/// Reader tokens named on the line; more are counted.
const READERS_NAMED: usize = 2;

/// What a wait is for: it decides what is inspected and what the line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// A plain (or fenced) lock.
    Lock,
    /// One of this many permits of a semaphore.
    Permits(u32),
    /// A read hold of a read-write lock.
    Read,
    /// The write hold of a read-write lock.
    Write,
}

/// The last inspection, of whichever kind was asked for.
#[derive(Debug, Clone)]
pub enum Seen {
    /// A plain lock.
    Lock(Inspection),
    /// A semaphore's slots.
    Permits(SemaphoreInspection),
    /// A read-write lock's writer and readers.
    Rw(RwInspection),
}

async fn inspect(locks: &Quorlock, key: &str, watch: Watch) -> Option<Seen> {
    match watch {
        Watch::Lock => locks.inspect(key).await.ok().map(Seen::Lock),
        Watch::Permits(p) => locks.inspect_semaphore(key, p).await.ok().map(Seen::Permits),
        Watch::Read | Watch::Write => locks.inspect_rwlock(key).await.ok().map(Seen::Rw),
    }
}

/// Runs `acquire`, showing the status line meanwhile when stderr is a terminal and not quiet.
/// Dropped half-way (a stop signal), it stops inspecting and erases the line all the same.
pub async fn while_waiting<T>(
    locks: &Quorlock,
    key: &str,
    watch: Watch,
    acquire: impl Future<Output = T>,
) -> T {
    if !std::io::stderr().is_terminal() || voice::quiet() {
        return acquire.await;
    }
    let started = Instant::now();
    let (tx, mut rx) = watch::channel::<Option<(Seen, Instant)>>(None);
    let _showing = Showing(tokio::spawn({
        let locks = locks.clone();
        let key = key.to_owned();
        async move {
            let mut every = tokio::time::interval(INSPECT_EVERY);
            loop {
                every.tick().await;
                if let Some(seen) = inspect(&locks, &key, watch).await {
                    if tx.send(Some((seen, Instant::now()))).is_err() {
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
                let view = seen.as_ref().map(|(seen, at)| (seen, now.saturating_duration_since(*at)));
                voice::status(&line(key, now - started, watch, view));
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
pub fn line(key: &str, waited: Duration, watch: Watch, view: Option<(&Seen, Duration)>) -> String {
    let shown_key = if key.chars().count() > KEY_WIDTH {
        format!("{:?}...", key.chars().take(KEY_WIDTH).collect::<String>())
    } else {
        format!("{key:?}")
    };
    let mut out = format!("quorlock: waiting {} for {shown_key}", show(waited));
    if let Some((seen, age)) = view {
        out.push_str(": ");
        out.push_str(&match seen {
            Seen::Lock(i) => lock_state(i, age),
            Seen::Permits(s) => permits_state(s, age),
            Seen::Rw(rw) => rw_state(rw, watch, age),
        });
    }
    out
}

/// `N of M masters answer, Q needed` when too few answer.
fn unreachable(i: &Inspection) -> Option<String> {
    (i.reachable() < i.quorum).then(|| {
        format!(
            "{} of {} masters answer, {} needed",
            i.reachable(),
            i.masters.len(),
            i.quorum
        )
    })
}

/// The soonest expiry, on the masters holding `token`, counted down by `age`.
fn expiry(i: &Inspection, token: &str, age: Duration) -> String {
    let ttl = i
        .masters
        .iter()
        .filter(|m| m.token() == Some(token))
        .filter_map(|m| m.state.as_ref().ok().and_then(|h| h.as_ref()).and_then(|h| h.ttl))
        .min();
    match ttl {
        Some(ttl) => format!(", expires in {}", show(ttl.saturating_sub(age))),
        None => ", with no expiry".to_owned(),
    }
}

fn lock_state(i: &Inspection, age: Duration) -> String {
    if let Some(text) = unreachable(i) {
        return text;
    }
    match i.leading() {
        Some((token, _)) => format!("held by {}{}", holder(token), expiry(i, token, age)),
        None => "free, taking it".to_owned(),
    }
}

fn permits_state(s: &SemaphoreInspection, age: Duration) -> String {
    if let Some(text) = s.slots.first().and_then(unreachable) {
        return text;
    }
    let (held, permits) = (s.held(), s.permits());
    if held < permits {
        return format!("{held} of {permits} permits held, taking one");
    }
    // Every permit is held: the first to come back is the one that expires soonest.
    let soonest = s
        .slots
        .iter()
        .filter_map(|slot| slot.holder().map(|token| (slot, token)))
        .filter_map(|(slot, token)| {
            slot.masters
                .iter()
                .filter(|m| m.token() == Some(token))
                .filter_map(|m| m.state.as_ref().ok().and_then(|h| h.as_ref()).and_then(|h| h.ttl))
                .min()
        })
        .min();
    match soonest {
        Some(ttl) => format!(
            "all {permits} permits held, the first expires in {}",
            show(ttl.saturating_sub(age))
        ),
        None => format!("all {permits} permits held"),
    }
}

fn rw_state(rw: &RwInspection, watch: Watch, age: Duration) -> String {
    if let Some(text) = unreachable(&rw.writer) {
        return text;
    }
    if let Some(writer) = rw.writer() {
        return format!("held by {}{}", holder(writer), expiry(&rw.writer, writer, age));
    }
    let readers = rw.readers();
    if watch == Watch::Read {
        // Writers go first: a writer waiting on a majority keeps new readers out.
        return if rw.writers_waiting() >= rw.writer.quorum {
            "a writer is waiting, and writers go first".to_owned()
        } else {
            "free for readers, taking it".to_owned()
        };
    }
    match readers.len() {
        0 => "free, taking it".to_owned(),
        n => {
            let mut named: Vec<String> = readers.iter().take(READERS_NAMED).map(|r| holder(r)).collect();
            if n > READERS_NAMED {
                named.push(format!("{} more", n - READERS_NAMED));
            }
            format!(
                "read by {n} reader{} ({})",
                if n == 1 { "" } else { "s" },
                named.join(", ")
            )
        }
    }
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
    use quorlock::{Holding, MasterState, NodeErrorKind, ReadersState};

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
            Watch::Lock,
            Some((&Seen::Lock(i), Duration::from_millis(500))),
        );
        assert_eq!(
            text,
            "quorlock: waiting 3.2s for \"orders\": held by token 1a2b3c4d, expires in 7.5s"
        );
    }

    #[test]
    fn another_clients_value_and_the_lack_of_a_majority_are_said_plainly() {
        let i = inspection(vec![held("not-ours", 900), held("not-ours", 900), Ok(None)]);
        let text = line(
            "k",
            Duration::from_millis(50),
            Watch::Lock,
            Some((&Seen::Lock(i), Duration::ZERO)),
        );
        assert!(
            text.ends_with("held by another client, expires in 900ms"),
            "{text}"
        );
        let down = inspection(vec![
            Err(NodeErrorKind::Timeout),
            Err(NodeErrorKind::Timeout),
            Ok(None),
        ]);
        let text = line(
            "k",
            Duration::ZERO,
            Watch::Lock,
            Some((&Seen::Lock(down), Duration::ZERO)),
        );
        assert!(text.ends_with("1 of 3 masters answer, 2 needed"), "{text}");
        assert_eq!(
            line("k", Duration::ZERO, Watch::Lock, None),
            "quorlock: waiting 0ms for \"k\""
        );
    }

    #[test]
    fn long_keys_are_cut_and_tokens_are_recognised_strictly() {
        let key = "x".repeat(100);
        assert!(line(&key, Duration::ZERO, Watch::Lock, None).len() < 80);
        assert_eq!(holder(TOKEN), "token 1a2b3c4d");
        assert_eq!(holder(&TOKEN.to_uppercase()), "another client");
        assert_eq!(holder(&TOKEN[..31]), "another client");
    }

    const OTHER: &str = "9f8e7d6c5b4a39281706f5e4d3c2b1a0";

    fn free() -> Result<Option<Holding>, NodeErrorKind> {
        Ok(None)
    }

    fn rw(writer: Inspection, readers: &[&[&str]], waiting: &[u64]) -> Seen {
        let readers = readers
            .iter()
            .zip(waiting)
            .enumerate()
            .map(|(node, (tokens, waiting))| {
                ReadersState::new(
                    node,
                    Ok((tokens.iter().map(|t| (*t).to_owned()).collect(), *waiting)),
                )
            })
            .collect();
        Seen::Rw(RwInspection::new("k", writer, readers))
    }

    fn say(watch: Watch, seen: &Seen) -> String {
        line("k", Duration::from_secs(1), watch, Some((seen, Duration::ZERO)))
    }

    #[test]
    fn a_permit_wait_counts_the_permits_and_says_when_the_first_comes_back() {
        let sem = |slots: Vec<Inspection>| Seen::Permits(SemaphoreInspection::new("k", slots));
        let full = sem(vec![
            inspection(vec![held(TOKEN, 5_000), held(TOKEN, 4_000), free()]),
            inspection(vec![held(OTHER, 2_000), held(OTHER, 3_000), held(OTHER, 3_000)]),
        ]);
        assert!(
            say(Watch::Permits(2), &full).ends_with(": all 2 permits held, the first expires in 2.0s"),
            "{}",
            say(Watch::Permits(2), &full)
        );
        let one = sem(vec![
            inspection(vec![held(TOKEN, 5_000), held(TOKEN, 4_000), free()]),
            inspection(vec![held(OTHER, 2_000), free(), free()]),
        ]);
        assert!(say(Watch::Permits(2), &one).ends_with(": 1 of 2 permits held, taking one"));
    }

    #[test]
    fn a_write_waits_for_the_writer_or_names_the_readers_and_a_read_sees_writers_go_first() {
        let nobody = || inspection(vec![free(), free(), free()]);
        let written = rw(
            inspection(vec![held(TOKEN, 3_000), held(TOKEN, 3_000), free()]),
            &[&[], &[], &[]],
            &[0, 0, 0],
        );
        for watch in [Watch::Read, Watch::Write] {
            assert!(say(watch, &written).ends_with(": held by token 1a2b3c4d, expires in 3.0s"));
        }
        let three = ["aaaaaaaa000000000000000000000000", TOKEN, OTHER];
        let read = rw(nobody(), &[&three, &three, &[]], &[0, 0, 0]);
        assert!(
            say(Watch::Write, &read)
                .ends_with(": read by 3 readers (token 1a2b3c4d, token 9f8e7d6c, 1 more)"),
            "{}",
            say(Watch::Write, &read)
        );
        assert!(say(Watch::Read, &read).ends_with(": free for readers, taking it"));
        let waiting = rw(nobody(), &[&[TOKEN], &[TOKEN], &[]], &[1, 1, 0]);
        assert!(say(Watch::Read, &waiting).ends_with(": a writer is waiting, and writers go first"));
        let minority = rw(nobody(), &[&[TOKEN], &[], &[]], &[1, 0, 0]);
        assert!(say(Watch::Write, &minority).ends_with(": free, taking it"));
        assert!(say(Watch::Read, &minority).ends_with(": free for readers, taking it"));
    }
}
