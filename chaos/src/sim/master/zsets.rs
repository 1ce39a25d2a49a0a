//! Sorted-set commands: `ZADD` (NX, XX, GT, LT, CH, INCR), `ZREM`, `ZRANGE` (by index, or
//! BYSCORE; REV; LIMIT; WITHSCORES), `ZRANGEBYSCORE` (with `(` exclusive bounds, infinities,
//! LIMIT, WITHSCORES), `ZCOUNT`, `ZREMRANGEBYSCORE`, `ZSCORE`, `ZCARD`. Scores are written as a Redis 7.0 server writes them.

use redis::Value;

use super::keyspace::{Data, Entry};
use super::numfmt::{format_g17, parse_f64, parse_i64};
use super::reply::{bulk, err, CmdError, CmdResult, NOT_FLOAT, NOT_INTEGER, SYNTAX, WRONGTYPE};
use super::server::Server;
use super::zset::ZSet;

fn is(arg: &[u8], word: &str) -> bool {
    arg.eq_ignore_ascii_case(word.as_bytes())
}

/// A score as a bulk string.
fn score_reply(score: f64) -> Value {
    Value::BulkString(format_g17(score).into_bytes())
}

fn read<'a>(server: &'a mut Server, key: &[u8]) -> Result<Option<&'a ZSet>, CmdError> {
    match server.keyspace.get(key, server.now) {
        None => Ok(None),
        Some(Entry {
            data: Data::ZSet(z), ..
        }) => Ok(Some(z)),
        Some(_) => Err(err(WRONGTYPE)),
    }
}

/// `ZADD key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...]`.
pub(crate) fn zadd(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let (mut nx, mut xx, mut gt, mut lt, mut ch, mut incr) = (false, false, false, false, false, false);
    let mut at = 2;
    while at < args.len() {
        let opt = args[at];
        if is(opt, "nx") {
            nx = true;
        } else if is(opt, "xx") {
            xx = true;
        } else if is(opt, "gt") {
            gt = true;
        } else if is(opt, "lt") {
            lt = true;
        } else if is(opt, "ch") {
            ch = true;
        } else if is(opt, "incr") {
            incr = true;
        } else {
            break;
        }
        at += 1;
    }
    let pairs = &args[at..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Err(err(SYNTAX));
    }
    if nx && xx {
        return Err(err("ERR XX and NX options at the same time are not compatible"));
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Err(err(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if incr && pairs.len() > 2 {
        return Err(err("ERR INCR option supports a single increment-element pair"));
    }
    let mut scores = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks_exact(2) {
        scores.push(parse_f64(pair[0]).ok_or(err(NOT_FLOAT))?);
    }
    let now = server.now;
    match server.keyspace.get(args[1], now) {
        None if xx => return Ok(if incr { Value::Nil } else { Value::Int(0) }),
        None => server
            .keyspace
            .insert(args[1], Entry::new(Data::ZSet(ZSet::default()))),
        Some(Entry {
            data: Data::ZSet(_), ..
        }) => {}
        Some(_) => return Err(err(WRONGTYPE)),
    }
    let Some(Entry {
        data: Data::ZSet(zset),
        ..
    }) = server.keyspace.get_mut(args[1], now)
    else {
        return Err(err(WRONGTYPE));
    };
    let (mut added, mut updated) = (0, 0);
    let mut incr_result = Value::Nil;
    for (pair, &score) in pairs.chunks_exact(2).zip(&scores) {
        let member = pair[1];
        match zset.score(member) {
            Some(current) => {
                if nx {
                    continue;
                }
                let target = if incr { current + score } else { score };
                if target.is_nan() {
                    return Err(err("ERR resulting score is not a number (NaN)"));
                }
                if (gt && target <= current) || (lt && target >= current) {
                    continue;
                }
                if incr {
                    incr_result = score_reply(target);
                }
                if target != current {
                    zset.insert(target, member);
                    updated += 1;
                }
            }
            None => {
                if xx {
                    continue;
                }
                zset.insert(score, member);
                added += 1;
                if incr {
                    incr_result = score_reply(score);
                }
            }
        }
    }
    if zset.is_empty() {
        // Only an XX/NX/GT/LT ZADD on a new key can leave it empty.
        server.keyspace.remove_now(args[1]);
    }
    if incr {
        return Ok(incr_result);
    }
    Ok(Value::Int(if ch { added + updated } else { added }))
}

/// `ZREM key member [member ...]`.
pub(crate) fn zrem(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let now = server.now;
    let (removed, empty) = match server.keyspace.get_mut(args[1], now) {
        None => return Ok(Value::Int(0)),
        Some(Entry {
            data: Data::ZSet(z), ..
        }) => {
            let removed = args[2..].iter().filter(|m| z.remove(m)).count();
            (removed, z.is_empty())
        }
        Some(_) => return Err(err(WRONGTYPE)),
    };
    if empty {
        server.keyspace.remove_now(args[1]);
    }
    Ok(Value::Int(removed as i64))
}

/// One end of a score range.
#[derive(Clone, Copy)]
struct Bound {
    value: f64,
    exclusive: bool,
}

fn parse_bound(arg: &[u8]) -> Option<Bound> {
    let (exclusive, text) = match arg.split_first() {
        Some((b'(', rest)) => (true, rest),
        _ => (false, arg),
    };
    let value = parse_f64(text).or_else(|| {
        // strtod takes leading spaces, which a range bound allows.
        let trimmed = text.trim_ascii_start();
        (trimmed.len() != text.len())
            .then(|| parse_f64(trimmed))
            .flatten()
    })?;
    Some(Bound { value, exclusive })
}

impl Bound {
    fn above_min(self, score: f64) -> bool {
        if self.exclusive {
            score > self.value
        } else {
            score >= self.value
        }
    }

    fn below_max(self, score: f64) -> bool {
        if self.exclusive {
            score < self.value
        } else {
            score <= self.value
        }
    }
}

/// The reply of a range: members, with their scores when asked.
fn range_reply<'a>(items: impl Iterator<Item = &'a (f64, Vec<u8>)>, withscores: bool) -> Value {
    let mut out = Vec::new();
    for (score, member) in items {
        out.push(bulk(member));
        if withscores {
            out.push(score_reply(*score));
        }
    }
    Value::Array(out)
}

/// Members of `zset` with scores in `[min, max]`, in order (reverse: from the top), after
/// skipping `offset` and at most `count` (negative: all).
fn by_score(zset: &ZSet, min: Bound, max: Bound, rev: bool, offset: i64, count: i64) -> Vec<&(f64, Vec<u8>)> {
    if offset < 0 {
        return Vec::new();
    }
    let in_range = |item: &&(f64, Vec<u8>)| min.above_min(item.0) && max.below_max(item.0);
    let limit = if count < 0 { usize::MAX } else { count as usize };
    let items = zset.items();
    if rev {
        items
            .iter()
            .rev()
            .filter(in_range)
            .skip(offset as usize)
            .take(limit)
            .collect()
    } else {
        items
            .iter()
            .filter(in_range)
            .skip(offset as usize)
            .take(limit)
            .collect()
    }
}

/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`.
pub(crate) fn zrangebyscore(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let (mut withscores, mut limit) = (false, None);
    let mut j = 4;
    while j < args.len() {
        if is(args[j], "withscores") {
            withscores = true;
        } else if is(args[j], "limit") && j + 2 < args.len() {
            let offset = parse_i64(args[j + 1]).ok_or(err(NOT_INTEGER))?;
            let count = parse_i64(args[j + 2]).ok_or(err(NOT_INTEGER))?;
            limit = Some((offset, count));
            j += 2;
        } else {
            return Err(err(SYNTAX));
        }
        j += 1;
    }
    let (Some(min), Some(max)) = (parse_bound(args[2]), parse_bound(args[3])) else {
        return Err(err("ERR min or max is not a float"));
    };
    let (offset, count) = limit.unwrap_or((0, -1));
    let Some(zset) = read(server, args[1])? else {
        return Ok(Value::Array(Vec::new()));
    };
    Ok(range_reply(
        by_score(zset, min, max, false, offset, count).into_iter(),
        withscores,
    ))
}

/// `ZRANGE key start stop [BYSCORE] [REV] [LIMIT offset count] [WITHSCORES]` (no BYLEX).
pub(crate) fn zrange(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let (mut withscores, mut byscore, mut rev, mut limit) = (false, false, false, None);
    let mut j = 4;
    while j < args.len() {
        if is(args[j], "withscores") {
            withscores = true;
        } else if is(args[j], "byscore") {
            byscore = true;
        } else if is(args[j], "rev") {
            rev = true;
        } else if is(args[j], "limit") && j + 2 < args.len() {
            let offset = parse_i64(args[j + 1]).ok_or(err(NOT_INTEGER))?;
            let count = parse_i64(args[j + 2]).ok_or(err(NOT_INTEGER))?;
            limit = Some((offset, count));
            j += 2;
        } else {
            return Err(err(SYNTAX));
        }
        j += 1;
    }
    if limit.is_some() && !byscore {
        return Err(err(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if byscore {
        // With REV the range is given from the top: ZRANGE key max min BYSCORE REV.
        let (lo, hi) = if rev {
            (args[3], args[2])
        } else {
            (args[2], args[3])
        };
        let (Some(min), Some(max)) = (parse_bound(lo), parse_bound(hi)) else {
            return Err(err("ERR min or max is not a float"));
        };
        let (offset, count) = limit.unwrap_or((0, -1));
        let Some(zset) = read(server, args[1])? else {
            return Ok(Value::Array(Vec::new()));
        };
        return Ok(range_reply(
            by_score(zset, min, max, rev, offset, count).into_iter(),
            withscores,
        ));
    }
    let start = parse_i64(args[2]).ok_or(err(NOT_INTEGER))?;
    let stop = parse_i64(args[3]).ok_or(err(NOT_INTEGER))?;
    let Some(zset) = read(server, args[1])? else {
        return Ok(Value::Array(Vec::new()));
    };
    let len = zset.len() as i64;
    let mut start = if start < 0 {
        start.saturating_add(len)
    } else {
        start
    };
    let mut stop = if stop < 0 { stop.saturating_add(len) } else { stop };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= len {
        return Ok(Value::Array(Vec::new()));
    }
    if stop >= len {
        stop = len - 1;
    }
    let (start, stop) = (start as usize, stop as usize);
    let items = zset.items();
    Ok(if rev {
        range_reply(items.iter().rev().skip(start).take(stop - start + 1), withscores)
    } else {
        range_reply(items[start..=stop].iter(), withscores)
    })
}

/// `ZSCORE key member`.
pub(crate) fn zscore(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    Ok(read(server, args[1])?
        .and_then(|z| z.score(args[2]))
        .map_or(Value::Nil, score_reply))
}

/// `ZCARD key`.
pub(crate) fn zcard(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    Ok(Value::Int(read(server, args[1])?.map_or(0, |z| z.len() as i64)))
}

/// `ZCOUNT key min max`.
pub(crate) fn zcount(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let (Some(min), Some(max)) = (parse_bound(args[2]), parse_bound(args[3])) else {
        return Err(err("ERR min or max is not a float"));
    };
    let Some(zset) = read(server, args[1])? else {
        return Ok(Value::Int(0));
    };
    Ok(Value::Int(by_score(zset, min, max, false, 0, -1).len() as i64))
}

/// `ZREMRANGEBYSCORE key min max`: removes the members in the range and, with the last one, the key.
pub(crate) fn zremrangebyscore(server: &mut Server, args: &[&[u8]]) -> CmdResult {
    let (Some(min), Some(max)) = (parse_bound(args[2]), parse_bound(args[3])) else {
        return Err(err("ERR min or max is not a float"));
    };
    let now = server.now;
    let (removed, empty) = match server.keyspace.get_mut(args[1], now) {
        None => return Ok(Value::Int(0)),
        Some(Entry {
            data: Data::ZSet(z), ..
        }) => {
            let doomed: Vec<Vec<u8>> = by_score(z, min, max, false, 0, -1)
                .into_iter()
                .map(|(_, member)| member.clone())
                .collect();
            for member in &doomed {
                z.remove(member);
            }
            (doomed.len(), z.is_empty())
        }
        Some(_) => return Err(err(WRONGTYPE)),
    };
    if empty {
        server.keyspace.remove_now(args[1]);
    }
    Ok(Value::Int(removed as i64))
}
