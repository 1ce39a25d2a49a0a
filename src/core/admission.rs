//! The restart grace: how long a master that may have lost data is kept out of every majority,
//! and when a master started, as late as the uptime it reports allows.
//!
//! RedLock is only safe if a master that lost its data stays out of every majority for longer than
//! the longest TTL: otherwise it grants a lock that another client still holds through it. The
//! spec leaves that delay to operators; the client enforces it. Whether a vote counts is decided
//! by `core::master` from everything the client believes about the master; this file holds the
//! two pieces of arithmetic it uses.

use std::time::{Duration, Instant};

use super::timing::drift;

/// The grace period after a restart: the configured one, or the longest TTL in use plus its drift
/// allowance.
pub fn grace(configured: Option<Duration>, longest_ttl: Duration, drift_factor: f64) -> Duration {
    if let Some(grace) = configured {
        return grace;
    }
    let drift = drift(longest_ttl, drift_factor).unwrap_or(Duration::ZERO);
    longest_ttl.saturating_add(drift)
}

/// When the master started, as late as an `uptime_in_seconds` read at `observed_at` allows: never
/// before its real start, so the grace counted from it never ends early.
///
/// Redis reports uptime as the difference of two whole-second wall-clock readings (now and start),
/// which overstates the true uptime by up to one second: started at 10.9 s and read at 11.1 s, it
/// says 1 although 0.2 s passed. The true uptime is therefore more than `uptime_secs - 1`, and
/// counting the start from there is never earlier than the real one. `None` only when the instant
/// would precede the monotonic clock's origin, in which case no grace applies anyway.
pub fn latest_start(observed_at: Instant, uptime_secs: u64) -> Option<Instant> {
    observed_at.checked_sub(Duration::from_secs(uptime_secs.saturating_sub(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis's uptime is a difference of whole wall-clock seconds: for every real start and read
    /// time within a few seconds, the start we compute is never before the real one.
    #[test]
    fn the_computed_start_is_never_earlier_than_the_real_one() {
        let base = Instant::now() + Duration::from_secs(100);
        for start_ms in (0..3_000u64).step_by(7) {
            for after_ms in (0..4_000u64).step_by(11) {
                let read_ms = start_ms + after_ms;
                let reported = read_ms / 1000 - start_ms / 1000;
                let observed = base + Duration::from_millis(read_ms);
                let real_start = base + Duration::from_millis(start_ms);
                let started = latest_start(observed, reported).expect("within the clock");
                assert!(
                    started >= real_start,
                    "start {start_ms} ms, read {read_ms} ms, uptime {reported}: computed too early"
                );
                assert!(started <= observed);
            }
        }
    }

    #[test]
    fn the_default_grace_covers_the_longest_ttl_and_its_drift() {
        assert_eq!(
            grace(None, Duration::from_secs(10), 0.01),
            Duration::from_millis(10_102)
        );
        assert_eq!(
            grace(Some(Duration::from_secs(3)), Duration::from_secs(10), 0.01),
            Duration::from_secs(3)
        );
    }
}
