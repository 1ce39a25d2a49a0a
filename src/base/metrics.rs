//! The names of every metric this crate emits, in one place, and the calls the mechanisms make to
//! move them.
//!
//! Metrics go through the [`metrics`](https://docs.rs/metrics) facade: the application installs a
//! recorder (Prometheus, StatsD, ...) and quorlock's counters, gauges and histograms appear there.
//! With the `metrics` feature off, every call here is an empty inline function and the names are
//! only documentation: nothing is measured and nothing is linked.
//!
//! The names and labels are public API and do not change within a major version. The table below
//! (`docs/metrics.md`) is the one list of them.
//!
#![doc = include_str!("../../docs/metrics.md")]

#[cfg(feature = "metrics")]
use std::time::Duration;

#[cfg(feature = "metrics")]
use tokio::time::Instant;

use crate::base::error::{AcquireError, NodeErrorKind};

/// Counter: acquire calls that ended, by `kind` and `outcome`.
pub const ACQUISITIONS: &str = "quorlock_acquisitions_total";
/// Histogram: seconds from the start of an acquire call to its end, by `kind` and `outcome`.
pub const ACQUIRE_WAIT: &str = "quorlock_acquire_wait_seconds";
/// Histogram: seconds one majority round took to decide, by `outcome`.
pub const ROUND: &str = "quorlock_round_duration_seconds";
/// Histogram: seconds a lock was held, from its acquisition to its release (or the drop of its
/// guard).
pub const HOLD: &str = "quorlock_hold_duration_seconds";
/// Gauge: locks acquired and not yet released (their guards are alive).
pub const HELD: &str = "quorlock_locks_held";
/// Counter: held locks found lost, by `cause`.
pub const LOST: &str = "quorlock_locks_lost_total";
/// Counter: renewal rounds the watchdog made.
pub const RENEWALS: &str = "quorlock_renewals_total";
/// Counter: renewal rounds the watchdog made that no majority confirmed.
pub const RENEWAL_FAILURES: &str = "quorlock_renewal_failures_total";
/// Counter: a master's faults (not refusals), by `master` and `kind`.
pub const NODE_ERRORS: &str = "quorlock_node_errors_total";
/// Gauge: masters whose votes are ignored now, by `reason`.
pub const MASTERS_IGNORED: &str = "quorlock_masters_ignored";
/// Gauge: the masters whose data is at risk (persistence below `appendfsync always`, eviction,
/// replicas attached, an incarnation that may lack writes), by `risk`, from their last check.
pub const MASTERS_AT_RISK: &str = "quorlock_masters_at_risk";

/// Label: the kind of lock (`plain`, `fenced`, `reentrant`, `fair`, `multi`, `semaphore`, `read`, `write`,
/// `fenced_write`).
pub const LABEL_KIND: &str = "kind";
/// Label: how an acquire call or a round ended.
pub const LABEL_OUTCOME: &str = "outcome";
/// Label: why a held lock was found lost.
pub const LABEL_CAUSE: &str = "cause";
/// Label: a master's address, `host:port`, without credentials.
pub const LABEL_MASTER: &str = "master";
/// Label: why masters' votes are ignored.
pub const LABEL_REASON: &str = "reason";
/// Label of [`MASTERS_AT_RISK`]: what puts the master's data at risk.
pub const LABEL_RISK: &str = "risk";

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
/// How an acquire call ended, as the `outcome` label of [`ACQUISITIONS`] says it.
pub(crate) fn outcome<T>(result: &Result<T, AcquireError>) -> &'static str {
    match result {
        Ok(_) => "acquired",
        Err(err) if err.is_timeout() => "timed_out",
        Err(err) if err.is_contended() => "contended",
        Err(err) if err.is_unavailable() => "no_quorum",
        Err(_) => "error",
    }
}

/// Why a held lock was found lost, as the `cause` label of [`LOST`] says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// Its validity ended before an extend or a renewal confirmed it.
    Expired,
    /// An extend by hand found no majority.
    ExtendFailed,
    /// A watchdog renewal found too few masters still holding it.
    RenewalFailed,
    /// Another holder's token was found where ours should be (renewal or release).
    TakenOver,
    /// The release found the key absent on a majority while the guard still counted it valid.
    Vanished,
}

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
impl Cause {
    /// The label value.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Cause::Expired => "expired",
            Cause::ExtendFailed => "extend_failed",
            Cause::RenewalFailed => "renewal_failed",
            Cause::TakenOver => "taken_over",
            Cause::Vanished => "vanished",
        }
    }
}

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
/// Why a master's votes are ignored, as the `reason` label of [`MASTERS_IGNORED`] says it.
pub(crate) const REASONS: [&str; 6] = [
    "unreachable",
    "unverified",
    "restart_grace",
    "fence_repair",
    "replaced",
    "evicting",
];

/// What puts a master's data at risk, as the `risk` label of [`MASTERS_AT_RISK`] says it.
pub(crate) const RISKS: [&str; 4] = ["weak_persistence", "eviction", "replicas", "may_lack_writes"];

#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
/// The `kind` label of a master's fault; `None` for a refusal by a healthy master (held, absent,
/// queued), which is not an error.
pub(crate) fn node_error_kind(kind: &NodeErrorKind) -> Option<&'static str> {
    Some(match kind {
        NodeErrorKind::Held | NodeErrorKind::Absent | NodeErrorKind::Queued => return None,
        NodeErrorKind::WrongType => "wrong_type",
        NodeErrorKind::Timeout => "timeout",
        NodeErrorKind::Connection(_) => "connection",
        NodeErrorKind::Auth(_) => "auth",
        NodeErrorKind::Server(_) => "server",
        NodeErrorKind::Protocol(_) => "protocol",
        NodeErrorKind::Restarted { .. } => "restarted",
        NodeErrorKind::Unverified => "unverified",
        NodeErrorKind::FenceRepair => "fence_repair",
        NodeErrorKind::Replaced { .. } => "replaced",
        NodeErrorKind::Evicting { .. } => "evicting",
        NodeErrorKind::PermitsMismatch { .. } => "permits_mismatch",
    })
}

/// A start time, kept only when metrics are on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stopwatch {
    #[cfg(feature = "metrics")]
    started: Instant,
}

impl Stopwatch {
    /// Starts now.
    #[inline]
    pub(crate) fn start() -> Self {
        Self {
            #[cfg(feature = "metrics")]
            started: Instant::now(),
        }
    }

    /// The time since the start.
    #[cfg(feature = "metrics")]
    fn elapsed(self) -> Duration {
        self.started.elapsed()
    }
}

/// An acquire call of a `kind` of lock, begun at `since`, ended with `result`.
#[inline]
pub(crate) fn acquisition<T>(kind: &'static str, since: Stopwatch, result: &Result<T, AcquireError>) {
    #[cfg(feature = "metrics")]
    {
        let outcome = outcome(result);
        ::metrics::counter!(ACQUISITIONS, LABEL_KIND => kind, LABEL_OUTCOME => outcome).increment(1);
        ::metrics::histogram!(ACQUIRE_WAIT, LABEL_KIND => kind, LABEL_OUTCOME => outcome)
            .record(since.elapsed().as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, since, result);
}

/// A majority round begun at `since` decided: `won` when a majority confirmed it.
#[inline]
pub(crate) fn round(since: Stopwatch, won: bool) {
    #[cfg(feature = "metrics")]
    {
        let outcome = if won { "majority" } else { "no_majority" };
        ::metrics::histogram!(ROUND, LABEL_OUTCOME => outcome).record(since.elapsed().as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (since, won);
}

/// A held lock was found lost for `cause`.
#[inline]
pub(crate) fn lost(cause: Cause) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(LOST, LABEL_CAUSE => cause.label()).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = cause;
}

/// The watchdog made a renewal round; `confirmed` when a majority renewed it.
#[inline]
pub(crate) fn renewal(confirmed: bool) {
    #[cfg(feature = "metrics")]
    {
        ::metrics::counter!(RENEWALS).increment(1);
        if !confirmed {
            ::metrics::counter!(RENEWAL_FAILURES).increment(1);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = confirmed;
}

/// Master `addr` answered with `kind`: counted when it is a fault.
#[inline]
pub(crate) fn node_error(addr: &str, kind: &NodeErrorKind) {
    #[cfg(feature = "metrics")]
    if let Some(label) = node_error_kind(kind) {
        ::metrics::counter!(NODE_ERRORS, LABEL_MASTER => addr.to_owned(), LABEL_KIND => label).increment(1);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (addr, kind);
}

/// The number of masters at risk for `RISKS[risk]` changed by `delta` (one client's share of the
/// process-wide gauge).
#[inline]
pub(crate) fn at_risk(risk: usize, delta: i64) {
    #[cfg(feature = "metrics")]
    if let Some(label) = RISKS.get(risk) {
        ::metrics::gauge!(MASTERS_AT_RISK, LABEL_RISK => *label).increment(delta as f64);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (risk, delta);
}

/// The number of masters ignored for `REASONS[reason]` changed by `delta` (one client's share of
/// the process-wide gauge).
#[inline]
pub(crate) fn ignored(reason: usize, delta: i64) {
    #[cfg(feature = "metrics")]
    if let Some(label) = REASONS.get(reason) {
        ::metrics::gauge!(MASTERS_IGNORED, LABEL_REASON => *label).increment(delta as f64);
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (reason, delta);
}

/// One held lock, for the [`HELD`] gauge and the [`HOLD`] histogram: counted from its making to
/// [`Held::end`] (or its drop).
#[derive(Debug)]
pub(crate) struct Held {
    #[cfg(feature = "metrics")]
    since: Stopwatch,
    #[cfg(feature = "metrics")]
    ended: std::sync::atomic::AtomicBool,
}

impl Held {
    /// A lock held from now on.
    #[inline]
    pub(crate) fn start() -> Self {
        #[cfg(feature = "metrics")]
        ::metrics::gauge!(HELD).increment(1.0);
        Self {
            #[cfg(feature = "metrics")]
            since: Stopwatch::start(),
            #[cfg(feature = "metrics")]
            ended: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The lock is no longer held (released, or its guard dropped); only the first call counts.
    #[inline]
    pub(crate) fn end(&self) {
        #[cfg(feature = "metrics")]
        if !self.ended.swap(true, std::sync::atomic::Ordering::AcqRel) {
            ::metrics::gauge!(HELD).decrement(1.0);
            ::metrics::histogram!(HOLD).record(self.since.elapsed().as_secs_f64());
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.end();
    }
}
