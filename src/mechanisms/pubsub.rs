//! The pub/sub hub: release announcements, heard once per process and handed to its waiters.
//!
//! Every release script publishes the released token on `quorlock:released:{key}` on every master
//! where it deleted the key. A process keeps one pub/sub connection per master, opened on the first
//! contended wait and shared by every waiter; a channel is subscribed while at least one waiter in
//! the process wants it, and unsubscribed when the last one leaves. A connection that closes marks
//! its channels unsubscribed on that master, and the next waiter subscribes them again.
//!
//! The announcements of one release (one per master) wake one plain waiter once, when a majority of
//! the masters this process listens to has announced it (so the retry finds the key free on a
//! majority rather than racing the release on the slower masters); many waiters do not stampede.
//! Between processes, a plain lock's release is not announced to all: it is handed to the first
//! process in the key's queue on its own wake channel (`handoff.rs`), one per client, which this hub
//! hears as it hears the key's channel; a process's place in each key's queue is kept here, with the
//! channel, and its leave is sent when its last waiter for the key goes.
//! Kind waiters watch a count of releases instead ([`Waiter::releases`]), and fair waiters are woken
//! by a message that names their ticket ([`Waiter::named`]). When and how a waiter retries is the
//! retry policy's business (`retry/policy.rs`).

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;
use tracing::{debug, warn};

use crate::base::error::NodeErrorKind;
use crate::base::names::{release_channel, wake_channel};
use crate::core::quorum;
use crate::mechanisms::handoff;
use crate::seam::clock::Clock;
use crate::seam::link::Masters;
use crate::seam::{Master, Message, SubscriberControl};

/// How long a master whose pub/sub connection failed is left alone before reconnecting: 1 s.
pub(crate) const PUBSUB_RECONNECT_DELAY: Duration = Duration::from_secs(1);

/// The release listeners of one [`crate::Quorlock`].
pub(crate) struct Waits {
    hub: Arc<Hub>,
}

struct Hub {
    channels: Mutex<HashMap<String, Arc<Channel>>>,
    /// This client's own wake channel, on which a release hands a key to this process.
    wake: String,
    masters: Vec<Listener>,
    /// Source of connection generations: a channel subscribed on generation `g` of a master must
    /// subscribe again once that master reconnected.
    generations: AtomicU64,
    /// Whether the fall-back-to-polling warning was given.
    warned: AtomicBool,
    /// How long opening a pub/sub connection may take (the builder's connect timeout).
    connect_timeout: Duration,
    /// The clock waits and reconnection delays are measured on.
    clock: Clock,
}

/// One master's pub/sub connection, opened on demand.
struct Listener {
    index: usize,
    master: Arc<dyn Master>,
    conn: tokio::sync::Mutex<Connection>,
}

#[derive(Default)]
struct Connection {
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
    sink: Box<dyn SubscriberControl>,
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
    /// Where this process stands in the key's hand-off queue (plain waiters only).
    queue: Mutex<Queue>,
}

/// Where this process stands in one key's hand-off queue on the masters.
#[derive(Debug, Default)]
struct Queue {
    /// The score it registers with (when it first registered, ms on its wall clock), kept while it
    /// waits so that a look after a lost race keeps its place; `None` until the first look, and
    /// again after one of its waiters was handed the key, so that the next one queues at the back.
    score: Option<u64>,
    /// Per master.
    on: Vec<Queued>,
}

/// Whether one master queues this process for a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Queued {
    /// Not registered there.
    #[default]
    Out,
    /// Registered by a look that master answered.
    In,
    /// That master handed the key to this process, which left its queue there.
    HandedOff,
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
    /// The listeners of `masters` for the client whose random id is `id` (its wake channel's name).
    pub(crate) fn new(masters: &Masters, connect_timeout: Duration, clock: Clock, id: &str) -> Self {
        Self {
            hub: Arc::new(Hub {
                channels: Mutex::new(HashMap::new()),
                wake: wake_channel(id),
                masters: masters
                    .iter()
                    .map(|link| Listener {
                        index: link.index(),
                        master: Arc::clone(link.master()),
                        conn: tokio::sync::Mutex::new(Connection::default()),
                    })
                    .collect(),
                generations: AtomicU64::new(1),
                warned: AtomicBool::new(false),
                connect_timeout,
                clock,
            }),
        }
    }

    /// Joins the listeners of `key`'s release channel (nothing is sent yet; see [`Waiter::listen`]).
    pub(crate) fn waiter(&self, key: &str) -> Waiter {
        self.on_channel(release_channel(key))
    }

    /// Joins the listeners of this client's own wake channel, on which a release hands a key to
    /// this process: a plain waiter listens on it while it is queued.
    pub(crate) fn wake_waiter(&self) -> Waiter {
        self.on_channel(self.hub.wake.clone())
    }

    fn on_channel(&self, name: String) -> Waiter {
        let mut channels = self.hub.channels();
        let channel = Arc::clone(channels.entry(name.clone()).or_insert_with(|| {
            Arc::new(Channel {
                name,
                wake: Notify::new(),
                last: Mutex::new(None),
                subscribed: Mutex::new(vec![Sub::Off; self.hub.masters.len()]),
                named: Mutex::new(HashMap::new()),
                released: tokio::sync::watch::Sender::new(0),
                queue: Mutex::new(Queue {
                    score: None,
                    on: vec![Queued::Out; self.hub.masters.len()],
                }),
            })
        }));
        Waiter {
            hub: Arc::clone(&self.hub),
            channel,
            name: None,
        }
    }
}

impl Waits {
    /// Warns, once per client, that a wait for `resource` found no master to subscribe on.
    pub(crate) fn warn_polling(&self, resource: &str) {
        self.hub.warn_polling(resource);
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

    /// Hands one message from master `index` to the waiters of its channel: an announcement on a
    /// key's channel, or a hand-off on this client's wake channel, which names the key's channel.
    fn deliver(&self, index: usize, msg: &Message) {
        let handed = msg.channel == self.wake;
        let (name, token) = if handed {
            match handoff::parse(&msg.payload) {
                Some((token, name)) => (name, token),
                // A liveness probe of the queue (`handoff_common.lua`).
                None => return,
            }
        } else {
            (msg.channel.as_str(), msg.payload.as_str())
        };
        let Some(channel) = self.channels().get(name).cloned() else {
            if handed {
                self.pass_on(index, name, token);
            }
            return;
        };
        if handed {
            if let Some(at) = lock(&channel.queue).on.get_mut(index) {
                *at = Queued::HandedOff;
            }
        }
        let token = token.to_owned();
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
        debug!(channel = name, handed, "release announced by a majority");
        channel.released.send_modify(|n| *n = n.wrapping_add(1));
        // One plain waiter per release: the rest wait for the next one (or their fallback).
        channel.wake.notify_one();
    }
}

impl Hub {
    /// Passes a hand-off of `token` on `channel` from master `index`, which this process has no
    /// waiter for any more, on to the next queued process there.
    fn pass_on(&self, index: usize, channel: &str, token: &str) {
        let Some(listener) = self.masters.iter().find(|l| l.index == index) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (master, channel, token) = (Arc::clone(&listener.master), channel.to_owned(), token.to_owned());
        let timeout = self.connect_timeout;
        debug!(
            node = index,
            channel, "passing on a hand-off nobody here waits for"
        );
        runtime.spawn(async move { handoff::pass_on(master, &channel, &token, timeout).await });
    }
}

impl Listener {
    /// Makes sure `channel` is subscribed on this master's current connection, connecting first if
    /// needed. Returns whether it is.
    async fn ensure(&self, hub: &Arc<Hub>, channel: &Channel) -> bool {
        let mut slot = self.conn.lock().await;
        if !slot
            .live
            .as_ref()
            .is_some_and(|live| live.alive.load(Ordering::Acquire))
        {
            slot.live = None;
            if slot.connecting.is_none() {
                if slot.retry_after.is_some_and(|at| hub.clock.now() < at) {
                    return false;
                }
                slot.connecting = Some(tokio::spawn(connect(
                    Arc::clone(&self.master),
                    self.index,
                    Arc::downgrade(hub),
                    hub.connect_timeout,
                )));
            }
            let Some(connecting) = slot.connecting.as_mut() else {
                return false;
            };
            // Awaited in place: if this waiter's timeout ends the wait, the attempt goes on, and
            // one attempt at a time is made however many waiters pause meanwhile.
            let outcome = connecting.await;
            slot.connecting = None;
            match outcome {
                Ok(Ok(live)) => {
                    slot.retry_after = None;
                    slot.live = Some(live);
                }
                Ok(Err(error)) => {
                    slot.retry_after = Some(hub.clock.deadline(PUBSUB_RECONNECT_DELAY));
                    warn!(node = self.index, addr = %self.master.addr(), %error, "cannot open the pub/sub connection; waiters fall back to their timers");
                    return false;
                }
                Err(error) => {
                    slot.retry_after = Some(hub.clock.deadline(PUBSUB_RECONNECT_DELAY));
                    debug!(node = self.index, %error, "the pub/sub connection attempt ended");
                    return false;
                }
            }
        }
        // The connection stays in place while the SUBSCRIBE is out: a waiter's timeout that cuts
        // this short must not take down the connection every other channel listens on.
        let Some(live) = slot.live.as_ref() else {
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
        match live.sink.subscribe(&channel.name).await {
            Ok(()) => {
                // Unless the connection closed meanwhile (its reader then reset the state).
                set(Some(Sub::Sent(generation)), Sub::On(generation));
                true
            }
            Err(error) => {
                debug!(node = self.index, %error, "SUBSCRIBE failed");
                set(Some(Sub::Sent(generation)), Sub::Off);
                false
            }
        }
    }

    /// Unsubscribes `name` unless a waiter has come back for it.
    async fn unsubscribe(&self, hub: &Hub, channel: &Channel) {
        let slot = self.conn.lock().await;
        let Some(live) = slot.live.as_ref() else {
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
            if let Err(error) = live.sink.unsubscribe(&channel.name).await {
                debug!(node = self.index, %error, "UNSUBSCRIBE failed");
            }
        }
    }
}

/// Opens master `index`'s pub/sub connection within `timeout` and starts the task that reads it.
async fn connect(
    master: Arc<dyn Master>,
    index: usize,
    weak: Weak<Hub>,
    timeout: Duration,
) -> Result<Live, NodeErrorKind> {
    let subscriber = master.subscriber(timeout).await?;
    let (sink, mut stream) = (subscriber.control, subscriber.messages);
    let alive = Arc::new(AtomicBool::new(true));
    let flag = Arc::clone(&alive);
    let generation = match weak.upgrade() {
        Some(hub) => hub.generations.fetch_add(1, Ordering::Relaxed),
        None => return Err(NodeErrorKind::Connection("the client is gone".into())),
    };
    let reader = tokio::spawn(async move {
        while let Some(msg) = stream.next().await {
            match weak.upgrade() {
                Some(hub) => hub.deliver(index, &msg),
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
        let results = crate::mechanisms::fanout::all(hub.masters.iter().map(|master| async move {
            hub.clock
                .timeout(timeout, master.ensure(hub, channel))
                .await
                .unwrap_or(false)
        }))
        .await;
        results.into_iter().filter(|ok| *ok).count()
    }

    /// Waits for a release announcement until `until`; returns whether one came.
    pub(crate) async fn woken_before(&self, until: tokio::time::Instant) -> bool {
        self.hub
            .clock
            .timeout_at(until, self.channel.wake.notified())
            .await
            .is_ok()
    }

    /// Watches how many releases a majority has announced on this channel.
    pub(crate) fn releases(&self) -> tokio::sync::watch::Receiver<u64> {
        self.channel.released.subscribe()
    }

    /// This process's score in the key's hand-off queue: the one it is registered with, or `now_ms`
    /// (its wall clock) for a first registration.
    pub(crate) fn queue_score(&self, now_ms: u64) -> u64 {
        *lock(&self.channel.queue).score.get_or_insert(now_ms)
    }

    /// Records that master `index` answered a look: it queues this process.
    pub(crate) fn queued_on(&self, index: usize) {
        if let Some(at) = lock(&self.channel.queue).on.get_mut(index) {
            *at = Queued::In;
        }
    }

    /// How many masters the client has.
    pub(crate) fn masters(&self) -> usize {
        self.hub.masters.len()
    }

    /// This client's wake channel: its member in every hand-off queue.
    pub(crate) fn member(&self) -> &str {
        &self.hub.wake
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
        // A waiter handed the key leaves: the next look of this process queues it at the back.
        let leaving = {
            let mut queue = lock(&self.channel.queue);
            if queue.on.contains(&Queued::HandedOff) {
                queue.score = None;
                for at in &mut queue.on {
                    if *at == Queued::HandedOff {
                        *at = Queued::Out;
                    }
                }
            }
            queue.on.iter().map(|at| *at == Queued::In).collect::<Vec<_>>()
        };
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
                let leaves = hub
                    .masters
                    .iter()
                    .filter(|master| leaving.get(master.index) == Some(&true))
                    .map(|master| {
                        handoff::leave(
                            Arc::clone(&master.master),
                            &channel.name,
                            &hub.wake,
                            hub.connect_timeout,
                        )
                    });
                crate::mechanisms::fanout::all(leaves).await;
                for master in &hub.masters {
                    master.unsubscribe(&hub, &channel).await;
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Listeners of three masters that are never connected: announcements are delivered by hand.
    fn waits() -> Waits {
        let links = (0..3)
            .map(|i| {
                let node = crate::seam::redis_rs::Node::open(
                    "redis://127.0.0.1:1",
                    Duration::from_millis(50),
                    None,
                    None,
                )
                .expect("valid url");
                crate::seam::link::Link::new(i, Arc::new(node), Duration::from_millis(50))
            })
            .collect();
        Waits::new(
            &Masters::new(links),
            Duration::from_millis(50),
            Clock::Tokio,
            "test",
        )
    }

    fn announce(waits: &Waits, key: &str, payload: &str) {
        waits.hub.deliver(
            0,
            &Message {
                channel: release_channel(key),
                payload: payload.to_owned(),
            },
        );
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
        let woken = crate::mechanisms::fanout::all(plain.iter().map(|w| w.woken_before(later))).await;
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

    /// A release's hand-off arrives on this client's wake channel, naming the key's channel: it
    /// wakes a plain waiter of that key as an announcement would; a queue's liveness probe (an
    /// empty message) wakes nobody; a waiter that was handed the key sends the next one to the
    /// back of the queue.
    #[tokio::test(start_paused = true)]
    async fn a_hand_off_wakes_a_plain_waiter_and_a_probe_wakes_none() {
        let waits = waits();
        let plain = waits.waiter("k");
        let _listening = waits.wake_waiter();
        assert_eq!(plain.queue_score(7), 7);
        assert_eq!(
            plain.queue_score(9),
            7,
            "the score is kept while the process waits"
        );
        let hand = |payload: String| {
            waits.hub.deliver(
                0,
                &Message {
                    channel: waits.hub.wake.clone(),
                    payload,
                },
            );
        };
        hand(String::new());
        let soon = tokio::time::Instant::now() + Duration::from_secs(1);
        assert!(!plain.woken_before(soon).await, "a probe wakes nobody");
        hand(format!("token-1\n{}", release_channel("k")));
        let soon = tokio::time::Instant::now() + Duration::from_secs(1);
        assert!(plain.woken_before(soon).await, "the hand-off wakes the waiter");
        let next = waits.waiter("k");
        drop(plain);
        assert_eq!(
            next.queue_score(11),
            11,
            "after a hand-off, the next waiter queues at the back"
        );
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
