//! quorlock: distributed locks over N independent Redis masters (the RedLock algorithm), decided at
//! quorum, released everywhere, and tested under faults.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use quorlock::Quorlock;
//!
//! let locks = Quorlock::builder()
//!     .nodes(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
//!     .build()
//!     .await?;
//! let guard = locks.acquire("orders:42", Duration::from_secs(10)).await?;
//! // ... the critical section, finished well inside guard.validity() ...
//! guard.extend(Duration::from_secs(10)).await?;
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! # Module map
//! - [`core`]: the sans-IO logic (quorum, drift and validity arithmetic, the acquisition tally,
//!   backoff with jitter). No tokio, no redis; time and randomness are passed in.
//! - `node`: one master's connection, its per-node timeout, and error classification.
//! - [`Quorlock`] (`coordinator`): the fan-out, the decision, release of partial acquisitions,
//!   retries, and cancel safety.
//! - [`Guard`] (`guard`): a held lock's validity, extend, release, and release on drop.
//! - `ops`: the extend and release commands each kind of lock supplies.
//! - [`kinds`]: reentrant ([`LockOwner`]), multi-resource (all-or-nothing) and fair (FIFO,
//!   [`Ticket`]) locks over the same quorum, each returning an ordinary [`Guard`].
//! - `wait`: blocking waits woken by the holder's release announcement (one pub/sub connection
//!   per master, shared by the process), with a fallback timer at the key's expiry.
//! - `background`: the lock traffic left to tasks (slower masters, dropped guards), which
//!   [`Quorlock::settle`] waits for before a process exits.
//! - `coalesce`: the local queue that lets one waiter per resource and process contend remotely.
//! - `by_token`: [`Quorlock::release_token`], releasing a lock by resource and token without its guard.
//! - [`Inspection`] (`inspect`): a read-only look at one lock on every master.
//! - `watchdog`: one renewal scheduler per [`Quorlock`] that keeps guards alive ([`KeepAlive`]),
//!   batching the renewals of all held locks into one pipeline per master per tick.
//! - `with_lock`: [`Quorlock::with_lock`], work run under a kept-alive lock and cancelled if it is
//!   lost ([`LockHandle`]).
//! - [`config`]: every setting with its documented default, checked once at `build()`.
//! - [`error`]: one typed error per operation.
//! - `fencing`: fenced acquisition ([`Quorlock::acquire_fenced`]), issuing quorum-backed fencing
//!   tokens that never go backwards, and the repair of masters that lost their counter.
//! - [`FencedStore`] (`fenced_store`): a resource kept in Redis that rejects stale tokens.
//! - `tls`: `rediss://` masters over rustls, behind the `tls` feature.
//! - `health`: each master's `run_id`, uptime and persistence; votes of a master restarted within
//!   the grace period without `appendfsync always` are ignored (the delayed restart, enforced).
//!
//! # Safety argument, in short
//! Mutual exclusion holds while the holder finishes inside its validity, provided clock drift
//! between processes stays below the drift allowance (`ttl * 0.01 + 2 ms` by default) and no master
//! loses a key while it is held (run masters with `appendfsync always`, or delay a wiped master's
//! restart beyond the longest TTL). A holder that pauses past its validity (GC, SIGSTOP, swap) is not
//! protected by RedLock alone. See the README for the full statement.
//!
//! Beyond RedLock: the client itself keeps a master that restarted without `appendfsync always`
//! out of every majority for the longest TTL in use (the delayed restart the spec leaves to
//! operators), and [`Quorlock::acquire_fenced`] hands out fencing tokens backed by a majority that
//! never go backwards, however long a holder pauses, so that a resource such as [`FencedStore`]
//! can reject a paused holder's late writes. `docs/safety.md` states which failures are covered,
//! which are detected, and which are out of model.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod background;
mod by_token;
mod coalesce;
pub mod config;
mod coordinator;
pub mod core;
pub mod error;
mod fanout;
mod fenced_store;
mod fencing;
mod guard;
mod health;
mod inspect;
pub mod kinds;
mod lua;
mod node;
mod ops;
mod tls;
mod token;
mod wait;
mod watchdog;
mod with_lock;

pub use config::{Config, QuorlockBuilder};
pub use coordinator::Quorlock;
pub use error::{
    AcquireError, BuildError, ExtendError, InputError, NodeErrorKind, NodeFailure, ReleaseError, Released,
    WithLockError,
};
pub use fenced_store::{FencedError, FencedStore, DEFAULT_FENCE_SUFFIX};
pub use guard::Guard;
pub use inspect::{Holding, Inspection, MasterState};
pub use kinds::{FairOptions, LockOwner, Ticket};
pub use wait::{MAX_FALLBACK_WAIT, PUBSUB_RECONNECT_DELAY};
pub use watchdog::{KeepAlive, WatchdogStats, RENEWAL_CONNECTION_RECYCLE, RENEWAL_TIME_ALLOWANCE};
pub use with_lock::LockHandle;

/// The README's examples, compiled as doctests so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
