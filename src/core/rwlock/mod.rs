//! The read-write lock's rules on one master, pure, and what its replies mean.
//!
//! Each master keeps the writer (one token, with an expiry), the readers (tokens, each with its own
//! expiry on the master's clock) and the writers waiting (tokens with a short expiry). The scripts
//! `rw_read.lua` and `rw_write.lua` (with the write rule in `rw_common.lua`) apply
//! [`MasterRw::read`] and [`MasterRw::write`]; the model in
//! `model.rs` drives these rules with many clients, each deciding with the crate's tally, and
//! checks that no reader's validity overlaps a writer's and that a writer waiting on a majority
//! keeps every new reader out.
//!
//! - A read is refused while a writer holds the master, or while a writer waits there (writer
//!   preference: a stream of readers cannot starve a writer).
//! - A write is refused while another writer holds the master, or while any unexpired reader does;
//!   a write refused because of readers leaves its token among the waiting writers, and a granted
//!   write removes it.
//!
//! Both need the usual majority, and any two majorities share a master, which applied these rules
//! in some order: a reader and a writer both valid would need a master that granted both, and the
//! later grant would have been refused.

#[cfg(test)]
mod model;

use super::fencing::AcquireReply;

#[cfg(test)]
use std::collections::HashMap;

/// One master's answer to a read or a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RwReply {
    /// Granted: a yes vote.
    Granted,
    /// A writer holds the lock there.
    Writer,
    /// Readers hold the lock there (a write was refused, and now waits there).
    Readers,
    /// A writer waits there (a read was refused).
    WriterWaiting,
}

impl RwReply {
    /// Reads a script's integer answer: `1` granted, `-1` a writer, `-2` readers, `-3` a writer
    /// waiting; `None` for anything else.
    pub fn from_code(code: i64) -> Option<Self> {
        match code {
            1 => Some(RwReply::Granted),
            -1 => Some(RwReply::Writer),
            -2 => Some(RwReply::Readers),
            -3 => Some(RwReply::WriterWaiting),
            _ => None,
        }
    }
}

/// Reads the answer of `rw_write_fenced.lua`, the first round of a fenced write, as the fenced
/// acquire's reply; `None` for a value the script never returns.
///
/// The script answers with the fenced acquire's codes (a counter, `-1` another writer, `-2` no
/// counter, `-3` a counter gone back, `-4` a stale epoch) plus `-5` for readers holding the lock,
/// which [`RwReply`] calls `-2`: the two scripts' `-2` mean different things, so the fenced write
/// has its own code for readers, and a refusal because of readers is a plain refusal (the writer
/// now waits there, as after `rw_write.lua`'s `-2`).
pub fn fenced_write_reply(code: i64) -> Option<AcquireReply> {
    match code {
        -5 => Some(AcquireReply::Held),
        code => AcquireReply::from_reply(code),
    }
}

/// One master's read-write state, times in milliseconds on the master's clock: the rules of
/// `rw_read.lua` and `rw_common.lua`'s write rule restated for the model, which checks them against every
/// interleaving (the scripts themselves run in the integration tests and the simulation).
#[cfg(test)]
#[derive(Debug, Default, Clone)]
pub struct MasterRw<T> {
    /// The writer and when its key expires.
    pub writer: Option<(T, u64)>,
    /// Each reader's expiry.
    pub readers: HashMap<T, u64>,
    /// Each waiting writer's expiry.
    pub waiting: HashMap<T, u64>,
}

#[cfg(test)]
impl<T: Clone + Eq + std::hash::Hash> MasterRw<T> {
    /// Forgets whatever has expired at `now`.
    pub fn purge(&mut self, now: u64) {
        if self.writer.as_ref().is_some_and(|(_, until)| *until <= now) {
            self.writer = None;
        }
        self.readers.retain(|_, until| *until > now);
        self.waiting.retain(|_, until| *until > now);
    }

    /// A read by `token` for `ttl_ms` at `now`.
    pub fn read(&mut self, token: T, ttl_ms: u64, now: u64) -> RwReply {
        self.purge(now);
        if self.writer.is_some() {
            return RwReply::Writer;
        }
        if !self.waiting.is_empty() {
            return RwReply::WriterWaiting;
        }
        self.readers.insert(token, now + ttl_ms);
        RwReply::Granted
    }

    /// A write by `token` for `ttl_ms` at `now`, by the waiting writer `waiter` (one id for all
    /// the rounds of one acquire); a refusal because of readers leaves `waiter` waiting for
    /// `wait_ms`, and a grant removes it.
    pub fn write(&mut self, token: T, waiter: &T, ttl_ms: u64, wait_ms: u64, now: u64) -> RwReply {
        self.purge(now);
        if self.writer.is_some() {
            return RwReply::Writer;
        }
        if !self.readers.is_empty() {
            self.waiting.insert(waiter.clone(), now + wait_ms);
            return RwReply::Readers;
        }
        self.waiting.remove(waiter);
        self.writer = Some((token, now + ttl_ms));
        RwReply::Granted
    }

    /// Removes whatever `token` has here (a release, or the cleanup of a failed round); a waiting
    /// writer that gives up removes its token with [`MasterRw::leave`].
    pub fn release(&mut self, token: &T) {
        if self.writer.as_ref().is_some_and(|(t, _)| t == token) {
            self.writer = None;
        }
        self.readers.remove(token);
    }

    /// A waiting writer gives up.
    pub fn leave(&mut self, token: &T) {
        self.waiting.remove(token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_share_and_exclude_a_writer() {
        let mut m = MasterRw::default();
        assert_eq!(m.read("r1", 100, 0), RwReply::Granted);
        assert_eq!(m.read("r2", 100, 0), RwReply::Granted);
        assert_eq!(m.write("w", &"w", 100, 50, 10), RwReply::Readers);
        // The writer now waits: a new reader is refused, the old ones keep their hold.
        assert_eq!(m.read("r3", 100, 20), RwReply::WriterWaiting);
        m.release(&"r1");
        m.release(&"r2");
        assert_eq!(m.write("w", &"w", 100, 50, 30), RwReply::Granted);
        assert!(m.waiting.is_empty());
        assert_eq!(m.read("r3", 100, 40), RwReply::Writer);
        assert_eq!(m.write("w2", &"w2", 100, 50, 40), RwReply::Writer);
        // Expired readers and writers count for nothing.
        assert_eq!(m.read("r4", 100, 130), RwReply::Granted);
        assert_eq!(m.write("w2", &"w2", 100, 50, 231), RwReply::Granted);
    }

    #[test]
    fn a_waiting_writer_that_leaves_lets_readers_in() {
        let mut m = MasterRw::default();
        m.read("r", 100, 0);
        m.write("w", &"w", 100, 50, 0);
        assert_eq!(m.read("r2", 100, 1), RwReply::WriterWaiting);
        m.leave(&"w");
        assert_eq!(m.read("r2", 100, 1), RwReply::Granted);
    }

    #[test]
    fn fenced_write_codes_are_mapped_explicitly() {
        assert_eq!(fenced_write_reply(9), Some(AcquireReply::Granted(9)));
        assert_eq!(fenced_write_reply(-1), Some(AcquireReply::Held));
        // Not "readers", as rw_write.lua's -2 would be: the counter is missing.
        assert_eq!(fenced_write_reply(-2), Some(AcquireReply::Uninitialized));
        assert_eq!(fenced_write_reply(-3), Some(AcquireReply::Regressed));
        assert_eq!(fenced_write_reply(-4), Some(AcquireReply::NewEpoch));
        assert_eq!(fenced_write_reply(-5), Some(AcquireReply::Held));
        assert_eq!(fenced_write_reply(0), None);
        assert_eq!(fenced_write_reply(-6), None);
    }

    #[test]
    fn codes_are_read() {
        for reply in [
            RwReply::Granted,
            RwReply::Writer,
            RwReply::Readers,
            RwReply::WriterWaiting,
        ] {
            let code = match reply {
                RwReply::Granted => 1,
                RwReply::Writer => -1,
                RwReply::Readers => -2,
                RwReply::WriterWaiting => -3,
            };
            assert_eq!(RwReply::from_code(code), Some(reply));
        }
        assert_eq!(RwReply::from_code(0), None);
    }
}
