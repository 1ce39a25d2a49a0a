//! A master going down and coming back: a crash decides what its disk keeps (`durability.rs`),
//! a restart brings that back as a new process, and both reset the master's connections. The
//! fencing counters' ground truth (`fence_watch.rs`) is taken at each.

use super::{operations, World};
use crate::sim::durability::Survival;
use crate::sim::fence_watch::MAJORITY_LOST;
use crate::sim::wire::Endpoint;

impl World {
    /// Master `m` crashes now (the planned fault `id`): down, its connections reset, and what
    /// its disk holds decided now (see `durability.rs`).
    pub(super) fn crash(&mut self, id: usize, m: usize) {
        let before = self.befores.remove(&id);
        let now = self.now();
        let node = &mut self.nodes[m];
        if !node.down {
            self.fences.going(m, &node.master, node.clock.at(now));
            let (aof, fsync) = node.master.appendfsync();
            let judged =
                crate::sim::durability::at_crash(aof, fsync, node.lowered, &node.master.run_id(), before);
            let mut log = self.log.borrow_mut();
            if judged.spared {
                log.count(operations::SPARED, 1);
            }
            if matches!(judged.survival, Survival::Before(_)) {
                log.count(operations::LOSSY, 1);
            }
            drop(log);
            node.revives = Some(judged.survival);
            node.down = true;
        }
        let target = Endpoint::Master(m);
        self.reset_where(|k| k.1 == target);
    }

    /// Restarts a crashed master: a new process, with what its disk held.
    pub(super) fn restart(&mut self, m: usize, now: u64) {
        let node = &mut self.nodes[m];
        if !node.down {
            return;
        }
        node.down = false;
        let clock = node.clock.at(now);
        node.evicted_before += node.master.evicted_keys();
        node.lowered = false;
        // A restart of a simulated master fails only if its Lua state cannot be built, which
        // would have failed at the start already.
        let _ = match node.revives.take().unwrap_or(Survival::Nothing) {
            Survival::All => node.master.restart(true, clock),
            Survival::Nothing => node.master.restart(false, clock),
            Survival::Before(snapshot) => node.master.restart_from(&snapshot, clock),
        };
        if self.fences.back(m, self.nodes.iter().map(|n| &n.master), clock) {
            self.log.borrow_mut().count(MAJORITY_LOST, 1);
        }
        let target = Endpoint::Master(m);
        self.reset_where(|k| k.1 == target);
    }
}
