//! The seeded plan of the operations a run with them goes through, on top of the classic faults
//! (`fault::plan`, drawn as before, so that the classic mix keeps its weight): replicas promoted
//! behind a master's address (the clients' connections dropped, or kept as behind a proxy),
//! servers that never had the data put behind an address, `CONFIG SET appendfsync` at runtime,
//! more crashes (of `everysec` masters among them, which lose the last second), a memory filler
//! on the masters with a limit, long scripts that make a master answer `BUSY`, and partitions and
//! blackholes whose requests are executed late, at the heal. Each is an in-model [`Fault`]; the VM
//! rollback, out of model, is drawn only for its control ([`plan_rollbacks`]).

use rand::rngs::StdRng;
use rand::RngExt;

use super::controls::Control;
use super::fault::{Fault, Planned};

/// What an operations plan may contain.
#[derive(Debug, Clone)]
pub struct OperationsShape {
    /// Lock masters.
    pub masters: usize,
    /// Clients (the one started mid-run included).
    pub clients: usize,
    /// The run's length in simulated ms; operations start in its first 80 %.
    pub run_ms: u64,
    /// Mean gap between operations.
    pub mean_gap_ms: u64,
    /// The masters with a memory limit (the filler's targets).
    pub limited: Vec<usize>,
    /// Whether the variants that keep the clients' connections are drawn: out of model (a server
    /// swapped behind a proxy that keeps them is seen at each client's next check only), so only
    /// under the `kept-connections` control.
    pub keep_connections: bool,
}

/// Draws an operations plan from `rng`, ordered by start.
pub fn plan_operations(rng: &mut StdRng, shape: &OperationsShape) -> Vec<Planned> {
    let mut plan = Vec::new();
    let horizon = shape.run_ms * 4 / 5;
    let gap = shape.mean_gap_ms.max(1);
    let mut at = rng.random_range(0..=gap);
    while at < horizon {
        let master = rng.random_range(0..shape.masters);
        let client = rng.random_range(0..shape.clients);
        // Drawn whether or not the shape allows it, so that the rest of the plan stays the same.
        let keep = rng.random_ratio(1, 3) && shape.keep_connections;
        let fault = match rng.random_range(0..20u8) {
            0..=2 => Fault::Promote {
                master,
                lag_ms: rng.random_range(0..=300),
                keep_connections: keep,
            },
            3 | 4 => Fault::Replace {
                master,
                uptime_s: rng.random_range(3_600..=864_000),
                keep_connections: keep,
            },
            5..=7 => Fault::Appendfsync {
                master,
                always: rng.random_ratio(1, 3),
            },
            8 | 9 => Fault::Crash {
                master,
                ms: rng.random_range(0..=1_500),
            },
            10 | 11 if !shape.limited.is_empty() => Fault::Fill {
                master: shape.limited[rng.random_range(0..shape.limited.len())],
                ms: rng.random_range(300..=3_000),
            },
            10..=13 => Fault::Busy {
                master,
                ms: rng.random_range(50..=2_500),
                busy_after_ms: rng.random_range(20..=500),
            },
            14..=17 => Fault::Partition {
                client,
                master,
                ms: rng.random_range(50..=2_000),
                late: true,
            },
            _ => Fault::Blackhole {
                master,
                ms: rng.random_range(50..=2_000),
                late: true,
            },
        };
        plan.push(Planned { at_ms: at, fault });
        at += rng.random_range(1..=2 * gap);
    }
    plan
}

/// Out of model, for the `vm-rollback` control: masters restored from snapshots of themselves
/// taken 0.5 to 2 s earlier, with the same `run_id`, one every `mean_gap_ms` on average.
pub fn plan_rollbacks(rng: &mut StdRng, masters: usize, run_ms: u64, mean_gap_ms: u64) -> Vec<Planned> {
    let mut plan = Vec::new();
    let horizon = run_ms * 4 / 5;
    let gap = mean_gap_ms.max(1);
    let mut at = rng.random_range(0..=gap);
    while at < horizon {
        plan.push(Planned {
            at_ms: at,
            fault: Fault::Rollback {
                master: rng.random_range(0..masters),
                age_ms: rng.random_range(500..=2_000),
            },
        });
        at += rng.random_range(1..=2 * gap);
    }
    plan
}

/// The classic plan and the operations, one plan ordered by start (the classic fault first of two
/// at the same instant).
pub fn merge(mut classic: Vec<Planned>, operations: Vec<Planned>) -> Vec<Planned> {
    classic.extend(operations);
    classic.sort_by_key(|p| p.at_ms);
    classic
}

/// The plan of a control that removes one of the library's mechanisms: only what that mechanism
/// answers, aimed at a majority at once (one master's loss never shows, the others' grants still
/// stand), every `mean_gap_ms` on average; `None` for the other controls. The same plan with the
/// mechanism in place must pass: every operation here is in model.
pub fn plan_for_control(
    rng: &mut StdRng,
    control: Control,
    masters: usize,
    run_ms: u64,
) -> Option<Vec<Planned>> {
    match control {
        Control::WithoutReplacedRule
        | Control::WithoutDurabilityRule
        | Control::WithoutEvictionRule
        | Control::WithoutEpochCheck => {}
        // Its check is judged with no fault in the way.
        other if other.removes_mechanism() => return Some(Vec::new()),
        _ => return None,
    }
    let majority = masters / 2 + 1;
    let mut plan = Vec::new();
    let horizon = run_ms * 4 / 5;
    let gap = 2_000;
    let mut at = rng.random_range(0..=gap);
    while at < horizon {
        let first = rng.random_range(0..masters);
        let chosen = (0..majority).map(|i| (first + i) % masters);
        match control {
            Control::WithoutReplacedRule => {
                let promote = rng.random_bool(0.5);
                // The connections drop: behind a proxy that keeps them, the swap is seen at each
                // client's next check only, which is out of model (see `Control::KeptConnections`).
                for master in chosen {
                    let keep_connections = false;
                    let fault = if promote {
                        Fault::Promote {
                            master,
                            lag_ms: rng.random_range(200..=600),
                            keep_connections,
                        }
                    } else {
                        Fault::Replace {
                            master,
                            uptime_s: rng.random_range(3_600..=864_000),
                            keep_connections,
                        }
                    };
                    plan.push(Planned { at_ms: at, fault });
                }
            }
            Control::WithoutDurabilityRule => {
                // Lowered, seen so by a check (the clients check every few hundred ms), then
                // crashed together: each loses up to its last second, and restarts reporting the
                // `always` of its configuration file.
                let crash_at = at + rng.random_range(700..=1_200);
                for master in chosen {
                    plan.push(Planned {
                        at_ms: at,
                        fault: Fault::Appendfsync {
                            master,
                            always: false,
                        },
                    });
                    plan.push(Planned {
                        at_ms: crash_at,
                        fault: Fault::Crash {
                            master,
                            ms: rng.random_range(0..=100),
                        },
                    });
                }
                at = crash_at;
            }
            Control::WithoutEpochCheck => {
                // Every master at once (a power loss): whichever majority grants next, none of it
                // kept the increments of its last second.
                for master in 0..masters {
                    plan.push(Planned {
                        at_ms: at,
                        fault: Fault::Crash {
                            master,
                            ms: rng.random_range(0..=100),
                        },
                    });
                }
            }
            Control::WithoutEvictionRule => {
                let ms = rng.random_range(1_000..=3_000);
                for master in 0..majority {
                    plan.push(Planned {
                        at_ms: at,
                        fault: Fault::Fill { master, ms },
                    });
                }
                at += ms;
            }
            _ => {}
        }
        at += rng.random_range(1..=2 * gap);
    }
    plan.sort_by_key(|p| p.at_ms);
    Some(plan)
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn every_operation_is_drawn_and_in_model() {
        let shape = OperationsShape {
            masters: 5,
            clients: 7,
            run_ms: 600_000,
            mean_gap_ms: 500,
            limited: vec![2],
            keep_connections: true,
        };
        let plan = plan_operations(&mut StdRng::seed_from_u64(1), &shape);
        let kinds: std::collections::BTreeSet<&str> = plan.iter().map(|p| p.fault.kind()).collect();
        assert_eq!(kinds.len(), 11, "{kinds:?}");
        assert!(plan.iter().all(|p| p.fault.in_model()));
        assert!(plan.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        let fills = plan.iter().filter(|p| matches!(p.fault, Fault::Fill { .. }));
        assert!(fills.clone().count() > 0 && fills.into_iter().all(|p| p.fault.master() == 2));
    }
}
