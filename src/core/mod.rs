//! The sans-IO heart of quorlock: everything that decides, nothing that talks.
//!
//! This module has no tokio and no redis imports. Time comes in as an argument (`now: Instant`) and
//! randomness through an injected [`rand::Rng`], so every decision here is deterministic and can be
//! driven by property tests without a single Redis master:
//!
//! - [`timing`]: quorum size, clock-drift allowance and validity arithmetic (checked, never wrapping);
//! - [`tally`]: the acquisition tally, a state machine that decides as soon as the outcome is certain;
//! - [`backoff`]: retry delays with bounded jitter, and the retry plan bounded by count and deadline;
//! - [`fencing`]: fencing-token arithmetic, counter repair, and the model that proves tokens monotonic;
//! - [`renewal`]: the watchdog's schedule (interval, shared ticks, capped holds) and its verdicts.

pub mod backoff;
pub mod fencing;
pub mod renewal;
pub mod tally;
pub mod timing;

pub use backoff::{Backoff, BackoffError, RetryPlan};
pub use tally::{Decision, Failure, Tally, Vote};
pub use timing::{drift, quorum, validity, Timing, TimingError};
