//! The negative controls: runs that break one of the assumptions RedLock's safety rests on, so
//! that the simulation's checks are seen to fail when they should. Each control must report
//! violations within its first few hundred seeds; a control that passes means a check is blind.

use std::fmt;
use std::str::FromStr;

use quorlock::config::Mechanism;

use super::checks::Check;

/// One broken assumption.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Control {
    /// Each client trusts a single master of its own: a quorum of 1.
    QuorumOfOne,
    /// Holders keep working past their validity until they release.
    IgnoreValidity,
    /// Masters without persistence crash and restart at once, and clients do not keep a
    /// restarted master out of their majorities (restart grace off).
    WipeWithoutGrace,
    /// Masters' clocks jump forward by more than the drift allowance.
    ClockJump,
    /// Holders of unfenced locks pause (as in a GC) past their validity, then write.
    PauseUnfenced,
    /// Fair locks take a free lock without waiting for their turn in the queue (the library's
    /// test-only switch), with no fault in the way of the fair-order check.
    FairSkipsQueue,
    /// Clients' own clocks stand still for two TTLs now and then while the clients keep running
    /// (a suspended VM, a broken clock source): a holder believes its lock valid after the
    /// masters expired it.
    ClientClockStall,
    /// Masters are restored from snapshots of themselves 0.5 to 2 s old with the same `run_id` (a
    /// VM rolled back), often: nothing the client can read tells such a master from the one
    /// that granted the locks it forgot, as the docs say. Out of model; what happens is recorded
    /// in the run's notes, and the exclusion check must see it.
    VmRollback,
    /// Out of model: the operations of an in-model run, and among them servers replaced or
    /// promoted behind a proxy that keeps the clients' connections open. No connection drops, so a
    /// client sees the new server at its next check only, and until then counts its votes: a
    /// holder with exactly a majority, one of it the swapped master, is then granted twice (seed
    /// 5002 found it). The exclusion check must see it.
    KeptConnections,
    /// The library's rule for a server that is not the one that granted is removed (a promoted
    /// replica counts at once, a master without its record as a fresh one), while a majority of
    /// durable masters is promoted from lagging replicas, or replaced, at once.
    WithoutReplacedRule,
    /// The library's durability-over-time rule is removed (a restart is judged on what the new
    /// incarnation reports alone), while a majority is lowered to `appendfsync everysec` at
    /// runtime, checked, and then crashes, losing its last second.
    WithoutDurabilityRule,
    /// The library's eviction rule is removed (`refuse_evicting_masters(false)`), while a
    /// majority has a small `maxmemory` with an evicting policy and a filler.
    WithoutEvictionRule,
    /// The library's drift allowance is removed (validity is `ttl - elapsed`), on plain locks with
    /// no fault, the clocks running at their drawn rates.
    WithoutDriftAllowance,
    /// The semaphore's permits check is removed, on semaphores whose clients count 2 or 3 permits
    /// on the same names, with no fault.
    WithoutPermitsCheck,
    /// The fenced write's readers check is removed, on readers and fenced writers of the same
    /// names, with no fault.
    WithoutReadersCheck,
    /// The epoch check of the fenced rounds and of the fencing repair's read is removed (a master's
    /// counter counts as vouched for by whatever epoch it holds), on fenced locks, while every
    /// master persists with `appendfsync everysec` and all of them crash together now and then,
    /// each losing up to its last second of increments.
    WithoutEpochCheck,
    /// The key check of the fenced commit is removed (round 2 raises the counter whether or not
    /// the master still holds the acquisition's key), on fenced locks, while each client's process
    /// and its clock stop together for two TTLs now and then (a suspended VM: the client cannot
    /// tell that time passed, so the validity of an acquisition caught between its rounds seems
    /// intact). Out of model: with the mechanism in place, mutual exclusion fails too (a holder
    /// suspended believes its lock valid), but no token goes back.
    WithoutCommitKeyCheck,
    /// Holders of unfenced locks pause past their validity, then write, under a lock-delay
    /// shorter than their pauses: the delay covers less than the pause, so another holder can
    /// take the lock before the paused one writes. Its twin (`run::run_with_mechanism`) runs the
    /// same seeds with a delay longer than every pause, and must pass.
    PastLockDelay,
}

impl Control {
    /// Every control, in a fixed order.
    pub const ALL: [Control; 18] = [
        Control::QuorumOfOne,
        Control::IgnoreValidity,
        Control::WipeWithoutGrace,
        Control::ClockJump,
        Control::PauseUnfenced,
        Control::FairSkipsQueue,
        Control::ClientClockStall,
        Control::VmRollback,
        Control::KeptConnections,
        Control::WithoutReplacedRule,
        Control::WithoutDurabilityRule,
        Control::WithoutEvictionRule,
        Control::WithoutDriftAllowance,
        Control::WithoutPermitsCheck,
        Control::WithoutReadersCheck,
        Control::WithoutEpochCheck,
        Control::WithoutCommitKeyCheck,
        Control::PastLockDelay,
    ];

    /// Whether it removes a mechanism of the library (the others break the environment or the
    /// workload): its runs have operations, focused on what that mechanism answers.
    pub fn removes_mechanism(self) -> bool {
        matches!(
            self,
            Control::FairSkipsQueue
                | Control::WithoutReplacedRule
                | Control::WithoutDurabilityRule
                | Control::WithoutEvictionRule
                | Control::WithoutDriftAllowance
                | Control::WithoutPermitsCheck
                | Control::WithoutReadersCheck
                | Control::WithoutEpochCheck
                | Control::WithoutCommitKeyCheck
        )
    }

    /// Whether its runs have operations: the controls that remove a mechanism, but the fair one
    /// (whose order is only judged far from any fault).
    pub fn with_operations(self) -> bool {
        self.removes_mechanism() && self != Control::FairSkipsQueue
    }

    /// The library's switch for the mechanism it removes, where the `seam` feature's
    /// `unsafe_without_for_tests` is that switch.
    pub fn mechanism(self) -> Option<Mechanism> {
        match self {
            Control::FairSkipsQueue => Some(Mechanism::FairQueue),
            Control::WithoutReplacedRule => Some(Mechanism::ReplacedMaster),
            Control::WithoutDurabilityRule => Some(Mechanism::DurabilityOverTime),
            Control::WithoutDriftAllowance => Some(Mechanism::DriftAllowance),
            Control::WithoutPermitsCheck => Some(Mechanism::SemaphorePermits),
            Control::WithoutReadersCheck => Some(Mechanism::FencedWriteReaders),
            Control::WithoutEpochCheck => Some(Mechanism::FenceEpoch),
            Control::WithoutCommitKeyCheck => Some(Mechanism::FenceCommitKey),
            _ => None,
        }
    }

    /// The check that must catch it. A control counts as caught only when this check fires:
    /// a leak or a liveness complaint in a control's run says nothing about the assumption it
    /// breaks.
    pub fn target(self) -> Check {
        match self {
            // Two owners at once on an exclusive lock, seen from the holds' safe intervals.
            Control::QuorumOfOne
            | Control::IgnoreValidity
            | Control::WipeWithoutGrace
            | Control::ClockJump
            | Control::ClientClockStall
            | Control::VmRollback
            | Control::KeptConnections
            | Control::WithoutReplacedRule
            | Control::WithoutDurabilityRule
            | Control::WithoutEvictionRule
            | Control::WithoutDriftAllowance => Check::Exclusion,
            Control::WithoutPermitsCheck => Check::Semaphore,
            Control::WithoutReadersCheck => Check::ReadWrite,
            // A token issued below one issued before.
            Control::WithoutEpochCheck | Control::WithoutCommitKeyCheck => Check::Fencing,
            // The safe intervals are fine; only the store sees the paused holder's late write.
            Control::PauseUnfenced | Control::PastLockDelay => Check::LostUpdates,
            Control::FairSkipsQueue => Check::FairOrder,
        }
    }

    /// Whether its runs are out of model even with the mechanism in place: their suspended clients
    /// break mutual exclusion and the token order whatever the library does (their twin keeps
    /// every other safety check).
    pub fn breaks_exclusion_anyway(self) -> bool {
        self == Control::WithoutCommitKeyCheck
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Control::QuorumOfOne => "quorum-of-one",
            Control::IgnoreValidity => "ignore-validity",
            Control::WipeWithoutGrace => "wipe-without-grace",
            Control::ClockJump => "clock-jump",
            Control::PauseUnfenced => "pause-unfenced",
            Control::FairSkipsQueue => "fair-skips-queue",
            Control::ClientClockStall => "client-clock-stall",
            Control::VmRollback => "vm-rollback",
            Control::KeptConnections => "kept-connections",
            Control::WithoutReplacedRule => "without-replaced-master-rule",
            Control::WithoutDurabilityRule => "without-durability-rule",
            Control::WithoutEvictionRule => "without-eviction-rule",
            Control::WithoutDriftAllowance => "without-drift-allowance",
            Control::WithoutPermitsCheck => "without-permits-check",
            Control::WithoutReadersCheck => "without-readers-check",
            Control::WithoutEpochCheck => "without-epoch-check",
            Control::WithoutCommitKeyCheck => "without-commit-key-check",
            Control::PastLockDelay => "pause-past-lock-delay",
        }
    }
}

impl fmt::Display for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A control name that is not one of [`Control::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown control {0:?}; the controls are: {names}", names = names())]
pub struct UnknownControl(pub String);

fn names() -> String {
    Control::ALL.map(Control::name).join(", ")
}

impl FromStr for Control {
    type Err = UnknownControl;

    fn from_str(s: &str) -> Result<Control, UnknownControl> {
        Control::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| UnknownControl(s.to_owned()))
    }
}
