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
//! The crate is built in layers; each file imports only from the layers below it.
//!
//! 1. **Public API.** [`Lock`] (`lock`): one request for every kind of lock, with this call's wait
//!    and attempts, sent by `acquire`, `try_acquire` or `with`; [`Quorlock`] (`client/`: the
//!    handle, building it, the plain acquire, and the [`Guard`]); the lock [`kinds`] (reentrant
//!    [`LockOwner`], multi-resource, fair [`Ticket`], fenced, semaphore, read-write); work under a
//!    lock (`with_lock`, [`LockHandle`]); [`Quorlock::release_token`]
//!    (`by_token`); [`Inspection`] (`inspect`), and [`SemaphoreInspection`] and [`RwInspection`]
//!    (`inspect_kinds`); [`FencedStore`] (`fenced_store`), a resource that
//!    rejects stale fencing tokens. A kind is a value of one trait (`kinds/kind.rs`): it supplies
//!    its keys, its acquire call, how a reply reads, how it waits and its hold's extend and
//!    release, and one generic path (`client/acquire.rs`) does the checks, the local queue, the
//!    retry, the round and the guard for every kind. Fencing wraps a kind (`kinds/fenced.rs`).
//! 2. **Mechanisms, each written once, each taking only what it needs:**
//!    - `round`: the one round driver. It fans out to every master, admits each reply's vote by
//!      one rule, feeds a count of the replies (the core's tally, or one per lock for the
//!      watchdog's batch), returns at the decision, and leaves the slower masters' requests to a
//!      task. Acquire, the fenced rounds, extend and the watchdog's batch all run through it;
//!    - `release`: release everywhere, with drop safety (`ReleaseOnDrop`);
//!    - `retry`: the retry loop, and its policies (`retry/policy.rs`): a jittered delay, a release
//!      announcement, or the lock's expiry on a majority;
//!    - `watchdog`: the renewal schedule, and each tick's batch (`watchdog/batch.rs`);
//!    - `pubsub`: the hub that hears release announcements once per process;
//!    - `health`: who may vote (identity, persistence, restart grace), and its checks;
//!    - `fence`: repair of masters that lost their fencing counter;
//!    - `lease`: a held lock's shared state; `ops`: how a kind extends and releases;
//!    - `coalesce` (the local queue), `background` (tasks [`Quorlock::settle`] waits for), `fanout`.
//! 3. **The seam at the masters.** [`seam`] is the one interface to a master: send a command and get
//!    a reply or a classified error within a timeout, send a batch, subscribe. `node` is its
//!    redis-rs implementation (with `tls`); `link` reads replies into what they mean for a lock,
//!    once for every implementation, and sends each master the native commands its server offers.
//!    [`config`] is checked once at `build()`.
//! 4. **`core`: every decision, pure.** No tokio, no redis: quorum, drift and validity, the
//!    tally, the round's error, the release verdict, the expiry majority, the restart-grace
//!    admission, each server's native commands, backoff, the renewal schedule, fencing arithmetic,
//!    and each kind's rules.
//!    Property tests drive it directly.
//! 5. **Ground floor:** `names` (keys, channels, TTL arguments), `lua` (every script, and calls by
//!    SHA1), [`error`], `token` (random identities).
//!
//! One clock runs through all of it (`clock`): tokio's [`Instant`](tokio::time::Instant) by
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

mod background;
mod by_token;
mod client;
mod clock;
mod coalesce;
pub mod config;
mod core;
pub mod error;
mod fanout;
mod fence;
mod fenced_store;
mod health;
mod inspect;
mod inspect_kinds;
pub mod kinds;
mod lease;
mod link;
mod lock;
mod lua;
pub mod metrics;
mod names;
mod node;
mod ops;
mod pubsub;
mod release;
mod retry;
mod round;
pub mod seam;
mod tls;
mod token;
mod watchdog;
mod with_lock;

pub use client::{Guard, Quorlock};
pub use config::{Config, QuorlockBuilder};
pub use error::{
    AcquireError, BuildError, ExtendError, InputError, NodeErrorKind, NodeFailure, PermitsError,
    ReleaseError, Released, WithLockError,
};
pub use fenced_store::{FencedError, FencedStore, DEFAULT_FENCE_SUFFIX};
pub use health::{HealthSnapshot, Ignored, MasterHealth};
pub use inspect::{Holding, Inspection, MasterState};
pub use inspect_kinds::{ReadersState, RwInspection, SemaphoreInspection};
pub use kinds::{FairOptions, LockOwner, Ticket};
pub use lock::Lock;
pub use watchdog::{KeepAlive, WatchdogStats};
pub use with_lock::LockHandle;

#[doc = include_str!("../docs/safety.md")]
pub mod safety {}

/// The README's examples, compiled as doctests so the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
