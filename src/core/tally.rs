//! The acquisition tally: replies from masters go in, a decision comes out as early as it is certain.
//!
//! One round of acquire (or extend) asks every master once. The tally records each master's vote and
//! decides:
//! - `Acquired` with the very reply that brings the yes votes to a majority, as long as the validity
//!   left at that moment is above the configured minimum;
//! - `Failed` with the very reply that makes a majority unreachable, or as soon as the validity can no
//!   longer be above the minimum (time alone decides that, see [`Tally::poll`]).
//!
//! Once made, a decision never changes. Late replies are still recorded, so the caller knows which
//! masters may hold a key that needs releasing.

use std::time::{Duration, Instant};

use super::timing::{quorum, Timing};

/// One master's answer to a request in this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vote {
    /// The master granted (acquire) or confirmed (extend) the lock for our token.
    Yes,
    /// The master refused, errored, or did not answer in time.
    No,
}

/// Why a round failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// So many masters said no that a majority can no longer say yes.
    NoQuorum,
    /// The round took so long that the validity left would be at or below the minimum.
    TooSlow,
}

/// The state of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Not certain yet: more replies (or more time) are needed.
    Pending,
    /// A majority said yes in time.
    Acquired {
        /// The validity left when the decision was made.
        validity: Duration,
        /// The monotonic instant the lock stops being valid.
        valid_until: Instant,
    },
    /// The round cannot succeed.
    Failed(Failure),
}

impl Decision {
    /// Whether the decision is final (anything but `Pending`).
    pub fn is_final(&self) -> bool {
        !matches!(self, Decision::Pending)
    }
}

/// The vote count of one round over `n` masters.
#[derive(Debug, Clone)]
pub struct Tally {
    timing: Timing,
    started: Instant,
    votes: Vec<Option<Vote>>,
    yes: usize,
    no: usize,
    decision: Decision,
}

impl Tally {
    /// Starts a round over `n` masters at `started`.
    ///
    /// With `n == 0` the round has failed from the start (no majority exists).
    pub fn new(n: usize, timing: Timing, started: Instant) -> Self {
        let decision = if n == 0 {
            Decision::Failed(Failure::NoQuorum)
        } else {
            Decision::Pending
        };
        Self {
            timing,
            started,
            votes: vec![None; n],
            yes: 0,
            no: 0,
            decision,
        }
    }

    /// The number of masters in the round.
    pub fn masters(&self) -> usize {
        self.votes.len()
    }

    /// The number of yes votes needed.
    pub fn required(&self) -> usize {
        quorum(self.votes.len())
    }

    /// The yes votes so far.
    pub fn yes(&self) -> usize {
        self.yes
    }

    /// The no votes so far.
    pub fn no(&self) -> usize {
        self.no
    }

    /// The vote of master `node`, if it has replied.
    pub fn vote(&self, node: usize) -> Option<Vote> {
        self.votes.get(node).copied().flatten()
    }

    /// The decision as it stands.
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// The instant after which the round can no longer be `Acquired`: when the validity left would
    /// fall to the configured minimum.
    pub fn deadline(&self) -> Instant {
        let usable = self
            .timing
            .ttl()
            .saturating_sub(self.timing.drift())
            .saturating_sub(self.timing.min_validity());
        self.started.checked_add(usable).unwrap_or(self.started)
    }

    /// Records master `node`'s reply received at `now` and returns the decision.
    ///
    /// A second reply from the same master, or one from a master outside the round, is ignored.
    pub fn handle_reply(&mut self, node: usize, vote: Vote, now: Instant) -> Decision {
        let Some(slot) = self.votes.get_mut(node) else {
            return self.decision;
        };
        if slot.is_some() {
            return self.decision;
        }
        *slot = Some(vote);
        match vote {
            Vote::Yes => self.yes += 1,
            Vote::No => self.no += 1,
        }
        if self.decision.is_final() {
            return self.decision;
        }
        let n = self.votes.len();
        let required = quorum(n);
        if self.yes >= required {
            self.decision = match (
                self.timing.validity_at(self.started, now),
                self.timing.valid_until(self.started),
            ) {
                (Some(validity), Some(valid_until)) => Decision::Acquired {
                    validity,
                    valid_until,
                },
                _ => Decision::Failed(Failure::TooSlow),
            };
        } else if n - self.no < required {
            self.decision = Decision::Failed(Failure::NoQuorum);
        } else {
            self.poll(now);
        }
        self.decision
    }

    /// Lets time decide: a pending round whose validity at `now` is no longer above the minimum fails.
    pub fn poll(&mut self, now: Instant) -> Decision {
        if self.decision == Decision::Pending && self.timing.validity_at(self.started, now).is_none() {
            self.decision = Decision::Failed(Failure::TooSlow);
        }
        self.decision
    }

    /// Decides a round with no reply left to wait for (every request has ended): whatever time
    /// says, and a round still undecided then is lost for want of a majority. (Every master's
    /// answer decides a round on its own, so this only closes what requests that ended without a
    /// reply left open.)
    pub fn all_answered(&mut self, now: Instant) -> Decision {
        if self.poll(now) == Decision::Pending {
            self.decision = Decision::Failed(Failure::NoQuorum);
        }
        self.decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn timing(ttl_ms: u64) -> Timing {
        Timing::new(Duration::from_millis(ttl_ms), 0.01, Duration::ZERO).expect("valid timing")
    }

    #[test]
    fn a_round_with_nothing_left_to_wait_for_is_decided() {
        let t0 = Instant::now();
        let mut tally = Tally::new(3, timing(10_000), t0);
        tally.handle_reply(0, Vote::Yes, t0);
        // The other two requests ended without a reply (dropped): no majority.
        assert_eq!(tally.all_answered(t0), Decision::Failed(Failure::NoQuorum));
        let mut tally = Tally::new(3, timing(10_000), t0);
        tally.handle_reply(0, Vote::Yes, t0);
        tally.handle_reply(1, Vote::Yes, t0);
        assert!(matches!(tally.all_answered(t0), Decision::Acquired { .. }));
    }

    #[test]
    fn three_of_five_acquire_on_the_third_yes() {
        let t0 = Instant::now();
        let mut tally = Tally::new(5, timing(10_000), t0);
        assert_eq!(tally.handle_reply(0, Vote::Yes, t0), Decision::Pending);
        assert_eq!(tally.handle_reply(1, Vote::No, t0), Decision::Pending);
        assert_eq!(tally.handle_reply(2, Vote::Yes, t0), Decision::Pending);
        let d = tally.handle_reply(4, Vote::Yes, t0 + Duration::from_millis(5));
        match d {
            Decision::Acquired {
                validity,
                valid_until,
            } => {
                assert_eq!(validity, Duration::from_millis(10_000 - 102 - 5));
                assert_eq!(valid_until, t0 + Duration::from_millis(10_000 - 102));
            }
            other => panic!("expected Acquired, got {other:?}"),
        }
    }

    #[test]
    fn fails_as_soon_as_a_majority_is_out_of_reach() {
        let t0 = Instant::now();
        let mut tally = Tally::new(5, timing(10_000), t0);
        assert_eq!(tally.handle_reply(0, Vote::No, t0), Decision::Pending);
        assert_eq!(tally.handle_reply(1, Vote::No, t0), Decision::Pending);
        assert_eq!(
            tally.handle_reply(2, Vote::No, t0),
            Decision::Failed(Failure::NoQuorum)
        );
        // Late yes votes are recorded but change nothing.
        assert_eq!(
            tally.handle_reply(3, Vote::Yes, t0),
            Decision::Failed(Failure::NoQuorum)
        );
        assert_eq!(tally.yes(), 1);
    }

    #[test]
    fn majority_after_the_validity_ran_out_is_a_failure() {
        let t0 = Instant::now();
        let mut tally = Tally::new(3, timing(100), t0);
        tally.handle_reply(0, Vote::Yes, t0);
        // ttl 100 ms, drift 3 ms: at 97 ms nothing is left.
        let late = t0 + Duration::from_millis(97);
        assert_eq!(
            tally.handle_reply(1, Vote::Yes, late),
            Decision::Failed(Failure::TooSlow)
        );
    }

    #[test]
    fn time_alone_fails_a_pending_round() {
        let t0 = Instant::now();
        let mut tally = Tally::new(3, timing(100), t0);
        assert_eq!(tally.poll(t0 + Duration::from_millis(50)), Decision::Pending);
        assert_eq!(tally.deadline(), t0 + Duration::from_millis(97));
        assert_eq!(tally.poll(tally.deadline()), Decision::Failed(Failure::TooSlow));
    }

    #[test]
    fn zero_masters_fail_at_once_and_duplicates_are_ignored() {
        let t0 = Instant::now();
        assert_eq!(
            Tally::new(0, timing(100), t0).decision(),
            Decision::Failed(Failure::NoQuorum)
        );
        let mut tally = Tally::new(3, timing(1000), t0);
        tally.handle_reply(0, Vote::Yes, t0);
        assert_eq!(tally.handle_reply(0, Vote::Yes, t0), Decision::Pending);
        assert_eq!(tally.handle_reply(7, Vote::Yes, t0), Decision::Pending);
        assert_eq!(tally.yes(), 1);
    }

    /// A round's replies: (master, vote, arrival offset in ms), in arrival order.
    fn replies() -> impl Strategy<Value = (usize, u64, f64, Vec<(usize, bool, u64)>)> {
        (1usize..10, 1u64..5_000, 0.0f64..0.2).prop_flat_map(|(n, ttl, factor)| {
            let reply = (0..n, any::<bool>(), 0u64..6_000);
            (
                Just(n),
                Just(ttl),
                Just(factor),
                proptest::collection::vec(reply, 0..3 * n),
            )
        })
    }

    proptest! {
        /// Never Acquired without a majority of distinct yes votes, and Acquired only with validity left.
        #[test]
        fn never_acquired_without_a_majority((n, ttl, factor, rs) in replies()) {
            let Ok(timing) = Timing::new(Duration::from_millis(ttl), factor, Duration::ZERO) else { return Ok(()) };
            let t0 = Instant::now();
            let mut tally = Tally::new(n, timing, t0);
            let mut seen = vec![None; n];
            let mut now_ms = 0;
            for (node, yes, dt) in rs {
                now_ms = now_ms.max(dt);
                let vote = if yes { Vote::Yes } else { Vote::No };
                let before = tally.decision();
                let d = tally.handle_reply(node, vote, t0 + Duration::from_millis(now_ms));
                if seen[node].is_none() { seen[node] = Some(yes); }
                let distinct_yes = seen.iter().filter(|v| **v == Some(true)).count();
                if let Decision::Acquired { validity, .. } = d {
                    prop_assert!(distinct_yes >= quorum(n));
                    prop_assert!(validity <= timing.ttl());
                    prop_assert!(!validity.is_zero());
                }
                if before.is_final() { prop_assert_eq!(d, before, "a final decision changed"); }
            }
        }

        /// The decision arrives with the first reply that makes it certain: before that reply the round
        /// is pending, and right after it the round is decided.
        #[test]
        fn decides_with_the_first_certain_reply((n, ttl, factor, rs) in replies()) {
            let Ok(timing) = Timing::new(Duration::from_millis(ttl), factor, Duration::ZERO) else { return Ok(()) };
            let t0 = Instant::now();
            let mut tally = Tally::new(n, timing, t0);
            let q = quorum(n);
            let (mut yes, mut no) = (0usize, 0usize);
            let mut seen = vec![false; n];
            let mut now_ms = 0;
            for (node, is_yes, dt) in rs {
                now_ms = now_ms.max(dt);
                let now = t0 + Duration::from_millis(now_ms);
                let before = tally.decision();
                let d = tally.handle_reply(node, if is_yes { Vote::Yes } else { Vote::No }, now);
                if seen[node] || before.is_final() { continue; }
                seen[node] = true;
                if is_yes { yes += 1 } else { no += 1 }
                let expired = timing.validity_at(t0, now).is_none();
                // Certain once a majority said yes, a majority is out of reach, or time ran out.
                let certain = yes >= q || n - no < q || expired;
                prop_assert_eq!(d.is_final(), certain, "yes={} no={} n={} expired={} d={:?}", yes, no, n, expired, d);
            }
        }
    }
}
