//! The simulated Redis/Valkey master: the server the deterministic simulation runs in place of
//! `redis-server`. It is a folder of its own, apart from the simulation around it (the world,
//! the network, the clients, the faults, the checks), because it knows nothing of them: it is
//! given its clock on every call and answers as a real server would, so it is read, tested
//! against a real server (`tests/sim_master.rs`) and changed on its own.
//! A master keeps an in-memory keyspace (strings, hashes, sorted sets, with per-key expiry on the
//! master's own clock), answers the commands quorlock and its scripts send with the replies a real
//! server gives (as `redis::Value`, errors included), and runs quorlock's real Lua scripts in an
//! embedded Lua 5.1.
//!
//! Module map:
//! - `sim_master`: [`SimMaster`], the public face: `execute`, `restart`, `expire_due`, `keys`, and
//!   what operations do to a server (snapshots of its data, a restart from one, a promotion).
//! - [`config`]: [`MasterConfig`], [`Flavor`] (Redis 7.0, Valkey 8.1, Valkey 9.1), [`Persistence`],
//!   [`EvictionPolicy`].
//! - [`reply`]: [`Reply`] (the value and the messages published) and the shared error texts.
//! - [`error`]: [`MasterError`], a master that could not be built or restarted.
//! - `server`: the state commands and scripts share; `keyspace`, `zset`: the data; `memory`: the
//!   memory limit, eviction and `OOM`; `samples`: the seeded generator of eviction samples.
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
mod memory;
mod numfmt;
pub mod reply;
mod samples;
mod server;
mod sim_master;
mod strings;
mod zset;
mod zsets;

pub use config::{EvictionPolicy, Flavor, MasterConfig, Persistence};
pub use error::MasterError;
pub use lua::sha1_hex;
pub use memory::BASE_USED;
pub use reply::Reply;
pub use server::SubscriberCount;
pub use sim_master::{SimMaster, Snapshot};
