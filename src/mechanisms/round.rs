//! The round driver: one request to each master, each reply read as a vote and fed to the core's
//! tally, and a return at the decision. It is written once, for every operation that asks a
//! majority: acquire (every lock kind), both fenced rounds, extend and the watchdog's batch are
//! each a count of replies ([`Count`]) run by the one [`Driver`], so one admission rule applies
//! to all of them.
//!
//! A round never waits for a master it does not need: it returns the moment the count is certain,
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

use crate::base::error::{AcquireError, ExtendError, NodeErrorKind, NodeFailure};
use crate::base::metrics;
use crate::base::names::Names;
use crate::core::round::{extend_error, round_error};
use crate::core::{Decision, Tally, Timing, Vote};
use crate::mechanisms::background::Background;
use crate::mechanisms::fanout::Fanout;
use crate::mechanisms::health::Health;
use crate::mechanisms::ops::LockOps;
use crate::mechanisms::release::{Release, ReleaseOnDrop};
use crate::seam::clock::Clock;
use crate::seam::link::{Link, Masters};

/// One master's reply as a round reads it: its vote, and what else the kind learned from it (a
/// hold count, the free slot a master named, the resources it found held, a fencing counter).
#[derive(Debug)]
pub(crate) struct Read<N> {
    /// `Ok` for a yes; otherwise why not (refused, unreachable, garbage).
    pub(crate) vote: Result<(), NodeErrorKind>,
    /// What the reply told besides the vote.
    pub(crate) note: Option<N>,
}

impl<N> Read<N> {
    /// A vote with nothing else to tell.
    pub(crate) fn vote(vote: Result<(), NodeErrorKind>) -> Self {
        Self { vote, note: None }
    }

    /// A vote that tells `note` too.
    pub(crate) fn noting(vote: Result<(), NodeErrorKind>, note: N) -> Self {
        Self {
            vote,
            note: Some(note),
        }
    }
}

/// What the driver needs of any reply: the error it carries, if any, for the master's health.
pub(crate) trait Answer {
    /// The reply's error: `None` for a reply that may count as a yes.
    fn error(&self) -> Option<&NodeErrorKind>;
}

impl<N> Answer for Read<N> {
    fn error(&self) -> Option<&NodeErrorKind> {
        self.vote.as_ref().err()
    }
}

impl<T> Answer for Result<T, NodeErrorKind> {
    fn error(&self) -> Option<&NodeErrorKind> {
        self.as_ref().err()
    }
}

/// How the replies of one round are counted: one tally (acquire, the fenced rounds, extend), or
/// one per lock (the watchdog's batch). The count decides; the driver only feeds it.
pub(crate) trait Count<R> {
    /// Takes master `node`'s `reply`, which arrived at `now`. `admitted` is whether a yes from
    /// that master may count now (the restart grace, an unverified reconnect); a count must read
    /// a yes from a master not admitted as that refusal. Returns whether the round is over.
    fn reply(&mut self, node: usize, reply: R, admitted: Result<(), NodeErrorKind>, now: Instant) -> bool;

    /// When time alone decides what is still open.
    fn deadline(&self) -> Instant;

    /// Time has come to `now`: whether the round is over.
    fn time_is_up(&mut self, now: Instant) -> bool;

    /// Every request has ended.
    fn all_answered(&mut self, now: Instant);
}

/// Runs rounds: feeds each reply, read and admitted, to a [`Count`] until it is over or time
/// decides.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Driver<'a> {
    /// The masters, for the admission of their votes.
    pub(crate) masters: &'a Masters,
    /// Whose votes count now, and where each master's replies are recorded.
    pub(crate) health: &'a Health,
    /// The clock the round is measured on.
    pub(crate) clock: &'a Clock,
    /// The bound on each master's reply.
    pub(crate) node_timeout: Duration,
}

impl Driver<'_> {
    /// Feeds `pending`'s replies to `count` until it is over, every request has ended, or time
    /// decides.
    ///
    /// Every reply is recorded in the master's health (reachable or not, its round trip), and a
    /// reply that may count as a yes is admitted or refused by [`Health::admit`], the one rule
    /// for every round.
    pub(crate) async fn run<F, R, C>(&self, pending: &mut Fanout<F>, count: &mut C)
    where
        F: Future<Output = R> + Unpin,
        R: Answer,
        C: Count<R>,
    {
        let opened = self.clock.now();
        let mut deadline = count.deadline();
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
            tokio::select! {
                biased;
                reply = pending.next() => match reply {
                    Some((node, reply)) => {
                        let now = self.clock.now();
                        self.health.observe(node, reply.error(), now.saturating_duration_since(opened));
                        let admitted = match (reply.error(), self.masters.get(node)) {
                            (None, Some(link)) => self.health.admit(link, now),
                            _ => Ok(()),
                        };
                        if count.reply(node, reply, admitted, now) {
                            return;
                        }
                    }
                    // Every request has ended: the count decides what is left.
                    None => {
                        count.all_answered(self.clock.now());
                        return;
                    }
                },
                () = time_decides.as_mut(), if timed => {
                    let now = self.clock.now();
                    if count.time_is_up(now) {
                        return;
                    }
                    // Either a timer fired a hair before the deadline it was set for (look again
                    // shortly rather than spin on a fired timer), or the count has a later one.
                    let next = count.deadline();
                    deadline = if next > now { next } else { self.clock.deadline(Duration::from_millis(1)) };
                    time_decides.as_mut().reset(deadline);
                }
            }
        }
    }
}

/// The count of a round with one tally: the votes, each refusal's reason, and the kind's notes.
#[derive(Debug)]
pub(crate) struct Votes<'m, N> {
    masters: &'m Masters,
    tally: Tally,
    started: Instant,
    failures: Vec<NodeFailure>,
    notes: Vec<(usize, N)>,
}

impl<'m, N> Votes<'m, N> {
    /// An open count over `masters` for a lock with `timing`, started at `started`.
    pub(crate) fn new(masters: &'m Masters, timing: Timing, started: Instant) -> Self {
        Self {
            masters,
            tally: Tally::new(masters.len(), timing, started.into_std()),
            started,
            failures: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The decision so far.
    pub(crate) fn decision(&self) -> Decision {
        self.tally.decision()
    }

    /// When the count opened.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// Counts `node` as a no before anything is sent to it (a master a second round skips).
    pub(crate) fn refuse(&mut self, node: usize, now: Instant) {
        self.tally.handle_reply(node, Vote::No, now.into_std());
    }

    /// The masters that said yes, in order.
    pub(crate) fn said_yes(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.tally.masters()).filter(|i| self.tally.vote(*i) == Some(Vote::Yes))
    }

    /// Whether `node` had not answered when the count ended.
    pub(crate) fn silent(&self, node: usize) -> bool {
        self.tally.vote(node).is_none()
    }

    /// The reasons of every master that did not say yes.
    pub(crate) fn failures(&mut self) -> &mut Vec<NodeFailure> {
        &mut self.failures
    }

    /// The notes of the masters' replies, taken out of the count.
    pub(crate) fn take_notes(&mut self) -> Vec<(usize, N)> {
        std::mem::take(&mut self.notes)
    }

    /// The error of an acquire round for `resource` that did not win, `now`.
    pub(crate) fn error(&mut self, resource: &str, timing: Timing, now: Instant) -> AcquireError {
        round_error(
            resource,
            &self.tally,
            self.tally.decision(),
            now.saturating_duration_since(self.started),
            timing,
            std::mem::take(&mut self.failures),
        )
    }

    /// The error of an extend of `resource` that did not win.
    pub(crate) fn extend_error(&mut self, resource: &str) -> ExtendError {
        extend_error(resource, &self.tally, std::mem::take(&mut self.failures))
    }

    /// Takes the vote `vote` of `node` at `now`, recording why it was not a yes.
    fn take(&mut self, node: usize, vote: Result<(), NodeErrorKind>, now: Instant) -> bool {
        let vote = match vote {
            Ok(()) => Vote::Yes,
            Err(kind) => {
                self.failures.push(self.masters.failure(node, kind));
                Vote::No
            }
        };
        debug!(node, addr = self.masters.addr(node), ?vote, "master replied");
        self.tally.handle_reply(node, vote, now.into_std()).is_final()
    }
}

impl<N> Count<Read<N>> for Votes<'_, N> {
    fn reply(
        &mut self,
        node: usize,
        reply: Read<N>,
        admitted: Result<(), NodeErrorKind>,
        now: Instant,
    ) -> bool {
        if let Some(note) = reply.note {
            self.notes.push((node, note));
        }
        self.take(node, reply.vote.and(admitted), now)
    }

    fn deadline(&self) -> Instant {
        Instant::from_std(self.tally.deadline())
    }

    fn time_is_up(&mut self, now: Instant) -> bool {
        self.tally.poll(now.into_std()).is_final()
    }

    fn all_answered(&mut self, now: Instant) {
        self.tally.all_answered(now.into_std());
    }
}

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

impl<'a> Round<'a> {
    /// Starts the background checks of masters that are due one (after a reconnect, or
    /// periodically); never waits for them.
    pub(crate) fn check_health(&self) {
        crate::mechanisms::health::tick(self.health, self.masters, self.names);
    }

    /// The driver over these masters.
    pub(crate) fn driver(&self) -> Driver<'a> {
        Driver {
            masters: self.masters,
            health: self.health,
            clock: self.clock,
            node_timeout: self.node_timeout,
        }
    }

    /// An open count for a lock with `timing`, starting now.
    pub(crate) fn votes<N>(&self, timing: Timing) -> Votes<'a, N> {
        Votes::new(self.masters, timing, self.clock.now())
    }

    /// Sends `send(master)` to every master: the round's requests, to be fed to
    /// [`Round::decide`].
    pub(crate) fn fan_out<F, Fut>(&self, send: F) -> Fanout<Fut>
    where
        F: Fn(&Link) -> Fut,
        Fut: Future + Unpin,
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

    /// One acquire round of any kind of lock for `resource`: `send` asks one master for the lock
    /// and reads its reply; `ops` releases what was taken when the round fails or is dropped.
    /// Returns when the lock stops being valid, and the notes of the replies read.
    ///
    /// The per-master requests own what they use, so the ones still in flight when the round is
    /// won finish in a task (see [`finish_stragglers`]); a lost round releases everywhere before it
    /// returns, and a round dropped part-way releases from a task.
    pub(crate) async fn acquire<F, Fut, N>(
        &self,
        resource: &str,
        timing: Timing,
        ops: &Arc<dyn LockOps>,
        send: F,
    ) -> (Result<Instant, AcquireError>, Vec<(usize, N)>)
    where
        F: Fn(&Link) -> Fut,
        Fut: Future<Output = Read<N>> + Unpin + Send + 'static,
        N: Send + 'static,
    {
        self.check_health();
        // Armed until the round is settled: dropping this future part-way releases from a task.
        let mut cleanup = ReleaseOnDrop::new(self.release(), Arc::clone(ops));
        let mut votes = self.votes(timing);
        let mut pending = self.fan_out(send);
        let decision = self.decide(&mut votes, &mut pending).await;
        let result = match decision {
            Decision::Acquired { valid_until, .. } => {
                cleanup.disarm();
                finish_stragglers(self.background, pending);
                Ok(Instant::from_std(valid_until))
            }
            Decision::Failed(_) => {
                drop(pending);
                let Votes { tally, failures, .. } = &mut votes;
                self.release()
                    .failed_round(ops, |i| tally.vote(i).is_none(), failures)
                    .await;
                cleanup.disarm();
                Err(votes.error(resource, timing, self.clock.now()))
            }
            Decision::Pending => Err(votes.error(resource, timing, self.clock.now())),
        };
        (result, votes.take_notes())
    }

    /// Runs `pending` into `votes` until the tally decides, or until time alone decides, and
    /// reports the decision (metrics, the operation's span, the masters' health).
    pub(crate) async fn decide<F, N>(&self, votes: &mut Votes<'_, N>, pending: &mut Fanout<F>) -> Decision
    where
        F: Future<Output = Read<N>> + Unpin,
    {
        let since = metrics::Stopwatch::start();
        self.driver().run(pending, votes).await;
        let decision = votes.decision();
        metrics::round(since, matches!(decision, Decision::Acquired { .. }));
        self.health.publish(self.masters);
        // The operation's span (acquire, extend, ...) declares these fields; elsewhere recording
        // them is a no-op.
        let span = Span::current();
        span.record("ok", votes.tally.yes());
        span.record("failed", votes.tally.no());
        if let Decision::Acquired { validity, .. } = decision {
            span.record(
                "validity_ms",
                u64::try_from(validity.as_millis()).unwrap_or(u64::MAX),
            );
        }
        decision
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
