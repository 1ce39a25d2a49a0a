//! A simulated client's randomness and wall clock, handed to quorlock through its
//! `Environment` hook: lock tokens, owner and ticket ids and retry jitter come from a generator
//! seeded by the run's seed and the client's number, and the wall clock (a fair ticket's stamp)
//! is the paused tokio clock plus the client's own offset. One seed, one sequence of draws.

use std::sync::Mutex;

use quorlock::seam::Environment;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

/// One client's environment.
#[derive(Debug)]
pub struct SimEnv {
    rng: Mutex<StdRng>,
    start: Instant,
    wall_base_ms: u64,
}

impl SimEnv {
    /// The environment of a client whose generator is seeded with `seed`, whose wall clock reads
    /// `wall_base_ms` at `start`.
    pub fn new(seed: u64, start: Instant, wall_base_ms: u64) -> SimEnv {
        SimEnv {
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            start,
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
        let elapsed = Instant::now().saturating_duration_since(self.start).as_millis();
        self.wall_base_ms + u64::try_from(elapsed).unwrap_or(u64::MAX)
    }
}
