//! Blocking waits woken by release: the retrying `acquire` listens for the holder's release instead
//! of sleeping out a fixed delay.
//!
//! The release script publishes the released token on `quorlock:released:{key}` on every master
//! where it deleted the key. A process keeps one pub/sub connection per master, opened on the first
//! contended wait and shared by every waiter; a channel is subscribed while at least one waiter in
//! the process wants it. The wait loop of `acquire`:
//!
//! 1. queues on the local turn for the key, when local queueing is on (see `coalesce`);
//! 2. makes an attempt; if the key is held by another holder, subscribes to its channel and makes
//!    one more attempt at once, so a release that came between the first attempt and the
//!    subscription is not missed;
//! 3. then waits until a release is announced, or until the key would expire on a majority (its
//!    PTTL, read from the masters: a holder that crashed never announces), whichever comes first,
//!    all within the wait deadline, and tries again.
//!
//! The announcements of one release (one per master) wake one waiter once, when a majority of the
//! masters this process listens to has announced it (so the retry finds the key free on a
//! majority rather than racing the release on the slower masters); many waiters do not stampede. When no master accepts the subscription, the wait falls back to jittered polling with
//! the configured retry delay, with a warning.
//!
//! The lock kinds that retry through `Inner::retrying_woken` (reentrant, multi-resource, fenced) use
//! [`ReleaseWake`]: the same shared subscriptions, on the kinds' own keys, with the retry delay as
//! the fallback.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use futures::StreamExt;
use rand::Rng;
use redis::aio::PubSubSink;
use redis::{Client, Msg, Value};
use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinHandle};
use tracing::{debug, warn, Span};

use crate::coordinator::{release_channel, Inner};
use crate::core::{quorum, Timing};
use crate::error::{AcquireError, NodeErrorKind};
use crate::guard::Guard;
use crate::node::{classify, Node};

/// Stands in for a wait deadline too far away to represent: about 30 years.
const FOREVER: Duration = Duration::from_secs(30 * 365 * 24 * 60 * 60);

/// The longest a waiter sleeps without an announcement when the key's expiry cannot be read (a
/// key without a TTL, or too few masters answering): 1 s. It bounds the cost of a missed message.
pub const MAX_FALLBACK_WAIT: Duration = Duration::from_secs(1);
/// How long a master whose pub/sub connection failed is left alone before reconnecting: 1 s.
pub const PUBSUB_RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// The release listeners of one [`crate::Quorlock`].
pub(crate) struct Waits {
    hub: Arc<Hub>,
}

struct Hub {
    channels: Mutex<HashMap<String, Arc<Channel>>>,
    masters: Vec<Master>,
    /// Source of connection generations: a channel subscribed on generation `g` of a master must
    /// subscribe again once that master reconnected.
    generations: AtomicU64,
    /// Whether the fall-back-to-polling warning was given.
    warned: AtomicBool,
    /// How long opening a pub/sub connection may take (the builder's connect timeout).
    connect_timeout: Duration,
}

/// One master's pub/sub connection, opened on demand.
struct Master {
    index: usize,
    addr: String,
    client: Client,
    conn: tokio::sync::Mutex<Link>,
}

#[derive(Default)]
struct Link {
    live: Option<Live>,
    /// No reconnect before this instant, after a failure.
    retry_after: Option<Instant>,
    /// A connection being opened, in a task of its own: bounded by the connect timeout, not by
    /// the patience of the waiter that started it, whose timeout is the node timeout. Opening a
    /// connection takes longer than a command (a TLS handshake alone is two round trips), and an
    /// attempt cut off at the node timeout every time would leave the master without pub/sub for
    /// good. The next waiter picks up the outcome.
    connecting: Option<JoinHandle<Result<Live, NodeErrorKind>>>,
}

struct Live {
    sink: PubSubSink,
    generation: u64,
    alive: Arc<AtomicBool>,
    reader: AbortHandle,
}

impl Drop for Live {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// Where a channel stands on one master's pub/sub connection, named by its generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Sub {
    /// Not subscribed.
    #[default]
    Off,
    /// A `SUBSCRIBE` went out but its reply never came (a waiter's timeout cut the wait short): it
    /// may be in force. A new waiter sends it again (it is idempotent), and the last waiter to
    /// leave still unsubscribes, so the connection is not left carrying the channel.
    Sent(u64),
    /// Subscribed: the server confirmed it.
    On(u64),
}

impl Sub {
    /// Whether this may be in force on connection generation `generation`.
    fn maybe_on(self, generation: u64) -> bool {
        matches!(self, Sub::Sent(g) | Sub::On(g) if g == generation)
    }
}

/// One subscribed channel and the waiters of this process listening on it.
struct Channel {
    name: String,
    wake: Notify,
    /// The last release token announced and on how many masters, so one release wakes once.
    last: Mutex<Option<(String, usize)>>,
    /// Per master, where this channel stands on its pub/sub connection.
    subscribed: Mutex<Vec<Sub>>,
    /// Fair waiters listening for a message that names them (their ticket id), each woken by
    /// every such message rather than by a majority's announcement of a token.
    named: Mutex<HashMap<String, Arc<Notify>>>,
    /// How many releases a majority has announced: every kind waiter ([`ReleaseWake`]) watches it,
    /// so none of them takes the one wake-up a plain waiter of the same key is owed.
    released: tokio::sync::watch::Sender<u64>,
}

/// A waiter's subscription to one key's release channel; unsubscribes when the last one goes.
pub(crate) struct Waiter {
    hub: Arc<Hub>,
    channel: Arc<Channel>,
    /// The payload this waiter listens for by name, if any (see [`Waiter::named`]).
    name: Option<(String, Arc<Notify>)>,
}

impl fmt::Debug for Waits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Waits")
            .field("channels", &self.hub.channels().len())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Waits {
    pub(crate) fn new(nodes: &[Node], connect_timeout: Duration) -> Self {
        Self {
            hub: Arc::new(Hub {
                channels: Mutex::new(HashMap::new()),
                masters: nodes
                    .iter()
                    .map(|node| Master {
                        index: node.index(),
                        addr: node.addr().to_owned(),
                        client: node.client().clone(),
                        conn: tokio::sync::Mutex::new(Link::default()),
                    })
                    .collect(),
                generations: AtomicU64::new(1),
                warned: AtomicBool::new(false),
                connect_timeout,
            }),
        }
    }

    /// Joins the listeners of `key`'s release channel (nothing is sent yet; see [`Waiter::listen`]).
    pub(crate) fn waiter(&self, key: &str) -> Waiter {
        let name = release_channel(key);
        let mut channels = self.hub.channels();
        let channel = Arc::clone(channels.entry(name.clone()).or_insert_with(|| {
            Arc::new(Channel {
                name,
                wake: Notify::new(),
                last: Mutex::new(None),
                subscribed: Mutex::new(vec![Sub::Off; self.hub.masters.len()]),
                named: Mutex::new(HashMap::new()),
                released: tokio::sync::watch::Sender::new(0),
            })
        }));
        Waiter {
            hub: Arc::clone(&self.hub),
            channel,
            name: None,
        }
    }
}

impl Hub {
    /// Warns, once per client, that a wait for `resource` found no master to subscribe on.
    fn warn_polling(&self, resource: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            warn!(
                resource,
                "release announcements are unavailable on every master; falling back to polling"
            );
        }
    }

    fn channels(&self) -> MutexGuard<'_, HashMap<String, Arc<Channel>>> {
        lock(&self.channels)
    }

    /// Hands one announcement to the waiters of its channel.
    fn deliver(&self, msg: &Msg) {
        let name = msg.get_channel_name();
        let Some(channel) = self.channels().get(name).cloned() else {
            return;
        };
        let token: String = msg.get_payload().unwrap_or_default();
        if let Some(named) = lock(&channel.named).get(&token) {
            named.notify_one();
        }
        let listening = lock(&channel.subscribed)
            .iter()
            .filter(|s| matches!(s, Sub::On(_)))
            .count();
        let needed = quorum(self.masters.len()).min(listening).max(1);
        {
            let mut last = lock(&channel.last);
            let seen = match last.as_mut() {
                Some((t, n)) if *t == token => {
                    *n += 1;
                    *n
                }
                _ => {
                    *last = Some((token, 1));
                    1
                }
            };
            if seen != needed {
                return;
            }
        }
        debug!(channel = name, "release announced by a majority");
        channel.released.send_modify(|n| *n = n.wrapping_add(1));
        // One plain waiter per release: the rest wait for the next one (or their fallback).
        channel.wake.notify_one();
    }
}

impl Master {
    /// Makes sure `channel` is subscribed on this master's current connection, connecting first if
    /// needed. Returns whether it is.
    async fn ensure(&self, hub: &Arc<Hub>, channel: &Channel) -> bool {
        let mut link = self.conn.lock().await;
        if !link
            .live
            .as_ref()
            .is_some_and(|live| live.alive.load(Ordering::Acquire))
        {
            link.live = None;
            if link.connecting.is_none() {
                if link.retry_after.is_some_and(|at| Instant::now() < at) {
                    return false;
                }
                link.connecting = Some(tokio::spawn(connect(
                    self.client.clone(),
                    self.index,
                    Arc::downgrade(hub),
                    hub.connect_timeout,
                )));
            }
            let Some(connecting) = link.connecting.as_mut() else {
                return false;
            };
            // Awaited in place: if this waiter's timeout ends the wait, the attempt goes on, and
            // one attempt at a time is made however many waiters pause meanwhile.
            let outcome = connecting.await;
            link.connecting = None;
            match outcome {
                Ok(Ok(live)) => {
                    link.retry_after = None;
                    link.live = Some(live);
                }
                Ok(Err(error)) => {
                    link.retry_after = Some(Instant::now() + PUBSUB_RECONNECT_DELAY);
                    warn!(node = self.index, addr = %self.addr, %error, "cannot open the pub/sub connection; waiters fall back to their timers");
                    return false;
                }
                Err(error) => {
                    link.retry_after = Some(Instant::now() + PUBSUB_RECONNECT_DELAY);
                    debug!(node = self.index, %error, "the pub/sub connection attempt ended");
                    return false;
                }
            }
        }
        // The connection stays in place while the SUBSCRIBE is out: a waiter's timeout that cuts
        // this short must not take down the connection every other channel listens on.
        let Some(live) = link.live.as_ref() else {
            return false;
        };
        let generation = live.generation;
        let set = |from: Option<Sub>, to: Sub| {
            if let Some(state) = lock(&channel.subscribed).get_mut(self.index) {
                if from.is_none_or(|from| *state == from) {
                    *state = to;
                }
            }
        };
        if lock(&channel.subscribed).get(self.index) == Some(&Sub::On(generation)) {
            return true;
        }
        set(None, Sub::Sent(generation));
        match live.sink.clone().subscribe(&channel.name).await {
            Ok(()) => {
                // Unless the connection closed meanwhile (its reader then reset the state).
                set(Some(Sub::Sent(generation)), Sub::On(generation));
                true
            }
            Err(err) => {
                debug!(node = self.index, error = %classify(&err), "SUBSCRIBE failed");
                set(Some(Sub::Sent(generation)), Sub::Off);
                false
            }
        }
    }

    /// Unsubscribes `name` unless a waiter has come back for it.
    async fn unsubscribe(&self, hub: &Hub, channel: &Channel) {
        let link = self.conn.lock().await;
        let Some(live) = link.live.as_ref() else {
            return;
        };
        if hub.channels().contains_key(&channel.name) {
            // A new waiter took the channel again; its subscription is ordered after this lock.
            return;
        }
        let subscribed = lock(&channel.subscribed)
            .get(self.index)
            .is_some_and(|state| state.maybe_on(live.generation));
        if subscribed {
            if let Err(err) = live.sink.clone().unsubscribe(&channel.name).await {
                debug!(node = self.index, error = %classify(&err), "UNSUBSCRIBE failed");
            }
        }
    }
}

/// Opens master `index`'s pub/sub connection within `timeout` and starts the task that reads it.
async fn connect(
    client: Client,
    index: usize,
    weak: Weak<Hub>,
    timeout: Duration,
) -> Result<Live, NodeErrorKind> {
    let pubsub = match tokio::time::timeout(timeout, client.get_async_pubsub()).await {
        Ok(opened) => opened.map_err(|e| classify(&e))?,
        Err(_) => return Err(NodeErrorKind::Timeout),
    };
    let (sink, mut stream) = pubsub.split();
    let alive = Arc::new(AtomicBool::new(true));
    let flag = Arc::clone(&alive);
    let generation = match weak.upgrade() {
        Some(hub) => hub.generations.fetch_add(1, Ordering::Relaxed),
        None => return Err(NodeErrorKind::Connection("the client is gone".into())),
    };
    let reader = tokio::spawn(async move {
        while let Some(msg) = stream.next().await {
            match weak.upgrade() {
                Some(hub) => hub.deliver(&msg),
                None => return,
            }
        }
        flag.store(false, Ordering::Release);
        debug!(node = index, "pub/sub connection closed");
        // Nothing more comes from this master until it is subscribed again.
        if let Some(hub) = weak.upgrade() {
            for channel in hub.channels().values() {
                if let Some(state) = lock(&channel.subscribed).get_mut(index) {
                    if state.maybe_on(generation) {
                        *state = Sub::Off;
                    }
                }
            }
        }
    });
    Ok(Live {
        sink,
        generation,
        alive,
        reader: reader.abort_handle(),
    })
}

impl Waiter {
    /// Subscribes on every master that is not yet, each bounded by `timeout`; returns on how many
    /// masters the channel is subscribed.
    pub(crate) async fn listen(&self, timeout: Duration) -> usize {
        let hub = &self.hub;
        let channel = &self.channel;
        let results = futures::future::join_all(hub.masters.iter().map(|master| async move {
            tokio::time::timeout(timeout, master.ensure(hub, channel))
                .await
                .unwrap_or(false)
        }))
        .await;
        results.into_iter().filter(|ok| *ok).count()
    }

    /// Waits for a release announcement until `until`; returns whether one came.
    pub(crate) async fn woken_before(&self, until: tokio::time::Instant) -> bool {
        tokio::time::timeout_at(until, self.channel.wake.notified())
            .await
            .is_ok()
    }

    /// Watches how many releases a majority has announced on this channel.
    pub(crate) fn releases(&self) -> tokio::sync::watch::Receiver<u64> {
        self.channel.released.subscribe()
    }

    /// Wakes the returned `Notify` on every message of this channel whose payload is `name` (a
    /// fair waiter's ticket id), until this waiter is dropped.
    pub(crate) fn named(&mut self, name: &str) -> Arc<Notify> {
        let notify = Arc::new(Notify::new());
        lock(&self.channel.named).insert(name.to_owned(), Arc::clone(&notify));
        self.name = Some((name.to_owned(), Arc::clone(&notify)));
        notify
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if let Some((name, ours)) = self.name.take() {
            let mut named = lock(&self.channel.named);
            // Only our own registration: another waiter may have reused the name since.
            if named.get(&name).is_some_and(|n| Arc::ptr_eq(n, &ours)) {
                named.remove(&name);
            }
        }
        let mut channels = self.hub.channels();
        // Ours and the map's are the only references left: the last waiter is leaving.
        let last = Arc::strong_count(&self.channel) == 2
            && channels
                .get(&self.channel.name)
                .is_some_and(|c| Arc::ptr_eq(c, &self.channel));
        if !last {
            return;
        }
        channels.remove(&self.channel.name);
        drop(channels);
        let (hub, channel) = (Arc::clone(&self.hub), Arc::clone(&self.channel));
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                for master in &hub.masters {
                    master.unsubscribe(&hub, &channel).await;
                }
            });
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
struct ReleaseWake<'a> {
    inner: &'a Inner,
    keys: Vec<String>,
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
    /// Prepares to listen for releases of `keys`; nothing is subscribed yet.
    fn new(inner: &'a Inner, keys: Vec<String>) -> Self {
        Self {
            inner,
            keys,
            listening: Mutex::new(None),
        }
    }

    /// Pauses for up to `delay` after a failed attempt; `contended` says whether another holder
    /// refused it (only then is subscribing worth it).
    async fn pause(&self, delay: Duration, contended: bool) {
        let until = tokio::time::Instant::now() + delay;
        if !self.inner.config.wake_on_release {
            tokio::time::sleep_until(until).await;
            return;
        }
        let timeout = self.inner.config.node_timeout;
        let current = lock(&self.listening).clone();
        let listening = match current {
            None if contended => {
                let waiters: Vec<Waiter> = self.keys.iter().map(|k| self.inner.waits.waiter(k)).collect();
                let subscribed = futures::future::join_all(waiters.iter().map(|w| w.listen(timeout))).await;
                if subscribed.iter().all(|n| *n == 0) {
                    self.inner.waits.hub.warn_polling(&self.keys.join(", "));
                    *lock(&self.listening) = Some(Arc::new(Listening::new(Vec::new())));
                    tokio::time::sleep_until(until).await;
                } else {
                    // Subscribed now: try again at once, in case the release came in between.
                    *lock(&self.listening) = Some(Arc::new(Listening::new(waiters)));
                }
                return;
            }
            Some(listening) if !listening.waiters.is_empty() => listening,
            _ => {
                tokio::time::sleep_until(until).await;
                return;
            }
        };
        // Re-subscribes on masters that reconnected (a no-op otherwise), within this pause.
        let relisten = futures::future::join_all(listening.waiters.iter().map(|w| w.listen(timeout)));
        let _ = tokio::time::timeout_at(until, relisten).await;
        let mut watching: Vec<_> = listening.waiters.iter().map(Waiter::releases).collect();
        let now: Vec<u64> = watching.iter_mut().map(|rx| *rx.borrow_and_update()).collect();
        let woken = if now == *lock(&listening.seen) {
            let changed = futures::future::select_all(watching.iter_mut().map(|rx| Box::pin(rx.changed())));
            tokio::time::timeout_at(until, changed).await.is_ok()
        } else {
            // Released since the last pause: retry at once.
            true
        };
        *lock(&listening.seen) = listening.counts();
        debug!(woken, "kind retrying after a wait");
    }
}

impl Inner {
    /// [`Inner::retrying`] for a lock kind whose lock is the keys `keys`: a pause ends early when a
    /// release of one of them is announced (see [`ReleaseWake`]).
    pub(crate) async fn retrying_woken<F, Fut>(
        &self,
        resource: &str,
        keys: Vec<String>,
        round: F,
    ) -> Result<Guard, AcquireError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Guard, AcquireError>>,
    {
        let wake = ReleaseWake::new(self, keys);
        self.retrying(resource, |delay, contended| wake.pause(delay, contended), round)
            .await
    }

    /// How long until a majority of masters no longer hold `key`, from their PTTLs; `None` when
    /// too few masters gave a usable answer.
    pub(crate) async fn free_in(&self, key: &str) -> Option<Duration> {
        let mut cmd = redis::cmd("PTTL");
        cmd.arg(key);
        let replies = futures::future::join_all(self.nodes.iter().map(|node| node.query(&cmd))).await;
        let mut known: Vec<u64> = replies
            .into_iter()
            .filter_map(|reply| match reply {
                // -2: no key (free now); -1: a key without expiry (not ours to predict).
                Ok(Value::Int(-2)) => Some(0),
                Ok(Value::Int(ms)) => u64::try_from(ms).ok(),
                _ => None,
            })
            .collect();
        known.sort_unstable();
        known
            .get(quorum(self.nodes.len()).saturating_sub(1))
            .map(|ms| Duration::from_millis(*ms))
    }

    /// The retrying acquire: local turn, attempts, and waits woken by release or by expiry.
    pub(crate) async fn acquire_waiting(
        self: &Arc<Self>,
        resource: &str,
        timing: Timing,
    ) -> Result<Guard, AcquireError> {
        let plan = self.config.retry;
        let started = Instant::now();
        // A wait too long to represent (`Duration::MAX` for "forever") is as good as none.
        let deadline = tokio::time::Instant::from_std(started)
            .checked_add(plan.wait)
            .unwrap_or_else(|| tokio::time::Instant::now() + FOREVER);
        // One copy of the key serves the local queue, the rounds and the guard.
        let key = self.shared_key(resource);
        let turn = if self.config.local_queue {
            match tokio::time::timeout_at(deadline, self.queue.turn(&key)).await {
                Ok(turn) => Some(turn),
                Err(_) => {
                    return Err(AcquireError::Queued {
                        resource: resource.to_owned(),
                        waited: started.elapsed(),
                    })
                }
            }
        } else {
            None
        };
        let mut waiter: Option<Waiter> = None;
        let mut polling = !self.config.wake_on_release;
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            Span::current().record("attempt", attempts);
            let err = match self.round_keyed(resource, Arc::clone(&key), timing).await {
                Ok(guard) => {
                    if let Some(turn) = turn {
                        guard.held.hold_turn(turn);
                    }
                    return Ok(guard);
                }
                Err(err) => err,
            };
            if !err.is_retryable() {
                return Err(err);
            }
            let exhausted = |err: AcquireError, attempts: u32| AcquireError::Exhausted {
                resource: resource.to_owned(),
                attempts,
                waited: started.elapsed(),
                last: Box::new(err),
            };
            if polling || !err.is_contended() {
                // Nobody will announce anything (masters failing), or announcements are off.
                let delay = self.config.backoff.jitter(&mut rand::rng());
                match plan.next_delay(attempts, started.elapsed(), delay) {
                    Some(delay) => {
                        debug!(attempt = attempts, delay_ms = delay.as_millis() as u64, error = %err, "retrying after a delay");
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                    None => return Err(exhausted(err, attempts)),
                }
            }
            if attempts >= plan.max_attempts || tokio::time::Instant::now() >= deadline {
                return Err(exhausted(err, attempts));
            }
            let Some(listener) = &waiter else {
                let fresh = self.waits.waiter(&key);
                if fresh.listen(self.config.node_timeout).await == 0 {
                    self.waits.hub.warn_polling(resource);
                    polling = true;
                    continue;
                }
                waiter = Some(fresh);
                // Subscribed now: try again at once, in case the release came in between.
                continue;
            };
            // Re-subscribes on masters that reconnected; a no-op otherwise.
            listener.listen(self.config.node_timeout).await;
            let fallback = self
                .free_in(&key)
                .await
                .unwrap_or(MAX_FALLBACK_WAIT)
                .min(MAX_FALLBACK_WAIT);
            // A little past the expiry, spread so processes do not all retry at the same instant.
            let spread = self
                .config
                .backoff
                .max()
                .saturating_sub(self.config.backoff.min())
                / 2;
            let jitter = Duration::from_micros(rand::rng().random_range(
                1_000..=1_000u64.saturating_add(u64::try_from(spread.as_micros()).unwrap_or(0)),
            ));
            let wake_at = (tokio::time::Instant::now() + fallback + jitter).min(deadline);
            let woken = listener.woken_before(wake_at).await;
            if !woken && tokio::time::Instant::now() >= deadline {
                return Err(exhausted(err, attempts));
            }
            debug!(attempt = attempts, woken, "retrying after a wait");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Listeners of three masters that are never connected: announcements are delivered by hand.
    fn waits() -> Waits {
        let nodes: Vec<Node> = (0..3)
            .map(|i| {
                Node::new(
                    i,
                    "redis://127.0.0.1:1",
                    Duration::from_millis(50),
                    Duration::from_millis(50),
                )
                .expect("valid url")
            })
            .collect();
        Waits::new(&nodes, Duration::from_millis(50))
    }

    fn announce(waits: &Waits, key: &str, payload: &str) {
        let msg = Msg::from_owned_value(Value::Array(vec![
            Value::BulkString(b"message".to_vec()),
            Value::BulkString(release_channel(key).into_bytes()),
            Value::BulkString(payload.as_bytes().to_vec()),
        ]))
        .expect("a pub/sub message");
        waits.hub.deliver(&msg);
    }

    /// With no master subscribed, one announcement makes a release (see `Hub::deliver`).
    #[tokio::test(start_paused = true)]
    async fn one_release_wakes_one_plain_waiter_and_every_kind_waiter() {
        let waits = waits();
        let plain = [waits.waiter("k"), waits.waiter("k")];
        let kinds = [waits.waiter("k"), waits.waiter("k")];
        let mut watching: Vec<_> = kinds.iter().map(Waiter::releases).collect();
        announce(&waits, "k", "token-1");
        for rx in &mut watching {
            assert!(
                rx.has_changed().expect("channel alive"),
                "every kind waiter sees the release"
            );
            rx.borrow_and_update();
        }
        let later = tokio::time::Instant::now() + Duration::from_secs(3600);
        let woken = futures::future::join_all(plain.iter().map(|w| w.woken_before(later))).await;
        assert_eq!(
            woken.iter().filter(|w| **w).count(),
            1,
            "one plain waiter per release: {woken:?}"
        );
        // A second release with another payload is a new release for everyone.
        announce(&waits, "k", "token-2");
        for rx in &mut watching {
            assert!(rx.has_changed().expect("channel alive"));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_named_waiter_is_woken_by_every_message_naming_it_and_no_other() {
        let waits = waits();
        let mut mine = waits.waiter("fair");
        let turn = mine.named("ticket-a");
        announce(&waits, "fair", "ticket-b");
        let later = tokio::time::Instant::now() + Duration::from_secs(3600);
        assert!(
            tokio::time::timeout_at(later, turn.notified()).await.is_err(),
            "another ticket's turn does not wake us"
        );
        announce(&waits, "fair", "ticket-a");
        let later = tokio::time::Instant::now() + Duration::from_secs(3600);
        assert!(tokio::time::timeout_at(later, turn.notified()).await.is_ok());
        drop(mine);
        assert!(
            lock(&waits.hub.channels).is_empty(),
            "the last waiter takes the channel with it"
        );
    }
}
