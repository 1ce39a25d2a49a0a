//! The expiry majority: when a held lock will be free on a majority of masters, from their PTTLs.
//!
//! A waiter that hears no release announcement (the holder crashed, or announcements are lost)
//! need not poll: the lock is free once a majority of masters has expired the key. Each master's
//! PTTL says when it will; the majority's moment is the q-th smallest of them.

use std::time::Duration;

use super::timing::quorum;

/// One master's answer to `PTTL key`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pttl {
    /// The key expires in this many milliseconds (`-2`, no key, is 0: free now).
    Expires(u64),
    /// The key has no expiry (`-1`): not a lock whose end can be predicted.
    Persistent,
    /// No usable answer (an error, or not a number).
    Unknown,
}

impl Pttl {
    /// Reads the integer `PTTL` answered.
    pub fn from_reply(ms: i64) -> Self {
        match ms {
            -2 => Pttl::Expires(0),
            -1 => Pttl::Persistent,
            ms => u64::try_from(ms).map_or(Pttl::Unknown, Pttl::Expires),
        }
    }
}

/// How long until a majority of `masters` no longer hold the key, from the answers given; `None`
/// when too few masters gave a usable answer.
pub fn free_in(answers: impl IntoIterator<Item = Pttl>, masters: usize) -> Option<Duration> {
    let mut known: Vec<u64> = answers
        .into_iter()
        .filter_map(|a| match a {
            Pttl::Expires(ms) => Some(ms),
            _ => None,
        })
        .collect();
    known.sort_unstable();
    known
        .get(quorum(masters).saturating_sub(1))
        .map(|ms| Duration::from_millis(*ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_majority_expiry_is_the_quorum_th_smallest() {
        let answers = [5_000, 100, -2, 700, -1].map(Pttl::from_reply);
        assert_eq!(free_in(answers, 5), Some(Duration::from_millis(700)));
        assert_eq!(
            free_in([Pttl::Expires(10), Pttl::Unknown, Pttl::Persistent], 3),
            None,
            "two of three gave nothing usable"
        );
        assert_eq!(Pttl::from_reply(-7), Pttl::Unknown);
    }

    proptest! {
        /// At the moment returned, a majority of the masters have expired the key, and no earlier
        /// moment has that property.
        #[test]
        fn a_majority_is_free_at_the_returned_moment_and_not_before(
            ms in prop::collection::vec(prop::option::of(0u64..10_000), 1..9)
        ) {
            let n = ms.len();
            let answers: Vec<Pttl> = ms.iter().map(|m| m.map_or(Pttl::Unknown, Pttl::Expires)).collect();
            let q = quorum(n);
            match free_in(answers, n) {
                Some(at) => {
                    let at = u64::try_from(at.as_millis()).unwrap_or(u64::MAX);
                    let free = ms.iter().flatten().filter(|m| **m <= at).count();
                    prop_assert!(free >= q);
                    let before = ms.iter().flatten().filter(|m| at > 0 && **m < at).count();
                    prop_assert!(at == 0 || before < q);
                }
                None => prop_assert!(ms.iter().flatten().count() < q),
            }
        }
    }
}
