//! The retry policies: when a failed attempt is tried again, and what may end the pause early.
//!
//! - [`Jittered`]: a jittered delay within the retry plan (attempts and wait), its sleep cut short by
//!   a [`Sleep`]: [`Delay`] never is; [`ReleaseWake`] is by an announced release of the lock's keys
//!   (the reentrant, multi-resource, semaphore and read-write kinds); [`NamedWake`] is by a
//!   message naming the waiter (the fair lock's ticket).
//! - [`ReleaseOrExpiry`]: the plain acquire's wait. While another holder has the lock its process
//!   queues for the key on the masters (`handoff.rs`) and waits until a release hands the key to
//!   it, or until the key expires on a majority (read from the masters' PTTLs: a holder that
//!   crashed never announces), whichever comes first, within the wait deadline; a process further
//!   back in the queue only looks again on its timer (`core::handoff`). When masters fail rather
//!   than refuse, or announcements are off, it backs off.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;
use tracing::debug;

use super::{Next, Policy};
use crate::base::error::AcquireError;
use crate::core::expiry::{self, Pttl};
use crate::core::handoff::{self as queue, Then, QUEUE_LIFE};
use crate::core::{self, quorum, RetryPlan};
use crate::mechanisms::handoff;
use crate::mechanisms::pubsub::{Waiter, Waits};
use crate::seam::clock::{later, Clock};
use crate::seam::link::Masters;
use crate::seam::token::Entropy;

/// Stands in for a wait deadline too far away to represent: about 30 years.
const FOREVER: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);

/// The longest a waiter sleeps without an announcement when the key's expiry cannot be read (a
/// key without a TTL, or too few masters answering): 1 s. It bounds the cost of a missed message.
pub(crate) const MAX_FALLBACK_WAIT: Duration = Duration::from_secs(1);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Sleeps out a pause, or less when something worth retrying for happens first.
pub(crate) trait Sleep {
    /// Sleeps for up to `delay`; `contended` says whether another holder refused the attempt.
    fn sleep(&self, delay: Duration, contended: bool) -> impl Future<Output = ()> + Send;
}

/// The plain delay on the client's clock, never cut short.
#[derive(Debug, Clone)]
pub(crate) struct Delay(pub(crate) Clock);

impl Sleep for Delay {
    async fn sleep(&self, delay: Duration, _contended: bool) {
        self.0.sleep(delay).await;
    }
}

/// Retries after a jittered delay, within the plan's attempts and wait, counted from `started`.
#[derive(Debug)]
pub(crate) struct Jittered<S> {
    plan: RetryPlan,
    backoff: core::Backoff,
    entropy: Entropy,
    clock: Clock,
    started: Instant,
    sleep: S,
}

impl<S> Jittered<S> {
    /// Backs off as `settings` say (its plan, its delay, its clock), the jitter drawn from
    /// `entropy`, within the plan from `started`, sleeping with `sleep`.
    pub(crate) fn new(settings: &WaitSettings, entropy: Entropy, started: Instant, sleep: S) -> Self {
        Self {
            plan: settings.plan,
            backoff: settings.backoff,
            entropy,
            clock: settings.clock.clone(),
            started,
            sleep,
        }
    }
}

impl<S: Sleep + Send + Sync> Policy for Jittered<S> {
    async fn pause(&mut self, attempts: u32, err: &AcquireError) -> Next {
        let delay = self.entropy.jitter(&self.backoff);
        let waited = self.clock.now().saturating_duration_since(self.started);
        match self.plan.next_delay(attempts, waited, delay) {
            Some(delay) => {
                debug!(attempt = attempts, delay_ms = delay.as_millis() as u64, error = %err, "retrying after a delay");
                self.sleep.sleep(delay, err.is_contended()).await;
                Next::Again
            }
            None => Next::GiveUp,
        }
    }
}

/// Wakes the retrying acquire of a lock kind (reentrant, multi-resource, fenced) when a release of
/// one of its keys is announced, instead of leaving it to sleep out the jittered retry delay.
///
/// The first pause after an attempt refused by another holder subscribes to the keys' release
/// channels and returns at once, so a release announced between that attempt and the subscription
/// is not missed. Later pauses last the retry delay unless a release is announced first. With
/// announcements switched off, or when no master accepts the subscription (warned once), every
/// pause is the plain delay. The fallback stays the retry delay rather than the key's PTTL: a
/// kind's keys are hashes or sets of keys whose expiry says less about when the lock frees.
pub(crate) struct ReleaseWake<'a> {
    waits: &'a Waits,
    keys: Vec<String>,
    /// Whether waits listen for announcements at all (else every pause is the plain delay).
    wake_on_release: bool,
    /// The bound on each subscription.
    node_timeout: Duration,
    /// The clock the pauses are measured on.
    clock: Clock,
    /// `None` until the first contended pause; then the subscriptions (none when unavailable).
    listening: Mutex<Option<Arc<Listening>>>,
}

/// A kind waiter's subscriptions, and the release counts of their channels it has seen.
struct Listening {
    waiters: Vec<Waiter>,
    seen: Mutex<Vec<u64>>,
}

impl Listening {
    /// Listening through `waiters`, with their channels' release counts as seen so far.
    fn new(waiters: Vec<Waiter>) -> Self {
        let listening = Self {
            waiters,
            seen: Mutex::new(Vec::new()),
        };
        *lock(&listening.seen) = listening.counts();
        listening
    }

    fn counts(&self) -> Vec<u64> {
        self.waiters.iter().map(|w| *w.releases().borrow()).collect()
    }
}

impl<'a> ReleaseWake<'a> {
    /// Prepares to listen for releases of `keys` through `waits` (when `wake_on_release`), each
    /// subscription bounded by `node_timeout`, every pause measured on `clock`; nothing is
    /// subscribed yet.
    pub(crate) fn new(
        waits: &'a Waits,
        keys: Vec<String>,
        wake_on_release: bool,
        node_timeout: Duration,
        clock: Clock,
    ) -> Self {
        Self {
            waits,
            keys,
            wake_on_release,
            node_timeout,
            clock,
            listening: Mutex::new(None),
        }
    }

    /// Pauses for up to `delay` after a failed attempt; `contended` says whether another holder
    /// refused it (only then is subscribing worth it).
    async fn pause(&self, delay: Duration, contended: bool) {
        let clock = &self.clock;
        let until = clock.deadline(delay);
        if !self.wake_on_release {
            clock.sleep_until(until).await;
            return;
        }
        let timeout = self.node_timeout;
        let current = lock(&self.listening).clone();
        let listening = match current {
            None if contended => {
                let waiters: Vec<Waiter> = self.keys.iter().map(|k| self.waits.waiter(k)).collect();
                let subscribed =
                    crate::mechanisms::fanout::all(waiters.iter().map(|w| w.listen(timeout))).await;
                if subscribed.iter().all(|n| *n == 0) {
                    self.waits.warn_polling(&self.keys.join(", "));
                    *lock(&self.listening) = Some(Arc::new(Listening::new(Vec::new())));
                    clock.sleep_until(until).await;
                } else {
                    // Subscribed now: try again at once, in case the release came in between.
                    *lock(&self.listening) = Some(Arc::new(Listening::new(waiters)));
                }
                return;
            }
            Some(listening) if !listening.waiters.is_empty() => listening,
            _ => {
                clock.sleep_until(until).await;
                return;
            }
        };
        // Re-subscribes on masters that reconnected (a no-op otherwise), within this pause.
        let relisten = crate::mechanisms::fanout::all(listening.waiters.iter().map(|w| w.listen(timeout)));
        let _ = clock.timeout_at(until, relisten).await;
        let mut watching: Vec<_> = listening.waiters.iter().map(Waiter::releases).collect();
        let now: Vec<u64> = watching.iter_mut().map(|rx| *rx.borrow_and_update()).collect();
        let woken = if now == *lock(&listening.seen) {
            let changed = futures::future::select_all(watching.iter_mut().map(|rx| Box::pin(rx.changed())));
            clock.timeout_at(until, changed).await.is_ok()
        } else {
            // Released since the last pause: retry at once.
            true
        };
        *lock(&listening.seen) = listening.counts();
        debug!(woken, "kind retrying after a wait");
    }
}

impl Sleep for ReleaseWake<'_> {
    fn sleep(&self, delay: Duration, contended: bool) -> impl Future<Output = ()> + Send {
        self.pause(delay, contended)
    }
}

/// Wakes a waiting acquire as soon as a release or a leave names it: the fair lock's turn.
///
/// The wait listens on the lock's release channel through the process's shared pub/sub
/// connections (one per master, see `pubsub.rs`), for messages that carry our ticket id: however many
/// named waiters a process has, each master sees one subscriber. The subscription starts in the
/// background at once, so a release right after the first round is not missed, and is renewed
/// before each pause on masters that reconnected. Between rounds the waiter sleeps until its turn is
/// announced or its jittered delay ends, whichever comes first: the delay stays the fallback (a
/// master that could not be subscribed to, a message missed while connecting), so waking is only
/// ever faster.
pub(crate) struct NamedWake {
    waiter: Arc<Waiter>,
    turn: Arc<Notify>,
    timeout: Duration,
    /// The longest pause between rounds: a third of the heartbeat, so the ticket never lapses.
    cap: Duration,
    subscribing: Option<tokio::task::JoinHandle<()>>,
    /// The client's clock, which the pauses are measured on.
    clock: Clock,
}

impl NamedWake {
    /// Starts listening on `key`'s release channel for messages naming `name`, each subscription
    /// bounded by `timeout` (`first` for a first connection, made in the background), every pause
    /// at most `cap` on `clock`.
    pub(crate) fn start(
        waits: &Waits,
        key: &str,
        name: &str,
        cap: Duration,
        (timeout, first): (Duration, Duration),
        clock: Clock,
    ) -> Self {
        let mut listener = waits.waiter(key);
        let turn = listener.named(name);
        let listener = Arc::new(listener);
        // In the background nothing waits on it: a first connection gets the connect timeout.
        let subscribing = tokio::runtime::Handle::try_current().ok().map(|handle| {
            let listener = Arc::clone(&listener);
            handle.spawn(async move {
                let masters = listener.listen(first).await;
                debug!(masters, "listening for our turn");
            })
        });
        Self {
            waiter: listener,
            turn,
            timeout,
            cap,
            subscribing,
            clock,
        }
    }

    /// Sleeps for `delay`, or less if our turn is announced meanwhile (or was, since the last pause).
    ///
    /// While a majority of the masters carry its subscription, the turn's message is what wakes it,
    /// and the timer only keeps its ticket alive: it sleeps the whole cap, so that many queued
    /// waiters do not retry at every retry delay, each of them sending its attempt to every master
    /// (the herd). Otherwise it sleeps the retry delay, within the cap.
    fn pause(&self, delay: Duration) -> impl Future<Output = ()> + 'static {
        let (turn, waiter, timeout) = (Arc::clone(&self.turn), Arc::clone(&self.waiter), self.timeout);
        let (clock, cap) = (self.clock.clone(), self.cap);
        async move {
            // Re-subscribes on masters that reconnected (a no-op otherwise), within the delay.
            let listening = clock
                .timeout(delay.min(cap), waiter.listen(timeout))
                .await
                .unwrap_or(0);
            let sleep = if listening >= quorum(waiter.masters()) {
                cap
            } else {
                delay.min(cap)
            };
            let until = clock.deadline(sleep);
            tokio::select! {
                // In a fixed order: one seed, one history (the simulation runs this on a paused clock).
                biased;
                () = clock.sleep_until(until) => {}
                () = turn.notified() => debug!("woken by a release naming this waiter"),
            }
        }
    }
}

impl Sleep for NamedWake {
    fn sleep(&self, delay: Duration, _contended: bool) -> impl Future<Output = ()> + Send {
        self.pause(delay)
    }
}

impl Drop for NamedWake {
    fn drop(&mut self) {
        if let Some(subscribing) = self.subscribing.take() {
            subscribing.abort();
        }
    }
}

/// A kind's wake between attempts: by an announced release of its keys, or by a message naming
/// the waiter.
pub(crate) enum Woken<'a> {
    /// [`ReleaseWake`].
    Released(ReleaseWake<'a>),
    /// [`NamedWake`].
    Named(NamedWake),
}

impl Sleep for Woken<'_> {
    async fn sleep(&self, delay: Duration, contended: bool) {
        match self {
            Woken::Released(wake) => wake.sleep(delay, contended).await,
            Woken::Named(wake) => wake.sleep(delay, contended).await,
        }
    }
}

/// The plain acquire's wait: woken by the holder's release, or at the key's expiry on a majority.
pub(crate) struct ReleaseOrExpiry<'a> {
    /// How a pause goes when nobody will announce anything (masters failing), or when
    /// announcements are off.
    backoff: Jittered<Delay>,
    plan: RetryPlan,
    /// When the wait began, and when it ends.
    started: Instant,
    deadline: Instant,
    waits: &'a Waits,
    masters: &'a Masters,
    resource: &'a str,
    key: &'a str,
    /// Keys whose announced releases wake the waiter too, and whose expiry it waits for.
    also: &'a [String],
    node_timeout: Duration,
    /// The spread of the wake-up after an expiry, so processes do not all retry at one instant.
    spread: Duration,
    /// Listening on the key's release channel and on this client's wake channel, once contended,
    /// and on the `also` keys' channels.
    waiter: Option<(Waiter, Waiter, Vec<Waiter>)>,
    polling: bool,
    /// Whether this process queues for the key ([`WaitSettings::queue`]).
    queue: bool,
}

/// What an acquire's waits need of its client.
#[derive(Debug, Clone)]
pub(crate) struct WaitSettings {
    /// The attempts and the wait.
    pub(crate) plan: RetryPlan,
    /// The delay between attempts that are not woken.
    pub(crate) backoff: core::Backoff,
    /// Whether to listen for release announcements at all.
    pub(crate) wake_on_release: bool,
    /// Whether a plain waiter's process queues for the key (always, but in the herd's control).
    pub(crate) queue: bool,
    /// The bound on each master's reply.
    pub(crate) node_timeout: Duration,
    /// The clock the wait is measured on.
    pub(crate) clock: Clock,
}

impl<'a> ReleaseOrExpiry<'a> {
    /// The wait for `key` of `resource` (woken by releases of the `also` keys too) that started
    /// at `started`.
    pub(crate) fn new(
        settings: WaitSettings,
        entropy: Entropy,
        started: Instant,
        waits: &'a Waits,
        masters: &'a Masters,
        (resource, key, also): (&'a str, &'a str, &'a [String]),
    ) -> Self {
        Self {
            backoff: Jittered::new(&settings, entropy, started, Delay(settings.clock.clone())),
            plan: settings.plan,
            started,
            deadline: deadline(started, settings.plan),
            waits,
            masters,
            resource,
            key,
            also,
            node_timeout: settings.node_timeout,
            spread: settings.backoff.max().saturating_sub(settings.backoff.min()) / 2,
            waiter: None,
            polling: !settings.wake_on_release,
            queue: settings.queue,
        }
    }
}

/// When a wait of `plan` that started at `started` ends: a wait too long to represent
/// (`Duration::MAX` for "forever") is as good as none.
pub(crate) fn deadline(started: Instant, plan: RetryPlan) -> Instant {
    started
        .checked_add(plan.wait)
        .unwrap_or_else(|| later(started, FOREVER))
}

impl Policy for ReleaseOrExpiry<'_> {
    async fn pause(&mut self, attempts: u32, err: &AcquireError) -> Next {
        if self.polling || !err.is_contended() {
            // Nobody will announce anything (masters failing), or announcements are off.
            return self.backoff.pause(attempts, err).await;
        }
        let clock = self.backoff.clock.clone();
        let elapsed = clock.now().saturating_duration_since(self.started);
        if !self.plan.may_try_again(attempts, elapsed) {
            return Next::GiveUp;
        }
        let timeout = self.node_timeout;
        if self.waiter.is_none() {
            let (key, wake) = (self.waits.waiter(self.key), self.waits.wake_waiter());
            let also: Vec<Waiter> = self.also.iter().map(|k| self.waits.waiter(k)).collect();
            let (on_key, _, _) = futures::join!(
                key.listen(timeout),
                wake.listen(timeout),
                crate::mechanisms::fanout::all(also.iter().map(|w| w.listen(timeout)))
            );
            if on_key == 0 {
                self.waits.warn_polling(self.resource);
                self.polling = true;
                return Next::Again;
            }
            self.waiter = Some((key, wake, also));
        }
        let Some((listener, wake, also)) = &self.waiter else {
            return Next::Again;
        };
        loop {
            // Re-subscribes on masters that reconnected; a no-op otherwise.
            futures::join!(
                listener.listen(timeout),
                wake.listen(timeout),
                crate::mechanisms::fanout::all(also.iter().map(|w| w.listen(timeout)))
            );
            let mut released: Vec<_> = also.iter().map(Waiter::releases).collect();
            for rx in &mut released {
                rx.borrow_and_update();
            }
            let pause = self.look(listener).await;
            let wake_at = clock.deadline(pause.sleep).min(self.deadline);
            let woken = if released.is_empty() {
                listener.woken_before(wake_at).await
            } else {
                // A release of an `also` key (the last reader's) wakes it as well.
                let others =
                    futures::future::select_all(released.iter_mut().map(|rx| Box::pin(rx.changed())));
                tokio::select! {
                    biased;
                    woken = listener.woken_before(wake_at) => woken,
                    _ = others => true,
                }
            };
            let elapsed = clock.now().saturating_duration_since(self.started);
            if woken || pause.then == Then::Attempt || clock.now() >= self.deadline {
                if !woken && !self.plan.may_try_again(attempts, elapsed) {
                    return Next::GiveUp;
                }
                debug!(attempt = attempts, woken, "retrying after a wait");
                return Next::Again;
            }
            // Further back in the queue: the process ahead is owed the next hand-off; look again.
        }
    }
}

impl ReleaseOrExpiry<'_> {
    /// Queues this process for the key (or keeps its place) and reads the key: how long to sleep
    /// unless a release hands the key over, and what to do then.
    async fn look(&self, listener: &Waiter) -> queue::Pause {
        let looks = if self.queue {
            let score = listener.queue_score(self.backoff.entropy.wall_ms());
            handoff::look(
                self.masters,
                (self.key, self.also),
                listener.member(),
                score,
                QUEUE_LIFE,
            )
            .await
        } else {
            // The herd's control: the key's PTTL alone, and no place in any queue.
            pttls(self.masters, self.key).await
        };
        for (link, look) in self.masters.iter().zip(&looks) {
            if look.is_some() && self.queue {
                listener.queued_on(link.index());
            }
        }
        let n = self.masters.len();
        let free = expiry::free_in(looks.iter().map(|l| l.map_or(Pttl::Unknown, |(pttl, _)| pttl)), n);
        let place = if self.queue {
            queue::place(looks.iter().map(|l| l.map(|(_, ahead)| ahead)), n)
        } else {
            None
        };
        // A little past the expiry, spread so processes do not all retry at the same instant.
        let spread_us = u64::try_from(self.spread.as_micros()).unwrap_or(0);
        let jitter = Duration::from_micros(
            self.backoff
                .entropy
                .between(1_000, 1_000u64.saturating_add(spread_us)),
        );
        let pause = queue::pause(free, place, MAX_FALLBACK_WAIT, jitter);
        debug!(?place, sleep_ms = pause.sleep.as_millis() as u64, then = ?pause.then, "queued for the key");
        pause
    }
}

/// The masters' PTTLs of `key`, as looks without a place (the herd's control does not queue).
async fn pttls(masters: &Masters, key: &str) -> Vec<handoff::Look> {
    let mut cmd = redis::cmd("PTTL");
    cmd.arg(key);
    let cmd = Arc::new(cmd);
    let replies =
        crate::mechanisms::fanout::all(masters.iter().map(|link| link.query(Arc::clone(&cmd)))).await;
    replies
        .into_iter()
        .map(|reply| match reply {
            Ok(redis::Value::Int(ms)) => Some((Pttl::from_reply(ms), 0)),
            _ => None,
        })
        .collect()
}

impl<S: Sleep + Sync> Sleep for &S {
    fn sleep(&self, delay: Duration, contended: bool) -> impl Future<Output = ()> + Send {
        (**self).sleep(delay, contended)
    }
}
