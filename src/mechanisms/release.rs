//! Release everywhere: a lock's release sent to every master that may hold it, counted, and
//! finished from a task when nobody is left to wait for it.
//!
//! A release is sent to all N masters, not only to those that granted the lock: a master that
//! timed out may still have taken it. The caller waits until a majority confirmed (or every master
//! answered); the masters still in flight then finish in a counted background task, so a stalled
//! master costs nothing and [`crate::Quorlock::settle`] can still wait for it. A dropped guard, an
//! abandoned acquire and a failed round release the same way, from a task ([`spawn_release`],
//! [`ReleaseOnDrop`]). What the answers mean is the core's verdict (`core::release`).

use std::sync::Arc;

use futures::stream::StreamExt;
use futures::FutureExt;
use tracing::{debug, warn};

use crate::base::error::{NodeErrorKind, NodeFailure};
use crate::base::lua::Found;
use crate::core::quorum;
use crate::core::release::ReleaseTally;
use crate::mechanisms::background::Background;
use crate::mechanisms::fanout::Fanout;
use crate::mechanisms::ops::LockOps;
use crate::seam::link::Masters;

/// Where a release sends and where it leaves what is not awaited.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Release<'a> {
    /// Every master, in configured order.
    pub(crate) masters: &'a Arc<Masters>,
    /// Where the rest of a release left to a task is counted.
    pub(crate) background: &'a Background,
}

impl Release<'_> {
    /// Releases a lock on the masters listed, concurrently, and counts what it found. `announce`
    /// says whether the release of a held lock is announced to waiters; see [`LockOps::cleanup`].
    pub(crate) async fn on(&self, ops: &dyn LockOps, nodes: &[usize], announce: bool) -> ReleaseTally {
        self.until(ops, nodes.iter().copied(), None, announce, || {})
            .await
    }

    /// As [`Release::on`], calling `queued` as soon as every master's release has been handed to
    /// its connection, before any reply.
    pub(crate) async fn on_queued(
        &self,
        ops: &dyn LockOps,
        nodes: &[usize],
        queued: impl FnOnce(),
    ) -> ReleaseTally {
        self.until(ops, nodes.iter().copied(), None, true, queued).await
    }

    /// Releases a lock on every master, returning as soon as a majority confirmed the release; the
    /// masters still in flight then finish in a background task, so a stalled master costs nothing.
    pub(crate) async fn everywhere(&self, ops: &dyn LockOps, queued: impl FnOnce()) -> ReleaseTally {
        let n = self.masters.len();
        self.until(ops, 0..n, Some(quorum(n)), true, queued).await
    }

    /// Sends the release to `nodes` and counts the answers, until `enough` masters confirmed (then
    /// the rest is left to a task) or all have answered. `queued` runs once every request has been
    /// polled once, which hands it to its master's connection.
    async fn until(
        &self,
        ops: &dyn LockOps,
        nodes: impl IntoIterator<Item = usize>,
        enough: Option<usize>,
        announce: bool,
        queued: impl FnOnce(),
    ) -> ReleaseTally {
        let call = if announce { ops.release() } else { ops.cleanup() };
        let mut pending: Fanout<_> = nodes
            .into_iter()
            .filter_map(|node| self.masters.get(node))
            .map(|link| {
                (
                    link.index(),
                    link.call(&call).map(|reply| reply.and_then(Found::from_reply)),
                )
            })
            .collect();
        // Poll every request once before waiting for any: each is then written to (or queued on)
        // its master's multiplexed connection, ahead of any command sent after `queued` runs.
        let mut early = Vec::new();
        std::future::poll_fn(|cx| loop {
            match pending.poll_next_unpin(cx) {
                std::task::Poll::Ready(Some(reply)) => early.push(reply),
                _ => return std::task::Poll::Ready(()),
            }
        })
        .await;
        queued();
        let mut out = ReleaseTally::default();
        for (node, result) in early {
            count(self.masters, &mut out, node, result);
        }
        loop {
            if enough.is_some_and(|enough| out.held >= enough) && !pending.is_empty() {
                // Replies already in are counted here: a task is spawned only for masters that
                // have not answered yet.
                while let Some(Some((node, result))) = pending.next().now_or_never() {
                    count(self.masters, &mut out, node, result);
                }
                if pending.is_empty() {
                    break;
                }
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    out.in_background = pending.len();
                    let masters = Arc::clone(self.masters);
                    self.background.spawn_on(&handle, async move {
                        let mut rest = ReleaseTally::default();
                        while let Some((node, result)) = pending.next().await {
                            count(&masters, &mut rest, node, result);
                        }
                        report_unawaited(&rest);
                    });
                    break;
                }
            }
            let Some((node, result)) = pending.next().await else {
                break;
            };
            count(self.masters, &mut out, node, result);
        }
        out
    }

    /// Releases what a failed round may have taken, before its error is returned: on the masters
    /// whose request may still land (`in_flight`, or failed as unreachable) from a task, as their
    /// request, if it lands, is ordered before the release on the same connection; on the others
    /// at once. A master whose release meets a key of another type is recorded in `failures` as
    /// such (the round saw it as held), so the error names it and is not retried; `failures` ends
    /// up sorted by master.
    pub(crate) async fn failed_round(
        &self,
        ops: &Arc<dyn LockOps>,
        in_flight: impl Fn(usize) -> bool,
        failures: &mut Vec<NodeFailure>,
    ) {
        // A master that timed out or could not be reached may still take the key too (its request
        // may be queued behind a stall), and waiting on it would cost another node timeout: both
        // are released from the task. Only the answers of the others are awaited (they tell a key
        // of another type).
        let unreachable = |i: usize| failures.iter().any(|f| f.node == i && f.kind.is_unreachable());
        let (late, answered): (Vec<usize>, Vec<usize>) =
            (0..self.masters.len()).partition(|i| in_flight(*i) || unreachable(*i));
        if !late.is_empty() {
            self.spawn(Arc::clone(ops), late, Releasing::Partial);
        }
        let released = self.on(ops.as_ref(), &answered, false).await;
        for found in released
            .errors
            .iter()
            .filter(|f| f.kind == NodeErrorKind::WrongType)
        {
            match failures.iter_mut().find(|f| f.node == found.node) {
                Some(existing) => existing.kind = NodeErrorKind::WrongType,
                None => failures.push(found.clone()),
            }
        }
        failures.sort_by_key(|f| f.node);
    }

    /// Releases a lock from a spawned task, when a runtime is there to run it.
    pub(crate) fn spawn(&self, ops: Arc<dyn LockOps>, nodes: Vec<usize>, what: Releasing) {
        spawn_release(
            Arc::clone(self.masters),
            self.background.clone(),
            ops,
            nodes,
            what,
        );
    }
}

/// Records one master's answer to a release.
fn count(masters: &Masters, out: &mut ReleaseTally, node: usize, result: Result<Found, NodeErrorKind>) {
    match result {
        Ok(Found::Ours) => out.held += 1,
        Ok(other) => {
            if let Err(kind) = other.into_result() {
                out.not_held.push(masters.failure(node, kind));
            }
        }
        Err(kind) => {
            // In the release's result for its caller, or warned about once per background
            // release (`report_unawaited`); a warning here would repeat on every retry of a
            // round against a master that is down.
            debug!(node, addr = masters.addr(node), error = %kind, "release failed on a master");
            out.errors.push(masters.failure(node, kind));
        }
    }
}

/// Warns when a release that nobody awaits (a background task's) failed on some master: the key
/// stays there until its TTL, and nothing else reports it.
pub(crate) fn report_unawaited(out: &ReleaseTally) {
    if !out.errors.is_empty() {
        let failed: Vec<String> = out.errors.iter().map(ToString::to_string).collect();
        warn!(
            failed = %failed.join("; "),
            "a release in the background failed on a master; the key stays there until its TTL"
        );
    }
}

/// Whether a release from a task is of a lock that was held (a dropped guard), whose failure on a
/// master is worth a warning, or of what a failed or abandoned round may have taken, where a master
/// that fails is most likely one that never took the key, and a warning would come with every
/// retry against a master that is down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Releasing {
    Held,
    Partial,
}

/// Releases a lock on `nodes` from a spawned task, when a runtime is there to run it.
pub(crate) fn spawn_release(
    masters: Arc<Masters>,
    background: Background,
    ops: Arc<dyn LockOps>,
    nodes: Vec<usize>,
    what: Releasing,
) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            let counted = background.clone();
            counted.spawn_on(&handle, async move {
                let release = Release {
                    masters: &masters,
                    background: &background,
                };
                let out = release.on(ops.as_ref(), &nodes, what == Releasing::Held).await;
                debug!(lock = ?ops, held = out.held, errors = out.errors.len(), "background release done");
                if what == Releasing::Held {
                    report_unawaited(&out);
                }
            });
        }
        Err(_) => warn!(lock = ?ops, "no async runtime to release the lock from; it expires with its TTL"),
    }
}

/// Releases everywhere on drop unless disarmed: the cancel-safety net of an acquire round.
pub(crate) struct ReleaseOnDrop {
    armed: Option<(Arc<Masters>, Background, Arc<dyn LockOps>)>,
}

impl ReleaseOnDrop {
    /// Arms the net for `ops` on every master.
    pub(crate) fn new(release: Release<'_>, ops: Arc<dyn LockOps>) -> Self {
        Self {
            armed: Some((Arc::clone(release.masters), release.background.clone(), ops)),
        }
    }

    /// The round is settled: nothing to release on drop.
    pub(crate) fn disarm(&mut self) {
        self.armed = None;
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        if let Some((masters, background, ops)) = self.armed.take() {
            let all = (0..masters.len()).collect();
            spawn_release(masters, background, ops, all, Releasing::Partial);
        }
    }
}
