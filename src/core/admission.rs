//! The restart-grace admission: whether a master's yes may count towards a majority now.
//!
//! RedLock is only safe if a master that lost its data (a restart without `appendfsync always`)
//! stays out of every majority for longer than the longest TTL: otherwise it grants a lock that
//! another client still holds through it. The spec leaves that delay to operators; the client
//! enforces it, and this is the rule it applies. What the client knows about a master (is the
//! connection verified, does it persist every write, when did it start) goes in; a verdict comes out.

use std::time::{Duration, Instant};

use crate::error::NodeErrorKind;

use super::timing::drift;

/// What the client knows about one master when its vote arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// Whether its `run_id` and uptime were read on the connection the vote came over.
    pub verified: bool,
    /// Whether it persists every write before acknowledging it (`None`: could not be read).
    pub fsync_always: Option<bool>,
    /// When it (re)started, on the client's monotonic clock, if known.
    pub started: Option<Instant>,
}

/// Whether a yes from a master with `standing` may count at `now`, when a master that restarted
/// less than `grace` ago without `appendfsync always` must be ignored. With `enforce` off every
/// vote counts.
///
/// # Errors
/// [`NodeErrorKind::Unverified`] when the connection is not verified,
/// [`NodeErrorKind::Restarted`] within the grace after a restart.
pub fn admit(enforce: bool, standing: Standing, grace: Duration, now: Instant) -> Result<(), NodeErrorKind> {
    if !enforce {
        return Ok(());
    }
    if !standing.verified {
        return Err(NodeErrorKind::Unverified);
    }
    if standing.fsync_always == Some(true) {
        return Ok(());
    }
    if let Some(started) = standing.started {
        let uptime = now.saturating_duration_since(started);
        if uptime < grace {
            return Err(NodeErrorKind::Restarted {
                uptime,
                remaining: grace - uptime,
            });
        }
    }
    Ok(())
}

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
    use proptest::prelude::*;

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

    #[test]
    fn an_unverified_master_never_votes_while_enforced() {
        let standing = Standing {
            verified: false,
            fsync_always: Some(true),
            started: None,
        };
        let now = Instant::now();
        assert_eq!(
            admit(true, standing, Duration::ZERO, now),
            Err(NodeErrorKind::Unverified)
        );
        assert_eq!(admit(false, standing, Duration::ZERO, now), Ok(()));
    }

    proptest! {
        /// A master restarted without fsync-always never votes within the grace, and always votes
        /// after it (when verified); a master that persists every write always votes.
        #[test]
        fn restarted_masters_wait_out_the_grace(
            uptime_ms in 0u64..20_000,
            grace_ms in 0u64..20_000,
            fsync in prop::option::of(any::<bool>()),
        ) {
            let started = Instant::now();
            let now = started + Duration::from_millis(uptime_ms);
            let standing = Standing { verified: true, fsync_always: fsync, started: Some(started) };
            let verdict = admit(true, standing, Duration::from_millis(grace_ms), now);
            if fsync == Some(true) || uptime_ms >= grace_ms {
                prop_assert_eq!(verdict, Ok(()));
            } else {
                let restarted = matches!(verdict, Err(NodeErrorKind::Restarted { remaining, .. })
                    if remaining == Duration::from_millis(grace_ms - uptime_ms));
                prop_assert!(restarted);
            }
        }
    }
}
