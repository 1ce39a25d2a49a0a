//! Key and string commands: `SET` (with the options of the flavor), `GET`, `DEL`, `DELIFEQ`,
//! `EXISTS`, `PEXPIRE`, `PTTL`, `TTL`, `TYPE`, `MGET`, `INCR`. Checks run in the order the real
//! server runs them, so that a command with several faults fails with the same error.

use redis::Value;

use super::keyspace::{Data, Entry};
use super::numfmt::parse_i64;
use super::reply::{bulk, err, err_owned, status, CmdResult, NOT_INTEGER, OVERFLOW, SYNTAX, WRONGTYPE};
use super::server::Server;

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// How `SET` sets an expiry.
#[derive(Clone, Copy, PartialEq)]
enum Unit {
    Ex,
    Px,
    ExAt,
    PxAt,
}

/// `SET key value [NX | XX | IFEQ v] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]`.
pub(crate) fn set(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let (key, value) = (args[1], args[2]);
    let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
    let mut ifeq: Option<&[u8]> = None;
    let mut expire: Option<(Unit, &[u8])> = None;
    let mut j = 3;
    while j < args.len() {
        let opt = args[j];
        let next = args.get(j + 1).copied();
        if is(opt, "nx") && !xx && ifeq.is_none() {
            nx = true;
        } else if is(opt, "xx") && !nx && ifeq.is_none() {
            xx = true;
        } else if is(opt, "get") {
            get = true;
        } else if is(opt, "keepttl") && expire.is_none() {
            keepttl = true;
        } else if let (Some(unit), Some(arg)) = (expire_unit(opt), next) {
            // The same unit may repeat (the last one wins); two units, or one with KEEPTTL, may not.
            if keepttl || expire.is_some_and(|(set, _)| set != unit) {
                return Err(err(SYNTAX));
            }
            expire = Some((unit, arg));
            j += 1;
        } else if let (true, Some(arg)) = (is(opt, "ifeq") && server.config.flavor.has_set_ifeq(), next) {
            if nx || xx || ifeq.is_some() {
                return Err(err(SYNTAX));
            }
            ifeq = Some(arg);
            j += 1;
        } else {
            return Err(err(SYNTAX));
        }
        j += 1;
    }
    let now = server.now;
    let deadline = match expire {
        Some((unit, arg)) => Some(set_deadline(unit, arg, now)?),
        None => None,
    };
    let current = server.keyspace.get(key, now);
    let old = match current {
        Some(Entry {
            data: Data::Str(v), ..
        }) => Some(v.as_slice()),
        Some(_) if get || ifeq.is_some() => return Err(err(WRONGTYPE)),
        Some(_) => None,
        None => None,
    };
    let found = current.is_some();
    let old_reply = || old.map_or(Value::Nil, bulk);
    let abort = (nx && found) || (xx && !found) || ifeq.is_some_and(|want| old != Some(want));
    if abort {
        return Ok(if get { old_reply() } else { Value::Nil });
    }
    let reply = if get { old_reply() } else { Value::Okay };
    let keep = if keepttl {
        current.and_then(|e| e.expires_at)
    } else {
        None
    };
    server.keyspace.insert(
        key,
        Entry {
            data: Data::Str(value.to_vec()),
            expires_at: deadline.or(keep),
        },
    );
    Ok(reply)
}

fn expire_unit(opt: &[u8]) -> Option<Unit> {
    if is(opt, "ex") {
        Some(Unit::Ex)
    } else if is(opt, "px") {
        Some(Unit::Px)
    } else if is(opt, "exat") {
        Some(Unit::ExAt)
    } else if is(opt, "pxat") {
        Some(Unit::PxAt)
    } else {
        None
    }
}

/// The absolute deadline of `SET`'s expiry option, with the real server's checks.
fn set_deadline(unit: Unit, arg: &[u8], now: u64) -> Result<u64, super::reply::CmdError> {
    const INVALID: &str = "ERR invalid expire time in 'set' command";
    let value = parse_i64(arg).ok_or(err(NOT_INTEGER))?;
    let seconds = matches!(unit, Unit::Ex | Unit::ExAt);
    if value <= 0 || (seconds && value > i64::MAX / 1000) {
        return Err(err(INVALID));
    }
    let mut ms = if seconds { value * 1000 } else { value };
    if matches!(unit, Unit::Ex | Unit::Px) {
        let now = i64::try_from(now).map_err(|_| err(INVALID))?;
        ms = ms.checked_add(now).ok_or(err(INVALID))?;
    }
    u64::try_from(ms).map_err(|_| err(INVALID))
}

/// `GET key`.
pub(crate) fn get(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    match server.keyspace.get(args[1], server.now) {
        None => Ok(Value::Nil),
        Some(Entry {
            data: Data::Str(v), ..
        }) => Ok(bulk(v)),
        Some(_) => Err(err(WRONGTYPE)),
    }
}

/// `DEL key [key ...]`.
pub(crate) fn del(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let now = server.now;
    let removed = args[1..]
        .iter()
        .filter(|key| server.keyspace.remove(key, now))
        .count();
    Ok(Value::Int(removed as i64))
}

/// `DELIFEQ key value` (Valkey 9): deletes a string key holding exactly `value`.
pub(crate) fn delifeq(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let now = server.now;
    let equal = match server.keyspace.get(args[1], now) {
        None => false,
        Some(Entry {
            data: Data::Str(v), ..
        }) => v.as_slice() == args[2],
        Some(_) => return Err(err(WRONGTYPE)),
    };
    if equal {
        server.keyspace.remove_now(args[1]);
    }
    Ok(Value::Int(i64::from(equal)))
}

/// `EXISTS key [key ...]`: a key named twice counts twice.
pub(crate) fn exists(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let now = server.now;
    let found = args[1..]
        .iter()
        .filter(|key| server.keyspace.get(key, now).is_some())
        .count();
    Ok(Value::Int(found as i64))
}

/// `PEXPIRE key ms [NX | XX | GT | LT]`.
pub(crate) fn pexpire(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in &args[3..] {
        if is(opt, "nx") {
            nx = true;
        } else if is(opt, "xx") {
            xx = true;
        } else if is(opt, "gt") {
            gt = true;
        } else if is(opt, "lt") {
            lt = true;
        } else {
            return Err(err_owned(format!(
                "ERR Unsupported option {}",
                String::from_utf8_lossy(opt)
            )));
        }
    }
    if nx && (xx || gt || lt) {
        return Err(err(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(err("ERR GT and LT options at the same time are not compatible"));
    }
    let ms = parse_i64(args[2]).ok_or(err(NOT_INTEGER))?;
    let now = server.now;
    let invalid = || err("ERR invalid expire time in 'pexpire' command");
    let when = i64::try_from(now)
        .map_err(|_| invalid())?
        .checked_add(ms)
        .ok_or_else(invalid)?;
    let Some(entry) = server.keyspace.get_mut(args[1], now) else {
        return Ok(Value::Int(0));
    };
    // No expiry counts as an infinite TTL for GT and LT.
    let current = entry.expires_at.map(|at| at as i64);
    let refused = (nx && current.is_some())
        || (xx && current.is_none())
        || (gt && current.is_none_or(|at| when <= at))
        || (lt && current.is_some_and(|at| when >= at));
    if refused {
        return Ok(Value::Int(0));
    }
    if when <= now as i64 {
        server.keyspace.remove_now(args[1]);
    } else {
        entry.expires_at = Some(when as u64);
    }
    Ok(Value::Int(1))
}

/// The remaining time of `key` in ms: -2 absent, -1 no expiry.
fn remaining_ms(server: &mut Server, key: &[u8]) -> i64 {
    let now = server.now;
    match server.keyspace.get(key, now) {
        None => -2,
        Some(Entry { expires_at: None, .. }) => -1,
        Some(Entry {
            expires_at: Some(at), ..
        }) => at.saturating_sub(now).min(i64::MAX as u64) as i64,
    }
}

/// `PTTL key`.
pub(crate) fn pttl(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    Ok(Value::Int(remaining_ms(server, args[1])))
}

/// `TTL key`: seconds, rounded to the nearest.
pub(crate) fn ttl(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let ms = remaining_ms(server, args[1]);
    Ok(Value::Int(if ms < 0 { ms } else { (ms + 500) / 1000 }))
}

/// `TYPE key`.
pub(crate) fn type_(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let name = match server.keyspace.get(args[1], server.now) {
        None => "none",
        Some(entry) => entry.data.type_name(),
    };
    Ok(status(name))
}

/// `MGET key [key ...]`: nil for absent keys and keys of other types.
pub(crate) fn mget(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let now = server.now;
    let values = args[1..]
        .iter()
        .map(|key| match server.keyspace.get(key, now) {
            Some(Entry {
                data: Data::Str(v), ..
            }) => bulk(v),
            _ => Value::Nil,
        })
        .collect();
    Ok(Value::Array(values))
}

/// `INCR key`: keeps the key's expiry.
pub(crate) fn incr(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let now = server.now;
    let (current, expires_at) = match server.keyspace.get(args[1], now) {
        None => (0, None),
        Some(Entry {
            data: Data::Str(v),
            expires_at,
        }) => (parse_i64(v).ok_or(err(NOT_INTEGER))?, *expires_at),
        Some(_) => return Err(err(WRONGTYPE)),
    };
    let next = current.checked_add(1).ok_or(err(OVERFLOW))?;
    server.keyspace.insert(
        args[1],
        Entry {
            data: Data::Str(next.to_string().into_bytes()),
            expires_at,
        },
    );
    Ok(Value::Int(next))
}
