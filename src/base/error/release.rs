//! What a release reports: the masters that held the lock when it succeeded, and when it did not,
//! why (unconfirmed, taken over, expired, or absent).

use super::{list, Failures, InputError, NodeFailure};

/// What a successful release found.
///
/// A release returns as soon as a majority of masters confirmed it; masters still answering then are
/// released in the background and are not listed here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Released {
    /// On how many masters our token was found and deleted.
    pub held: usize,
    /// How many masters there are.
    pub masters: usize,
    /// Masters that could not be reached or answered with an error (their key expires with its TTL).
    pub failures: Vec<NodeFailure>,
    /// Masters that had not answered when a majority had confirmed: their release goes on in the
    /// background ([`crate::Quorlock::settle`] waits for it). `held + failures + in_background`
    /// makes every master.
    pub in_background: usize,
}

/// Why a release is not a clean success.
///
/// When fewer than a majority of masters still held our token, the error says what is true: our
/// validity had ended by the guard's own clock ([`ReleaseError::Expired`]), another holder's token
/// was found ([`ReleaseError::TakenOver`]), or the key was simply absent: it expired, or it was
/// already released ([`ReleaseError::Absent`]).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ReleaseError {
    /// The resource name or token was refused before anything was sent.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The guard's validity had ended before the release, and fewer than a majority still held
    /// our token: the lock had expired, and another holder may have taken it meanwhile.
    #[error("the lock on {resource:?} had expired before the release (its validity ended; held on {held} of {masters} masters, {required} needed); another holder may have taken it meanwhile{}", list(.failures))]
    Expired {
        /// The resource.
        resource: String,
        /// On how many masters our token was still found.
        held: usize,
        /// How many were needed for the lock to be held.
        required: usize,
        /// How many masters there are.
        masters: usize,
        /// What the others said (the error's source).
        #[source]
        failures: Failures,
    },
    /// Another token holds the key on some masters, and fewer than a majority held ours: our lock
    /// expired and another holder took it.
    #[error("the lock on {resource:?} was taken over: another holder has it on {others} of {masters} masters and ours was left on {held}, {required} needed; the protected data may have been touched by another holder{}", list(.failures))]
    TakenOver {
        /// The resource.
        resource: String,
        /// On how many masters our token was still found.
        held: usize,
        /// On how many masters another token was found.
        others: usize,
        /// How many were needed for the lock to be held.
        required: usize,
        /// How many masters there are.
        masters: usize,
        /// What the others said (the error's source).
        #[source]
        failures: Failures,
    },
    /// Fewer than a majority held our token and none held another: the key was absent. The lock
    /// expired, or it had already been released.
    #[error("the lock on {resource:?} was not held: the key was absent on {absent} of {masters} masters and ours was left on {held}, {required} needed (it expired, or was already released){}", list(.failures))]
    Absent {
        /// The resource.
        resource: String,
        /// On how many masters our token was still found.
        held: usize,
        /// On how many masters the key was absent.
        absent: usize,
        /// How many were needed for the lock to be held.
        required: usize,
        /// How many masters there are.
        masters: usize,
        /// What the others said (the error's source).
        #[source]
        failures: Failures,
    },
    /// Too many masters failed to answer to tell whether the lock was still held; their keys expire
    /// with the TTL.
    #[error("release of {resource:?} unconfirmed: held on {held} of {masters} masters, {required} needed, the rest unreachable{}", list(.failures))]
    Unconfirmed {
        /// The resource.
        resource: String,
        /// On how many masters our token was found and deleted.
        held: usize,
        /// How many were needed to confirm.
        required: usize,
        /// How many masters there are.
        masters: usize,
        /// What the others said (the error's source).
        #[source]
        failures: Failures,
    },
}

impl ReleaseError {
    /// Whether the lock had expired while it was held, so the protected data may have been touched
    /// by another holder: its validity had ended ([`ReleaseError::Expired`]), or another holder
    /// took it ([`ReleaseError::TakenOver`]).
    pub fn is_expired(&self) -> bool {
        matches!(
            self,
            ReleaseError::Expired { .. } | ReleaseError::TakenOver { .. }
        )
    }

    /// Whether the key was simply absent: expired, or already released ([`ReleaseError::Absent`]).
    pub fn is_absent(&self) -> bool {
        matches!(self, ReleaseError::Absent { .. })
    }

    /// Whether another holder has the lock ([`ReleaseError::TakenOver`]).
    pub fn is_contended(&self) -> bool {
        matches!(self, ReleaseError::TakenOver { .. })
    }

    /// Whether too few masters answered to tell ([`ReleaseError::Unconfirmed`]).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, ReleaseError::Unconfirmed { .. })
    }

    /// Whether the lock's validity ran out before the release ([`ReleaseError::Expired`]).
    pub fn is_timeout(&self) -> bool {
        matches!(self, ReleaseError::Expired { .. })
    }

    /// The per-master failures, if any.
    pub fn failures(&self) -> &[NodeFailure] {
        match self {
            ReleaseError::Input(_) => &[],
            ReleaseError::Expired { failures, .. }
            | ReleaseError::TakenOver { failures, .. }
            | ReleaseError::Absent { failures, .. }
            | ReleaseError::Unconfirmed { failures, .. } => failures,
        }
    }
}
