//! What a simulated lock call is and what it leaves behind: the kinds of call the clients make
//! ([`CallKind`]) and the record of each call ([`SimRecord`]). A record is the chaos harness's
//! [`LockRecord`], which every checker and report reads, wrapped with what only the simulation
//! knows (the kind, the wait and TTL asked for, what the holder did inside its hold). Apart from
//! the client's loop (`workload`) and its holds (`hold`), which both fill records in, and from the
//! checks, which read them, so that none of those depends on another for the record.

use std::fmt;
use std::time::Duration;

use crate::history::LockRecord;

/// The permits of every semaphore the workload uses.
pub const SEMAPHORE_PERMITS: u32 = 2;

/// The kinds of lock call the workload makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CallKind {
    /// A plain lock.
    Plain,
    /// A fenced lock whose holder writes through a `FencedStore`.
    Fenced,
    /// A reentrant lock, sometimes re-entered by its owner.
    Reentrant,
    /// Two resources at once.
    Multi,
    /// A fair (first come, first served) lock.
    Fair,
    /// A permit of a semaphore of [`SEMAPHORE_PERMITS`] permits.
    Semaphore,
    /// A read hold of a read-write lock.
    Read,
    /// The write hold of a read-write lock (on the same resources as [`CallKind::Read`]).
    Write,
    /// A fenced write hold of a read-write lock (`write().fenced()`), whose holder writes through
    /// a `FencedStore` (on the same resources as [`CallKind::Read`]).
    FencedWrite,
}

impl CallKind {
    /// Every kind, in a fixed order.
    pub const ALL: [CallKind; 8] = [
        CallKind::Plain,
        CallKind::Fenced,
        CallKind::Reentrant,
        CallKind::Multi,
        CallKind::Fair,
        CallKind::Semaphore,
        CallKind::Read,
        CallKind::Write,
    ];

    /// Every kind, the fenced write included: what runs with operations use (the classic runs
    /// keep drawing from [`CallKind::ALL`], so that their histories stay theirs).
    pub const EVERY: [CallKind; 9] = [
        CallKind::Plain,
        CallKind::Fenced,
        CallKind::Reentrant,
        CallKind::Multi,
        CallKind::Fair,
        CallKind::Semaphore,
        CallKind::Read,
        CallKind::Write,
        CallKind::FencedWrite,
    ];

    /// The prefix of this kind's resources, unless a run puts every kind on the same names: kinds
    /// never share keys then, except the read and write holds of one read-write lock.
    pub fn name(self) -> &'static str {
        match self {
            CallKind::Plain => "plain",
            CallKind::Fenced => "fenced",
            CallKind::Reentrant => "reentrant",
            CallKind::Multi => "multi",
            CallKind::Fair => "fair",
            CallKind::Semaphore => "semaphore",
            CallKind::Read | CallKind::Write | CallKind::FencedWrite => "rw",
        }
    }

    /// Whether its holds write to the protected resource through a `FencedStore`.
    pub fn fenced(self) -> bool {
        matches!(self, CallKind::Fenced | CallKind::FencedWrite)
    }

    /// Which of the library's exclusions its holds take part in, on a resource name: `Some("")`
    /// for the kinds on the plain lock's key (plain, fenced, multi, the write holds), which
    /// exclude each other; the reentrant and fair kinds' own keys, which exclude only their own
    /// kind; `None` for the semaphore and the read holds, which are checked on their own.
    pub fn exclusion(self) -> Option<&'static str> {
        match self {
            CallKind::Plain
            | CallKind::Fenced
            | CallKind::Multi
            | CallKind::Write
            | CallKind::FencedWrite => Some(""),
            CallKind::Reentrant => Some("reentrant"),
            CallKind::Fair => Some("fair"),
            CallKind::Semaphore | CallKind::Read => None,
        }
    }

    /// Whether it is a write hold of a read-write lock, which readers must never overlap.
    pub fn writes(self) -> bool {
        matches!(self, CallKind::Write | CallKind::FencedWrite)
    }
}

/// One lock call and, if it succeeded, its hold; times are simulated offsets from the run start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimRecord {
    /// What every chaos record says of a call: the client; the resources asked for (those of a
    /// multi call joined by commas, as the harness names a multi hold; see
    /// [`SimRecord::resources`]); when `acquire` was called and when it succeeded; the end of the
    /// last validity the guard confirmed; `released`, when the holder called release (it acts no
    /// more after this); the fencing token, for fenced holds; why the acquire failed. The token
    /// stays empty: the simulated holders do not record theirs.
    pub lock: LockRecord,
    /// The kind.
    pub kind: CallKind,
    /// The resources the guard said it held (multi: must be all of them).
    pub held: Vec<String>,
    /// When `acquire` was called by the client's own clock (an offset from the run start): fair
    /// tickets are stamped on the client's wall clock, which runs with it, so calls of different
    /// clients are queued in the order of these, not of their true times.
    pub stamped: Duration,
    /// The wait given to the call.
    pub wait: Duration,
    /// The TTL asked for.
    pub ttl: Duration,
    /// When the release returned (or the acquire failed).
    pub ended: Duration,
    /// Whether the release was confirmed by a majority.
    pub released_ok: bool,
    /// The witness counters whose update the store accepted, one entry per write.
    pub written: Vec<String>,
    /// Fenced writes the store rejected as stale.
    pub stale: u32,
    /// The holder paused (as for a GC) inside its hold.
    pub paused: bool,
    /// A nested re-entry by the same owner succeeded inside this hold.
    pub reentered: bool,
    /// The semaphore slot the guard said it held.
    pub permit: Option<u32>,
    /// The hold was kept alive by the watchdog, for longer than its TTL.
    pub kept_alive: bool,
    /// The holder called `extend` once: whether it succeeded.
    pub extended: Option<bool>,
    /// When the holder learnt that the lock was lost (the watchdog's signal, a failed extend); it
    /// wrote nothing after this.
    pub lost: Option<Duration>,
    /// The permits a semaphore call asked for.
    pub permits: Option<u32>,
}

impl SimRecord {
    /// A call of `kind` by `client` on `resources` (simulated resource names, `kind:n`, never
    /// holding a comma), invoked at `invoked` (`stamped` by the client's own clock), with its wait
    /// and TTL; nothing has happened to it yet.
    pub fn invoked(
        client: usize,
        kind: CallKind,
        resources: &[String],
        invoked: Duration,
        stamped: Duration,
        wait: Duration,
        ttl: Duration,
    ) -> SimRecord {
        debug_assert!(resources.iter().all(|r| !r.contains(',')), "{resources:?}");
        SimRecord {
            lock: LockRecord::invoked(client, resources.join(","), invoked),
            kind,
            held: Vec::new(),
            stamped,
            wait,
            ttl,
            ended: invoked,
            released_ok: false,
            written: Vec::new(),
            stale: 0,
            paused: false,
            reentered: false,
            permit: None,
            kept_alive: false,
            extended: None,
            lost: None,
            permits: (kind == CallKind::Semaphore).then_some(SEMAPHORE_PERMITS),
        }
    }

    /// The resources asked for, in the order asked (one, or several for multi).
    pub fn resources(&self) -> impl Iterator<Item = &str> + '_ {
        self.lock.resource.split(',')
    }

    /// The first resource asked for: the only one, but for multi.
    pub fn first_resource(&self) -> &str {
        self.resources().next().unwrap_or_default()
    }

    /// The chaos checker's records of this call, one per resource held (none if the acquire
    /// failed): from the acquire to the release, or to when the call ended if it never released,
    /// valid until the earlier of the last validity the guard confirmed and the loss signal.
    pub fn holds(&self) -> impl Iterator<Item = LockRecord> + '_ {
        let validity_end = match (self.lock.validity_end, self.lost) {
            (Some(valid), Some(lost)) => Some(valid.min(lost)),
            (valid, lost) => valid.or(lost),
        };
        let released = Some(self.lock.released.unwrap_or(self.ended));
        self.lock.acquired.into_iter().flat_map(move |acquired| {
            self.resources().map(move |resource| LockRecord {
                client: self.lock.client,
                resource: resource.to_owned(),
                token: String::new(),
                invoked: self.lock.invoked,
                acquired: Some(acquired),
                validity_end,
                released,
                fencing: self.lock.fencing,
                error: None,
            })
        })
    }

    /// The record as the history hash reads it.
    pub(crate) fn history_line(&self) -> HistoryLine<'_> {
        HistoryLine(self)
    }
}

/// A record as one line of the text the history hash is taken of: every field, in the order and
/// the form of the record's `Debug` from before it wrapped a [`LockRecord`] (when `resources` and
/// `releasing` were fields of its own), so that a seed's hash stays the name of its history
/// across that change and the hashes kept in the README still replay.
pub(crate) struct HistoryLine<'a>(&'a SimRecord);

impl fmt::Display for HistoryLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0;
        let resources: Vec<&str> = r.resources().collect();
        f.debug_struct("SimRecord")
            .field("client", &r.lock.client)
            .field("kind", &r.kind)
            .field("resources", &resources)
            .field("held", &r.held)
            .field("invoked", &r.lock.invoked)
            .field("stamped", &r.stamped)
            .field("wait", &r.wait)
            .field("ttl", &r.ttl)
            .field("acquired", &r.lock.acquired)
            .field("validity_end", &r.lock.validity_end)
            .field("releasing", &r.lock.released)
            .field("ended", &r.ended)
            .field("released_ok", &r.released_ok)
            .field("fencing", &r.lock.fencing)
            .field("error", &r.lock.error)
            .field("written", &r.written)
            .field("stale", &r.stale)
            .field("paused", &r.paused)
            .field("reentered", &r.reentered)
            .field("permit", &r.permit)
            .field("kept_alive", &r.kept_alive)
            .field("extended", &r.extended)
            .field("lost", &r.lost)
            .finish()?;
        // New since operations, and written only where a run uses it, so that the histories of
        // the runs without stay named by the hashes they had.
        match r.permits {
            Some(p) if p != SEMAPHORE_PERMITS => write!(f, " permits {p}"),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_multi_call_keeps_its_resources_and_holds_each() {
        let asked = ["multi:1".to_owned(), "multi:0".to_owned()];
        let mut r = SimRecord::invoked(3, CallKind::Multi, &asked, ms(5), ms(4), ms(100), ms(200));
        assert_eq!(r.lock.resource, "multi:1,multi:0");
        assert_eq!(r.resources().collect::<Vec<_>>(), ["multi:1", "multi:0"]);
        assert_eq!(r.first_resource(), "multi:1");
        assert_eq!(r.holds().count(), 0);
        r.lock.acquired = Some(ms(10));
        r.lock.validity_end = Some(ms(150));
        r.lost = Some(ms(120));
        r.ended = ms(300);
        let holds: Vec<LockRecord> = r.holds().collect();
        assert_eq!(holds.len(), 2);
        assert_eq!(
            (holds[0].resource.as_str(), holds[1].resource.as_str()),
            ("multi:1", "multi:0")
        );
        // Valid until the loss signal; released when the call ended, as it never called release.
        assert_eq!(holds[0].safe_interval(), Some((ms(10), ms(120))));
        assert_eq!(holds[1].released, Some(ms(300)));
    }

    #[test]
    fn the_history_line_is_the_flat_records_debug() {
        let mut r = SimRecord::invoked(
            1,
            CallKind::Fenced,
            &["fenced:0".to_owned()],
            ms(7),
            ms(6),
            ms(30),
            ms(500),
        );
        r.lock.acquired = Some(ms(9));
        r.lock.fencing = Some(42);
        r.lock.released = Some(ms(20));
        r.held = vec!["fenced:0".to_owned()];
        r.written = vec!["w:fenced:0".to_owned()];
        r.extended = Some(true);
        assert_eq!(
            r.history_line().to_string(),
            "SimRecord { client: 1, kind: Fenced, resources: [\"fenced:0\"], held: [\"fenced:0\"], \
             invoked: 7ms, stamped: 6ms, wait: 30ms, ttl: 500ms, acquired: Some(9ms), \
             validity_end: None, releasing: Some(20ms), ended: 7ms, released_ok: false, \
             fencing: Some(42), error: None, written: [\"w:fenced:0\"], stale: 0, paused: false, \
             reentered: false, permit: None, kept_alive: false, extended: Some(true), lost: None }"
        );
    }
}
