//! The ground floor that every layer may use: key and channel names, the Lua scripts and their
//! calls by SHA1, the error types and the metrics.

pub mod error;
pub(crate) mod lua;
pub mod metrics;
pub(crate) mod names;
