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
//! The crate is built in layers, one folder each; each file imports only from the layers below it.
//!
//! 1. **`api/`, the public API.** [`Lock`] (`lock.rs`): one request for every kind of lock, with
//!    this call's wait and attempts, sent by `acquire`, `try_acquire` or `with`; [`Quorlock`]
//!    (`client/`: the handle, building it, the one acquire path of every kind, and the
//!    [`Guard`]); the lock [`kinds`] (plain, reentrant [`LockOwner`], multi-resource, fair
//!    [`Ticket`], semaphore, read-write, and fencing around the plain lock or the write), each a
//!    value of one trait (`kinds/kind.rs`) that supplies its keys, its acquire call, how a reply
//!    reads, how it waits and its hold's extend and release, and never sees the client; each kind's
//!    file also declares its scripts and the [`Lock`] method that asks for it (`client/request.rs`
//!    carries the choice to the acquire path); work under
//!    a lock (`with_lock.rs`, [`LockHandle`]); [`Quorlock::release_token`] (`by_token.rs`);
//!    [`Inspection`], [`SemaphoreInspection`] and [`RwInspection`] (`inspect/`); [`FencedStore`]
//!    (`fenced_store.rs`), a resource that rejects stale fencing tokens.
//! 2. **`mechanisms/`, each written once, each taking only what it needs:**
//!    - `round.rs`: the one round driver. It fans out to every master, admits each reply's vote by
//!      one rule, feeds a count of the replies (the core's tally, or one per lock for the
//!      watchdog's batch), returns at the decision, and leaves the slower masters' requests to a
//!      task. Acquire, the fenced rounds, extend and the watchdog's batch all run through it;
//!    - `release.rs`: release everywhere, with drop safety (`ReleaseOnDrop`);
//!    - `retry/`: the retry loop, and its policies (`retry/policy.rs`): a jittered delay, a release
//!      announcement, a message naming the waiter, or the lock's expiry on a majority;
//!    - `watchdog/`: the renewal schedule, and each tick's batch (`watchdog/batch.rs`);
//!    - `pubsub.rs`: the hub that hears release announcements once per process;
//!    - `health/`: who may vote (identity, persistence, eviction, restart grace), and its checks;
//!    - `fencing.rs`: repair of masters that lost their fencing counter;
//!    - `lease.rs`: a held lock's shared state; `ops.rs`: how a kind extends and releases;
//!    - `coalesce.rs` (the local queue), `background.rs` (tasks [`Quorlock::settle`] waits for),
//!      `fanout.rs` (the one tool that runs requests side by side), and [`config`], checked once
//!      at `build()`.
//! 3. **`seam/`, the one interface to a master.** [`seam`] sends a command and gets a reply or a
//!    classified error within a timeout, sends a batch, subscribes. `redis_rs.rs` is its redis-rs
//!    implementation (with `tls.rs`); `link.rs` reads replies into what they mean for a lock, once
//!    for every implementation, sends every script by SHA1, and sends each master the native
//!    commands its server offers; `clock/` is the one clock; `token.rs` the random identities.
//! 4. **`core/`: every decision, pure.** No tokio, no redis: quorum, drift and validity, the
//!    tally, the round's error and retryability, the release verdict, the expiry majority, what
//!    the client knows of each master and whose votes it admits, each server's native commands,
//!    backoff and the give-up rule, the renewal schedule, fencing arithmetic and repair, and each
//!    kind's rules. Property tests drive it directly.
//! 5. **`base/`, the ground floor:** `names.rs` (keys, channels, TTL arguments), `lua.rs` (every
//!    script, as a static with its SHA1), [`error`], [`metrics`].
//!
//! One clock runs through all of it (`seam/clock/`): tokio's [`Instant`](tokio::time::Instant) by
//! default, so a paused tokio clock drives every timeout, wait, renewal and validity; or the clock
//! of an application's [`seam::Environment`] (the deterministic simulation gives each client its
//! own rate, and stops its timers while it is paused).
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
//! operators), and [`Lock::fenced`] hands out fencing tokens backed by a majority that
//! never go backwards, however long a holder pauses, so that a resource such as [`FencedStore`]
//! can reject a paused holder's late writes. [`safety`] (`docs/safety.md`) states which failures
//! are covered, which are detected, and which are out of model.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod api;
mod base;
mod core;
mod mechanisms;
pub mod seam;

pub use api::kinds;
pub use base::{error, metrics};
pub use mechanisms::config;

pub use api::client::{Guard, Quorlock};
pub use api::fenced_store::{FencedError, FencedStore, DEFAULT_FENCE_SUFFIX};
pub use api::inspect::kinds::{ReadersState, RwInspection, SemaphoreInspection};
pub use api::inspect::{Holding, Inspection, MasterState};
pub use api::lock::Lock;
pub use api::with_lock::LockHandle;
pub use config::{Config, QuorlockBuilder};
pub use error::{
    AcquireError, BuildError, ExtendError, InputError, NodeErrorKind, NodeFailure, PermitsError,
    ReleaseError, Released, WithLockError,
};
pub use kinds::{FairOptions, LockOwner, Ticket};
pub use mechanisms::health::{HealthSnapshot, Ignored, MasterHealth};
pub use mechanisms::watchdog::{KeepAlive, WatchdogStats};

#[doc = include_str!("../docs/safety.md")]
pub mod safety {}

/// The README's examples, compiled as doctests so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
