//! Differential test: a real `redis-server` 7.0 and a simulated Redis 7.0 master get the same
//! commands, and must give the same replies. The simulated master's clock is the real server's
//! (`TIME`, read before each command), keys are given either long TTLs or TTLs that have surely
//! passed by the next command, and remaining TTLs are compared with a tolerance, so that the
//! comparison does not depend on how fast the test runs.

use std::time::Duration;

use quorlock_chaos::sim::master::{sha1_hex, Flavor, MasterConfig, Persistence, SimMaster};
use quorlock_chaos::{Cluster, ClusterOptions, Server};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use redis::{ConnectionLike, Value};

/// Stands for the server's own `run_id` in arguments: each side gets its own.
pub(crate) const RUN_ID: &str = "$RUN_ID";

/// How two replies are compared.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Cmp {
    /// Equal.
    Exact,
    /// Equal, except integers that may be remaining TTLs (in ms) within a tolerance.
    Ttl,
    /// Equal as sets of elements (KEYS, whose order is the server's hash order).
    Unordered,
}

/// The real server and the simulated one, side by side.
pub(crate) struct Pair {
    _cluster: Cluster,
    _runtime: tokio::runtime::Runtime,
    real: redis::Connection,
    sim: SimMaster,
    real_run_id: String,
    /// What ran so far, for failure messages.
    log: Vec<String>,
    pub(crate) published: Vec<(Vec<u8>, Vec<u8>)>,
}

fn show(args: &[&[u8]]) -> String {
    args.iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if s.len() > 40 {
                format!("<{} bytes>", a.len())
            } else {
                format!("{s:?}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn info_run_id(text: &[u8]) -> String {
    String::from_utf8_lossy(text)
        .lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

impl Pair {
    /// Starts a real server (no persistence) and a simulated Redis 7.0 master with none either.
    pub(crate) fn start() -> Pair {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let cluster = runtime
            .block_on(Cluster::start_with(ClusterOptions {
                // The simulated master is Redis 7.0's double, whatever server the suite runs on.
                server: Some(Server::Redis),
                masters: 1,
                appendfsync_always: false,
                ..ClusterOptions::default()
            }))
            .expect("a real redis-server");
        let mut real = redis::Client::open(cluster.url(0))
            .expect("url")
            .get_connection()
            .expect("connection");
        let Value::BulkString(info) = real.req_command(&redis::cmd("INFO")).expect("INFO") else {
            panic!("INFO is a bulk string")
        };
        let mut pair = Pair {
            _cluster: cluster,
            _runtime: runtime,
            real,
            sim: SimMaster::new(MasterConfig::new(Flavor::Redis70, Persistence::None, 1), 0)
                .expect("simulated master"),
            real_run_id: info_run_id(&info),
            log: Vec::new(),
            published: Vec::new(),
        };
        let now = pair.now();
        pair.sim.restart(false, now).expect("restart");
        pair
    }

    /// The run ids of the real and the simulated server.
    pub(crate) fn run_ids(&self) -> (String, String) {
        (self.real_run_id.clone(), self.sim.run_id())
    }

    /// The real server's clock in ms.
    fn now(&mut self) -> u64 {
        match self.real.req_command(&redis::cmd("TIME")) {
            Ok(Value::Array(parts)) => {
                let num = |v: &Value| match v {
                    Value::BulkString(b) => String::from_utf8_lossy(b).parse::<u64>().unwrap_or(0),
                    _ => 0,
                };
                num(&parts[0]) * 1000 + num(&parts[1]) / 1000
            }
            other => panic!("TIME answered {other:?}"),
        }
    }

    /// Runs `args` on both; returns (real, simulated).
    pub(crate) fn both(&mut self, args: &[&[u8]]) -> (Value, Value) {
        let sim_run_id = self.sim.run_id();
        let swap = |run_id: &str| -> Vec<Vec<u8>> {
            args.iter()
                .map(|a| {
                    if *a == RUN_ID.as_bytes() {
                        run_id.as_bytes().to_vec()
                    } else {
                        a.to_vec()
                    }
                })
                .collect()
        };
        let real_args = swap(&self.real_run_id);
        let sim_args = swap(&sim_run_id);
        let now = self.now();
        let mut cmd = redis::Cmd::new();
        for a in &real_args {
            cmd.arg(a.as_slice());
        }
        let real = self.real.req_command(&cmd).expect("the real server answers");
        let sim_args: Vec<&[u8]> = sim_args.iter().map(Vec::as_slice).collect();
        let reply = self.sim.execute(now, &sim_args);
        self.published.extend(reply.published);
        self.log.push(show(args));
        (real, reply.value)
    }

    /// Runs `args` on both and asserts the replies agree; returns the simulated reply.
    pub(crate) fn check_with(&mut self, cmp: Cmp, args: &[&[u8]]) -> Value {
        let (real, sim) = self.both(args);
        if !agree(cmp, &real, &sim) {
            let tail: Vec<&String> = self.log.iter().rev().take(15).collect();
            panic!(
                "replies differ for {}\n  real: {real:?}\n  sim:  {sim:?}\nlast commands (newest first):\n  {}",
                show(args),
                tail.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  ")
            );
        }
        sim
    }

    /// [`Pair::check_with`] with string arguments.
    pub(crate) fn check(&mut self, cmp: Cmp, args: &[&str]) -> Value {
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        self.check_with(cmp, &args)
    }

    /// Waits until TTLs of a few ms have surely passed on both (the simulated clock is the real
    /// server's, read before each command).
    pub(crate) fn let_short_ttls_pass(&mut self) {
        std::thread::sleep(Duration::from_millis(4));
    }

    /// Compares everything stored under `keys`: type, value and remaining TTL.
    pub(crate) fn check_keys(&mut self, keys: &[&str]) {
        for key in keys {
            // A key in the last milliseconds of its TTL may expire on one side between two of the
            // comparisons below and not yet on the other: the simulated clock is read a moment
            // before the real server runs each command, and a loaded machine widens that moment.
            // Let such a key expire on both first, then compare everything.
            for _ in 0..5 {
                let (real, sim) = self.both(&[b"PTTL", key.as_bytes()]);
                let Some(left) = near_expiry(&real).max(near_expiry(&sim)) else {
                    break;
                };
                std::thread::sleep(Duration::from_millis(left.unsigned_abs() + 4));
            }
            self.check(Cmp::Exact, &["TYPE", key]);
            self.check(Cmp::Ttl, &["PTTL", key]);
            let Value::SimpleString(kind) = self.check(Cmp::Exact, &["TYPE", key]) else {
                panic!("TYPE is a status")
            };
            match kind.as_str() {
                "string" => drop(self.check(Cmp::Exact, &["GET", key])),
                "hash" => drop(self.check(Cmp::Exact, &["HGETALL", key])),
                "zset" => drop(self.check(Cmp::Exact, &["ZRANGE", key, "0", "-1"])),
                _ => {}
            }
        }
    }
}

/// The remaining TTL of a PTTL reply that is close to its expiry.
fn near_expiry(pttl: &Value) -> Option<i64> {
    match pttl {
        Value::Int(left) if (0..=EXPIRY_WINDOW_MS).contains(left) => Some(*left),
        _ => None,
    }
}

/// How close to its expiry a key must be to be let expire before it is compared: far more than
/// the moment between reading the simulated clock and the real server's command, under load, and
/// far less than any TTL the tests compare as held (seconds).
const EXPIRY_WINDOW_MS: i64 = 50;

/// Tolerance for remaining TTLs in ms: the two clocks are read a moment apart.
const TTL_TOLERANCE_MS: i64 = 250;

fn agree(cmp: Cmp, real: &Value, sim: &Value) -> bool {
    match (cmp, real, sim) {
        (Cmp::Ttl, Value::Int(a), Value::Int(b)) if *a >= 0 && *b >= 0 => (a - b).abs() <= TTL_TOLERANCE_MS,
        (Cmp::Ttl, Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| agree(cmp, x, y))
        }
        (Cmp::Unordered, Value::Array(a), Value::Array(b)) => {
            let key = |v: &Value| format!("{v:?}");
            let mut a: Vec<String> = a.iter().map(key).collect();
            let mut b: Vec<String> = b.iter().map(key).collect();
            a.sort();
            b.sort();
            a == b
        }
        _ => real == sim,
    }
}

const KEYS: &[&str] = &["k0", "k1", "k2", "k3"];
const VALUES: &[&str] = &[
    "a",
    "b",
    "1",
    "10",
    "-5",
    "9223372036854775807",
    "x y",
    "",
    "007",
    "1.5",
];
const SCORES: &[&str] = &[
    "1", "2", "0.1", "-inf", "+inf", "1e3", "abc", "3.5", "-2", "(1", "1.5e300",
];
const MEMBERS: &[&str] = &["a", "b", "c", "d"];
const BOUNDS: &[&str] = &["-inf", "+inf", "0", "(1", "2", "(2", "3.5", "x", "1e3", "(0.1"];
const INDEXES: &[&str] = &["0", "1", "-1", "-2", "2", "10", "-10", "x"];
const EXPIRIES: &[&str] = &["1", "2", "100000", "0", "-1", "x", "9223372036854775807"];

fn pick<'a>(rng: &mut StdRng, items: &[&'a str]) -> &'a str {
    items[rng.random_range(0..items.len())]
}

/// One random command over a few keys, and whether it may leave a TTL of a few ms behind.
fn random_command(rng: &mut StdRng) -> (Vec<String>, Cmp, bool) {
    let family = rng.random_range(0..34);
    // Each family mostly works on its own key (strings on k0, hashes on k1, sorted sets on k2),
    // so that values build up, and sometimes on any key, for WRONGTYPE and absent keys.
    let home = match family {
        13..=19 => "k1",
        20..=29 => "k2",
        _ => "k0",
    };
    let key = if rng.random_range(0..10) < 7 {
        home
    } else {
        pick(rng, KEYS)
    }
    .to_owned();
    let key2 = pick(rng, KEYS).to_owned();
    let s = |x: &str| x.to_owned();
    let mut short_ttl = false;
    let (args, cmp): (Vec<String>, Cmp) = match family {
        0..=3 => {
            let mut a = vec![s(pick(rng, &["SET", "set", "Set"])), key, s(pick(rng, VALUES))];
            for _ in 0..rng.random_range(0..3) {
                match rng.random_range(0..9) {
                    0 => a.push(s("NX")),
                    1 => a.push(s("XX")),
                    2 => a.push(s("GET")),
                    3 => a.push(s("KEEPTTL")),
                    4 | 5 => {
                        let e = pick(rng, EXPIRIES);
                        short_ttl |= e == "1" || e == "2";
                        a.extend([s("PX"), s(e)]);
                    }
                    6 => a.extend([s("EX"), s(pick(rng, &["100", "0", "x"]))]),
                    7 => a.push(s("PX")),
                    _ => a.push(s(pick(rng, &["IFEQ", "BOGUS", "nx"]))),
                }
            }
            (a, Cmp::Exact)
        }
        4 => (vec![s("GET"), key], Cmp::Exact),
        5 => (vec![s("DEL"), key, key2], Cmp::Exact),
        6 => (vec![s("EXISTS"), key, key2, s("k1")], Cmp::Exact),
        7 => {
            let e = pick(rng, EXPIRIES);
            short_ttl |= e == "1" || e == "2";
            let mut a = vec![s("PEXPIRE"), key, s(e)];
            if rng.random_range(0..3) == 0 {
                a.push(s(pick(rng, &["NX", "XX", "GT", "LT", "zz"])));
            }
            (a, Cmp::Exact)
        }
        8 => (vec![s("PTTL"), key], Cmp::Ttl),
        9 => (vec![s("TTL"), key], Cmp::Exact),
        10 => (vec![s("TYPE"), key], Cmp::Exact),
        11 => (vec![s("MGET"), key, key2, s("k3")], Cmp::Exact),
        12 => (vec![s("INCR"), key], Cmp::Exact),
        13 => (
            vec![s("HSETNX"), key, s(pick(rng, MEMBERS)), s(pick(rng, VALUES))],
            Cmp::Exact,
        ),
        14 => (vec![s("HGET"), key, s(pick(rng, MEMBERS))], Cmp::Exact),
        15 => (
            vec![s("HDEL"), key, s(pick(rng, MEMBERS)), s(pick(rng, MEMBERS))],
            Cmp::Exact,
        ),
        16 => (vec![s("HEXISTS"), key, s(pick(rng, MEMBERS))], Cmp::Exact),
        17 => (
            vec![
                s("HINCRBY"),
                key,
                s(pick(rng, MEMBERS)),
                s(pick(rng, &["1", "-3", "x", "9223372036854775807"])),
            ],
            Cmp::Exact,
        ),
        18 => (vec![s("HGETALL"), key], Cmp::Exact),
        19 => (vec![s("HLEN"), key], Cmp::Exact),
        20..=22 => {
            let mut a = vec![s("ZADD"), key];
            for _ in 0..rng.random_range(0..2) {
                a.push(s(pick(rng, &["NX", "XX", "GT", "LT", "CH", "INCR"])));
            }
            for _ in 0..rng.random_range(1..3) {
                a.push(s(pick(rng, SCORES)));
                a.push(s(pick(rng, MEMBERS)));
            }
            if rng.random_range(0..10) == 0 {
                a.pop();
            }
            (a, Cmp::Exact)
        }
        23 => (
            vec![s("ZREM"), key, s(pick(rng, MEMBERS)), s(pick(rng, MEMBERS))],
            Cmp::Exact,
        ),
        24 | 25 => {
            let mut a = vec![
                s("ZRANGE"),
                key.clone(),
                s(pick(rng, INDEXES)),
                s(pick(rng, INDEXES)),
            ];
            match rng.random_range(0..6) {
                0 => a.push(s("WITHSCORES")),
                1 => a.push(s("REV")),
                2 => {
                    a = vec![
                        s("ZRANGE"),
                        key,
                        s(pick(rng, BOUNDS)),
                        s(pick(rng, BOUNDS)),
                        s("BYSCORE"),
                    ];
                    if rng.random_range(0..2) == 0 {
                        a.push(s("REV"));
                    }
                    if rng.random_range(0..2) == 0 {
                        a.extend([
                            s("LIMIT"),
                            s(pick(rng, &["0", "1", "-1"])),
                            s(pick(rng, &["1", "-1", "0"])),
                        ]);
                    }
                }
                3 => a.extend([s("LIMIT"), s("0"), s("1")]),
                _ => {}
            }
            (a, Cmp::Exact)
        }
        26 | 27 => {
            let mut a = vec![
                s("ZRANGEBYSCORE"),
                key,
                s(pick(rng, BOUNDS)),
                s(pick(rng, BOUNDS)),
            ];
            if rng.random_range(0..2) == 0 {
                a.push(s("WITHSCORES"));
            }
            if rng.random_range(0..3) == 0 {
                a.extend([
                    s("LIMIT"),
                    s(pick(rng, &["0", "1", "-1", "x"])),
                    s(pick(rng, &["1", "-1", "0", "2"])),
                ]);
            }
            (a, Cmp::Exact)
        }
        28 => (vec![s("ZSCORE"), key, s(pick(rng, MEMBERS))], Cmp::Exact),
        29 => match rng.random_range(0..3) {
            0 => (vec![s("ZCARD"), key], Cmp::Exact),
            1 => (
                vec![s("ZCOUNT"), key, s(pick(rng, BOUNDS)), s(pick(rng, BOUNDS))],
                Cmp::Exact,
            ),
            _ => (
                vec![
                    s("ZREMRANGEBYSCORE"),
                    key,
                    s(pick(rng, BOUNDS)),
                    s(pick(rng, BOUNDS)),
                ],
                Cmp::Exact,
            ),
        },
        30 => (
            vec![s("KEYS"), s(pick(rng, &["*", "k[01]", "k?", "x*"]))],
            Cmp::Unordered,
        ),
        31 => {
            // Wrong arity and unknown commands.
            let a = match rng.random_range(0..5) {
                0 => vec![s("GET")],
                1 => vec![s("GET"), key, key2],
                2 => vec![s("NOSUCH"), key, s("x")],
                3 => vec![s("HSETNX"), key, s("f")],
                _ => vec![s("ZADD"), key],
            };
            (a, Cmp::Exact)
        }
        32 => (vec![s("PING")], Cmp::Exact),
        _ => (vec![s("ECHO"), s(pick(rng, VALUES))], Cmp::Exact),
    };
    (args, cmp, short_ttl)
}

/// Plain commands in seeded random sequences over four keys of every type.
pub(crate) fn random_plain_commands(pair: &mut Pair, seed: u64, steps: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..steps {
        let (args, cmp, short_ttl) = random_command(&mut rng);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        pair.check(cmp, &args);
        if short_ttl {
            pair.let_short_ttls_pass();
        }
    }
    pair.check_keys(KEYS);
}

/// What every script returns, and how its errors read, for values of every kind.
pub(crate) fn script_conversions(pair: &mut Pair) {
    pair.check(Cmp::Exact, &["DEL", "h", "s", "z"]);
    pair.check(Cmp::Exact, &["HSETNX", "h", "f", "v"]);
    pair.check(Cmp::Exact, &["SET", "s", "v"]);
    let cases: &[(&str, &[&str])] = &[
        ("return 1", &[]),
        ("return 3.99", &[]),
        ("return -3.99", &[]),
        ("return true", &[]),
        ("return false", &[]),
        ("return nil", &[]),
        ("return 'str'", &[]),
        ("return {1, 2, nil, 3}", &[]),
        ("return {1, {2, 'x', {false, true}}, 'y'}", &[]),
        ("return {1e20, -1e30, 0/0}", &[]),
        ("return {ok = 'FINE'}", &[]),
        ("return {ok = 'OK'}", &[]),
        ("return {err = 'MY err'}", &[]),
        ("return {err = 'myerr'}", &[]),
        ("return redis.status_reply('S')", &[]),
        ("return redis.error_reply('FOO bar')", &[]),
        ("return redis.error_reply('nocode')", &[]),
        ("return redis.error_reply('-X y')", &[]),
        ("return redis.sha1hex('')", &[]),
        ("return redis.sha1hex('quorlock')", &[]),
        ("return redis.call('GET', KEYS[1])", &["h"]),
        ("return redis.pcall('GET', KEYS[1])", &["h"]),
        ("local r = redis.pcall('GET', KEYS[1]); return r['err']", &["h"]),
        ("local ok, e = pcall(redis.call, 'GET', KEYS[1]) return {tostring(ok), type(e), e}", &["h"]),
        ("local ok, e = pcall(redis.call, 'NOPE') return {tostring(ok), type(e), e}", &[]),
        ("local ok, e = pcall(error, {err = 'X y'}) return {tostring(ok), type(e), e}", &[]),
        ("local ok, e = pcall(error, {x = 1}) return {tostring(ok), type(e)}", &[]),
        ("local ok, e = pcall(error, 'x') return {tostring(ok), e}", &[]),
        ("local ok, v = pcall(redis.call, 'GET', KEYS[1]) return {tostring(ok), v}", &["s"]),
        ("return redis.call('GET', KEYS[1])", &["s"]),
        ("return redis.call('GET', KEYS[1])", &["nothing"]),
        ("return redis.call('SET', KEYS[1], 'w', 'NX')", &["s"]),
        ("return type(redis.call('SET', KEYS[1], 'v', 'XX'))", &["s"]),
        ("return redis.call('SET', KEYS[1], 'v', 'XX')['ok']", &["s"]),
        ("return redis.call('TYPE', KEYS[1])", &["z"]),
        ("return redis.call('TYPE', KEYS[1])['ok']", &["h"]),
        ("return redis.call('PING')", &[]),
        ("return redis.call('NOPE')", &[]),
        ("return redis.pcall('NOPE')", &[]),
        ("return redis.call('SET', 'a')", &[]),
        ("return redis.call()", &[]),
        ("return redis.call('GET', {})", &[]),
        ("return redis.call('EVAL', 'return 1', 0)", &[]),
        ("return redis.pcall('EVAL', 'return 1', 0)", &[]),
        ("return redis.call('SCRIPT', 'FLUSH')", &[]),
        ("redis.call('ZADD', KEYS[1], 0.1, 'a', 1700000000123, 'b', 1/0, 'c') return redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')", &["z"]),
        ("local out = {} for _, v in ipairs({1.5, 1e20, 0.1, 2^53 + 1, 123456789012345678, 1e-5, 100}) do redis.call('SET', KEYS[1], v) out[#out + 1] = redis.call('GET', KEYS[1]) end return out", &["s"]),
        ("x = 1", &[]),
        ("return y", &[]),
        ("return os", &[]),
        ("return io", &[]),
        ("error('boom')", &[]),
        ("\n\nerror('boom on line 3')", &[]),
        ("error('nopos', 0)", &[]),
        ("error()", &[]),
        ("error(5)", &[]),
        ("error({err = 'TBL x'})", &[]),
        ("local t = nil; return t.x", &[]),
        ("return (", &[]),
        ("return #KEYS + #ARGV * 10", &["a", "b"]),
        ("return {KEYS[1], ARGV[1], ARGV[2]}", &["a", "b", "c"]),
        ("return tonumber('12') + 1", &[]),
        ("return string.format('%d-%s', 7, 'x')", &[]),
        ("return string.match('run_id:abc12\\r\\n', 'run_id:(%x+)')", &[]),
        ("return math.floor(7 / 2)", &[]),
        ("local t = redis.call('TIME') return #t", &[]),
    ];
    for (body, keys_and_args) in cases {
        let numkeys = if keys_and_args.is_empty() { "0" } else { "1" };
        let mut args = vec!["EVAL", body, numkeys];
        args.extend_from_slice(keys_and_args);
        pair.check(Cmp::Exact, &args);
    }
    // Argument errors of EVAL itself, and EVALSHA of unknown scripts.
    pair.check(Cmp::Exact, &["EVAL", "return 1", "5", "a"]);
    pair.check(Cmp::Exact, &["EVAL", "return 1", "-1"]);
    pair.check(Cmp::Exact, &["EVAL", "return 1", "x"]);
    pair.check(Cmp::Exact, &["EVAL", "return 1"]);
    pair.check(
        Cmp::Exact,
        &["EVALSHA", "0123456789012345678901234567890123456789", "0"],
    );
    pair.check(Cmp::Exact, &["EVALSHA", "abc", "0"]);
    // The script cache: LOAD, EXISTS (either case), EVALSHA, FLUSH.
    let body = "return ARGV[1]";
    let sha = sha1_hex(body.as_bytes());
    pair.check(Cmp::Exact, &["SCRIPT", "LOAD", body]);
    pair.check(
        Cmp::Exact,
        &[
            "SCRIPT",
            "EXISTS",
            &sha,
            "ffffffffffffffffffffffffffffffffffffffff",
        ],
    );
    pair.check(Cmp::Exact, &["EVALSHA", &sha, "0", "hello"]);
    pair.check(Cmp::Exact, &["EVALSHA", &sha.to_uppercase(), "0", "hello"]);
    pair.check(Cmp::Exact, &["SCRIPT", "FLUSH"]);
    pair.check(Cmp::Exact, &["SCRIPT", "EXISTS", &sha]);
    pair.check(Cmp::Exact, &["EVALSHA", &sha, "0", "hello"]);
    pair.check(Cmp::Exact, &["SCRIPT", "LOAD", "return ("]);
    pair.check(Cmp::Exact, &["SCRIPT", "NOPE"]);
}

/// Server-level commands quorlock's health checks and capability probes send.
pub(crate) fn server_commands(pair: &mut Pair) {
    pair.check(Cmp::Exact, &["CONFIG", "GET", "appendfsync"]);
    pair.check(Cmp::Exact, &["CONFIG", "GET", "appendonly"]);
    pair.check(Cmp::Exact, &["CONFIG", "GET", "no-such-parameter"]);
    pair.check(Cmp::Exact, &["CONFIG", "GET"]);
    pair.check(Cmp::Exact, &["PING"]);
    pair.check(Cmp::Exact, &["PING", "hello"]);
    pair.check(Cmp::Exact, &["SELECT", "0"]);
    pair.check(Cmp::Exact, &["COMMAND", "INFO", "DELIFEQ"]);
    pair.check(Cmp::Exact, &["FLUSHALL"]);
    pair.check(Cmp::Exact, &["DBSIZE"]);
    // COMMAND INFO: name, arity, flags, key positions and ACL categories as the server reports.
    let names = [
        "get",
        "set",
        "del",
        "exists",
        "pexpire",
        "pttl",
        "ttl",
        "type",
        "mget",
        "incr",
        "hsetnx",
        "hget",
        "hdel",
        "hexists",
        "hincrby",
        "hgetall",
        "hlen",
        "zadd",
        "zrem",
        "zrange",
        "zrangebyscore",
        "zcount",
        "zremrangebyscore",
        "zscore",
        "zcard",
        "time",
        "publish",
        "eval",
        "evalsha",
        "ping",
        "dbsize",
        "keys",
        "flushall",
        "info",
    ];
    for name in names {
        let (real, sim) = pair.both(&[b"COMMAND", b"INFO", name.as_bytes()]);
        let head = |v: &Value| match v {
            Value::Array(entries) => match entries.first() {
                Some(Value::Array(fields)) => fields.iter().take(7).cloned().collect::<Vec<_>>(),
                other => panic!("COMMAND INFO {name}: {other:?}"),
            },
            other => panic!("COMMAND INFO {name}: {other:?}"),
        };
        assert_eq!(head(&real), head(&sim), "COMMAND INFO {name}");
    }
    // INFO: the fields quorlock reads, with the same meaning.
    let (real, sim) = pair.both(&[b"INFO"]);
    let field = |v: &Value, name: &str| -> String {
        let Value::BulkString(text) = v else {
            panic!("INFO answered {v:?}")
        };
        String::from_utf8_lossy(text)
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")).map(str::to_owned))
            .unwrap_or_else(|| panic!("no {name} in INFO"))
    };
    for name in [
        "aof_enabled",
        "connected_slaves",
        "redis_version",
        "redis_mode",
        "role",
    ] {
        assert_eq!(field(&real, name), field(&sim, name), "INFO {name}");
    }
    assert_eq!(field(&real, "run_id").len(), field(&sim, "run_id").len());
    assert!(field(&sim, "uptime_in_seconds").parse::<u64>().is_ok());
    let (real, sim) = pair.both(&[b"INFO", b"server"]);
    assert_eq!(field(&sim, "run_id"), pair.sim.run_id());
    assert!(field(&real, "run_id") == pair.real_run_id);
    assert!(matches!(&sim, Value::BulkString(t) if !String::from_utf8_lossy(t).contains("# Persistence")));
}
