//! The two probe clients of an operation, each run in a container of its own (`quorlock-chaos
//! probe`), which build the counterexample step by step on the board instead of hoping that
//! racing clients line it up:
//!
//! - the **first** is built before the operation, on a host that reaches only a bare majority of
//!   the masters (the operated one among them), so its lock lands on exactly those. It reads the
//!   witness, says it holds, keeps the lock until the second has tried, then writes the value it
//!   read plus one (if validity is left) and releases;
//! - the **second** is built after the operation (a process started after the change, as every
//!   CLI invocation is), reaches every master, and tries once for a short while. If it holds, it
//!   reads and writes the witness at once; if not, it tries again once the first has released.
//!
//! With quorlock's defaults the operated master does not count for the second, which finds the
//! other masters of the first's majority held: refused, it gets the lock only after the first
//! released. With the control's rule switched off, the operated master, which lost the first's
//! key, grants it, and so does the master the first could not reach: two holders at once, both
//! having read the same value, so the checker sees an overlap and a lost increment every time.

use std::time::{Duration, Instant};

use quorlock::{Guard, Ignored, Quorlock};
use redis::AsyncCommands;

use super::board::{self, Board};
use super::control::Control;
use crate::error::HarnessError;
use crate::history::{LockRecord, RunClock};
use crate::server::connect;
use crate::workload::{witness_key, WorkloadStats};

/// The longest a probe waits for the board or for its masters to be checked.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Built before the operation, holds through it.
    First,
    /// Built after it, tries while the first holds.
    Second,
}

impl Role {
    /// Its name on the command line (`first`, `second`).
    pub fn name(self) -> &'static str {
        match self {
            Role::First => "first",
            Role::Second => "second",
        }
    }
}

/// What a probe is told.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// Which probe.
    pub role: Role,
    /// Every master's URL, in master order (the ones its host cannot reach included).
    pub nodes: Vec<String>,
    /// The witness's URL (the board is there too).
    pub witness: String,
    /// Its client number in the run (after the background clients').
    pub client: usize,
    /// The TTL of its lock: long enough to outlast the operation.
    pub ttl: Duration,
    /// How long its first attempt keeps trying.
    pub first_try: Duration,
    /// The per-master timeout of its client.
    pub node_timeout: Duration,
    /// The masters its host reaches, which it waits to see checked before it acquires.
    pub reaches: Vec<usize>,
    /// The key prefix of every lock (the run's).
    pub key_prefix: String,
    /// The control whose rule its client switches off; `None` for quorlock's defaults.
    pub control: Option<Control>,
}

/// What a probe did.
#[derive(Debug, Clone, Default)]
pub struct ProbeOutput {
    /// Its attempts.
    pub records: Vec<LockRecord>,
    /// Its totals (increments of the probes' witness counter among them).
    pub stats: WorkloadStats,
    /// What it saw of the masters, for the report.
    pub notes: Vec<String>,
}

/// Runs one probe on the run's clock.
///
/// # Errors
/// When its client cannot be built or the witness cannot be reached. A refused acquisition is
/// not an error: it is the probe's record.
pub async fn run(opts: &ProbeOptions, clock: RunClock) -> Result<ProbeOutput, HarnessError> {
    let mut builder = Quorlock::builder()
        .nodes(opts.nodes.clone())
        .node_timeout(opts.node_timeout)
        .connect_timeout(opts.node_timeout)
        .key_prefix(opts.key_prefix.clone());
    if let Some(control) = opts.control {
        builder = control.configure(builder);
    }
    let locks = builder.build().await.map_err(|e| {
        HarnessError::Workload(format!("building the {} probe's client: {e}", opts.role.name()))
    })?;
    let board = Board::connect(&opts.witness).await?;
    let witness = connect(&opts.witness, Duration::from_secs(5))
        .await
        .map_err(|e| HarnessError::redis("the probe connecting to the witness", e))?;
    let mut probe = Probe {
        opts,
        clock,
        locks,
        board,
        witness,
        out: ProbeOutput::default(),
    };
    probe.checked().await;
    match opts.role {
        Role::First => probe.first().await?,
        Role::Second => probe.second().await?,
    }
    probe.locks.settle().await;
    Ok(probe.out)
}

struct Probe<'a> {
    opts: &'a ProbeOptions,
    clock: RunClock,
    locks: Quorlock,
    board: Board,
    witness: redis::aio::MultiplexedConnection,
    out: ProbeOutput,
}

impl Probe<'_> {
    /// Waits until every master its host reaches has been checked (neither unreachable nor
    /// unverified), so that a check slowed by load does not decide the attempt.
    async fn checked(&mut self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let health = self.locks.health();
            let pending: Vec<usize> = self
                .opts
                .reaches
                .iter()
                .copied()
                .filter(|&m| {
                    health.masters.get(m).is_some_and(|h| {
                        matches!(h.ignored, Some(Ignored::Unreachable | Ignored::Unverified))
                    })
                })
                .collect();
            if pending.is_empty() {
                return;
            }
            if Instant::now() >= deadline {
                self.note(format!(
                    "masters {pending:?} were still not checked after {PATIENCE:?}"
                ));
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The first probe: checked, built, told to go, holds through the operation.
    async fn first(&mut self) -> Result<(), HarnessError> {
        self.board.set(board::BUILT, "1").await?;
        if self.board.wait(board::GO, PATIENCE).await.is_none() {
            self.note("the harness never said go".into());
        }
        self.standing("before its attempt:");
        let mut record = LockRecord::invoked(self.opts.client, board::RESOURCE, self.clock.now());
        let attempt = self
            .locks
            .lock(board::RESOURCE, self.opts.ttl)
            .wait(self.opts.first_try)
            .acquire()
            .await;
        let guard = match attempt {
            Ok(guard) => guard,
            Err(e) => {
                record.error = Some(e.to_string());
                self.out.records.push(record);
                self.out.stats.acquire_failures += 1;
                self.board.set(board::HELD, "0").await?;
                self.board.set(board::RELEASED, "1").await?;
                return Ok(());
            }
        };
        let valid_until = guard.valid_until().into_std();
        record.acquired = Some(self.clock.now());
        record.validity_end = Some(self.clock.offset(valid_until));
        record.token = guard.token().to_string();
        let read = self.read().await;
        self.board.set(board::HELD, "1").await?;
        let left = valid_until.saturating_duration_since(Instant::now());
        if self
            .board
            .wait(board::TRIED, left.saturating_sub(self.margin()))
            .await
            .is_none()
        {
            self.note("the second probe had not tried when the first one's validity ran out".into());
        }
        self.finish(read, valid_until, guard, record).await;
        self.board.set(board::RELEASED, "1").await?;
        Ok(())
    }

    /// The second probe: built after the operation, tries while the first holds, and again
    /// once it released if it was refused.
    async fn second(&mut self) -> Result<(), HarnessError> {
        let held = self.attempt(self.opts.first_try).await;
        // After the attempt, whose TTL the grace now covers (a client's grace grows with the
        // longest TTL it used).
        self.standing(if held {
            "held at its first attempt, after which"
        } else {
            "was refused at its first attempt, after which"
        });
        self.board.set(board::TRIED, "1").await?;
        if !held {
            if self.board.wait(board::RELEASED, PATIENCE).await.is_none() {
                self.note("the first probe never released".into());
            }
            let held = self.attempt(self.opts.ttl).await;
            self.note(format!(
                "{} once the first had released",
                if held { "held" } else { "was refused again" }
            ));
        }
        Ok(())
    }

    /// One attempt that keeps trying for `wait`, with the critical section at once if it holds.
    async fn attempt(&mut self, wait: Duration) -> bool {
        let mut record = LockRecord::invoked(self.opts.client, board::RESOURCE, self.clock.now());
        let guard = match self
            .locks
            .lock(board::RESOURCE, self.opts.ttl)
            .wait(wait)
            .acquire()
            .await
        {
            Ok(guard) => guard,
            Err(e) => {
                record.error = Some(e.to_string());
                self.out.records.push(record);
                self.out.stats.acquire_failures += 1;
                return false;
            }
        };
        let valid_until = guard.valid_until().into_std();
        record.acquired = Some(self.clock.now());
        record.validity_end = Some(self.clock.offset(valid_until));
        record.token = guard.token().to_string();
        let read = self.read().await;
        self.finish(read, valid_until, guard, record).await;
        true
    }

    /// The probes' witness counter, `None` when it cannot be read.
    /// The end of a hold: the witness written from `read` (or its read counted as failed), the
    /// guard released, and `record` completed and kept.
    async fn finish(
        &mut self,
        read: Option<u64>,
        valid_until: Instant,
        guard: Guard,
        mut record: LockRecord,
    ) {
        match read {
            Some(value) => self.write(value, valid_until).await,
            None => self.out.stats.witness_errors += 1,
        }
        record.released = Some(self.clock.now());
        if let Err(e) = guard.release().await {
            self.out.stats.release_failures += 1;
            record.error = Some(format!("release: {e}"));
        }
        self.out.records.push(record);
    }

    async fn read(&mut self) -> Option<u64> {
        let value: redis::RedisResult<Option<u64>> = self.witness.get(witness_key(board::RESOURCE)).await;
        value.ok().map(|v| v.unwrap_or(0))
    }

    /// Writes `read + 1` if validity is left (else skips): an increment, late if past
    /// `valid_until`.
    async fn write(&mut self, read: u64, valid_until: Instant) {
        if Instant::now() + self.margin() >= valid_until {
            self.out.stats.skipped += 1;
            return;
        }
        let written: redis::RedisResult<()> = self.witness.set(witness_key(board::RESOURCE), read + 1).await;
        match written {
            Ok(()) => {
                self.out.stats.increments += 1;
                if Instant::now() > valid_until {
                    self.out.stats.late_writes += 1;
                }
            }
            Err(_) => self.out.stats.witness_errors += 1,
        }
    }

    /// The validity a probe wants left before it writes.
    fn margin(&self) -> Duration {
        self.opts.ttl / 10
    }

    /// Notes which masters' votes count now, and why the others' do not.
    fn standing(&mut self, when: &str) {
        let health = self.locks.health();
        let masters: Vec<String> = health
            .masters
            .iter()
            .map(|m| match (m.ignored, m.counts_again_in) {
                (None, _) => format!("m{} counts", m.node),
                (Some(why), Some(left)) => {
                    format!("m{} ignored ({why:?}, {} ms left)", m.node, left.as_millis())
                }
                (Some(why), None) => format!("m{} ignored ({why:?})", m.node),
            })
            .collect();
        self.note(format!("{when} {}", masters.join(", ")));
    }

    fn note(&mut self, text: String) {
        let who = match self.opts.role {
            Role::First => "first probe",
            Role::Second => "second probe",
        };
        self.out
            .notes
            .push(format!("{who} (client {}) {text}", self.opts.client));
    }
}
