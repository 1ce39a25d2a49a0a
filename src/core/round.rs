//! What a round that did not win tells its caller: too slow, or which masters said no and why.
//!
//! The tally decides; this turns its decision and the masters' reasons into the error a caller
//! can act on, with the failures in the masters' order so the message reads the same every time.

use std::time::Duration;

use crate::base::error::{AcquireError, ExtendError, NodeFailure};

use super::tally::{Decision, Failure, Tally};
use super::timing::Timing;

/// The error of a round for `resource` that did not win (`decision` is not `Acquired`), `elapsed`
/// after it started: too slow, or no majority, with the tally's counts and each master's failure.
pub fn round_error(
    resource: &str,
    tally: &Tally,
    decision: Decision,
    elapsed: Duration,
    timing: Timing,
    mut failures: Vec<NodeFailure>,
) -> AcquireError {
    if matches!(decision, Decision::Failed(Failure::TooSlow)) {
        return AcquireError::TooSlow {
            resource: resource.to_owned(),
            elapsed,
            ttl: timing.ttl(),
        };
    }
    failures.sort_by_key(|f| f.node);
    AcquireError::NoQuorum {
        resource: resource.to_owned(),
        acquired: tally.yes(),
        required: tally.required(),
        masters: tally.masters(),
        failures: failures.into(),
    }
}

/// The error of an extend of `resource` that did not reach a majority: how many masters
/// extended it, of how many needed, and each other master's failure, in the masters' order.
pub fn extend_error(resource: &str, tally: &Tally, mut failures: Vec<NodeFailure>) -> ExtendError {
    failures.sort_by_key(|f| f.node);
    ExtendError::Lost {
        resource: resource.to_owned(),
        extended: tally.yes(),
        required: tally.required(),
        masters: tally.masters(),
        failures: failures.into(),
    }
}

/// Retryability is a decision, so it lives here with the round's other rules (and the error
/// module needs nothing from the core).
impl AcquireError {
    /// Whether trying again later may succeed (contention, a master down, a slow round).
    ///
    /// Not when so many masters failed permanently (rejected credentials, a key of another type)
    /// that a majority can never grant the lock.
    pub fn is_retryable(&self) -> bool {
        match self {
            AcquireError::NoQuorum {
                failures,
                masters,
                required,
                ..
            }
            | AcquireError::Conflict {
                failures,
                masters,
                required,
                ..
            } => {
                let permanent = failures.iter().filter(|f| f.kind.is_permanent()).count();
                still_winnable(*masters, permanent, *required)
            }
            AcquireError::TooSlow { .. } | AcquireError::Exhausted { .. } | AcquireError::Queued { .. } => {
                true
            }
            AcquireError::Input(_) | AcquireError::Rng(_) | AcquireError::PermitsMismatch { .. } => false,
        }
    }
}

/// Whether a round over `masters` masters, `permanent` of which failed for good (rejected
/// credentials, a key of another type), can still be won later: enough masters are left for the
/// `required` majority.
pub fn still_winnable(masters: usize, permanent: usize, required: usize) -> bool {
    masters.saturating_sub(permanent) >= required
}

/// Two positions of the masters' list that answered with the same `run_id`: one server under two
/// names (a host name and an address), which would vote twice. `ids` holds each master's `run_id`
/// where it is known; the first such pair is returned, lowest positions first.
pub fn same_server_twice(ids: &[Option<String>]) -> Option<(usize, usize)> {
    for (second, id) in ids.iter().enumerate() {
        let Some(id) = id else { continue };
        if let Some(first) = ids
            .iter()
            .take(second)
            .position(|other| other.as_ref() == Some(id))
        {
            return Some((first, second));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::error::NodeErrorKind;
    use proptest::prelude::*;
    use std::time::Instant;

    fn timing() -> Timing {
        Timing::new(Duration::from_secs(1), 0.01, Duration::ZERO).expect("valid timing")
    }

    #[test]
    fn a_slow_round_says_so_and_a_refused_one_lists_its_masters_in_order() {
        let t0 = Instant::now();
        let mut tally = Tally::new(3, timing(), t0);
        tally.handle_reply(0, super::super::Vote::Yes, t0);
        let failures = vec![
            NodeFailure {
                node: 2,
                addr: "c".into(),
                kind: NodeErrorKind::Timeout,
            },
            NodeFailure {
                node: 1,
                addr: "b".into(),
                kind: NodeErrorKind::Held,
            },
        ];
        let err = round_error(
            "r",
            &tally,
            Decision::Failed(Failure::NoQuorum),
            Duration::from_millis(3),
            timing(),
            failures,
        );
        let AcquireError::NoQuorum {
            acquired,
            required,
            masters,
            failures,
            ..
        } = err
        else {
            panic!("expected NoQuorum, got {err:?}");
        };
        assert_eq!((acquired, required, masters), (1, 2, 3));
        assert_eq!(failures.iter().map(|f| f.node).collect::<Vec<_>>(), [1, 2]);
        let slow = round_error(
            "r",
            &tally,
            Decision::Failed(Failure::TooSlow),
            Duration::from_secs(2),
            timing(),
            Vec::new(),
        );
        assert!(matches!(slow, AcquireError::TooSlow { elapsed, .. } if elapsed == Duration::from_secs(2)));
    }

    #[test]
    fn one_server_under_two_names_is_found() {
        let ids = |v: &[Option<&str>]| v.iter().map(|s| s.map(str::to_owned)).collect::<Vec<_>>();
        assert_eq!(same_server_twice(&ids(&[Some("a"), Some("b"), Some("c")])), None);
        assert_eq!(
            same_server_twice(&ids(&[Some("a"), None, Some("a")])),
            Some((0, 2))
        );
        assert_eq!(
            same_server_twice(&ids(&[None, None])),
            None,
            "unknown ids are never equal"
        );
        assert_eq!(
            same_server_twice(&ids(&[Some("x"), Some("y"), Some("y"), Some("x")])),
            Some((1, 2)),
            "the first pair found from the start"
        );
    }

    proptest! {
        /// The check finds a pair exactly when two known ids are equal.
        #[test]
        fn a_pair_is_found_exactly_when_two_known_ids_match(ids in prop::collection::vec(prop::option::of(0u8..4), 0..8)) {
            let text: Vec<Option<String>> = ids.iter().map(|i| i.map(|i| i.to_string())).collect();
            let duplicate = ids.iter().enumerate().any(|(i, a)| {
                a.is_some() && ids.iter().skip(i + 1).any(|b| b == a)
            });
            match same_server_twice(&text) {
                Some((first, second)) => {
                    prop_assert!(first < second);
                    prop_assert!(text[first].is_some());
                    prop_assert_eq!(&text[first], &text[second]);
                }
                None => prop_assert!(!duplicate),
            }
        }

        /// A refused round is retried exactly when the masters that did not fail for good can
        /// still make the majority; a slow round always is.
        #[test]
        fn a_round_is_retried_exactly_when_a_majority_can_still_grant_it(
            masters in 1usize..8,
            kinds in prop::collection::vec(0u8..4, 0..8),
        ) {
            let required = crate::core::quorum(masters);
            let failures: Vec<NodeFailure> = kinds
                .iter()
                .take(masters)
                .enumerate()
                .map(|(node, k)| NodeFailure {
                    node,
                    addr: format!("m{node}:6379"),
                    kind: match k {
                        0 => NodeErrorKind::WrongType,
                        1 => NodeErrorKind::Held,
                        2 => NodeErrorKind::Timeout,
                        _ => NodeErrorKind::Auth("denied".into()),
                    },
                })
                .collect();
            let permanent = failures.iter().filter(|f| f.kind.is_permanent()).count();
            let error = AcquireError::NoQuorum {
                resource: "r".into(),
                acquired: 0,
                required,
                masters,
                failures: failures.into(),
            };
            prop_assert_eq!(error.is_retryable(), masters - permanent >= required);
            let slow = AcquireError::TooSlow {
                resource: "r".into(),
                elapsed: Duration::from_millis(5),
                ttl: Duration::from_millis(10),
            };
            prop_assert!(slow.is_retryable());
        }
    }
}
