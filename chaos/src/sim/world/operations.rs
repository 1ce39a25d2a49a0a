//! What the operations do to the world's masters: a replica promoted behind a master's address
//! (with what had replicated to it, its own `run_id` and uptime, the clients' connections reset
//! or, behind a proxy, kept), a server that never had the data put there instead, `CONFIG SET
//! appendfsync` at runtime, a filler that writes until memory is full, a long script that makes a
//! master answer `BUSY`, what a partition held delivered late at its heal, and a VM rolled back to
//! an older snapshot of itself. The copies of a master's data these need (what had replicated
//! `lag` ago, what the disk held a moment before a crash, the VM's snapshot) are taken ahead, at
//! the instant they speak for, since the plan is known in advance.

use rand::RngExt;
use redis::Value;

use super::{Busy, Event, World};
use crate::sim::durability::Before;
use crate::sim::fault::Fault;
use crate::sim::fence_watch::MAJORITY_LOST;
use crate::sim::master::{reply, MasterConfig, SimMaster};
use crate::sim::wire::{Endpoint, Envelope, Op};

/// Effect: requests a partition or blackhole held, executed at its heal.
pub(super) const LATE: &str = "late requests delivered at the heal";
/// Effect: commands answered `BUSY`.
pub(super) const BUSY: &str = "BUSY replies";
/// Effect: commands and scripts refused for memory.
pub(super) const OOM: &str = "OOM replies";
/// Effect: keys evicted by the masters' policies.
pub(super) const EVICTED: &str = "keys evicted";
/// Effect: filler writes accepted.
pub(super) const FILLED: &str = "filler writes";
/// Effect: crashes of `everysec` masters that lost their last writes.
pub(super) const LOSSY: &str = "crashes that lost the last writes (everysec)";
/// Effect: crashes of lowered masters kept whole, since a loss no record shows is out of model.
pub(super) const SPARED: &str = "crashes kept whole (lowered, not yet recorded: out of model otherwise)";
/// Effect: crashes postponed because no client had seen a promoted replica yet.
pub(super) const POSTPONED: &str = "crashes postponed (a promoted replica no client had seen yet)";

/// The record each master keeps about itself (no key prefix in the simulation).
const RECORD: &[u8] = quorlock::config::MASTER_RECORD_KEY.as_bytes();

/// What a filler writes: 1 KB values.
static FILLER_VALUE: [u8; 1024] = [b'x'; 1024];

impl World {
    /// How long before `fault` starts the world copies the data it will need, if it needs any
    /// (only in a run with operations: a classic run copies nothing).
    pub(super) fn copy_ahead(&mut self, fault: &Fault) -> Option<u64> {
        let ops = self.ops.as_mut()?;
        match fault {
            // What the disk held: an `everysec` master loses up to its last second.
            Fault::Crash { .. } => Some(ops.random_range(0..=1_000)),
            Fault::Promote { lag_ms, .. } => Some(*lag_ms),
            Fault::Rollback { age_ms, .. } => Some(*age_ms),
            _ => None,
        }
    }

    /// Takes the copy the planned fault `id` needs, of its master as it is now.
    pub(super) fn copy_for(&mut self, id: usize) {
        let Some(fault) = self.planned.get(id) else {
            return;
        };
        let now = self.now();
        let node = &self.nodes[fault.master()];
        let clock = node.clock.at(now);
        let before = Before {
            snapshot: node.master.snapshot(),
            run_id: node.master.run_id(),
            record_run_id: node.master.peek_hash_field(RECORD, b"run_id", clock),
            record_durable: node.master.peek_hash_field(RECORD, b"durable", clock),
        };
        self.befores.insert(id, before);
    }

    /// Whether master `m` is a replica promoted in its current incarnation that no client has
    /// recorded yet: a crash of it now would bring it back looking like a durable restart of the
    /// server it replaced, lagging writes lost and nothing to show it (out of model, as the docs
    /// say), so the world waits until a client's check has written its record.
    pub(super) fn unseen_promotion(&self, m: usize) -> bool {
        let node = &self.nodes[m];
        if node.down || !node.master.promoted() {
            return false;
        }
        let clock = node.clock.at(self.now());
        node.master.peek_hash_field(RECORD, b"run_id", clock) != Some(node.master.run_id().into_bytes())
    }

    /// Starts the operation `fault` (the planned fault `id`) at `now`.
    pub(super) fn start_operation(&mut self, id: usize, fault: &Fault, now: u64) {
        match *fault {
            Fault::Promote {
                master,
                keep_connections,
                ..
            } => {
                let node = &self.nodes[master];
                let snapshot = match self.befores.remove(&id) {
                    Some(b) if b.run_id == node.master.run_id() => b.snapshot,
                    // Its master changed within the lag: the replica resynced from the new one.
                    _ => node.master.snapshot(),
                };
                // Up for an hour to a month: it ran as a replica all along.
                let uptime_ms = self.draw(3_600_000..=2_592_000_000);
                if let Some(mut replica) = self.newcomer(master, uptime_ms, now) {
                    replica.promote(&snapshot);
                    self.take_over(master, replica, keep_connections);
                }
            }
            Fault::Replace {
                master,
                uptime_s,
                keep_connections,
            } => {
                if let Some(newcomer) = self.newcomer(master, uptime_s * 1_000, now) {
                    self.take_over(master, newcomer, keep_connections);
                }
            }
            Fault::Appendfsync { master, always } => {
                let node = &mut self.nodes[master];
                if !node.down {
                    let policy: &[u8] = if always { b"always" } else { b"everysec" };
                    let clock = node.clock.at(now);
                    node.master
                        .execute(clock, &[b"CONFIG", b"SET", b"appendfsync", policy]);
                    node.lowered |= !always;
                }
            }
            Fault::Fill { ms, .. } => self.push(now, Event::Fill(id, now + ms)),
            Fault::Busy {
                master,
                ms,
                busy_after_ms,
            } => {
                self.nodes[master].busy = Some(Busy {
                    busy_at: now + busy_after_ms,
                    until: now + ms,
                });
            }
            Fault::Rollback { master, age_ms } => {
                let node = &mut self.nodes[master];
                let run_id = node.master.run_id();
                match self.befores.remove(&id) {
                    Some(b) if b.run_id == run_id && !node.down => {
                        node.master.roll_back(&b.snapshot);
                        self.log.borrow_mut().notes.push(format!(
                            "out of model: m{master} restored at {now} ms to its snapshot of {age_ms} ms earlier, with the same run_id"
                        ));
                        let target = Endpoint::Master(master);
                        self.reset_where(|k| k.1 == target);
                    }
                    _ => {}
                }
            }
            Fault::Partition { .. }
            | Fault::Blackhole { .. }
            | Fault::Reset { .. }
            | Fault::Slow { .. }
            | Fault::Crash { .. }
            | Fault::ClockJump { .. } => {}
        }
    }

    /// A number drawn from the operations' generator (0 without one, which no classic fault asks).
    fn draw(&mut self, range: std::ops::RangeInclusive<u64>) -> u64 {
        match self.ops.as_mut() {
            Some(ops) => ops.random_range(range),
            None => *range.start(),
        }
    }

    /// A server of master `m`'s configuration (its own `run_id`s), up for `uptime_ms` at `now`,
    /// with a replica of its own.
    fn newcomer(&mut self, m: usize, uptime_ms: u64, now: u64) -> Option<SimMaster> {
        let seed = self.draw(0..=u64::MAX);
        let node = &self.nodes[m];
        let config = MasterConfig {
            seed,
            ..node.master.config()
        };
        let started = node.clock.at(now).saturating_sub(uptime_ms);
        let mut server = SimMaster::new(config, started).ok()?;
        server.set_replicas(1);
        Some(server)
    }

    /// `server` answers at master `m`'s address from now on; the clients' connections reset,
    /// unless they are kept (behind a proxy), in which case their next command reaches it.
    fn take_over(&mut self, m: usize, server: SimMaster, keep_connections: bool) {
        let now = self.now();
        let node = &mut self.nodes[m];
        let clock = node.clock.at(now);
        self.fences.going(m, &node.master, clock);
        node.evicted_before += node.master.evicted_keys();
        node.master = server;
        node.count_listeners();
        node.down = false;
        node.revives = None;
        node.lowered = false;
        node.busy = None;
        if self.fences.back(m, self.nodes.iter().map(|n| &n.master), clock) {
            self.log.borrow_mut().count(MAJORITY_LOST, 1);
        }
        if !keep_connections {
            let target = Endpoint::Master(m);
            self.reset_where(|k| k.1 == target);
        }
    }

    /// One write of the filler of the planned fault `id`, and the next one 10 ms later, until
    /// `until`: 1 KB under a key of its own with a TTL of 2 to 6 s, on a master that is up and
    /// not busy.
    pub(super) fn fill(&mut self, id: usize, until: u64) {
        let Some(fault) = self.planned.get(id) else {
            return;
        };
        let m = fault.master();
        let now = self.now();
        let ttl = self.draw(2_000..=6_000).to_string();
        let node = &mut self.nodes[m];
        if !node.down && node.busy.is_none_or(|b| now >= b.until) {
            node.filled += 1;
            let key = format!("{}m{m}:{}", crate::sim::run::FILLER_PREFIX, node.filled);
            let clock = node.clock.at(now);
            let reply = node.master.execute(
                clock,
                &[b"SET", key.as_bytes(), &FILLER_VALUE, b"PX", ttl.as_bytes()],
            );
            let mut log = self.log.borrow_mut();
            match reply.value {
                Value::ServerError(_) => log.count(OOM, 1),
                _ => log.count(FILLED, 1),
            }
        }
        if now + 10 < until {
            self.push(now + 10, Event::Fill(id, until));
        }
    }

    /// What a master running a long script does with `env`, arrived at `now` on a connection of
    /// generation `gen`: `Some(env)` to run it as usual; else it waits (the master reads nothing
    /// yet) or is answered `BUSY`.
    pub(super) fn busy_check(&mut self, env: Envelope, gen: u64, now: u64) -> Option<Envelope> {
        let Endpoint::Master(m) = env.master else {
            return Some(env);
        };
        let Some(busy) = self.nodes[m].busy.filter(|b| now < b.until) else {
            return Some(env);
        };
        if now < busy.busy_at {
            // Read once the script yields to answer BUSY, or once it ends.
            self.push(busy.busy_at.min(busy.until), Event::Arrive(env, gen));
            return None;
        }
        match env.op {
            Op::Commands {
                cmds,
                skip,
                count,
                reply,
            } => {
                self.log.borrow_mut().count(BUSY, cmds.len() as u64);
                let key = (env.client, env.master, env.conn);
                let values: Vec<Value> = (0..cmds.len())
                    .map(|_| reply::busy())
                    .skip(skip)
                    .take(count)
                    .collect();
                self.answer(key, super::Delivery::Replies(reply, Ok(values)), now);
                None
            }
            // Connections and subscriptions wait for the script's end.
            op @ (Op::Open { .. } | Op::Subscribe { .. }) => {
                let env = Envelope { op, ..env };
                self.push(busy.until, Event::Arrive(env, gen));
                None
            }
        }
    }

    /// The long script on master `m` ends at `now`.
    pub(super) fn end_busy(&mut self, m: usize, now: u64) {
        let node = &mut self.nodes[m];
        if node.busy.is_some_and(|b| b.until <= now) {
            node.busy = None;
        }
    }

    /// What a partition or blackhole held on the links `pred` picks is delivered now, in the
    /// order it came: requests run on their masters (late), replies reach their clients, and no
    /// connection resets.
    pub(super) fn deliver_late(&mut self, pred: impl Fn(&super::LinkKey) -> bool) {
        let held = std::mem::take(&mut self.limbo);
        let mut late = Vec::new();
        for (key, event) in held {
            if pred(&key) {
                late.push(event);
            } else {
                self.limbo.push((key, event));
            }
        }
        self.log.borrow_mut().count(LATE, late.len() as u64);
        for event in late {
            self.handle(event);
        }
    }
}
