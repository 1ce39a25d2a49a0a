//! The named chaos scenarios and their fault schedules. A schedule is a pure function of
//! (scenario, seed, duration, masters, TTL, clients), so runs are reproducible from their
//! seed and every schedule is unit-tested.
//!
//! Each scenario says whether it stays inside RedLock's model (then mutual exclusion and
//! the lost-update witness must hold) or deliberately leaves it (then violations are
//! expected to be possible and are reported, not failed on).
//!
//! Besides the timed fault schedules ([`SCENARIOS`]) there are the operations an operator runs
//! on real deployments ([`OPERATIONS`]: a failover to a promoted replica, a runtime downgrade
//! of persistence before a crash, eviction under a small `maxmemory`). They are not a schedule
//! of fault actions but a sequence of steps on containers, so only the compose backend's
//! operations driver (`compose::operations`) runs them; their [`Scenario::schedule`] is empty.

use std::time::Duration;

use crate::cluster::DataMode;
use crate::error::HarnessError;
use crate::faults::{FaultAction, ScheduledFault};

/// Which scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScenarioKind {
    /// No faults.
    None,
    /// Kill a minority, restart it with its data.
    KillMinority,
    /// Kill a majority (no acquisition may succeed meanwhile), restart it.
    KillMajority,
    /// Pause a minority repeatedly, each time for less than the TTL.
    PauseMinorityShort,
    /// Pause a minority for longer than the TTL.
    PauseMinorityLong,
    /// Crash-restart a minority keeping data, repeatedly.
    RestartMinorityKeep,
    /// Crash-restart a minority wiping data at once, repeatedly (out of model).
    RestartMinorityWipeImmediate,
    /// Kill a minority, wipe it, restart it only after more than a TTL.
    RestartMinorityWipeDelayed,
    /// Latency well below the TTL on every master.
    Latency,
    /// Blackhole a minority.
    Blackhole,
    /// Reset every connection to a minority, and every new one right after accept.
    ResetMinority,
    /// Split clients into two groups, each seeing a different side.
    Partition,
    /// One client group per master, each cut off from a different master: every group keeps a
    /// majority, but no two groups share the same one.
    SplitMajorities,
    /// Jump one master's wall clock forward past the TTL (out of model).
    ClockJump,
    /// Stall a client inside its hold past its validity (out of model).
    ClientPause,
    /// A master with a lagging replica fails over: the master is killed, the replica promoted
    /// (`REPLICAOF NO ONE`) and the master's name moved to it (compose only).
    Failover,
    /// A durable master's persistence is lowered at runtime (`CONFIG SET`), then it is killed
    /// with SIGKILL and restarted, without the writes made since (compose only).
    RuntimeDowngrade,
    /// A master with a small `maxmemory` and an evicting policy is filled until it evicts a
    /// held lock's key (compose only).
    Eviction,
}

/// A named scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    /// Which one.
    pub kind: ScenarioKind,
    /// Its name on the command line.
    pub name: &'static str,
    /// `true` if RedLock's guarantees must hold under it.
    pub in_model: bool,
    /// One line saying what it does.
    pub summary: &'static str,
}

/// Every scenario, in the order `list` shows them.
pub const SCENARIOS: [Scenario; 15] = [
    Scenario {
        kind: ScenarioKind::None,
        name: "none",
        in_model: true,
        summary: "no faults: the baseline",
    },
    Scenario {
        kind: ScenarioKind::KillMinority,
        name: "kill-minority",
        in_model: true,
        summary: "SIGKILL a minority of masters, later restart them keeping data",
    },
    Scenario {
        kind: ScenarioKind::KillMajority,
        name: "kill-majority",
        in_model: true,
        summary: "SIGKILL a majority: no acquisition may succeed until it is restarted",
    },
    Scenario {
        kind: ScenarioKind::PauseMinorityShort,
        name: "pause-minority-short",
        in_model: true,
        summary: "SIGSTOP a minority repeatedly, each time for half a TTL",
    },
    Scenario {
        kind: ScenarioKind::PauseMinorityLong,
        name: "pause-minority-long",
        in_model: true,
        summary: "SIGSTOP a minority for two TTLs, repeatedly",
    },
    Scenario {
        kind: ScenarioKind::RestartMinorityKeep,
        name: "restart-minority-keep",
        in_model: true,
        summary: "crash-restart a minority every TTL/3 to 2TTL/3, AOF (fsync always) kept",
    },
    Scenario {
        kind: ScenarioKind::RestartMinorityWipeImmediate,
        name: "restart-minority-wipe-immediate",
        in_model: false,
        summary: "crash-restart a minority every TTL/10 to TTL/5 with its data wiped: held keys vanish",
    },
    Scenario {
        kind: ScenarioKind::RestartMinorityWipeDelayed,
        name: "restart-minority-wipe-delayed",
        in_model: true,
        summary: "kill a minority, wipe it, restart it only after 1.5 TTLs, repeatedly",
    },
    Scenario {
        kind: ScenarioKind::Latency,
        name: "latency",
        in_model: true,
        summary: "add about TTL/20 latency each way on every master",
    },
    Scenario {
        kind: ScenarioKind::Blackhole,
        name: "blackhole",
        in_model: true,
        summary: "blackhole a minority of masters (requests vanish, no answers)",
    },
    Scenario {
        kind: ScenarioKind::ResetMinority,
        name: "reset-minority",
        in_model: true,
        summary: "reset every connection to a minority of masters, and each new one at once",
    },
    Scenario {
        kind: ScenarioKind::Partition,
        name: "partition",
        in_model: true,
        summary: "two client groups: one sees only a minority, the other a majority",
    },
    Scenario {
        kind: ScenarioKind::SplitMajorities,
        name: "split-majorities",
        in_model: true,
        summary: "five client groups, each cut off from a different master: each keeps a different majority",
    },
    Scenario {
        kind: ScenarioKind::ClockJump,
        name: "clock-jump",
        in_model: false,
        summary: "jump one master's wall clock forward by two TTLs, twice",
    },
    Scenario {
        kind: ScenarioKind::ClientPause,
        name: "client-pause",
        in_model: false,
        summary: "stall a client inside its hold for two TTLs (past its validity), twice",
    },
];

/// The operations (compose only, see the module docs), in the order `list` shows them. Each is
/// in model: with quorlock's defaults it must show no violation, and its negative control (the
/// one client rule that covers it, switched off) must.
pub const OPERATIONS: [Scenario; 3] = [
    Scenario {
        kind: ScenarioKind::Failover,
        name: "failover",
        in_model: true,
        summary: "kill a master, promote its lagging replica and move the master's name to it (compose)",
    },
    Scenario {
        kind: ScenarioKind::RuntimeDowngrade,
        name: "runtime-downgrade",
        in_model: true,
        summary:
            "lower a durable master's persistence with CONFIG SET, then SIGKILL and restart it (compose)",
    },
    Scenario {
        kind: ScenarioKind::Eviction,
        name: "eviction",
        in_model: true,
        summary: "fill a master with a small maxmemory and volatile-ttl until it evicts a held key (compose)",
    },
];

/// Client groups of `split-majorities`: group `g` is cut off from master `g % masters`.
pub const SPLIT_GROUPS: usize = 5;

/// Looks a scenario up by name, among the fault schedules and the operations.
pub fn find(name: &str) -> Result<&'static Scenario, HarnessError> {
    let every = || SCENARIOS.iter().chain(&OPERATIONS);
    every()
        .find(|s| s.name == name)
        .ok_or_else(|| HarnessError::UnknownScenario {
            name: name.to_string(),
            known: every().map(|s| s.name).collect::<Vec<_>>().join(", "),
        })
}

/// Inputs of a schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleParams {
    /// Seed for every random choice.
    pub seed: u64,
    /// Run length.
    pub duration: Duration,
    /// Number of masters.
    pub masters: usize,
    /// Lock TTL the clients use.
    pub ttl: Duration,
    /// Number of clients.
    pub clients: usize,
}

impl Scenario {
    /// Number of client groups (each with its own proxies) the scenario needs.
    pub fn groups(&self) -> usize {
        match self.kind {
            ScenarioKind::Partition => 2,
            ScenarioKind::SplitMajorities => SPLIT_GROUPS,
            _ => 1,
        }
    }

    /// `true` for the operations ([`OPERATIONS`]), which only the compose backend's operations
    /// driver runs.
    pub fn is_operation(&self) -> bool {
        matches!(
            self.kind,
            ScenarioKind::Failover | ScenarioKind::RuntimeDowngrade | ScenarioKind::Eviction
        )
    }

    /// `true` if clients must connect through proxies.
    pub fn needs_proxies(&self) -> bool {
        matches!(
            self.kind,
            ScenarioKind::Latency
                | ScenarioKind::Blackhole
                | ScenarioKind::ResetMinority
                | ScenarioKind::Partition
                | ScenarioKind::SplitMajorities
        )
    }

    /// The faults to inject, sorted by time. Pure: same inputs, same schedule.
    pub fn schedule(&self, p: &ScheduleParams) -> Vec<ScheduledFault> {
        let mut rng = SplitMix64::new(p.seed ^ fnv1a(self.name));
        let d = p.duration;
        let ttl = p.ttl;
        let n = p.masters;
        let minority = n.saturating_sub(1) / 2;
        let majority = n / 2 + 1;
        let frac = |f: f64| d.mul_f64(f);
        let mut out: Vec<ScheduledFault> = Vec::new();
        let mut push = |at: Duration, action: FaultAction| out.push(ScheduledFault { at, action });
        match self.kind {
            // The operations are steps, not a schedule: `compose::operations` applies them.
            ScenarioKind::None
            | ScenarioKind::Failover
            | ScenarioKind::RuntimeDowngrade
            | ScenarioKind::Eviction => {}
            ScenarioKind::KillMinority => {
                let set = rng.pick(n, minority);
                let kill = frac(0.2) + rng.jitter(frac(0.05));
                let restart = frac(0.6) + rng.jitter(frac(0.05));
                for &m in &set {
                    push(kill, FaultAction::Kill(m));
                }
                for &m in &set {
                    push(restart, FaultAction::Restart(m, DataMode::Keep));
                }
            }
            ScenarioKind::KillMajority => {
                let set = rng.pick(n, majority.min(n));
                for &m in &set {
                    push(frac(0.25), FaultAction::Kill(m));
                }
                for &m in &set {
                    push(frac(0.55), FaultAction::Restart(m, DataMode::Keep));
                }
            }
            ScenarioKind::PauseMinorityShort => {
                let pause = ttl / 2;
                let mut t = frac(0.15);
                while t + pause < frac(0.8) {
                    let set = rng.pick(n, minority);
                    for &m in &set {
                        push(t, FaultAction::Pause(m));
                    }
                    for &m in &set {
                        push(t + pause, FaultAction::Resume(m));
                    }
                    t += pause + ttl + rng.jitter(ttl / 2);
                }
            }
            ScenarioKind::PauseMinorityLong => {
                // At least one cycle; long runs repeat it (a fresh minority each time) so that
                // most of the run is spent with a minority stalled.
                let pause = ttl * 2;
                let mut t = frac(0.2);
                loop {
                    let set = rng.pick(n, minority);
                    for &m in &set {
                        push(t, FaultAction::Pause(m));
                    }
                    for &m in &set {
                        push(t + pause, FaultAction::Resume(m));
                    }
                    t += pause + ttl / 2 + rng.jitter(ttl / 2);
                    if t + pause >= frac(0.8) {
                        break;
                    }
                }
            }
            ScenarioKind::RestartMinorityKeep | ScenarioKind::RestartMinorityWipeImmediate => {
                let data = if self.kind == ScenarioKind::RestartMinorityKeep {
                    DataMode::Keep
                } else {
                    DataMode::Wipe
                };
                // Rolling restarts, a fresh minority each time. Wiping ones come faster than
                // a hold lasts, so a holder that got in while one master was down can lose
                // another master's key before its validity ends.
                let gap = if data == DataMode::Keep { ttl / 3 } else { ttl / 10 };
                let mut t = frac(0.15);
                while t < frac(0.75) {
                    for m in rng.pick(n, minority) {
                        push(t, FaultAction::Restart(m, data));
                    }
                    t += gap + rng.jitter(gap);
                }
            }
            ScenarioKind::RestartMinorityWipeDelayed => {
                // At least one cycle; long runs repeat it with a fresh minority each time.
                // Cycles never overlap, so at most a minority is ever down.
                let down = ttl + ttl / 2;
                let mut kill = frac(0.2);
                loop {
                    let set = rng.pick(n, minority);
                    for &m in &set {
                        push(kill, FaultAction::Kill(m));
                    }
                    for &m in &set {
                        push(kill + down, FaultAction::Restart(m, DataMode::Wipe));
                    }
                    kill += down + ttl / 2 + rng.jitter(ttl / 2);
                    if kill + down >= frac(0.8) {
                        break;
                    }
                }
            }
            ScenarioKind::Latency => {
                let base = ttl / 20;
                for m in 0..n {
                    let delay = base / 2 + rng.jitter(base);
                    push(frac(0.2), FaultAction::Latency(m, delay));
                }
                push(frac(0.7), FaultAction::HealNetwork);
            }
            ScenarioKind::Blackhole => {
                for m in rng.pick(n, minority) {
                    push(frac(0.2), FaultAction::Blackhole(m));
                }
                push(frac(0.6), FaultAction::HealNetwork);
            }
            ScenarioKind::ResetMinority => {
                // Clients reconnect again and again meanwhile; after the heal each must
                // check the master's identity again before its votes count.
                for m in rng.pick(n, minority) {
                    push(frac(0.2), FaultAction::Reset(m));
                }
                push(frac(0.6), FaultAction::HealNetwork);
            }
            ScenarioKind::Partition => {
                let mut side = rng.pick(n, majority.min(n));
                side.sort();
                let rest: Vec<usize> = (0..n).filter(|m| !side.contains(m)).collect();
                push(
                    frac(0.2),
                    FaultAction::Partition {
                        group: 0,
                        masters: side,
                    },
                );
                push(
                    frac(0.2),
                    FaultAction::Partition {
                        group: 1,
                        masters: rest,
                    },
                );
                push(frac(0.6), FaultAction::HealNetwork);
            }
            ScenarioKind::SplitMajorities => {
                // Cutting one master off leaves a majority only from three masters on.
                if n >= 3 {
                    for group in 0..SPLIT_GROUPS {
                        push(
                            frac(0.1),
                            FaultAction::Partition {
                                group,
                                masters: vec![group % n],
                            },
                        );
                    }
                    push(frac(0.8), FaultAction::HealNetwork);
                }
            }
            ScenarioKind::ClockJump => {
                let m = rng.below(n);
                push(frac(0.3), FaultAction::ClockJump(m, ttl * 2));
                push(frac(0.6), FaultAction::ClockJump(m, ttl * 2));
            }
            ScenarioKind::ClientPause => {
                if p.clients > 0 {
                    push(frac(0.3), FaultAction::PauseClient(rng.below(p.clients), ttl * 2));
                    push(frac(0.6), FaultAction::PauseClient(rng.below(p.clients), ttl * 2));
                }
            }
        }
        out.sort_by_key(|f| f.at); // stable: simultaneous actions keep their order
        out
    }
}

/// A small, stable PRNG (SplitMix64), so schedules do not change with dependency upgrades.
#[derive(Debug, Clone)]
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 if `n` is 0).
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let n64 = u64::try_from(n).unwrap_or(u64::MAX);
        usize::try_from(self.next() % n64).unwrap_or(0)
    }

    /// Uniform in `[0, max)`.
    fn jitter(&mut self, max: Duration) -> Duration {
        let unit = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
        max.mul_f64(unit)
    }

    /// `k` distinct values of `0..n`, in random order.
    fn pick(&mut self, n: usize, k: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..n).collect();
        for i in (1..all.len()).rev() {
            let j = self.below(i + 1);
            all.swap(i, j);
        }
        all.truncate(k.min(n));
        all
    }
}

/// FNV-1a of a name, so each scenario draws a different stream from the same seed.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::availability::{no_majority_windows, AppliedFault};

    fn params(seed: u64) -> ScheduleParams {
        ScheduleParams {
            seed,
            duration: Duration::from_secs(30),
            masters: 5,
            ttl: Duration::from_secs(2),
            clients: 8,
        }
    }

    fn no_majority(s: &Scenario, p: &ScheduleParams, group: usize) -> Vec<(Duration, Duration)> {
        let applied: Vec<AppliedFault> = s.schedule(p).iter().map(AppliedFault::from).collect();
        no_majority_windows(&applied, p.masters, group, p.duration)
    }

    #[test]
    fn names_are_unique_and_findable() {
        for s in &SCENARIOS {
            assert_eq!(find(s.name).unwrap(), s);
        }
        let mut names: Vec<&str> = SCENARIOS.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), SCENARIOS.len());
        let err = find("kill-everything").unwrap_err().to_string();
        assert!(
            err.contains("kill-everything") && err.contains("kill-minority"),
            "{err}"
        );
    }

    #[test]
    fn operations_are_findable_apart_from_the_schedules_and_schedule_nothing() {
        for s in &OPERATIONS {
            assert_eq!(find(s.name).unwrap(), s);
            assert!(s.is_operation() && s.in_model, "{}", s.name);
            assert!(!s.needs_proxies());
            assert_eq!(s.groups(), 1);
            assert!(s.schedule(&params(7)).is_empty(), "{}", s.name);
            assert!(!SCENARIOS.iter().any(|t| t.name == s.name), "{}", s.name);
        }
        assert!(SCENARIOS.iter().all(|s| !s.is_operation()));
        let err = find("failover-twice").unwrap_err().to_string();
        assert!(
            err.contains("runtime-downgrade") && err.contains("partition"),
            "{err}"
        );
    }

    #[test]
    fn schedules_are_pure_functions_of_their_inputs() {
        for s in &SCENARIOS {
            assert_eq!(s.schedule(&params(7)), s.schedule(&params(7)), "{}", s.name);
        }
        let differs = SCENARIOS
            .iter()
            .any(|s| s.schedule(&params(7)) != s.schedule(&params(8)));
        assert!(differs, "the seed changes nothing");
    }

    #[test]
    fn schedules_are_sorted_and_inside_the_masters_and_clients() {
        for seed in 0..20 {
            for s in &SCENARIOS {
                let p = params(seed);
                let schedule = s.schedule(&p);
                assert!(schedule.windows(2).all(|w| w[0].at <= w[1].at), "{}", s.name);
                for f in &schedule {
                    if let Some(m) = f.action.master() {
                        assert!(m < p.masters, "{}: {}", s.name, f.action);
                    }
                    if let FaultAction::PauseClient(c, _) = f.action {
                        assert!(c < p.clients);
                    }
                }
            }
        }
    }

    #[test]
    fn none_injects_nothing() {
        assert!(find("none").unwrap().schedule(&params(1)).is_empty());
    }

    #[test]
    fn only_kill_majority_and_one_partition_side_lose_the_majority() {
        for seed in 0..20 {
            let p = params(seed);
            for s in &SCENARIOS {
                let down = no_majority(s, &p, 0);
                match s.kind {
                    ScenarioKind::KillMajority => {
                        assert_eq!(down, vec![(p.duration.mul_f64(0.25), p.duration.mul_f64(0.55))]);
                    }
                    ScenarioKind::Partition => {
                        assert_eq!(down, vec![(p.duration.mul_f64(0.2), p.duration.mul_f64(0.6))]);
                        assert!(no_majority(s, &p, 1).is_empty(), "group 1 keeps a majority");
                    }
                    _ => assert!(down.is_empty(), "{} loses the majority: {down:?}", s.name),
                }
            }
        }
    }

    #[test]
    fn minority_faults_hit_exactly_a_minority() {
        let p = params(3);
        let kill = find("kill-minority").unwrap().schedule(&p);
        let killed: Vec<usize> = kill
            .iter()
            .filter(|f| matches!(f.action, FaultAction::Kill(_)))
            .filter_map(|f| f.action.master())
            .collect();
        assert_eq!(killed.len(), 2);
        assert_ne!(killed[0], killed[1]);
        let restarted: Vec<usize> = kill
            .iter()
            .filter(|f| matches!(f.action, FaultAction::Restart(_, DataMode::Keep)))
            .filter_map(|f| f.action.master())
            .collect();
        assert_eq!(restarted, killed);
    }

    #[test]
    fn pauses_are_shorter_or_longer_than_the_ttl_as_named() {
        let p = params(5);
        for (name, longer) in [("pause-minority-short", false), ("pause-minority-long", true)] {
            let schedule = find(name).unwrap().schedule(&p);
            let mut cycles = 0;
            for f in &schedule {
                if let FaultAction::Pause(m) = f.action {
                    let resume = schedule
                        .iter()
                        .find(|r| r.at >= f.at && r.action == FaultAction::Resume(m))
                        .unwrap();
                    let paused = resume.at - f.at;
                    assert_eq!(paused > p.ttl, longer, "{name}: paused {paused:?}");
                    cycles += 1;
                }
            }
            assert!(cycles >= 2, "{name}: {cycles} pauses");
        }
    }

    #[test]
    fn a_delayed_wipe_restarts_more_than_a_ttl_after_the_kill() {
        let p = params(9);
        let schedule = find("restart-minority-wipe-delayed").unwrap().schedule(&p);
        let kill = schedule
            .iter()
            .find(|f| matches!(f.action, FaultAction::Kill(_)))
            .unwrap();
        let wipe = schedule
            .iter()
            .find(|f| matches!(f.action, FaultAction::Restart(_, DataMode::Wipe)))
            .unwrap();
        assert!(wipe.at - kill.at > p.ttl);
        let immediate = find("restart-minority-wipe-immediate").unwrap();
        assert!(!immediate.in_model);
        assert!(immediate
            .schedule(&p)
            .iter()
            .all(|f| matches!(f.action, FaultAction::Restart(_, DataMode::Wipe))));
    }

    #[test]
    fn long_runs_repeat_minority_cycles_without_ever_downing_a_majority() {
        let p = ScheduleParams {
            duration: Duration::from_secs(600),
            ..params(21)
        };
        for name in ["pause-minority-long", "restart-minority-wipe-delayed"] {
            let schedule = find(name).unwrap().schedule(&p);
            let mut down = std::collections::BTreeSet::new();
            let mut cycles = 0;
            for f in &schedule {
                match f.action {
                    FaultAction::Kill(m) | FaultAction::Pause(m) => {
                        down.insert(m);
                        cycles += 1;
                    }
                    FaultAction::Restart(m, _) | FaultAction::Resume(m) => {
                        down.remove(&m);
                    }
                    _ => {}
                }
                assert!(down.len() <= 2, "{name}: {down:?} down at {:?}", f.at);
            }
            assert!(down.is_empty(), "{name} leaves {down:?} down");
            assert!(cycles >= 100, "{name}: only {cycles} faults in 10 minutes");
        }
    }

    #[test]
    fn rolling_restarts_are_frequent_and_hit_different_masters() {
        let p = params(17);
        let schedule = find("restart-minority-keep").unwrap().schedule(&p);
        assert!(schedule.len() >= 20, "{} restarts", schedule.len());
        assert!(schedule.windows(2).all(|w| w[1].at - w[0].at <= p.ttl * 2 / 3));
        let hit: std::collections::BTreeSet<usize> =
            schedule.iter().filter_map(|f| f.action.master()).collect();
        assert!(hit.len() >= 3, "{hit:?}");
    }

    #[test]
    fn latency_stays_well_below_the_ttl_and_is_healed() {
        let p = params(11);
        let schedule = find("latency").unwrap().schedule(&p);
        let delays: Vec<Duration> = schedule
            .iter()
            .filter_map(|f| match f.action {
                FaultAction::Latency(_, d) => Some(d),
                _ => None,
            })
            .collect();
        assert_eq!(delays.len(), 5);
        assert!(delays.iter().all(|&d| d > Duration::ZERO && d < p.ttl / 10));
        assert_eq!(schedule.last().unwrap().action, FaultAction::HealNetwork);
    }

    #[test]
    fn network_minority_faults_hit_a_minority_from_20_to_60_percent_then_heal() {
        for seed in 0..20 {
            let p = params(seed);
            for name in ["blackhole", "reset-minority"] {
                let s = find(name).unwrap();
                assert!(s.in_model && s.needs_proxies(), "{name}");
                let schedule = s.schedule(&p);
                let (faults, heals): (Vec<&ScheduledFault>, Vec<&ScheduledFault>) = schedule
                    .iter()
                    .partition(|f| f.action != FaultAction::HealNetwork);
                let mut hit: Vec<usize> = faults
                    .iter()
                    .map(|f| {
                        assert_eq!(f.at, p.duration.mul_f64(0.2), "{name}: {}", f.action);
                        match (name, &f.action) {
                            ("blackhole", FaultAction::Blackhole(m))
                            | ("reset-minority", FaultAction::Reset(m)) => *m,
                            _ => panic!("{name} schedules {}", f.action),
                        }
                    })
                    .collect();
                hit.sort();
                hit.dedup();
                assert_eq!(hit.len(), 2, "{name}: {hit:?}");
                assert_eq!(heals.len(), 1, "{name}");
                assert_eq!(heals[0].at, p.duration.mul_f64(0.6), "{name}");
                assert_eq!(schedule.last().unwrap().action, FaultAction::HealNetwork);
            }
        }
    }

    #[test]
    fn partition_sides_cover_all_masters_once() {
        let p = params(13);
        let schedule = find("partition").unwrap().schedule(&p);
        let mut cut: Vec<usize> = schedule
            .iter()
            .filter_map(|f| match &f.action {
                FaultAction::Partition { masters, .. } => Some(masters.clone()),
                _ => None,
            })
            .flatten()
            .collect();
        cut.sort();
        assert_eq!(cut, vec![0, 1, 2, 3, 4]);
        assert_eq!(find("partition").unwrap().groups(), 2);
    }

    #[test]
    fn split_majorities_cut_each_group_off_from_a_different_master() {
        let s = find("split-majorities").unwrap();
        assert_eq!(s.groups(), SPLIT_GROUPS);
        let p = params(5);
        let cut: Vec<(usize, Vec<usize>)> = s
            .schedule(&p)
            .iter()
            .filter_map(|f| match &f.action {
                FaultAction::Partition { group, masters } => Some((*group, masters.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(cut, (0..5).map(|g| (g, vec![g])).collect::<Vec<_>>());
        for group in 0..SPLIT_GROUPS {
            assert!(no_majority(s, &p, group).is_empty(), "group {group}");
        }
        let two = ScheduleParams { masters: 2, ..p };
        assert!(
            s.schedule(&two).is_empty(),
            "with 2 masters a cut would take the majority"
        );
    }

    #[test]
    fn out_of_model_scenarios_are_flagged() {
        let out: Vec<&str> = SCENARIOS.iter().filter(|s| !s.in_model).map(|s| s.name).collect();
        assert_eq!(
            out,
            vec!["restart-minority-wipe-immediate", "clock-jump", "client-pause"]
        );
        let jumps = find("clock-jump").unwrap().schedule(&params(1));
        assert!(jumps
            .iter()
            .all(|f| matches!(f.action, FaultAction::ClockJump(_, d) if d > params(1).ttl)));
        let stalls = find("client-pause").unwrap().schedule(&params(1));
        assert!(stalls
            .iter()
            .all(|f| matches!(f.action, FaultAction::PauseClient(_, d) if d > params(1).ttl)));
    }

    #[test]
    fn a_single_master_gets_no_minority_faults() {
        let p = ScheduleParams {
            masters: 1,
            ..params(1)
        };
        assert!(find("kill-minority").unwrap().schedule(&p).is_empty());
        let reset = find("reset-minority").unwrap().schedule(&p);
        assert_eq!(
            reset,
            vec![ScheduledFault {
                at: p.duration.mul_f64(0.6),
                action: FaultAction::HealNetwork
            }]
        );
        assert_eq!(find("kill-majority").unwrap().schedule(&p).len(), 2);
    }

    #[test]
    fn the_prng_is_stable() {
        // Pinned so that a schedule printed for a seed stays reproducible.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(rng.next(), 0x6E78_9E6A_A1B9_65F4);
    }
}
