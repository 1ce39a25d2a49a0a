//! The client: [`Quorlock`], the handle every public operation starts from, and what its clones
//! share.
//!
//! The handle owns the mechanisms and hands each only what it needs: the masters and their health
//! to a round, the masters and the background tasks to a release, the pub/sub hub to a wait, the
//! masters and the configuration to the watchdog. Its fields are private to this module; the lock
//! kinds never see it: they get a narrow context (`kinds/kind.rs`). Building is in `build.rs`, the
//! one acquire path of every kind in `acquire.rs`, how a request carries its kind to it in
//! `request.rs` (a kind sees the request, never the handle), and the held lock in `guard.rs`.

mod acquire;
mod build;
mod guard;
pub(crate) mod request;

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::base::error::InputError;
use crate::base::names::Names;
use crate::core::{quorum, Timing};
use crate::mechanisms::background::Background;
use crate::mechanisms::coalesce::LocalQueue;
use crate::mechanisms::config::Config;
use crate::mechanisms::health::{Health, HealthSnapshot};
use crate::mechanisms::lease::Lease;
use crate::mechanisms::ops::LockOps;
use crate::mechanisms::pubsub::Waits;
use crate::mechanisms::release::Release;
use crate::mechanisms::round::Round;
use crate::mechanisms::watchdog::{Watchdog, WatchdogStats};
use crate::seam::clock::Clock;
use crate::seam::link::Masters;
use crate::seam::token::Entropy;

pub use guard::Guard;

/// A handle to N independent Redis masters that hands out locks decided by majority.
///
/// Cheap to clone: clones share the connections (one per master for the whole process).
#[derive(Clone, Debug)]
pub struct Quorlock {
    pub(crate) inner: Arc<Inner>,
}

/// What the handle and every guard share.
#[derive(Debug)]
pub(crate) struct Inner {
    masters: Arc<Masters>,
    config: Arc<Config>,
    names: Names,
    /// Each master's identity and durability, and whose votes count.
    health: Arc<Health>,
    /// The renewal scheduler of every kept-alive guard.
    watchdog: Watchdog,
    /// The release listeners of blocked acquires.
    waits: Waits,
    /// The local turns of this process's waiters, per key.
    queue: LocalQueue,
    /// Lock traffic left to tasks (slower masters, dropped guards), for [`Quorlock::settle`].
    background: Background,
    /// Where tokens, ids and jitter come from.
    entropy: Entropy,
}

impl Quorlock {
    /// The checked configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The number of masters.
    pub fn masters(&self) -> usize {
        self.inner.masters.len()
    }

    /// The number of masters that make a majority.
    pub fn quorum(&self) -> usize {
        quorum(self.inner.masters.len())
    }

    /// Each master's health, from what this client already knows (nothing is sent): whether its
    /// votes count now and why not (unreachable, unverified since a reconnect, within the restart
    /// grace), how long until they count again, whether its fencing counter awaits repair, its
    /// last fault and its last round trip.
    ///
    /// ```no_run
    /// # fn run(locks: quorlock::Quorlock) {
    /// let health = locks.health();
    /// for master in &health.masters {
    ///     if let Some(why) = master.ignored {
    ///         eprintln!("{}: votes ignored ({why:?}), last error: {:?}", master.addr, master.last_error);
    ///     }
    /// }
    /// assert!(health.counting() <= health.masters.len());
    /// # }
    /// ```
    pub fn health(&self) -> HealthSnapshot {
        self.inner.health.snapshot(&self.inner.masters)
    }

    /// The watchdog's counters.
    pub fn watchdog_stats(&self) -> WatchdogStats {
        self.inner.watchdog.stats()
    }

    /// Waits until the lock traffic this client handed to background tasks has finished: the
    /// requests of won rounds to masters slower than the majority, the rest of releases a
    /// majority already confirmed, releases of dropped guards and abandoned acquires, and fair
    /// waiters leaving their queue. Returns at once when there is none.
    ///
    /// Call it before the process exits, once this client's work is done, so that no key is left
    /// on a slow master to expire with its TTL and every master that grants a plain lock gets it
    /// (a fenced round drops its requests to the slower masters instead). Every such task is
    /// bounded by a few node timeouts, so this returns within a few node timeouts unless other
    /// tasks keep locking meanwhile (it waits for their background work too). The tasks run on the
    /// runtime the lock calls ran on, which must keep running meanwhile. It neither releases held
    /// guards nor stops their watchdogs: release them first.
    ///
    /// ```no_run
    /// # async fn run(locks: quorlock::Quorlock) -> Result<(), Box<dyn std::error::Error>> {
    /// # use std::time::Duration;
    /// let guard = locks.acquire("nightly-report", Duration::from_secs(60)).await?;
    /// // ... the job ...
    /// guard.release().await?; // returns once a majority confirmed
    /// locks.settle().await; // the slower masters too, before the process ends
    /// # Ok(()) }
    /// ```
    pub async fn settle(&self) {
        self.inner.background.settled().await;
    }
}

impl Inner {
    /// The masters, in configured order.
    pub(crate) fn masters(&self) -> &Arc<Masters> {
        &self.masters
    }

    /// The keys and channels of this client.
    pub(crate) fn names(&self) -> &Names {
        &self.names
    }

    /// The clock every deadline, validity and wait of this client is measured on.
    pub(crate) fn clock(&self) -> &Clock {
        &self.config.clock
    }

    /// Where lock traffic left to tasks is counted.
    pub(crate) fn background(&self) -> &Background {
        &self.background
    }

    /// The round over this client's masters.
    pub(crate) fn round(&self) -> Round<'_> {
        Round {
            masters: &self.masters,
            health: &self.health,
            background: &self.background,
            node_timeout: self.config.node_timeout,
            clock: &self.config.clock,
            names: &self.names,
        }
    }

    /// The release over this client's masters.
    pub(crate) fn release(&self) -> Release<'_> {
        Release {
            masters: &self.masters,
            background: &self.background,
        }
    }

    /// Checks a TTL against the configuration, with `lock_delay` or the configured delay, and
    /// remembers the key's life (the TTL plus the delay) for the restart grace: a master that lost
    /// its keys must wait out every key's life, not only its holder's validity.
    pub(crate) fn check_ttl(
        &self,
        ttl: Duration,
        lock_delay: Option<Duration>,
    ) -> Result<Timing, InputError> {
        let timing = match lock_delay {
            Some(delay) => self.config.timing_delayed(ttl, delay)?,
            None => self.config.timing(ttl)?,
        };
        self.health.note_ttl(timing.key_ttl());
        Ok(timing)
    }

    /// The guard of a lock won on a majority, valid until `valid_until`.
    pub(crate) fn guard(
        self: &Arc<Self>,
        resource: &str,
        key: Arc<str>,
        token: Arc<str>,
        ops: Arc<dyn LockOps>,
        timing: Timing,
        valid_until: Instant,
    ) -> Guard {
        let clock = self.config.clock.clone();
        let lease = Lease::new(resource.to_owned(), key, token, ops, timing, valid_until, clock);
        Guard::new(Arc::clone(self), lease)
    }
}
