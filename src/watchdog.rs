//! The watchdog: keeps held locks alive by renewing them before they expire, for as long as their
//! guards live, and says so the moment one is lost.
//!
//! There is one renewal scheduler per [`Quorlock`] (a single task, spawned on the first
//! [`Guard::keep_alive`]), not a task per guard: with thousands of held locks, one tick sends one
//! pipeline of renewals per master instead of one round trip per lock. The scheduler holds only weak
//! references, so a dropped guard is released as usual and simply falls out of the schedule.
//!
//! Each renewal uses the lock's own extend command ([`LockOps`](crate::ops::LockOps)), so every kind
//! of lock is kept alive the same way, and is counted over all N masters with the same tally as an
//! acquire: the new validity runs from the start of the tick. A lock whose renewal is refused by a
//! master holding another token (a conflict), or that too few masters still hold, is marked lost at
//! once and dropped from the schedule; a renewal that failed for want of replies is retried inside
//! the remaining validity. Either way the guard's `lost()` fires no later than the end of the last
//! confirmed validity.
//!
//! Renewals travel on a second connection per master, opened lazily, so a large renewal pipeline
//! never queues in front of acquires and releases. After a large tick those connections are closed
//! and reopened on the next one, so the write buffers a big pipeline grew are not kept between
//! ticks ([`RENEWAL_CONNECTION_RECYCLE`]). Script renewals go out as `EVALSHA`, with the scripts'
//! `SCRIPT LOAD` at the head of the same pipeline: a tick carries each script's source once instead
//! of once per lock, and a master that lost its script cache (a restart) still finds the script
//! loaded before the first renewal that needs it.

use std::collections::hash_map::Entry as Slot;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Arg, Cmd, Value};
use tokio::sync::Notify;
use tracing::{debug, warn};

use crate::coordinator::{ttl_millis, Inner, Quorlock};
use crate::core::renewal::{self, Verdict};
use crate::core::{Decision, Tally, Vote};
use crate::error::NodeErrorKind;
use crate::guard::{Guard, Held};
use crate::lua::{sha1_hex, Lua};
use crate::node::classify;

/// How much time each renewal adds to the bound on a tick's pipeline, on top of the node timeout:
/// 20 µs, so 10,000 renewals may take 200 ms more than a single command. The bound is raised to
/// the shortest validity left among the tick's locks when that is longer: a reply later than that
/// is useless, one earlier still renews.
pub const RENEWAL_TIME_ALLOWANCE: Duration = Duration::from_micros(20);

/// A tick renewing at least this many locks closes its renewal connections afterwards (they are
/// reopened on the next tick): 1,000. A connection's write buffer keeps the capacity of the largest
/// pipeline it sent, about 100 bytes per renewal, for as long as it lives; with 10,000 locks that is
/// 1 MB per master kept between ticks, more than the locks themselves. Reopening costs one connect
/// per master per large tick, which is small next to the pipeline it follows.
pub const RENEWAL_CONNECTION_RECYCLE: usize = 1_000;

/// How a guard is kept alive. Start from [`KeepAlive::default`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeepAlive {
    /// Time between renewals; `None` renews every `ttl / 3`
    /// ([`DEFAULT_RENEWALS_PER_TTL`](crate::core::renewal::DEFAULT_RENEWALS_PER_TTL)). Kept within
    /// `[10 ms, ttl / 2]`.
    pub interval: Option<Duration>,
    /// A cap on the total hold, counted from the start of keep-alive; `None` for no cap. The last
    /// renewals are shortened so the lock expires at the cap.
    pub max_hold: Option<Duration>,
}

impl KeepAlive {
    /// Renews every `every` instead of every `ttl / 3`.
    pub fn interval(mut self, every: Duration) -> Self {
        self.interval = Some(every);
        self
    }

    /// Stops renewing so the lock expires `cap` after keep-alive started.
    pub fn max_hold(mut self, cap: Duration) -> Self {
        self.max_hold = Some(cap);
        self
    }
}

/// Counters of a [`Quorlock`]'s watchdog, for monitoring.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WatchdogStats {
    /// Locks currently kept alive.
    pub watched: usize,
    /// Ticks that sent renewals.
    pub ticks: u64,
    /// Renewal commands sent, each counted once however many masters it went to.
    pub renewals: u64,
    /// Pipelines sent: at most one per master per tick.
    pub pipelines: u64,
    /// Locks the watchdog found lost (conflict, expiry, or too few masters left).
    pub lost: u64,
}

impl Guard {
    /// Keeps the lock alive in the background, renewing it every `ttl / 3` until it is released,
    /// dropped or lost. Calling it again changes nothing.
    ///
    /// Needs a Tokio runtime; outside one it only logs a warning.
    pub fn keep_alive(&self) {
        self.held.inner.watchdog.watch(&self.held, None);
    }

    /// Keeps the lock alive with the given options; calling it again replaces them.
    pub fn keep_alive_with(&self, opts: KeepAlive) {
        self.held.inner.watchdog.watch(&self.held, Some(opts));
    }
}

impl Quorlock {
    /// The watchdog's counters.
    pub fn watchdog_stats(&self) -> WatchdogStats {
        let state = self.inner.watchdog.shared.state();
        WatchdogStats {
            watched: state.entries.len(),
            ..state.stats
        }
    }
}

/// The renewal scheduler of one [`Quorlock`]: the registry of kept-alive locks and the task that
/// renews them.
pub(crate) struct Watchdog {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the task when a lock joins the schedule or the handle is gone.
    wake: Notify,
}

#[derive(Default)]
struct State {
    /// Kept-alive locks by the address of their shared state.
    entries: HashMap<usize, Entry>,
    running: bool,
    closed: bool,
    stats: WatchdogStats,
}

struct Entry {
    held: Weak<Held>,
    interval: Duration,
    next_due: Instant,
    hold_until: Option<Instant>,
}

/// A lock renewed in the current tick.
struct Due {
    id: usize,
    held: Arc<Held>,
    ttl: Duration,
}

/// What a tick did for one lock.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// Renewed by a majority; the next renewal is counted from `started`.
    Renewed { started: Instant },
    /// Being extended by hand right now; look again shortly.
    Busy,
    /// Not enough replies; retry inside the remaining validity.
    Retry,
    /// Lost, released, or at its hold cap: no more renewals.
    Stop,
}

impl fmt::Debug for Watchdog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.shared.state();
        f.debug_struct("Watchdog")
            .field("watched", &state.entries.len())
            .field("running", &state.running)
            .finish()
    }
}

impl Watchdog {
    pub(crate) fn new() -> Self {
        Self {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                wake: Notify::new(),
            }),
        }
    }

    /// Adds a lock to the schedule (or replaces its options when `opts` is given), and starts the
    /// task if it is not running.
    fn watch(&self, held: &Arc<Held>, opts: Option<KeepAlive>) {
        let runtime = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => runtime,
            Err(_) => {
                warn!(resource = %held.resource, "keep_alive outside a Tokio runtime: the lock is not renewed");
                return;
            }
        };
        if held.is_released() || held.status.get().lost {
            return;
        }
        let now = Instant::now();
        let make = |opts: KeepAlive| {
            let interval = renewal::renew_interval(held.ttl, opts.interval);
            // The first renewal comes `interval` after the round that set the current validity.
            let valid_until = held.valid_until();
            let next_due = held
                .ttl
                .checked_sub(interval)
                .and_then(|lead| valid_until.checked_sub(lead))
                .map_or(now, |due| due.max(now));
            Entry {
                held: Arc::downgrade(held),
                interval,
                next_due,
                hold_until: opts.max_hold.and_then(|cap| now.checked_add(cap)),
            }
        };
        let id = Arc::as_ptr(held) as usize;
        let mut state = self.shared.state();
        if state.closed {
            return;
        }
        match state.entries.entry(id) {
            Slot::Occupied(mut slot) if slot.get().held.as_ptr() == Arc::as_ptr(held) => {
                if let Some(opts) = opts {
                    slot.insert(make(opts));
                }
            }
            Slot::Occupied(mut slot) => {
                slot.insert(make(opts.unwrap_or_default()));
            }
            Slot::Vacant(slot) => {
                slot.insert(make(opts.unwrap_or_default()));
            }
        }
        if !state.running {
            state.running = true;
            runtime.spawn(run(Arc::clone(&self.shared), Arc::downgrade(&held.inner)));
        }
        drop(state);
        self.shared.wake.notify_one();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.shared.state().closed = true;
        self.shared.wake.notify_one();
    }
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes the locks due at `now` out for renewal, drops those no longer worth renewing, and
    /// returns when the next one falls due.
    fn take_due(&self, now: Instant) -> (Vec<Due>, Option<Instant>) {
        let mut due = Vec::new();
        let mut wake: Option<Instant> = None;
        let mut lost = 0u64;
        let mut state = self.state();
        state.entries.retain(|&id, entry| {
            let Some(held) = entry.held.upgrade() else {
                return false;
            };
            if held.is_released() {
                return false;
            }
            let status = held.status.get();
            if status.lost {
                return false;
            }
            if now >= status.valid_until {
                // Renewals kept failing until the validity ran out.
                held.mark_lost();
                lost += 1;
                warn!(resource = %held.resource, "watchdog could not renew the lock before its validity ended; it is lost");
                return false;
            }
            if !renewal::is_due(entry.next_due, entry.interval, now) {
                // Wake when the first lock is due (not early): the tick then takes every lock due
                // within the slack along, which is what merges the ticks of many locks.
                let at = entry.next_due;
                wake = Some(wake.map_or(at, |w| w.min(at)));
                return true;
            }
            match renewal::renew_ttl(held.ttl, entry.hold_until, now, Duration::ZERO) {
                Some(ttl) => {
                    due.push(Due { id, held, ttl });
                    true
                }
                None => {
                    debug!(resource = %held.resource, "hold cap reached; the lock expires with its validity");
                    false
                }
            }
        });
        state.stats.lost += lost;
        (due, wake)
    }

    /// Records what a tick did and schedules the next renewal of each lock.
    fn apply(&self, due: &[Due], outcomes: &[Outcome], retry_floor: Duration) {
        let now = Instant::now();
        let mut state = self.state();
        for (d, outcome) in due.iter().zip(outcomes) {
            let Slot::Occupied(mut slot) = state.entries.entry(d.id) else {
                continue;
            };
            if slot.get().held.as_ptr() != Arc::as_ptr(&d.held) {
                continue;
            }
            let entry = slot.get_mut();
            match outcome {
                Outcome::Renewed { started } => entry.next_due = *started + entry.interval,
                Outcome::Busy => {
                    entry.next_due = now + renewal::retry_delay(entry.interval, renewal::MIN_RENEW_INTERVAL)
                }
                Outcome::Retry => entry.next_due = now + renewal::retry_delay(entry.interval, retry_floor),
                Outcome::Stop => {
                    slot.remove();
                }
            }
        }
    }
}

/// Clears the running flag when the task ends, however it ends (even with its runtime).
struct Running(Arc<Shared>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.state().running = false;
    }
}

/// The scheduler task: sleeps until a lock is due, renews every due lock in one batch, repeats.
async fn run(shared: Arc<Shared>, inner: Weak<Inner>) {
    let _running = Running(Arc::clone(&shared));
    let mut conns: Vec<Option<ConnectionManager>> = Vec::new();
    let mut scripts = Scripts::default();
    loop {
        let (due, wake) = shared.take_due(Instant::now());
        if due.is_empty() {
            if shared.state().closed {
                return;
            }
            match wake {
                Some(at) => {
                    tokio::select! {
                        () = tokio::time::sleep_until(tokio::time::Instant::from_std(at)) => {}
                        () = shared.wake.notified() => {}
                    }
                }
                None => shared.wake.notified().await,
            }
            continue;
        }
        let Some(inner) = inner.upgrade() else {
            return;
        };
        let outcomes = renew(&inner, &mut conns, &mut scripts, &due).await;
        shared.apply(&due, &outcomes, inner.config.node_timeout);
    }
}

/// The renewal connection of each master, opened on first use.
fn connections(inner: &Inner, conns: &mut Vec<Option<ConnectionManager>>) {
    if conns.len() == inner.nodes.len() {
        return;
    }
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(inner.config.connect_timeout))
        .set_number_of_retries(0);
    *conns = inner
        .nodes
        .iter()
        .map(|node| match ConnectionManager::new_lazy_with_config(node.client().clone(), config.clone()) {
            Ok(conn) => Some(conn),
            Err(err) => {
                warn!(node = node.index(), addr = node.addr(), error = %classify(&err), "cannot open the renewal connection");
                None
            }
        })
        .collect();
}

/// One tick: renews every due lock with one pipeline per master, and updates each lock's status as
/// soon as its majority is known.
async fn renew(
    inner: &Inner,
    conns: &mut Vec<Option<ConnectionManager>>,
    scripts: &mut Scripts,
    due: &[Due],
) -> Vec<Outcome> {
    let started = Instant::now();
    let masters = inner.nodes.len();
    let mut outcomes = vec![Outcome::Busy; due.len()];
    // A lock being extended by hand is skipped this tick: two rounds at once could leave its
    // validity describing the older one.
    let serials: Vec<_> = due.iter().map(|d| d.held.extend_lock.try_lock().ok()).collect();
    let mut cmds = Vec::new();
    let mut rounds = Vec::new();
    for (i, (d, serial)) in due.iter().zip(&serials).enumerate() {
        if serial.is_none() {
            continue;
        }
        if d.held.is_released() || d.held.status.get().lost {
            outcomes[i] = Outcome::Stop;
            continue;
        }
        match inner.check_ttl(d.ttl) {
            Ok(timing) => {
                let ttl_ms = ttl_millis(d.ttl);
                // Built by SHA1 from the start where the kind allows it: no source copied per lock.
                cmds.push(match d.held.ops.extend_call(ttl_ms) {
                    Some(call) => {
                        scripts.load(call.script());
                        call.into_by_sha()
                    }
                    None => scripts.by_sha(d.held.ops.extend_cmd(ttl_ms)),
                });
                rounds.push(Round {
                    due: i,
                    tally: Tally::new(masters, timing, started),
                    yes: 0,
                    unreachable: 0,
                    conflict: false,
                    applied: false,
                });
            }
            // What is left of a capped hold is too short to renew to.
            Err(_) => outcomes[i] = Outcome::Stop,
        }
    }
    if rounds.is_empty() {
        return outcomes;
    }
    connections(inner, conns);
    let count = rounds.len();
    let mut pipe = redis::pipe();
    let loads = scripts.loads();
    let skip = loads.len();
    for load in loads {
        pipe.add_command(load);
    }
    for cmd in cmds {
        pipe.add_command(cmd);
    }
    let timeout = inner
        .config
        .node_timeout
        .saturating_add(RENEWAL_TIME_ALLOWANCE.saturating_mul(u32::try_from(count).unwrap_or(u32::MAX)));
    // Bounded by the node timeout (plus a per-renewal allowance), never by the locks' validity: a
    // stalled master must not hold up the tick, and with it every other lock's renewal. A master
    // too slow for this tick counts as a no; the next tick retries inside the remaining validity.
    let pipe = &pipe;
    let mut pending: FuturesUnordered<_> = conns
        .iter()
        .enumerate()
        .map(|(node, conn)| {
            let conn = conn.clone();
            async move { (node, send(conn, pipe, skip, count, timeout).await) }
        })
        .collect();
    let mut answered = 0;
    while let Some((node, reply)) = pending.next().await {
        answered += 1;
        let now = Instant::now();
        match reply {
            Ok(values) if values.len() == count => {
                for (round, value) in rounds.iter_mut().zip(values) {
                    let vote = match value {
                        Value::Int(1) => {
                            round.yes += 1;
                            Vote::Yes
                        }
                        Value::Int(-1) => {
                            round.conflict = true;
                            Vote::No
                        }
                        _ => Vote::No,
                    };
                    round.tally.handle_reply(node, vote, now);
                    round.settle(&due[round.due]);
                }
            }
            other => {
                let kind = match other {
                    Ok(values) => {
                        NodeErrorKind::Protocol(format!("{} replies to {count} renewals", values.len()))
                    }
                    Err(kind) => kind,
                };
                debug!(node, error = %kind, "renewal pipeline failed on a master");
                for round in rounds.iter_mut() {
                    if kind.is_unreachable() {
                        round.unreachable += 1;
                    }
                    round.tally.handle_reply(node, Vote::No, now);
                    round.settle(&due[round.due]);
                }
            }
        }
        // Once every lock is decided, a straggling master cannot change anything: stop waiting.
        if rounds.iter().all(|r| r.tally.decision().is_final()) {
            break;
        }
    }
    drop(pending);
    // Masters that did not answer yet might still hold our token: a failed round may be retried.
    let silent = masters.saturating_sub(answered);
    let now = Instant::now();
    let mut lost = 0u64;
    for round in rounds.iter_mut() {
        round.tally.poll(now);
        round.settle(&due[round.due]);
        let held = &due[round.due].held;
        outcomes[round.due] = if round.applied {
            Outcome::Renewed { started }
        } else {
            match renewal::verdict(masters, round.yes, round.unreachable + silent, round.conflict) {
                Verdict::Retry => {
                    debug!(resource = %held.resource, yes = round.yes, unreachable = round.unreachable, "renewal short of a majority; retrying");
                    Outcome::Retry
                }
                verdict => {
                    warn!(resource = %held.resource, ?verdict, yes = round.yes, "watchdog found the lock lost");
                    held.mark_lost();
                    lost += 1;
                    Outcome::Stop
                }
            }
        };
    }
    drop(serials);
    let mut state = inner.watchdog.shared.state();
    state.stats.ticks += 1;
    state.stats.lost += lost;
    state.stats.renewals += count as u64;
    state.stats.pipelines += conns.iter().filter(|c| c.is_some()).count() as u64;
    drop(state);
    if count >= RENEWAL_CONNECTION_RECYCLE {
        // Frees the write buffers this pipeline grew; `connections` reopens them on the next tick.
        conns.clear();
    }
    outcomes
}

/// One lock's renewal round within a tick.
struct Round {
    due: usize,
    tally: Tally,
    yes: usize,
    unreachable: usize,
    conflict: bool,
    applied: bool,
}

impl Round {
    /// Publishes the new validity the moment a majority confirmed the renewal.
    fn settle(&mut self, due: &Due) {
        if self.applied {
            return;
        }
        if let Decision::Acquired { valid_until, .. } = self.tally.decision() {
            self.applied = true;
            if !due.held.is_released() {
                due.held.status.set_valid_until(valid_until);
            }
        }
    }
}

/// Sends a tick's pipeline to one master, bounded by `timeout`; the first `skip` replies (script
/// loads) are not returned.
async fn send(
    conn: Option<ConnectionManager>,
    pipe: &redis::Pipeline,
    skip: usize,
    count: usize,
    timeout: Duration,
) -> Result<Vec<Value>, NodeErrorKind> {
    let Some(mut conn) = conn else {
        return Err(NodeErrorKind::Connection("no renewal connection".to_owned()));
    };
    match tokio::time::timeout(timeout, conn.send_packed_commands(pipe, skip, count)).await {
        Ok(Ok(values)) => Ok(values),
        Ok(Err(err)) => Err(classify(&err)),
        Err(_) => Err(NodeErrorKind::Timeout),
    }
}

/// The scripts seen in renewal commands, by source, with their SHA1.
#[derive(Default)]
struct Scripts {
    known: Vec<(Vec<u8>, String)>,
    /// Indexes into `known` used by the tick being built.
    used: Vec<usize>,
}

impl Scripts {
    /// Rewrites `EVAL source ...` as `EVALSHA sha ...`; any other command is returned unchanged.
    fn by_sha(&mut self, cmd: Cmd) -> Cmd {
        self.rewrite(&cmd).unwrap_or(cmd)
    }

    fn rewrite(&mut self, cmd: &Cmd) -> Option<Cmd> {
        let mut args = cmd.args_iter();
        let (Some(Arg::Simple(name)), Some(Arg::Simple(source))) = (args.next(), args.next()) else {
            return None;
        };
        if !name.eq_ignore_ascii_case(b"EVAL") {
            return None;
        }
        let index = match self
            .known
            .iter()
            .position(|(known, _)| known.as_slice() == source)
        {
            Some(index) => index,
            None => {
                let text = std::str::from_utf8(source).ok()?;
                let sha = sha1_hex(text);
                self.known.push((source.to_vec(), sha));
                self.known.len() - 1
            }
        };
        let mut out = redis::cmd("EVALSHA");
        out.arg(self.known.get(index)?.1.as_str());
        for arg in args {
            match arg {
                Arg::Simple(bytes) => {
                    out.arg(bytes);
                }
                _ => return None,
            }
        }
        if !self.used.contains(&index) {
            self.used.push(index);
        }
        Some(out)
    }

    /// Marks a script the tick uses, for its `SCRIPT LOAD`.
    fn load(&mut self, script: &'static Lua) {
        let index = match self.known.iter().position(|(_, sha)| sha == script.sha()) {
            Some(index) => index,
            None => {
                self.known
                    .push((script.source().as_bytes().to_vec(), script.sha().to_owned()));
                self.known.len() - 1
            }
        };
        if !self.used.contains(&index) {
            self.used.push(index);
        }
    }

    /// `SCRIPT LOAD` of every script the tick uses, to lead its pipeline; resets the tick's list.
    fn loads(&mut self) -> Vec<Cmd> {
        let loads = self
            .used
            .iter()
            .filter_map(|i| self.known.get(*i))
            .map(|(source, _)| {
                let mut load = redis::cmd("SCRIPT");
                load.arg("LOAD").arg(source.as_slice());
                load
            })
            .collect();
        self.used.clear();
        loads
    }
}
