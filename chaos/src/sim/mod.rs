//! The deterministic simulation: the real quorlock client, through its `seam`, against simulated
//! masters (the emulator in [`master`]) on tokio's paused clock, with every clock, message and
//! fault owned by the simulation and drawn from one seed, so that one seed gives one history.
//!
//! Module map:
//! - [`master`]: the simulated Redis/Valkey master, a folder of its own ([`master::SimMaster`]);
//!   it knows nothing of the simulation around it.
//!
//! The simulation around those masters:
//! - [`run`]: one seed end to end on tokio's paused clock ([`run::run_seed`]).
//! - [`world`]: the masters, the store and the network on one task; [`wire`]: what crosses it.
//! - [`client`]: quorlock's `Master` seam and a store connection over the simulated network.
//! - [`env`](mod@env): each client's seeded randomness and clocks (quorlock's `Environment`); [`clock`]:
//!   each client's monotonic clock, at its own rate, stopped while the client is paused.
//! - [`fault`]: the faults and their seeded plan; [`operations`]: the plan of the operations
//!   (promotions, replacements, `CONFIG SET`, fillers, long scripts, late delivery);
//!   [`durability`]: what a crash keeps; [`fence_watch`]: the fencing counters' ground truth, for
//!   the judge; [`controls`]: the negative controls.
//! - [`profile`]: what a seed's masters and clients are set up with (persistence, memory limits,
//!   replicas, each client's grace, refresh, TTLs and permits, a client started mid-run, shared
//!   names).
//! - [`workload`]: what the clients do; `hold`: what a holder does inside its hold (witness
//!   writes, keep-alive, extend); [`context`]: what both run with ([`context::ClientCtx`]).
//! - [`record`]: what a call leaves behind ([`record::SimRecord`], around the chaos
//!   [`LockRecord`](crate::history::LockRecord)) and the kinds of call ([`record::CallKind`]).
//! - [`checks`]: what must hold, each finding typed with its check ([`checks::Finding`]).
//! - [`report`]: many seeds, their totals and the JSON report.
//! - [`herd`]: the hand-off on one hot key with `W` waiting processes, its cost and latency.
//! - [`error`]: [`SimError`], a run that could not be set up.

pub mod checks;
pub mod client;
pub mod clock;
pub mod context;
pub mod controls;
pub mod durability;
pub mod env;
pub mod error;
pub mod fault;
pub mod fence_watch;
pub mod herd;
mod hold;
pub mod master;
pub mod operations;
pub mod profile;
pub mod record;
pub mod report;
pub mod run;
pub mod wire;
pub mod workload;
pub mod world;

pub use error::SimError;
