//! quorlock's own scripts, each run on the real server and on the simulated one with realistic and
//! adversarial arguments: absent keys, keys held by another token or owner, keys of the wrong
//! type, expired keys, stale waiters. After each call the replies and the keys it touched must
//! agree. Calls alternate between `EVAL` and `EVALSHA`.

use redis::Value;

use super::differential::{Cmp, Pair, RUN_ID};

const RELEASE: &str = concat!(
    include_str!("../../../src/scripts/token_common.lua"),
    include_str!("../../../src/scripts/handoff_common.lua"),
    include_str!("../../../src/scripts/release.lua")
);
const WAIT_REGISTER: &str = concat!(
    include_str!("../../../src/scripts/handoff_common.lua"),
    include_str!("../../../src/scripts/wait_register.lua")
);
const WAIT_PASS_ON: &str = concat!(
    include_str!("../../../src/scripts/handoff_common.lua"),
    include_str!("../../../src/scripts/wait_pass_on.lua")
);
const EXTEND: &str = concat!(
    include_str!("../../../src/scripts/token_common.lua"),
    include_str!("../../../src/scripts/extend.lua")
);
const INSPECT: &str = include_str!("../../../src/scripts/inspect.lua");
const FENCE_ACQUIRE: &str = include_str!("../../../src/scripts/fence_acquire.lua");
const FENCE_COMMIT: &str = concat!(
    include_str!("../../../src/scripts/token_common.lua"),
    include_str!("../../../src/scripts/fence_commit.lua")
);
const FENCE_REPAIR: &str = include_str!("../../../src/scripts/fence_repair.lua");
const FENCED_READ: &str = include_str!("../../../src/scripts/fenced_read.lua");
const FENCED_WRITE: &str = include_str!("../../../src/scripts/fenced_write.lua");
const MULTI_ACQUIRE: &str = include_str!("../../../src/scripts/multi_acquire.lua");
const MULTI_EXTEND: &str = include_str!("../../../src/scripts/multi_extend.lua");
const MULTI_RELEASE: &str = include_str!("../../../src/scripts/multi_release.lua");
const REENTRANT_ACQUIRE: &str = include_str!("../../../src/scripts/reentrant_acquire.lua");
const REENTRANT_EXTEND: &str = concat!(
    include_str!("../../../src/scripts/reentrant_common.lua"),
    include_str!("../../../src/scripts/reentrant_extend.lua")
);
const REENTRANT_RELEASE: &str = concat!(
    include_str!("../../../src/scripts/reentrant_common.lua"),
    include_str!("../../../src/scripts/reentrant_release.lua")
);
// The fair lock's scripts are sent with the shared helpers in front, as the client sends them.
const FAIR_ACQUIRE: &str = concat!(
    include_str!("../../../src/scripts/fair_common.lua"),
    include_str!("../../../src/scripts/fair_acquire.lua")
);
const FAIR_RELEASE: &str = concat!(
    include_str!("../../../src/scripts/fair_common.lua"),
    include_str!("../../../src/scripts/fair_release.lua")
);
const FAIR_LEAVE: &str = concat!(
    include_str!("../../../src/scripts/fair_common.lua"),
    include_str!("../../../src/scripts/fair_leave.lua")
);
const SEMAPHORE_ACQUIRE: &str = include_str!("../../../src/scripts/semaphore_acquire.lua");
const SEMAPHORE_EXTEND: &str = concat!(
    include_str!("../../../src/scripts/token_common.lua"),
    include_str!("../../../src/scripts/semaphore_extend.lua")
);
const MASTER_RECORD: &str = include_str!("../../../src/scripts/master_record.lua");
const RW_READ: &str = concat!(
    include_str!("../../../src/scripts/rw_common.lua"),
    include_str!("../../../src/scripts/rw_read.lua")
);
const RW_READ_EXTEND: &str = include_str!("../../../src/scripts/rw_read_extend.lua");
const RW_READ_RELEASE: &str = include_str!("../../../src/scripts/rw_read_release.lua");
const RW_WRITE: &str = concat!(
    include_str!("../../../src/scripts/rw_common.lua"),
    include_str!("../../../src/scripts/rw_write.lua")
);
const RW_LEAVE: &str = include_str!("../../../src/scripts/rw_leave.lua");
const RW_INSPECT: &str = include_str!("../../../src/scripts/rw_inspect.lua");

/// Every script, with a name for messages.
pub(crate) const ALL: &[(&str, &str)] = &[
    ("release", RELEASE),
    ("wait_register", WAIT_REGISTER),
    ("wait_pass_on", WAIT_PASS_ON),
    ("extend", EXTEND),
    ("inspect", INSPECT),
    ("fence_acquire", FENCE_ACQUIRE),
    ("fence_commit", FENCE_COMMIT),
    ("fence_repair", FENCE_REPAIR),
    ("fenced_read", FENCED_READ),
    ("fenced_write", FENCED_WRITE),
    ("multi_acquire", MULTI_ACQUIRE),
    ("multi_extend", MULTI_EXTEND),
    ("multi_release", MULTI_RELEASE),
    ("reentrant_acquire", REENTRANT_ACQUIRE),
    ("reentrant_extend", REENTRANT_EXTEND),
    ("reentrant_release", REENTRANT_RELEASE),
    ("fair_acquire", FAIR_ACQUIRE),
    ("fair_release", FAIR_RELEASE),
    ("fair_leave", FAIR_LEAVE),
    ("semaphore_acquire", SEMAPHORE_ACQUIRE),
    ("semaphore_extend", SEMAPHORE_EXTEND),
    ("master_record", MASTER_RECORD),
    ("rw_read", RW_READ),
    ("rw_read_extend", RW_READ_EXTEND),
    ("rw_read_release", RW_READ_RELEASE),
    ("rw_write", RW_WRITE),
    ("rw_leave", RW_LEAVE),
    ("rw_inspect", RW_INSPECT),
];

/// Runs scripts on both sides, alternating `EVAL` and `EVALSHA`.
struct Scripts<'a> {
    pair: &'a mut Pair,
    calls: usize,
}

impl Scripts<'_> {
    /// Runs `script` with `keys` and `args`, compares the replies, then the `touched` keys.
    fn call(&mut self, script: &str, keys: &[&str], args: &[&str], expect: Value, touched: &[&str]) {
        let numkeys = keys.len().to_string();
        let sha = quorlock_chaos::sim::master::sha1_hex(script.as_bytes());
        let head = if self.calls.is_multiple_of(2) {
            ["EVAL", script]
        } else {
            ["EVALSHA", sha.as_str()]
        };
        self.calls += 1;
        let mut all = vec![head[0], head[1], numkeys.as_str()];
        all.extend_from_slice(keys);
        all.extend_from_slice(args);
        let sim = self.pair.check(Cmp::Ttl, &all);
        if expect != Value::Nil {
            assert!(
                matches_expected(&expect, &sim),
                "script {} on {keys:?} {args:?}: expected {expect:?}, both said {sim:?}",
                name_of(script)
            );
        }
        self.pair.check_keys(touched);
    }

    fn setup(&mut self, commands: &[&[&str]]) {
        for args in commands {
            self.pair.check(Cmp::Ttl, args);
        }
    }
}

fn name_of(script: &str) -> &'static str {
    ALL.iter().find(|(_, s)| *s == script).map_or("?", |(n, _)| n)
}

/// `expect` matched, with `Value::Okay` standing for "any error" (the exact text is compared
/// with the real server's anyway).
fn matches_expected(expect: &Value, got: &Value) -> bool {
    match (expect, got) {
        (Value::Okay, Value::ServerError(_)) => true,
        _ => expect == got,
    }
}

fn int(i: i64) -> Value {
    Value::Int(i)
}

/// Any error reply.
fn an_error() -> Value {
    Value::Okay
}

/// The plain lock's release and extend, the inspection script, and the fencing scripts.
pub(crate) fn plain_and_fencing(pair: &mut Pair) {
    pair.check(Cmp::Exact, &["FLUSHALL"]);
    for (_, body) in ALL {
        pair.check(Cmp::Exact, &["SCRIPT", "LOAD", body]);
    }
    let mut s = Scripts { pair, calls: 0 };
    let lock = &["lock"][..];
    let queued = &["lock", "lock:quorlock:waiters"][..];

    // release: absent, ours, another's, wrong type, expired, no channel argument.
    s.call(RELEASE, queued, &["tok", "chan"], int(0), queued);
    s.setup(&[&["SET", "lock", "tok", "PX", "60000"]]);
    s.call(RELEASE, queued, &["other", "chan"], int(-1), queued);
    s.call(RELEASE, queued, &["tok", "chan"], int(1), queued);
    s.setup(&[&["SET", "lock", "tok", "PX", "60000"]]);
    s.call(RELEASE, queued, &["tok"], int(1), queued);
    s.setup(&[&["SET", "lock", "tok", "PX", "60000"]]);
    s.call(RELEASE, queued, &["tok", ""], int(1), queued);
    s.setup(&[&["HSETNX", "lock", "f", "v"]]);
    s.call(RELEASE, queued, &["tok", "chan"], an_error(), queued);
    s.setup(&[&["DEL", "lock"], &["SET", "lock", "tok", "PX", "1"]]);
    s.pair.let_short_ttls_pass();
    s.call(RELEASE, queued, &["tok", "chan"], int(0), queued);
    // The hand-off: queued processes nobody listens to are dropped from the head, then the release
    // is announced on the key's channel; a look registers, keeps the queue, drops a dead head ahead
    // and says how many are ahead; a pass-on does nothing while the key is held.
    let (a, b) = ("quorlock:wake:a", "quorlock:wake:b");
    s.setup(&[
        &["SET", "lock", "tok", "PX", "60000"],
        &["ZADD", "lock:quorlock:waiters", "10", a, "20", b],
    ]);
    s.call(RELEASE, queued, &["tok", "chan"], int(1), queued);
    s.call(WAIT_REGISTER, queued, &[b, "20", "120000"], Value::Nil, queued);
    s.setup(&[&["ZADD", "lock:quorlock:waiters", "5", a]]);
    s.call(WAIT_REGISTER, queued, &[b, "20", "120000"], Value::Nil, queued);
    s.setup(&[&["SET", "lock", "tok", "PX", "60000"]]);
    s.call(
        WAIT_REGISTER,
        &["lock", "lock:quorlock:waiters", "lock:readers"],
        &[b, "20", "120000"],
        Value::Nil,
        queued,
    );
    s.call(WAIT_PASS_ON, queued, &["tok", "chan"], int(0), queued);
    s.setup(&[&["DEL", "lock"]]);
    s.call(WAIT_PASS_ON, queued, &["tok", "chan"], int(0), queued);
    s.setup(&[&["DEL", "lock:quorlock:waiters"]]);

    // extend: absent, ours (new TTL), another's, wrong type, expired.
    s.call(EXTEND, lock, &["tok", "30000"], int(0), lock);
    s.setup(&[&["SET", "lock", "tok", "PX", "5000"]]);
    s.call(EXTEND, lock, &["tok", "30000"], int(1), lock);
    s.call(EXTEND, lock, &["other", "30000"], int(-1), lock);
    s.setup(&[&["DEL", "lock"], &["ZADD", "lock", "1", "m"]]);
    s.call(EXTEND, lock, &["tok", "30000"], an_error(), lock);
    s.setup(&[&["DEL", "lock"], &["SET", "lock", "tok", "PX", "2"]]);
    s.pair.let_short_ttls_pass();
    s.call(EXTEND, lock, &["tok", "30000"], int(0), lock);
    s.setup(&[&["SET", "lock", "tok", "PX", "5000"]]);
    s.call(EXTEND, lock, &["tok", "x"], an_error(), lock);

    // inspect: absent, a lock with TTL, a string without TTL, a hash, a sorted set.
    s.setup(&[&["DEL", "lock"]]);
    s.call(INSPECT, lock, &[], Value::Nil, lock);
    s.setup(&[&["SET", "lock", "tok", "PX", "40000"]]);
    s.call(INSPECT, lock, &[], Value::Nil, lock);
    s.setup(&[&["SET", "lock", "tok"]]);
    s.call(INSPECT, lock, &[], Value::Nil, lock);
    s.setup(&[&["DEL", "lock"], &["HSETNX", "lock", "o:a", "1"]]);
    s.call(INSPECT, lock, &[], Value::Nil, lock);
    s.setup(&[&["DEL", "lock"], &["ZADD", "lock", "1", "m"]]);
    s.call(INSPECT, lock, &[], Value::Nil, lock);

    // fence_acquire: counter missing (-2), below the floor (-3), epoch not vouched (-4), taken
    // (the counter after INCR), held by another (-1), counter not a number, counter a hash.
    let fa = &["lock", "fence:counter", "fence:epoch"][..];
    s.setup(&[&["DEL", "lock"]]);
    s.call(FENCE_ACQUIRE, fa, &["tok", "30000", "0", "run1"], int(-2), fa);
    s.setup(&[&["SET", "fence:counter", "5"]]);
    s.call(FENCE_ACQUIRE, fa, &["tok", "30000", "9", "run1"], int(-3), fa);
    s.call(FENCE_ACQUIRE, fa, &["tok", "30000", "5", "run1"], int(-4), fa);
    s.setup(&[&["SET", "fence:epoch", "run1"]]);
    s.call(FENCE_ACQUIRE, fa, &["tok", "30000", "5", "run1"], int(6), fa);
    s.call(FENCE_ACQUIRE, fa, &["tok2", "30000", "6", "run1"], int(-1), fa);
    s.setup(&[&["SET", "fence:counter", "abc"]]);
    s.call(FENCE_ACQUIRE, fa, &["tok", "30000", "0", "run1"], an_error(), fa);
    s.setup(&[&["DEL", "fence:counter"], &["HSETNX", "fence:counter", "f", "1"]]);
    s.call(FENCE_ACQUIRE, fa, &["tok", "30000", "0", "run1"], an_error(), fa);
    s.setup(&[&["DEL", "fence:counter", "lock"], &["SET", "fence:counter", "7"]]);
    s.call(FENCE_ACQUIRE, fa, &["tok", "30000", "x", "run1"], an_error(), fa);

    // fence_commit: ours and the counter lower (raised), ours and higher (kept), absent, another's.
    let fc = &["lock", "fence:counter"][..];
    s.setup(&[
        &["SET", "lock", "tok", "PX", "30000"],
        &["SET", "fence:counter", "7"],
    ]);
    s.call(FENCE_COMMIT, fc, &["tok", "12"], int(1), fc);
    s.call(FENCE_COMMIT, fc, &["tok", "3"], int(1), fc);
    s.call(FENCE_COMMIT, fc, &["other", "30"], int(-1), fc);
    s.setup(&[&["DEL", "fence:counter"]]);
    s.call(FENCE_COMMIT, fc, &["tok", "4"], int(1), fc);
    s.setup(&[&["DEL", "lock"]]);
    s.call(FENCE_COMMIT, fc, &["tok", "40"], int(0), fc);

    // fence_repair: no record for the server's run (-1), another run id (-1), the server's own
    // (counter created, raised, never lowered; the epoch is stamped with the run id, which differs
    // between the two servers); a record that says the run may lack writes makes a full repair
    // wait out the longer of its own grace and the record's since the run was first seen (-2).
    let fr = &["fence:counter", "fence:epoch", "master"][..];
    s.setup(&[&["DEL", "fence:counter", "fence:epoch", "master"]]);
    s.call(
        FENCE_REPAIR,
        fr,
        &["10", RUN_ID, "0"],
        int(-1),
        &["fence:counter"],
    );
    s.setup(&[&[
        "HSET", "master", "run_id", RUN_ID, "since", "0", "lost", "0", "durable", "1", "grace", "0", "hwm",
        "0",
    ]]);
    s.call(
        FENCE_REPAIR,
        fr,
        &["10", "0000000000000000000000000000000000000000", "0"],
        int(-1),
        &["fence:counter"],
    );
    s.call(
        FENCE_REPAIR,
        fr,
        &["10", RUN_ID, "0"],
        int(10),
        &["fence:counter"],
    );
    s.call(FENCE_REPAIR, fr, &["4", RUN_ID, "0"], int(10), &["fence:counter"]);
    s.call(
        FENCE_REPAIR,
        fr,
        &["25", RUN_ID, "0"],
        int(25),
        &["fence:counter"],
    );
    let (real, sim) = s.pair.both(&[b"GET", b"fence:epoch"]);
    let (real_id, sim_id) = s.pair.run_ids();
    assert_eq!(real, Value::BulkString(real_id.into_bytes()));
    assert_eq!(sim, Value::BulkString(sim_id.into_bytes()));
    s.call(
        FENCE_REPAIR,
        fr,
        &["x", RUN_ID, "0"],
        an_error(),
        &["fence:counter"],
    );
    // Lost, and first seen far in the future: no grace has passed.
    s.setup(&[&["HSET", "master", "lost", "1", "since", "99999999999999"]]);
    s.call(
        FENCE_REPAIR,
        fr,
        &["30", RUN_ID, "1000"],
        int(-2),
        &["fence:counter"],
    );
    // A light repair (no grace asked) goes through whatever the record says.
    s.call(
        FENCE_REPAIR,
        fr,
        &["30", RUN_ID, "0"],
        int(30),
        &["fence:counter"],
    );
    // First seen at the epoch: its own grace has passed, but not the record's, far longer.
    s.setup(&[&["HSET", "master", "since", "0", "grace", "99999999999999"]]);
    s.call(
        FENCE_REPAIR,
        fr,
        &["31", RUN_ID, "1000"],
        int(-2),
        &["fence:counter"],
    );
    s.setup(&[&["HSET", "master", "grace", "0"]]);
    s.call(
        FENCE_REPAIR,
        fr,
        &["31", RUN_ID, "1000"],
        int(31),
        &["fence:counter"],
    );

    // master_record: written when the record is the one read (none: ''), refused when it changed
    // since (0) or when the server's run is not the new record's (-1).
    s.setup(&[&["DEL", "master"]]);
    let fields = [RUN_ID, "5", "1", "0", "100", "7"];
    let mut args = vec![""];
    args.extend_from_slice(&fields);
    s.call(MASTER_RECORD, &["master"], &args, int(1), &[]);
    s.call(MASTER_RECORD, &["master"], &args, int(0), &[]);
    let mut args = vec!["", "0000000000000000000000000000000000000000"];
    args.extend_from_slice(&fields[1..]);
    s.setup(&[&["DEL", "master"]]);
    s.call(MASTER_RECORD, &["master"], &args, int(-1), &[]);
    s.setup(&[&["HMGET", "master", "since", "lost", "durable", "grace", "hwm"]]);

    // fenced_write / fenced_read: no fence yet, a higher token, a stale token, equal tokens,
    // absent data, data of the wrong type, a token that is not a number.
    let fs = &["data", "data:fence"][..];
    s.setup(&[&["DEL", "data", "data:fence"]]);
    s.call(FENCED_READ, fs, &["3"], Value::Nil, fs);
    s.call(FENCED_WRITE, fs, &["3", "v3"], Value::Nil, fs);
    s.call(FENCED_WRITE, fs, &["2", "v2"], Value::Nil, fs);
    s.call(FENCED_READ, fs, &["2"], Value::Nil, fs);
    s.call(FENCED_READ, fs, &["5"], Value::Nil, fs);
    s.call(FENCED_WRITE, fs, &["5", "v5"], Value::Nil, fs);
    s.call(FENCED_WRITE, fs, &["x", "vx"], an_error(), fs);
    s.setup(&[&["DEL", "data"], &["HSETNX", "data", "f", "v"]]);
    s.call(FENCED_READ, fs, &["9"], an_error(), fs);
}

/// The multi-resource, reentrant and fair locks' scripts.
pub(crate) fn multi_reentrant_fair(pair: &mut Pair) {
    pair.check(Cmp::Exact, &["FLUSHALL"]);
    for (_, body) in ALL {
        pair.check(Cmp::Exact, &["SCRIPT", "LOAD", body]);
    }
    let mut s = Scripts { pair, calls: 0 };

    // multi_acquire / multi_extend / multi_release over three keys.
    let ks = &["m:a", "m:b", "m:c"][..];
    s.call(MULTI_ACQUIRE, ks, &["tok", "30000"], Value::Array(vec![]), ks);
    s.call(MULTI_ACQUIRE, ks, &["other", "30000"], Value::Nil, ks);
    s.call(MULTI_EXTEND, ks, &["tok", "45000"], int(1), ks);
    s.call(MULTI_EXTEND, ks, &["other", "45000"], int(-1), ks);
    s.setup(&[&["DEL", "m:b"]]);
    s.call(MULTI_ACQUIRE, ks, &["other", "30000"], Value::Nil, ks);
    s.call(MULTI_EXTEND, ks, &["tok", "45000"], int(0), ks);
    s.call(MULTI_RELEASE, ks, &["tok", "release:"], int(0), ks);
    s.setup(&[
        &["SET", "m:a", "tok", "PX", "30000"],
        &["HSETNX", "m:c", "f", "v"],
    ]);
    s.call(MULTI_ACQUIRE, ks, &["tok", "30000"], Value::Nil, ks);
    s.call(MULTI_EXTEND, ks, &["tok", "45000"], int(-1), ks);
    s.call(MULTI_RELEASE, ks, &["tok", ""], int(-1), ks);
    s.setup(&[&["DEL", "m:a", "m:b", "m:c"]]);
    s.call(MULTI_ACQUIRE, ks, &["tok", "30000"], Value::Array(vec![]), ks);
    s.call(MULTI_RELEASE, ks, &["other", "release:"], int(-1), ks);
    s.call(MULTI_RELEASE, ks, &["tok", "release:"], int(1), ks);
    s.setup(&[&["SET", "m:a", "tok", "PX", "1"]]);
    s.pair.let_short_ttls_pass();
    s.call(MULTI_ACQUIRE, ks, &["tok", "30000"], Value::Array(vec![]), ks);
    s.call(MULTI_ACQUIRE, ks, &["tok", "x"], Value::Nil, ks);

    // reentrant_acquire / extend / release: one owner with two holds, a retried hold, another
    // owner, the TTL that only grows, a string key in the way.
    let r = &["re"][..];
    s.call(REENTRANT_ACQUIRE, r, &["o:a", "h:1", "30000"], int(1), r);
    s.call(REENTRANT_ACQUIRE, r, &["o:a", "h:2", "10000"], int(2), r);
    s.call(REENTRANT_ACQUIRE, r, &["o:a", "h:2", "10000"], int(2), r);
    s.call(REENTRANT_ACQUIRE, r, &["o:b", "h:3", "30000"], int(-1), r);
    s.call(REENTRANT_EXTEND, r, &["o:a", "h:1", "50000"], int(1), r);
    s.call(REENTRANT_EXTEND, r, &["o:a", "h:9", "50000"], int(0), r);
    s.call(REENTRANT_EXTEND, r, &["o:b", "h:3", "50000"], int(-1), r);
    s.call(REENTRANT_RELEASE, r, &["o:b", "h:3", "chan"], int(-1), r);
    s.call(REENTRANT_RELEASE, r, &["o:a", "h:2", "chan"], int(1), r);
    s.call(REENTRANT_RELEASE, r, &["o:a", "h:2", "chan"], int(0), r);
    s.call(REENTRANT_RELEASE, r, &["o:a", "h:1", "chan"], int(1), r);
    s.call(REENTRANT_RELEASE, r, &["o:a", "h:1", "chan"], int(0), r);
    s.call(REENTRANT_EXTEND, r, &["o:a", "h:1", "50000"], int(0), r);
    s.call(REENTRANT_ACQUIRE, r, &["o:a", "h:4", "1"], int(1), r);
    s.pair.let_short_ttls_pass();
    s.call(REENTRANT_ACQUIRE, r, &["o:b", "h:5", "30000"], int(1), r);
    s.call(REENTRANT_RELEASE, r, &["o:b", "h:5", ""], int(1), r);
    s.setup(&[&["SET", "re", "plain"]]);
    s.call(REENTRANT_ACQUIRE, r, &["o:a", "h:6", "30000"], an_error(), r);
    s.call(REENTRANT_EXTEND, r, &["o:a", "h:6", "30000"], an_error(), r);
    s.call(REENTRANT_RELEASE, r, &["o:a", "h:6", "chan"], an_error(), r);
    s.setup(&[&["DEL", "re"]]);
    s.call(REENTRANT_ACQUIRE, r, &["o:a", "h:7", "x"], an_error(), r);

    // The fair lock: lock, queue (ticket times), heartbeat deadlines (this master's clock).
    let f = &["fair", "fair:q", "fair:hb"][..];
    // The heartbeat set's scores are the master's clock: compare it without scores.
    let touched = &["fair", "fair:q", "fair:hb"][..];
    // An empty queue: the first caller takes the lock.
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t1", "1000", "30000", "5000", "tok1"],
        int(1),
        touched,
    );
    // Held: later callers queue behind it.
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t2", "1001", "30000", "5000", "tok2"],
        int(-1),
        touched,
    );
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t3", "1002", "30000", "5000", "tok3"],
        int(-1),
        touched,
    );
    s.pair
        .check(Cmp::Exact, &["ZRANGE", "fair:q", "0", "-1", "WITHSCORES"]);
    // The holder again (its token): still its lock.
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t1", "1000", "30000", "5000", "tok1"],
        int(1),
        touched,
    );
    // Release by another token, then by the holder, which tells the next live waiter (t2).
    s.call(FAIR_RELEASE, f, &["tok2", "fair:chan", "t2"], int(-1), touched);
    s.call(FAIR_RELEASE, f, &["tok1", "fair:chan", "t1"], int(1), touched);
    s.call(FAIR_RELEASE, f, &["tok1", "fair:chan", "t1"], int(0), touched);
    // t3 is not at the head: it waits; t2 is: it takes the lock.
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t3", "1002", "30000", "5000", "tok3"],
        int(0),
        touched,
    );
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t2", "1001", "30000", "5000", "tok2"],
        int(1),
        touched,
    );
    s.call(FAIR_RELEASE, f, &["tok2", "", "t2"], int(1), touched);
    // A waiter whose heartbeat lapsed is purged: t4 (earlier ticket) goes stale, t3 takes over.
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t4", "900", "30000", "1", "tok4"],
        int(1),
        touched,
    );
    s.call(FAIR_RELEASE, f, &["tok4", "fair:chan", "t4"], int(1), touched);
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t5", "800", "30000", "1", "tok5"],
        int(1),
        touched,
    );
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t6", "700", "30000", "1", "tok6"],
        int(-1),
        touched,
    );
    s.call(FAIR_RELEASE, f, &["tok5", "fair:chan", "t5"], int(1), touched);
    s.pair.let_short_ttls_pass();
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t3", "1002", "30000", "5000", "tok3"],
        int(1),
        touched,
    );
    // A queued ticket without a heartbeat entry is no live waiter, and is dropped.
    s.setup(&[&["ZADD", "fair:q", "1", "ghost"]]);
    s.call(FAIR_RELEASE, f, &["tok3", "fair:chan", "t3"], int(1), touched);
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t7", "1003", "30000", "5000", "tok7"],
        int(1),
        touched,
    );
    // Leave: a queued ticket (announcing the next waiter when the lock is free), an absent one.
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t8", "1004", "30000", "5000", "tok8"],
        int(-1),
        touched,
    );
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t9", "1005", "30000", "5000", "tok9"],
        int(-1),
        touched,
    );
    s.call(FAIR_LEAVE, f, &["t8", "fair:chan"], int(1), touched);
    s.call(FAIR_LEAVE, f, &["t8", "fair:chan"], int(0), touched);
    s.call(FAIR_RELEASE, f, &["tok7", "", "t7"], int(1), touched);
    // The lock is free again, but t9 is ahead of t10.
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t10", "1006", "30000", "5000", "tok10"],
        int(0),
        touched,
    );
    s.setup(&[
        &["ZADD", "fair:q", "1004", "t8"],
        &["ZADD", "fair:hb", "99999999999999", "t8"],
    ]);
    s.call(FAIR_LEAVE, f, &["t9", "fair:chan"], int(1), touched);
    s.call(FAIR_LEAVE, f, &["t10", ""], int(1), touched);
    // The wrong type in the lock's place, and in the queue's.
    s.setup(&[
        &["DEL", "fair", "fair:q", "fair:hb"],
        &["HSETNX", "fair", "f", "v"],
    ]);
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t1", "1000", "30000", "5000", "tok1"],
        an_error(),
        touched,
    );
    s.call(FAIR_RELEASE, f, &["tok1", "fair:chan", "t1"], an_error(), touched);
    s.setup(&[&["DEL", "fair", "fair:q", "fair:hb"], &["SET", "fair:q", "x"]]);
    s.call(
        FAIR_ACQUIRE,
        f,
        &["t1", "1000", "30000", "5000", "tok1"],
        an_error(),
        touched,
    );
    s.call(FAIR_LEAVE, f, &["t1", "fair:chan"], an_error(), touched);
}

/// The semaphore's acquire and the read-write lock's scripts (which use `ZCOUNT` and
/// `ZREMRANGEBYSCORE`): readers together, a writer waiting behind them and keeping new readers
/// out, leaving, the writer alone, and expired readers swept.
pub(crate) fn semaphore_and_rwlock(pair: &mut Pair) {
    pair.check(Cmp::Exact, &["FLUSHALL"]);
    for (_, body) in ALL {
        pair.check(Cmp::Exact, &["SCRIPT", "LOAD", body]);
    }
    let mut s = Scripts { pair, calls: 0 };

    // Two slots: the one aimed at, else the first free one named, else -2.
    // The permits key after the slots: set by a grant, refusing another number of permits
    // ({-3, n}), kept alive at least as long as a slot by an extend.
    let slots = &["sem:0", "sem:1", "sem:permits"][..];
    s.call(
        SEMAPHORE_ACQUIRE,
        slots,
        &["t1", "30000", "0", "2"],
        int(-1),
        slots,
    );
    s.call(
        SEMAPHORE_ACQUIRE,
        slots,
        &["t2", "30000", "0", "2"],
        int(1),
        slots,
    );
    s.call(
        SEMAPHORE_ACQUIRE,
        slots,
        &["t2", "30000", "1", "2"],
        int(-1),
        slots,
    );
    s.call(
        SEMAPHORE_ACQUIRE,
        slots,
        &["t3", "30000", "1", "2"],
        int(-2),
        slots,
    );
    s.call(
        SEMAPHORE_ACQUIRE,
        slots,
        &["t4", "30000", "1", "5"],
        Value::Array(vec![int(-3), int(2)]),
        slots,
    );
    s.setup(&[&["DEL", "sem:0"]]);
    s.call(
        SEMAPHORE_ACQUIRE,
        slots,
        &["t3", "30000", "1", "2"],
        int(0),
        slots,
    );
    let permit = &["sem:1", "sem:permits"][..];
    s.call(SEMAPHORE_EXTEND, permit, &["t2", "60000", "2"], int(1), permit);
    s.call(SEMAPHORE_EXTEND, permit, &["t9", "60000", "2"], int(-1), permit);
    s.setup(&[&["DEL", "sem:permits"]]);
    s.call(SEMAPHORE_EXTEND, permit, &["t2", "60000", "2"], int(1), permit);
    s.setup(&[&["DEL", "sem:1"]]);
    s.call(SEMAPHORE_EXTEND, permit, &["t2", "60000", "2"], int(0), permit);

    let rw = &["rw:w", "rw:r", "rw:q"][..];
    let seen = &["rw:r", "rw:q"][..];
    s.call(RW_READ, rw, &["r1", "30000"], int(1), rw);
    s.call(RW_READ, rw, &["r2", "30000"], int(1), rw);
    s.call(RW_INSPECT, seen, &[], Value::Nil, seen);
    s.call(RW_WRITE, rw, &["w1", "30000", "q1", "5000"], int(-2), rw);
    s.call(RW_READ, rw, &["r3", "30000"], int(-3), rw);
    s.call(RW_INSPECT, seen, &[], Value::Nil, seen);
    s.call(RW_LEAVE, &["rw:q"], &["q1", "rw:chan"], int(1), &["rw:q"]);
    s.call(RW_LEAVE, &["rw:q"], &["q1", "rw:chan"], int(0), &["rw:q"]);
    s.call(RW_READ_EXTEND, &["rw:r"], &["r1", "40000"], int(1), &["rw:r"]);
    s.call(RW_READ_EXTEND, &["rw:r"], &["zz", "40000"], int(0), &["rw:r"]);
    s.call(RW_READ_RELEASE, &["rw:r"], &["r1", "rw:chan"], int(1), &["rw:r"]);
    s.call(RW_READ_RELEASE, &["rw:r"], &["r1", "rw:chan"], int(0), &["rw:r"]);
    s.call(RW_READ_RELEASE, &["rw:r"], &["r2", "rw:chan"], int(1), &["rw:r"]);
    s.call(RW_WRITE, rw, &["w1", "30000", "q1", "5000"], int(1), rw);
    s.call(RW_READ, rw, &["r4", "30000"], int(-1), rw);
    s.call(RW_WRITE, rw, &["w2", "30000", "q2", "5000"], int(-1), rw);
    s.setup(&[&["DEL", "rw:w"]]);
    // A reader whose entry has expired holds nothing: the writer sweeps it and takes the lock.
    s.call(RW_READ, rw, &["r5", "1"], int(1), rw);
    s.pair.let_short_ttls_pass();
    s.call(RW_READ_EXTEND, &["rw:r"], &["r5", "40000"], int(0), &["rw:r"]);
    s.call(RW_READ, rw, &["r6", "1"], int(1), rw);
    s.pair.let_short_ttls_pass();
    s.call(RW_WRITE, rw, &["w3", "30000", "q3", "5000"], int(1), rw);
    s.call(RW_INSPECT, seen, &[], Value::Nil, seen);
}
