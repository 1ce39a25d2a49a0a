//! The public API: what users call, built on the mechanisms below it.
//!
//! [`Lock`](crate::Lock) (`lock.rs`) is one request for every kind of lock; [`Quorlock`](crate::Quorlock)
//! (`client/`) is the handle, its build, the one acquire path and the guard; `kinds/` holds each
//! lock kind as a value of one trait, with its scripts and its builder method; `with_lock.rs` runs work under a lock; `by_token.rs`
//! releases by token; `inspect/` reads what the masters hold; `fenced_store.rs` is a resource that
//! rejects stale fencing tokens.

pub(crate) mod by_token;
pub(crate) mod client;
pub(crate) mod fenced_store;
pub(crate) mod inspect;
pub mod kinds;
pub(crate) mod lock;
pub(crate) mod with_lock;
