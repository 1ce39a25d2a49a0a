//! Measures how fast one simulated master runs quorlock's hot path: `SET key token NX PX ttl`
//! followed by the release script by SHA1 (`EVALSHA`), the cycle of every plain lock acquisition.
//! The simulation needs about a million of these per wall-clock minute on one core.
//!
//! Run with `cargo run --release -p quorlock-chaos --example sim_master_rate [cycles]`.

use std::io::Write as _;
use std::time::Instant;

use quorlock_chaos::sim::master::{sha1_hex, Flavor, MasterConfig, Persistence, SimMaster};
use redis::Value;

const RELEASE: &str = concat!(
    include_str!("../../src/scripts/token_common.lua"),
    include_str!("../../src/scripts/handoff_common.lua"),
    include_str!("../../src/scripts/release.lua")
);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cycles: u64 = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 1_000_000,
    };
    let mut master = SimMaster::new(MasterConfig::new(Flavor::Redis70, Persistence::AofAlways, 1), 0)?;
    let sha = sha1_hex(RELEASE.as_bytes());
    let loaded = master.execute(0, &[b"SCRIPT", b"LOAD", RELEASE.as_bytes()]);
    if loaded.value != Value::BulkString(sha.clone().into_bytes()) {
        return Err(format!("SCRIPT LOAD answered {:?}", loaded.value).into());
    }
    for (label, channel) in [
        ("without a release channel", &b""[..]),
        ("with a release channel", b"quorlock:release:res-3"),
    ] {
        let start = Instant::now();
        let mut token = Vec::with_capacity(32);
        for i in 0..cycles {
            let now = 1_700_000_000_000 + i / 10;
            let key: &[u8] = match i % 4 {
                0 => b"quorlock:res-0",
                1 => b"quorlock:res-1",
                2 => b"quorlock:res-2",
                _ => b"quorlock:res-3",
            };
            token.clear();
            write!(token, "tok-{i:016x}")?;
            let set = master.execute(now, &[b"SET", key, &token, b"NX", b"PX", b"30000"]);
            let queue = [key, b":quorlock:waiters"].concat();
            let release = master.execute(
                now,
                &[b"EVALSHA", sha.as_bytes(), b"2", key, &queue, &token, channel],
            );
            if set.value != Value::Okay || release.value != Value::Int(1) {
                return Err(format!("cycle {i}: SET {:?}, release {:?}", set.value, release.value).into());
            }
        }
        let elapsed = start.elapsed();
        let rate = cycles as f64 / elapsed.as_secs_f64();
        println!(
            "{cycles} cycles {label}: {:.2} s, {:.2} us per cycle, {:.0} cycles/s, {:.1} M per minute",
            elapsed.as_secs_f64(),
            elapsed.as_secs_f64() * 1e6 / cycles as f64,
            rate,
            rate * 60.0 / 1e6
        );
    }
    Ok(())
}
