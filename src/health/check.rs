//! The checks that fill the health state: each master's `run_id`, uptime and persistence, read at
//! build and again in the background (after a reconnect at once, else once per refresh interval),
//! and the warnings a deployment that weakens RedLock deserves once.

use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use redis::Value;
use tracing::{debug, warn};

use super::Health;
use crate::core::capabilities::Server;
use crate::error::NodeErrorKind;
use crate::link::{Link, Masters};

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
    /// The server (Redis or Valkey) and its version.
    pub(crate) server: Server,
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

/// Starts, in the background, the checks that are due: a master unverified since a reconnect (at
/// most every `UNVERIFIED_RETRY`), and every master once per refresh interval. Never waits.
pub(crate) fn tick(health: &Arc<Health>, masters: &Arc<Masters>) {
    let now = health.now();
    let periodic = health.periodic_due(now);
    for link in masters.iter() {
        if !health.claim(link, now, periodic) {
            continue;
        }
        let index = link.index();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let (health, masters) = (Arc::clone(health), Arc::clone(masters));
                handle.spawn(async move {
                    if let Some(link) = masters.get(index) {
                        check(&health, link).await;
                    }
                    health.publish(&masters);
                    health.release_claim(index);
                });
            }
            Err(_) => health.release_claim(index),
        }
    }
}

/// Reads `node`'s identity and durability once and records it.
async fn check(health: &Health, node: &Link) -> Option<Snapshot> {
    let before = node.disconnects();
    let sent = health.now();
    let result = inspect(node).await;
    let took = health.now().saturating_duration_since(sent);
    health.observe(node.index(), result.as_ref().err(), took);
    match result {
        Ok(snapshot) => {
            debug!(node = node.index(), addr = node.addr(), run_id = %snapshot.run_id, uptime_s = snapshot.uptime_secs, "master checked");
            health.record(node, before, &snapshot, health.now());
            // What the server offers natively holds for this connection; a reconnect since the
            // check began leaves it unread (the next check reads it).
            if node.disconnects() == before {
                node.note_capabilities(snapshot.server.capabilities(), before);
            }
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
pub(crate) async fn check_at_build(health: &Health, masters: &Masters) {
    let mut pending: FuturesUnordered<_> = masters
        .iter()
        .map(|node| async move { (node, check(health, node).await) })
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
    health.publish(masters);
}

/// Runs `INFO` and `CONFIG GET appendfsync` on one master.
pub(crate) async fn inspect(node: &Link) -> Result<Snapshot, NodeErrorKind> {
    let info = node.query(Arc::new(redis::cmd("INFO"))).await?;
    let text = match info {
        Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Value::VerbatimString { text, .. } => text,
        Value::SimpleString(text) => text,
        other => return Err(NodeErrorKind::Protocol(format!("INFO answered {other:?}").into())),
    };
    let field = |name: &str| info_field(&text, name);
    let run_id = field("run_id")
        .ok_or_else(|| NodeErrorKind::Protocol("INFO has no run_id".to_owned().into()))?
        .to_owned();
    let uptime_secs = field("uptime_in_seconds")
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| NodeErrorKind::Protocol("INFO has no uptime_in_seconds".to_owned().into()))?;
    let aof_enabled = field("aof_enabled") == Some("1");
    let replicas = field("connected_slaves")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let server = Server::from_info(
        field("server_name"),
        field("valkey_version"),
        field("redis_version"),
    );
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg("appendfsync");
    let appendfsync = match node.query(Arc::new(cmd)).await {
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
        server,
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
            server: Server::Unknown,
        };
        assert_eq!(snap(true, Ok("always")).fsync_always(), Some(true));
        assert_eq!(snap(true, Ok("everysec")).fsync_always(), Some(false));
        assert_eq!(snap(false, Ok("always")).fsync_always(), Some(false));
        assert_eq!(snap(true, Err("unknown command")).fsync_always(), None);
        assert_eq!(snap(false, Err("unknown command")).fsync_always(), Some(false));
    }
}
