//! Server and connection commands: `PING`, `ECHO`, `TIME`, `PUBLISH`, `INFO`, `CONFIG GET`,
//! `CONFIG SET`, `COMMAND INFO`/`COUNT`, `FLUSHALL`, `DBSIZE`, `KEYS`, `SCAN`, `CLIENT`, `SELECT`.
//! What they report (versions, `run_id`, uptime, persistence, memory, replication) comes from the
//! master's flavor, config, running state and clock.

use std::fmt::Write as _;

use redis::Value;

use super::commands;
use super::config::EvictionPolicy;
use super::glob;
use super::memory;
use super::numfmt::parse_i64;
use super::reply::{bulk, err, err_owned, ok, status, CmdError, CmdResult, NOT_INTEGER, SYNTAX};
use super::server::Server;

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

fn unknown_subcommand(args: &[&[u8]], command: &str) -> CmdError {
    err_owned(format!(
        "ERR unknown subcommand '{}'. Try {command} HELP.",
        String::from_utf8_lossy(args.get(1).copied().unwrap_or_default())
    ))
}

fn subcommand_arity(command: &str, sub: &[u8]) -> CmdError {
    err_owned(format!(
        "ERR wrong number of arguments for '{command}|{}' command",
        String::from_utf8_lossy(sub).to_lowercase()
    ))
}

/// `PING [message]`.
pub(crate) fn ping(args: &[&[u8]]) -> CmdResult {
    match args {
        [_] => Ok(status("PONG")),
        [_, message] => Ok(bulk(message)),
        _ => Err(CmdError::Arity),
    }
}

/// `TIME`: seconds and microseconds of the master's clock.
pub(crate) fn time(server: &Server) -> CmdResult {
    let secs = server.now / 1000;
    let micros = (server.now % 1000) * 1000;
    Ok(Value::Array(vec![
        Value::BulkString(secs.to_string().into_bytes()),
        Value::BulkString(micros.to_string().into_bytes()),
    ]))
}

/// `PUBLISH channel message`: recorded for the network; the subscriber count comes from the
/// counter given to the master (0 without one).
pub(crate) fn publish(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let receivers = match server.subscribers.as_mut() {
        Some(count) => count(args[1]),
        None => 0,
    };
    server.published.push((args[1].to_vec(), args[2].to_vec()));
    Ok(Value::Int(receivers))
}

/// The sections `INFO` knows, in the order the server lists them.
const SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "keyspace",
];

/// `INFO [section ...]`.
pub(crate) fn info(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let everything = args.len() == 1
        || args[1..]
            .iter()
            .any(|a| is(a, "all") || is(a, "default") || is(a, "everything"));
    let wanted: Vec<&str> = SECTIONS
        .iter()
        .copied()
        .filter(|s| everything || args[1..].iter().any(|a| is(a, s)))
        .collect();
    let mut text = String::with_capacity(1024);
    for (i, section) in wanted.iter().enumerate() {
        if i > 0 {
            text.push_str("\r\n");
        }
        write_section(server, section, &mut text);
    }
    Ok(Value::BulkString(text.into_bytes()))
}

fn write_section(server: &mut Server, section: &str, out: &mut String) {
    let config = server.config;
    let uptime = server.uptime_secs();
    out.push_str(match section {
        "server" => "# Server\r\n",
        "clients" => "# Clients\r\n",
        "memory" => "# Memory\r\n",
        "persistence" => "# Persistence\r\n",
        "stats" => "# Stats\r\n",
        "replication" => "# Replication\r\n",
        _ => "# Keyspace\r\n",
    });
    let mut field = |name: &str, value: &dyn std::fmt::Display| {
        // Writing to a String cannot fail.
        let _ = write!(out, "{name}:{value}\r\n");
    };
    match section {
        "server" => {
            field("redis_version", &config.flavor.redis_version());
            if let Some(valkey) = config.flavor.valkey_version() {
                field("server_name", &"valkey");
                field("valkey_version", &valkey);
            }
            field("redis_mode", &"standalone");
            field("os", &"Linux simulated");
            field("arch_bits", &64);
            field("process_id", &(1000 + server.starts));
            field("run_id", &server.run_id);
            field("tcp_port", &config.port);
            field("server_time_usec", &(u128::from(server.now) * 1000));
            field("uptime_in_seconds", &uptime);
            field("uptime_in_days", &(uptime / 86_400));
            field("hz", &10);
        }
        "clients" => {
            field("connected_clients", &1);
            field("blocked_clients", &0);
        }
        "memory" => {
            field("used_memory", &memory::used(server));
            field("maxmemory", &server.maxmemory);
            field("maxmemory_policy", &server.policy.name());
        }
        "stats" => {
            field("evicted_keys", &server.evicted_keys);
        }
        "persistence" => {
            field("loading", &0);
            field("rdb_changes_since_last_save", &0);
            field("aof_enabled", &u8::from(config.persistence.aof_enabled()));
            field("aof_rewrite_in_progress", &0);
            field("aof_last_write_status", &"ok");
        }
        "replication" => {
            field("role", &"master");
            field("connected_slaves", &server.replicas);
            for i in 0..server.replicas {
                field(
                    &format!("slave{i}"),
                    &format_args!(
                        "ip=10.0.0.{},port=6379,state=online,offset={},lag=0",
                        100 + i,
                        server.repl_offset
                    ),
                );
            }
            field("master_failover_state", &"no-failover");
            field("master_repl_offset", &server.repl_offset);
            match server.second_repl_offset {
                Some(offset) => field("second_repl_offset", &offset),
                None => field("second_repl_offset", &-1),
            }
        }
        _ => {
            let now = server.now;
            let keys = server.keyspace.live_keys(now).count();
            let expires = server
                .keyspace
                .live_keys(now)
                .filter(|(_, e)| e.expires_at.is_some())
                .count();
            if keys > 0 {
                let _ = write!(out, "db0:keys={keys},expires={expires},avg_ttl=0\r\n");
            }
        }
    }
}

/// `CONFIG GET pattern [pattern ...]` and `CONFIG SET parameter value [parameter value ...]` (for
/// `appendfsync`, `maxmemory` and `maxmemory-policy`; other subcommands are not simulated).
pub(crate) fn config(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    if is(args[1], "set") {
        return config_set(server, args);
    }
    if !is(args[1], "get") {
        return Err(unknown_subcommand(args, "CONFIG"));
    }
    if args.len() < 3 {
        return Err(subcommand_arity("config", args[1]));
    }
    let persistence = server.config.persistence;
    let port = server.config.port.to_string();
    let maxmemory = server.maxmemory.to_string();
    let params: [(&str, &str); 7] = [
        ("appendonly", if persistence.aof_enabled() { "yes" } else { "no" }),
        ("appendfsync", server.appendfsync),
        ("save", ""),
        ("port", &port),
        ("databases", "16"),
        ("maxmemory", &maxmemory),
        ("maxmemory-policy", server.policy.name()),
    ];
    let mut out = Vec::new();
    for (name, value) in params {
        if args[2..]
            .iter()
            .any(|p| glob::matches(&p.to_ascii_lowercase(), name.as_bytes()))
        {
            out.push(bulk(name.as_bytes()));
            out.push(bulk(value.as_bytes()));
        }
    }
    Ok(Value::Array(out))
}

/// `CONFIG SET`: every pair is checked before any is applied, as Redis 7.0 does.
fn config_set(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    if args.len() < 4 || !args.len().is_multiple_of(2) {
        return Err(subcommand_arity("config", args[1]));
    }
    let mut fsync = None;
    let mut limit = None;
    let mut policy = None;
    for pair in args[2..].chunks(2) {
        let (name, value) = (pair[0], pair[1]);
        let failed = |why: &str| {
            err_owned(format!(
                "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
                String::from_utf8_lossy(name).to_lowercase()
            ))
        };
        if is(name, "appendfsync") {
            fsync = Some(
                ["always", "everysec", "no"]
                    .into_iter()
                    .find(|v| is(value, v))
                    .ok_or_else(|| {
                        failed("argument(s) must be one of the following: always, everysec, no")
                    })?,
            );
        } else if is(name, "maxmemory") {
            limit = Some(parse_memory(value).ok_or_else(|| failed("argument must be a memory value"))?);
        } else if is(name, "maxmemory-policy") {
            policy = Some(EvictionPolicy::parse(value).ok_or_else(|| {
                failed("argument(s) must be one of the following: volatile-lru, allkeys-lru, volatile-lfu, allkeys-lfu, volatile-random, allkeys-random, volatile-ttl, noeviction")
            })?);
        } else {
            return Err(err_owned(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                String::from_utf8_lossy(name)
            )));
        }
    }
    if let Some(fsync) = fsync {
        server.appendfsync = fsync;
    }
    if let Some(limit) = limit {
        server.maxmemory = limit;
    }
    if let Some(policy) = policy {
        server.policy = policy;
    }
    ok()
}

/// A memory value as `CONFIG SET` reads it: bytes, or with a `k`, `kb`, `m`, `mb`, `g`, `gb` unit.
fn parse_memory(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?.to_ascii_lowercase();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let scale = match unit {
        "" | "b" => 1,
        "k" => 1_000,
        "kb" => 1_024,
        "m" => 1_000_000,
        "mb" => 1_024 * 1_024,
        "g" => 1_000_000_000,
        "gb" => 1_024 * 1_024 * 1_024,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// `COMMAND [INFO [name ...] | COUNT]`: nil for a command the flavor does not have.
pub(crate) fn command(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let flavor = server.config.flavor;
    if args.len() == 1 || (is(args[1], "info") && args.len() == 2) {
        return Ok(Value::Array(commands::all(flavor).map(|s| s.info()).collect()));
    }
    if is(args[1], "info") {
        return Ok(Value::Array(
            args[2..]
                .iter()
                .map(|name| commands::lookup(name, flavor).map_or(Value::Nil, |s| s.info()))
                .collect(),
        ));
    }
    if is(args[1], "count") {
        if args.len() != 2 {
            return Err(subcommand_arity("command", args[1]));
        }
        return Ok(Value::Int(commands::all(flavor).count() as i64));
    }
    Err(unknown_subcommand(args, "COMMAND"))
}

/// `FLUSHALL [ASYNC | SYNC]`.
pub(crate) fn flushall(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    match args {
        [_] => {}
        [_, mode] if is(mode, "async") || is(mode, "sync") => {}
        _ => return Err(err(SYNTAX)),
    }
    server.keyspace.clear();
    ok()
}

/// `DBSIZE`: keys stored, counting those past their deadline that nothing touched yet.
pub(crate) fn dbsize(server: &mut Server) -> CmdResult {
    Ok(Value::Int(server.keyspace.len() as i64))
}

/// `KEYS pattern`: live keys, in byte order.
pub(crate) fn keys(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let now = server.now;
    Ok(Value::Array(
        server
            .keyspace
            .live_keys(now)
            .filter(|(key, _)| glob::matches(args[1], key))
            .map(|(key, _)| bulk(key))
            .collect(),
    ))
}

/// `SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]`: every matching key in one page.
pub(crate) fn scan(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    if parse_u64(args[1]).is_none() {
        return Err(err("ERR invalid cursor"));
    }
    let (mut pattern, mut kind): (Option<&[u8]>, Option<&[u8]>) = (None, None);
    let mut j = 2;
    while j < args.len() {
        let value = args.get(j + 1).copied().ok_or(err(SYNTAX))?;
        if is(args[j], "match") {
            pattern = Some(value);
        } else if is(args[j], "count") {
            match parse_i64(value) {
                None => return Err(err(NOT_INTEGER)),
                Some(n) if n < 1 => return Err(err(SYNTAX)),
                Some(_) => {}
            }
        } else if is(args[j], "type") {
            kind = Some(value);
        } else {
            return Err(err(SYNTAX));
        }
        j += 2;
    }
    let now = server.now;
    let keys = server
        .keyspace
        .live_keys(now)
        .filter(|(key, _)| pattern.is_none_or(|p| glob::matches(p, key)))
        .filter(|(_, entry)| kind.is_none_or(|t| is(t, entry.data.type_name())))
        .map(|(key, _)| bulk(key))
        .collect();
    Ok(Value::Array(vec![bulk(b"0"), Value::Array(keys)]))
}

fn parse_u64(arg: &[u8]) -> Option<u64> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}

/// `CLIENT SETNAME | SETINFO | GETNAME | ID` (what client libraries send on connect).
pub(crate) fn client(args: &[&[u8]]) -> CmdResult {
    let sub = args[1];
    if is(sub, "setname") || is(sub, "setinfo") {
        let wanted = if is(sub, "setname") { 3 } else { 4 };
        if args.len() != wanted {
            return Err(subcommand_arity("client", sub));
        }
        return ok();
    }
    if is(sub, "getname") {
        return Ok(Value::Nil);
    }
    if is(sub, "id") {
        return Ok(Value::Int(1));
    }
    Err(unknown_subcommand(args, "CLIENT"))
}

/// `SELECT index`: only database 0 is simulated.
pub(crate) fn select(args: &[&[u8]]) -> CmdResult {
    match parse_i64(args[1]) {
        None => Err(err(NOT_INTEGER)),
        Some(0) => ok(),
        Some(_) => Err(err("ERR DB index is out of range")),
    }
}
