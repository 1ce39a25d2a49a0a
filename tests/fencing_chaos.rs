//! Chaos scenarios for fencing and the enforced restart grace, each with its negative control,
//! judged by the harness's checker (lost updates on a read-modify-write witness, overlapping holds,
//! duplicate fencing tokens).
//!
//! - **client pause past validity**: clients loop acquire / read / hold / write / release on one
//!   resource, and one client (chosen by the seed) stalls between its read and its write for twice
//!   the TTL, as in a GC pause. With fencing, the witness is a `FencedStore` and the stale write is
//!   rejected: 0 lost updates. Without fencing, the late write overwrites newer increments.
//! - **restart a minority with data wiped, immediately**: a holder gets a bare majority (the rest
//!   are down), the down masters come back empty at once, then one of the holder's masters restarts
//!   empty too. With the restart grace enforced, nobody else is granted the lock while the holder's
//!   validity lasts; with it off, a second holder appears — the overlap the RedLock spec predicts.
//!
//! Seeds are printed; set `QUORLOCK_CHAOS_SEED` to replay one.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::builder;
use quorlock::{FencedStore, Quorlock};
use quorlock_chaos::checker::{duplicate_fencing_tokens, lost_updates, overlaps};
use quorlock_chaos::{Cluster, ClusterOptions, DataMode, LockRecord, RunClock};
use redis::AsyncCommands;

const RESOURCE: &str = "account";
const WITNESS: &str = "witness:account";

/// The scenarios' seed: fixed, so that every run makes the same choices (`QUORLOCK_CHAOS_SEED`
/// tries another).
fn seed() -> u64 {
    std::env::var("QUORLOCK_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_261_201)
}

/// SplitMix64: seeded choices that do not depend on a crate's version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

#[derive(Debug, Default)]
struct Outcome {
    increments: u64,
    stale_rejected: u64,
    records: Vec<LockRecord>,
}

/// How one client of the pause scenario behaves.
#[derive(Debug, Clone, Copy)]
struct Plan {
    fenced: bool,
    /// The iteration at which this client stalls past its validity, if it does.
    stall_at: Option<u32>,
    ttl: Duration,
    clock: RunClock,
    until: Instant,
    /// Set by the stalling client once its late write went out: the others go on until then (a
    /// plain lock is not fair, and the stalling client may get its turn only late), so someone
    /// takes the lock while it stalls.
    stalled: &'static AtomicBool,
}

/// One client's loop: acquire, read the witness, hold, maybe stall past the validity, write,
/// release. Returns what it did.
async fn client_loop(
    id: usize,
    locks: Quorlock,
    witness: redis::aio::MultiplexedConnection,
    plan: Plan,
) -> Outcome {
    let Plan {
        fenced,
        stall_at,
        ttl,
        clock,
        until,
        stalled,
    } = plan;
    let store = FencedStore::new(witness.clone());
    let witness_probe = witness.clone();
    let mut plain = witness;
    let mut out = Outcome::default();
    let mut iteration = 0u32;
    // A hard stop well past the stall, should the stalling client never get its turn.
    let cap = until + ttl * 20;
    let going = || {
        let now = Instant::now();
        now < cap && (now < until || (stall_at.is_none() && !stalled.load(Ordering::SeqCst)))
    };
    while going() {
        iteration += 1;
        let mut record = LockRecord::invoked(id, RESOURCE, clock.now());
        let acquired = if fenced {
            locks.lock(RESOURCE, ttl).fenced().acquire().await
        } else {
            locks.acquire(RESOURCE, ttl).await
        };
        let guard = match acquired {
            Ok(g) => g,
            Err(e) => {
                record.error = Some(e.to_string());
                out.records.push(record);
                continue;
            }
        };
        record.acquired = Some(clock.now());
        record.validity_end = Some(clock.offset(guard.valid_until().into_std()));
        record.token = guard.token().to_owned();
        record.fencing = guard.fencing_token();
        let token = guard.fencing_token().unwrap_or(0);
        let value: Option<u64> = if fenced {
            match store.read(WITNESS, token).await {
                Ok(v) => v,
                Err(e) if e.is_stale() => {
                    out.stale_rejected += 1;
                    None
                }
                Err(e) => panic!("witness read: {e}"),
            }
        } else {
            plain.get(WITNESS).await.expect("witness GET")
        };
        tokio::time::sleep(Duration::from_millis(10)).await;
        let stalling = stall_at == Some(iteration);
        if stalling {
            // The holder stops here for twice the TTL, still believing it holds the lock, and then
            // for as long as it takes another holder to write (at most ten TTLs): its late write
            // below then always meets a newer one, whatever the machine's load.
            tokio::time::sleep(ttl * 2).await;
            let read = value;
            let mut probe = witness_probe.clone();
            let began = Instant::now();
            while began.elapsed() < ttl * 10 {
                let now: Option<u64> = probe.get(WITNESS).await.unwrap_or(read);
                if now != read {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
        let next = value.unwrap_or(0) + 1;
        if fenced {
            match store.write(WITNESS, token, next).await {
                Ok(()) => out.increments += 1,
                Err(e) if e.is_stale() => out.stale_rejected += 1,
                Err(e) => panic!("witness write: {e}"),
            }
        } else {
            let _: () = plain.set(WITNESS, next).await.expect("witness SET");
            out.increments += 1;
        }
        if stalling {
            stalled.store(true, Ordering::SeqCst);
        }
        record.released = Some(clock.now());
        let _ = guard.release().await;
        out.records.push(record);
        // Some work between critical sections, as real clients have: a plain lock is not fair,
        // and clients that take it again the instant they release it can starve a waiter whose
        // turn only comes through the release announcement.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    out
}

/// Runs "client pause past validity" and returns (increments, witness value, stale writes
/// rejected, records).
async fn client_pause(fenced: bool, seed: u64) -> (u64, u64, u64, Vec<LockRecord>) {
    let mut rng = Rng(seed);
    let masters = Cluster::start(5).await.expect("start masters");
    let witness = Cluster::start(1).await.expect("start witness");
    let ttl = Duration::from_millis(600);
    let clients = 3;
    let staller = rng.below(clients as u64) as usize;
    let stall_at = 1 + rng.below(2) as u32;
    let clock = RunClock::new();
    let until = Instant::now() + Duration::from_secs(3);
    let stalled: &'static AtomicBool = Box::leak(Box::new(AtomicBool::new(false)));
    let mut tasks = Vec::new();
    for id in 0..clients {
        let locks = builder(&masters)
            .wait(Duration::from_secs(5))
            .build()
            .await
            .expect("build");
        let conn = witness.client(0).await.expect("witness connection");
        let stall = (id == staller).then_some(stall_at);
        let plan = Plan {
            fenced,
            stall_at: stall,
            ttl,
            clock,
            until,
            stalled,
        };
        tasks.push(tokio::spawn(client_loop(id, locks, conn, plan)));
    }
    let (mut increments, mut rejected, mut records) = (0, 0, Vec::new());
    for task in tasks {
        let out = task.await.expect("client task");
        increments += out.increments;
        rejected += out.stale_rejected;
        records.extend(out.records);
    }
    let mut conn = witness.client(0).await.expect("witness connection");
    let actual: Option<u64> = conn.get(WITNESS).await.expect("GET");
    eprintln!(
        "client-pause fenced={fenced} seed={seed}: client {staller} stalls at iteration {stall_at}; \
         {increments} increments, witness {}, {rejected} stale operations rejected, {} acquisitions",
        actual.unwrap_or(0),
        records.iter().filter(|r| r.acquired.is_some()).count()
    );
    (increments, actual.unwrap_or(0), rejected, records)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_pause_past_validity_with_fencing_loses_no_update() {
    let seed = seed();
    let (increments, actual, rejected, records) = client_pause(true, seed).await;
    let verdict = lost_updates(increments, actual);
    assert_eq!(verdict.lost, 0, "seed {seed}: {verdict:?}");
    assert_eq!(verdict.unaccounted, 0, "seed {seed}: {verdict:?}");
    assert!(
        rejected >= 1,
        "seed {seed}: the paused holder's stale write was not rejected"
    );
    assert!(increments >= 3, "seed {seed}: too little progress ({increments})");
    assert!(duplicate_fencing_tokens(&records).is_empty(), "seed {seed}");
    // Tokens strictly increase in the order the locks were granted.
    let mut granted: Vec<&LockRecord> = records.iter().filter(|r| r.acquired.is_some()).collect();
    granted.sort_by_key(|r| r.acquired);
    for pair in granted.windows(2) {
        assert!(
            pair[0].fencing < pair[1].fencing,
            "seed {seed}: tokens went backwards: {:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
}

/// The negative control: the same pause without fencing loses updates.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_pause_past_validity_without_fencing_loses_updates() {
    let seed = seed();
    let (increments, actual, _, records) = client_pause(false, seed).await;
    let verdict = lost_updates(increments, actual);
    assert!(
        verdict.lost >= 1,
        "seed {seed}: the paused holder's late write should overwrite newer increments: {verdict:?}"
    );
    // The late write came from a hold that overlapped others once its validity had ended.
    assert!(records.iter().any(|r| r.released > r.validity_end), "seed {seed}");
}

/// Runs "restart a minority with data wiped, immediately" and returns the overlapping holds.
async fn restart_wiped(enforce: bool, seed: u64) -> Vec<quorlock_chaos::checker::Overlap> {
    let mut rng = Rng(seed);
    let mut c = Cluster::start_with(ClusterOptions {
        masters: 5,
        appendfsync_always: false,
        ..ClusterOptions::default()
    })
    .await
    .expect("start masters");
    let ttl = Duration::from_secs(3);
    let build = || {
        builder(&c)
            .restart_grace(ttl + Duration::from_millis(100))
            .enforce_restart_grace(enforce)
            .wait(Duration::from_secs(2))
            .build()
    };
    let a = build().await.expect("build");
    let b = build().await.expect("build");
    // Fresh masters without AOF are in their grace at first.
    let started = Instant::now();
    loop {
        match a.try_acquire("warmup", ttl).await {
            Ok(g) => {
                g.release().await.expect("release");
                break;
            }
            Err(e) => assert!(
                started.elapsed() < Duration::from_secs(10),
                "never warmed up: {e}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The minority {x, y} is down while A acquires: A holds a bare majority.
    let x = rng.below(5) as usize;
    let y = (x + 1 + rng.below(4) as usize) % 5;
    let holder: Vec<usize> = (0..5).filter(|i| *i != x && *i != y).collect();
    let z = holder[rng.below(3) as usize];
    eprintln!("restart-minority-wipe-immediate enforce={enforce} seed={seed}: down {x},{y}; then {z} wiped");
    c.kill(x).expect("kill");
    c.kill(y).expect("kill");
    let clock = RunClock::new();
    let mut first = LockRecord::invoked(0, RESOURCE, clock.now());
    let guard_a = a
        .acquire(RESOURCE, ttl)
        .await
        .expect("A acquires on the three live masters");
    first.acquired = Some(clock.now());
    first.validity_end = Some(clock.offset(guard_a.valid_until().into_std()));
    first.token = guard_a.token().to_owned();
    // Immediately: the two come back empty, and one of A's masters restarts empty.
    c.restart(x, DataMode::Wipe).await.expect("restart");
    c.restart(y, DataMode::Wipe).await.expect("restart");
    c.restart(z, DataMode::Wipe).await.expect("restart");
    let mut records = vec![first];
    while !guard_a.is_lost() {
        let mut record = LockRecord::invoked(1, RESOURCE, clock.now());
        match b.try_acquire(RESOURCE, ttl).await {
            Ok(g) => {
                record.acquired = Some(clock.now());
                record.validity_end = Some(clock.offset(g.valid_until().into_std()));
                record.token = g.token().to_owned();
                records.push(record);
                // Keep the second hold: the overlap is the evidence.
                std::mem::forget(g);
                break;
            }
            Err(e) => {
                record.error = Some(e.to_string());
                records.push(record);
            }
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    drop(guard_a);
    let found = overlaps(&records);
    eprintln!(
        "restart-minority-wipe-immediate enforce={enforce} seed={seed}: {} attempts by B, {} overlaps",
        records.len() - 1,
        found.len()
    );
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_minority_wiped_immediately_is_safe_with_the_grace_enforced() {
    let seed = seed();
    let found = restart_wiped(true, seed).await;
    assert!(found.is_empty(), "seed {seed}: {found:?}");
}

/// The negative control: with the check off, the spec's violation shows up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_minority_wiped_immediately_violates_exclusion_without_the_grace() {
    let seed = seed();
    let found = restart_wiped(false, seed).await;
    assert_eq!(found.len(), 1, "seed {seed}: expected the predicted overlap");
    assert!(found[0].overlap > Duration::ZERO);
}
