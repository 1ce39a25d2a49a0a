//! Configuration: every knob, its documented default, and the checks run once at `build()`.
//!
//! A bad value is refused here with a typed error that names it, so that acquire and release never
//! meet an impossible setting at run time.

use std::sync::Arc;
use std::time::Duration;

use crate::base::error::{BuildError, InputError};
use crate::core::{Backoff, RetryPlan, Timing};
#[cfg(feature = "seam")]
pub use crate::mechanisms::removal::Mechanism;
#[cfg(not(feature = "seam"))]
use crate::mechanisms::removal::Mechanism;
use crate::mechanisms::removal::Removed;
use crate::seam::clock::Clock;
use crate::seam::tls::ClientIdentity;
use crate::seam::Master;

pub use crate::base::names::{
    FENCE_COUNTER_KEY, FENCE_EPOCH_KEY, MASTER_RECORD_KEY, RELEASE_CHANNEL_PREFIX, WAITERS_SUFFIX,
    WAKE_CHANNEL_PREFIX,
};
pub use crate::core::handoff::QUEUE_LIFE;

/// Default per-node timeout for every command: 50 ms. Short relative to any sensible TTL, long
/// enough for a loaded master on a LAN. A master slower than this counts as a no for that round.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(50);
/// Default timeout for the first connection to each master at `build()`: 1 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Default clock-drift factor: 0.01, so drift is `ttl * 0.01 + 2 ms`.
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;
/// Default least validity an acquisition must leave to count: zero (any positive validity).
pub const DEFAULT_MIN_VALIDITY: Duration = Duration::ZERO;
/// Default centre of the delay between acquire attempts: 100 ms.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(100);
/// Default spread of that delay: ±50 ms, so each delay is uniform in [50 ms, 150 ms].
pub const DEFAULT_RETRY_JITTER: Duration = Duration::from_millis(50);
/// Default most rounds `acquire` makes, the first included: 100.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 100;
/// Default time `acquire` keeps trying before it gives up: 10 s.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(10);
/// The longest TTL accepted: 24 h. Longer holds should extend (or use a watchdog) instead.
pub const MAX_TTL: Duration = Duration::from_secs(24 * 60 * 60);
/// Default for waking blocked acquires on release: on. A waiter listens on the release channel
/// (one pub/sub connection per master, shared by the process) and retries as soon as the holder
/// releases, instead of sleeping out its retry delay.
pub const DEFAULT_WAKE_ON_RELEASE: bool = true;
/// Default for queueing waiters of the same process locally: on. Waiters for the same resource
/// take turns on a local async lock first, so only one of them contends on the masters, and the
/// next one goes as soon as this process releases.
pub const DEFAULT_LOCAL_QUEUE: bool = true;
/// Default for ignoring the votes of a master that restarted within the grace period and does not
/// persist with `appendfsync always`: `true` (the delayed restart RedLock requires, enforced by the
/// client).
pub const DEFAULT_ENFORCE_RESTART_GRACE: bool = true;
/// Default for refusing the votes of a master that may evict keys (a `maxmemory` limit with a
/// policy other than `noeviction`): `true`. Every lock key carries a TTL, which the `volatile-*`
/// policies evict first, and an evicted key is a lock granted twice; a master that could do it
/// is not counted unless the application says it accepts that risk.
pub const DEFAULT_REFUSE_EVICTING_MASTERS: bool = true;
/// Default restart grace period: `None`, meaning the longest TTL this client has used so far, plus
/// its drift allowance, or the longest grace another client declared in a master's record.
pub const DEFAULT_RESTART_GRACE: Option<Duration> = None;
/// Default interval between background checks of each master's `run_id`, uptime and persistence:
/// 30 s. A lost connection triggers a check at once, whatever the interval.
pub const DEFAULT_HEALTH_REFRESH: Duration = Duration::from_secs(30);

/// The checked configuration of a [`crate::Quorlock`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Bound on every command to one master.
    pub node_timeout: Duration,
    /// Bound on the first connection to each master at `build()`.
    pub connect_timeout: Duration,
    /// Clock-drift factor; drift is `ttl * drift_factor + 2 ms`.
    pub drift_factor: f64,
    /// Least validity an acquisition must leave to count as a success.
    pub min_validity: Duration,
    /// Delay between acquire attempts.
    pub backoff: Backoff,
    /// How long and how often `acquire` tries.
    pub retry: RetryPlan,
    /// Prefix put before every resource name to form its key ("" by default).
    pub key_prefix: String,
    /// Whether votes of a recently restarted master without `appendfsync always` are ignored.
    pub enforce_restart_grace: bool,
    /// Whether votes of a master that may evict keys are refused.
    pub refuse_evicting_masters: bool,
    /// The restart grace period; `None` for the longest TTL in use plus its drift allowance.
    pub restart_grace: Option<Duration>,
    /// Interval between background checks of every master's identity and persistence.
    pub health_refresh: Duration,
    /// PEM root certificates trusted for `rediss://` masters instead of the system store.
    pub tls_root_certificates: Option<Vec<u8>>,
    /// The client certificate and key presented to `rediss://` masters (its `Debug` hides the key).
    pub(crate) tls_client_certificate: Option<ClientIdentity>,
    /// Whether blocked acquires are woken by release announcements (else they poll).
    pub wake_on_release: bool,
    /// Whether waiters of this process for the same resource queue locally first.
    pub local_queue: bool,
    /// How long every lock stays closed after it expires, unless a request asks for another
    /// delay ([`crate::Lock::lock_delay`]); zero for none.
    pub lock_delay: Duration,
    /// Out of model, for the negative controls of the simulation only: the mechanisms this client
    /// runs without. Always none unless the `seam` feature's
    /// `QuorlockBuilder::unsafe_without_for_tests` removed one.
    pub(crate) removed: Removed,
    /// The clock every deadline, validity, renewal and wait is measured on: tokio's, or the
    /// environment's when the application supplied one.
    pub(crate) clock: Clock,
}

/// Where one master comes from.
#[derive(Clone)]
pub(crate) enum Source {
    /// A URL, connected with redis-rs.
    Url(String),
    /// A master behind the seam, given by the application.
    #[cfg_attr(not(feature = "seam"), allow(dead_code))]
    Custom(Arc<dyn Master>),
}

impl Config {
    /// Checks a TTL against the configuration and combines it with the drift allowance and the
    /// least validity into one lock's timing.
    ///
    /// # Errors
    /// [`InputError`] for a zero TTL, one above [`MAX_TTL`], one not longer than the node timeout, or
    /// one that leaves no validity after the drift allowance.
    pub fn timing(&self, ttl: Duration) -> Result<Timing, InputError> {
        self.timing_delayed(ttl, self.lock_delay)
    }

    /// As [`Config::timing`], for a lock that stays closed for `lock_delay` after it expires: the
    /// key is set for `ttl + lock_delay`, the validity counts from `ttl`.
    ///
    /// # Errors
    /// As [`Config::timing`]; [`InputError::LockDelayTooLarge`] when `ttl + lock_delay` exceeds
    /// [`MAX_TTL`].
    pub fn timing_delayed(&self, ttl: Duration, lock_delay: Duration) -> Result<Timing, InputError> {
        if ttl.checked_add(lock_delay).is_none_or(|life| life > MAX_TTL) && ttl <= MAX_TTL {
            return Err(InputError::LockDelayTooLarge {
                ttl,
                lock_delay,
                max: MAX_TTL,
            });
        }
        if ttl.is_zero() {
            return Err(InputError::ZeroTtl);
        }
        if ttl > MAX_TTL {
            return Err(InputError::TtlTooLarge { ttl, max: MAX_TTL });
        }
        if self.node_timeout >= ttl {
            return Err(InputError::NodeTimeoutNotBelowTtl {
                node_timeout: self.node_timeout,
                ttl,
            });
        }
        let timing = Timing::delayed(ttl, lock_delay, self.drift_factor, self.min_validity)?;
        if self.removed.has(Mechanism::DriftAllowance) {
            return Ok(timing.without_drift());
        }
        Ok(timing)
    }
}

/// Builds a [`crate::Quorlock`]. Start from [`crate::Quorlock::builder`].
#[derive(Clone)]
#[must_use = "a builder does nothing until build() is awaited"]
pub struct QuorlockBuilder {
    pub(crate) sources: Vec<Source>,
    node_timeout: Duration,
    connect_timeout: Duration,
    drift_factor: f64,
    min_validity: Duration,
    retry_delay: Duration,
    retry_jitter: Duration,
    max_attempts: u32,
    wait: Duration,
    key_prefix: String,
    enforce_restart_grace: bool,
    refuse_evicting_masters: bool,
    restart_grace: Option<Duration>,
    health_refresh: Duration,
    tls_root_certificates: Option<Vec<u8>>,
    tls_client_certificate: Option<ClientIdentity>,
    wake_on_release: bool,
    local_queue: bool,
    lock_delay: Duration,
    pub(crate) environment: Option<Arc<dyn crate::seam::Environment>>,
    removed: Removed,
}

impl std::fmt::Debug for QuorlockBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self
            .sources
            .iter()
            .map(|source| match source {
                Source::Url(url) => crate::base::error::redact_url(url),
                Source::Custom(master) => master.addr().to_owned(),
            })
            .collect();
        f.debug_struct("QuorlockBuilder")
            .field("urls", &urls)
            .field("node_timeout", &self.node_timeout)
            .field("drift_factor", &self.drift_factor)
            .finish_non_exhaustive()
    }
}

impl Default for QuorlockBuilder {
    fn default() -> Self {
        Self {
            sources: Vec::new(),
            node_timeout: DEFAULT_NODE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            drift_factor: DEFAULT_DRIFT_FACTOR,
            min_validity: DEFAULT_MIN_VALIDITY,
            retry_delay: DEFAULT_RETRY_DELAY,
            retry_jitter: DEFAULT_RETRY_JITTER,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            wait: DEFAULT_WAIT,
            key_prefix: String::new(),
            enforce_restart_grace: DEFAULT_ENFORCE_RESTART_GRACE,
            refuse_evicting_masters: DEFAULT_REFUSE_EVICTING_MASTERS,
            restart_grace: DEFAULT_RESTART_GRACE,
            health_refresh: DEFAULT_HEALTH_REFRESH,
            tls_root_certificates: None,
            tls_client_certificate: None,
            wake_on_release: DEFAULT_WAKE_ON_RELEASE,
            local_queue: DEFAULT_LOCAL_QUEUE,
            lock_delay: Duration::ZERO,
            environment: None,
            removed: Removed::default(),
        }
    }
}

impl QuorlockBuilder {
    /// Adds masters by URL (`redis://[user:pass@]host:port[/db]`), in addition to any given before.
    pub fn nodes<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.sources
            .extend(urls.into_iter().map(|url| Source::Url(url.into())));
        self
    }

    /// Adds one master by URL.
    pub fn node(mut self, url: impl Into<String>) -> Self {
        self.sources.push(Source::Url(url.into()));
        self
    }

    /// Adds a master reached through an implementation of the seam of your own (a simulated master,
    /// a proxy), in addition to any given before. Needs the `seam` feature.
    #[cfg(feature = "seam")]
    pub fn master(mut self, master: Arc<dyn Master>) -> Self {
        self.sources.push(Source::Custom(master));
        self
    }

    /// Draws tokens, ids, jitter and fair tickets' time from `environment` instead of the OS and
    /// the system clock, and measures every deadline, validity, renewal and wait on its monotonic
    /// clock instead of tokio's (the deterministic simulation does). Needs the `seam` feature.
    #[cfg(feature = "seam")]
    pub fn environment(mut self, environment: Arc<dyn crate::seam::Environment>) -> Self {
        self.environment = Some(environment);
        self
    }

    /// Removes one mechanism of the library on purpose, for a negative control of the
    /// deterministic simulation: the control shows that the check standing for that mechanism
    /// fails without it (see [`Mechanism`]). Never use it otherwise: every mechanism it can remove
    /// is one the library's safety rests on. Nothing is removed unless this is called. Needs the
    /// `seam` feature.
    #[cfg(feature = "seam")]
    #[doc(hidden)]
    pub fn unsafe_without_for_tests(mut self, mechanism: Mechanism) -> Self {
        self.removed = self.removed.with(mechanism);
        self
    }

    /// Sets the bound on every command to one master (default [`DEFAULT_NODE_TIMEOUT`]).
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// Sets the bound on the first connection at build (default [`DEFAULT_CONNECT_TIMEOUT`]).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Sets the clock-drift factor (default [`DEFAULT_DRIFT_FACTOR`]).
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// Sets the least validity an acquisition must leave (default [`DEFAULT_MIN_VALIDITY`]).
    pub fn min_validity(mut self, min: Duration) -> Self {
        self.min_validity = min;
        self
    }

    /// Sets the centre of the delay between attempts (default [`DEFAULT_RETRY_DELAY`]).
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// Sets the spread of that delay, at most the delay itself (default [`DEFAULT_RETRY_JITTER`]).
    pub fn retry_jitter(mut self, jitter: Duration) -> Self {
        self.retry_jitter = jitter;
        self
    }

    /// Sets the most rounds `acquire` makes, the first included (default [`DEFAULT_MAX_ATTEMPTS`]).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Sets how long `acquire` keeps trying (default [`DEFAULT_WAIT`]).
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = wait;
        self
    }

    /// Sets a prefix for every key (default none): the key of resource `r` is `prefix + r`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Turns on or off ignoring the votes of a master that restarted within the grace period and
    /// does not persist with `appendfsync always` (default [`DEFAULT_ENFORCE_RESTART_GRACE`]).
    ///
    /// Turning it off is only safe when every master is restarted by hand no sooner than the
    /// longest TTL after it went down, or persists every write before acknowledging it.
    pub fn enforce_restart_grace(mut self, enforce: bool) -> Self {
        self.enforce_restart_grace = enforce;
        self
    }

    /// Refuses (the default, [`DEFAULT_REFUSE_EVICTING_MASTERS`]) or counts the votes of a master
    /// that may evict keys: one with a `maxmemory` limit and a `maxmemory-policy` other than
    /// `noeviction`. Such a master may evict a held lock's key and grant the lock again; count it
    /// only where the memory limit can never be reached.
    pub fn refuse_evicting_masters(mut self, refuse: bool) -> Self {
        self.refuse_evicting_masters = refuse;
        self
    }

    /// Sets the restart grace period (default [`DEFAULT_RESTART_GRACE`]: the longest TTL in use).
    ///
    /// The grace applies to every master that may lack writes it acknowledged. By default a client
    /// waits out the longest TTL it used or any other client declared in the masters' records
    /// (each declares its longest TTL at its checks), so one client's long TTLs make every client
    /// wait longer for a replaced master. A configured grace is taken as given: this client then
    /// ignores what others declared, so set it to at least the longest TTL any process of the
    /// fleet uses, plus its lock-delay where it uses one ([`QuorlockBuilder::lock_delay`]): a
    /// key lives its TTL plus the delay, and the default counts both.
    pub fn restart_grace(mut self, grace: Duration) -> Self {
        self.restart_grace = Some(grace);
        self
    }

    /// Sets the interval between background checks of each master's `run_id`, uptime and
    /// persistence (default [`DEFAULT_HEALTH_REFRESH`]).
    pub fn health_refresh(mut self, every: Duration) -> Self {
        self.health_refresh = every;
        self
    }

    /// Trusts these PEM root certificates for `rediss://` masters instead of the system trust
    /// store (for a private CA). Needs the `tls` feature.
    #[cfg(feature = "tls")]
    pub fn tls_root_certificates(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root_certificates = Some(pem.into());
        self
    }

    /// Presents this client certificate chain and its private key (both PEM) to `rediss://`
    /// masters that authenticate clients (`tls-auth-clients yes`). Needs the `tls` feature.
    #[cfg(feature = "tls")]
    pub fn tls_client_certificate(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.tls_client_certificate = Some(ClientIdentity {
            cert_pem: cert_pem.into(),
            key_pem: key_pem.into(),
        });
        self
    }

    /// Keeps every lock closed for `delay` after it expires (default none), as Chubby's
    /// lock-delay does: the key lives `ttl + delay` on the masters while the holder's validity
    /// still counts from `ttl`, so a holder that stopped responding (a long pause, a crash) past
    /// its validity cannot overlap the next holder as long as it acts again within the delay.
    /// Other RedLock clients on the same key stay out as well: they see the key. A release opens
    /// the lock at once; only an expiry costs the delay. A request may ask for another delay
    /// ([`crate::Lock::lock_delay`]). See `docs/safety.md` for the exact guarantee.
    pub fn lock_delay(mut self, delay: Duration) -> Self {
        self.lock_delay = delay;
        self
    }

    /// Wakes blocked acquires when the holder releases (default [`DEFAULT_WAKE_ON_RELEASE`]); off,
    /// they poll with the retry delay.
    pub fn wake_on_release(mut self, on: bool) -> Self {
        self.wake_on_release = on;
        self
    }

    /// Queues this process's waiters for the same resource locally first (default
    /// [`DEFAULT_LOCAL_QUEUE`]); off, every waiter contends on the masters.
    pub fn local_queue(mut self, on: bool) -> Self {
        self.local_queue = on;
        self
    }

    /// Checks every setting and returns the configuration.
    pub(crate) fn config(&self) -> Result<Config, BuildError> {
        if self.sources.is_empty() {
            return Err(BuildError::NoNodes);
        }
        if self.node_timeout.is_zero() {
            return Err(BuildError::ZeroNodeTimeout);
        }
        if self.connect_timeout.is_zero() {
            return Err(BuildError::ZeroConnectTimeout);
        }
        if crate::core::drift(Duration::from_secs(1), self.drift_factor).is_none() {
            return Err(BuildError::InvalidDriftFactor(self.drift_factor));
        }
        if self.max_attempts == 0 {
            return Err(BuildError::ZeroAttempts);
        }
        if self.health_refresh.is_zero() {
            return Err(BuildError::ZeroHealthRefresh);
        }
        let backoff = Backoff::new(self.retry_delay, self.retry_jitter)?;
        Ok(Config {
            node_timeout: self.node_timeout,
            connect_timeout: self.connect_timeout,
            drift_factor: self.drift_factor,
            min_validity: self.min_validity,
            backoff,
            retry: RetryPlan {
                max_attempts: self.max_attempts,
                wait: self.wait,
            },
            key_prefix: self.key_prefix.clone(),
            enforce_restart_grace: self.enforce_restart_grace,
            refuse_evicting_masters: self.refuse_evicting_masters,
            restart_grace: self.restart_grace,
            health_refresh: self.health_refresh,
            tls_root_certificates: self.tls_root_certificates.clone(),
            tls_client_certificate: self.tls_client_certificate.clone(),
            wake_on_release: self.wake_on_release,
            local_queue: self.local_queue,
            lock_delay: self.lock_delay,
            removed: self.removed,
            clock: Clock::of(self.environment.as_ref()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one() -> QuorlockBuilder {
        QuorlockBuilder::default().node("redis://127.0.0.1:1")
    }

    #[test]
    fn defaults_are_valid() {
        let config = one().config().expect("defaults are valid");
        assert_eq!(config.node_timeout, DEFAULT_NODE_TIMEOUT);
        assert_eq!(config.backoff.min(), Duration::from_millis(50));
        assert_eq!(config.backoff.max(), Duration::from_millis(150));
    }

    #[test]
    fn bad_settings_are_named() {
        assert!(matches!(
            QuorlockBuilder::default().config(),
            Err(BuildError::NoNodes)
        ));
        assert!(matches!(
            one().node_timeout(Duration::ZERO).config(),
            Err(BuildError::ZeroNodeTimeout)
        ));
        assert!(
            matches!(one().drift_factor(1.5).config(), Err(BuildError::InvalidDriftFactor(f)) if f == 1.5)
        );
        assert!(matches!(
            one().max_attempts(0).config(),
            Err(BuildError::ZeroAttempts)
        ));
        let err = one()
            .retry_delay(Duration::ZERO)
            .config()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("retry jitter 50ms is larger than the retry delay 0ns"),
            "{err}"
        );
    }

    #[test]
    fn debug_hides_passwords() {
        let b = QuorlockBuilder::default().node("redis://user:hunter2@10.0.0.1:6379");
        let text = format!("{b:?}");
        assert!(!text.contains("hunter2"), "{text}");
    }
}
