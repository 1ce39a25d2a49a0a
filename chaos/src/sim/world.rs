//! The simulated world: every master, the store, and the network between them and the clients,
//! driven by one task on tokio's paused clock. Requests arrive over one channel; the world
//! delivers each to its master after a seeded delay (never overtaking an earlier message on the
//! same connection, as TCP), runs it on the master's own clock, and sends the reply back the same
//! way. Faults from the plan start and heal at their instants; what the operations among them do
//! to a master (promotions, replacements, `CONFIG SET`, fillers, long scripts, late delivery,
//! rollbacks) is in `world/operations.rs`, a crash and a restart in `world/lifecycle.rs`. Nothing
//! here reads the wall clock or an unseeded
//! generator, so one seed gives one schedule.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::rc::Rc;
use std::time::Duration;

use futures::channel::mpsc as fmpsc;
use quorlock::seam::Message;
use quorlock::NodeErrorKind;
use rand::rngs::StdRng;
use rand::RngExt;
use redis::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::durability::{Before, Survival};
use super::fault::{Fault, Planned};
use super::fence_watch::FenceWatch;
use super::master::SimMaster;
use super::wire::{Conn, Endpoint, Envelope, Incoming, LeftKey, Op, Replies};
use crate::history::FaultWindow;

mod lifecycle;
mod operations;

/// One master's clock: `base + elapsed * (1e6 + ppm) / 1e6 + jumped`, in ms since the epoch.
#[derive(Debug, Clone, Copy)]
pub struct MasterClock {
    /// The master's reading at the run start.
    pub base: u64,
    /// Its rate error in parts per million (in model: within the drift allowance).
    pub ppm: i64,
    /// Jumps so far (out of model).
    pub jumped: u64,
}

impl MasterClock {
    fn at(&self, elapsed_ms: u64) -> u64 {
        let scaled = i128::from(elapsed_ms) * i128::from(1_000_000 + self.ppm) / 1_000_000;
        self.base + u64::try_from(scaled).unwrap_or(0) + self.jumped
    }
}

/// One simulated master and its state in the network.
pub struct Node {
    /// The master.
    pub master: SimMaster,
    /// Its clock.
    pub clock: MasterClock,
    down: bool,
    blackholed: bool,
    extra_ms: u64,
    /// Subscribed channels per (client, sub connection).
    subs: BTreeMap<(usize, u64), (fmpsc::UnboundedSender<Message>, Vec<String>)>,
    /// How many connections subscribe each channel, kept with `subs`: what `PUBLISH` answers.
    listeners: Rc<RefCell<HashMap<String, i64>>>,
    /// While it is down: what its restart brings back.
    revives: Option<Survival>,
    /// Its persistence was lowered at runtime in its current incarnation (`CONFIG SET`).
    lowered: bool,
    /// A script of another client's is running on it.
    busy: Option<Busy>,
    /// Filler keys written so far.
    filled: u64,
    /// Keys evicted by its earlier incarnations.
    evicted_before: u64,
}

impl Node {
    /// A node for `master`.
    pub fn new(master: SimMaster, clock: MasterClock) -> Node {
        let mut node = Node {
            master,
            clock,
            down: false,
            blackholed: false,
            extra_ms: 0,
            subs: BTreeMap::new(),
            listeners: Rc::default(),
            revives: None,
            lowered: false,
            busy: None,
            filled: 0,
            evicted_before: 0,
        };
        node.count_listeners();
        node
    }

    /// Makes the master's `PUBLISH` answer how many connections subscribe the channel, as a
    /// server does (the release's hand-off skips a process that no longer listens).
    fn count_listeners(&mut self) {
        let listeners = Rc::clone(&self.listeners);
        self.master.set_subscriber_count(Box::new(move |channel| {
            let channel = String::from_utf8_lossy(channel);
            listeners.borrow().get(channel.as_ref()).copied().unwrap_or(0)
        }));
    }

    /// Counts the subscriptions again, after they changed.
    fn recount(&mut self) {
        let mut counts: HashMap<String, i64> = HashMap::new();
        for (_, channels) in self.subs.values() {
            for channel in channels {
                *counts.entry(channel.clone()).or_default() += 1;
            }
        }
        *self.listeners.borrow_mut() = counts;
    }
}

/// A long script on a master: until `busy_at` the master reads nothing, then it answers `BUSY`
/// until `until` (both in ms from the run start).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Busy {
    busy_at: u64,
    until: u64,
}

/// One direction-pair of a connection: when its last message in each direction arrives, and its
/// generation (a reset bumps it, and what was sent before is lost).
#[derive(Debug, Default, Clone, Copy)]
struct Link {
    gen: u64,
    up_free: u64,
    down_free: u64,
    broken: bool,
}

type LinkKey = (usize, Endpoint, Conn);

enum Event {
    Arrive(Envelope, u64),
    Return(LinkKey, u64, Delivery),
    /// The planned fault of this index starts.
    Start(usize),
    /// ... and ends.
    End(usize),
    /// The world copies the data the planned fault of this index will need (what had replicated,
    /// what the disk held, what the VM snapshot kept).
    Before(usize),
    /// The filler of the planned fault of this index writes once more, until the instant given.
    Fill(usize, u64),
}

enum Delivery {
    Replies(oneshot::Sender<Replies>, Replies),
    Done(
        oneshot::Sender<Result<(), NodeErrorKind>>,
        Result<(), NodeErrorKind>,
    ),
    Message(fmpsc::UnboundedSender<Message>, Message),
}

struct Queued {
    at: u64,
    seq: u64,
    event: Event,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The world's counters, read at the end of a run.
#[derive(Debug, Default, Clone, Copy)]
pub struct WorldStats {
    /// Commands run on lock masters.
    pub commands: u64,
    /// Faults started.
    pub faults: u64,
    /// The acquire side's commands among them, one per command of a pipeline (`SET`, `EVAL`,
    /// `EVALSHA`: what `INFO commandstats` would count as attempts and scripts).
    pub sets_and_scripts: u64,
    /// Messages published on lock masters (release announcements).
    pub published: u64,
}

/// What the world did, read at the end of a run: each fault as it happened (a fault can start
/// later than planned), the faults by type, what the operations caused, and notes on what was
/// out of model.
#[derive(Debug, Default, Clone)]
pub struct WorldLog {
    /// Each fault that started, with its window.
    pub windows: Vec<FaultWindow>,
    /// Faults started, by [`Fault::kind`].
    pub by_kind: BTreeMap<String, u64>,
    /// What the operations caused (late requests run, `BUSY` and `OOM` replies, writes lost ...).
    pub effects: BTreeMap<String, u64>,
    /// Out of model: what happened.
    pub notes: Vec<String>,
}

impl WorldLog {
    fn count(&mut self, effect: &str, n: u64) {
        if n > 0 {
            *self.effects.entry(effect.to_owned()).or_default() += n;
        }
    }
}

/// The world: masters, store, network, faults.
pub struct World {
    start: Instant,
    rng: StdRng,
    nodes: Vec<Node>,
    store: Node,
    links: BTreeMap<LinkKey, Link>,
    partitions: BTreeMap<(usize, usize), u32>,
    /// Paused clients, with the instant (ms) they resume.
    frozen: BTreeMap<usize, u64>,
    /// Requests swallowed by a partition or a blackhole, dropped (the connection resets) at the
    /// heal, or executed then for the late variants.
    limbo: Vec<(LinkKey, Event)>,
    queue: BinaryHeap<Reverse<Queued>>,
    seq: u64,
    stats: Rc<Cell<WorldStats>>,
    /// The plan, by index.
    planned: Vec<Fault>,
    /// What each planned fault that needs a copy of a master's data got.
    befores: BTreeMap<usize, Before>,
    /// The generator of the operations' own draws; `None` for a classic run, which draws nothing
    /// more than it did before operations existed.
    ops: Option<StdRng>,
    log: Rc<RefCell<WorldLog>>,
    /// Ground truth about the fencing counters, for the judge.
    fences: FenceWatch,
}

impl World {
    /// A world of `nodes` and `store` whose faults follow `plan`, starting at `start`; `ops` draws
    /// what the operations need (how much a crash of an `everysec` master loses, the new servers'
    /// identities), and is `None` for a classic run.
    pub fn new(
        start: Instant,
        rng: StdRng,
        nodes: Vec<Node>,
        store: Node,
        plan: Vec<Planned>,
        ops: Option<StdRng>,
    ) -> World {
        let mut world = World {
            start,
            rng,
            fences: FenceWatch::new(nodes.len()),
            nodes,
            store,
            links: BTreeMap::new(),
            partitions: BTreeMap::new(),
            frozen: BTreeMap::new(),
            limbo: Vec::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            stats: Rc::default(),
            planned: plan.iter().map(|p| p.fault.clone()).collect(),
            befores: BTreeMap::new(),
            ops,
            log: Rc::default(),
        };
        // The copies first: one due at the same instant as a fault is taken before it.
        for (id, planned) in plan.iter().enumerate() {
            if let Some(ago) = world.copy_ahead(&planned.fault) {
                world.push(planned.at_ms.saturating_sub(ago), Event::Before(id));
            }
        }
        for (id, planned) in plan.iter().enumerate() {
            world.push(planned.at_ms, Event::Start(id));
        }
        world
    }

    fn now(&self) -> u64 {
        u64::try_from(Instant::now().saturating_duration_since(self.start).as_millis()).unwrap_or(u64::MAX)
    }

    fn push(&mut self, at: u64, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse(Queued {
            at,
            seq: self.seq,
            event,
        }));
    }

    /// The counters, readable while the world runs.
    pub fn stats(&self) -> Rc<Cell<WorldStats>> {
        Rc::clone(&self.stats)
    }

    /// What happened, readable while the world runs.
    pub fn log(&self) -> Rc<RefCell<WorldLog>> {
        Rc::clone(&self.log)
    }

    /// Runs until every sender of `incoming` is gone.
    pub async fn run(mut self, mut incoming: mpsc::UnboundedReceiver<Incoming>) {
        let sleep = tokio::time::sleep_until(self.start);
        tokio::pin!(sleep);
        loop {
            while let Ok(msg) = incoming.try_recv() {
                self.receive(msg);
            }
            let now = self.now();
            while self.queue.peek().is_some_and(|q| q.0.at <= now) {
                if let Some(Reverse(q)) = self.queue.pop() {
                    self.handle(q.event);
                }
            }
            let next = self.queue.peek().map(|q| q.0.at);
            if let Some(at) = next {
                sleep
                    .as_mut()
                    .reset(self.start + std::time::Duration::from_millis(at));
            }
            tokio::select! {
                biased;
                msg = incoming.recv() => match msg {
                    Some(msg) => self.receive(msg),
                    None => return,
                },
                () = &mut sleep, if next.is_some() => {}
            }
        }
    }

    fn receive(&mut self, msg: Incoming) {
        match msg {
            Incoming::Request(env) => self.send(env),
            Incoming::CloseBatch { client, master } => {
                self.reset_link((client, Endpoint::Master(master), Conn::Batch));
            }
            Incoming::Freeze { client, ms } => {
                let until = self.now().saturating_add(ms);
                let resume = self.frozen.entry(client).or_default();
                *resume = (*resume).max(until);
            }
            Incoming::HealAll => self.heal_all(),
            Incoming::Keys(reply) => {
                let now = self.now();
                let mut keys = Vec::new();
                let mut evicted = 0;
                for (i, node) in self.nodes.iter().enumerate() {
                    let clock = node.clock.at(now);
                    evicted += node.evicted_before + node.master.evicted_keys();
                    for (key, deadline) in node.master.deadlines(clock) {
                        keys.push(LeftKey {
                            master: i,
                            key: String::from_utf8_lossy(&key).into_owned(),
                            expires: deadline.is_some(),
                        });
                    }
                }
                let mut log = self.log.borrow_mut();
                log.effects.remove(operations::EVICTED);
                log.count(operations::EVICTED, evicted);
                drop(log);
                let _ = reply.send(keys);
            }
        }
    }

    fn delay(&mut self, endpoint: Endpoint) -> u64 {
        let base = if self.rng.random_ratio(1, 8) {
            self.rng.random_range(2..=6)
        } else {
            1
        };
        match endpoint {
            Endpoint::Master(i) => base + self.nodes[i].extra_ms,
            Endpoint::Store => 1,
        }
    }

    /// A client sends: the request reaches its master after the link's delay, behind earlier ones.
    fn send(&mut self, env: Envelope) {
        let key = (env.client, env.master, env.conn);
        let now = self.now();
        let delay = self.delay(env.master);
        // A paused client's request leaves when it resumes.
        let leaves = resume_at(&self.frozen, env.client, now);
        let link = self.links.entry(key).or_default();
        if link.broken {
            // The client finds out on this request that the connection died; the next one reconnects.
            link.broken = false;
            fail(env.op);
            return;
        }
        let at = (leaves + delay).max(link.up_free);
        link.up_free = at;
        let gen = link.gen;
        self.push(at, Event::Arrive(env, gen));
    }

    fn cut(&self, client: usize, endpoint: Endpoint) -> bool {
        match endpoint {
            Endpoint::Master(m) => {
                self.nodes[m].blackholed || self.partitions.get(&(client, m)).is_some_and(|n| *n > 0)
            }
            Endpoint::Store => false,
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::Arrive(env, gen) => self.arrive(env, gen),
            Event::Return(key, gen, delivery) => {
                if self.links.get(&key).is_none_or(|l| l.gen != gen) {
                    return; // the connection reset: the reply is lost, the client sees it fail
                }
                if self.cut(key.0, key.1) {
                    self.limbo.push((key, Event::Return(key, gen, delivery)));
                    return;
                }
                // A paused client reads what reached it when it resumes, in the order it came.
                let now = self.now();
                let resume = resume_at(&self.frozen, key.0, now);
                if resume > now {
                    self.push(resume, Event::Return(key, gen, delivery));
                    return;
                }
                deliver(delivery);
            }
            Event::Start(id) => self.start_fault(id),
            Event::End(id) => self.end_fault(id),
            Event::Before(id) => self.copy_for(id),
            Event::Fill(id, until) => self.fill(id, until),
        }
    }

    fn arrive(&mut self, env: Envelope, gen: u64) {
        let key = (env.client, env.master, env.conn);
        if self.links.get(&key).is_none_or(|l| l.gen != gen) {
            return; // sent on a connection that has since reset
        }
        if self.cut(env.client, env.master) {
            self.limbo.push((key, Event::Arrive(env, gen)));
            return;
        }
        let now = self.now();
        let down = match env.master {
            Endpoint::Master(m) => self.nodes[m].down,
            Endpoint::Store => false,
        };
        if down {
            // Connection refused: the client learns it at once.
            fail(env.op);
            return;
        }
        let env = match self.busy_check(env, gen, now) {
            Some(env) => env,
            None => return,
        };
        let client = env.client;
        let conn = env.conn;
        let node = match env.master {
            Endpoint::Master(m) => &mut self.nodes[m],
            Endpoint::Store => &mut self.store,
        };
        let clock = node.clock.at(now);
        let mut published = Vec::new();
        let mut oom = 0;
        let mut sets_and_scripts = 0;
        let delivery = match env.op {
            Op::Commands {
                cmds,
                skip,
                count,
                reply,
            } => {
                let mut values = Vec::with_capacity(cmds.len());
                for cmd in &cmds {
                    if matches!(env.master, Endpoint::Master(_))
                        && cmd.first().is_some_and(|c| acquire_side(c))
                    {
                        sets_and_scripts += 1;
                    }
                    let args: Vec<&[u8]> = cmd.iter().map(Vec::as_slice).collect();
                    let out = node.master.execute(clock, &args);
                    published.extend(out.published);
                    if matches!(&out.value, Value::ServerError(e) if e.code() == "OOM") {
                        oom += 1;
                    }
                    values.push(out.value);
                }
                let wanted: Vec<Value> = values.into_iter().skip(skip).take(count).collect();
                Delivery::Replies(reply, Ok(wanted))
            }
            Op::Open { messages, reply } => {
                if let Conn::Sub(id) = conn {
                    node.subs.insert((client, id), (messages, Vec::new()));
                }
                Delivery::Done(reply, Ok(()))
            }
            Op::Subscribe { channel, on, reply } => {
                if let Conn::Sub(id) = conn {
                    if let Some((_, channels)) = node.subs.get_mut(&(client, id)) {
                        channels.retain(|c| *c != channel);
                        if on {
                            channels.push(channel);
                        }
                    }
                    node.recount();
                }
                Delivery::Done(reply, Ok(()))
            }
        };
        if let Endpoint::Master(_) = env.master {
            let mut stats = self.stats.get();
            stats.commands += 1;
            stats.sets_and_scripts += sets_and_scripts;
            stats.published += published.len() as u64;
            self.stats.set(stats);
            self.log.borrow_mut().count(operations::OOM, oom);
        }
        self.answer(key, delivery, now);
        if let Endpoint::Master(m) = env.master {
            self.publish(m, now, published);
        }
    }

    /// Sends `delivery` back on the connection `key` at `now`, behind what it sent earlier.
    fn answer(&mut self, key: LinkKey, delivery: Delivery, now: u64) {
        let out_delay = self.delay(key.1);
        let link = self.links.entry(key).or_default();
        let at = (now + out_delay).max(link.down_free);
        link.down_free = at;
        let gen = link.gen;
        self.push(at, Event::Return(key, gen, delivery));
    }

    /// Sends each published message to the master's subscribers of its channel.
    fn publish(&mut self, m: usize, now: u64, published: Vec<(Vec<u8>, Vec<u8>)>) {
        for (channel, payload) in published {
            let channel = String::from_utf8_lossy(&channel).into_owned();
            let payload = String::from_utf8_lossy(&payload).into_owned();
            let targets: Vec<(LinkKey, fmpsc::UnboundedSender<Message>)> = self.nodes[m]
                .subs
                .iter()
                .filter(|(_, (_, chans))| chans.contains(&channel))
                .map(|(&(client, id), (tx, _))| ((client, Endpoint::Master(m), Conn::Sub(id)), tx.clone()))
                .collect();
            for (key, tx) in targets {
                let delay = self.delay(Endpoint::Master(m));
                let link = self.links.entry(key).or_default();
                let at = (now + delay).max(link.down_free);
                link.down_free = at;
                let gen = link.gen;
                let message = Message {
                    channel: channel.clone(),
                    payload: payload.clone(),
                };
                self.push(at, Event::Return(key, gen, Delivery::Message(tx, message)));
            }
        }
    }

    /// Resets one connection: what is in flight on it is lost, and a pub/sub connection closes.
    fn reset_link(&mut self, key: LinkKey) {
        let link = self.links.entry(key).or_default();
        link.gen += 1;
        link.broken = matches!(key.2, Conn::Shared | Conn::Batch);
        if let (Endpoint::Master(m), Conn::Sub(id)) = (key.1, key.2) {
            self.nodes[m].subs.remove(&(key.0, id));
            self.nodes[m].recount();
        }
        // Waiting requests on it get their failure now (dropped senders read as a lost connection).
        self.limbo.retain(|(k, _)| *k != key);
    }

    fn reset_where(&mut self, pred: impl Fn(&LinkKey) -> bool) {
        let keys: Vec<LinkKey> = self.links.keys().copied().filter(|k| pred(k)).collect();
        for key in keys {
            self.reset_link(key);
        }
        let subs: Vec<LinkKey> = self
            .nodes
            .iter()
            .enumerate()
            .flat_map(|(m, n)| {
                n.subs
                    .keys()
                    .map(move |&(c, id)| (c, Endpoint::Master(m), Conn::Sub(id)))
            })
            .filter(|k| pred(k))
            .collect();
        for key in subs {
            self.reset_link(key);
        }
    }

    fn start_fault(&mut self, id: usize) {
        let Some(fault) = self.planned.get(id).cloned() else {
            return;
        };
        let now = self.now();
        if let Fault::Crash { master, .. } = &fault {
            if self.unseen_promotion(*master) {
                // Out of model if it crashed now (see `unseen_promotion`): a little later.
                self.log.borrow_mut().count(operations::POSTPONED, 1);
                self.push(now + 100, Event::Start(id));
                return;
            }
        }
        let mut stats = self.stats.get();
        stats.faults += 1;
        self.stats.set(stats);
        {
            let mut log = self.log.borrow_mut();
            *log.by_kind.entry(fault.kind().to_owned()).or_default() += 1;
            log.windows.push(FaultWindow {
                start: Duration::from_millis(now),
                end: Duration::from_millis(now + fault.duration_ms()),
                label: fault.label(),
            });
        }
        match &fault {
            Fault::Partition { client, master, .. } => {
                *self.partitions.entry((*client, *master)).or_default() += 1;
            }
            Fault::Blackhole { master, .. } => self.nodes[*master].blackholed = true,
            Fault::Reset { client, master } => {
                let (c, m) = (*client, Endpoint::Master(*master));
                self.reset_where(|k| k.0 == c && k.1 == m);
            }
            Fault::Slow { master, extra_ms, .. } => self.nodes[*master].extra_ms += extra_ms,
            Fault::Crash { master, .. } => self.crash(id, *master),
            Fault::ClockJump { master, ms } => self.nodes[*master].clock.jumped += ms,
            Fault::Promote { .. }
            | Fault::Replace { .. }
            | Fault::Appendfsync { .. }
            | Fault::Fill { .. }
            | Fault::Busy { .. }
            | Fault::Rollback { .. } => self.start_operation(id, &fault, now),
        }
        if fault.has_end() {
            self.push(now + fault.duration_ms(), Event::End(id));
        }
    }

    fn end_fault(&mut self, id: usize) {
        let Some(fault) = self.planned.get(id).cloned() else {
            return;
        };
        let now = self.now();
        match &fault {
            Fault::Partition {
                client, master, late, ..
            } => {
                let count = self.partitions.entry((*client, *master)).or_default();
                *count = count.saturating_sub(1);
                if *count == 0 {
                    let (c, m) = (*client, Endpoint::Master(*master));
                    if *late {
                        self.deliver_late(|k| k.0 == c && k.1 == m);
                    } else {
                        self.reset_where(|k| k.0 == c && k.1 == m);
                    }
                }
            }
            Fault::Blackhole { master, late, .. } => {
                if self.nodes[*master].blackholed {
                    self.nodes[*master].blackholed = false;
                    let m = Endpoint::Master(*master);
                    if *late {
                        self.deliver_late(|k| k.1 == m);
                    } else {
                        self.reset_where(|k| k.1 == m);
                    }
                }
            }
            Fault::Slow { master, extra_ms, .. } => {
                let node = &mut self.nodes[*master];
                node.extra_ms = node.extra_ms.saturating_sub(*extra_ms);
            }
            Fault::Crash { master, .. } => self.restart(*master, now),
            Fault::Busy { master, .. } => self.end_busy(*master, now),
            Fault::Reset { .. }
            | Fault::ClockJump { .. }
            | Fault::Promote { .. }
            | Fault::Replace { .. }
            | Fault::Appendfsync { .. }
            | Fault::Fill { .. }
            | Fault::Rollback { .. } => {}
        }
    }

    fn heal_all(&mut self) {
        self.partitions.clear();
        let now = self.now();
        for m in 0..self.nodes.len() {
            self.nodes[m].blackholed = false;
            self.nodes[m].extra_ms = 0;
            self.nodes[m].busy = None;
            if self.nodes[m].down {
                self.restart(m, now);
            }
        }
        let keys: Vec<LinkKey> = self.limbo.iter().map(|(k, _)| *k).collect();
        for key in keys {
            self.reset_link(key);
        }
        // Pending faults, their ends and what they needed are dropped: the run is over.
        let pending = std::mem::take(&mut self.queue);
        for q in pending.into_vec() {
            if matches!(q.0.event, Event::Arrive(..) | Event::Return(..)) {
                self.queue.push(q);
            }
        }
    }
}

/// When client `client`, paused or not, next acts: `now`, or the end of its pause.
fn resume_at(frozen: &BTreeMap<usize, u64>, client: usize, now: u64) -> u64 {
    frozen.get(&client).map_or(now, |until| (*until).max(now))
}

/// Whether a command is `SET`, `EVAL` or `EVALSHA`.
fn acquire_side(name: &[u8]) -> bool {
    [&b"SET"[..], b"EVAL", b"EVALSHA"]
        .iter()
        .any(|n| name.eq_ignore_ascii_case(n))
}

fn deliver(delivery: Delivery) {
    match delivery {
        Delivery::Replies(tx, r) => {
            let _ = tx.send(r);
        }
        Delivery::Done(tx, r) => {
            let _ = tx.send(r);
        }
        Delivery::Message(tx, m) => {
            let _ = tx.unbounded_send(m);
        }
    }
}

fn refused() -> NodeErrorKind {
    NodeErrorKind::Connection("connection refused (simulated)".into())
}

/// Fails a request at once, as a refused or dead connection does.
fn fail(op: Op) {
    match op {
        Op::Commands { reply, .. } => {
            let _ = reply.send(Err(refused()));
        }
        Op::Open { reply, .. } | Op::Subscribe { reply, .. } => {
            let _ = reply.send(Err(refused()));
        }
    }
}
