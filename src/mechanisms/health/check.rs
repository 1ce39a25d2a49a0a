//! The checks that feed the health state: each master's `run_id`, uptime, persistence, replication
//! and memory policy, and the record it keeps about itself, read at build and again in the
//! background (after a reconnect at once, else once per refresh interval), the record updated as
//! the core's rule says (`core::master::record`), and each change warned about once (`warn.rs`).

use std::sync::Arc;

use redis::Value;
use tracing::debug;

use super::{warn, Health};
use crate::base::error::NodeErrorKind;
use crate::base::lua::{eval, MASTER_READ, MASTER_RECORD};
use crate::base::names::Names;
use crate::core::capabilities::Server;
use crate::core::master::record::{self, Missing, Record, Seen, FIELDS};
use crate::core::master::{Memory, Report, Sighting};
use crate::mechanisms::fanout::Fanout;
use crate::mechanisms::removal::Mechanism;
use crate::seam::link::{Link, Masters};

/// Starts, in the background, the checks that are due: a master unverified since a reconnect (at
/// most every `UNVERIFIED_RETRY`), and every master once per refresh interval. Never waits.
pub(crate) fn tick(health: &Arc<Health>, masters: &Arc<Masters>, names: &Names) {
    let now = health.now();
    let periodic = health.periodic_due(now);
    for link in masters.iter() {
        if !health.claim(link, now, periodic) {
            continue;
        }
        let index = link.index();
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                let (health, masters, names) = (Arc::clone(health), Arc::clone(masters), names.clone());
                handle.spawn(async move {
                    if let Some(link) = masters.get(index) {
                        if let Some(read) = gather(&health, link, &names).await {
                            settle(&health, link, &names, read, Missing::Alone).await;
                        }
                    }
                    health.publish(&masters);
                    health.release_claim(index);
                });
            }
            Err(_) => health.release_claim(index),
        }
    }
}

/// Keeps every master's belief fresh while the client lives, whether or not it makes rounds: once
/// per refresh interval, the checks that are due (a round starts them too, but an idle client
/// would otherwise judge its next round by what it read long ago). Holds the client's parts
/// weakly, so it ends with the client.
pub(crate) fn refresh_in_background(health: &Arc<Health>, masters: &Arc<Masters>, names: &Names) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let (weak_health, weak_masters) = (Arc::downgrade(health), Arc::downgrade(masters));
    let (names, clock, every) = (names.clone(), health.clock.clone(), health.refresh_every);
    runtime.spawn(async move {
        loop {
            clock.sleep(every).await;
            let (Some(health), Some(masters)) = (weak_health.upgrade(), weak_masters.upgrade()) else {
                return;
            };
            tick(&health, &masters, &names);
        }
    });
}

/// What the first half of a check read from one master.
struct Gathered {
    /// The disconnect count when the check began.
    before: u64,
    report: Report,
    server: Server,
    read: RecordRead,
}

/// The record read, with what it is judged against.
struct RecordRead {
    run_id: String,
    master_ms: u64,
    counter: Option<u64>,
    record: Option<Record>,
    /// The record's fields as read, for the write's compare-and-set.
    raw: String,
    /// When the reply arrived, on our clock.
    at: tokio::time::Instant,
}

/// The first half of a check: the master's report and its record, read in one go.
async fn gather(health: &Health, node: &Link, names: &Names) -> Option<Gathered> {
    let before = node.disconnects();
    let sent = health.now();
    let result = async {
        let (report, server) = inspect(node).await?;
        let read = read_record(health, node, names).await?;
        Ok::<_, NodeErrorKind>((report, server, read))
    }
    .await;
    let took = health.now().saturating_duration_since(sent);
    health.observe(node.index(), result.as_ref().err(), took);
    match result {
        Ok((report, server, read)) if read.run_id == report.run_id => Some(Gathered {
            before,
            report,
            server,
            read,
        }),
        Ok(_) => {
            debug!(
                node = node.index(),
                addr = node.addr(),
                "master restarted during its check; checked again"
            );
            None
        }
        Err(kind) => {
            debug!(node = node.index(), addr = node.addr(), error = %kind, "master check failed");
            None
        }
    }
}

/// The second half of a check: the record written where the core's rule asks for it (a compare
/// and set, read again if another client wrote first), then everything taken in and warned about.
async fn settle(health: &Health, node: &Link, names: &Names, gathered: Gathered, missing: Missing) {
    let Gathered {
        before,
        report,
        server,
        mut read,
    } = gathered;
    let found_none = read.record.is_none();
    // A negative control's client forgets the evidence of the rule it runs without.
    let replaced_rule = !health.removed.has(Mechanism::ReplacedMaster);
    let missing = if replaced_rule {
        missing
    } else {
        Missing::Everywhere
    };
    let mut tries = 0;
    let record = loop {
        let seen = Seen {
            run_id: read.run_id.clone(),
            now_ms: read.master_ms,
            durable: report.durable(),
            promoted: report.promoted && replaced_rule,
            counter: read.counter,
        };
        if health.removed.has(Mechanism::DurabilityOverTime) {
            if let Some(previous) = read.record.as_mut().filter(|r| r.run_id != seen.run_id) {
                previous.durable = true;
            }
        }
        let Some(next) = record::next(read.record.as_ref(), &seen, health.declared_grace_ms(), missing)
        else {
            // Nothing to write: the record already says it (a next() of None implies one exists).
            match read.record.take() {
                Some(record) => break record,
                None => return,
            }
        };
        match write_record(node, names, &read.raw, &next).await {
            Ok(1) => break next,
            Ok(-1) => {
                debug!(
                    node = node.index(),
                    addr = node.addr(),
                    "master restarted during its check; checked again"
                );
                return;
            }
            Ok(_) if tries < 3 => {
                // Another client wrote first: judge again from what it wrote.
                tries += 1;
                match read_record(health, node, names).await {
                    Ok(again) if again.run_id == report.run_id => read = again,
                    _ => return,
                }
            }
            Ok(_) => return,
            Err(kind) => {
                debug!(node = node.index(), addr = node.addr(), error = %kind, "could not write the master's record");
                return;
            }
        }
    };
    debug!(node = node.index(), addr = node.addr(), run_id = %report.run_id, uptime_s = report.uptime_secs, lost = record.lost, "master checked");
    let sighting = Sighting {
        record,
        master_ms: read.master_ms,
        at: read.at.into_std(),
    };
    let changes = health.record(node, before, &report, sighting, found_none);
    warn::changes(node, &report, &changes);
    // What the server offers natively holds for this connection; a reconnect since the check
    // began leaves it unread (the next check reads it).
    if node.disconnects() == before {
        node.note_capabilities(server.capabilities(), before);
    }
}

/// Checks every master once at `build()`, then writes their records: a master without one is
/// taken as having lost its data unless a majority answered without one and none with one (a fresh
/// deployment: `core::master::record::missing`).
/// Every change worth a warning (replicas, persistence below `appendfsync always`, eviction, a
/// policy that cannot be read) is warned about then, once per master.
pub(crate) async fn check_at_build(health: &Health, masters: &Masters, names: &Names) {
    let mut pending: Fanout<_> = masters
        .iter()
        .map(|node| (node.index(), Box::pin(gather(health, node, names))))
        .collect();
    let mut gathered: Vec<Option<Gathered>> = (0..masters.len()).map(|_| None).collect();
    while let Some((i, read)) = futures::StreamExt::next(&mut pending).await {
        if let Some(slot) = gathered.get_mut(i) {
            *slot = read;
        }
    }
    drop(pending);
    let reads: Vec<Option<bool>> = gathered
        .iter()
        .map(|g| g.as_ref().map(|g| !g.read.raw.is_empty()))
        .collect();
    let missing = record::missing(&reads);
    let settles = masters.iter().zip(gathered).map(|(node, gathered)| async move {
        match gathered {
            Some(gathered) => settle(health, node, names, gathered, missing).await,
            None => warn::unchecked(node),
        }
    });
    crate::mechanisms::fanout::all(settles).await;
    health.publish(masters);
}

/// Runs `INFO` and `CONFIG GET appendfsync` on one master: its report, and its server.
pub(crate) async fn inspect(node: &Link) -> Result<(Report, Server), NodeErrorKind> {
    let info = node.query(Arc::new(redis::cmd("INFO"))).await?;
    let text = match info {
        Value::BulkString(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Value::VerbatimString { text, .. } => text,
        Value::SimpleString(text) => text,
        other => return Err(NodeErrorKind::Protocol(format!("INFO answered {other:?}").into())),
    };
    let field = |name: &str| info_field(&text, name);
    let number = |name: &str| field(name).and_then(|v| v.parse::<u64>().ok());
    let run_id = field("run_id")
        .ok_or_else(|| NodeErrorKind::Protocol("INFO has no run_id".to_owned().into()))?
        .to_owned();
    let uptime_secs = number("uptime_in_seconds")
        .ok_or_else(|| NodeErrorKind::Protocol("INFO has no uptime_in_seconds".to_owned().into()))?;
    let aof_enabled = field("aof_enabled") == Some("1");
    let replicas = number("connected_slaves").unwrap_or(0);
    // A server that took over another's replication history (a replica promoted with REPLICAOF NO
    // ONE, or by a failover) keeps the offset it took over at; a server that never did has -1.
    let promoted = field("second_repl_offset").is_some_and(|v| v != "-1");
    let memory = Memory {
        maxmemory: number("maxmemory").unwrap_or(0),
        policy: field("maxmemory_policy").map(str::to_owned),
        evicted_keys: number("evicted_keys").unwrap_or(0),
    };
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
    let report = Report {
        run_id,
        uptime_secs,
        aof_enabled,
        appendfsync,
        replicas,
        promoted,
        memory,
    };
    Ok((report, server))
}

/// Reads the master's record with its run_id, clock and fencing counter (`master_read.lua`).
async fn read_record(health: &Health, node: &Link, names: &Names) -> Result<RecordRead, NodeErrorKind> {
    let call = eval(&MASTER_READ, &[names.master_record(), names.fence_counter()]);
    let reply = node.run_script(&call).await?;
    let at = health.now();
    let bad = || NodeErrorKind::Protocol(format!("the master's record read answered {reply:?}").into());
    let Value::Array(items) = &reply else {
        return Err(bad());
    };
    let text = |i: usize| match items.get(i) {
        Some(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Some(Value::SimpleString(s)) => Some(s.clone()),
        Some(Value::Int(n)) => Some(n.to_string()),
        _ => None,
    };
    let run_id = text(0).ok_or_else(bad)?;
    let master_ms = text(1).and_then(|v| v.parse().ok()).ok_or_else(bad)?;
    let counter = text(2).and_then(|v| v.parse().ok());
    let fields: Vec<Option<String>> = (0..FIELDS.len()).map(|i| text(3 + i)).collect();
    let raw = if fields.first().is_some_and(Option::is_some) {
        fields
            .iter()
            .map(|f| f.clone().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(",")
    } else {
        String::new()
    };
    let record = Record::from_fields(
        FIELDS
            .iter()
            .zip(&fields)
            .filter_map(|(name, value)| value.as_deref().map(|v| (*name, v))),
    );
    Ok(RecordRead {
        run_id,
        master_ms,
        counter,
        record,
        raw,
        at,
    })
}

/// Writes `next` if the record is still `raw` (`master_record.lua`): 1 written, 0 changed since,
/// -1 restarted since.
async fn write_record(node: &Link, names: &Names, raw: &str, next: &Record) -> Result<i64, NodeErrorKind> {
    let mut call = eval(&MASTER_RECORD, &[names.master_record()]);
    call.push(raw);
    for field in next.fields() {
        call.push(field);
    }
    match node.run_script(&call).await? {
        Value::Int(n) => Ok(n),
        other => Err(NodeErrorKind::Protocol(
            format!("the master's record write answered {other:?}").into(),
        )),
    }
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
}
