//! The simulated master checked on its own (expiry on its clock, restarts, flavors, scripts,
//! determinism) and against a real `redis-server` (see `differential`): the same command
//! sequences, every quorlock script included, must give the same replies from both.

use quorlock_chaos::sim::master::{sha1_hex, Flavor, MasterConfig, Persistence, SimMaster};
use redis::Value;

#[path = "sim_master/differential.rs"]
mod differential;
#[path = "sim_master/scripts.rs"]
mod scripts;

/// A realistic wall clock for the simulated masters: some day in 2023, in ms.
const T0: u64 = 1_700_000_000_000;

const RELEASE: &str = concat!(
    include_str!("../../src/scripts/token_common.lua"),
    include_str!("../../src/scripts/handoff_common.lua"),
    include_str!("../../src/scripts/release.lua")
);

fn master(flavor: Flavor, persistence: Persistence) -> SimMaster {
    SimMaster::new(MasterConfig::new(flavor, persistence, 42), T0).expect("a simulated master")
}

fn run(m: &mut SimMaster, now: u64, args: &[&str]) -> Value {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    m.execute(now, &args).value
}

fn bulk(s: &str) -> Value {
    Value::BulkString(s.as_bytes().to_vec())
}

fn error_text(v: &Value) -> String {
    match v {
        Value::ServerError(e) => format!("{} {}", e.code(), e.details().unwrap_or_default()),
        other => panic!("expected an error, got {other:?}"),
    }
}

fn info_field(m: &mut SimMaster, now: u64, name: &str) -> String {
    let Value::BulkString(text) = run(m, now, &["INFO"]) else {
        panic!("INFO is a bulk string")
    };
    let text = String::from_utf8(text).expect("INFO is text");
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name}:")))
        .unwrap_or_else(|| panic!("INFO has no {name}: {text}"))
        .to_owned()
}

#[test]
fn keys_expire_on_the_masters_own_clock() {
    let mut m = master(Flavor::Redis70, Persistence::None);
    assert_eq!(
        run(&mut m, T0, &["SET", "lock", "tok", "NX", "PX", "1000"]),
        Value::Okay
    );
    assert_eq!(run(&mut m, T0 + 400, &["PTTL", "lock"]), Value::Int(600));
    assert_eq!(run(&mut m, T0 + 400, &["TTL", "lock"]), Value::Int(1));
    // Alive through its deadline, gone strictly after it (Redis's rule).
    assert_eq!(run(&mut m, T0 + 1000, &["GET", "lock"]), bulk("tok"));
    assert_eq!(run(&mut m, T0 + 1000, &["PTTL", "lock"]), Value::Int(0));
    assert_eq!(run(&mut m, T0 + 1001, &["GET", "lock"]), Value::Nil);
    assert_eq!(run(&mut m, T0 + 1001, &["PTTL", "lock"]), Value::Int(-2));
    assert_eq!(
        run(&mut m, T0 + 1001, &["SET", "lock", "other", "NX", "PX", "1000"]),
        Value::Okay
    );
}

#[test]
fn expire_due_and_leak_checks() {
    let mut m = master(Flavor::Redis70, Persistence::None);
    run(&mut m, T0, &["SET", "a", "1", "PX", "100"]);
    run(&mut m, T0, &["SET", "b", "1", "PX", "300"]);
    run(&mut m, T0, &["SET", "c", "1"]);
    // Nothing touched `a`: it is still stored, but not alive.
    assert_eq!(m.dbsize(), 3);
    assert_eq!(m.keys(T0 + 200), vec![b"b".to_vec(), b"c".to_vec()]);
    assert_eq!(run(&mut m, T0 + 200, &["DBSIZE"]), Value::Int(3));
    assert_eq!(m.expire_due(T0 + 200), 1);
    assert_eq!(m.dbsize(), 2);
    assert_eq!(
        run(&mut m, T0 + 400, &["KEYS", "*"]),
        Value::Array(vec![bulk("c")])
    );
}

#[test]
fn a_restart_with_data_keeps_keys_and_deadlines() {
    let mut m = master(Flavor::Redis70, Persistence::AofAlways);
    let first = m.run_id();
    run(&mut m, T0, &["SET", "lock", "tok", "PX", "10000"]);
    run(&mut m, T0, &["INCR", "counter"]);
    assert_eq!(info_field(&mut m, T0 + 5_000, "uptime_in_seconds"), "5");
    m.restart(true, T0 + 6_000).expect("restart");
    assert_ne!(m.run_id(), first);
    assert_eq!(info_field(&mut m, T0 + 6_000, "run_id"), m.run_id());
    assert_eq!(info_field(&mut m, T0 + 8_500, "uptime_in_seconds"), "2");
    assert_eq!(run(&mut m, T0 + 6_000, &["GET", "lock"]), bulk("tok"));
    assert_eq!(run(&mut m, T0 + 6_000, &["PTTL", "lock"]), Value::Int(4_000));
    assert_eq!(run(&mut m, T0 + 6_000, &["GET", "counter"]), bulk("1"));
    assert_eq!(run(&mut m, T0 + 10_001, &["GET", "lock"]), Value::Nil);
}

#[test]
fn a_restart_without_data_comes_back_empty() {
    let mut m = master(Flavor::Redis70, Persistence::None);
    run(&mut m, T0, &["SET", "lock", "tok"]);
    m.restart(false, T0 + 1).expect("restart");
    assert_eq!(run(&mut m, T0 + 1, &["DBSIZE"]), Value::Int(0));
    assert_eq!(info_field(&mut m, T0 + 1, "aof_enabled"), "0");
}

#[test]
fn a_restart_flushes_the_script_cache() {
    let mut m = master(Flavor::Redis70, Persistence::AofAlways);
    let sha = sha1_hex(RELEASE.as_bytes());
    assert_eq!(run(&mut m, T0, &["SCRIPT", "LOAD", RELEASE]), bulk(&sha));
    run(&mut m, T0, &["SET", "lock", "tok"]);
    m.restart(true, T0 + 1).expect("restart");
    let reply = run(&mut m, T0 + 1, &["EVALSHA", &sha, "1", "lock", "tok", ""]);
    assert_eq!(
        error_text(&reply),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    assert_eq!(
        run(&mut m, T0 + 1, &["SCRIPT", "EXISTS", &sha]),
        Value::Array(vec![Value::Int(0)])
    );
    // EVAL caches it again; EVALSHA then works and the lock (kept by the restart) is released.
    assert_eq!(
        run(&mut m, T0 + 1, &["EVAL", RELEASE, "1", "lock", "nope", ""]),
        Value::Int(-1)
    );
    assert_eq!(
        run(&mut m, T0 + 1, &["EVALSHA", &sha, "1", "lock", "tok", ""]),
        Value::Int(1)
    );
}

#[test]
fn script_flush_forgets_scripts() {
    let mut m = master(Flavor::Redis70, Persistence::None);
    let sha = sha1_hex(RELEASE.as_bytes());
    run(&mut m, T0, &["SCRIPT", "LOAD", RELEASE]);
    assert_eq!(run(&mut m, T0, &["SCRIPT", "FLUSH"]), Value::Okay);
    let reply = run(&mut m, T0, &["EVALSHA", &sha, "1", "lock", "tok", ""]);
    assert_eq!(
        error_text(&reply),
        "NOSCRIPT No matching script. Please use EVAL."
    );
}

#[test]
fn set_ifeq_only_from_valkey_8_1() {
    let mut redis = master(Flavor::Redis70, Persistence::None);
    run(&mut redis, T0, &["SET", "k", "a"]);
    assert_eq!(
        error_text(&run(&mut redis, T0, &["SET", "k", "b", "IFEQ", "a"])),
        "ERR syntax error"
    );
    for flavor in [Flavor::Valkey81, Flavor::Valkey91] {
        let mut m = master(flavor, Persistence::None);
        assert_eq!(
            run(&mut m, T0, &["SET", "k", "b", "IFEQ", "a"]),
            Value::Nil,
            "absent key"
        );
        run(&mut m, T0, &["SET", "k", "a"]);
        assert_eq!(run(&mut m, T0, &["SET", "k", "b", "IFEQ", "x"]), Value::Nil);
        assert_eq!(
            run(&mut m, T0, &["SET", "k", "b", "IFEQ", "a", "PX", "500"]),
            Value::Okay
        );
        assert_eq!(run(&mut m, T0, &["GET", "k"]), bulk("b"));
        assert_eq!(run(&mut m, T0, &["PTTL", "k"]), Value::Int(500));
        assert_eq!(
            error_text(&run(&mut m, T0, &["SET", "k", "c", "NX", "IFEQ", "b"])),
            "ERR syntax error"
        );
        run(&mut m, T0, &["HSETNX", "h", "f", "v"]);
        assert_eq!(
            error_text(&run(&mut m, T0, &["SET", "h", "c", "IFEQ", "v"])),
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        );
    }
}

#[test]
fn delifeq_only_on_valkey_9() {
    for flavor in [Flavor::Redis70, Flavor::Valkey81] {
        let mut m = master(flavor, Persistence::None);
        assert_eq!(
            error_text(&run(&mut m, T0, &["DELIFEQ", "k", "v"])),
            "ERR unknown command 'DELIFEQ', with args beginning with: 'k' 'v' "
        );
        assert_eq!(
            run(&mut m, T0, &["COMMAND", "INFO", "DELIFEQ"]),
            Value::Array(vec![Value::Nil])
        );
    }
    let mut m = master(Flavor::Valkey91, Persistence::None);
    let Value::Array(info) = run(&mut m, T0, &["COMMAND", "INFO", "delifeq"]) else {
        panic!("COMMAND INFO is an array")
    };
    assert!(
        matches!(&info[0], Value::Array(entry) if entry[0] == bulk("delifeq") && entry[1] == Value::Int(3))
    );
    run(&mut m, T0, &["SET", "k", "v"]);
    assert_eq!(run(&mut m, T0, &["DELIFEQ", "k", "x"]), Value::Int(0));
    assert_eq!(run(&mut m, T0, &["DELIFEQ", "k", "v"]), Value::Int(1));
    assert_eq!(run(&mut m, T0, &["DELIFEQ", "k", "v"]), Value::Int(0));
    run(&mut m, T0, &["ZADD", "z", "1", "v"]);
    assert_eq!(
        error_text(&run(&mut m, T0, &["DELIFEQ", "z", "v"])),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
}

#[test]
fn info_reports_the_flavor() {
    let mut m = master(Flavor::Valkey91, Persistence::AofAlways);
    assert_eq!(info_field(&mut m, T0, "redis_version"), "7.2.4");
    assert_eq!(info_field(&mut m, T0, "valkey_version"), "9.1.0");
    assert_eq!(info_field(&mut m, T0, "aof_enabled"), "1");
    assert_eq!(info_field(&mut m, T0, "connected_slaves"), "0");
    assert_eq!(info_field(&mut m, T0, "run_id"), m.run_id());
    assert_eq!(
        run(&mut m, T0, &["CONFIG", "GET", "appendfsync"]),
        Value::Array(vec![bulk("appendfsync"), bulk("always")])
    );
    let mut r = master(Flavor::Redis70, Persistence::None);
    assert_eq!(info_field(&mut r, T0, "redis_version"), "7.0.15");
    assert_eq!(
        run(&mut r, T0, &["CONFIG", "GET", "appendfsync"]),
        Value::Array(vec![bulk("appendfsync"), bulk("everysec")])
    );
}

#[test]
fn time_comes_from_the_masters_clock() {
    let mut m = master(Flavor::Redis70, Persistence::None);
    assert_eq!(
        run(&mut m, T0 + 1_234, &["TIME"]),
        Value::Array(vec![bulk("1700000001"), bulk("234000")])
    );
}

#[test]
fn published_messages_come_back_with_the_reply() {
    let mut m = master(Flavor::Redis70, Persistence::None);
    run(&mut m, T0, &["SET", "lock", "tok"]);
    let args: Vec<&[u8]> = vec![
        b"EVAL",
        RELEASE.as_bytes(),
        b"2",
        b"lock",
        b"lock:q",
        b"tok",
        b"chan",
    ];
    let reply = m.execute(T0, &args);
    assert_eq!(reply.value, Value::Int(1));
    assert_eq!(reply.published, vec![(b"chan".to_vec(), b"tok".to_vec())]);
    // PUBLISH answers what the subscriber counter says.
    m.set_subscriber_count(Box::new(|channel| if channel == b"chan" { 3 } else { 0 }));
    let reply = m.execute(T0, &[b"PUBLISH", b"chan", b"x"]);
    assert_eq!(reply.value, Value::Int(3));
    assert_eq!(reply.published, vec![(b"chan".to_vec(), b"x".to_vec())]);
    assert!(m.execute(T0, &[b"GET", b"lock"]).published.is_empty());
}

#[test]
fn commands_built_by_the_client_library_run_as_is() {
    let mut m = master(Flavor::Redis70, Persistence::None);
    let mut cmd = redis::cmd("SET");
    cmd.arg("lock").arg("tok").arg("NX").arg("PX").arg(30_000u64);
    assert_eq!(m.execute_cmd(T0, &cmd).value, Value::Okay);
    assert_eq!(m.execute_cmd(T0, &cmd).value, Value::Nil);
}

/// Everything a run of the master gives back, for comparing two runs.
fn trace(seed: u64) -> (Vec<Reply>, String) {
    let mut m = SimMaster::new(
        MasterConfig::new(Flavor::Valkey91, Persistence::AofAlways, seed),
        T0,
    )
    .expect("master");
    let fair = concat!(
        include_str!("../../src/scripts/fair_common.lua"),
        include_str!("../../src/scripts/fair_acquire.lua")
    );
    let mut out = Vec::new();
    for i in 0..200u64 {
        let now = T0 + i * 7;
        let ticket = format!("t{}", i % 5);
        let time = (1000 + i % 5).to_string();
        let token = format!("tok{}", i % 3);
        out.push(m.execute(now, &[b"SET", b"lock", token.as_bytes(), b"NX", b"PX", b"50"]));
        out.push(m.execute(
            now,
            &[
                b"EVAL",
                fair.as_bytes(),
                b"3",
                b"fair",
                b"queue",
                b"beats",
                ticket.as_bytes(),
                time.as_bytes(),
                b"40",
                b"30",
                token.as_bytes(),
            ],
        ));
        out.push(m.execute(
            now,
            &[
                b"EVAL",
                RELEASE.as_bytes(),
                b"2",
                b"lock",
                b"lock:q",
                token.as_bytes(),
                b"c",
            ],
        ));
        if i % 50 == 49 {
            m.restart(i % 100 == 99, now).expect("restart");
        }
    }
    out.push(m.execute(T0 + 5_000, &[b"ZRANGE", b"queue", b"0", b"-1", b"WITHSCORES"]));
    (out, m.run_id())
}

use quorlock_chaos::sim::master::Reply;

#[test]
fn same_inputs_give_the_same_outputs() {
    let (a, id_a) = trace(9);
    let (b, id_b) = trace(9);
    assert_eq!(a, b);
    assert_eq!(id_a, id_b);
    let (_, id_c) = trace(10);
    assert_ne!(id_a, id_c, "another seed draws other run ids");
}

#[test]
fn differential_plain_commands() {
    let mut pair = differential::Pair::start();
    for seed in 0..4 {
        differential::random_plain_commands(&mut pair, seed, 1_500);
    }
}

#[test]
fn differential_script_conversions_and_cache() {
    let mut pair = differential::Pair::start();
    differential::script_conversions(&mut pair);
}

#[test]
fn differential_server_commands() {
    let mut pair = differential::Pair::start();
    differential::server_commands(&mut pair);
}

#[test]
fn differential_plain_and_fencing_scripts() {
    let mut pair = differential::Pair::start();
    scripts::plain_and_fencing(&mut pair);
}

#[test]
fn differential_multi_reentrant_fair_scripts() {
    let mut pair = differential::Pair::start();
    scripts::multi_reentrant_fair(&mut pair);
    // The simulated master recorded what the scripts published; the real server's subscribers
    // (none here) would have received the same.
    assert!(pair.published.iter().any(|(channel, _)| channel == b"fair:chan"));
    assert!(pair
        .published
        .iter()
        .any(|(channel, _)| channel.starts_with(b"release:")));
}

#[test]
fn differential_semaphore_and_rwlock_scripts() {
    let mut pair = differential::Pair::start();
    scripts::semaphore_and_rwlock(&mut pair);
    assert!(pair.published.iter().any(|(channel, _)| channel == b"rw:chan"));
}

#[test]
fn a_runaway_script_is_stopped_and_the_master_goes_on() {
    let mut m = master(Flavor::Redis70, Persistence::None);
    let reply = run(&mut m, T0, &["EVAL", "while true do end", "0"]);
    let text = error_text(&reply);
    assert!(text.starts_with("ERR Script killed"), "{text}");
    assert!(text.contains("on @user_script:1."), "{text}");
    assert_eq!(run(&mut m, T0, &["EVAL", "return 7", "0"]), Value::Int(7));
}

#[test]
fn zcount_and_zremrangebyscore_follow_the_score_range() {
    let mut m = master(Flavor::Redis70, Persistence::None);
    run(&mut m, T0, &["ZADD", "z", "1", "a", "2", "b", "3", "c"]);
    assert_eq!(run(&mut m, T0, &["ZCOUNT", "z", "(1", "+inf"]), Value::Int(2));
    assert_eq!(
        run(&mut m, T0, &["ZCOUNT", "nope", "-inf", "+inf"]),
        Value::Int(0)
    );
    assert!(error_text(&run(&mut m, T0, &["ZCOUNT", "z", "x", "1"])).contains("not a float"));
    assert_eq!(
        run(&mut m, T0, &["ZREMRANGEBYSCORE", "z", "-inf", "2"]),
        Value::Int(2)
    );
    assert_eq!(run(&mut m, T0, &["ZCARD", "z"]), Value::Int(1));
    // Removing the last member removes the key.
    assert_eq!(
        run(&mut m, T0, &["ZREMRANGEBYSCORE", "z", "3", "3"]),
        Value::Int(1)
    );
    assert_eq!(run(&mut m, T0, &["EXISTS", "z"]), Value::Int(0));
    run(&mut m, T0, &["SET", "s", "v"]);
    assert!(error_text(&run(&mut m, T0, &["ZREMRANGEBYSCORE", "s", "0", "1"])).starts_with("WRONGTYPE"));
}
