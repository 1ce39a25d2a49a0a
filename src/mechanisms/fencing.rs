//! Fencing repair: a master whose fencing counter is missing, behind, or not vouched for by its
//! current epoch is raised to what a majority of intact masters hold, once that is safe.
//!
//! The fenced rounds (`kinds/fenced.rs`) refuse a master that needs repair; this brings it back.
//! Which value to raise it to, and when, is the core's decision (`core::fencing`); here the counters
//! are read from every master and the repair script is sent. The state it keeps per master (the
//! highest counter seen, whether a repair is due) lives with the master's health.

use std::sync::Arc;

use futures::stream::StreamExt;
use redis::Value;
use tracing::{debug, info, warn};

use crate::base::lua::{eval, FENCE_REPAIR};
use crate::base::names::Names;
use crate::core::fencing::{bootstrap_value, repair_target, set_up_elsewhere, CounterRead, RepairTarget};
use crate::mechanisms::fanout::Fanout;
use crate::mechanisms::health::Health;
use crate::mechanisms::removal::Mechanism;
use crate::seam::link::{Link, Masters};

/// What one repair did.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Repair {
    /// Masters this client repaired (or set up).
    pub(crate) repaired: usize,
    /// Another client seemed to be setting the counters up (some fresh, the rest absent), so the
    /// repair was postponed; it is worth reading again in a moment.
    pub(crate) under_way: bool,
}

/// Repairs the masters whose fencing counter is missing, behind, or not vouched for by their
/// current epoch, where that is safe now; returns how many were repaired.
///
/// Every master's counter and epoch are read; only a counter whose epoch is the `run_id` this client
/// verified for that master (and which is not itself waiting) is intact. A master whose epoch is
/// stale is marked for repair on the way. A full repair waits until the grace has passed since the
/// master (re)started, then raises it to the largest counter read from a majority of the *other*
/// masters with intact counters. A master that restarted with `appendfsync always` lost nothing:
/// it is raised at once to the largest intact counter read (if any), which only stamps its new
/// epoch when it is already the highest. If every master answers that it has no counter, either no
/// token was ever issued or every master lost its counter since the last repair (a rolling restart
/// of masters without persistence, with no fenced acquire in between): they all start at the wall
/// clock (`wall_ms`) in microseconds, or above the highest counter this process or a master's
/// record has seen if that is higher, each stamped with its epoch. If so many masters lost their
/// counters that no intact majority can be read again, the ones waiting start again the same way,
/// above every intact counter read (see `core::fencing`, the restart).
pub(crate) async fn repair(masters: &Masters, health: &Health, names: &Names, wall_ms: u64) -> Repair {
    let n = masters.len();
    if !(0..n).any(|i| health.needs_fence_repair(i)) {
        return Repair::default();
    }
    let counter = names.fence_counter();
    let epoch = names.fence_epoch();
    let mut get = redis::cmd("MGET");
    get.arg(&counter).arg(&epoch);
    let get = Arc::new(get);
    let mut reads = vec![CounterRead::Unusable; n];
    // The highest counter any master answered with, vouched for or not: a restart starts above it.
    let mut answered_max = 0;
    let mut pending: Fanout<_> = masters
        .iter()
        .map(|link| (link.index(), link.query(Arc::clone(&get))))
        .collect();
    while let Some((i, reply)) = pending.next().await {
        let Some(node) = masters.get(i) else { continue };
        let read = match reply {
            Ok(Value::Array(items)) => {
                answered_max = answered_max.max(counter_of(&items).unwrap_or(0));
                read_counter(health, node, &items)
            }
            _ => CounterRead::Unusable,
        };
        if let Some(slot) = reads.get_mut(i) {
            *slot = read;
        }
    }
    drop(pending);
    let waiting: Vec<usize> = (0..n).filter(|i| health.needs_fence_repair(*i)).collect();
    let now = health.now();
    let intact_max = reads
        .iter()
        .filter_map(|r| match r {
            CounterRead::Present(v) => Some(*v),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let light = |i: &usize| health.fence_repair_light(*i);
    let due = |i: &usize| health.fence_repair_due(*i, now);
    let (mut plan, target): (Vec<(usize, u64)>, RepairTarget) = match repair_target(&reads) {
        RepairTarget::Bootstrap => {
            // Never below a counter this process saw (its floors are forgotten at restarts) or a
            // master's record kept: the wall clock alone could be behind.
            let start = bootstrap_value(wall_ms, health.highest_counter());
            ((0..n).map(|i| (i, start)).collect(), RepairTarget::Bootstrap)
        }
        RepairTarget::Raise(value) => (
            waiting
                .iter()
                .copied()
                .filter(due)
                .map(|i| (i, if light(&i) { intact_max } else { value }))
                .collect(),
            RepairTarget::Raise(value),
        ),
        RepairTarget::Restart => {
            // No intact majority can be read again: the bootstrap's clock argument, above every
            // counter read too (a master this client cannot vouch for may still hold the highest
            // token, which another client would count it intact for), for the masters whose grace
            // has passed.
            let start = bootstrap_value(wall_ms, health.highest_counter().max(answered_max));
            (
                waiting.iter().copied().filter(due).map(|i| (i, start)).collect(),
                RepairTarget::Restart,
            )
        }
        undecided @ RepairTarget::Undecided { .. } => (
            waiting
                .iter()
                .copied()
                .filter(light)
                .map(|i| (i, intact_max))
                .collect(),
            undecided,
        ),
    };
    // Fresh counters on some masters and none on the others, nothing else: another client is
    // setting them up, master by master. A restart still waiting for the grace of the masters it
    // would start reads the same on fresh masters, where the other client's bootstrap ends it.
    let waits = match target {
        RepairTarget::Undecided { .. } => true,
        RepairTarget::Restart => plan.is_empty(),
        RepairTarget::Raise(_) | RepairTarget::Bootstrap => false,
    };
    let under_way = waits
        && reads.iter().any(|r| matches!(r, CounterRead::Present(_)))
        && reads
            .iter()
            .all(|r| matches!(r, CounterRead::Present(_) | CounterRead::Absent));
    if let RepairTarget::Undecided { present, required } = target {
        debug!(
            present,
            required,
            light = plan.len(),
            "fencing repair postponed: too few intact counters answered"
        );
    }
    plan.sort_unstable();
    if target == RepairTarget::Bootstrap {
        debug!(
            masters = n,
            "no master has a fencing counter: starting them all at the wall clock in microseconds"
        );
    } else if target == RepairTarget::Restart && plan.is_empty() {
        debug!(
            masters = n,
            "no intact majority of fencing counters is left; the lost ones start again once their grace has passed"
        );
    } else if target == RepairTarget::Restart {
        warn!(
            masters = n,
            restarting = plan.len(),
            "fewer than a majority of fencing counters can be vouched for (masters lost them, or another client is still setting them up), so no intact majority is left to repair from: the ones waiting start again at the wall clock in microseconds, above every counter read"
        );
    } else {
        // A master without a counter while others have one lost its data.
        for (i, value) in &plan {
            if reads.get(*i) == Some(&CounterRead::Absent) {
                warn!(
                    node = *i,
                    addr = masters.addr(*i),
                    counter = *value,
                    "fencing counter missing on a master while others have one (it lost its data); raising it to what a majority holds"
                );
            }
        }
    }
    let mut repaired = 0;
    for (i, value) in plan {
        let Some(node) = masters.get(i) else { continue };
        // The run_id the grace was judged for; the script refuses if the master restarted since.
        let Some(run_id) = health.verified_run_id(node) else {
            debug!(
                node = i,
                "fencing repair skipped: the master's run_id is being checked"
            );
            continue;
        };
        let grace_ms = u64::try_from(health.grace().as_millis()).unwrap_or(u64::MAX);
        // A light repair waits for nothing; a full one for the grace, which the master checks
        // too, against the longest grace its record holds (a client with longer TTLs may have
        // declared it since this client last read the record).
        let wait_ms = if light(&i) { 0 } else { grace_ms };
        let mut call = eval(&FENCE_REPAIR, &[&counter, &epoch, &names.master_record()]);
        call.push(value).push(&run_id).push(wait_ms);
        match node.run_script(&call).await {
            Ok(Value::Int(-1)) => {
                debug!(
                    node = i,
                    addr = node.addr(),
                    "fencing repair refused: the master restarted since it was checked"
                );
            }
            Ok(Value::Int(-2)) => {
                debug!(
                    node = i,
                    addr = node.addr(),
                    "fencing repair refused: its record asks for a longer grace than this client knew"
                );
            }
            Ok(Value::Int(value)) => {
                let value = u64::try_from(value).unwrap_or(0);
                if target == RepairTarget::Bootstrap {
                    debug!(node = i, addr = node.addr(), "fencing counter set up");
                } else {
                    info!(
                        node = i,
                        addr = node.addr(),
                        counter = value,
                        "fencing counter repaired"
                    );
                }
                health.fence_repaired(i, value);
                repaired += 1;
            }
            Ok(other) => {
                warn!(node = i, addr = node.addr(), reply = ?other, "fencing repair answered unexpectedly")
            }
            Err(kind) => {
                warn!(node = i, addr = node.addr(), error = %kind, "fencing repair failed; retried on the next fenced acquire")
            }
        }
    }
    Repair { repaired, under_way }
}

/// Classifies one master's `[counter, epoch]`; marks it for repair if its epoch is stale.
fn read_counter(health: &Health, node: &Link, items: &[Value]) -> CounterRead {
    let i = node.index();
    let text = |v: Option<&Value>| match v {
        Some(Value::BulkString(bytes)) => Some(String::from_utf8_lossy(bytes).into_owned()),
        _ => None,
    };
    let (counter, epoch) = (text(items.first()), text(items.get(1)));
    let Some(counter) = counter else {
        // No counter: a fresh master, or one wiped (its epoch went with it).
        return CounterRead::Absent;
    };
    let Some(run_id) = health.verified_run_id(node) else {
        return CounterRead::Unusable;
    };
    // The negative control that removes the epoch check takes every epoch for the current one.
    let epoch_checked = !health.removed.has(Mechanism::FenceEpoch);
    if epoch_checked && epoch.as_deref() != Some(run_id.as_str()) {
        if !health.needs_fence_repair(i) {
            info!(
                node = i,
                addr = node.addr(),
                "fencing epoch is stale (the master restarted); it is repaired before it votes again"
            );
            health.mark_fence_epoch(i);
        }
        return lost_unless_light(health, i);
    }
    let Ok(counter) = counter.parse::<u64>() else {
        return CounterRead::Unusable;
    };
    if health.needs_fence_repair(i) {
        if !set_up_elsewhere(health.fence_vouchable(i), true, counter, health.fence_floor(i)) {
            return lost_unless_light(health, i);
        }
        debug!(
            node = i,
            addr = node.addr(),
            counter,
            "fencing counter set up or repaired by another client; the master votes again"
        );
        health.fence_repaired(i, counter);
    }
    CounterRead::Present(counter)
}

/// The counter in a master's `[counter, epoch]`, if it has one that reads as a number.
fn counter_of(items: &[Value]) -> Option<u64> {
    match items.first() {
        Some(Value::BulkString(bytes)) => std::str::from_utf8(bytes).ok()?.parse().ok(),
        _ => None,
    }
}

/// A counter nothing vouches for now: lost, unless the master's record shows it lost nothing (its
/// repair only stamps the epoch, and it counts as intact then).
fn lost_unless_light(health: &Health, node: usize) -> CounterRead {
    if health.fence_repair_light(node) {
        CounterRead::Unusable
    } else {
        CounterRead::Lost
    }
}
