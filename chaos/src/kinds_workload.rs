//! Workloads for the counting semaphore and the read-write lock: clients loop acquire / hold /
//! release and record every hold, for the checker's rules "at most P holders of a semaphore"
//! ([`crate::checker::too_many_holders`]) and "no reader overlaps a writer"
//! ([`crate::checker::reader_writer_overlaps`]).
//!
//! Client `c` talks to the masters at `group_urls[c % groups]`, so a proxy group per client can
//! cut each one off from different masters. [`KindsMode::MajorityCounting`] is the negative
//! control: it counts permits per master and accepts a simple majority, the design the issue
//! shows unsafe, implemented here in a few lines so that the checker can be seen to catch it.
//!
//! Every key the clients write starts with [`KindsOptions::key_prefix`], so the leak scan after a
//! run finds slot keys, read-write keys and the control's counting keys alike. A stall requested
//! through [`ClientPauses`] lands inside the hold, as it does in the lock workload.

use std::time::{Duration, Instant};

use quorlock::Quorlock;
use redis::aio::MultiplexedConnection;

use crate::error::HarnessError;
use crate::faults::ClientPauses;
use crate::history::{History, LockRecord};
use crate::opening::{self, Opening};
use crate::server::connect;

/// What the clients take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindsMode {
    /// A permit of quorlock's semaphore of this many permits.
    Semaphore(u32),
    /// quorlock's read-write lock: every `n`-th acquire of a client is a write, the rest reads.
    ReadWrite(usize),
    /// Unsafe control: a semaphore of this many permits counted per master, held on a simple
    /// majority.
    MajorityCounting(u32),
}

/// How the clients behave.
#[derive(Debug, Clone)]
pub struct KindsOptions {
    /// Number of concurrent clients.
    pub clients: usize,
    /// The resource they all take.
    pub resource: String,
    /// TTL of every hold.
    pub ttl: Duration,
    /// Shortest and longest hold.
    pub hold: (Duration, Duration),
    /// Per-master command timeout.
    pub node_timeout: Duration,
    /// Seed of the clients' random choices.
    pub seed: u64,
    /// What they take.
    pub mode: KindsMode,
    /// Prefix of every key the clients write (so leaks can be found by pattern).
    pub key_prefix: String,
    /// An opening round played in turns before the clients run freely (a negative control's
    /// construction, and its safe twin's); `None` for none.
    pub opening: Option<Opening>,
}

/// Where holds are recorded: every hold in `holds`, except the reads of a read-write lock, which
/// go to `reads`.
#[derive(Debug, Clone)]
pub struct KindsHistory {
    /// Permits, writes and counted permits.
    pub holds: History,
    /// Reads.
    pub reads: History,
}

/// Runs the clients until `until` on the holds' clock; returns the number of holds taken.
pub async fn run(
    opts: &KindsOptions,
    group_urls: &[Vec<String>],
    history: &KindsHistory,
    until: Duration,
) -> Result<u64, HarnessError> {
    run_with_pauses(opts, group_urls, history, &ClientPauses::new(), until).await
}

/// As [`run`], with client `c` stalling inside its next hold for as long as `pauses` asks.
pub async fn run_with_pauses(
    opts: &KindsOptions,
    group_urls: &[Vec<String>],
    history: &KindsHistory,
    pauses: &ClientPauses,
    until: Duration,
) -> Result<u64, HarnessError> {
    if group_urls.is_empty() || opts.clients == 0 {
        return Err(HarnessError::InvalidOptions(format!(
            "a kinds workload needs clients and masters; got {} clients and {} groups",
            opts.clients,
            group_urls.len()
        )));
    }
    let mut tasks = Vec::with_capacity(opts.clients);
    for id in 0..opts.clients {
        let urls = group_urls[id % group_urls.len()].clone();
        let taker = match opts.mode {
            KindsMode::MajorityCounting(_) => {
                let mut masters = Vec::with_capacity(urls.len());
                for url in &urls {
                    masters.push(connect(url, opts.node_timeout).await.ok());
                }
                Taker::Counting(masters)
            }
            _ => Taker::Quorlock(
                Quorlock::builder()
                    .nodes(urls)
                    .node_timeout(opts.node_timeout)
                    .connect_timeout(opts.node_timeout)
                    .wait(opts.ttl)
                    .key_prefix(opts.key_prefix.clone())
                    .build()
                    .await
                    .map_err(|e| HarnessError::Workload(format!("building client {id}: {e}")))?,
            ),
        };
        let client = KindsClient {
            id,
            taker,
            opts: opts.clone(),
            history: history.clone(),
            pauses: pauses.clone(),
            rng: opts.seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
        };
        tasks.push(tokio::spawn(client.run(until)));
    }
    let mut total = 0;
    for task in tasks {
        total += task
            .await
            .map_err(|e| HarnessError::Workload(format!("a client task failed: {e}")))?;
    }
    Ok(total)
}

/// Ends a turn of the opening round: the next player may go; one that holds keeps its hold
/// until every player has had its turn.
async fn end_turn(turn: Option<&Opening>, held: bool) {
    let Some(opening) = turn else { return };
    opening.pass().await;
    if held {
        opening.over().await;
    }
}

enum Taker {
    Quorlock(Quorlock),
    /// One connection per master (`None`: it could not be reached at the start).
    Counting(Vec<Option<MultiplexedConnection>>),
}

struct KindsClient {
    id: usize,
    taker: Taker,
    opts: KindsOptions,
    history: KindsHistory,
    pauses: ClientPauses,
    rng: u64,
}

/// The unsafe control's take, per master: count the holders, add us if fewer than the permits.
const COUNT_IN: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
  return 1
end
return 0
";

impl KindsClient {
    async fn run(mut self, until: Duration) -> u64 {
        let clock = self.history.holds.clock();
        let mut taken = 0u64;
        let mut round = 0usize;
        // In an opening round, the players take their turns first and everyone else waits.
        let mut turn = self.opts.opening.clone().filter(|o| o.plays(self.id));
        if let Some(opening) = &turn {
            opening.my_turn(self.id).await;
        } else if let Some(opening) = &self.opts.opening {
            opening.over().await;
        }
        while clock.now() < until || turn.is_some() {
            round += 1;
            let turn = turn.take();
            let mut record = LockRecord::invoked(self.id, &self.opts.resource, clock.now());
            let write = matches!(self.opts.mode, KindsMode::ReadWrite(n) if round.is_multiple_of(n.max(1)));
            let hold = self.between(self.opts.hold.0, self.opts.hold.1);
            let nonce = self.next();
            let held = match &self.taker {
                Taker::Quorlock(locks) => {
                    let resource = self.opts.resource.as_str();
                    let ttl = self.ttl(turn.is_some());
                    let acquired = match (self.opts.mode, &turn) {
                        // A turn of the opening round takes what is free now, without waiting.
                        (KindsMode::Semaphore(p) | KindsMode::MajorityCounting(p), Some(_)) => {
                            locks.semaphore(resource, p, ttl).try_acquire().await
                        }
                        (KindsMode::Semaphore(p) | KindsMode::MajorityCounting(p), None) => {
                            locks.acquire_permit(resource, p, ttl).await
                        }
                        (KindsMode::ReadWrite(_), Some(_)) => {
                            let lock = locks.lock(resource, ttl);
                            if write { lock.write() } else { lock.read() }.try_acquire().await
                        }
                        (KindsMode::ReadWrite(_), None) if write => locks.acquire_write(resource, ttl).await,
                        (KindsMode::ReadWrite(_), None) => locks.acquire_read(resource, ttl).await,
                    };
                    match acquired {
                        Ok(guard) => {
                            record.acquired = Some(clock.now());
                            record.validity_end = Some(clock.offset(guard.valid_until().into_std()));
                            record.token = guard.token().to_owned();
                            end_turn(turn.as_ref(), true).await;
                            tokio::time::sleep(hold).await;
                            self.stall().await;
                            record.released = Some(clock.now());
                            if let Err(e) = guard.release().await {
                                record.error = Some(format!("release: {e}"));
                            }
                            true
                        }
                        Err(e) => {
                            record.error = Some(e.to_string());
                            end_turn(turn.as_ref(), false).await;
                            false
                        }
                    }
                }
                Taker::Counting(_) => self.counted(&mut record, hold, nonce, turn.as_ref()).await,
            };
            taken += u64::from(held);
            let history = if matches!(self.opts.mode, KindsMode::ReadWrite(_)) && !write {
                &self.history.reads
            } else {
                &self.history.holds
            };
            history.push(record);
            if !held {
                let pause = self.between(Duration::ZERO, self.opts.ttl / 20);
                tokio::time::sleep(pause).await;
            }
        }
        taken
    }

    /// The unsafe control: one counted permit on a simple majority, held for `hold` (after the
    /// opening round, if this is a turn of it).
    async fn counted(
        &self,
        record: &mut LockRecord,
        hold: Duration,
        nonce: u64,
        turn: Option<&Opening>,
    ) -> bool {
        let KindsMode::MajorityCounting(permits) = self.opts.mode else {
            return false;
        };
        let token = format!("{}-{nonce}", self.id);
        let Taker::Counting(masters) = &self.taker else {
            return false;
        };
        let clock = self.history.holds.clock();
        let key = format!("{}counting:{}", self.opts.key_prefix, self.opts.resource);
        let ttl = self.ttl(turn.is_some());
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let started = Instant::now();
        let votes = futures::future::join_all(masters.iter().map(|conn| {
            let (key, token) = (key.clone(), token.clone());
            let timeout = self.opts.node_timeout;
            async move {
                let Some(mut conn) = conn.clone() else {
                    return false;
                };
                let script = redis::Script::new(COUNT_IN);
                let mut call = script.key(key);
                call.arg(permits).arg(token).arg(ttl_ms);
                let granted = tokio::time::timeout(timeout, call.invoke_async::<i64>(&mut conn)).await;
                matches!(granted, Ok(Ok(1)))
            }
        }))
        .await;
        let yes = votes.iter().filter(|v| **v).count();
        if yes < masters.len() / 2 + 1 {
            record.error = Some(format!("counted on {yes} of {} masters", masters.len()));
            self.uncount(&key, &token).await;
            end_turn(turn, false).await;
            return false;
        }
        let drift = ttl / 100 + Duration::from_millis(2);
        record.acquired = Some(clock.now());
        record.validity_end = Some(clock.offset(started + ttl - drift));
        record.token = token.clone();
        end_turn(turn, true).await;
        tokio::time::sleep(hold).await;
        self.stall().await;
        record.released = Some(clock.now());
        self.uncount(&key, &token).await;
        true
    }

    async fn uncount(&self, key: &str, token: &str) {
        let Taker::Counting(masters) = &self.taker else {
            return;
        };
        let timeout = self.opts.node_timeout;
        futures::future::join_all(masters.iter().flatten().map(|conn| {
            let mut conn = conn.clone();
            let mut cmd = redis::cmd("ZREM");
            cmd.arg(key).arg(token);
            async move {
                let _ = tokio::time::timeout(timeout, cmd.query_async::<i64>(&mut conn)).await;
            }
        }))
        .await;
    }

    /// The TTL of a hold: [`opening::TTL_FACTOR`] times the run's in a turn of the opening
    /// round, so that the players' holds outlast the round.
    fn ttl(&self, turn: bool) -> Duration {
        if turn {
            self.opts.ttl * opening::TTL_FACTOR
        } else {
            self.opts.ttl
        }
    }

    /// A stall requested for this client, taken inside its hold (like a GC pause).
    async fn stall(&self) {
        if let Some(stall) = self.pauses.take(self.id) {
            tokio::time::sleep(stall).await;
            self.pauses.finish();
        }
    }

    fn next(&mut self) -> u64 {
        // SplitMix64 step, as the lock workload's clients.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        if hi <= lo {
            return lo;
        }
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo).mul_f64(unit)
    }
}
