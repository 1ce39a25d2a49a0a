//! One lock request, whatever its kind: which lock, its TTL, how long to wait for it, and what to
//! do with it (acquire, try once, or run work under it).
//!
//! Every kind of lock is asked for the same way, and every per-call option works for every kind:
//! [`Quorlock::lock`] (or [`Quorlock::lock_all`] for a set of resources) starts a [`Lock`], whose
//! methods choose the kind ([`Lock::fenced`], [`Lock::reentrant`], [`Lock::fair`]) and the wait
//! ([`Lock::wait`], [`Lock::attempts`]) for this call alone, and [`Lock::acquire`],
//! [`Lock::try_acquire`] or [`Lock::with`] send it. The builder's settings are the defaults.
//! [`Quorlock::acquire`], [`Quorlock::try_acquire`] and [`Quorlock::with_lock`] are the plain lock's
//! shorthands.

use std::sync::Arc;
use std::time::Duration;

use tracing::{field, instrument};

use crate::api::client::request::{Choose, Request, Target};
use crate::api::client::{Guard, Quorlock};
use crate::api::kinds::multi::label;
use crate::api::kinds::plain::PlainChoice;
use crate::base::error::{AcquireError, InputError};
use crate::base::metrics;
use crate::core::RetryPlan;
use crate::mechanisms::watchdog::KeepAlive;

/// A lock request: start one with [`Quorlock::lock`] or [`Quorlock::lock_all`].
///
/// ```no_run
/// # async fn run(locks: quorlock::Quorlock) -> Result<(), Box<dyn std::error::Error>> {
/// use std::time::Duration;
/// use quorlock::LockOwner;
///
/// // Wait up to 200 ms for this one, whatever the client's default wait.
/// let guard = locks.lock("cache:refresh", Duration::from_secs(5)).wait(Duration::from_millis(200)).acquire().await?;
/// guard.release().await?;
///
/// // A fencing token for the protected resource to check.
/// let guard = locks.lock("account:7", Duration::from_secs(10)).fenced().acquire().await?;
/// let _token = guard.fencing_token();
/// guard.release().await?;
///
/// // Re-entered by the same owner; each hold is released on its own.
/// let owner = LockOwner::new();
/// let outer = locks.lock("ledger", Duration::from_secs(10)).reentrant(&owner).acquire().await?;
/// let inner = locks.lock("ledger", Duration::from_secs(10)).reentrant(&owner).acquire().await?;
/// assert_eq!(inner.holds(), Some(2));
/// inner.release().await?;
/// outer.release().await?;
///
/// // Served in arrival order, one round only.
/// let guard = locks.lock("printer", Duration::from_secs(10)).fair().try_acquire().await?;
/// guard.release().await?;
///
/// // Two accounts at once, all or nothing (no deadlock with a client taking them the other way).
/// let guard = locks.lock_all(["account:3", "account:7"], Duration::from_secs(10)).acquire().await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a lock request does nothing until acquire(), try_acquire() or with() is awaited"]
pub struct Lock<'a> {
    client: &'a Quorlock,
    target: Target,
    ttl: Duration,
    kind: Chosen,
    /// Whether a fencing token was asked for ([`Lock::fenced`]), whatever the kind.
    fenced: bool,
    /// The lock-delay asked for ([`Lock::lock_delay`]); `None` for the builder's.
    lock_delay: Option<Duration>,
    wait: Option<Duration>,
    attempts: Option<u32>,
    keep_alive: KeepAlive,
}

/// A request's kind: the plain lock unless a method of the kind's own file chose another.
#[derive(Clone, Debug)]
enum Chosen {
    /// The plain lock (on one resource or a set), with nothing to carry.
    Plain,
    /// Another kind, with what its method was given.
    Other(Arc<dyn Choose>),
}

impl Chosen {
    fn get(&self) -> &dyn Choose {
        match self {
            Chosen::Plain => &PlainChoice,
            Chosen::Other(kind) => &**kind,
        }
    }
}

impl Quorlock {
    /// Starts a request for the lock on `resource`, held for `ttl` once acquired: a plain lock
    /// unless a method of [`Lock`] chooses another kind.
    pub fn lock(&self, resource: &str, ttl: Duration) -> Lock<'_> {
        Lock::new(self, Target::One(resource.to_owned()), ttl)
    }

    /// Starts a request for every resource in `resources` at once, or none: one atomic script per
    /// master, so overlapping sets taken in different orders cannot deadlock. The order of
    /// `resources` does not matter and duplicates count once; the guard covers the whole set
    /// ([`Guard::resources`]), and a round refused because some were held fails with
    /// [`AcquireError::Conflict`] naming them. The keys are the plain locks' keys, so the set
    /// excludes plain locks on any of its resources.
    pub fn lock_all<I, S>(&self, resources: I, ttl: Duration) -> Lock<'_>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let all = resources.into_iter().map(|r| r.as_ref().to_owned()).collect();
        Lock::new(self, Target::All(all), ttl)
    }

    /// Starts a request for one of `permits` permits of the semaphore `resource`:
    /// `lock(resource, ttl).permits(permits)`. At most `permits` holders hold one at once.
    pub fn semaphore(&self, resource: &str, permits: u32, ttl: Duration) -> Lock<'_> {
        self.lock(resource, ttl).permits(permits)
    }

    /// Starts a request for a read hold of the read-write lock `resource`:
    /// `lock(resource, ttl).read()`.
    pub fn read(&self, resource: &str, ttl: Duration) -> Lock<'_> {
        self.lock(resource, ttl).read()
    }

    /// Starts a request for the write hold of the read-write lock `resource`:
    /// `lock(resource, ttl).write()`.
    pub fn write(&self, resource: &str, ttl: Duration) -> Lock<'_> {
        self.lock(resource, ttl).write()
    }

    /// Acquires one of `permits` permits of `resource`, waiting as configured:
    /// `semaphore(resource, permits, ttl).acquire()`.
    ///
    /// # Errors
    /// As [`Lock::acquire`]; [`InputError::Permits`] for zero permits or too many.
    pub async fn acquire_permit(
        &self,
        resource: &str,
        permits: u32,
        ttl: Duration,
    ) -> Result<Guard, AcquireError> {
        self.semaphore(resource, permits, ttl).acquire().await
    }

    /// Acquires a read hold of `resource`, waiting as configured: `read(resource, ttl).acquire()`.
    ///
    /// # Errors
    /// As [`Lock::acquire`].
    pub async fn acquire_read(&self, resource: &str, ttl: Duration) -> Result<Guard, AcquireError> {
        self.read(resource, ttl).acquire().await
    }

    /// Acquires the write hold of `resource`, waiting as configured: `write(resource, ttl).acquire()`.
    ///
    /// # Errors
    /// As [`Lock::acquire`].
    pub async fn acquire_write(&self, resource: &str, ttl: Duration) -> Result<Guard, AcquireError> {
        self.write(resource, ttl).acquire().await
    }

    /// Acquires `resource` for `ttl`, waiting as configured: `lock(resource, ttl).acquire()`.
    ///
    /// While another holder has it, the wait ends as soon as the holder releases (announced on
    /// the resource's release channel) or the key expires on a majority; other tasks of this
    /// process waiting for the same resource queue behind this one. See the builder's
    /// `wake_on_release` and `local_queue`.
    ///
    /// # Errors
    /// As [`Lock::acquire`].
    pub async fn acquire(&self, resource: &str, ttl: Duration) -> Result<Guard, AcquireError> {
        self.lock(resource, ttl).acquire().await
    }

    /// Makes exactly one round for `resource`, with no retries: `lock(resource, ttl).try_acquire()`.
    ///
    /// # Errors
    /// As [`Lock::try_acquire`].
    pub async fn try_acquire(&self, resource: &str, ttl: Duration) -> Result<Guard, AcquireError> {
        self.lock(resource, ttl).try_acquire().await
    }
}

impl<'a> Lock<'a> {
    fn new(client: &'a Quorlock, target: Target, ttl: Duration) -> Self {
        Self {
            client,
            target,
            ttl,
            kind: Chosen::Plain,
            fenced: false,
            lock_delay: None,
            wait: None,
            attempts: None,
            keep_alive: KeepAlive::default(),
        }
    }

    /// Keeps trying for at most `wait` in this call (default: the builder's `wait`). Zero makes
    /// one attempt, as `flock -n` does.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Makes at most `attempts` rounds in this call, the first included (default: the builder's
    /// `max_attempts`).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = Some(attempts);
        self
    }

    /// Asks for a fencing token backed by a majority of masters ([`Guard::fencing_token`]): pass
    /// it with every write to the protected resource, which must reject tokens lower than the
    /// highest it has seen (as [`crate::FencedStore`] does). Tokens of successive holders of any
    /// resource on these masters strictly increase. A fenced lock is a plain lock on the wire.
    ///
    /// This is an option, not a kind: with [`Lock::write`] (in either order) it asks for a fenced
    /// write, the write hold of the read-write lock with a token from the same counters. Any other
    /// kind ([`Lock::read`], [`Lock::reentrant`], [`Lock::fair`], [`Lock::permits`], a set) with
    /// it is refused with [`InputError::Unsupported`] before anything is sent.
    pub fn fenced(mut self) -> Self {
        self.fenced = true;
        self
    }

    /// Keeps this lock closed for `delay` after it expires (default: the builder's
    /// [`lock_delay`](crate::QuorlockBuilder::lock_delay), none unless set), as Chubby's
    /// lock-delay does. The key is set for `ttl + delay` on the masters (and renewed to it by
    /// extend and the watchdog) while the guard's validity still counts from `ttl`, so a holder
    /// that stopped responding past its validity (a long pause, a crash) cannot overlap the next
    /// holder as long as it acts again within the delay: this protects resources that cannot
    /// check a fencing token. Every RedLock client on the key stays out, since the key is there.
    /// A release opens the lock at once; an expiry costs `ttl + delay`. Zero turns it off.
    ///
    /// # Errors
    /// Sending the request fails with [`InputError::LockDelayTooLarge`] when `ttl + delay` is above
    /// [`MAX_TTL`](crate::config::MAX_TTL).
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.lock_delay = Some(delay);
        self
    }

    /// How [`Lock::with`] keeps the lock alive while the work runs (default: renew every
    /// `ttl / 3`, no cap).
    pub fn keep_alive(mut self, opts: KeepAlive) -> Self {
        self.keep_alive = opts;
        self
    }

    /// What `with` keeps the lock alive with.
    pub(crate) fn keep_alive_options(&self) -> KeepAlive {
        self.keep_alive
    }

    /// The resource, or the set's names joined, for errors and logs.
    pub(crate) fn label(&self) -> String {
        match &self.target {
            Target::One(resource) => resource.clone(),
            Target::All(all) => label(all),
        }
    }

    /// The attempts and wait of this call.
    fn plan(&self) -> Result<RetryPlan, InputError> {
        let mut plan = self.client.config().retry;
        if let Some(attempts) = self.attempts {
            if attempts == 0 {
                return Err(InputError::ZeroAttempts);
            }
            plan.max_attempts = attempts;
        }
        if let Some(wait) = self.wait {
            plan.wait = wait;
        }
        Ok(plan)
    }

    /// Acquires the lock, waiting until the attempt count or the wait deadline runs out.
    ///
    /// # Errors
    /// [`AcquireError::Input`] for a bad resource name, TTL or option (nothing is sent);
    /// [`AcquireError::Exhausted`] when every attempt failed, carrying the last round's failure;
    /// [`AcquireError::Queued`] when the deadline passed behind other tasks of this process; a
    /// non-retryable round failure (authentication, wrong key type) is returned at once. A fair
    /// lock's rounds fail with [`crate::NodeErrorKind::Queued`] while earlier waiters are ahead.
    #[instrument(skip_all, fields(resource = %self.label(), kind = self.kind.get().label(&self.target, self.fenced), attempt = field::Empty, ok = field::Empty, failed = field::Empty, validity_ms = field::Empty, owner = field::Empty, ticket = field::Empty, token = field::Empty))]
    pub async fn acquire(self) -> Result<Guard, AcquireError> {
        let plan = self.plan()?;
        self.send(Some(plan)).await
    }

    /// Makes exactly one round (both rounds of a fenced lock), with no retries and no local queue.
    ///
    /// # Errors
    /// [`AcquireError::NoQuorum`] (or [`AcquireError::Conflict`] for a set) when a majority did not
    /// grant it, [`AcquireError::TooSlow`] when the majority came too late,
    /// [`AcquireError::Input`] for bad arguments.
    #[instrument(skip_all, fields(resource = %self.label(), kind = self.kind.get().label(&self.target, self.fenced), attempt = 1, ok = field::Empty, failed = field::Empty, validity_ms = field::Empty, owner = field::Empty, ticket = field::Empty, token = field::Empty))]
    pub async fn try_acquire(self) -> Result<Guard, AcquireError> {
        self.send(None).await
    }

    /// Sends the request: retrying within `plan`, or one round when `plan` is `None`.
    async fn send(self, plan: Option<RetryPlan>) -> Result<Guard, AcquireError> {
        let since = metrics::Stopwatch::start();
        let kind = self.kind.get().label(&self.target, self.fenced);
        let result = self.dispatch(plan).await;
        metrics::acquisition(kind, since, &result);
        result
    }

    /// Hands the request to its kind, which sends it through the one acquire path.
    async fn dispatch(self, plan: Option<RetryPlan>) -> Result<Guard, AcquireError> {
        let request = Request {
            inner: &self.client.inner,
            target: self.target,
            ttl: self.ttl,
            plan,
            fenced: self.fenced,
            lock_delay: self.lock_delay,
        };
        self.kind.get().acquire(request).await
    }

    /// Makes `kind` this request's kind (a kind's own method calls this).
    pub(crate) fn choose(mut self, kind: impl Choose + 'static) -> Self {
        self.kind = Chosen::Other(Arc::new(kind));
        self
    }
}
