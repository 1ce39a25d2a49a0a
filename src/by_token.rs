//! Releasing a lock by its resource and token, without the [`Guard`](crate::Guard) that took it.
//!
//! A lock taken by one process may have to be released by another: a shell script takes the lock in
//! one step (`quorlock acquire` prints the token) and releases it in a later one. The token is the
//! only proof of ownership, so whoever has it can release the lock; the release is the same
//! compare-and-delete a guard sends, counted over all N masters with the same honest verdict.

use tracing::{field, instrument, Span};

use crate::coordinator::{Quorlock, ReleaseTally};
use crate::core::quorum;
use crate::error::{InputError, NodeErrorKind, ReleaseError, Released};
use crate::ops::PlainLock;

impl Quorlock {
    /// Releases the lock on `resource` held under `token` on all N masters, as
    /// [`Guard::release`](crate::Guard::release) would, and reports how many still held it.
    ///
    /// Only the holder of `token` can release: a lock held under another token is left alone.
    ///
    /// # Errors
    /// [`ReleaseError::Input`] for an empty resource or token (nothing is sent);
    /// [`ReleaseError::Expired`] when fewer than a majority held `token`: the lock had expired (or
    /// never was taken with this token), and another holder may have touched the protected data;
    /// [`ReleaseError::Unconfirmed`] when too many masters were unreachable to tell (their keys
    /// expire with the TTL).
    #[instrument(skip_all, fields(resource = %resource, held = field::Empty))]
    pub async fn release_token(&self, resource: &str, token: &str) -> Result<Released, ReleaseError> {
        if resource.is_empty() {
            return Err(InputError::EmptyResource.into());
        }
        if token.is_empty() {
            return Err(InputError::EmptyToken.into());
        }
        let key = self.inner.key(resource);
        let ops = PlainLock::new(&key, token);
        let out = self.inner.release_all(&ops, || {}).await;
        Span::current().record("held", out.held);
        verdict(out, resource, self.inner.nodes.len())
    }
}

/// Turns the answers to a release into its outcome: released on a majority, known expired, or
/// unconfirmed because too many masters were unreachable to tell.
pub(crate) fn verdict(out: ReleaseTally, resource: &str, masters: usize) -> Result<Released, ReleaseError> {
    let required = quorum(masters);
    let unreachable = out
        .errors
        .iter()
        .filter(|f| f.kind != NodeErrorKind::WrongType)
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
        });
    }
    let resource = resource.to_owned();
    if held + unreachable >= required {
        Err(ReleaseError::Unconfirmed {
            resource,
            held,
            required,
            masters,
            failures,
        })
    } else {
        Err(ReleaseError::Expired {
            resource,
            held,
            required,
            masters,
            failures,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::NodeFailure;

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
        };
        let released = verdict(out, "r", 5).expect("released");
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
        };
        let err = verdict(out, "r", 5).expect_err("unconfirmed");
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
    fn too_few_holders_that_answered_is_expired() {
        let out = ReleaseTally {
            held: 1,
            not_held: vec![
                failure(0, NodeErrorKind::Absent),
                failure(2, NodeErrorKind::Held),
                failure(3, NodeErrorKind::Absent),
            ],
            errors: vec![failure(4, NodeErrorKind::WrongType)],
        };
        let err = verdict(out, "r", 5).expect_err("expired");
        assert!(err.is_expired(), "{err}");
    }
}
