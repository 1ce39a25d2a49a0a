//! The faults a simulated run injects, and the seeded plan of when. A plan is drawn from the
//! run's generator before anything runs, so the same seed gives the same faults at the same
//! simulated instants. In-model faults are the ones RedLock (with quorlock's restart grace and
//! fencing) claims to survive; the out-of-model ones exist for the negative controls.

use rand::rngs::StdRng;
use rand::RngExt;

/// One fault, with its length where it has one (in simulated ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Client `client` and master `master` cannot reach each other: requests and replies vanish
    /// (the client times out); the connection resets at the heal.
    Partition {
        /// The client.
        client: usize,
        /// The master.
        master: usize,
        /// How long.
        ms: u64,
    },
    /// Master `master` accepts requests and never answers (a stopped process, a dropping
    /// firewall); its connections reset at the heal.
    Blackhole {
        /// The master.
        master: usize,
        /// How long.
        ms: u64,
    },
    /// Every connection of client `client` to master `master` resets now.
    Reset {
        /// The client.
        client: usize,
        /// The master.
        master: usize,
    },
    /// Master `master` answers `extra_ms` later than usual, for `ms`.
    Slow {
        /// The master.
        master: usize,
        /// Added one-way delay.
        extra_ms: u64,
        /// How long.
        ms: u64,
    },
    /// Master `master` crashes, stays down for `ms`, and restarts, keeping its data only if it
    /// persists every write.
    Crash {
        /// The master.
        master: usize,
        /// How long it is down.
        ms: u64,
    },
    /// Out of model: master `master`'s clock jumps forward by `ms` at once.
    ClockJump {
        /// The master.
        master: usize,
        /// The jump.
        ms: u64,
    },
}

impl Fault {
    /// How long the fault lasts (0 for an instant one).
    pub fn duration_ms(&self) -> u64 {
        match self {
            Fault::Partition { ms, .. }
            | Fault::Blackhole { ms, .. }
            | Fault::Slow { ms, .. }
            | Fault::Crash { ms, .. } => *ms,
            Fault::Reset { .. } | Fault::ClockJump { .. } => 0,
        }
    }

    /// A short label for the history and reports.
    pub fn label(&self) -> String {
        match self {
            Fault::Partition { client, master, ms } => format!("partition c{client}-m{master} {ms}ms"),
            Fault::Blackhole { master, ms } => format!("blackhole m{master} {ms}ms"),
            Fault::Reset { client, master } => format!("reset c{client}-m{master}"),
            Fault::Slow { master, extra_ms, ms } => format!("slow m{master} +{extra_ms}ms {ms}ms"),
            Fault::Crash { master, ms } => format!("crash m{master} {ms}ms"),
            Fault::ClockJump { master, ms } => format!("clock jump m{master} +{ms}ms"),
        }
    }
}

/// A fault and when it starts, in simulated ms from the run start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// Start.
    pub at_ms: u64,
    /// The fault.
    pub fault: Fault,
}

/// What a plan may contain.
#[derive(Debug, Clone, Copy)]
pub struct PlanShape {
    /// Lock masters.
    pub masters: usize,
    /// Clients.
    pub clients: usize,
    /// The run's length in simulated ms; faults start in its first 80 %.
    pub run_ms: u64,
    /// Mean gap between faults.
    pub mean_gap_ms: u64,
    /// Out of model: jump a master's clock by this much now and then.
    pub clock_jump_ms: Option<u64>,
    /// Out of model with the restart grace off: every fault is a crash with an immediate restart.
    pub instant_crashes: bool,
}

/// Draws a plan of in-model faults (plus clock jumps when asked) from `rng`.
pub fn plan(rng: &mut StdRng, shape: PlanShape) -> Vec<Planned> {
    let mut plan = Vec::new();
    let horizon = shape.run_ms * 4 / 5;
    let mut at = rng.random_range(0..=shape.mean_gap_ms.max(1));
    while at < horizon {
        let master = rng.random_range(0..shape.masters);
        let client = rng.random_range(0..shape.clients);
        let fault = match shape.clock_jump_ms {
            Some(jump) if rng.random_bool(0.5) => Fault::ClockJump { master, ms: jump },
            _ if shape.instant_crashes => Fault::Crash { master, ms: 0 },
            _ => match rng.random_range(0..6u8) {
                0 => Fault::Partition {
                    client,
                    master,
                    ms: rng.random_range(50..=2_000),
                },
                1 => Fault::Blackhole {
                    master,
                    ms: rng.random_range(50..=2_000),
                },
                2 => Fault::Reset { client, master },
                3 => Fault::Slow {
                    master,
                    extra_ms: rng.random_range(5..=150),
                    ms: rng.random_range(100..=2_000),
                },
                _ => Fault::Crash {
                    master,
                    ms: rng.random_range(0..=1_500),
                },
            },
        };
        plan.push(Planned { at_ms: at, fault });
        at += rng.random_range(1..=2 * shape.mean_gap_ms.max(1));
    }
    plan
}

/// Out of model: client `client`'s clock stands still for `ms` from `at_ms` (simulated ms from the
/// run start) while the client keeps running (the `client-clock-stall` control).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClockStall {
    /// The client.
    pub client: usize,
    /// Start.
    pub at_ms: u64,
    /// How long its clock stands still.
    pub ms: u64,
}

impl ClockStall {
    /// A short label for the history and reports.
    pub fn label(&self) -> String {
        format!("clock stall c{} {}ms", self.client, self.ms)
    }
}

/// Draws each client's clock stalls of `ms` from `rng`, in the first 80 % of a run of `run_ms`,
/// one every `mean_gap_ms` on average after the previous one ended, ordered by start.
pub fn plan_stalls(
    rng: &mut StdRng,
    clients: usize,
    run_ms: u64,
    ms: u64,
    mean_gap_ms: u64,
) -> Vec<ClockStall> {
    let horizon = run_ms / 5 * 4;
    let mut stalls = Vec::new();
    for client in 0..clients {
        let mut at = rng.random_range(0..=mean_gap_ms.max(1));
        while at < horizon {
            stalls.push(ClockStall {
                client,
                at_ms: at,
                ms,
            });
            at = at
                .saturating_add(ms)
                .saturating_add(rng.random_range(1..=mean_gap_ms.max(1).saturating_mul(2)));
        }
    }
    stalls.sort_by_key(|s| (s.at_ms, s.client));
    stalls
}
