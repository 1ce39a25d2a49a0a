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

mod admin;
mod commands;
pub mod config;
pub mod error;
mod exec;
mod glob;
mod hashes;
mod keyspace;
mod lua;
pub mod master;
mod numfmt;
pub mod reply;
mod server;
mod strings;
mod zset;
mod zsets;

pub use config::{Flavor, MasterConfig, Persistence};
pub use error::SimError;
pub use lua::sha1_hex;
pub use master::SimMaster;
pub use reply::Reply;
pub use server::SubscriberCount;
