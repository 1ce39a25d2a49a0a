//! A simulated client's monotonic clock. It runs at the client's own rate (a rate error in parts per
//! million, drawn from the seed) from the run start, and its timers stop while the client is
//! paused, as the timers of a process stopped by GC or `SIGSTOP` do; the clock itself goes on
//! reading the time meanwhile, so a paused client sees the time jump when it resumes.
//!
//! Out of model (the `client-clock-stall` control), the clock can also lose time: planned stalls
//! during which it reads the same value although time passes (a VM suspended or migrated, a broken
//! clock source), while the client keeps running. After a stall, it resumes at its rate from where
//! it stood, so it lags true time by the stall's length. The stalls are planned when the clock is
//! made, so every conversion below knows all of them, past and future.
//!
//! quorlock reads this clock through the client's `Environment` (`env.rs`), the simulated network
//! bounds each request with it (`client.rs`), and the holder's own code reads it (`hold.rs`). The
//! conversions between true time (tokio's paused clock, on which the world and the checks run) and
//! the client's time are here, in integer nanoseconds.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use quorlock::seam::Timer;
use tokio::time::Instant;

/// Parts per million.
const MILLION: u128 = 1_000_000;

/// Nanoseconds per second.
const NANOS: u128 = 1_000_000_000;

/// How far ahead a deadline that does not fit in an [`Instant`] is put instead.
const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);

/// One client's clock; clones share its pause.
#[derive(Debug, Clone)]
pub struct ClientClock {
    start: Instant,
    /// The clock's rate, in millionths of true time's: `1_000_000 + ppm`, never zero.
    rate: u128,
    /// While the client is paused, when the pause ends (in true time).
    paused_until: Arc<Mutex<Option<Instant>>>,
    /// Out of model: when the clock stands still, as (start, length) offsets in true time from
    /// the run start, sorted and apart. Empty in model.
    stalls: Arc<[(Duration, Duration)]>,
}

impl ClientClock {
    /// A clock that reads `start` at `start` and runs `ppm` parts per million fast (slow if
    /// negative). A rate error of a million ppm or more either way is taken as 999,999: a clock
    /// must run forward.
    pub fn new(start: Instant, ppm: i64) -> ClientClock {
        let ppm = ppm.clamp(-999_999, 999_999);
        let rate = u128::try_from(1_000_000 + ppm).unwrap_or(MILLION);
        ClientClock {
            start,
            rate,
            paused_until: Arc::default(),
            stalls: Arc::new([]),
        }
    }

    /// This clock, standing still during `windows` ((start, length) offsets in true time from the
    /// run start; overlapping ones are merged, empty ones dropped), and else running at its rate
    /// from where it stood. Out of model: for the `client-clock-stall` control.
    pub fn with_stalls(mut self, windows: impl IntoIterator<Item = (Duration, Duration)>) -> ClientClock {
        let mut windows: Vec<(Duration, Duration)> = windows
            .into_iter()
            .filter(|(_, length)| !length.is_zero())
            .collect();
        windows.sort();
        let mut merged: Vec<(Duration, Duration)> = Vec::with_capacity(windows.len());
        for (start, length) in windows {
            let end = start.saturating_add(length);
            match merged.last_mut() {
                Some((last, last_length)) if last.saturating_add(*last_length) >= start => {
                    let last_end = last.saturating_add(*last_length).max(end);
                    *last_length = last_end - *last;
                }
                _ => merged.push((start, length)),
            }
        }
        self.stalls = merged.into();
        self
    }

    /// A clock at true rate from `start` (the harness's own reads of the store).
    pub fn true_rate(start: Instant) -> ClientClock {
        ClientClock::new(start, 0)
    }

    /// The run start, where true time and this clock agree.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// What this clock reads now. Never goes backwards.
    pub fn now(&self) -> Instant {
        self.client_at(Instant::now())
    }

    /// What this clock reads at the true instant `at` (the run start for an earlier one): the
    /// true time elapsed since the start, less the time it stood still, times the rate, rounded
    /// down to the nanosecond.
    pub fn client_at(&self, at: Instant) -> Instant {
        let elapsed = at.saturating_duration_since(self.start);
        let running = elapsed.saturating_sub(self.stalled_by(elapsed));
        self.after_start(scale(running, self.rate, MILLION, Round::Down))
    }

    /// The first true instant at which this clock reads `instant` or later: the client-clock time
    /// since the start, divided by the rate, rounded up to the nanosecond (rounding down could
    /// give an instant at which the clock still reads a nanosecond short of `instant`), plus the
    /// stalls before the clock got there.
    pub fn true_at(&self, instant: Instant) -> Instant {
        let elapsed = instant.saturating_duration_since(self.start);
        let running = scale(elapsed, MILLION, self.rate, Round::Up);
        self.after_start(running.saturating_add(self.lag_at(running)))
    }

    /// [`ClientClock::true_at`] rounded down instead: never later than the first true instant
    /// at which this clock reads `instant`, and at most a nanosecond earlier (the stalls counted
    /// are those of `true_at`'s reckoning).
    pub fn true_at_or_before(&self, instant: Instant) -> Instant {
        let elapsed = instant.saturating_duration_since(self.start);
        let up = scale(elapsed, MILLION, self.rate, Round::Up);
        let down = scale(elapsed, MILLION, self.rate, Round::Down);
        self.after_start(down.saturating_add(self.lag_at(up)))
    }

    /// Whether the clock stands still at the true instant `at` (out of model).
    pub fn is_stalled(&self, at: Instant) -> bool {
        let elapsed = at.saturating_duration_since(self.start);
        self.stalls
            .iter()
            .any(|&(start, length)| start <= elapsed && elapsed < start.saturating_add(length))
    }

    /// How long the clock had stood still in the first `elapsed` of true time.
    fn stalled_by(&self, elapsed: Duration) -> Duration {
        self.stalls
            .iter()
            .take_while(|(start, _)| *start < elapsed)
            .map(|&(start, length)| (elapsed - start).min(length))
            .fold(Duration::ZERO, Duration::saturating_add)
    }

    /// How far true time is ahead of the running time when the clock has run for `running` (true
    /// time less the stalls): the stalls that began before it got there. A stall that begins just
    /// as it gets there does not count: the clock reads it at the stall's start.
    fn lag_at(&self, running: Duration) -> Duration {
        let mut lag = Duration::ZERO;
        for &(start, length) in self.stalls.iter() {
            if start.saturating_sub(lag) >= running {
                break;
            }
            lag = lag.saturating_add(length);
        }
        lag
    }

    /// `delay` from now on this clock, saturating far ahead instead of overflowing.
    pub fn deadline(&self, delay: Duration) -> Instant {
        let now = self.now();
        now.checked_add(delay)
            .or_else(|| now.checked_add(FAR))
            .unwrap_or(now)
    }

    /// A timer done once this clock reads `deadline` and the client is not paused: at once for a
    /// deadline already passed, unless the client is paused, and else when the pause ends. A
    /// stall delays it until the clock, resumed, reads its deadline.
    pub fn sleep_until(&self, deadline: Instant) -> Timer {
        let clock = self.clone();
        Box::pin(async move {
            loop {
                // Every stall is planned in advance, so `true_at` counts the ones to come: one
                // sleep is enough, and the loop only guards that the clock reads the deadline.
                let due = clock.true_at(deadline);
                let waited = Instant::now() < due;
                if waited {
                    tokio::time::sleep_until(due).await;
                }
                clock.resumed().await;
                if !waited || clock.now() >= deadline {
                    break;
                }
            }
        })
    }

    /// A timer done once `delay` has passed on this clock (see [`ClientClock::sleep_until`]).
    pub fn sleep(&self, delay: Duration) -> Timer {
        self.sleep_until(self.deadline(delay))
    }

    /// Pauses the client for `length` of true time from now; a pause already under way that ends
    /// later is kept.
    pub fn pause(&self, length: Duration) {
        let now = Instant::now();
        let end = now
            .checked_add(length)
            .or_else(|| now.checked_add(FAR))
            .unwrap_or(now);
        let mut paused = self.paused_until.lock().unwrap_or_else(PoisonError::into_inner);
        *paused = Some(paused.map_or(end, |current| current.max(end)));
    }

    /// Whether the client is paused now.
    pub fn is_paused(&self) -> bool {
        self.pause_end().is_some()
    }

    /// Done once the client is not paused: at once if it is not, else when its pause ends (and
    /// any pause begun meanwhile).
    pub async fn resumed(&self) {
        while let Some(end) = self.pause_end() {
            tokio::time::sleep_until(end).await;
        }
    }

    /// When the pause under way ends, if the client is paused now.
    fn pause_end(&self) -> Option<Instant> {
        let paused = *self.paused_until.lock().unwrap_or_else(PoisonError::into_inner);
        paused.filter(|end| *end > Instant::now())
    }

    /// The start plus `elapsed`. An instant that far ahead (centuries) cannot be reached by a run;
    /// should one not fit, the farthest of `FAR` ahead and the start stands in for it.
    fn after_start(&self, elapsed: Duration) -> Instant {
        self.start
            .checked_add(elapsed)
            .or_else(|| self.start.checked_add(FAR))
            .unwrap_or(self.start)
    }
}

/// Which way a division rounds.
#[derive(Debug, Clone, Copy)]
enum Round {
    Down,
    Up,
}

/// `duration * num / den` to the nanosecond, saturating at [`Duration::MAX`]. In `u128`, this
/// cannot overflow: a duration is under 2^64 seconds, under 2^94 ns, and `num` is under 2^21.
fn scale(duration: Duration, num: u128, den: u128, round: Round) -> Duration {
    let den = den.max(1);
    let product = duration.as_nanos().saturating_mul(num);
    let nanos = match round {
        Round::Down => product / den,
        Round::Up => product.div_ceil(den),
    };
    let secs = u64::try_from(nanos / NANOS).unwrap_or(u64::MAX);
    let sub = u32::try_from(nanos % NANOS).unwrap_or(0);
    if secs == u64::MAX {
        return Duration::MAX;
    }
    Duration::new(secs, sub)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RATES: [i64; 7] = [-999_999, -4_000, -1, 0, 1, 4_000, 999_999];

    fn spans() -> Vec<Duration> {
        vec![
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(999),
            Duration::from_millis(1),
            Duration::from_millis(1_003),
            Duration::new(37, 123_456_789),
            Duration::from_secs(86_400 * 365),
        ]
    }

    #[tokio::test(start_paused = true)]
    async fn true_to_client_and_back_lands_on_the_first_instant_of_the_reading() {
        let start = Instant::now();
        for ppm in RATES {
            let clock = ClientClock::new(start, ppm);
            for span in spans() {
                // Client time to true time: the first true nanosecond at which the clock reads it.
                let target = start + span;
                let due = clock.true_at(target);
                assert!(clock.client_at(due) >= target, "ppm {ppm}, {span:?}");
                if due > start {
                    let before = due - Duration::from_nanos(1);
                    assert!(clock.client_at(before) < target, "ppm {ppm}, {span:?}");
                }
                let floor = clock.true_at_or_before(target);
                assert!(
                    floor <= due && due - floor <= Duration::from_nanos(1),
                    "ppm {ppm}, {span:?}"
                );
                // True time to client time and back: never later than where it came from.
                let reading = clock.client_at(target);
                assert!(clock.true_at(reading) <= target, "ppm {ppm}, {span:?}");
                assert_eq!(
                    clock.client_at(clock.true_at(reading)),
                    reading,
                    "ppm {ppm}, {span:?}"
                );
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_clock_runs_at_its_rate_and_never_backwards() {
        let start = Instant::now();
        let fast = ClientClock::new(start, 4_000);
        let slow = ClientClock::new(start, -4_000);
        tokio::time::sleep(Duration::from_secs(1_000)).await;
        assert_eq!(fast.now() - start, Duration::from_secs(1_004));
        assert_eq!(slow.now() - start, Duration::from_secs(996));
        let mut last = slow.now();
        for ns in 0..2_000 {
            let reading = slow.client_at(start + Duration::from_secs(1_000) + Duration::from_nanos(ns));
            assert!(reading >= last);
            last = reading;
        }
        // Out-of-range rates still run forward; far instants saturate instead of panicking.
        let stopped = ClientClock::new(start, i64::MIN);
        assert!(stopped.now() > start);
        let _ = ClientClock::new(start, i64::MAX).deadline(Duration::MAX);
        assert_eq!(scale(Duration::MAX, 1_999_999, 1, Round::Up), Duration::MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stall_keeps_the_clock_flat_then_it_resumes_at_its_rate_from_where_it_stood() {
        let start = Instant::now();
        let secs = Duration::from_secs;
        // 0.4 % slow, standing still for 2 s from 1 s in (and 1 s from 10 s, overlapping twice).
        let clock = ClientClock::new(start, -4_000).with_stalls([
            (secs(1), secs(2)),
            (secs(10), secs(1)),
            (Duration::from_millis(10_500), Duration::from_millis(100)),
            (secs(5), Duration::ZERO),
        ]);
        let at_stall = clock.client_at(start + secs(1));
        assert_eq!(at_stall - start, Duration::from_millis(996));
        let mut last = clock.now();
        for ms in 0..=4_000u64 {
            let at = start + Duration::from_millis(ms);
            let reading = clock.client_at(at);
            assert!(reading >= last, "{ms} ms: backwards");
            if (1_000..=3_000).contains(&ms) {
                assert_eq!(reading, at_stall, "{ms} ms: not flat");
                assert_eq!(clock.is_stalled(at), ms < 3_000, "{ms} ms");
            }
            last = reading;
        }
        // After it, at the rate from where it stood: 2 s behind the unstalled clock.
        assert_eq!(
            clock.client_at(start + secs(8)) - start,
            Duration::from_millis(5_976)
        );
        tokio::time::sleep(secs(12)).await;
        assert_eq!(clock.now() - start, Duration::from_millis(8_964));
        // A reading taken at a stall's start is first read there, and at no earlier instant.
        assert_eq!(clock.true_at(at_stall), start + secs(1));
        let after = at_stall + Duration::from_millis(1);
        let due = clock.true_at(after);
        assert!(due > start + secs(3) && clock.client_at(due) >= after);
        assert!(clock.client_at(due - Duration::from_nanos(1)) < after);
        let floor = clock.true_at_or_before(after);
        assert!(floor <= due && due - floor <= Duration::from_nanos(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_timer_set_before_a_stall_completes_only_when_the_clock_reads_its_deadline() {
        let start = Instant::now();
        let clock = ClientClock::new(start, 4_000)
            .with_stalls([(Duration::from_millis(100), Duration::from_secs(2))]);
        let deadline = clock.deadline(Duration::from_millis(500));
        clock.sleep_until(deadline).await;
        assert!(clock.now() >= deadline);
        let due = clock.true_at(deadline);
        assert!(Instant::now() >= due && clock.client_at(due - Duration::from_nanos(1)) < deadline);
        // 100 ms, the 2 s stall, then the remaining 400 ms of clock time at 1.004.
        let took = Instant::now() - start;
        assert!(
            took > Duration::from_millis(2_498) && took < Duration::from_millis(2_500),
            "{took:?}"
        );
        // A pause still holds a timer back, stall or not.
        let clock = ClientClock::new(start, 0).with_stalls([(took, Duration::from_millis(300))]);
        clock.pause(Duration::from_secs(1));
        let before = Instant::now();
        clock.sleep(Duration::from_millis(10)).await;
        assert_eq!(Instant::now() - before, Duration::from_secs(1));
    }
}
