//! The health an application can read: each master's standing (do its votes count now, and if
//! not, why and for how long), its last fault and round trip, and what was last read about it;
//! and the same standing published as the ignored-masters gauge (see `crate::metrics`).
//!
//! One function, [`Health::standing`], decides a master's standing for both, so the snapshot and
//! the gauge never disagree. The rule is the core's (`core::master`). What puts a master's data at
//! risk (weak persistence, eviction, replicas, an incarnation that may lack writes) is published
//! too, as the masters-at-risk gauge.

use std::time::Duration;

use tokio::time::Instant;

use super::{locked, Health, NodeState};
use crate::base::error::NodeErrorKind;
use crate::base::metrics;
use crate::core::quorum;
use crate::seam::link::{Link, Masters};

/// How many reasons the ignored-masters gauge has (see `metrics::REASONS`).
pub(super) const REASONS: usize = metrics::REASONS.len();
/// The gauge's index of [`MasterHealth::fence_repair`].
const FENCE_REPAIR: usize = 3;
/// How many risks the masters-at-risk gauge has (see `metrics::RISKS`).
pub(super) const RISKS: usize = metrics::RISKS.len();

/// Why a master's votes do not count now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Ignored {
    /// Its last request timed out or could not connect.
    Unreachable,
    /// Its `run_id` and uptime were not read on the connection in use (after a reconnect, or
    /// while its checks fail): its votes count once a check succeeds.
    Unverified,
    /// It restarted less than the grace period ago and does not persist with `appendfsync
    /// always`: it may have lost keys, so its votes count once the grace has passed.
    RestartGrace,
    /// Its record shows that it may lack writes it acknowledged (another server at its address, a
    /// promoted replica, a restart after weaker persistence): its votes count once the grace has
    /// passed since a client first saw it.
    Replaced,
    /// It may evict keys (`maxmemory` with a policy other than `noeviction`), and the client
    /// refuses such masters' votes.
    Evicting,
}

impl Ignored {
    /// The gauge's index of this reason.
    fn index(self) -> usize {
        match self {
            Ignored::Unreachable => 0,
            Ignored::Unverified => 1,
            Ignored::RestartGrace => 2,
            Ignored::Replaced => 4,
            Ignored::Evicting => 5,
        }
    }
}

/// One master's health, from [`crate::Quorlock::health`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct MasterHealth {
    /// The master's position in the configured list.
    pub node: usize,
    /// `host:port`, without credentials.
    pub addr: String,
    /// Why its votes do not count now; `None` when they do.
    pub ignored: Option<Ignored>,
    /// How long until its votes count again, when only time stands in the way (restart grace).
    pub counts_again_in: Option<Duration>,
    /// Whether its fencing counter awaits repair: its votes count for plain locks, not for fenced
    /// ones, until a fenced acquire repairs it from a majority.
    pub fence_repair: bool,
    /// Its last fault (timeout, connection, server error...); refusals such as "held" are not
    /// faults. Kept after the master recovers, as the last one seen.
    pub last_error: Option<NodeErrorKind>,
    /// How long it took to answer the last request it answered (a lock round or a health check).
    pub round_trip: Option<Duration>,
    /// Its `run_id`, as last read.
    pub run_id: Option<String>,
    /// How long it has been up, from its last check.
    pub uptime: Option<Duration>,
    /// Whether it persists every write before acknowledging it (`appendfsync always`); `None` when
    /// that could not be read.
    pub fsync_always: Option<bool>,
    /// Whether every check of its current incarnation found it persisting every write, as the
    /// record it keeps says (a runtime downgrade makes it `false` until the next incarnation);
    /// `None` before its record was read.
    pub durable_throughout: Option<bool>,
    /// Whether its record says its current incarnation may lack writes it acknowledged; `None`
    /// before its record was read.
    pub may_lack_writes: Option<bool>,
    /// Its `maxmemory-policy` when it may evict keys (a memory limit and a policy other than
    /// `noeviction`).
    pub evicting: Option<String>,
    /// How many replicas are attached to it, at its last check.
    pub replicas: Option<u64>,
    /// Whether it releases plain locks natively (`DELIFEQ`) rather than by script.
    pub native_release: bool,
    /// Whether it extends plain locks natively (`SET ... IFEQ`) rather than by script.
    pub native_extend: bool,
}

impl MasterHealth {
    /// Whether its votes count now (for plain locks).
    pub fn counts(&self) -> bool {
        self.ignored.is_none()
    }
}

/// Every master's health, from [`crate::Quorlock::health`]: read from what the client already
/// knows, without asking any master.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct HealthSnapshot {
    /// How many masters make a majority.
    pub quorum: usize,
    /// How long a master that restarted without `appendfsync always` has its votes ignored.
    pub restart_grace: Duration,
    /// Each master, in configured order.
    pub masters: Vec<MasterHealth>,
}

impl HealthSnapshot {
    /// How many masters' votes count now.
    pub fn counting(&self) -> usize {
        self.masters.iter().filter(|m| m.counts()).count()
    }

    /// Whether enough masters' votes count for a plain lock to be acquired.
    pub fn has_quorum(&self) -> bool {
        self.counting() >= self.quorum
    }
}

impl Health {
    /// Why the votes of `link` (whose state is `state`) do not count at `now`, and for how long
    /// when only time stands in the way.
    fn standing(&self, state: &NodeState, link: &Link, now: Instant) -> (Option<Ignored>, Option<Duration>) {
        if state.unreachable {
            return (Some(Ignored::Unreachable), None);
        }
        match state
            .belief
            .admit(&self.rules(), now.into_std(), link.disconnects())
        {
            Ok(()) => (None, None),
            Err(NodeErrorKind::Restarted { remaining, .. }) => (Some(Ignored::RestartGrace), Some(remaining)),
            Err(NodeErrorKind::Replaced { remaining, .. }) => (Some(Ignored::Replaced), Some(remaining)),
            Err(NodeErrorKind::Evicting { .. }) => (Some(Ignored::Evicting), None),
            Err(_) => (Some(Ignored::Unverified), None),
        }
    }

    /// Every master's health now.
    pub(crate) fn snapshot(&self, masters: &Masters) -> HealthSnapshot {
        let now = self.now();
        let masters_health = masters
            .iter()
            .filter_map(|link| {
                let state = self.state(link.index())?;
                let (ignored, counts_again_in) = self.standing(&state, link, now);
                let capabilities = link.capabilities();
                let belief = &state.belief;
                let record = belief.sighting.as_ref().map(|s| &s.record);
                Some(MasterHealth {
                    node: link.index(),
                    addr: link.addr().to_owned(),
                    ignored,
                    counts_again_in,
                    fence_repair: belief.fence.repair,
                    last_error: state.last_error.clone(),
                    round_trip: state.round_trip,
                    run_id: belief.run_id.clone(),
                    uptime: belief
                        .started
                        .map(|s| now.into_std().saturating_duration_since(s)),
                    fsync_always: belief.durable,
                    durable_throughout: record.map(|r| r.durable),
                    may_lack_writes: record.map(|r| r.lost),
                    evicting: belief.evicting.clone(),
                    replicas: belief.replicas(),
                    native_release: capabilities.delifeq,
                    native_extend: capabilities.set_ifeq,
                })
            })
            .collect();
        self.publish(masters);
        HealthSnapshot {
            quorum: quorum(masters.len()),
            restart_grace: self.grace(),
            masters: masters_health,
        }
    }

    /// Publishes how many masters are ignored now, by reason, and how many are at risk, by risk,
    /// as this client's share of the two gauges. Nothing with the `metrics` feature off.
    pub(crate) fn publish(&self, masters: &Masters) {
        if !cfg!(feature = "metrics") {
            return;
        }
        let now = self.now();
        let mut counts = [0i64; REASONS];
        let mut risks = [0i64; RISKS];
        for link in masters.iter() {
            let Some(state) = self.state(link.index()) else {
                continue;
            };
            if let (Some(reason), _) = self.standing(&state, link, now) {
                counts[reason.index()] += 1;
            }
            let belief = &state.belief;
            if belief.fence.repair {
                counts[FENCE_REPAIR] += 1;
            }
            let at_risk = [
                belief.durable != Some(true),
                belief.evicting.is_some(),
                belief.replicas().is_some_and(|r| r > 0),
                belief.sighting.as_ref().is_some_and(|s| s.record.lost),
            ];
            for (risk, on) in risks.iter_mut().zip(at_risk) {
                *risk += i64::from(on && belief.run_id.is_some());
            }
        }
        self.publish_counts(counts);
        let mut published = locked(&self.published_risks);
        for (risk, (now, before)) in risks.iter().zip(published.iter()).enumerate() {
            if now != before {
                metrics::at_risk(risk, now - before);
            }
        }
        *published = risks;
    }

    /// Moves the gauge from what was last published to `counts`.
    fn publish_counts(&self, counts: [i64; REASONS]) {
        let mut published = locked(&self.published);
        for (reason, (now, before)) in counts.iter().zip(published.iter()).enumerate() {
            if now != before {
                metrics::ignored(reason, now - before);
            }
        }
        *published = counts;
    }
}

impl Drop for Health {
    /// A client that is gone ignores no master and sees none at risk: its share of the gauges
    /// goes back to zero.
    fn drop(&mut self) {
        self.publish_counts([0; REASONS]);
        let published = *locked(&self.published_risks);
        for (risk, before) in published.iter().enumerate() {
            if *before != 0 {
                metrics::at_risk(risk, -before);
            }
        }
    }
}
