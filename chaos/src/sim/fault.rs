//! The faults a simulated run injects, and the seeded plan of the network and process faults. A
//! plan is drawn from the run's generator before anything runs, so the same seed gives the same
//! faults at the same simulated instants. In-model faults are the ones RedLock (with quorlock's
//! restart grace, records and fencing) claims to survive; the out-of-model ones exist for the
//! negative controls. The operations (replicas promoted, servers replaced, `CONFIG SET`, memory
//! fillers, long scripts, late delivery, VM rollbacks) are faults here too; their plan is drawn
//! in `operations.rs`.

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
        /// The variant in which the connection survives (TCP retransmits): what the partition
        /// held is delivered and executed at the heal, late, and nothing resets.
        late: bool,
    },
    /// Master `master` accepts requests and never answers (a stopped process, a dropping
    /// firewall); its connections reset at the heal.
    Blackhole {
        /// The master.
        master: usize,
        /// How long.
        ms: u64,
        /// As for a partition: what it held is executed at the heal, and nothing resets.
        late: bool,
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
    /// Master `master`'s replica, lagging by `lag_ms`, is promoted behind its address (the master
    /// is gone, or was down already): its data is what had replicated `lag_ms` ago, its `run_id`
    /// and uptime its own, and it says it took over another server's history.
    Promote {
        /// The master.
        master: usize,
        /// The replication lag.
        lag_ms: u64,
        /// The variant behind a proxy that keeps the clients' connections: they are not reset,
        /// and their next command reaches the new server.
        keep_connections: bool,
    },
    /// Another server, which never had the data, answers at master `master`'s address from now
    /// on: a new `run_id`, an empty keyspace, up for `uptime_s` already.
    Replace {
        /// The master.
        master: usize,
        /// How long the newcomer has been up.
        uptime_s: u64,
        /// As for a promotion: the clients' connections are kept.
        keep_connections: bool,
    },
    /// `CONFIG SET appendfsync always` (or `everysec`) on master `master`, at runtime: what it
    /// reports changes now, and its configuration file comes back at its next restart.
    Appendfsync {
        /// The master.
        master: usize,
        /// `always`, else `everysec`.
        always: bool,
    },
    /// A filler (a cache sharing the server) writes 1 KB values with a short TTL to master
    /// `master`, 100 a second, for `ms`: memory fills up to its `maxmemory`, if it has one.
    Fill {
        /// The master.
        master: usize,
        /// How long.
        ms: u64,
    },
    /// Another client's script runs for `ms` on master `master`: for the first `busy_after_ms`
    /// the master does not answer at all (what arrives waits), then it answers `BUSY` to
    /// everything until the script ends.
    Busy {
        /// The master.
        master: usize,
        /// How long the script runs.
        ms: u64,
        /// When it starts answering `BUSY` (`busy-reply-threshold`).
        busy_after_ms: u64,
    },
    /// Out of model: master `master` is restored from a snapshot of itself taken `age_ms` ago
    /// with the same `run_id` (a VM rolled back); its connections reset.
    Rollback {
        /// The master.
        master: usize,
        /// How old the snapshot is.
        age_ms: u64,
    },
}

impl Fault {
    /// How long the fault lasts (0 for an instant one).
    pub fn duration_ms(&self) -> u64 {
        match self {
            Fault::Partition { ms, .. }
            | Fault::Blackhole { ms, .. }
            | Fault::Slow { ms, .. }
            | Fault::Crash { ms, .. }
            | Fault::Fill { ms, .. }
            | Fault::Busy { ms, .. } => *ms,
            Fault::Reset { .. }
            | Fault::ClockJump { .. }
            | Fault::Promote { .. }
            | Fault::Replace { .. }
            | Fault::Appendfsync { .. }
            | Fault::Rollback { .. } => 0,
        }
    }

    /// Whether it ends with an event of its own (an instant fault does not).
    pub fn has_end(&self) -> bool {
        matches!(
            self,
            Fault::Partition { .. }
                | Fault::Blackhole { .. }
                | Fault::Slow { .. }
                | Fault::Crash { .. }
                | Fault::Fill { .. }
                | Fault::Busy { .. }
        )
    }

    /// The master it acts on.
    pub fn master(&self) -> usize {
        match self {
            Fault::Partition { master, .. }
            | Fault::Blackhole { master, .. }
            | Fault::Reset { master, .. }
            | Fault::Slow { master, .. }
            | Fault::Crash { master, .. }
            | Fault::ClockJump { master, .. }
            | Fault::Promote { master, .. }
            | Fault::Replace { master, .. }
            | Fault::Appendfsync { master, .. }
            | Fault::Fill { master, .. }
            | Fault::Busy { master, .. }
            | Fault::Rollback { master, .. } => *master,
        }
    }

    /// Whether RedLock with quorlock's defaults claims to survive it (the `clock-jump` and
    /// `vm-rollback` controls' faults do not).
    pub fn in_model(&self) -> bool {
        !matches!(self, Fault::ClockJump { .. } | Fault::Rollback { .. })
    }

    /// Its type, as the reports count faults: one name per variant and kind of variant.
    pub fn kind(&self) -> &'static str {
        match self {
            Fault::Partition { late: false, .. } => "partition",
            Fault::Partition { late: true, .. } => "partition, executed late",
            Fault::Blackhole { late: false, .. } => "blackhole",
            Fault::Blackhole { late: true, .. } => "blackhole, executed late",
            Fault::Reset { .. } => "reset",
            Fault::Slow { .. } => "slow",
            Fault::Crash { .. } => "crash",
            Fault::ClockJump { .. } => "clock jump (out of model)",
            Fault::Promote {
                keep_connections: false,
                ..
            } => "replica promoted",
            Fault::Promote {
                keep_connections: true,
                ..
            } => "replica promoted, connections kept",
            Fault::Replace {
                keep_connections: false,
                ..
            } => "server replaced",
            Fault::Replace {
                keep_connections: true,
                ..
            } => "server replaced, connections kept",
            Fault::Appendfsync { always: false, .. } => "config set appendfsync everysec",
            Fault::Appendfsync { always: true, .. } => "config set appendfsync always",
            Fault::Fill { .. } => "memory filler",
            Fault::Busy { .. } => "busy script",
            Fault::Rollback { .. } => "vm rollback (out of model)",
        }
    }

    /// A short label for the history and reports.
    pub fn label(&self) -> String {
        let late = |late: bool| if late { " late" } else { "" };
        let kept = |keep: bool| if keep { " (connections kept)" } else { "" };
        match self {
            Fault::Partition {
                client,
                master,
                ms,
                late: l,
            } => format!("partition c{client}-m{master} {ms}ms{}", late(*l)),
            Fault::Blackhole { master, ms, late: l } => format!("blackhole m{master} {ms}ms{}", late(*l)),
            Fault::Reset { client, master } => format!("reset c{client}-m{master}"),
            Fault::Slow { master, extra_ms, ms } => format!("slow m{master} +{extra_ms}ms {ms}ms"),
            Fault::Crash { master, ms } => format!("crash m{master} {ms}ms"),
            Fault::ClockJump { master, ms } => format!("clock jump m{master} +{ms}ms"),
            Fault::Promote {
                master,
                lag_ms,
                keep_connections,
            } => format!(
                "promote replica m{master} lag {lag_ms}ms{}",
                kept(*keep_connections)
            ),
            Fault::Replace {
                master,
                uptime_s,
                keep_connections,
            } => format!("replace m{master} up {uptime_s}s{}", kept(*keep_connections)),
            Fault::Appendfsync { master, always } => format!(
                "config set appendfsync {} m{master}",
                if *always { "always" } else { "everysec" }
            ),
            Fault::Fill { master, ms } => format!("fill m{master} {ms}ms"),
            Fault::Busy {
                master,
                ms,
                busy_after_ms,
            } => format!("busy script m{master} {ms}ms (BUSY after {busy_after_ms}ms)"),
            Fault::Rollback { master, age_ms } => format!("rollback m{master} to {age_ms}ms ago"),
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
                    late: false,
                },
                1 => Fault::Blackhole {
                    master,
                    ms: rng.random_range(50..=2_000),
                    late: false,
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
