//! Typed errors, one enum per operation, each carrying the data a caller needs to act on it.
//!
//! Every message names the bad value. Master addresses appear as `host:port` only: a password from a
//! URL never reaches an error, a log line or `Debug` output.

use std::fmt;
use std::time::Duration;

mod node;
mod release;

pub(crate) use node::{classify, describe, list, redact_url};
pub use node::{Detail, Failures, NodeErrorKind, NodeFailure};
pub use release::{ReleaseError, Released};

/// A measured duration as people read it, to about three digits: `9.94s`, `250ms`, `2.5ms`, `800µs`
/// (`Debug` would print every digit of the nanoseconds a clock gave).
pub(crate) struct Elapsed(pub(crate) Duration);

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Each unit from where the one below would round up to four digits.
        let secs = self.0.as_secs_f64();
        if secs >= 99.95 {
            write!(f, "{secs:.0}s")
        } else if secs >= 9.995 {
            write!(f, "{secs:.1}s")
        } else if secs >= 0.9995 {
            write!(f, "{secs:.2}s")
        } else if secs >= 0.00995 {
            write!(f, "{:.0}ms", secs * 1e3)
        } else if secs >= 0.0009995 {
            write!(f, "{:.1}ms", secs * 1e3)
        } else {
            write!(f, "{}µs", self.0.as_micros())
        }
    }
}

/// Why a semaphore's permit count is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PermitsError {
    /// Zero permits could never be held.
    #[error("a semaphore needs at least one permit (got 0)")]
    Zero,
    /// More than the largest number of permits a semaphore may have.
    #[error("a semaphore may have at most {max} permits (got {got})")]
    TooMany {
        /// The permits asked for.
        got: u32,
        /// The largest number accepted.
        max: u32,
    },
}

/// Why a set of timing parameters cannot describe a lock.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TimingError {
    /// The TTL is zero.
    #[error("the TTL must be greater than zero")]
    ZeroTtl,
    /// The drift factor is not a finite number in `[0, 1)`.
    #[error("drift factor {0} is not a finite number in [0, 1)")]
    DriftFactor(f64),
    /// The TTL leaves no validity once the drift allowance is taken off.
    #[error("TTL {ttl:?} is not longer than its drift allowance {drift:?} plus the minimum validity {min_validity:?}")]
    TtlBelowDrift {
        /// The TTL asked for.
        ttl: Duration,
        /// The drift allowance computed for it.
        drift: Duration,
        /// The configured minimum validity.
        min_validity: Duration,
    },
}

/// Why a backoff configuration is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackoffError {
    /// The jitter is wider than the delay it spreads, so the delay could go negative.
    #[error(
        "retry jitter {jitter:?} is larger than the retry delay {delay:?} (a zero delay cannot take jitter)"
    )]
    JitterExceedsDelay {
        /// The configured base delay.
        delay: Duration,
        /// The configured jitter.
        jitter: Duration,
    },
}

/// A count of attempts, as people read it: `1 attempt`, `3 attempts`.
struct Attempts(u32);

impl fmt::Display for Attempts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            1 => f.write_str("1 attempt"),
            n => write!(f, "{n} attempts"),
        }
    }
}

/// Why a [`crate::Quorlock`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No masters were given.
    #[error("no Redis masters configured: give at least one (an odd number, 3 or 5, for fault tolerance)")]
    NoNodes,
    /// A master URL does not parse.
    #[error("invalid Redis master URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL as given, with any password replaced by `***`.
        url: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The same master appears twice, which would let one master vote twice.
    #[error(
        "master {addr} is listed twice (positions {first} and {second}); every master must be independent"
    )]
    DuplicateNode {
        /// The duplicated address.
        addr: String,
        /// Its first position.
        first: usize,
        /// Its second position.
        second: usize,
    },
    /// Two URLs lead to one Redis server (different host names or addresses of the same process,
    /// found by its `run_id` at build): it would vote twice.
    #[error(
        "masters {first} ({first_addr}) and {second} ({second_addr}) are the same Redis server (run_id {run_id}); every master must be independent"
    )]
    SameServer {
        /// The first position.
        first: usize,
        /// The address given at the first position.
        first_addr: String,
        /// The second position.
        second: usize,
        /// The address given at the second position.
        second_addr: String,
        /// The server's `run_id`, which both answered.
        run_id: String,
    },
    /// The per-node timeout is zero.
    #[error("node timeout must be greater than zero")]
    ZeroNodeTimeout,
    /// The connect timeout is zero.
    #[error("connect timeout must be greater than zero")]
    ZeroConnectTimeout,
    /// The drift factor is out of range.
    #[error("drift factor {0} is not a finite number in [0, 1)")]
    InvalidDriftFactor(f64),
    /// The retry settings are inconsistent.
    #[error(transparent)]
    InvalidRetry(#[from] BackoffError),
    /// The attempt count is zero.
    #[error("retry count must allow at least one attempt (got 0)")]
    ZeroAttempts,
    /// The health refresh interval is zero, which would check every master on every request.
    #[error("health refresh interval must be greater than zero")]
    ZeroHealthRefresh,
    /// A master rejected our credentials.
    #[error("authentication failed on master {node} ({addr}): {message}")]
    Auth {
        /// The master's position.
        node: usize,
        /// The master's address, without credentials.
        addr: String,
        /// The server's message.
        message: String,
    },
}

/// Why a TTL, a resource name or another per-call argument was refused before anything was sent.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum InputError {
    /// The resource name is empty.
    #[error("the resource name must not be empty")]
    EmptyResource,
    /// A multi-resource lock was asked for no resources at all.
    #[error("a multi-resource lock needs at least one resource (got an empty set)")]
    NoResources,
    /// A reentrant lock's owner has an empty identity.
    #[error("the lock owner's identity must not be empty")]
    EmptyOwner,
    /// A fair lock's heartbeat timeout is zero.
    #[error("the fair lock heartbeat must be greater than zero")]
    ZeroHeartbeat,
    /// The TTL is zero.
    #[error("the TTL must be greater than zero")]
    ZeroTtl,
    /// The TTL exceeds the supported maximum.
    #[error("TTL {ttl:?} exceeds the maximum {max:?}; hold long locks with extend or the watchdog instead")]
    TtlTooLarge {
        /// The TTL asked for.
        ttl: Duration,
        /// The largest TTL accepted.
        max: Duration,
    },
    /// The key's life, the TTL plus the lock-delay, exceeds the supported maximum.
    #[error("TTL {ttl:?} plus lock-delay {lock_delay:?} exceeds the maximum {max:?} a key may be set for")]
    LockDelayTooLarge {
        /// The TTL asked for.
        ttl: Duration,
        /// The lock-delay asked for.
        lock_delay: Duration,
        /// The longest key life accepted.
        max: Duration,
    },
    /// The TTL has no validity left after drift.
    #[error(transparent)]
    Timing(#[from] TimingError),
    /// The per-node timeout would eat the whole TTL.
    #[error("node timeout {node_timeout:?} is not shorter than the TTL {ttl:?}; use a longer TTL or a shorter node timeout")]
    NodeTimeoutNotBelowTtl {
        /// The configured per-node timeout.
        node_timeout: Duration,
        /// The TTL asked for.
        ttl: Duration,
    },
    /// The lock token given to release by token is empty.
    #[error("the lock token must not be empty")]
    EmptyToken,
    /// A request asked for no attempts at all.
    #[error("a lock request must allow at least one attempt (got 0)")]
    ZeroAttempts,
    /// A semaphore's permit count is zero or too large.
    #[error(transparent)]
    Permits(#[from] PermitsError),
    /// A combination of options no lock kind offers.
    #[error("{what} is not offered")]
    Unsupported {
        /// What was asked for.
        what: String,
    },
}

/// Why a lock was not acquired.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AcquireError {
    /// The arguments were refused before anything was sent.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A majority of masters did not grant the lock.
    #[error("lock on {resource:?} not acquired: {acquired} of {masters} masters granted it, {required} needed{}", list(.failures))]
    NoQuorum {
        /// The resource asked for.
        resource: String,
        /// How many masters granted the lock.
        acquired: usize,
        /// How many were needed.
        required: usize,
        /// How many masters there are.
        masters: usize,
        /// What the others said (the error's source).
        #[source]
        failures: Failures,
    },
    /// Some resources of a multi-resource lock were held on masters that refused, so none was taken
    /// there, and no majority granted the whole set.
    #[error("lock on {resource:?} not acquired: {conflicts:?} held by others; {acquired} of {masters} masters granted the whole set, {required} needed{}", list(.failures))]
    Conflict {
        /// The set asked for, as one name.
        resource: String,
        /// The resources that some refusing master reported held, in set order.
        conflicts: Vec<String>,
        /// How many masters granted the whole set.
        acquired: usize,
        /// How many were needed.
        required: usize,
        /// How many masters there are.
        masters: usize,
        /// What the others said (the error's source).
        #[source]
        failures: Failures,
    },
    /// A majority granted the lock, but too late: no validity was left.
    #[error("lock on {resource:?} not acquired: the majority arrived after {}, leaving no validity of the TTL {ttl:?}", Elapsed(*.elapsed))]
    TooSlow {
        /// The resource asked for.
        resource: String,
        /// How long the round took.
        elapsed: Duration,
        /// The TTL asked for.
        ttl: Duration,
    },
    /// Every allowed attempt failed, or the wait deadline passed.
    #[error("gave up on {resource:?} after {} in {}; last attempt: {last}", Attempts(*.attempts), Elapsed(*.waited))]
    Exhausted {
        /// The resource asked for.
        resource: String,
        /// How many rounds were made.
        attempts: u32,
        /// How long acquire tried.
        waited: Duration,
        /// The last round's failure (the error's source).
        #[source]
        last: Box<AcquireError>,
    },
    /// The wait deadline passed while queued behind other tasks of this process that hold or wait
    /// for the same resource.
    #[error("gave up on {resource:?} after {} queued behind other tasks of this process holding or waiting for it", Elapsed(*.waited))]
    Queued {
        /// The resource asked for.
        resource: String,
        /// How long acquire waited.
        waited: Duration,
    },
    /// The operating system's random number generator failed to produce a token.
    #[error("could not draw a random token from the OS: {0}")]
    Rng(String),
    /// The semaphore's holders count another number of permits than this client asked for (a
    /// rolling deploy that changes it, two services that disagree): nothing was taken. Not retried:
    /// only their releases (and the expiry of the semaphore's permits key) end it.
    #[error("semaphore {resource:?} is in use with {in_use} permits, and this client asked for {asked}: nothing was taken (every client of one semaphore must count the same permits)")]
    PermitsMismatch {
        /// The semaphore asked for.
        resource: String,
        /// The permits this client asked for.
        asked: u32,
        /// The permits the semaphore's holders count.
        in_use: u32,
    },
}

impl AcquireError {
    /// Whether the lock is held by someone else on at least one master (plain contention).
    pub fn is_contended(&self) -> bool {
        match self {
            AcquireError::NoQuorum { failures, .. } => failures.iter().any(|f| f.kind.is_contention()),
            AcquireError::Conflict { .. } => true,
            AcquireError::Exhausted { last, .. } => last.is_contended(),
            AcquireError::Queued { .. } => true,
            _ => false,
        }
    }

    /// Whether the wait ran out: every allowed attempt failed, or the deadline passed (also behind
    /// other tasks of this process). [`AcquireError::last`] tells why the last attempt failed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, AcquireError::Exhausted { .. } | AcquireError::Queued { .. })
    }

    /// Whether the (last) round failed for want of masters rather than because another holder has
    /// the lock: too few masters reachable or allowed to vote, or answering too slowly.
    pub fn is_unavailable(&self) -> bool {
        match self {
            AcquireError::NoQuorum { failures, .. } => !failures.iter().any(|f| f.kind.is_contention()),
            AcquireError::TooSlow { .. } => true,
            AcquireError::Exhausted { last, .. } => last.is_unavailable(),
            _ => false,
        }
    }

    /// The last round's failure: the error itself, or what [`AcquireError::Exhausted`] carries.
    pub fn last(&self) -> &AcquireError {
        match self {
            AcquireError::Exhausted { last, .. } => last.last(),
            other => other,
        }
    }

    /// The per-master failures of the (last) round, if any.
    pub fn failures(&self) -> &[NodeFailure] {
        match self {
            AcquireError::NoQuorum { failures, .. } | AcquireError::Conflict { failures, .. } => failures,
            AcquireError::Exhausted { last, .. } => last.failures(),
            _ => &[],
        }
    }

    /// The resources of a multi-resource lock that were held by others in the (last) round.
    pub fn conflicts(&self) -> &[String] {
        match self {
            AcquireError::Conflict { conflicts, .. } => conflicts,
            AcquireError::Exhausted { last, .. } => last.conflicts(),
            _ => &[],
        }
    }
}

/// Why a lock was not extended. The guard is lost afterwards.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ExtendError {
    /// The arguments were refused before anything was sent; the lock is unchanged.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The lock's validity had already ended, so extending it would not be safe.
    #[error("lock on {resource:?} expired before it could be extended")]
    Expired {
        /// The resource.
        resource: String,
    },
    /// The lock was already known to be lost.
    #[error("lock on {resource:?} was already lost")]
    AlreadyLost {
        /// The resource.
        resource: String,
    },
    /// A majority of masters did not confirm the extension: the lock is lost.
    #[error("lock on {resource:?} lost: {extended} of {masters} masters extended it, {required} needed{}", list(.failures))]
    Lost {
        /// The resource.
        resource: String,
        /// How many masters extended the lock.
        extended: usize,
        /// How many were needed.
        required: usize,
        /// How many masters there are.
        masters: usize,
        /// What the others said (the error's source).
        #[source]
        failures: Failures,
    },
}

impl ExtendError {
    /// Whether another token now holds the key on some master (the lock was taken over).
    pub fn is_conflict(&self) -> bool {
        matches!(self, ExtendError::Lost { failures, .. } if failures.iter().any(|f| f.kind == NodeErrorKind::Held))
    }

    /// The same as [`ExtendError::is_conflict`]: another holder has the lock.
    pub fn is_contended(&self) -> bool {
        self.is_conflict()
    }

    /// Whether masters that did not answer kept the extension from a majority.
    pub fn is_unavailable(&self) -> bool {
        match self {
            ExtendError::Lost {
                extended,
                required,
                failures,
                ..
            } => {
                !self.is_conflict()
                    && extended + failures.iter().filter(|f| f.kind.is_unreachable()).count() >= *required
            }
            _ => false,
        }
    }

    /// Whether the lock's validity had ended before the extension was sent.
    pub fn is_timeout(&self) -> bool {
        matches!(self, ExtendError::Expired { .. })
    }
}

/// Why [`crate::Quorlock::with_lock`] did not return the work's output.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum WithLockError {
    /// The lock was not acquired; the work never ran.
    #[error(transparent)]
    Acquire(#[from] AcquireError),
    /// The lock was lost while the work ran, and the work was cancelled.
    #[error("lock on {resource:?} was lost after {} of work; the work was cancelled", Elapsed(*.held_for))]
    LockLost {
        /// The resource.
        resource: String,
        /// How long the work ran before the loss was known.
        held_for: Duration,
    },
    /// The work finished, but the release found the lock already expired on a majority: the work
    /// may have run unprotected at its end.
    #[error(transparent)]
    Release(ReleaseError),
}

impl WithLockError {
    /// Whether the acquire's wait ran out, or the lock's validity ran out before the release.
    pub fn is_timeout(&self) -> bool {
        match self {
            WithLockError::Acquire(e) => e.is_timeout(),
            WithLockError::Release(e) => e.is_timeout(),
            WithLockError::LockLost { .. } => false,
        }
    }

    /// Whether too few masters were available (to acquire, or to confirm the release).
    pub fn is_unavailable(&self) -> bool {
        match self {
            WithLockError::Acquire(e) => e.is_unavailable(),
            WithLockError::Release(e) => e.is_unavailable(),
            WithLockError::LockLost { .. } => false,
        }
    }

    /// Whether another holder had the lock (when acquiring), or took it over.
    pub fn is_contended(&self) -> bool {
        match self {
            WithLockError::Acquire(e) => e.is_contended(),
            WithLockError::Release(e) => e.is_contended(),
            WithLockError::LockLost { .. } => false,
        }
    }

    /// Whether the lock was lost during the work (and the work cancelled).
    pub fn is_lock_lost(&self) -> bool {
        matches!(self, WithLockError::LockLost { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_durations_read_to_about_three_digits() {
        let shown = |d: Duration| Elapsed(d).to_string();
        assert_eq!(shown(Duration::from_nanos(9_936_599_825)), "9.94s");
        assert_eq!(shown(Duration::from_millis(20_366)), "20.4s");
        assert_eq!(shown(Duration::from_secs(3_600)), "3600s");
        assert_eq!(shown(Duration::from_micros(250_400)), "250ms");
        assert_eq!(shown(Duration::from_micros(2_460)), "2.5ms");
        assert_eq!(shown(Duration::from_nanos(800_900)), "800µs");
        assert_eq!(shown(Duration::from_millis(9_996)), "10.0s");
        assert_eq!(shown(Duration::from_micros(999_600)), "1.00s");
        assert_eq!(shown(Duration::from_micros(9_996)), "10ms");
        let err = AcquireError::Exhausted {
            resource: "k".into(),
            attempts: 3,
            waited: Duration::from_nanos(1_500_000_123),
            last: Box::new(AcquireError::Queued {
                resource: "k".into(),
                waited: Duration::from_millis(12),
            }),
        };
        assert!(err.to_string().contains("after 3 attempts in 1.50s;"), "{err}");
        let AcquireError::Exhausted { last, waited, .. } = err else {
            unreachable!()
        };
        let once = AcquireError::Exhausted {
            resource: "k".into(),
            attempts: 1,
            waited,
            last,
        };
        assert!(once.to_string().contains("after 1 attempt in 1.50s;"), "{once}");
    }

    #[test]
    fn redaction_hides_credentials_only() {
        assert_eq!(
            redact_url("redis://user:s3cret@host:6379/0"),
            "redis://***@host:6379/0"
        );
        assert_eq!(redact_url("redis://:s3cret@host"), "redis://***@host");
        assert_eq!(redact_url("rediss://host:6380"), "rediss://host:6380");
        assert_eq!(redact_url("not a url"), "not a url");
        assert_eq!(redact_url("redis://u:pa/ss@h:6379"), "redis://***@h:6379");
    }

    #[test]
    fn no_quorum_message_lists_each_master() {
        let err = AcquireError::NoQuorum {
            resource: "orders:42".into(),
            acquired: 1,
            required: 2,
            masters: 3,
            failures: vec![
                NodeFailure {
                    node: 1,
                    addr: "10.0.0.2:6379".into(),
                    kind: NodeErrorKind::Held,
                },
                NodeFailure {
                    node: 2,
                    addr: "10.0.0.3:6379".into(),
                    kind: NodeErrorKind::Timeout,
                },
            ]
            .into(),
        };
        let msg = err.to_string();
        assert!(msg.contains("1 of 3 masters granted it, 2 needed"), "{msg}");
        assert!(
            msg.contains("master 1 (10.0.0.2:6379): held by another holder"),
            "{msg}"
        );
        assert!(msg.contains("master 2 (10.0.0.3:6379): timed out"), "{msg}");
        assert!(err.is_contended());
        assert!(err.is_retryable());
    }

    #[test]
    fn permanent_failures_stop_retries_only_when_they_rule_out_a_majority() {
        let failure = |node, kind| NodeFailure {
            node,
            addr: format!("h:{node}"),
            kind,
        };
        let err = |failures: Vec<NodeFailure>| AcquireError::NoQuorum {
            resource: "r".into(),
            acquired: 0,
            required: 3,
            masters: 5,
            failures: failures.into(),
        };
        let one_wrong = err(vec![
            failure(0, NodeErrorKind::WrongType),
            failure(1, NodeErrorKind::Held),
        ]);
        assert!(one_wrong.is_retryable(), "4 masters can still grant it");
        let three_wrong = err((0..3).map(|i| failure(i, NodeErrorKind::WrongType)).collect());
        assert!(
            !three_wrong.is_retryable(),
            "only 2 masters left can ever grant it"
        );
    }
}
