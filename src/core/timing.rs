//! Quorum size, clock-drift allowance and lock validity, as pure checked arithmetic.
//!
//! RedLock's safety rests on three numbers: how many masters make a majority, how much the clocks of
//! two processes may drift apart during a TTL, and how long the holder may still assume the lock is
//! its own. Each is computed here without IO and without any arithmetic that can wrap or panic: a
//! validity that would be zero or negative is `None`, never a huge number.

use std::time::{Duration, Instant};

pub use crate::base::error::TimingError;

/// The fixed part of the drift allowance, added to `ttl * factor`: 2 ms.
pub const DRIFT_FIXED: Duration = Duration::from_millis(2);

/// The number of masters that form a majority of `n`: `n / 2 + 1`.
///
/// Any two sets of this size drawn from the same `n` masters share at least one master, which is
/// what makes two simultaneous holders impossible.
pub const fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// The clock-drift allowance for a lock of `ttl`: `ttl * factor + 2 ms`.
///
/// Returns `None` when `factor` is not a finite number in `[0, 1)` or the product does not fit in a
/// [`Duration`].
pub fn drift(ttl: Duration, factor: f64) -> Option<Duration> {
    if !factor.is_finite() || !(0.0..1.0).contains(&factor) {
        return None;
    }
    let scaled = Duration::try_from_secs_f64(ttl.as_secs_f64() * factor).ok()?;
    scaled.checked_add(DRIFT_FIXED)
}

/// The time a holder may still rely on the lock: `ttl - elapsed - drift`.
///
/// Returns `None` when that is zero or less, that is when `elapsed >= ttl - drift`: such an attempt
/// has failed, however many masters agreed.
pub fn validity(ttl: Duration, elapsed: Duration, drift: Duration) -> Option<Duration> {
    ttl.checked_sub(drift)?
        .checked_sub(elapsed)
        .filter(|left| !left.is_zero())
}

/// The timing of one lock: TTL, drift allowance, the least validity worth returning, and the
/// lock-delay the key outlives the validity by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    ttl: Duration,
    drift: Duration,
    min_validity: Duration,
    lock_delay: Duration,
}

impl Timing {
    /// Checks and combines the timing parameters of one lock.
    ///
    /// # Errors
    /// [`TimingError`] when the TTL is zero, the factor is out of range, or the TTL is not longer than
    /// `drift + min_validity`.
    pub fn new(ttl: Duration, drift_factor: f64, min_validity: Duration) -> Result<Self, TimingError> {
        Self::delayed(ttl, Duration::ZERO, drift_factor, min_validity)
    }

    /// As [`Timing::new`], for a lock kept closed for `lock_delay` after an expiry (Chubby's
    /// lock-delay): the key lives `ttl + lock_delay` on every master while the holder's validity
    /// still counts from `ttl`, and the drift allowance is taken on the key's whole life. So a
    /// holder that acts less than `lock_delay` after its validity ended still acts before its key
    /// can expire on any master whose clock drifts within the factor: nobody else can hold the
    /// lock yet. A release deletes the key at once, whatever the delay.
    ///
    /// # Errors
    /// As [`Timing::new`]; [`TimingError::TtlBelowDrift`] too when the allowance on the key's
    /// whole life leaves the TTL no validity, or `ttl + lock_delay` does not fit a [`Duration`].
    pub fn delayed(
        ttl: Duration,
        lock_delay: Duration,
        drift_factor: f64,
        min_validity: Duration,
    ) -> Result<Self, TimingError> {
        if ttl.is_zero() {
            return Err(TimingError::ZeroTtl);
        }
        let life = ttl.checked_add(lock_delay).unwrap_or(Duration::MAX);
        let drift = drift(life, drift_factor).ok_or(TimingError::DriftFactor(drift_factor))?;
        let usable = drift.checked_add(min_validity);
        if usable.is_none_or(|usable| ttl <= usable) || life == Duration::MAX {
            return Err(TimingError::TtlBelowDrift {
                ttl,
                drift,
                min_validity,
            });
        }
        Ok(Self {
            ttl,
            drift,
            min_validity,
            lock_delay,
        })
    }

    /// The same timing without the drift allowance: out of model, for the negative control that
    /// shows the allowance is needed (a holder then counts on its lock past the key's expiry on a
    /// master whose clock runs faster than its own).
    pub fn without_drift(self) -> Timing {
        Timing {
            drift: Duration::ZERO,
            ..self
        }
    }

    /// The TTL the holder's validity counts from.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// How long the key outlives the validity after an expiry: zero unless a lock-delay was
    /// asked for.
    pub fn lock_delay(&self) -> Duration {
        self.lock_delay
    }

    /// The TTL set on every master: the TTL plus the lock-delay.
    pub fn key_ttl(&self) -> Duration {
        self.ttl.saturating_add(self.lock_delay)
    }

    /// The clock-drift allowance taken off the TTL.
    pub fn drift(&self) -> Duration {
        self.drift
    }

    /// The least validity an acquisition must leave to count as a success.
    pub fn min_validity(&self) -> Duration {
        self.min_validity
    }

    /// The instant a lock whose round started at `started` stops being valid: `started + ttl - drift`.
    ///
    /// `None` only if the instant cannot be represented, which a checked TTL never causes.
    pub fn valid_until(&self, started: Instant) -> Option<Instant> {
        started.checked_add(self.ttl.checked_sub(self.drift)?)
    }

    /// The validity left at `now` for a round that started at `started`, if above the minimum.
    pub fn validity_at(&self, started: Instant, now: Instant) -> Option<Duration> {
        validity(self.ttl, now.saturating_duration_since(started), self.drift)
            .filter(|left| *left > self.min_validity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_lock_delay_needs_the_allowance_on_the_keys_whole_life() {
        // The control of the property below: an allowance taken on the TTL alone lets a holder
        // that acts just inside the delay act after a fast master expired its key.
        let (ttl, delay, factor) = (Duration::from_secs(10), Duration::from_secs(10), 0.01);
        let on_ttl_alone = Timing::new(ttl, factor, Duration::ZERO).expect("timing");
        let acts = ttl - on_ttl_alone.drift() + delay - Duration::from_millis(1);
        let expires = (ttl + delay).div_f64(1.0 + factor);
        assert!(acts > expires, "the control must break the guarantee");
        let delayed = Timing::delayed(ttl, delay, factor, Duration::ZERO).expect("timing");
        assert!(ttl - delayed.drift() + delay < expires);
        assert_eq!(delayed.drift(), Duration::from_millis(202));
    }

    #[test]
    fn quorum_is_a_strict_majority() {
        assert_eq!(quorum(1), 1);
        assert_eq!(quorum(2), 2);
        assert_eq!(quorum(3), 2);
        assert_eq!(quorum(4), 3);
        assert_eq!(quorum(5), 3);
        assert_eq!(quorum(7), 4);
    }

    #[test]
    fn drift_default_is_one_percent_plus_two_ms() {
        assert_eq!(
            drift(Duration::from_secs(10), 0.01),
            Some(Duration::from_millis(102))
        );
        assert_eq!(drift(Duration::from_secs(1), 0.0), Some(DRIFT_FIXED));
        assert_eq!(drift(Duration::from_secs(1), -0.1), None);
        assert_eq!(drift(Duration::from_secs(1), 1.0), None);
        assert_eq!(drift(Duration::from_secs(1), f64::NAN), None);
    }

    #[test]
    fn validity_past_ttl_minus_drift_is_a_failure_not_a_huge_number() {
        let ttl = Duration::from_millis(1);
        let d = drift(ttl, 0.01).unwrap_or_default();
        // A 1 ms TTL is below its own drift: no validity at all (redlock 2.0 returned u64::MAX here).
        assert_eq!(validity(ttl, Duration::ZERO, d), None);
        let ttl = Duration::from_millis(100);
        assert_eq!(
            validity(ttl, Duration::from_millis(97), Duration::from_millis(3)),
            None
        );
        assert_eq!(
            validity(ttl, Duration::from_millis(96), Duration::from_millis(3)),
            Some(Duration::from_millis(1))
        );
    }

    #[test]
    fn timing_rejects_ttl_not_above_drift() {
        assert_eq!(
            Timing::new(Duration::ZERO, 0.01, Duration::ZERO),
            Err(TimingError::ZeroTtl)
        );
        assert!(matches!(
            Timing::new(Duration::from_millis(2), 0.01, Duration::ZERO),
            Err(TimingError::TtlBelowDrift { .. })
        ));
        assert!(matches!(
            Timing::new(Duration::from_secs(1), 2.0, Duration::ZERO),
            Err(TimingError::DriftFactor(_))
        ));
        assert!(Timing::new(Duration::from_millis(10), 0.01, Duration::ZERO).is_ok());
    }

    proptest! {
        /// Lock-delay: a holder that acts less than the delay after its validity ended still acts
        /// before its key can expire on any master whose clock runs up to the drift factor
        /// faster than the holder's, and a delay never lengthens the validity.
        #[test]
        fn a_holder_inside_the_lock_delay_acts_before_its_key_expires(
            ttl_ms in 1u64..10_000_000,
            delay_ms in 0u64..10_000_000,
            factor in 0.0f64..0.5,
            elapsed_us in 0u64..20_000_000_000,
            late_permille in 0u64..1000,
        ) {
            let ttl = Duration::from_millis(ttl_ms);
            let delay = Duration::from_millis(delay_ms);
            let plain = Timing::new(ttl, factor, Duration::ZERO);
            let Ok(timing) = Timing::delayed(ttl, delay, factor, Duration::ZERO) else {
                return Ok(());
            };
            prop_assert_eq!(timing.key_ttl(), ttl + delay);
            let start = Instant::now();
            let elapsed = Duration::from_micros(elapsed_us);
            let now = start + elapsed;
            if let Some(validity) = timing.validity_at(start, now) {
                if let Ok(plain) = plain {
                    prop_assert!(Some(validity) <= plain.validity_at(start, now));
                }
                // The holder acts at most `delay` after its validity ends, on its own clock.
                let late = delay.mul_f64(late_permille as f64 / 1000.0);
                let acts = elapsed + validity + late;
                // The earliest a master set the key is the round's start; a master whose clock
                // runs `factor` faster expires it after `key_ttl / (1 + factor)` of our time.
                let expires = timing.key_ttl().div_f64(1.0 + factor);
                prop_assert!(acts < expires, "acts at {:?}, the key may expire at {:?}", acts, expires);
            }
        }

        /// Any two majorities of the same masters share at least one master.
        #[test]
        fn any_two_majorities_share_a_master(n in 1usize..16, a_bits in any::<u32>(), b_bits in any::<u32>()) {
            let q = quorum(n);
            // Build two subsets of size q from arbitrary bit patterns: take set bits first, fill up in order.
            let pick = |bits: u32| {
                let mut chosen: Vec<usize> = (0..n).filter(|i| bits >> i & 1 == 1).take(q).collect();
                for i in 0..n {
                    if chosen.len() == q { break; }
                    if !chosen.contains(&i) { chosen.push(i); }
                }
                chosen
            };
            let (a, b) = (pick(a_bits), pick(b_bits));
            prop_assert_eq!(a.len(), q);
            prop_assert_eq!(b.len(), q);
            prop_assert!(a.iter().any(|m| b.contains(m)), "majorities {:?} and {:?} of {} are disjoint", a, b, n);
            // And the arithmetic behind it: two quorums exceed n.
            prop_assert!(2 * q > n);
        }

        /// Validity never exceeds the TTL and never grows as time passes.
        #[test]
        fn validity_is_bounded_and_monotone(
            ttl_ms in 0u64..10_000_000,
            factor in 0.0f64..0.5,
            e1 in 0u64..20_000_000_000,
            e2 in 0u64..20_000_000_000,
        ) {
            let ttl = Duration::from_millis(ttl_ms);
            let d = drift(ttl, factor).unwrap_or(Duration::MAX);
            let (early, late) = (Duration::from_micros(e1.min(e2)), Duration::from_micros(e1.max(e2)));
            let v_early = validity(ttl, early, d);
            let v_late = validity(ttl, late, d);
            if let Some(v) = v_early { prop_assert!(v <= ttl); }
            if let Some(v) = v_late { prop_assert!(v <= ttl); }
            match (v_early, v_late) {
                (Some(a), Some(b)) => prop_assert!(b <= a),
                (None, Some(_)) => prop_assert!(false, "validity came back after it ran out"),
                _ => {}
            }
            // Exactly at or past ttl - drift, the attempt has failed.
            if let Some(limit) = ttl.checked_sub(d) {
                prop_assert_eq!(validity(ttl, limit, d), None);
            }
        }
    }
}
