//! Out of model, for the negative controls of the deterministic simulation only: the mechanisms of
//! the library that a test may take out, one at a time, to show that the checks which stand for
//! them fail without them.
//!
//! A safety claim is only as good as the check that would catch its violation, and a check is only
//! shown to work when it fails on a client that lacks the mechanism. So each mechanism named here
//! has a control in the simulation that removes it alone, and that control must be caught by its
//! own check. Nothing but `QuorlockBuilder::unsafe_without_for_tests` (with the `seam` feature)
//! can remove one; with none removed, which is always so outside those tests, nothing changes.

/// A mechanism a negative control removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(not(feature = "seam"), allow(dead_code))]
#[non_exhaustive]
pub enum Mechanism {
    /// The drift allowance: a lock's validity is `ttl - elapsed`, as if every clock ran at one rate.
    DriftAllowance,
    /// The fair lock's queue check: a fair acquire takes a free lock ahead of earlier waiters.
    FairQueue,
    /// The rule for a server that is not the one that granted: a replica promoted behind the
    /// master's address counts as if nothing lagged, and a master found without its record (a
    /// server put behind the address, or one that lost its data) as a fresh deployment.
    ReplacedMaster,
    /// The durability-over-time rule: a restart is judged on what the new incarnation reports
    /// alone, forgetting that a check of the previous one found it persisting less than every write.
    DurabilityOverTime,
    /// The semaphore's permits check: holders that count different numbers of permits on the same
    /// name never see each other's count (each reads a permits key of its own).
    SemaphorePermits,
    /// The readers check of the fenced write: a fenced writer reads an empty set of readers, so it
    /// takes the lock beside unexpired readers.
    FencedWriteReaders,
    /// The epoch check of the fenced rounds and of the repair's read: a master's fencing counter
    /// counts as vouched for by whatever epoch it holds, so a master that restarted having lost
    /// its last increments votes with what it kept.
    FenceEpoch,
    /// The key check of the fenced commit: round 2 raises the counter and counts as a yes whether
    /// or not the master still holds this acquisition's key.
    FenceCommitKey,
    /// The plain lock's hand-off queue: a waiting process never queues for the key, so every
    /// release is announced to every waiting process, and each of them retries (the herd). Not a
    /// safety mechanism: its control is the herd's cost, which the hand-off's bound must catch.
    HandOffQueue,
}

/// The mechanisms one client was built without: none, except in a negative control.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Removed(u16);

impl Removed {
    /// This set with `mechanism` removed too.
    #[cfg_attr(not(feature = "seam"), allow(dead_code))]
    pub(crate) fn with(self, mechanism: Mechanism) -> Removed {
        Removed(self.0 | Self::bit(mechanism))
    }

    /// Whether `mechanism` was removed.
    pub(crate) fn has(self, mechanism: Mechanism) -> bool {
        self.0 & Self::bit(mechanism) != 0
    }

    fn bit(mechanism: Mechanism) -> u16 {
        1 << (mechanism as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_removed_by_default_and_each_removal_is_its_own() {
        let all = [
            Mechanism::DriftAllowance,
            Mechanism::FairQueue,
            Mechanism::ReplacedMaster,
            Mechanism::DurabilityOverTime,
            Mechanism::SemaphorePermits,
            Mechanism::FencedWriteReaders,
            Mechanism::FenceEpoch,
            Mechanism::FenceCommitKey,
            Mechanism::HandOffQueue,
        ];
        for m in all {
            assert!(!Removed::default().has(m));
            let one = Removed::default().with(m);
            for other in all {
                assert_eq!(one.has(other), other == m, "{m:?} / {other:?}");
            }
        }
    }
}
