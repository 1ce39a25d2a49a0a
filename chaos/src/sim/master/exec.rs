//! Runs one command that is not about scripts against a master's state: resolves the name for
//! the flavor, checks the arity and the memory state, and hands the arguments to the command's
//! implementation. Clients and scripts go through here alike; only the master handles `EVAL`,
//! `EVALSHA` and `SCRIPT`.

use super::admin;
use super::commands::{self, Cmd, Spec};
use super::hashes;
use super::memory::OOM;
use super::reply::{err, CmdError, CmdResult};
use super::server::Server;
use super::strings;
use super::zsets;

/// Resolves `args[0]` for `flavor` and checks the arity.
pub(crate) fn resolve(server: &Server, args: &[&[u8]]) -> Result<&'static Spec, CmdError> {
    let name = args.first().copied().unwrap_or_default();
    let spec = commands::lookup(name, server.config.flavor).ok_or(CmdError::Unknown)?;
    if !spec.arity_ok(args.len()) {
        return Err(CmdError::Arity);
    }
    Ok(spec)
}

/// Refuses what the master's memory state forbids (a `denyoom` command while it is out of memory),
/// and counts a write in the replication offset.
pub(crate) fn admit(server: &mut Server, spec: &Spec, args: &[&[u8]]) -> Result<(), CmdError> {
    if server.oom && spec.denyoom() {
        return Err(err(OOM));
    }
    if spec.writes() {
        server.note_write(args);
    }
    Ok(())
}

/// Runs a resolved command other than `EVAL`, `EVALSHA` and `SCRIPT`.
pub(crate) fn run(server: &mut Server, cmd: Cmd, args: &[&[u8]]) -> CmdResult {
    match cmd {
        Cmd::Set => strings::set(server, args),
        Cmd::Get => strings::get(server, args),
        Cmd::Del => strings::del(server, args),
        Cmd::DelIfEq => strings::delifeq(server, args),
        Cmd::Exists => strings::exists(server, args),
        Cmd::PExpire => strings::pexpire(server, args),
        Cmd::PTtl => strings::pttl(server, args),
        Cmd::Ttl => strings::ttl(server, args),
        Cmd::Type => strings::type_(server, args),
        Cmd::MGet => strings::mget(server, args),
        Cmd::Incr => strings::incr(server, args),
        Cmd::HSet => hashes::hset(server, args),
        Cmd::HSetNx => hashes::hsetnx(server, args),
        Cmd::HMGet => hashes::hmget(server, args),
        Cmd::HGet => hashes::hget(server, args),
        Cmd::HDel => hashes::hdel(server, args),
        Cmd::HExists => hashes::hexists(server, args),
        Cmd::HIncrBy => hashes::hincrby(server, args),
        Cmd::HGetAll => hashes::hgetall(server, args),
        Cmd::HLen => hashes::hlen(server, args),
        Cmd::ZAdd => zsets::zadd(server, args),
        Cmd::ZRem => zsets::zrem(server, args),
        Cmd::ZRange => zsets::zrange(server, args),
        Cmd::ZRangeByScore => zsets::zrangebyscore(server, args),
        Cmd::ZCount => zsets::zcount(server, args),
        Cmd::ZRemRangeByScore => zsets::zremrangebyscore(server, args),
        Cmd::ZScore => zsets::zscore(server, args),
        Cmd::ZCard => zsets::zcard(server, args),
        Cmd::Time => admin::time(server),
        Cmd::Publish => admin::publish(server, args),
        Cmd::Ping => admin::ping(args),
        Cmd::Echo => Ok(super::reply::bulk(args[1])),
        Cmd::Info => admin::info(server, args),
        Cmd::Config => admin::config(server, args),
        Cmd::Command => admin::command(server, args),
        Cmd::FlushAll => admin::flushall(server, args),
        Cmd::DbSize => admin::dbsize(server),
        Cmd::Keys => admin::keys(server, args),
        Cmd::Scan => admin::scan(server, args),
        Cmd::Client => admin::client(args),
        Cmd::Select => admin::select(args),
        // Scripting belongs to the master, which holds the Lua engine.
        Cmd::Eval | Cmd::EvalSha | Cmd::Script => Err(CmdError::NotFromScript),
    }
}
