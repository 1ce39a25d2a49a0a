//! A simulated client's randomness and clocks, handed to quorlock through its `Environment` hook:
//! lock tokens, owner and ticket ids and retry jitter come from a generator seeded by the run's
//! seed and the client's number; the monotonic clock every validity, deadline, renewal and timeout
//! is measured on is the client's own ([`ClientClock`]: its own rate, timers stopped while the
//! client is paused); and the wall clock (a fair ticket's stamp) follows that clock from the
//! client's wall-clock reading at the run start. One seed, one sequence of draws.

use std::sync::Mutex;

use quorlock::seam::{Environment, Timer};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use super::clock::ClientClock;

/// One client's environment.
#[derive(Debug)]
pub struct SimEnv {
    rng: Mutex<StdRng>,
    clock: ClientClock,
    wall_base_ms: u64,
}

impl SimEnv {
    /// The environment of a client whose generator is seeded with `seed`, whose monotonic clock is
    /// `clock` and whose wall clock reads `wall_base_ms` at the clock's start.
    pub fn new(seed: u64, clock: ClientClock, wall_base_ms: u64) -> SimEnv {
        SimEnv {
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            clock,
            wall_base_ms,
        }
    }
}

impl Environment for SimEnv {
    fn fill(&self, bytes: &mut [u8]) {
        self.rng
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .fill_bytes(bytes);
    }

    fn wall_clock_ms(&self) -> u64 {
        let elapsed = self
            .clock
            .now()
            .saturating_duration_since(self.clock.start())
            .as_millis();
        self.wall_base_ms
            .saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
    }

    fn now(&self) -> Instant {
        self.clock.now()
    }

    fn sleep_until(&self, deadline: Instant) -> Timer {
        self.clock.sleep_until(deadline)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;

    fn env(start: Instant, ppm: i64) -> (SimEnv, ClientClock) {
        let clock = ClientClock::new(start, ppm);
        (SimEnv::new(7, clock.clone(), 1_000), clock)
    }

    #[tokio::test(start_paused = true)]
    async fn a_timer_fires_when_the_clients_clock_reaches_its_deadline() {
        let start = Instant::now();
        for ppm in [-4_000, -3, 0, 3, 4_000] {
            let (env, clock) = env(start, ppm);
            let deadline = env.now() + Duration::from_millis(1_234);
            let due = clock.true_at(deadline);
            env.sleep_until(deadline).await;
            // Tokio's timers fire on whole milliseconds: the first one at or after the due instant.
            assert!(
                Instant::now() >= due && Instant::now() - due < Duration::from_millis(1),
                "ppm {ppm}"
            );
            assert!(env.now() >= deadline, "ppm {ppm}");
            // A nanosecond before it was due, the clock read short of the deadline.
            assert!(
                clock.client_at(due - Duration::from_nanos(1)) < deadline,
                "ppm {ppm}"
            );
            // A deadline already passed completes at once.
            assert!(env.sleep_until(deadline).now_or_never().is_some(), "ppm {ppm}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_clocks_follow_the_clients_rate() {
        let start = Instant::now();
        let (fast, _) = env(start, 4_000);
        let (slow, _) = env(start, -4_000);
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert_eq!(fast.now() - start, Duration::from_millis(100_400));
        assert_eq!(slow.now() - start, Duration::from_millis(99_600));
        assert_eq!(fast.wall_clock_ms(), 1_000 + 100_400);
        assert_eq!(slow.wall_clock_ms(), 1_000 + 99_600);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timer_due_during_a_pause_completes_only_after_it() {
        let start = Instant::now();
        let (env, clock) = env(start, 4_000);
        clock.pause(Duration::from_secs(2));
        assert!(clock.is_paused());
        // Due at once, or half a second in: both wait for the pause's end.
        assert!(env.sleep_until(env.now()).now_or_never().is_none());
        env.sleep_until(env.now() + Duration::from_millis(500)).await;
        assert_eq!(Instant::now() - start, Duration::from_secs(2));
        assert!(!clock.is_paused());
        // The clock ran on during the pause: the client sees the time jump.
        assert_eq!(env.now() - start, Duration::from_millis(2_008));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_begun_while_a_timer_waits_holds_it_too() {
        let start = Instant::now();
        let (env, clock) = env(start, 0);
        let timer = env.sleep_until(start + Duration::from_millis(100));
        let pauses = async {
            // A first pause under way when the timer is due, and a second one begun during it.
            clock.pause(Duration::from_millis(300));
            tokio::time::sleep(Duration::from_millis(200)).await;
            clock.pause(Duration::from_millis(500));
        };
        let ((), ()) = tokio::join!(timer, pauses);
        assert_eq!(Instant::now() - start, Duration::from_millis(700));
        // A pause that ends before the timer is due does not delay it.
        clock.pause(Duration::from_millis(50));
        env.sleep_until(env.now() + Duration::from_millis(100)).await;
        assert_eq!(Instant::now() - start, Duration::from_millis(800));
    }
}
