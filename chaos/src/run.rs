//! What one chaos run is asked to do ([`RunOptions`]) and what it found ([`RunReport`], with
//! its [`Verdict`]): plain data shared by the layers of a run.
//!
//! `drive` fills a report by running the scenario, `verdict` judges it without any IO, and
//! `report` renders it. Keeping the data here, below all three, is what lets each of them
//! depend on it without depending on one another.

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::availability::AppliedFault;
use crate::checker::{Excess, KeyObservation, Liveness, LostUpdates, Overlap, Rule};
use crate::compose::ComposeOptions;
use crate::error::HarnessError;
use crate::history::{FaultWindow, LockRecord};
use crate::scenario::Scenario;
use crate::workload::{ClientMode, WorkloadStats};

/// Where the masters run.
#[derive(Debug, Clone)]
pub enum BackendChoice {
    /// Local `redis-server` children.
    Process,
    /// Services of a docker compose file (already up).
    Compose(Box<ComposeOptions>),
}

/// Which kind of lock the clients take.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Kind {
    /// The plain lock, over several resources, with the read-modify-write witness.
    #[default]
    Lock,
    /// A counting semaphore of this many permits on one resource: at most that many holders.
    Semaphore(u32),
    /// The read-write lock on one resource: every third acquire of a client is a write.
    RwLock,
}

impl Kind {
    /// Its name on the command line (`lock`, `semaphore`, `rwlock`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Lock => "lock",
            Kind::Semaphore(_) => "semaphore",
            Kind::RwLock => "rwlock",
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The scenario.
    pub scenario: Scenario,
    /// How long clients run.
    pub duration: Duration,
    /// Number of masters (process backend; compose uses its service count).
    pub masters: usize,
    /// Number of concurrent clients.
    pub clients: usize,
    /// Number of resources they compete for.
    pub resources: usize,
    /// Lock TTL.
    pub ttl: Duration,
    /// Seed of the schedule and the clients.
    pub seed: u64,
    /// Where the masters run.
    pub backend: BackendChoice,
    /// Witness Redis URL; `None` starts a local one.
    pub witness_url: Option<String>,
    /// Safe clients, or an unsafe negative control that must produce violations.
    pub mode: ClientMode,
    /// What the clients take.
    pub kind: Kind,
}

impl RunOptions {
    /// Defaults: 30 s, 5 masters, 16 clients, 4 resources, TTL 2 s, seed 1, process backend,
    /// safe clients.
    pub fn new(scenario: Scenario) -> RunOptions {
        RunOptions {
            scenario,
            duration: Duration::from_secs(30),
            masters: 5,
            clients: 16,
            resources: 4,
            ttl: Duration::from_secs(2),
            seed: 1,
            backend: BackendChoice::Process,
            witness_url: None,
            mode: ClientMode::Safe,
            kind: Kind::Lock,
        }
    }

    /// Rejects options no run can use, naming the bad value.
    pub(crate) fn validate(&self) -> Result<(), HarnessError> {
        let bad = |what: String| Err(HarnessError::InvalidOptions(what));
        if self.masters == 0 {
            return bad("masters must be at least 1, got 0".into());
        }
        if self.clients == 0 {
            return bad("clients must be at least 1, got 0".into());
        }
        if self.resources == 0 {
            return bad("resources must be at least 1, got 0".into());
        }
        if self.ttl < Duration::from_millis(100) {
            return bad(format!("ttl must be at least 100ms, got {:?}", self.ttl));
        }
        if self.duration.is_zero() {
            return bad("duration must be positive, got 0s".into());
        }
        match (self.kind, self.mode) {
            (Kind::Semaphore(0), _) => bad("a semaphore needs at least 1 permit, got 0".into()),
            (Kind::Lock, ClientMode::MajorityCounting) => bad(
                "the majority-counting control counts semaphore permits: it needs the semaphore kind".into(),
            ),
            (Kind::Semaphore(_) | Kind::RwLock, ClientMode::SingleMaster | ClientMode::IgnoreValidity) => {
                bad(format!(
                    "the {} control runs plain locks, not the {} kind",
                    self.mode.name(),
                    self.kind.name()
                ))
            }
            (Kind::RwLock, ClientMode::MajorityCounting) => {
                bad("the majority-counting control counts semaphore permits, not read-write locks".into())
            }
            _ => Ok(()),
        }
    }
}

/// The outcome of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Every required property held.
    Pass,
    /// Nothing failed, but the run could not show what it should (see the reasons).
    Inconclusive,
    /// A required property was violated.
    Fail,
}

/// Why a run's verdict is not a plain pass: a rule found broken, or a run that could not show
/// what it should.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reason {
    /// What it makes of the run: [`Verdict::Fail`], or [`Verdict::Inconclusive`].
    pub verdict: Verdict,
    /// The rule it is about; `None` when it is about every check (nothing was held).
    pub rule: Option<Rule>,
    /// The reason in words, as the summary and the JSON write it.
    pub text: String,
}

impl Reason {
    /// `rule` was broken: the run fails.
    pub fn fail(rule: Rule, text: impl Into<String>) -> Reason {
        Reason {
            verdict: Verdict::Fail,
            rule: Some(rule),
            text: text.into(),
        }
    }

    /// The run could not show what `rule` (or, for `None`, any check) needed: it is inconclusive.
    pub fn inconclusive(rule: Option<Rule>, text: impl Into<String>) -> Reason {
        Reason {
            verdict: Verdict::Inconclusive,
            rule,
            text: text.into(),
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A reason in the JSON report: its words.
impl Serialize for Reason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

/// Everything a run found.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The scenario run.
    pub scenario: Scenario,
    /// Options used.
    pub options: RunOptions,
    /// Backend name.
    pub backend: &'static str,
    /// Number of masters.
    pub masters: usize,
    /// When the last client finished (offset from the run start).
    pub run_end: Duration,
    /// Every lock operation (for the read-write lock, the writes only; reads are in `kinds`).
    pub records: Vec<LockRecord>,
    /// What the semaphore and read-write lock checks found; `None` for plain locks.
    pub kinds: Option<KindFindings>,
    /// Successful acquisitions (reads included).
    pub acquisitions: usize,
    /// Successful acquisitions whose attempt or hold overlapped a fault while it was active
    /// (a restart: while it took place).
    pub acquisitions_under_faults: usize,
    /// Every fault applied, the final heal included.
    pub applied: Vec<AppliedFault>,
    /// Labelled fault windows.
    pub fault_windows: Vec<FaultWindow>,
    /// Mutual-exclusion violations.
    pub overlaps: Vec<Overlap>,
    /// Acquisitions that succeeded while their client's group could not reach a majority.
    pub acquired_without_majority: Vec<LockRecord>,
    /// The witness check.
    pub lost_updates: LostUpdates,
    /// Workload totals.
    pub stats: WorkloadStats,
    /// Progress while a majority was reachable, and recovery after heals.
    pub liveness: Liveness,
    /// Lock keys left behind.
    pub leaks: Vec<KeyObservation>,
    /// Remarks (clock method, skipped checks).
    pub notes: Vec<String>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why the verdict is not a plain pass: what failed first, then what left it inconclusive.
    pub reasons: Vec<Reason>,
}

/// The semaphore's and the read-write lock's own findings. Their workload has no witness
/// counter, so a kinds run has no lost-update check.
#[derive(Debug, Clone, Default)]
pub struct KindFindings {
    /// Every read of a read-write lock (empty for a semaphore).
    pub reads: Vec<LockRecord>,
    /// Moments a semaphore had more holders than permits.
    pub excesses: Vec<Excess>,
    /// Readers that overlapped a writer.
    pub reader_writer: Vec<Overlap>,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::checker;
    use crate::scenario;

    /// A report of a clean, fault-free run of scenario `name`, for tests to spoil.
    pub(crate) fn report(name: &str) -> RunReport {
        let scenario = *scenario::find(name).unwrap();
        RunReport {
            scenario,
            options: RunOptions::new(scenario),
            backend: "process",
            masters: 5,
            run_end: Duration::from_secs(10),
            records: Vec::new(),
            kinds: None,
            acquisitions: 0,
            acquisitions_under_faults: 0,
            applied: Vec::new(),
            fault_windows: Vec::new(),
            overlaps: Vec::new(),
            acquired_without_majority: Vec::new(),
            lost_updates: checker::lost_updates(10, 10),
            stats: WorkloadStats {
                increments: 10,
                ..WorkloadStats::default()
            },
            liveness: checker::liveness(&[], &[], &[]),
            leaks: Vec::new(),
            notes: Vec::new(),
            verdict: Verdict::Pass,
            reasons: Vec::new(),
        }
    }

    /// A hold of `r0` by `client`, acquired at `from` ms and valid until `to` ms.
    pub(crate) fn hold(client: usize, from: u64, to: u64) -> LockRecord {
        let mut r = LockRecord::invoked(client, "r0", Duration::from_millis(from));
        r.acquired = Some(Duration::from_millis(from));
        r.validity_end = Some(Duration::from_millis(to));
        r
    }

    #[test]
    fn bad_options_are_rejected_with_the_value() {
        let mut opts = RunOptions::new(*scenario::find("none").unwrap());
        opts.ttl = Duration::from_millis(5);
        let err = opts.validate().unwrap_err().to_string();
        assert!(err.contains("5ms"), "{err}");
        opts.ttl = Duration::from_secs(1);
        opts.clients = 0;
        assert!(opts.validate().is_err());
    }

    #[test]
    fn controls_are_refused_with_the_wrong_kind() {
        let mut opts = RunOptions::new(*scenario::find("none").unwrap());
        opts.mode = ClientMode::MajorityCounting;
        let err = opts.validate().unwrap_err().to_string();
        assert!(err.contains("semaphore"), "{err}");
        opts.kind = Kind::Semaphore(2);
        assert!(opts.validate().is_ok());
        opts.kind = Kind::RwLock;
        assert!(opts.validate().is_err());
        opts.mode = ClientMode::SingleMaster;
        let err = opts.validate().unwrap_err().to_string();
        assert!(err.contains("rwlock"), "{err}");
        opts.mode = ClientMode::Safe;
        assert!(opts.validate().is_ok());
        opts.kind = Kind::Semaphore(0);
        assert!(opts.validate().unwrap_err().to_string().contains("permit"));
    }
}
