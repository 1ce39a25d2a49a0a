//! The workload: concurrent clients looping acquire / critical section / release over a few
//! resources with the quorlock library, recording every operation in the [`History`].
//!
//! The critical section is a read-modify-write of a per-resource counter on a separate,
//! never-faulted witness Redis (read, sleep, write). If two clients were ever inside it at
//! once, increments get lost, which the checker detects independently of the timestamps.
//!
//! Besides the correct client, two deliberately unsafe ones ([`ClientMode`]) exist as
//! negative controls: they must make the checker report violations, proving it can fail.

use std::time::{Duration, Instant};

use quorlock::Quorlock;
use redis::aio::MultiplexedConnection;
use redis::AsyncCommands;

use crate::checker::Rule;
use crate::error::HarnessError;
use crate::faults::ClientPauses;
use crate::history::{History, LockRecord};
use crate::opening::{self, Opening};
use crate::server::connect;

/// Witness counter key of a resource.
pub fn witness_key(resource: &str) -> String {
    format!("witness:{resource}")
}

/// Name of resource `i`.
pub fn resource_name(i: usize) -> String {
    format!("r{i}")
}

/// How a client uses the lock: correctly, or in one of the unsafe ways the negative controls
/// run to prove that the checker detects violations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClientMode {
    /// Lock through every master (majority quorum) and write only with validity left.
    #[default]
    Safe,
    /// Unsafe: each client locks through one master only (a quorum of 1), client `c` through
    /// master `c % masters`, so clients on different masters hold the same resource at once.
    SingleMaster,
    /// Unsafe: hold for two to three TTLs and write without re-checking validity, so the
    /// lock expires under the writer and the next holder's increment is overwritten.
    IgnoreValidity,
    /// Unsafe, for the semaphore only: permits counted on each master and held on a simple
    /// majority of them ([`crate::kinds_workload::KindsMode::MajorityCounting`]), so that
    /// clients missing different masters hold more permits than there are.
    MajorityCounting,
}

impl ClientMode {
    /// Its name on the command line (`safe`, `single-master`, `ignore-validity`,
    /// `majority-counting`).
    pub fn name(self) -> &'static str {
        match self {
            ClientMode::Safe => "safe",
            ClientMode::SingleMaster => "single-master",
            ClientMode::IgnoreValidity => "ignore-validity",
            ClientMode::MajorityCounting => "majority-counting",
        }
    }

    /// The rule whose check must catch this negative control (`None` for safe clients):
    /// [`Rule::Overlaps`] for `single-master`, [`Rule::LostUpdates`] for `ignore-validity` (its
    /// holds' safe intervals end with their validity, so only the witness sees the late writes),
    /// [`Rule::SemaphoreExcess`] for `majority-counting`.
    pub fn target(self) -> Option<Rule> {
        match self {
            ClientMode::Safe => None,
            ClientMode::SingleMaster => Some(Rule::Overlaps),
            ClientMode::IgnoreValidity => Some(Rule::LostUpdates),
            ClientMode::MajorityCounting => Some(Rule::SemaphoreExcess),
        }
    }

    /// `true` for the deliberately unsafe modes (negative controls).
    pub fn is_unsafe(self) -> bool {
        self != ClientMode::Safe
    }
}

/// How the clients behave.
#[derive(Debug, Clone)]
pub struct WorkloadOptions {
    /// Number of concurrent clients.
    pub clients: usize,
    /// Number of resources they compete for.
    pub resources: usize,
    /// Lock TTL.
    pub ttl: Duration,
    /// Shortest and longest sleep inside the critical section.
    pub hold: (Duration, Duration),
    /// Per-master command timeout given to the library.
    pub node_timeout: Duration,
    /// Validity a client wants left before it writes (it skips the write otherwise).
    pub margin: Duration,
    /// Prefix of every lock key (so leaks can be found by pattern).
    pub key_prefix: String,
    /// Seed of the clients' random choices.
    pub seed: u64,
    /// Safe clients, or one of the unsafe negative controls.
    pub mode: ClientMode,
    /// Where these clients sit among the run's: `(group, groups)`, client `c` here being the
    /// run's client `c * groups + group` (a container runs one group's clients); `(0, 1)` when
    /// this process runs them all.
    pub slice: (usize, usize),
    /// How many of the run's first clients play a negative control's opening round (see
    /// [`crate::opening`]); 0 for none.
    pub opening_players: usize,
    /// A mechanism of the library every client here runs without (an operation's control, which
    /// removes its rule from every client of the deployment: the record the masters keep is
    /// shared, so one client with the rule protects the others); `None` for none.
    pub without: Option<quorlock::config::Mechanism>,
}

impl WorkloadOptions {
    /// Defaults derived from the TTL: 4 resources, holds of TTL/40..TTL/8, node timeout
    /// TTL/4, margin TTL/10, safe clients.
    pub fn new(clients: usize, ttl: Duration, seed: u64) -> WorkloadOptions {
        WorkloadOptions {
            clients,
            resources: 4,
            ttl,
            hold: (ttl / 40, ttl / 8),
            node_timeout: ttl / 4,
            margin: ttl / 10,
            key_prefix: "quorlock-chaos:".into(),
            seed,
            mode: ClientMode::Safe,
            slice: (0, 1),
            opening_players: 0,
            without: None,
        }
    }

    /// The same options for clients in `mode`; [`ClientMode::IgnoreValidity`] holds for two
    /// to three TTLs, so every hold outlives its lock. The plain lock's controls play an
    /// opening round of the first [`opening::PLAYERS`] of `self.clients` clients (set
    /// [`WorkloadOptions::opening_players`] again when these are one group's of a larger run).
    pub fn with_mode(self, mode: ClientMode) -> WorkloadOptions {
        let hold = match mode {
            ClientMode::IgnoreValidity => (self.ttl * 2, self.ttl * 3),
            ClientMode::Safe | ClientMode::SingleMaster | ClientMode::MajorityCounting => self.hold,
        };
        let opening_players = opening_players(mode, self.clients);
        WorkloadOptions {
            mode,
            hold,
            opening_players,
            ..self
        }
    }

    /// The run's index of client `local` of these options.
    fn global(&self, local: usize) -> usize {
        let (group, groups) = self.slice;
        local * groups.max(1) + group
    }
}

/// How many clients of a run of `clients` in `mode` play the opening round: the first
/// [`opening::PLAYERS`] for the plain lock's negative controls, none for safe clients.
///
/// Played in turns on one resource, the round builds each control's counterexample: two
/// single-master clients on different masters both hold it and read the same witness value
/// before either writes; a client that ignores its validity is followed by one that waits for
/// the lock to expire under it, reads the same value, and both write.
pub fn opening_players(mode: ClientMode, clients: usize) -> usize {
    match mode {
        ClientMode::SingleMaster | ClientMode::IgnoreValidity => opening::PLAYERS.min(clients),
        ClientMode::Safe | ClientMode::MajorityCounting => 0,
    }
}

/// Clears the witness before a run: the counters of the first `resources` resources, and the
/// opening round's board.
///
/// # Errors
/// When the witness cannot be reached or refuses the `DEL`.
pub async fn reset_witness(url: &str, resources: usize) -> Result<(), HarnessError> {
    let mut conn = connect(url, Duration::from_secs(5))
        .await
        .map_err(|e| HarnessError::redis("connecting to the witness", e))?;
    let mut keys: Vec<String> = (0..resources).map(|i| witness_key(&resource_name(i))).collect();
    keys.push(opening::WITNESS_KEY.to_owned());
    let _: () = conn
        .del(&keys)
        .await
        .map_err(|e| HarnessError::redis("clearing the witness counters", e))?;
    Ok(())
}

/// Totals over all clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkloadStats {
    /// Witness increments completed under a lock (the expected counter total).
    pub increments: u64,
    /// Of those, writes that completed after the lock's validity had ended.
    pub late_writes: u64,
    /// Critical sections skipped because too little validity was left.
    pub skipped: u64,
    /// Failed acquisitions.
    pub acquire_failures: u64,
    /// Failed releases.
    pub release_failures: u64,
    /// Witness commands that failed (their increment is not counted).
    pub witness_errors: u64,
}

impl WorkloadStats {
    fn add(&mut self, other: &WorkloadStats) {
        self.increments += other.increments;
        self.late_writes += other.late_writes;
        self.skipped += other.skipped;
        self.acquire_failures += other.acquire_failures;
        self.release_failures += other.release_failures;
        self.witness_errors += other.witness_errors;
    }
}

/// Everything a client needs.
struct Client {
    id: usize,
    locks: Quorlock,
    witness: MultiplexedConnection,
    opts: WorkloadOptions,
    history: History,
    pauses: ClientPauses,
    rng: u64,
    opening: Option<Opening>,
}

/// Runs the clients until `until` (an offset on the history's clock); client `c` talks to
/// the masters at `group_urls[c % group_urls.len()]` (in [`ClientMode::SingleMaster`], only
/// to master `c % masters` among them). In-flight operations finish first.
pub async fn run(
    opts: &WorkloadOptions,
    group_urls: &[Vec<String>],
    witness_url: &str,
    history: &History,
    pauses: &ClientPauses,
    until: Duration,
) -> Result<WorkloadStats, HarnessError> {
    if group_urls.is_empty() || opts.clients == 0 || opts.resources == 0 {
        return Err(HarnessError::InvalidOptions(format!(
            "a workload needs clients, resources and masters; got {} clients, {} resources, {} groups",
            opts.clients,
            opts.resources,
            group_urls.len()
        )));
    }
    let mut clients = Vec::with_capacity(opts.clients);
    for id in 0..opts.clients {
        let urls = &group_urls[id % group_urls.len()];
        let urls: Vec<String> = match opts.mode {
            ClientMode::SingleMaster => urls.get(id % urls.len().max(1)).cloned().into_iter().collect(),
            ClientMode::Safe | ClientMode::IgnoreValidity | ClientMode::MajorityCounting => urls.clone(),
        };
        let mut builder = Quorlock::builder()
            .nodes(urls)
            .node_timeout(opts.node_timeout)
            .connect_timeout(opts.node_timeout)
            .wait(opts.ttl)
            .key_prefix(opts.key_prefix.clone());
        if let Some(mechanism) = opts.without {
            builder = builder.unsafe_without_for_tests(mechanism);
        }
        let locks = builder
            .build()
            .await
            .map_err(|e| HarnessError::Workload(format!("building client {id}: {e}")))?;
        let witness = connect(witness_url, Duration::from_secs(5))
            .await
            .map_err(|e| HarnessError::redis(format!("client {id} connecting to the witness"), e))?;
        let opening =
            (opts.opening_players > 0).then(|| Opening::on_witness(opts.opening_players, witness.clone()));
        clients.push(Client {
            opening,
            id,
            locks,
            witness,
            opts: opts.clone(),
            history: history.clone(),
            pauses: pauses.clone(),
            rng: opts.seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5DEE_CE66_D1CE_4E5B,
        });
    }
    let tasks: Vec<_> = clients
        .into_iter()
        .map(|client| tokio::spawn(client.run(until)))
        .collect();
    let mut total = WorkloadStats::default();
    for task in tasks {
        let stats = task
            .await
            .map_err(|e| HarnessError::Workload(format!("a client task failed: {e}")))?;
        total.add(&stats);
    }
    Ok(total)
}

impl Client {
    async fn run(mut self, until: Duration) -> WorkloadStats {
        let clock = self.history.clock();
        let mut stats = WorkloadStats::default();
        let me = self.opts.global(self.id);
        if let Some(opening) = self.opening.clone() {
            if opening.plays(me) {
                opening.my_turn(me).await;
                self.opening_turn(&opening, &mut stats).await;
            } else {
                opening.over().await;
            }
        }
        // A pending or ongoing stall keeps everyone going (for at most ten TTLs more): the
        // stalled client gets its turn, and the others take the lock under it.
        let overtime = until + self.opts.ttl * 10;
        while clock.now() < until || (self.pauses.busy() && clock.now() < overtime) {
            let resource = resource_name(self.below(self.opts.resources));
            let mut record = LockRecord::invoked(self.id, &resource, clock.now());
            let guard = match self.locks.acquire(&resource, self.opts.ttl).await {
                Ok(guard) => guard,
                Err(e) => {
                    record.error = Some(e.to_string());
                    self.history.push(record);
                    stats.acquire_failures += 1;
                    let pause = self.between(Duration::ZERO, self.opts.ttl / 20);
                    tokio::time::sleep(pause).await;
                    continue;
                }
            };
            record.acquired = Some(clock.now());
            record.validity_end = Some(clock.offset(guard.valid_until().into_std()));
            record.token = guard.token().to_string();
            let hold = self.between(self.opts.hold.0, self.opts.hold.1);
            let checks_validity = self.opts.mode != ClientMode::IgnoreValidity;
            if !checks_validity || Instant::now() + hold + self.opts.margin < guard.valid_until().into_std() {
                self.critical_section(&resource, hold, guard.valid_until().into_std(), &mut stats)
                    .await;
            } else {
                stats.skipped += 1;
            }
            // The holder stops acting here; release only makes the lock free sooner.
            record.released = Some(clock.now());
            if let Err(e) = guard.release().await {
                stats.release_failures += 1;
                record.error = Some(format!("release: {e}"));
            }
            self.history.push(record);
        }
        stats
    }

    /// This client's turn of the opening round, on resource `r0`: take the lock (a
    /// single-master client takes what its master has free now; one that ignores its validity
    /// waits for the previous player's lock to expire under it), read the witness, pass the
    /// turn, keep the lock until every player has had its turn, then write and release. Every
    /// player reads before any writes, so the control's counterexample is built, not raced for.
    async fn opening_turn(&mut self, opening: &Opening, stats: &mut WorkloadStats) {
        let clock = self.history.clock();
        let resource = resource_name(0);
        let mut record = LockRecord::invoked(self.id, &resource, clock.now());
        let ignores_validity = self.opts.mode == ClientMode::IgnoreValidity;
        let request = self.locks.lock(&resource, self.opts.ttl);
        let acquired = if ignores_validity {
            request.wait(self.opts.ttl * opening::TTL_FACTOR).acquire().await
        } else {
            request.try_acquire().await
        };
        let guard = match acquired {
            Ok(guard) => guard,
            Err(e) => {
                record.error = Some(e.to_string());
                self.history.push(record);
                stats.acquire_failures += 1;
                opening.pass().await;
                return;
            }
        };
        let valid_until = guard.valid_until().into_std();
        record.acquired = Some(clock.now());
        record.validity_end = Some(clock.offset(valid_until));
        record.token = guard.token().to_string();
        let key = witness_key(&resource);
        let read: redis::RedisResult<Option<u64>> = self.witness.get(&key).await;
        opening.pass().await;
        opening.over().await;
        match read {
            Ok(value) if ignores_validity || Instant::now() + self.opts.margin < valid_until => {
                self.write(&key, value, valid_until, stats).await;
            }
            Ok(_) => stats.skipped += 1,
            Err(_) => stats.witness_errors += 1,
        }
        record.released = Some(clock.now());
        if let Err(e) = guard.release().await {
            stats.release_failures += 1;
            record.error = Some(format!("release: {e}"));
        }
        self.history.push(record);
    }

    /// Read, sleep, re-check validity (unless ignoring it), (maybe stall), write.
    async fn critical_section(
        &mut self,
        resource: &str,
        hold: Duration,
        valid_until: Instant,
        stats: &mut WorkloadStats,
    ) {
        let key = witness_key(resource);
        let value: Option<u64> = match self.witness.get(&key).await {
            Ok(v) => v,
            Err(_) => {
                stats.witness_errors += 1;
                return;
            }
        };
        tokio::time::sleep(hold).await;
        let checks_validity = self.opts.mode != ClientMode::IgnoreValidity;
        if checks_validity && Instant::now() + self.opts.margin >= valid_until {
            stats.skipped += 1;
            return;
        }
        // A requested stall lands between the check and the write, like a GC pause. It lasts
        // at least as long as asked, and then until another client has written the counter
        // (at most four times as long): the late write below then always overwrites a newer
        // increment, which is what the stall exists to show.
        if let Some(stall) = self.pauses.take(self.id) {
            let began = Instant::now();
            tokio::time::sleep(stall).await;
            while began.elapsed() < stall * 4 {
                let now: redis::RedisResult<Option<u64>> = self.witness.get(&key).await;
                if !matches!(now, Ok(now) if now == value) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            self.pauses.finish();
        }
        self.write(&key, value, valid_until, stats).await;
    }

    /// The critical section's write: the value read, plus one; counted as an increment, and as
    /// a late one past `valid_until`.
    async fn write(&mut self, key: &str, read: Option<u64>, valid_until: Instant, stats: &mut WorkloadStats) {
        let written: redis::RedisResult<()> = self.witness.set(key, read.unwrap_or(0) + 1).await;
        match written {
            Ok(()) => {
                stats.increments += 1;
                if Instant::now() > valid_until {
                    stats.late_writes += 1;
                }
            }
            Err(_) => stats.witness_errors += 1,
        }
    }

    fn next(&mut self) -> u64 {
        // SplitMix64 step: cheap, seeded, good enough for workload choices.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        let n64 = u64::try_from(n.max(1)).unwrap_or(u64::MAX);
        usize::try_from(self.next() % n64).unwrap_or(0)
    }

    fn between(&mut self, lo: Duration, hi: Duration) -> Duration {
        if hi <= lo {
            return lo;
        }
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        lo + (hi - lo).mul_f64(unit)
    }
}

/// Sum of all resources' witness counters.
pub async fn witness_total(witness_url: &str, resources: usize) -> Result<u64, HarnessError> {
    let mut conn = connect(witness_url, Duration::from_secs(5))
        .await
        .map_err(|e| HarnessError::redis("connecting to the witness", e))?;
    let mut total = 0;
    for i in 0..resources {
        let key = witness_key(&resource_name(i));
        let value: Option<u64> = conn
            .get(&key)
            .await
            .map_err(|e| HarnessError::redis(format!("reading {key} on the witness"), e))?;
        total += value.unwrap_or(0);
    }
    Ok(total)
}
