//! Retry timing: jittered delays between attempts, bounded by an attempt count and a wait deadline.
//!
//! Contenders that retry in lockstep collide again; a random spread breaks the tie. The delay is
//! `delay ± jitter`, drawn uniformly from an injected RNG so tests can seed it. Zero-width ranges are
//! fine; a jitter wider than the delay is rejected when the config is built (a zero delay with jitter
//! is exactly the input that made another crate panic).

use std::time::Duration;

use rand::{Rng, RngExt};

pub use crate::base::error::BackoffError;

/// A retry delay of `delay ± jitter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    delay: Duration,
    jitter: Duration,
}

impl Backoff {
    /// Checks and builds a backoff.
    ///
    /// # Errors
    /// [`BackoffError::JitterExceedsDelay`] when `jitter > delay`.
    pub fn new(delay: Duration, jitter: Duration) -> Result<Self, BackoffError> {
        if jitter > delay {
            return Err(BackoffError::JitterExceedsDelay { delay, jitter });
        }
        Ok(Self { delay, jitter })
    }

    /// The centre of the delay range.
    pub fn base(&self) -> Duration {
        self.delay
    }

    /// The shortest delay this backoff can produce.
    pub fn min(&self) -> Duration {
        self.delay - self.jitter
    }

    /// The longest delay this backoff can produce.
    pub fn max(&self) -> Duration {
        self.delay.saturating_add(self.jitter)
    }

    /// Draws one delay, uniformly in `[min, max]`.
    pub fn jitter<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        let span = self.max().saturating_sub(self.min());
        let span_nanos = u64::try_from(span.as_nanos()).unwrap_or(u64::MAX);
        if span_nanos == 0 {
            return self.min();
        }
        let offset = rng.random_range(0..=span_nanos);
        self.min().saturating_add(Duration::from_nanos(offset))
    }
}

/// How long acquire keeps trying: at most `max_attempts` rounds, none starting after `wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPlan {
    /// The most rounds to make, the first included (at least 1).
    pub max_attempts: u32,
    /// The overall time budget, measured from the first round's start.
    pub wait: Duration,
}

impl RetryPlan {
    /// After `attempts` rounds and `elapsed` time, returns the delay before the next round, or `None`
    /// when the plan is spent: the count is used up, or the next round would start after `wait`.
    pub fn next_delay(&self, attempts: u32, elapsed: Duration, delay: Duration) -> Option<Duration> {
        if attempts >= self.max_attempts {
            return None;
        }
        let start_of_next = elapsed.checked_add(delay)?;
        (start_of_next < self.wait).then_some(delay)
    }
}

impl RetryPlan {
    /// Whether another attempt may start after `attempts`, with `elapsed` of the wait spent: the
    /// same rule as [`RetryPlan::next_delay`] with no delay, for a policy that waits on something
    /// else than a delay (a release announcement, an expiry).
    pub fn may_try_again(&self, attempts: u32, elapsed: Duration) -> bool {
        self.next_delay(attempts, elapsed, Duration::ZERO).is_some()
    }
}

/// How long a waiter on a held lock waits before it looks again when no release is announced: until
/// the lock frees on a majority (`free_in`, from the masters' PTTLs; `None` when too few answered),
/// at most `cap`, and a little past it by `jitter` so that waiters do not all retry at one instant.
pub fn fallback_wait(free_in: Option<Duration>, cap: Duration, jitter: Duration) -> Duration {
    free_in.unwrap_or(cap).min(cap).saturating_add(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{rngs::StdRng, SeedableRng};

    proptest! {
        /// The give-up rule of a policy that waits on announcements is the delay rule's with no
        /// delay: it stops exactly when the count is spent or the wait is over.
        #[test]
        fn trying_again_follows_the_count_and_the_wait(
            max_attempts in 1u32..10, wait_ms in 0u64..5_000, attempts in 0u32..12, elapsed_ms in 0u64..6_000,
        ) {
            let plan = RetryPlan { max_attempts, wait: Duration::from_millis(wait_ms) };
            let again = plan.may_try_again(attempts, Duration::from_millis(elapsed_ms));
            prop_assert_eq!(again, attempts < max_attempts && elapsed_ms < wait_ms);
        }

        /// The fallback wait never exceeds its cap plus the jitter, and is never shorter than the
        /// lock's own expiry when that is within the cap.
        #[test]
        fn the_fallback_waits_for_the_expiry_within_its_cap(
            free_ms in prop::option::of(0u64..5_000), cap_ms in 1u64..2_000, jitter_ms in 0u64..50,
        ) {
            let cap = Duration::from_millis(cap_ms);
            let jitter = Duration::from_millis(jitter_ms);
            let wait = fallback_wait(free_ms.map(Duration::from_millis), cap, jitter);
            prop_assert!(wait <= cap + jitter);
            prop_assert!(wait >= jitter);
            if let Some(free) = free_ms.filter(|f| *f <= cap_ms) {
                prop_assert_eq!(wait, Duration::from_millis(free) + jitter);
            }
        }
    }

    #[test]
    fn rejects_jitter_wider_than_delay() {
        assert_eq!(
            Backoff::new(Duration::ZERO, Duration::from_millis(10)),
            Err(BackoffError::JitterExceedsDelay {
                delay: Duration::ZERO,
                jitter: Duration::from_millis(10)
            })
        );
        assert!(Backoff::new(Duration::ZERO, Duration::ZERO).is_ok());
    }

    #[test]
    fn zero_jitter_gives_the_exact_delay() {
        let b = Backoff::new(Duration::from_millis(30), Duration::ZERO).expect("valid");
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(b.jitter(&mut rng), Duration::from_millis(30));
    }

    #[test]
    fn jitter_spreads_the_delay() {
        let b = Backoff::new(Duration::from_millis(100), Duration::from_millis(50)).expect("valid");
        let mut rng = StdRng::seed_from_u64(7);
        let draws: Vec<Duration> = (0..200).map(|_| b.jitter(&mut rng)).collect();
        assert!(draws.iter().any(|d| *d < Duration::from_millis(75)));
        assert!(draws.iter().any(|d| *d > Duration::from_millis(125)));
    }

    #[test]
    fn retry_plan_stops_on_count_and_deadline() {
        let plan = RetryPlan {
            max_attempts: 3,
            wait: Duration::from_secs(1),
        };
        let d = Duration::from_millis(100);
        assert_eq!(plan.next_delay(1, Duration::ZERO, d), Some(d));
        assert_eq!(plan.next_delay(3, Duration::ZERO, d), None);
        assert_eq!(plan.next_delay(1, Duration::from_millis(950), d), None);
        assert_eq!(plan.next_delay(1, Duration::MAX, d), None);
    }

    proptest! {
        /// Every drawn delay stays within `[delay - jitter, delay + jitter]`.
        #[test]
        fn jitter_stays_within_bounds(delay_us in 0u64..10_000_000, jitter_us in 0u64..10_000_000, seed in any::<u64>()) {
            let delay = Duration::from_micros(delay_us);
            let jitter = Duration::from_micros(jitter_us);
            match Backoff::new(delay, jitter) {
                Err(_) => prop_assert!(jitter > delay),
                Ok(b) => {
                    let mut rng = StdRng::seed_from_u64(seed);
                    for _ in 0..16 {
                        let d = b.jitter(&mut rng);
                        prop_assert!(d >= delay - jitter && d <= delay + jitter, "{:?} outside {:?}±{:?}", d, delay, jitter);
                    }
                }
            }
        }

        /// The plan never allows more rounds than its count, nor a round starting past its wait.
        #[test]
        fn retry_plan_respects_its_bounds(max in 1u32..50, wait_ms in 0u64..10_000, attempts in 0u32..60, elapsed_ms in 0u64..20_000, delay_ms in 0u64..5_000) {
            let plan = RetryPlan { max_attempts: max, wait: Duration::from_millis(wait_ms) };
            if let Some(d) = plan.next_delay(attempts, Duration::from_millis(elapsed_ms), Duration::from_millis(delay_ms)) {
                prop_assert!(attempts < max);
                prop_assert!(Duration::from_millis(elapsed_ms) + d < plan.wait);
            }
        }
    }
}
