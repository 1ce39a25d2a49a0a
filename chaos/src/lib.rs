//! Chaos harness for quorlock: runs real `redis-server` masters and breaks them on purpose.
//!
//! The crate exists so that the core's integration tests and the chaos runner share one
//! implementation of "start N independent masters and inject faults into them".
//!
//! Module map:
//! - [`error`]: [`HarnessError`], the single error type of the harness.
//! - [`cluster`]: the process backend, one local `redis-server` child per master, with
//!   kill / pause / resume / restart (keeping or wiping data).
//! - `process`: child-process plumbing under the process backend (spawn with a parent-death
//!   signal, stop / continue, kill and reap); the crate's only `unsafe` code lives there.
//! - `server`: one `redis-server` child: finding the program, spawning it, waiting until it
//!   answers PING as itself, its logs; and the direct connections every module uses.
//! - [`backend`]: the [`Backend`] trait (kill / pause / resume / restart / urls) shared by
//!   the process cluster and the compose backend.
//! - [`compose`]: [`Compose`], masters as docker compose services; under it, a run's own
//!   labelled project brought up and always removed (`project`), the label sweep of killed
//!   runs (`sweep`), and clients as containers of their own (`clients`, `wire`, `drive`).
//! - [`servers`]: [`Server`], which server the masters run (redis-server 7.0, Valkey 8.1 or
//!   9.1), chosen by `QUORLOCK_TEST_SERVER`, and where its binary is.
//! - [`credentials`]: [`Credentials`] and the `redis://` URLs built from them.
//! - [`clock`]: clock jumps emulated by shifting TTLs (works on any Redis).
//! - [`faketime`]: [`FakeClock`], a per-master wall-clock offset via libfaketime.
//! - [`faults`]: [`FaultAction`]s and [`faults::apply`], which injects one into a
//!   [`Backend`], a [`ProxyGroup`], the masters' clocks or the clients.
//! - [`scenario`]: the named, seeded [`Scenario`]s and their pure fault schedules.
//! - [`availability`]: which client group could reach a majority when, derived from the
//!   applied faults; heal times; labelled fault windows; the actions that heal what a run left
//!   broken, which both drivers apply.
//! - [`history`]: [`History`] of lock records and fault windows on one [`RunClock`];
//!   [`LockRecord`], the one record of a lock operation every checker and report reads (its
//!   serde form is what a client container writes).
//! - [`checker`]: pure verdicts over a history: overlaps, lost updates, liveness, leaks; the
//!   [`Rule`](checker::Rule) each of a verdict's reasons is about.
//! - `leaks`: the end-of-run scan for lock keys left on the masters, but for the keys quorlock
//!   keeps for good.
//! - [`svg`]: a hand-written SVG timeline of holders per resource with faults shaded.
//! - [`workload`]: concurrent quorlock clients with a read-modify-write witness.
//! - [`run`]: what one run is asked to do ([`RunOptions`]) and what it found ([`RunReport`],
//!   [`Verdict`] and its typed [`Reason`](run::Reason)s): the data the next three layers share.
//! - [`drive`]: one run end to end: masters, witness, proxies, workload, faults on schedule,
//!   the heal and the leak scan; the only layer of a run with IO.
//! - [`verdict`]: pure judgement of what a run collected: the checks and the verdict;
//!   `kinds_verdict` adds the semaphore's and the read-write lock's rules.
//! - [`kinds_workload`]: clients of the semaphore and the read-write lock, and the
//!   majority-counting negative control.
//! - [`opening`]: a negative control's opening round, played in turns so that its
//!   counterexample is built rather than left to timing.
//! - [`report`]: a report as text, a results-table row, JSON or an SVG timeline; the
//!   semaphore's and the read-write lock's part in `kinds_report`, the JSON pieces both use in
//!   `json_parts`.
//! - [`skip`]: a test that cannot run here says why, and fails instead where the run requires
//!   what is missing.
//! - [`proxy`]: our own TCP proxy per (client group, master) with pass-through, latency,
//!   blackhole and reset modes; [`ProxyGroup`] turns blackholes into partitions.
//! - [`sim`]: the deterministic simulation: the real client against simulated masters on a
//!   paused clock, one seed one history; the simulated Redis/Valkey master, a folder of its own,
//!   is [`sim::master`], and the simulation around it (world, faults, clients, workload, checks,
//!   runs of many seeds) the rest of `sim`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod availability;
pub mod backend;
pub mod checker;
pub mod clock;
pub mod cluster;
pub mod compose;
pub mod credentials;
pub mod drive;
pub mod error;
pub mod faketime;
pub mod faults;
pub mod history;
mod json_parts;
mod kinds_report;
mod kinds_verdict;
pub mod kinds_workload;
mod leaks;
pub mod opening;
mod process;
pub mod proxy;
pub mod report;
pub mod run;
pub mod scenario;
mod server;
pub mod servers;
pub mod sim;
pub mod skip;
pub mod svg;
pub mod verdict;
pub mod workload;

pub use backend::Backend;
pub use cluster::{Cluster, ClusterOptions, DataMode};
pub use compose::{Compose, ComposeOptions};
pub use credentials::Credentials;
pub use error::HarnessError;
pub use faketime::{libfaketime_path, FakeClock};
pub use faults::{ClientPauses, FaultAction, ScheduledFault};
pub use history::{FaultWindow, History, LockRecord, RunClock};
pub use proxy::{Existing, Proxy, ProxyGroup, ProxyMode};
pub use run::{Kind, RunOptions, RunReport, Verdict};
pub use scenario::{Scenario, ScenarioKind, ScheduleParams, SCENARIOS};
pub use server::redis_server_path;
pub use servers::Server;
