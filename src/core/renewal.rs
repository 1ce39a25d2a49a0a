//! The watchdog's schedule, without IO: when a kept-alive lock is due, how early it may be renewed
//! so that renewals of many locks fall into the same tick, what TTL a capped hold renews to, and
//! what a failed renewal round means.
//!
//! Renewing a lock early is always safe (it only moves its expiry later). A tick happens when the
//! first lock is due, and renews along with it every lock due within a third of its interval. Locks
//! renewed in the same tick get the same next renewal time, so the ticks of all locks with the same
//! interval converge: a tick renews many locks at once, and at most three ticks fall in any one
//! interval however many locks are held.

use std::time::{Duration, Instant};

/// How many times per TTL a lock is renewed by default: 3, so every `ttl / 3`.
pub const DEFAULT_RENEWALS_PER_TTL: u32 = 3;
/// The shortest renewal interval accepted: 10 ms. Shorter requests are raised to it, so a tiny TTL
/// never turns the watchdog into a busy loop.
pub const MIN_RENEW_INTERVAL: Duration = Duration::from_millis(10);

/// The interval between renewals of a lock of `ttl`: the one asked for, or `ttl / 3`, kept within
/// `[MIN_RENEW_INTERVAL, ttl / 2]` so a renewal always lands well before the lock would expire.
pub fn renew_interval(ttl: Duration, requested: Option<Duration>) -> Duration {
    let ceiling = ttl / 2;
    let wanted = requested.unwrap_or(ttl / DEFAULT_RENEWALS_PER_TTL);
    wanted.min(ceiling).max(MIN_RENEW_INTERVAL.min(ceiling))
}

/// How early before its due time a lock may be renewed, to share a tick with others: a third of its
/// interval.
pub fn early_slack(interval: Duration) -> Duration {
    interval / 3
}

/// Whether a lock whose next renewal is at `next_due` should be renewed in a tick at `now`.
pub fn is_due(next_due: Instant, interval: Duration, now: Instant) -> bool {
    now.checked_add(early_slack(interval))
        .is_none_or(|horizon| horizon >= next_due)
}

/// The TTL to renew to at `now`: the lock's TTL, cut so the hold ends at `hold_until` when a cap is
/// set. `None` when the cap leaves less than `least` (the renewal would not be worth sending).
pub fn renew_ttl(
    ttl: Duration,
    hold_until: Option<Instant>,
    now: Instant,
    least: Duration,
) -> Option<Duration> {
    let Some(cap) = hold_until else {
        return Some(ttl);
    };
    let left = cap.saturating_duration_since(now);
    let ttl = ttl.min(left);
    (ttl > least).then_some(ttl)
}

/// The delay before retrying a renewal that failed for want of replies (timeouts, refused
/// connections): a sixth of the interval, at least `floor`.
pub fn retry_delay(interval: Duration, floor: Duration) -> Duration {
    (interval / 6).max(floor)
}

/// What a renewal round that did not reach a majority means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Another token holds the key on at least one master: the lock was taken over. Stop at once.
    Conflict,
    /// Too few masters could still hold our token for any retry to succeed (the key expired, or a
    /// master refused for good). Stop at once.
    Lost,
    /// Enough masters did not answer that a retry inside the remaining validity may still succeed.
    Retry,
}

/// Classifies a failed renewal round over `masters`: `yes` confirmed it, `unreachable` did not
/// answer in time, and `conflict` says whether any master reported another token.
pub fn verdict(masters: usize, yes: usize, unreachable: usize, conflict: bool) -> Verdict {
    if conflict {
        Verdict::Conflict
    } else if yes.saturating_add(unreachable) >= super::quorum(masters) {
        Verdict::Retry
    } else {
        Verdict::Lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn default_interval_is_a_third_of_the_ttl() {
        assert_eq!(
            renew_interval(Duration::from_secs(30), None),
            Duration::from_secs(10)
        );
        // Asked for longer than half the TTL: capped, or the lock could lapse between renewals.
        assert_eq!(
            renew_interval(Duration::from_secs(30), Some(Duration::from_secs(29))),
            Duration::from_secs(15)
        );
        // Asked for a busy loop: raised to the floor.
        assert_eq!(
            renew_interval(Duration::from_secs(30), Some(Duration::from_micros(1))),
            MIN_RENEW_INTERVAL
        );
        // A TTL so short the floor would exceed half of it: half of it wins.
        assert_eq!(
            renew_interval(Duration::from_millis(12), None),
            Duration::from_millis(6)
        );
    }

    #[test]
    fn locks_due_soon_share_the_tick() {
        let t0 = Instant::now();
        let interval = Duration::from_millis(900);
        assert!(is_due(t0, interval, t0));
        assert!(is_due(t0 + Duration::from_millis(300), interval, t0));
        assert!(!is_due(t0 + Duration::from_millis(301), interval, t0));
    }

    #[test]
    fn a_capped_hold_renews_to_the_cap_then_stops() {
        let t0 = Instant::now();
        let ttl = Duration::from_secs(3);
        let least = Duration::from_millis(50);
        assert_eq!(renew_ttl(ttl, None, t0, least), Some(ttl));
        assert_eq!(
            renew_ttl(ttl, Some(t0 + Duration::from_secs(10)), t0, least),
            Some(ttl)
        );
        assert_eq!(
            renew_ttl(ttl, Some(t0 + Duration::from_secs(1)), t0, least),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            renew_ttl(ttl, Some(t0 + Duration::from_millis(50)), t0, least),
            None
        );
        assert_eq!(renew_ttl(ttl, Some(t0), t0 + Duration::from_secs(1), least), None);
    }

    #[test]
    fn verdicts() {
        assert_eq!(verdict(3, 1, 0, true), Verdict::Conflict);
        assert_eq!(verdict(3, 1, 1, false), Verdict::Retry);
        assert_eq!(verdict(3, 0, 1, false), Verdict::Lost);
        assert_eq!(verdict(5, 1, 1, false), Verdict::Lost);
        assert_eq!(verdict(5, 0, 3, false), Verdict::Retry);
    }

    proptest! {
        /// The interval always leaves at least half the TTL of margin and is never zero.
        #[test]
        fn interval_is_bounded(ttl_ms in 1u64..100_000_000, req in proptest::option::of(0u64..200_000_000)) {
            let ttl = Duration::from_millis(ttl_ms);
            let i = renew_interval(ttl, req.map(Duration::from_micros));
            prop_assert!(i <= ttl / 2);
            prop_assert!(!i.is_zero() || ttl / 2 == Duration::ZERO);
        }

        /// A lock is renewed at most a third of its interval early, never late: once its time has
        /// come it is due.
        #[test]
        fn due_is_never_late(interval_ms in 1u64..100_000, offset_ms in 0u64..200_000) {
            let t0 = Instant::now();
            let interval = Duration::from_millis(interval_ms);
            let next = t0 + Duration::from_millis(offset_ms);
            let due = is_due(next, interval, t0);
            if next <= t0 { prop_assert!(due); }
            if due { prop_assert!(next.saturating_duration_since(t0) <= interval / 3); }
        }

        /// A capped renewal never reaches past the cap.
        #[test]
        fn capped_renewal_never_passes_the_cap(ttl_ms in 1u64..100_000, cap_ms in 0u64..200_000, now_ms in 0u64..200_000) {
            let t0 = Instant::now();
            let now = t0 + Duration::from_millis(now_ms);
            let cap = t0 + Duration::from_millis(cap_ms);
            if let Some(ttl) = renew_ttl(Duration::from_millis(ttl_ms), Some(cap), now, Duration::ZERO) {
                prop_assert!(now + ttl <= cap);
            }
        }
    }
}
