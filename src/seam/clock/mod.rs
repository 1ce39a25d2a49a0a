//! The client's one monotonic clock: every validity, deadline, renewal, backoff and wait reads
//! the time and sets its timers here, never on tokio directly.
//!
//! By default this is tokio's clock (so a paused tokio clock drives everything, and a timer is
//! tokio's own, held in place: nothing is allocated for it). An application that supplies an [`Environment`] supplies the clock too: the
//! deterministic simulation gives each client a clock of its own rate whose timers stop while the
//! client is paused, as a process stopped by GC or `SIGSTOP` would see it. Keeping every read of
//! the time behind this one type is what makes that substitution complete; `scan.rs` checks that
//! nothing else in `src/` reads a clock.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::Instant;

use crate::seam::{Environment, Timer};

/// The clock a client measures time on.
#[derive(Clone, Default)]
pub(crate) enum Clock {
    /// Tokio's clock.
    #[default]
    Tokio,
    /// The clock of an environment given by the application.
    Custom(Arc<dyn Environment>),
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Clock::Tokio => f.write_str("Clock::Tokio"),
            Clock::Custom(_) => f.write_str("Clock::Custom"),
        }
    }
}

/// A timeout ran out before the future it bounded completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Elapsed;

impl Clock {
    /// The clock of `environment`, or tokio's when there is none.
    pub(crate) fn of(environment: Option<&Arc<dyn Environment>>) -> Clock {
        environment.map_or(Clock::Tokio, |environment| Clock::Custom(Arc::clone(environment)))
    }

    /// Now, on this clock.
    pub(crate) fn now(&self) -> Instant {
        match self {
            Clock::Tokio => Instant::now(),
            Clock::Custom(environment) => environment.now(),
        }
    }

    /// Whether this is tokio's clock, the one the built-in masters' timeouts run on.
    pub(crate) fn is_tokio(&self) -> bool {
        matches!(self, Clock::Tokio)
    }

    /// A timer done once this clock reads `deadline`.
    pub(crate) fn sleep_until(&self, deadline: Instant) -> Sleep {
        match self {
            Clock::Tokio => Sleep::Tokio {
                sleep: tokio::time::sleep_until(deadline),
            },
            Clock::Custom(environment) => Sleep::Custom {
                timer: environment.sleep_until(deadline),
                environment: Arc::clone(environment),
            },
        }
    }

    /// A timer for `deadline` when `armed`, else one that never completes (and costs nothing).
    pub(crate) fn sleep_until_if(&self, armed: bool, deadline: Instant) -> Sleep {
        if armed {
            self.sleep_until(deadline)
        } else {
            Sleep::Never
        }
    }

    /// A timer done once `delay` has passed on this clock.
    pub(crate) fn sleep(&self, delay: Duration) -> Sleep {
        self.sleep_until(self.deadline(delay))
    }

    /// `delay` from now, saturating far in the future instead of overflowing.
    pub(crate) fn deadline(&self, delay: Duration) -> Instant {
        later(self.now(), delay)
    }

    /// Runs `future` until it completes or this clock reads `deadline`, whichever comes first
    /// (the future is polled first, so one ready at the deadline still counts).
    pub(crate) async fn timeout_at<F: Future>(
        &self,
        deadline: Instant,
        future: F,
    ) -> Result<F::Output, Elapsed> {
        let timer = self.sleep_until(deadline);
        tokio::select! {
            biased;
            out = future => Ok(out),
            () = timer => Err(Elapsed),
        }
    }

    /// Runs `future` for at most `delay` on this clock.
    pub(crate) async fn timeout<F: Future>(&self, delay: Duration, future: F) -> Result<F::Output, Elapsed> {
        self.timeout_at(self.deadline(delay), future).await
    }
}

/// About 30 years: how far ahead a deadline that would overflow is put instead.
const FAR: Duration = Duration::from_secs(86_400 * 365 * 30);

/// `delay` after `instant`, or as far ahead as fits (never a panic, whatever the clock reads).
pub(crate) fn later(instant: Instant, delay: Duration) -> Instant {
    instant
        .checked_add(delay)
        .or_else(|| instant.checked_add(FAR))
        .unwrap_or(instant)
}

pin_project_lite::pin_project! {
    /// A timer of a [`Clock`], re-armable like tokio's. Tokio's timer is held in place (pin it
    /// with `tokio::pin!` to poll it by reference or re-arm it).
    #[project = SleepProj]
    pub(crate) enum Sleep {
        /// On tokio's clock.
        Tokio { #[pin] sleep: tokio::time::Sleep },
        /// On an environment's clock, with the environment to re-arm it on.
        Custom { timer: Timer, environment: Arc<dyn Environment> },
        /// Not armed: never completes.
        Never,
    }
}

impl Sleep {
    /// Re-arms the timer for `deadline`, on the clock it was made on (an unarmed one stays so).
    pub(crate) fn reset(self: Pin<&mut Self>, deadline: Instant) {
        match self.project() {
            SleepProj::Tokio { sleep } => sleep.reset(deadline),
            SleepProj::Custom { timer, environment } => *timer = environment.sleep_until(deadline),
            SleepProj::Never => {}
        }
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        match self.project() {
            SleepProj::Tokio { sleep } => sleep.poll(cx),
            SleepProj::Custom { timer, .. } => timer.as_mut().poll(cx),
            SleepProj::Never => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod scan;

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock running twice as fast as tokio's, from `origin`.
    struct Double(Instant);

    impl Environment for Double {
        fn fill(&self, bytes: &mut [u8]) {
            bytes.fill(7);
        }
        fn wall_clock_ms(&self) -> u64 {
            0
        }
        fn now(&self) -> Instant {
            self.0 + Instant::now().duration_since(self.0) * 2
        }
        fn sleep_until(&self, deadline: Instant) -> Timer {
            let real = self.0 + deadline.saturating_duration_since(self.0) / 2;
            Box::pin(tokio::time::sleep_until(real))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_custom_clock_drives_reads_timers_and_timeouts() {
        let origin = Instant::now();
        let clock = Clock::of(Some(&(Arc::new(Double(origin)) as Arc<dyn Environment>)));
        clock.sleep(Duration::from_secs(10)).await;
        assert_eq!(Instant::now() - origin, Duration::from_secs(5));
        assert_eq!(clock.now() - origin, Duration::from_secs(10));
        let never = std::future::pending::<()>();
        assert_eq!(clock.timeout(Duration::from_secs(4), never).await, Err(Elapsed));
        assert_eq!(Instant::now() - origin, Duration::from_secs(7));
        assert_eq!(clock.timeout(Duration::from_secs(4), async { 3 }).await, Ok(3));
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_resets_in_place_and_saturates_far_deadlines() {
        let clock = Clock::Tokio;
        let origin = clock.now();
        let timer = clock.sleep(Duration::from_secs(100));
        tokio::pin!(timer);
        timer.as_mut().reset(origin + Duration::from_secs(1));
        timer.await;
        assert_eq!(clock.now() - origin, Duration::from_secs(1));
        assert!(clock.deadline(Duration::MAX) > clock.now());
    }

    #[tokio::test(start_paused = true)]
    async fn a_custom_timer_re_arms_on_its_own_clock_and_an_unarmed_one_never_fires() {
        let origin = Instant::now();
        let clock = Clock::of(Some(&(Arc::new(Double(origin)) as Arc<dyn Environment>)));
        let timer = clock.sleep(Duration::from_secs(100));
        tokio::pin!(timer);
        timer.as_mut().reset(origin + Duration::from_secs(4));
        timer.await;
        assert_eq!(Instant::now() - origin, Duration::from_secs(2));
        assert!(!clock.is_tokio() && Clock::Tokio.is_tokio());
        let unarmed = clock.sleep_until_if(false, origin);
        assert_eq!(
            Clock::Tokio.timeout(Duration::from_secs(60), unarmed).await,
            Err(Elapsed)
        );
        clock.sleep_until_if(true, origin).await;
    }

    #[test]
    fn later_never_overflows() {
        let now = Instant::now();
        assert_eq!(later(now, Duration::from_secs(1)), now + Duration::from_secs(1));
        assert!(later(now, Duration::MAX) > now);
    }
}
