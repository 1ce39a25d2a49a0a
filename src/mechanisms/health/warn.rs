//! The warnings a master's checks deserve: one per change the core noticed (a restart or a
//! replacement, persistence below `appendfsync always`, a policy that cannot be read, eviction,
//! replicas), at the check that sees it, so that a runtime downgrade is reported when it happens
//! and not only at `build()`.

use tracing::{info, warn};

use crate::core::master::{Change, Report};
use crate::seam::link::Link;

/// The `tracing` target of the warnings about a master's persistence (no AOF, `appendfsync` below
/// `always`, or a policy that could not be read).
pub(crate) const PERSISTENCE: &str = "quorlock::persistence";

/// Warns about each of `changes`, which a check of `node` that read `report` noticed.
pub(crate) fn changes(node: &Link, report: &Report, changes: &[Change]) {
    let (node_index, addr) = (node.index(), node.addr());
    for change in changes {
        match change {
            Change::Restarted { lost: true } => warn!(
                node = node_index,
                addr,
                uptime_s = report.uptime_secs,
                "master restarted or replaced (its run_id changed) and may lack writes it acknowledged; its votes wait out the restart grace"
            ),
            Change::Restarted { lost: false } => info!(
                node = node_index,
                addr,
                uptime_s = report.uptime_secs,
                "master restarted (its run_id changed); it persisted every write at every check, so it lost nothing"
            ),
            Change::RecordMissing => warn!(
                node = node_index,
                addr,
                uptime_s = report.uptime_secs,
                "master has no quorlock record while others have one: a new server at its address, or it lost its data; its votes wait out the restart grace"
            ),
            Change::Persistence(Some(false)) if !report.aof_enabled => warn!(
                target: PERSISTENCE,
                node = node_index,
                addr,
                "master runs without AOF: a restart loses every lock it held; use appendonly yes with appendfsync always, or rely on the restart grace"
            ),
            Change::Persistence(Some(false)) => warn!(
                target: PERSISTENCE,
                node = node_index,
                addr,
                appendfsync = report.appendfsync.as_deref().unwrap_or("?"),
                "master persists with less than appendfsync always: a crash can lose recently granted locks; after a restart its votes wait out the restart grace, whatever it then reports"
            ),
            Change::Persistence(_) => {}
            Change::ConfigUnreadable(reason) => warn!(
                target: PERSISTENCE,
                node = node_index,
                addr,
                reason = %reason,
                "could not check the master's appendfsync policy (CONFIG unavailable); treated as less than always"
            ),
            Change::Eviction(Some(policy)) => warn!(
                node = node_index,
                addr,
                policy = %policy,
                maxmemory = report.memory.maxmemory,
                "master may evict keys (maxmemory with a policy other than noeviction), held locks' included; its votes are refused unless the client allows evicting masters"
            ),
            Change::Eviction(None) => info!(node = node_index, addr, "master no longer evicts keys"),
            Change::KeysEvicted(n) => warn!(
                node = node_index,
                addr,
                evicted = *n,
                "master evicted keys since its last check"
            ),
            Change::Replicas(0) => info!(node = node_index, addr, "master has no replicas attached any more"),
            Change::Replicas(n) => warn!(
                node = node_index,
                addr,
                replicas = *n,
                "master has replicas attached: replication is asynchronous, so a failover to a replica can lose a held lock (the client keeps a promoted replica out for the grace); use independent masters"
            ),
        }
    }
}

/// Warns that `node` could not be checked at build.
pub(crate) fn unchecked(node: &Link) {
    warn!(
        node = node.index(),
        addr = node.addr(),
        "could not read the master's run_id, persistence and record at build; its votes count once it answers a check"
    );
}
