//! Hash commands: `HSET`, `HSETNX`, `HGET`, `HMGET`, `HDEL`, `HEXISTS`, `HINCRBY`, `HGETALL`,
//! `HLEN`. A hash left without fields is deleted, as in Redis; writes keep the key's expiry.

use redis::Value;

use super::keyspace::{Data, Entry, Hash};
use super::numfmt::parse_i64;
use super::reply::{bulk, err, CmdResult, NOT_INTEGER, OVERFLOW, WRONGTYPE};
use super::server::Server;

/// The hash at `key`, `None` when absent, `WRONGTYPE` for another type.
fn read<'a>(server: &'a mut Server, key: &[u8]) -> Result<Option<&'a Hash>, super::reply::CmdError> {
    match server.keyspace.get(key, server.now) {
        None => Ok(None),
        Some(Entry {
            data: Data::Hash(h), ..
        }) => Ok(Some(h)),
        Some(_) => Err(err(WRONGTYPE)),
    }
}

/// The hash at `key` to change, created empty when absent.
fn write<'a>(server: &'a mut Server, key: &[u8]) -> Result<&'a mut Hash, super::reply::CmdError> {
    let now = server.now;
    if server.keyspace.get(key, now).is_none() {
        server
            .keyspace
            .insert(key, Entry::new(Data::Hash(Hash::default())));
    }
    match server.keyspace.get_mut(key, now) {
        Some(Entry {
            data: Data::Hash(h), ..
        }) => Ok(h),
        _ => Err(err(WRONGTYPE)),
    }
}

/// `HSET key field value [field value ...]`: how many fields are new.
pub(crate) fn hset(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Err(err("ERR wrong number of arguments for 'hset' command"));
    }
    let hash = write(server, args[1])?;
    let mut added = 0;
    for pair in args[2..].chunks(2) {
        if hash.get(pair[0]).is_none() {
            added += 1;
        }
        hash.set(pair[0], pair[1].to_vec());
    }
    Ok(Value::Int(added))
}

/// `HMGET key field [field ...]`: each field's value, nil where absent.
pub(crate) fn hmget(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let hash = read(server, args[1])?;
    Ok(Value::Array(
        args[2..]
            .iter()
            .map(|field| hash.and_then(|h| h.get(field)).map_or(Value::Nil, bulk))
            .collect(),
    ))
}

/// `HSETNX key field value`.
pub(crate) fn hsetnx(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let hash = write(server, args[1])?;
    if hash.get(args[2]).is_some() {
        return Ok(Value::Int(0));
    }
    hash.set(args[2], args[3].to_vec());
    Ok(Value::Int(1))
}

/// `HGET key field`.
pub(crate) fn hget(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    Ok(read(server, args[1])?
        .and_then(|h| h.get(args[2]))
        .map_or(Value::Nil, bulk))
}

/// `HDEL key field [field ...]`.
pub(crate) fn hdel(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let now = server.now;
    let (removed, empty) = match server.keyspace.get_mut(args[1], now) {
        None => return Ok(Value::Int(0)),
        Some(Entry {
            data: Data::Hash(h), ..
        }) => {
            let removed = args[2..].iter().filter(|field| h.remove(field)).count();
            (removed, h.is_empty())
        }
        Some(_) => return Err(err(WRONGTYPE)),
    };
    if empty {
        server.keyspace.remove_now(args[1]);
    }
    Ok(Value::Int(removed as i64))
}

/// `HEXISTS key field`.
pub(crate) fn hexists(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let found = read(server, args[1])?.is_some_and(|h| h.get(args[2]).is_some());
    Ok(Value::Int(i64::from(found)))
}

/// `HINCRBY key field increment`.
pub(crate) fn hincrby(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let by = parse_i64(args[3]).ok_or(err(NOT_INTEGER))?;
    let hash = write(server, args[1])?;
    let current = match hash.get(args[2]) {
        None => 0,
        Some(v) => parse_i64(v).ok_or(err("ERR hash value is not an integer"))?,
    };
    let next = current.checked_add(by).ok_or(err(OVERFLOW))?;
    hash.set(args[2], next.to_string().into_bytes());
    Ok(Value::Int(next))
}

/// `HGETALL key`: fields and values, interleaved, in insertion order.
pub(crate) fn hgetall(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let Some(hash) = read(server, args[1])? else {
        return Ok(Value::Array(Vec::new()));
    };
    let mut items = Vec::with_capacity(hash.len() * 2);
    for (field, value) in hash.fields() {
        items.push(bulk(field));
        items.push(bulk(value));
    }
    Ok(Value::Array(items))
}

/// `HLEN key`.
pub(crate) fn hlen(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    Ok(Value::Int(read(server, args[1])?.map_or(0, |h| h.len() as i64)))
}
