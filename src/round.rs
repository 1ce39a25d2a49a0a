//! The round: one request to each master, their replies fed to the core's tally, and a return at
//! the decision, written once for every operation that asks a majority (acquire, extend, the fenced
//! rounds, every lock kind).
//!
//! A round never waits for a master it does not need: it returns the moment the tally is certain,
//! either way, or when time alone decides (the validity would run out). The requests still in
//! flight then are the caller's: a won acquire lets them finish in a task ([`finish_stragglers`]), so
//! the lock lands on every master that grants it; other rounds drop them.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::StreamExt;
use futures::FutureExt;
use tokio::time::Instant;
use tracing::{debug, Span};

use crate::background::Background;
use crate::clock::Clock;
use crate::core::round::round_error;
use crate::core::{Decision, Tally, Timing, Vote};
use crate::error::{AcquireError, NodeErrorKind, NodeFailure};
use crate::fanout::Fanout;
use crate::health::Health;
use crate::link::{Link, Masters};
use crate::metrics;
use crate::names::Names;
use crate::ops::LockOps;
use crate::release::{Release, ReleaseOnDrop};

/// What a round needs of its client: the masters, whose votes count, and where leftover requests go.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Round<'a> {
    /// Every master, in configured order.
    pub(crate) masters: &'a Arc<Masters>,
    /// Which masters' votes count now.
    pub(crate) health: &'a Arc<Health>,
    /// Where requests and releases left to tasks are counted.
    pub(crate) background: &'a Background,
    /// The bound on each master's reply.
    pub(crate) node_timeout: Duration,
    /// The clock the round's validity is measured on.
    pub(crate) clock: &'a Clock,
    /// The client's key names (the health checks read the masters' records under them).
    pub(crate) names: &'a Names,
}

impl Round<'_> {
    /// Starts the background checks of masters that are due one (after a reconnect, or
    /// periodically); never waits for them.
    pub(crate) fn check_health(&self) {
        crate::health::tick(self.health, self.masters, self.names);
    }

    /// Sends `send(master)` to every master and decides: the round's requests, to be fed to
    /// [`Round::decide`].
    pub(crate) fn fan_out<F, Fut>(&self, send: F) -> Fanout<Fut>
    where
        F: Fn(&Link) -> Fut,
        Fut: Future<Output = Result<(), NodeErrorKind>> + Unpin,
    {
        self.masters
            .iter()
            .map(|link| (link.index(), send(link)))
            .collect()
    }

    /// The release mechanism over the same masters.
    pub(crate) fn release(&self) -> Release<'_> {
        Release {
            masters: self.masters,
            background: self.background,
        }
    }

    /// One acquire round of any kind of lock for `resource`: `send` asks one master for the lock and
    /// answers `Ok` when it granted it; `ops` releases what was taken when the round fails or is
    /// dropped. Returns when the lock stops being valid.
    ///
    /// The per-master requests own what they use, so the ones still in flight when the round is
    /// won finish in a task (see [`finish_stragglers`]); a lost round releases everywhere before it
    /// returns, and a round dropped part-way releases from a task.
    pub(crate) async fn acquire<F, Fut>(
        &self,
        resource: &str,
        timing: Timing,
        ops: &Arc<dyn LockOps>,
        send: F,
    ) -> Result<Instant, AcquireError>
    where
        F: Fn(&Link) -> Fut,
        Fut: Future<Output = Result<(), NodeErrorKind>> + Unpin + Send + 'static,
    {
        self.check_health();
        // Armed until the round is settled: dropping this future part-way releases from a task.
        let mut cleanup = ReleaseOnDrop::new(self.release(), Arc::clone(ops));
        let started = self.clock.now();
        let mut tally = Tally::new(self.masters.len(), timing, started.into_std());
        let mut pending = self.fan_out(send);
        let mut failures = Vec::new();
        let decision = self.decide(&mut tally, &mut pending, &mut failures).await;
        match decision {
            Decision::Acquired { valid_until, .. } => {
                cleanup.disarm();
                finish_stragglers(self.background, pending);
                Ok(Instant::from_std(valid_until))
            }
            Decision::Failed(_) => {
                drop(pending);
                self.release()
                    .failed_round(ops, |i| tally.vote(i).is_none(), &mut failures)
                    .await;
                cleanup.disarm();
                Err(round_error(
                    resource,
                    &tally,
                    decision,
                    self.clock.now().saturating_duration_since(started),
                    timing,
                    failures,
                ))
            }
            Decision::Pending => Err(round_error(
                resource,
                &tally,
                decision,
                self.clock.now().saturating_duration_since(started),
                timing,
                failures,
            )),
        }
    }

    /// Feeds replies to the tally until it decides, or until time alone decides.
    ///
    /// A yes from a master whose vote may not count now (restarted within the grace, or not
    /// verified since a reconnect) is counted as a no. Every reply that is not a yes is recorded in
    /// `failures`.
    pub(crate) async fn decide<F>(
        &self,
        tally: &mut Tally,
        pending: &mut Fanout<F>,
        failures: &mut Vec<NodeFailure>,
    ) -> Decision
    where
        F: Future<Output = Result<(), NodeErrorKind>> + Unpin,
    {
        let since = metrics::Stopwatch::start();
        let opened = self.clock.now();
        let deadline = Instant::from_std(tally.deadline());
        // One timer for the whole round, not one per reply, and none when the requests' own node
        // timeouts (at most two in a row per request) end them all before time could decide: a
        // reply is only a yes with validity left at its arrival anyway. Registering a timer can
        // cost a wake-up of the runtime's timer thread.
        // The shortcut holds when the masters' timeouts run on this clock: always for tokio's; an
        // environment's clock may run at another rate than the one a master times out on.
        let answered_by = opened.checked_add(self.node_timeout.saturating_mul(2));
        let timed = !self.clock.is_tokio() || answered_by.is_none_or(|by| by >= deadline);
        let time_decides = self.clock.sleep_until_if(timed, deadline);
        tokio::pin!(time_decides);
        loop {
            let decision = tokio::select! {
                biased;
                reply = pending.next() => match reply {
                    Some((node, result)) => {
                        let now = self.clock.now();
                        self.health.observe(node, result.as_ref().err(), now.saturating_duration_since(opened));
                        let result = result.and_then(|()| match self.masters.get(node) {
                            Some(link) => self.health.admit(link, now),
                            None => Ok(()),
                        });
                        let vote = match result {
                            Ok(()) => Vote::Yes,
                            Err(kind) => {
                                failures.push(self.masters.failure(node, kind));
                                Vote::No
                            }
                        };
                        debug!(node, addr = self.masters.addr(node), ?vote, "master replied");
                        tally.handle_reply(node, vote, now.into_std())
                    }
                    // Every request has ended: the tally decides what is left.
                    None => tally.all_answered(self.clock.now().into_std()),
                },
                () = time_decides.as_mut(), if timed => {
                    let decided = tally.poll(self.clock.now().into_std());
                    if !decided.is_final() {
                        // A timer fired a hair before the deadline it was set for: look again
                        // shortly rather than spin on a fired timer.
                        time_decides.as_mut().reset(self.clock.deadline(Duration::from_millis(1)));
                    }
                    decided
                }
            };
            if decision.is_final() {
                metrics::round(since, matches!(decision, Decision::Acquired { .. }));
                self.health.publish(self.masters);
                // The operation's span (acquire, extend, ...) declares these fields; elsewhere
                // recording them is a no-op.
                let span = Span::current();
                span.record("ok", tally.yes());
                span.record("failed", tally.no());
                if let Decision::Acquired { validity, .. } = decision {
                    span.record(
                        "validity_ms",
                        u64::try_from(validity.as_millis()).unwrap_or(u64::MAX),
                    );
                }
                return decision;
            }
        }
    }
}

/// Lets the requests of a won round that have not answered yet finish, from a task when any are
/// left, so that the lock lands on every master that grants it, not only on the majority that
/// answered first. Dropped instead, a request still waiting for its turn on a master's connection
/// would never be sent: the lock would then stand on a bare majority, and the loss of one more
/// master would end it. Their replies change nothing for the holder. A request already handed to
/// its connection is followed there by any later release; one still waiting for a reconnect may be
/// overtaken by a release waiting for the same reconnect, and its key then stays on that master
/// until the TTL: on a minority, so it never makes a second holder.
pub(crate) fn finish_stragglers<Fut>(background: &Background, mut pending: Fanout<Fut>)
where
    Fut: Future + Unpin + Send + 'static,
    Fut::Output: Send,
{
    while let Some(Some(_)) = pending.next().now_or_never() {}
    if pending.is_empty() {
        return;
    }
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            background.spawn_on(&handle, async move { while pending.next().await.is_some() {} });
        }
        Err(_) => debug!("no async runtime to finish the slower masters' requests from"),
    }
}
