//! The counting semaphore's decisions, pure: what a master's reply to "take slot s" means, which
//! slot to aim at next, and the bounds on the number of permits.
//!
//! A semaphore of `P` permits is `P` ordinary mutual-exclusion locks, its *slots*, each decided by
//! the usual majority. A client aims at one slot per round; every master takes that slot for it if
//! the slot is free there, and otherwise names the first slot it has free (a hint, never a grant).
//! Each slot then has at most one holder, by the plain lock's argument, so there are at most `P`
//! holders, with the plain lock's tolerance of failed masters. The per-master count of permits that
//! other libraries accept at a simple majority admits up to `⌊n·P/q⌋` holders instead; the model
//! in `model.rs` finds that counterexample, and shows the slots never exceed `P` under the same
//! interleavings.

#[cfg(test)]
mod model;

pub use crate::base::error::{NodeErrorKind, PermitsError};

/// The largest number of permits a semaphore may have: a waiter listens for the release of every
/// slot, and a failed round's cleanup names each slot key.
pub const MAX_PERMITS: u32 = 256;

/// Checks a permit count.
pub fn check_permits(permits: u32) -> Result<u32, PermitsError> {
    match permits {
        0 => Err(PermitsError::Zero),
        p if p > MAX_PERMITS => Err(PermitsError::TooMany {
            got: p,
            max: MAX_PERMITS,
        }),
        p => Ok(p),
    }
}

/// One master's answer to "take slot `s` for this token".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotReply {
    /// The master took the slot aimed at: a yes vote.
    Took,
    /// The slot aimed at is held there; this is the first slot it has free.
    Free(u32),
    /// Every slot is held there.
    Full,
}

impl SlotReply {
    /// Reads the acquire script's integer answer: `-1` took the slot, `-2` full, `i >= 0` the first
    /// free slot. `None` for anything else, or a hint outside `0..permits`.
    pub fn from_code(code: i64, permits: u32) -> Option<Self> {
        match code {
            -1 => Some(SlotReply::Took),
            -2 => Some(SlotReply::Full),
            i => u32::try_from(i)
                .ok()
                .filter(|i| *i < permits)
                .map(SlotReply::Free),
        }
    }
}

/// How many rounds one semaphore attempt makes at most, re-aiming at once at a slot the masters
/// named free.
pub const ROUNDS_PER_ATTEMPT: usize = 4;

/// What follows a lost round of a semaphore attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaim {
    /// Another round now, at this slot.
    Again(u32),
    /// The attempt ends; its next one aims at this slot (when the masters named one).
    Stop(Option<u32>),
}

/// After the `rounds`-th round of an attempt, aimed at `slot`, was lost (with an error that
/// `retryable` says waiting may cure), and the masters' hints pointed at `next`: another round at
/// once only at a different slot, within [`ROUNDS_PER_ATTEMPT`], and for an error worth retrying.
pub fn reaim(next: Option<u32>, slot: u32, rounds: usize, retryable: bool) -> Reaim {
    match next {
        Some(next) if next != slot && rounds < ROUNDS_PER_ATTEMPT && retryable => Reaim::Again(next),
        next => Reaim::Stop(next),
    }
}

/// The permits the semaphore's holders count, when a master refused the round because they count
/// another number than the one asked for ([`NodeErrorKind::PermitsMismatch`]); `None` when none
/// did. One such master is enough to name the mismatch: the refusal is not retried, since only
/// the other holders' release (and their permits key's expiry) can end it.
pub fn in_use_elsewhere<'a>(refusals: impl IntoIterator<Item = &'a NodeErrorKind>) -> Option<u32> {
    refusals.into_iter().find_map(|kind| match kind {
        NodeErrorKind::PermitsMismatch { in_use } => Some(*in_use),
        _ => None,
    })
}

/// The slot to aim at in the next round, from the hints of the masters that refused the last one:
/// the slot most of them reported free (the lowest among equals), or `None` when none did (the
/// semaphore is full wherever it answered, so waiting is all that helps).
///
/// Only where to aim depends on this; whether a slot is held never does, so a wrong hint costs a
/// round and never safety.
pub fn aim(hints: &[SlotReply]) -> Option<u32> {
    let mut free: Vec<u32> = hints
        .iter()
        .filter_map(|r| match r {
            SlotReply::Free(i) => Some(*i),
            _ => None,
        })
        .collect();
    free.sort_unstable();
    let mut best: Option<(u32, usize)> = None;
    for run in free.chunk_by(|a, b| a == b) {
        let (slot, count) = (run[0], run.len());
        if best.is_none_or(|(_, c)| count > c) {
            best = Some((slot, count));
        }
    }
    best.map(|(slot, _)| slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// An attempt re-aims only at a slot it has not just tried, within its rounds, for an
        /// error worth another round; it always remembers where the masters pointed.
        #[test]
        fn an_attempt_reaims_within_its_rounds_at_a_new_slot(
            next in proptest::option::of(0u32..4), slot in 0u32..4, rounds in 1usize..8, retryable: bool,
        ) {
            match reaim(next, slot, rounds, retryable) {
                Reaim::Again(at) => {
                    proptest::prop_assert_eq!(Some(at), next);
                    proptest::prop_assert!(at != slot && rounds < ROUNDS_PER_ATTEMPT && retryable);
                }
                Reaim::Stop(at) => {
                    proptest::prop_assert_eq!(at, next);
                    proptest::prop_assert!(next.is_none() || next == Some(slot) || rounds >= ROUNDS_PER_ATTEMPT || !retryable);
                }
            }
        }
    }
    use proptest::prelude::*;

    #[test]
    fn permits_are_checked() {
        assert_eq!(check_permits(0), Err(PermitsError::Zero));
        assert_eq!(check_permits(1), Ok(1));
        assert_eq!(check_permits(MAX_PERMITS), Ok(MAX_PERMITS));
        assert!(matches!(
            check_permits(MAX_PERMITS + 1),
            Err(PermitsError::TooMany { .. })
        ));
    }

    #[test]
    fn replies_are_read_within_the_permits() {
        assert_eq!(SlotReply::from_code(-1, 3), Some(SlotReply::Took));
        assert_eq!(SlotReply::from_code(-2, 3), Some(SlotReply::Full));
        assert_eq!(SlotReply::from_code(2, 3), Some(SlotReply::Free(2)));
        assert_eq!(SlotReply::from_code(3, 3), None);
        assert_eq!(SlotReply::from_code(-3, 3), None);
    }

    #[test]
    fn the_most_reported_free_slot_is_aimed_at() {
        use SlotReply::*;
        assert_eq!(aim(&[Free(2), Free(1), Free(2), Took]), Some(2));
        assert_eq!(aim(&[Free(3), Free(1)]), Some(1));
        assert_eq!(aim(&[Full, Took, Full]), None);
        assert_eq!(aim(&[]), None);
    }

    proptest! {
        /// The aim is always a slot some master reported free, and no slot was reported more often.
        #[test]
        fn the_aim_is_a_reported_free_slot(codes in prop::collection::vec(-2i64..6, 0..9)) {
            let hints: Vec<SlotReply> = codes.iter().filter_map(|c| SlotReply::from_code(*c, 6)).collect();
            let count = |s: u32| hints.iter().filter(|h| **h == SlotReply::Free(s)).count();
            match aim(&hints) {
                Some(slot) => {
                    prop_assert!(count(slot) > 0);
                    prop_assert!((0..6).all(|s| count(s) <= count(slot)));
                }
                None => prop_assert!(hints.iter().all(|h| !matches!(h, SlotReply::Free(_)))),
            }
        }
    }
}
