//! Lock kinds beyond the plain lock, each decided by the same quorum as the plain lock.
//!
//! - [`reentrant`](crate::Lock::reentrant): an explicit [`LockOwner`] may hold the lock
//!   several times at once; each hold is released separately, and the last release frees it.
//! - [`multi`](crate::Quorlock::lock_all): a set of resources taken all-or-nothing by one
//!   atomic script per master, so overlapping sets taken in different orders cannot deadlock.
//! - [`fair`](crate::Lock::fair): waiters are served in the order of their
//!   [`Ticket`]s, kept in a queue on every master.
//! - [`fenced`](crate::Lock::fenced): a plain lock that comes with a fencing token
//!   backed by a majority, so a resource can refuse a paused holder's late writes.
//! - [`semaphore`](crate::Quorlock::semaphore): at most `permits` holders at once, each permit a
//!   lock on one of `permits` slot keys.
//! - [`read`](crate::Quorlock::read) and [`write`](crate::Quorlock::write): a read-write lock,
//!   any number of readers or one writer, with writer preference.
//!
//! Every kind returns the ordinary [`Guard`](crate::Guard): validity, extend, release and release on
//! drop work the same for all of them, because each kind is a value of one trait (`kind.rs`) that
//! only supplies its keys, its acquire call, how a reply reads, how it waits and its own extend and
//! release commands; the checks, the round, the retry loop and release are the client's, written
//! once (`client/acquire.rs`).
//!
//! A kind's file holds all of the kind: the value above, its scripts (declared with `lua!`, their
//! text in `src/scripts/`), and the method of [`Lock`](crate::Lock) that asks for it, which sets the
//! request's kind to a small value the request carries until it is sent (`client/request.rs`). A
//! new kind is that file, a `mod` line here, its scripts and its tests.
//!
//! # Keys
//! A multi-resource lock uses the plain lock's keys (the resource names with the configured prefix),
//! so it excludes plain locks on any of its resources, and the other way round. The reentrant and
//! fair kinds keep their state in keys of their own, derived from the resource name
//! (`prefix + REENTRANT_TAG + resource`, `prefix + FAIR_TAG + resource`, and so on), so plain locks keep
//! their wire format and stay interoperable with other RedLock clients. A consequence: a reentrant
//! or fair lock on `r` does not exclude a plain lock on `r`; use one kind per resource.
//!
//! The fair lock's scripts read the master's clock (`TIME`) before writing, which needs Redis 5 or
//! later (effects replication); the other kinds run on any Redis with Lua scripting.

pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod kind;
pub(crate) mod multi;
pub(crate) mod plain;
pub(crate) mod reentrant;
pub(crate) mod rwlock;
pub(crate) mod semaphore;

pub use fair::{FairOptions, Ticket, DEFAULT_FAIR_HEARTBEAT};
pub use reentrant::LockOwner;

pub use crate::base::names::{
    FAIR_DEADLINES_SUFFIX, FAIR_QUEUE_SUFFIX, FAIR_TAG, PERMITS_SUFFIX, REENTRANT_TAG, RWLOCK_TAG,
    RW_READERS_SUFFIX, RW_WAITING_SUFFIX, SEMAPHORE_TAG, SLOT_INFIX,
};
pub use crate::core::semaphore::MAX_PERMITS;
