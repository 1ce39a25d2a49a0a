//! The retry loop: attempts until one wins, one fails for good, or the policy gives up.
//!
//! This is the mechanism, written once for every kind of lock; when to try again is the policy's
//! business ([`policy`]), as in tower's split between a retry future and its policy. A policy pauses
//! after each failed attempt (a jittered delay, or until a release is announced, or until the lock
//! expires on a majority) and says whether another attempt may start; the loop counts the attempts,
//! stops at an error that waiting cannot cure, and reports the last failure when the policy gives
//! up.

pub(crate) mod policy;

use std::future::Future;

use tokio::time::Instant;
use tracing::Span;

use crate::base::error::AcquireError;
use crate::seam::clock::Clock;

/// What a policy says after its pause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Make another attempt now.
    Again,
    /// Stop: the attempts or the wait are spent.
    GiveUp,
}

/// When to try again after a failed attempt.
pub(crate) trait Policy {
    /// After `attempts` attempts, the last of which failed with the retryable `err`: pauses as the
    /// policy says, then says whether to make another.
    fn pause(&mut self, attempts: u32, err: &AcquireError) -> impl Future<Output = Next> + Send;
}

/// Makes attempts with `attempt` until one succeeds, one fails with an error that waiting cannot
/// cure, or `policy` gives up; `started` is when the wait began on `clock` (for the error's
/// report).
///
/// # Errors
/// The first non-retryable error, or [`AcquireError::Exhausted`] with the last failure.
pub(crate) async fn retry<T, F, Fut, P>(
    resource: &str,
    clock: &Clock,
    started: Instant,
    policy: &mut P,
    mut attempt: F,
) -> Result<T, AcquireError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, AcquireError>>,
    P: Policy,
{
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        Span::current().record("attempt", attempts);
        let err = match attempt().await {
            Ok(won) => return Ok(won),
            Err(err) => err,
        };
        if !err.is_retryable() {
            return Err(err);
        }
        if policy.pause(attempts, &err).await == Next::GiveUp {
            return Err(AcquireError::Exhausted {
                resource: resource.to_owned(),
                attempts,
                waited: clock.now().saturating_duration_since(started),
                last: Box::new(err),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Gives up after `allow` pauses, counting them.
    struct Count {
        allow: u32,
        paused: u32,
    }

    impl Policy for Count {
        async fn pause(&mut self, _attempts: u32, _err: &AcquireError) -> Next {
            self.paused += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
            if self.paused > self.allow {
                Next::GiveUp
            } else {
                Next::Again
            }
        }
    }

    fn contended() -> AcquireError {
        AcquireError::NoQuorum {
            resource: "r".into(),
            acquired: 0,
            required: 2,
            masters: 3,
            failures: Vec::new().into(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_loop_stops_at_a_win_at_a_permanent_error_and_when_the_policy_gives_up() {
        let started = Instant::now();
        let mut calls = 0;
        let mut policy = Count { allow: 5, paused: 0 };
        let won = retry("r", &Clock::Tokio, started, &mut policy, || {
            calls += 1;
            let out = if calls < 3 { Err(contended()) } else { Ok(calls) };
            async move { out }
        })
        .await;
        assert_eq!(won.ok(), Some(3));
        assert_eq!(policy.paused, 2);

        let mut policy = Count { allow: 5, paused: 0 };
        let permanent = retry::<(), _, _, _>("r", &Clock::Tokio, started, &mut policy, || async {
            Err(AcquireError::Input(crate::base::error::InputError::ZeroTtl))
        })
        .await;
        assert!(matches!(permanent, Err(AcquireError::Input(_))));
        assert_eq!(policy.paused, 0, "a permanent error is not retried");

        let mut policy = Count { allow: 2, paused: 0 };
        let spent = retry::<(), _, _, _>("r", &Clock::Tokio, started, &mut policy, || async {
            Err(contended())
        })
        .await;
        match spent {
            Err(AcquireError::Exhausted { attempts, last, .. }) => {
                assert_eq!(attempts, 3);
                assert!(matches!(*last, AcquireError::NoQuorum { .. }));
            }
            other => panic!("expected Exhausted, got {other:?}"),
        }
    }
}
