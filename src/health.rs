//! What the client knows about each master's identity and durability, and which votes it may
//! therefore count.
//!
//! RedLock is only safe if a master that lost its data (a restart without `appendfsync always`)
//! stays out of every majority for longer than the longest TTL: otherwise it grants a lock that
//! another client still holds through it. The spec leaves that delay to operators; this file has
//! the client enforce it.
//!
//! - Every master's `run_id`, `uptime_in_seconds`, AOF state and `appendfsync` policy are read at
//!   `build()` (`INFO`, `CONFIG GET appendfsync`), cached, and read again in the background at most
//!   once per [`crate::config::DEFAULT_HEALTH_REFRESH`] — piggybacked on an acquire, never awaited by
//!   it.
//! - A restart always drops our connection. Each [`Node`] counts its lost connections, and a vote
//!   only counts while that count is the one seen when the master's identity was last read: after a
//!   reconnect the master is checked again at once (in the background), and its votes are ignored
//!   until then ([`NodeErrorKind::Unverified`]).
//! - A master that (re)started less than the grace period ago (the longest TTL in use plus its drift
//!   allowance, unless configured) and does not persist with `appendfsync always` has its votes
//!   ignored until the grace has passed ([`NodeErrorKind::Restarted`]).
//! - For fencing, a master whose `run_id` changed without `appendfsync always` may have lost counter
//!   increments: it is marked for counter repair, which waits out the same grace. The master itself
//!   also keeps the `run_id` its counter was last vouched for under (the fencing epoch), so a client
//!   that never saw the restart learns of it from the fenced acquire; the cached `run_id` read here
//!   is what it compares the epoch with.
//!
//! A master whose `appendfsync` policy cannot be read (CONFIG disabled) is treated as not
//! persisting every write. Uptime has a resolution of one second, rounded so that the grace only
//! grows.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use redis::Value;
use tracing::{debug, warn};

use crate::config::Config;
use crate::coordinator::Inner;
use crate::error::NodeErrorKind;
use crate::node::Node;

/// Least delay between two checks of a master whose identity is unverified (down, or reconnected).
const UNVERIFIED_RETRY: Duration = Duration::from_millis(100);

/// What one check of a master found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// The master's `run_id`, new at every start.
    pub(crate) run_id: String,
    /// How long it has been up, in whole seconds.
    pub(crate) uptime_secs: u64,
    /// Whether the AOF is on.
    pub(crate) aof_enabled: bool,
    /// The `appendfsync` policy, if CONFIG could be used.
    pub(crate) appendfsync: Result<String, String>,
    /// The number of replicas attached.
    pub(crate) replicas: u64,
}

impl Snapshot {
    /// Whether every acknowledged write is on disk: `Some(false)` when known not to be, `None` when
    /// the policy could not be read.
    pub(crate) fn fsync_always(&self) -> Option<bool> {
        if !self.aof_enabled {
            return Some(false);
        }
        match &self.appendfsync {
            Ok(policy) => Some(policy.eq_ignore_ascii_case("always")),
            Err(_) => None,
        }
    }
}

/// One master's cached state.
#[derive(Debug, Default)]
struct NodeState {
    run_id: Option<String>,
    /// When the master (re)started, on our monotonic clock.
    started: Option<Instant>,
    fsync_always: Option<bool>,
    /// The node's disconnect count when its identity was last read successfully.
    verified_at: Option<u64>,
    in_flight: bool,
    last_attempt: Option<Instant>,
    /// The highest fencing counter this client has seen on the master.
    fence_floor: u64,
    /// Whether the master's fencing counter must be repaired before its fenced votes count.
    fence_repair: bool,
    /// Whether that repair must treat the counter as possibly behind (lost, regressed, or a new
    /// epoch on a master that does not persist every write), rather than only stamp a new epoch.
    fence_repair_full: bool,
}

/// The health of every master, shared by every handle and guard.
#[derive(Debug)]
pub(crate) struct Health {
    enforce: bool,
    grace: Option<Duration>,
    drift_factor: f64,
    refresh_every: Duration,
    max_ttl_ms: AtomicU64,
    nodes: Vec<Mutex<NodeState>>,
    last_periodic: Mutex<Instant>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Health {
    /// Nothing known yet about `n` masters.
    pub(crate) fn new(n: usize, config: &Config) -> Self {
        Self {
            enforce: config.enforce_restart_grace,
            grace: config.restart_grace,
            drift_factor: config.drift_factor,
            refresh_every: config.health_refresh,
            max_ttl_ms: AtomicU64::new(0),
            nodes: (0..n).map(|_| Mutex::new(NodeState::default())).collect(),
            last_periodic: Mutex::new(Instant::now()),
        }
    }

    /// Remembers a TTL in use, so the default grace covers it.
    pub(crate) fn note_ttl(&self, ttl: Duration) {
        let ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        self.max_ttl_ms.fetch_max(ms, Ordering::Relaxed);
    }

    /// The grace period after a restart: configured, or the longest TTL in use plus its drift.
    pub(crate) fn grace(&self) -> Duration {
        if let Some(grace) = self.grace {
            return grace;
        }
        let ttl = Duration::from_millis(self.max_ttl_ms.load(Ordering::Relaxed));
        let drift = crate::core::drift(ttl, self.drift_factor).unwrap_or(Duration::ZERO);
        ttl.saturating_add(drift)
    }

    fn state(&self, node: usize) -> Option<MutexGuard<'_, NodeState>> {
        self.nodes.get(node).map(locked)
    }

    /// Whether a yes from `node` at `now` may count towards a majority.
    ///
    /// # Errors
    /// [`NodeErrorKind::Unverified`] or [`NodeErrorKind::Restarted`] when its vote must be ignored.
    pub(crate) fn admit(&self, node: &Node, now: Instant) -> Result<(), NodeErrorKind> {
        if !self.enforce {
            return Ok(());
        }
        let Some(state) = self.state(node.index()) else {
            return Ok(());
        };
        if state.verified_at != Some(node.disconnects()) {
            return Err(NodeErrorKind::Unverified);
        }
        if state.fsync_always == Some(true) {
            return Ok(());
        }
        if let Some(started) = state.started {
            let uptime = now.saturating_duration_since(started);
            let grace = self.grace();
            if uptime < grace {
                return Err(NodeErrorKind::Restarted {
                    uptime,
                    remaining: grace - uptime,
                });
            }
        }
        Ok(())
    }

    /// Records a check of `node` that began when its disconnect count was `before`.
    fn record(&self, node: &Node, before: u64, snapshot: &Snapshot, observed_at: Instant) {
        let Some(mut state) = self.state(node.index()) else {
            return;
        };
        let fsync_always = snapshot.fsync_always();
        if let Some(previous) = &state.run_id {
            if *previous != snapshot.run_id {
                warn!(
                    node = node.index(),
                    addr = node.addr(),
                    uptime_s = snapshot.uptime_secs,
                    "master restarted (its run_id changed)"
                );
                if fsync_always != Some(true) {
                    state.fence_repair = true;
                    state.fence_repair_full = true;
                }
            }
        }
        state.run_id = Some(snapshot.run_id.clone());
        state.started = latest_start(observed_at, snapshot.uptime_secs);
        state.fsync_always = fsync_always;
        // Only a check that no reconnect interleaved with vouches for the current connection.
        if node.disconnects() == before {
            state.verified_at = Some(before);
        }
    }

    /// The highest fencing counter this client has seen on `node`.
    pub(crate) fn fence_floor(&self, node: usize) -> u64 {
        self.state(node).map_or(0, |s| s.fence_floor)
    }

    /// Raises the fencing counter floor of `node` to `value`.
    pub(crate) fn raise_fence_floor(&self, node: usize, value: u64) {
        if let Some(mut state) = self.state(node) {
            state.fence_floor = state.fence_floor.max(value);
        }
    }

    /// The `run_id` of `node`, if it was read on the connection in use now.
    pub(crate) fn verified_run_id(&self, node: &Node) -> Option<String> {
        let state = self.state(node.index())?;
        if state.verified_at != Some(node.disconnects()) {
            return None;
        }
        state.run_id.clone()
    }

    /// Marks `node`'s fencing counter as missing or behind: it needs a full repair.
    pub(crate) fn mark_fence_repair(&self, node: usize) {
        if let Some(mut state) = self.state(node) {
            state.fence_repair = true;
            state.fence_repair_full = true;
        }
    }

    /// Marks `node`'s fencing epoch as stale (it restarted since its counter was vouched for): a
    /// full repair unless it persists every write, in which case its counter is intact and the
    /// repair only raises it to what the others have and stamps the new epoch.
    pub(crate) fn mark_fence_epoch(&self, node: usize) {
        if let Some(mut state) = self.state(node) {
            state.fence_repair = true;
            if state.fsync_always != Some(true) {
                state.fence_repair_full = true;
            }
        }
    }

    /// Whether `node`'s pending repair only has to stamp a new epoch: it restarted with
    /// `appendfsync always`, so nothing it acknowledged was lost and no grace is needed.
    pub(crate) fn fence_repair_light(&self, node: usize) -> bool {
        self.state(node)
            .is_some_and(|s| s.fence_repair && !s.fence_repair_full && s.fsync_always == Some(true))
    }

    /// Whether `node`'s fencing counter needs repair.
    pub(crate) fn needs_fence_repair(&self, node: usize) -> bool {
        self.state(node).is_some_and(|s| s.fence_repair)
    }

    /// Whether `node`'s counter may be repaired at `now`: its start is known and the grace has
    /// passed since, so no acquisition can still count an acknowledgement it gave before.
    /// A light repair (see [`Health::fence_repair_light`]) is due at once.
    pub(crate) fn fence_repair_due(&self, node: usize, now: Instant) -> bool {
        if self.fence_repair_light(node) {
            return true;
        }
        let grace = self.grace();
        self.state(node)
            .and_then(|s| s.started)
            .is_some_and(|started| crate::core::fencing::repair_due(started, grace, now))
    }

    /// Records that `node`'s counter was repaired to `value`, which becomes the floor: increments
    /// this client saw above it were never committed (the repair covers every issued token), and a
    /// floor left above it would refuse the master's vote again and again.
    pub(crate) fn fence_repaired(&self, node: usize, value: u64) {
        if let Some(mut state) = self.state(node) {
            state.fence_repair = false;
            state.fence_repair_full = false;
            state.fence_floor = value;
        }
    }

    /// Claims a check of `node` if one is due at `now`.
    fn claim(&self, node: &Node, now: Instant, periodic: bool) -> bool {
        let Some(mut state) = self.state(node.index()) else {
            return false;
        };
        if state.in_flight {
            return false;
        }
        let unverified = state.verified_at != Some(node.disconnects());
        let may_retry = state
            .last_attempt
            .is_none_or(|t| now.saturating_duration_since(t) >= UNVERIFIED_RETRY);
        if periodic || (unverified && may_retry) {
            state.in_flight = true;
            state.last_attempt = Some(now);
            return true;
        }
        false
    }

    fn release_claim(&self, node: usize) {
        if let Some(mut state) = self.state(node) {
            state.in_flight = false;
        }
    }

    fn periodic_due(&self, now: Instant) -> bool {
        let mut last = locked(&self.last_periodic);
        if now.saturating_duration_since(*last) >= self.refresh_every {
            *last = now;
            return true;
        }
        false
    }
}

/// When the master started, as late as an `uptime_in_seconds` read at `observed_at` allows: never
/// before its real start, so the grace counted from it never ends early.
///
/// Redis reports uptime as the difference of two whole-second wall-clock readings (now and start),
/// which overstates the true uptime by up to one second: started at 10.9 s and read at 11.1 s, it
/// says 1 although 0.2 s passed. The true uptime is therefore more than `uptime_secs - 1`, and
/// counting the start from there is never earlier than the real one. `None` only when the instant
/// would precede this process's monotonic clock, in which case no grace applies anyway.
pub(crate) fn latest_start(observed_at: Instant, uptime_secs: u64) -> Option<Instant> {
    observed_at.checked_sub(Duration::from_secs(uptime_secs.saturating_sub(1)))
}

/// Starts, in the background, the checks that are due: a master unverified since a reconnect (at
/// most every [`UNVERIFIED_RETRY`]), and every master once per refresh interval. Never waits.
pub(crate) fn tick(inner: &Arc<Inner>) {
    let now = Instant::now();
    let periodic = inner.health.periodic_due(now);
    for node in &inner.nodes {
        if !inner.health.claim(node, now, periodic) {
            continue;
        }
        let index = node.index();
        let inner = Arc::clone(inner);
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                handle.spawn(async move {
                    if let Some(node) = inner.nodes.get(index) {
                        check(&inner.health, node).await;
                    }
                    inner.health.release_claim(index);
                });
            }
            Err(_) => inner.health.release_claim(index),
        }
    }
}

/// Reads `node`'s identity and durability once and records it.
async fn check(health: &Health, node: &Node) -> Option<Snapshot> {
    let before = node.disconnects();
    match inspect(node).await {
        Ok(snapshot) => {
            debug!(node = node.index(), addr = node.addr(), run_id = %snapshot.run_id, uptime_s = snapshot.uptime_secs, "master checked");
            health.record(node, before, &snapshot, Instant::now());
            Some(snapshot)
        }
        Err(kind) => {
            debug!(node = node.index(), addr = node.addr(), error = %kind, "master check failed");
            None
        }
    }
}

/// The `tracing` target of the warnings about a master's persistence (no AOF, `appendfsync` below
/// `always`, or a policy that could not be read).
pub(crate) const PERSISTENCE: &str = "quorlock::persistence";

/// Checks every master once at `build()` and warns, once per master, about what makes RedLock
/// unsafe there: replicas attached, or persistence weaker than `appendfsync always`.
pub(crate) async fn check_at_build(inner: &Inner) {
    let mut pending: FuturesUnordered<_> = inner
        .nodes
        .iter()
        .map(|node| async move { (node, check(&inner.health, node).await) })
        .collect();
    while let Some((node, snapshot)) = pending.next().await {
        let Some(snapshot) = snapshot else {
            warn!(
                node = node.index(),
                addr = node.addr(),
                "could not read the master's run_id, replicas and persistence at build; its votes count once it answers a check"
            );
            continue;
        };
        if snapshot.replicas > 0 {
            warn!(
                node = node.index(),
                addr = node.addr(),
                replicas = snapshot.replicas,
                "master has replicas attached: replication is asynchronous, so a failover to a replica can lose a held lock; use independent masters"
            );
        }
        // Under a target of their own, which a tool can set apart: the restart grace answers them.
        match (&snapshot.appendfsync, snapshot.aof_enabled) {
            (_, false) => warn!(
                target: PERSISTENCE,
                node = node.index(),
                addr = node.addr(),
                "master runs without AOF: a restart loses every lock it held; use appendonly yes with appendfsync always, or rely on the restart grace"
            ),
            (Ok(policy), true) if !policy.eq_ignore_ascii_case("always") => warn!(
                target: PERSISTENCE,
                node = node.index(),
                addr = node.addr(),
                appendfsync = %policy,
                "master persists with less than appendfsync always: a crash can lose recently granted locks; its votes are ignored for the grace period after a restart"
            ),
            (Err(reason), true) => warn!(
                target: PERSISTENCE,
                node = node.index(),
                addr = node.addr(),
                reason = %reason,
                "could not check the master's appendfsync policy (CONFIG unavailable); treated as less than always"
            ),
            _ => {}
        }
    }
}

/// Runs `INFO` and `CONFIG GET appendfsync` on one master.
pub(crate) async fn inspect(node: &Node) -> Result<Snapshot, NodeErrorKind> {
    let info = node.query(&redis::cmd("INFO")).await?;
    let text = match info {
        Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Value::VerbatimString { text, .. } => text,
        Value::SimpleString(text) => text,
        other => return Err(NodeErrorKind::Protocol(format!("INFO answered {other:?}"))),
    };
    let field = |name: &str| info_field(&text, name);
    let run_id = field("run_id")
        .ok_or_else(|| NodeErrorKind::Protocol("INFO has no run_id".to_owned()))?
        .to_owned();
    let uptime_secs = field("uptime_in_seconds")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| NodeErrorKind::Protocol("INFO has no uptime_in_seconds".to_owned()))?;
    let aof_enabled = field("aof_enabled") == Some("1");
    let replicas = field("connected_slaves")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("appendfsync");
    let appendfsync = match node.query(&cmd).await {
        Ok(value) => config_value(&value).ok_or_else(|| format!("CONFIG GET appendfsync answered {value:?}")),
        Err(kind) if kind.is_unreachable() => return Err(kind),
        Err(kind) => Err(kind.to_string()),
    };
    Ok(Snapshot {
        run_id,
        uptime_secs,
        aof_enabled,
        appendfsync,
        replicas,
    })
}

/// The value of `name` in an `INFO` reply (`name:value` lines).
fn info_field<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key == name).then(|| value.trim())
    })
}

/// The value in a `CONFIG GET` reply for one parameter (an array in RESP2, a map in RESP3).
fn config_value(value: &Value) -> Option<String> {
    let text = |v: &Value| match v {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    match value {
        Value::Array(items) => items.get(1).and_then(text),
        Value::Map(pairs) => pairs.first().and_then(|(_, v)| text(v)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Redis's uptime is a difference of whole wall-clock seconds: for every real start and read
    /// time within a few seconds, the start we compute is never before the real one.
    #[test]
    fn the_computed_start_is_never_earlier_than_the_real_one() {
        let base = Instant::now() + Duration::from_secs(100);
        for start_ms in (0..3_000u64).step_by(7) {
            for after_ms in (0..4_000u64).step_by(11) {
                let read_ms = start_ms + after_ms;
                let reported = read_ms / 1000 - start_ms / 1000;
                let observed = base + Duration::from_millis(read_ms);
                let real_start = base + Duration::from_millis(start_ms);
                let started = latest_start(observed, reported).expect("within the clock");
                assert!(
                    started >= real_start,
                    "start {start_ms} ms, read {read_ms} ms, uptime {reported}: computed too early"
                );
                assert!(started <= observed);
            }
        }
    }

    #[test]
    fn info_fields_are_read_by_exact_name() {
        let text = "# Server\r\nrun_id:abc123\r\nuptime_in_seconds:42\r\nuptime_in_days:0\r\n# Persistence\r\naof_enabled:1\r\n";
        assert_eq!(info_field(text, "run_id"), Some("abc123"));
        assert_eq!(info_field(text, "uptime_in_seconds"), Some("42"));
        assert_eq!(info_field(text, "aof_enabled"), Some("1"));
        assert_eq!(info_field(text, "uptime"), None);
    }

    #[test]
    fn config_replies_in_both_protocols() {
        let array = Value::Array(vec![
            Value::BulkString(b"appendfsync".to_vec()),
            Value::BulkString(b"always".to_vec()),
        ]);
        assert_eq!(config_value(&array).as_deref(), Some("always"));
        let map = Value::Map(vec![(
            Value::BulkString(b"appendfsync".to_vec()),
            Value::BulkString(b"everysec".to_vec()),
        )]);
        assert_eq!(config_value(&map).as_deref(), Some("everysec"));
    }

    #[test]
    fn durability_needs_aof_and_always() {
        let snap = |aof_enabled, appendfsync: Result<&str, &str>| Snapshot {
            run_id: "r".into(),
            uptime_secs: 1,
            aof_enabled,
            appendfsync: appendfsync.map(str::to_owned).map_err(str::to_owned),
            replicas: 0,
        };
        assert_eq!(snap(true, Ok("always")).fsync_always(), Some(true));
        assert_eq!(snap(true, Ok("everysec")).fsync_always(), Some(false));
        assert_eq!(snap(false, Ok("always")).fsync_always(), Some(false));
        assert_eq!(snap(true, Err("unknown command")).fsync_always(), None);
        assert_eq!(snap(false, Err("unknown command")).fsync_always(), Some(false));
    }
}
