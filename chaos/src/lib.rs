//! Chaos harness for quorlock: runs real `redis-server` masters and breaks them on purpose.
//!
//! The crate exists so that the core's integration tests and the chaos runner share one
//! implementation of "start N independent masters and inject faults into them".
//!
//! Module map:
//! - [`error`]: [`HarnessError`], the single error type of the harness.
//! - [`cluster`]: the process backend, one local `redis-server` child per master, with
//!   kill / pause / resume / restart (keeping or wiping data).
//! - [`backend`]: the [`Backend`] trait (kill / pause / resume / restart / urls) shared by
//!   the process cluster and the compose backend.
//! - [`compose`]: [`Compose`], masters as docker compose services.
//! - [`servers`]: [`Server`], which server the masters run (redis-server 7.0, Valkey 8.1 or
//!   9.1), chosen by `QUORLOCK_TEST_SERVER`, and where its binary is.
//! - [`credentials`]: [`Credentials`] and the `redis://` URLs built from them.
//! - [`clock`]: clock jumps emulated by shifting TTLs (works on any Redis).
//! - [`faketime`]: [`FakeClock`], a per-master wall-clock offset via libfaketime.
//! - [`faults`]: [`FaultAction`]s and [`faults::apply`], which injects one into a
//!   [`Backend`], a [`ProxyGroup`], the masters' clocks or the clients.
//! - [`scenario`]: the named, seeded [`Scenario`]s and their pure fault schedules.
//! - [`availability`]: which client group could reach a majority when, derived from the
//!   applied faults; heal times; labelled fault windows.
//! - [`history`]: [`History`] of lock records and fault windows on one [`RunClock`].
//! - [`checker`]: pure verdicts over a history: overlaps, lost updates, liveness, leaks.
//! - [`svg`]: a hand-written SVG timeline of holders per resource with faults shaded.
//! - [`workload`]: concurrent quorlock clients with a read-modify-write witness.
//! - [`runner`]: one run end to end, its checks, verdict and report (text, JSON, SVG).
//! - [`json`]: the small JSON writer behind `--json`.
//! - [`proxy`]: our own TCP proxy per (client group, master) with pass-through, latency,
//!   blackhole and reset modes; [`ProxyGroup`] turns blackholes into partitions.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod availability;
pub mod backend;
pub mod checker;
pub mod clock;
pub mod cluster;
pub mod compose;
pub mod credentials;
pub mod error;
pub mod faketime;
pub mod faults;
pub mod history;
pub mod json;
pub mod proxy;
pub mod runner;
pub mod scenario;
pub mod servers;
pub mod svg;
pub mod workload;

pub use backend::Backend;
pub use cluster::{redis_server_path, Cluster, ClusterOptions, DataMode};
pub use compose::{Compose, ComposeOptions};
pub use credentials::Credentials;
pub use error::HarnessError;
pub use faketime::{libfaketime_path, FakeClock};
pub use faults::{ClientPauses, FaultAction, ScheduledFault};
pub use history::{FaultWindow, History, LockRecord, RunClock};
pub use proxy::{Proxy, ProxyGroup, ProxyMode};
pub use scenario::{Scenario, ScenarioKind, ScheduleParams, SCENARIOS};
pub use servers::Server;
