//! The release verdict: what the masters' answers to a release mean for the holder.
//!
//! A release is counted over all N masters, like the acquire it undoes. A majority that still held
//! our token is a release. Fewer, with enough masters unreachable to make up a majority, cannot be
//! told apart from a release that worked: it is unconfirmed. Fewer than that is a lock that had
//! expired, and the holder must hear it: another holder may have touched the protected data.

use crate::base::error::{NodeErrorKind, NodeFailure, ReleaseError, Released};

use super::timing::quorum;

/// The answers to releasing one key on a set of masters.
#[derive(Debug, Default)]
pub struct ReleaseTally {
    /// Masters where our token was found and deleted.
    pub held: usize,
    /// Masters that answered, but did not hold our token.
    pub not_held: Vec<NodeFailure>,
    /// Masters that failed to answer, or answered with an error.
    pub errors: Vec<NodeFailure>,
    /// Masters still answering when the release returned (their release goes on in a task).
    pub in_background: usize,
}

/// Turns the answers to a release over `masters` into its outcome: released on a majority;
/// unconfirmed because too many masters were unreachable to tell; or not held, and then why:
/// another holder took it, the holder's own validity had ended (`expired`, known only to a guard),
/// or the key was absent (it expired, or was already released).
///
/// # Errors
/// [`ReleaseError::Unconfirmed`], [`ReleaseError::TakenOver`], [`ReleaseError::Expired`] or
/// [`ReleaseError::Absent`] when fewer than a majority held it, in that order of precedence.
pub fn verdict(
    out: ReleaseTally,
    resource: &str,
    masters: usize,
    expired: bool,
) -> Result<Released, ReleaseError> {
    let required = quorum(masters);
    let unreachable = out
        .errors
        .iter()
        .filter(|f| f.kind != NodeErrorKind::WrongType)
        .count();
    let others = out
        .not_held
        .iter()
        .filter(|f| f.kind == NodeErrorKind::Held)
        .count();
    let absent = out
        .not_held
        .iter()
        .filter(|f| f.kind == NodeErrorKind::Absent)
        .count();
    let held = out.held;
    let mut failures = out.not_held;
    failures.extend(out.errors);
    failures.sort_by_key(|f| f.node);
    if held >= required {
        return Ok(Released {
            held,
            masters,
            failures,
            in_background: out.in_background,
        });
    }
    let resource = resource.to_owned();
    let failures = failures.into();
    Err(if held + unreachable >= required {
        ReleaseError::Unconfirmed {
            resource,
            held,
            required,
            masters,
            failures,
        }
    } else if others > 0 {
        ReleaseError::TakenOver {
            resource,
            held,
            others,
            required,
            masters,
            failures,
        }
    } else if expired {
        ReleaseError::Expired {
            resource,
            held,
            required,
            masters,
            failures,
        }
    } else {
        ReleaseError::Absent {
            resource,
            held,
            absent,
            required,
            masters,
            failures,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn failure(node: usize, kind: NodeErrorKind) -> NodeFailure {
        NodeFailure {
            node,
            addr: format!("m{node}"),
            kind,
        }
    }

    #[test]
    fn a_majority_of_confirmations_is_a_release() {
        let out = ReleaseTally {
            held: 3,
            not_held: vec![failure(4, NodeErrorKind::Absent)],
            errors: vec![failure(1, NodeErrorKind::Timeout)],
            in_background: 1,
        };
        let released = verdict(out, "r", 5, false).expect("released");
        assert_eq!(released.held, 3);
        assert_eq!(
            released.failures.iter().map(|f| f.node).collect::<Vec<_>>(),
            [1, 4]
        );
    }

    #[test]
    fn too_few_holders_with_enough_unreachable_is_unconfirmed() {
        let out = ReleaseTally {
            held: 1,
            not_held: vec![],
            errors: vec![
                failure(1, NodeErrorKind::Timeout),
                failure(2, NodeErrorKind::Connection("refused".into())),
            ],
            in_background: 2,
        };
        let err = verdict(out, "r", 5, false).expect_err("unconfirmed");
        assert!(
            matches!(
                err,
                ReleaseError::Unconfirmed {
                    held: 1,
                    required: 3,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn too_few_holders_that_answered_says_why() {
        let out = || ReleaseTally {
            held: 1,
            not_held: vec![
                failure(0, NodeErrorKind::Absent),
                failure(2, NodeErrorKind::Held),
                failure(3, NodeErrorKind::Absent),
            ],
            errors: vec![failure(4, NodeErrorKind::WrongType)],
            in_background: 0,
        };
        let err = verdict(out(), "r", 5, false).expect_err("taken over");
        assert!(matches!(err, ReleaseError::TakenOver { others: 1, .. }), "{err}");
        assert!(err.is_expired() && err.is_contended(), "{err}");
        let absent = || ReleaseTally {
            held: 0,
            not_held: (0..3).map(|i| failure(i, NodeErrorKind::Absent)).collect(),
            errors: Vec::new(),
            in_background: 0,
        };
        let err = verdict(absent(), "r", 3, false).expect_err("absent");
        assert!(matches!(err, ReleaseError::Absent { absent: 3, .. }), "{err}");
        assert!(err.is_absent() && !err.is_expired(), "{err}");
        assert!(err.to_string().contains("already released"), "{err}");
        let err = verdict(absent(), "r", 3, true).expect_err("expired by the guard's clock");
        assert!(
            matches!(err, ReleaseError::Expired { .. }) && err.is_timeout(),
            "{err}"
        );
    }

    /// Each master's answer to a release, for the properties.
    #[derive(Debug, Clone, Copy)]
    enum Answer {
        Ours,
        Absent,
        Other,
        Unreachable,
        WrongType,
    }

    fn answers() -> impl Strategy<Value = Vec<Answer>> {
        prop::collection::vec(
            prop_oneof![
                Just(Answer::Ours),
                Just(Answer::Absent),
                Just(Answer::Other),
                Just(Answer::Unreachable),
                Just(Answer::WrongType),
            ],
            1..9,
        )
    }

    fn tally(answers: &[Answer]) -> ReleaseTally {
        let mut out = ReleaseTally::default();
        for (node, answer) in answers.iter().enumerate() {
            match answer {
                Answer::Ours => out.held += 1,
                Answer::Absent => out.not_held.push(failure(node, NodeErrorKind::Absent)),
                Answer::Other => out.not_held.push(failure(node, NodeErrorKind::Held)),
                Answer::Unreachable => out.errors.push(failure(node, NodeErrorKind::Timeout)),
                Answer::WrongType => out.errors.push(failure(node, NodeErrorKind::WrongType)),
            }
        }
        out
    }

    proptest! {
        /// A release is reported only with a majority of confirmations; an expiry only when the
        /// masters that answered rule a majority out; every master is accounted for.
        #[test]
        fn the_verdict_never_claims_more_than_the_masters_said(answers in answers(), expired in any::<bool>()) {
            let n = answers.len();
            let held = answers.iter().filter(|a| matches!(a, Answer::Ours)).count();
            let unreachable = answers.iter().filter(|a| matches!(a, Answer::Unreachable)).count();
            let others = answers.iter().filter(|a| matches!(a, Answer::Other)).count();
            match verdict(tally(&answers), "r", n, expired) {
                Ok(released) => {
                    prop_assert!(held >= quorum(n));
                    prop_assert_eq!(released.held + released.failures.len(), n);
                    let nodes: Vec<usize> = released.failures.iter().map(|f| f.node).collect();
                    let mut sorted = nodes.clone();
                    sorted.sort_unstable();
                    prop_assert_eq!(nodes, sorted);
                }
                Err(ReleaseError::Unconfirmed { held: h, .. }) => {
                    prop_assert!(h < quorum(n));
                    prop_assert!(h + unreachable >= quorum(n));
                }
                Err(ReleaseError::TakenOver { held: h, others: o, .. }) => {
                    prop_assert!(h + unreachable < quorum(n));
                    prop_assert!(o > 0 && o == others);
                }
                Err(ReleaseError::Expired { held: h, .. }) => {
                    prop_assert!(h + unreachable < quorum(n));
                    prop_assert!(expired && others == 0);
                }
                Err(ReleaseError::Absent { held: h, .. }) => {
                    prop_assert!(h + unreachable < quorum(n));
                    prop_assert!(!expired && others == 0);
                }
                Err(other) => prop_assert!(false, "unexpected {other}"),
            }
        }
    }
}
