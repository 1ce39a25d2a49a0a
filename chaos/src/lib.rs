//! Chaos harness for quorlock: runs real `redis-server` masters and breaks them on purpose.
//!
//! The crate exists so that the core's integration tests and the chaos runner share one
//! implementation of "start N independent masters and inject faults into them".
//!
//! Module map:
//! - [`error`]: [`HarnessError`], the single error type of the harness.
//! - [`cluster`]: the process backend, one local `redis-server` child per master, with
//!   kill / pause / resume / restart (keeping or wiping data).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cluster;
pub mod error;

pub use cluster::{redis_server_path, Cluster, ClusterOptions, DataMode};
pub use error::HarnessError;
