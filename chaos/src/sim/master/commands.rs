//! The commands a simulated master knows: their names, arity and the metadata `COMMAND INFO`
//! reports (copied from what a Redis 7.0 server says about itself), and which flavors have them.
//! Name lookup and arity checks live here so that clients and scripts get the same verdicts.

use redis::Value;

use super::config::Flavor;

/// A command the master implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cmd {
    Set,
    Get,
    EvalSha,
    Eval,
    Del,
    DelIfEq,
    Exists,
    PExpire,
    PTtl,
    Ttl,
    Type,
    MGet,
    Incr,
    HSet,
    HSetNx,
    HGet,
    HMGet,
    HDel,
    HExists,
    HIncrBy,
    HGetAll,
    HLen,
    ZAdd,
    ZRem,
    ZRange,
    ZRangeByScore,
    ZCount,
    ZRemRangeByScore,
    ZScore,
    ZCard,
    Time,
    Publish,
    Ping,
    Echo,
    Info,
    Config,
    Command,
    Script,
    FlushAll,
    DbSize,
    Keys,
    Scan,
    Client,
    Select,
}

/// What the server says about a command.
#[derive(Debug)]
pub(crate) struct Spec {
    pub(crate) cmd: Cmd,
    /// Lower-case name.
    pub(crate) name: &'static str,
    /// Redis arity: `n` exactly n arguments (name included), `-n` at least n.
    pub(crate) arity: i64,
    pub(crate) flags: &'static [&'static str],
    pub(crate) first_key: i64,
    pub(crate) last_key: i64,
    pub(crate) step: i64,
    pub(crate) acl: &'static [&'static str],
}

impl Spec {
    /// `true` when `argc` arguments (name included) fit the arity.
    pub(crate) fn arity_ok(&self, argc: usize) -> bool {
        let argc = argc as i64;
        if self.arity >= 0 {
            argc == self.arity
        } else {
            argc >= -self.arity
        }
    }

    /// `true` when it may grow memory, so that an out-of-memory master refuses it (`denyoom`).
    pub(crate) fn denyoom(&self) -> bool {
        self.flags.contains(&"denyoom")
    }

    /// `true` when it writes (and so is replicated).
    pub(crate) fn writes(&self) -> bool {
        self.flags.contains(&"write")
    }

    /// `true` when scripts may not call it.
    pub(crate) fn noscript(&self) -> bool {
        matches!(self.cmd, Cmd::Eval | Cmd::EvalSha | Cmd::Script | Cmd::Client)
    }

    /// The `COMMAND INFO` entry: name, arity, flags, first key, last key, step, ACL categories,
    /// tips, key specs and subcommands (the last three are left empty).
    pub(crate) fn info(&self) -> Value {
        let statuses = |items: &[&str]| {
            Value::Array(
                items
                    .iter()
                    .map(|s| Value::SimpleString((*s).to_owned()))
                    .collect(),
            )
        };
        Value::Array(vec![
            Value::BulkString(self.name.as_bytes().to_vec()),
            Value::Int(self.arity),
            statuses(self.flags),
            Value::Int(self.first_key),
            Value::Int(self.last_key),
            Value::Int(self.step),
            statuses(self.acl),
            Value::Array(Vec::new()),
            Value::Array(Vec::new()),
            Value::Array(Vec::new()),
        ])
    }
}

macro_rules! spec {
    ($cmd:ident, $name:literal, $arity:literal, [$($flag:literal),*], $first:literal, $last:literal, $step:literal, [$($acl:literal),*]) => {
        Spec {
            cmd: Cmd::$cmd,
            name: $name,
            arity: $arity,
            flags: &[$($flag),*],
            first_key: $first,
            last_key: $last,
            step: $step,
            acl: &[$($acl),*],
        }
    };
}

/// Every command, the hot ones first (lookup is a linear scan).
#[rustfmt::skip]
pub(crate) static TABLE: &[Spec] = &[
    spec!(Set, "set", -3, ["write", "denyoom"], 1, 1, 1, ["@write", "@string", "@slow"]),
    spec!(EvalSha, "evalsha", -3, ["noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], 0, 0, 0, ["@slow", "@scripting"]),
    spec!(Eval, "eval", -3, ["noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"], 0, 0, 0, ["@slow", "@scripting"]),
    spec!(Get, "get", 2, ["readonly", "fast"], 1, 1, 1, ["@read", "@string", "@fast"]),
    spec!(Del, "del", -2, ["write"], 1, -1, 1, ["@keyspace", "@write", "@slow"]),
    spec!(DelIfEq, "delifeq", 3, ["write", "fast"], 1, 1, 1, ["@write", "@string", "@fast"]),
    spec!(PExpire, "pexpire", -3, ["write", "fast"], 1, 1, 1, ["@keyspace", "@write", "@fast"]),
    spec!(PTtl, "pttl", 2, ["readonly", "fast"], 1, 1, 1, ["@keyspace", "@read", "@fast"]),
    spec!(Exists, "exists", -2, ["readonly", "fast"], 1, -1, 1, ["@keyspace", "@read", "@fast"]),
    spec!(Publish, "publish", 3, ["pubsub", "loading", "stale", "fast"], 0, 0, 0, ["@pubsub", "@fast"]),
    spec!(Time, "time", 1, ["loading", "stale", "fast"], 0, 0, 0, ["@fast"]),
    spec!(ZAdd, "zadd", -4, ["write", "denyoom", "fast"], 1, 1, 1, ["@write", "@sortedset", "@fast"]),
    spec!(ZRem, "zrem", -3, ["write", "fast"], 1, 1, 1, ["@write", "@sortedset", "@fast"]),
    spec!(ZRange, "zrange", -4, ["readonly"], 1, 1, 1, ["@read", "@sortedset", "@slow"]),
    spec!(ZRangeByScore, "zrangebyscore", -4, ["readonly"], 1, 1, 1, ["@read", "@sortedset", "@slow"]),
    spec!(ZCount, "zcount", 4, ["readonly", "fast"], 1, 1, 1, ["@read", "@sortedset", "@fast"]),
    spec!(ZRemRangeByScore, "zremrangebyscore", 4, ["write"], 1, 1, 1, ["@write", "@sortedset", "@slow"]),
    spec!(ZScore, "zscore", 3, ["readonly", "fast"], 1, 1, 1, ["@read", "@sortedset", "@fast"]),
    spec!(ZCard, "zcard", 2, ["readonly", "fast"], 1, 1, 1, ["@read", "@sortedset", "@fast"]),
    spec!(HSet, "hset", -4, ["write", "denyoom", "fast"], 1, 1, 1, ["@write", "@hash", "@fast"]),
    spec!(HSetNx, "hsetnx", 4, ["write", "denyoom", "fast"], 1, 1, 1, ["@write", "@hash", "@fast"]),
    spec!(HGet, "hget", 3, ["readonly", "fast"], 1, 1, 1, ["@read", "@hash", "@fast"]),
    spec!(HMGet, "hmget", -3, ["readonly", "fast"], 1, 1, 1, ["@read", "@hash", "@fast"]),
    spec!(HDel, "hdel", -3, ["write", "fast"], 1, 1, 1, ["@write", "@hash", "@fast"]),
    spec!(HExists, "hexists", 3, ["readonly", "fast"], 1, 1, 1, ["@read", "@hash", "@fast"]),
    spec!(HIncrBy, "hincrby", 4, ["write", "denyoom", "fast"], 1, 1, 1, ["@write", "@hash", "@fast"]),
    spec!(HGetAll, "hgetall", 2, ["readonly"], 1, 1, 1, ["@read", "@hash", "@slow"]),
    spec!(HLen, "hlen", 2, ["readonly", "fast"], 1, 1, 1, ["@read", "@hash", "@fast"]),
    spec!(Ttl, "ttl", 2, ["readonly", "fast"], 1, 1, 1, ["@keyspace", "@read", "@fast"]),
    spec!(Type, "type", 2, ["readonly", "fast"], 1, 1, 1, ["@keyspace", "@read", "@fast"]),
    spec!(MGet, "mget", -2, ["readonly", "fast"], 1, -1, 1, ["@read", "@string", "@fast"]),
    spec!(Incr, "incr", 2, ["write", "denyoom", "fast"], 1, 1, 1, ["@write", "@string", "@fast"]),
    spec!(Ping, "ping", -1, ["fast"], 0, 0, 0, ["@fast", "@connection"]),
    spec!(Echo, "echo", 2, ["loading", "stale", "fast"], 0, 0, 0, ["@fast", "@connection"]),
    spec!(Info, "info", -1, ["loading", "stale"], 0, 0, 0, ["@slow", "@dangerous"]),
    spec!(Config, "config", -2, [], 0, 0, 0, ["@slow"]),
    spec!(Command, "command", -1, ["loading", "stale"], 0, 0, 0, ["@slow", "@connection"]),
    spec!(Script, "script", -2, [], 0, 0, 0, ["@slow"]),
    spec!(FlushAll, "flushall", -1, ["write"], 0, 0, 0, ["@keyspace", "@write", "@slow", "@dangerous"]),
    spec!(DbSize, "dbsize", 1, ["readonly", "fast"], 0, 0, 0, ["@keyspace", "@read", "@fast"]),
    spec!(Keys, "keys", 2, ["readonly"], 0, 0, 0, ["@keyspace", "@read", "@slow", "@dangerous"]),
    spec!(Scan, "scan", -2, ["readonly"], 0, 0, 0, ["@keyspace", "@read", "@slow"]),
    spec!(Client, "client", -2, [], 0, 0, 0, ["@slow"]),
    spec!(Select, "select", 2, ["loading", "stale", "fast"], 0, 0, 0, ["@fast", "@connection"]),
];

/// The command called `name` (any case), if `flavor` has it.
pub(crate) fn lookup(name: &[u8], flavor: Flavor) -> Option<&'static Spec> {
    let spec = TABLE
        .iter()
        .find(|spec| spec.name.as_bytes().eq_ignore_ascii_case(name))?;
    if spec.cmd == Cmd::DelIfEq && !flavor.has_delifeq() {
        return None;
    }
    Some(spec)
}

/// Every command `flavor` has, in table order.
pub(crate) fn all(flavor: Flavor) -> impl Iterator<Item = &'static Spec> {
    TABLE
        .iter()
        .filter(move |spec| spec.cmd != Cmd::DelIfEq || flavor.has_delifeq())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_ignores_case_and_follows_the_flavor() {
        assert_eq!(lookup(b"gEt", Flavor::Redis70).map(|s| s.cmd), Some(Cmd::Get));
        assert!(lookup(b"DELIFEQ", Flavor::Redis70).is_none());
        assert!(lookup(b"DELIFEQ", Flavor::Valkey81).is_none());
        assert!(lookup(b"delifeq", Flavor::Valkey91).is_some());
        assert!(lookup(b"NOPE", Flavor::Valkey91).is_none());
    }

    #[test]
    fn arity() {
        let get = lookup(b"GET", Flavor::Redis70);
        assert!(get.is_some_and(|s| s.arity_ok(2) && !s.arity_ok(3)));
        let del = lookup(b"DEL", Flavor::Redis70);
        assert!(del.is_some_and(|s| s.arity_ok(2) && s.arity_ok(5) && !s.arity_ok(1)));
    }
}
