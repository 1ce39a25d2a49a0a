//! A simulated Redis/Valkey master for deterministic simulation: the real quorlock client runs
//! against these instead of `redis-server` processes, and the simulation owns every clock,
//! message and fault. A master keeps an in-memory keyspace (strings, hashes, sorted sets, with
//! per-key expiry on the master's own clock), answers the commands quorlock and its scripts send
//! with the replies a real server gives (as `redis::Value`, errors included), and runs quorlock's
//! real Lua scripts in an embedded Lua 5.1.
//!
//! Module map:
//! - [`master`]: [`SimMaster`], the public face: `execute`, `restart`, `expire_due`, `keys`.
//! - [`config`]: [`MasterConfig`], [`Flavor`] (Redis 7.0, Valkey 8.1, Valkey 9.1), [`Persistence`].
//! - [`reply`]: [`Reply`] (the value and the messages published) and the shared error texts.
//! - `server`: the state commands and scripts share; `keyspace`, `zset`: the data.
//! - `commands`: the command table (names, arity, `COMMAND INFO`); `exec`: the dispatcher.
//! - `strings`, `hashes`, `zsets`, `admin`: the commands, by family.
//! - `lua`: the script engine (sandbox, `redis.call`, conversions, cache by SHA1).
//! - `numfmt`, `glob`: numbers and patterns as Redis reads and writes them.
//!
//! The deterministic simulation of the real client around these masters:
//! - [`run`]: one seed end to end on tokio's paused clock ([`run::run_seed`]).
//! - [`world`]: the masters, the store and the network on one task; [`wire`]: what crosses it.
//! - [`client`]: quorlock's `Master` seam and a store connection over the simulated network.
//! - [`env`]: each client's seeded randomness and clocks (quorlock's `Environment`); [`clock`]:
//!   each client's monotonic clock, at its own rate, stopped while the client is paused.
//! - [`fault`]: the faults and their seeded plan; [`controls`]: the negative controls.
//! - [`workload`]: what the clients do, and their records; `hold`: what a holder does inside its
//!   hold (witness writes, keep-alive, extend); [`checks`]: what must hold.
//! - [`report`]: many seeds, their totals and the JSON report.

mod admin;
pub mod checks;
pub mod client;
pub mod clock;
mod commands;
pub mod config;
pub mod controls;
pub mod env;
pub mod error;
mod exec;
pub mod fault;
mod glob;
mod hashes;
mod hold;
mod keyspace;
mod lua;
pub mod master;
mod numfmt;
pub mod reply;
pub mod report;
pub mod run;
mod server;
mod strings;
pub mod wire;
pub mod workload;
pub mod world;
mod zset;
mod zsets;

pub use config::{Flavor, MasterConfig, Persistence};
pub use error::SimError;
pub use lua::sha1_hex;
pub use master::SimMaster;
pub use reply::Reply;
pub use server::SubscriberCount;
