//! The sans-IO heart of quorlock: every decision, nothing that talks.
//!
//! This module has no tokio and no redis imports. Time comes in as an argument (`now: Instant`,
//! read by the callers from tokio's clock, so a paused clock drives every decision) and randomness
//! through an injected [`rand::Rng`], so every decision here is deterministic and is driven by
//! property tests without a single Redis master:
//!
//! - [`timing`]: quorum size, clock-drift allowance and validity arithmetic (checked, never wrapping);
//! - [`tally`]: the acquisition tally, a state machine that decides as soon as the outcome is certain;
//! - [`round`]: what a round that did not win reports, and the check for one server under two names;
//! - [`release`]: the release verdict (released, expired, or unconfirmed);
//! - [`expiry`]: when a held lock frees on a majority, from the masters' PTTLs;
//! - [`handoff`]: a waiting process's place in a key's queue, and how long it sleeps unwoken;
//! - [`admission`]: the restart grace's length, and a start read from a reported uptime;
//! - [`master`]: what the client believes about each master (identity, durability over time,
//!   eviction, replicas, the grace, the fencing state) and the record each master keeps, fed by
//!   reports that can lie, with the model that keeps exclusion and tokens safe through them;
//! - [`capabilities`]: which native commands a master's server offers (Valkey's `DELIFEQ`, `SET IFEQ`);
//! - [`backoff`]: retry delays with bounded jitter, and the retry plan bounded by count and deadline;
//! - [`renewal`]: the watchdog's schedule (interval, shared ticks, capped holds) and its verdicts;
//! - [`fencing`]: fencing-token arithmetic and counter repair, with the model that proves tokens
//!   monotonic (test-only);
//! - [`kinds`]: what a won round's replies mean for a kind beyond the plain lock;
//! - [`semaphore`]: the counting semaphore's slots, its replies and where to aim, with the model
//!   that checks at most `P` holders (and catches majority counting);
//! - [`rwlock`]: the read-write lock's rules on one master, with the model that checks no reader
//!   overlaps a writer and a waiting writer is not starved.

pub mod admission;
pub mod backoff;
pub mod capabilities;
pub mod expiry;
pub mod fencing;
pub mod handoff;
pub mod kinds;
pub mod master;
pub mod release;
pub mod renewal;
pub mod round;
pub mod rwlock;
pub mod semaphore;
pub mod tally;
pub mod timing;

pub use backoff::{Backoff, RetryPlan};
pub use tally::{Decision, Tally, Vote};
pub use timing::{drift, quorum, Timing};
