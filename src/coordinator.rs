//! The `Quorlock` type: fans each request out to every master at once, feeds the replies to the
//! core's tally, and acts on its decision.
//!
//! - Acquire sends `SET key token NX PX ttl` to all N masters concurrently and returns the moment
//!   the tally is certain, without waiting for slow or dead masters; a won round's requests to the
//!   slower masters still finish in a task, so the lock lands on every master that grants it.
//! - A failed round releases the key on **all** N masters, including those whose reply is still in
//!   flight, then retries after a jittered delay, bounded by an attempt count and a wait deadline.
//! - Dropping an acquire future at any await point hands the release to a spawned task, so no key
//!   is stranded until its TTL.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::StreamExt;
use futures::FutureExt;
use tracing::{debug, field, instrument, warn, Span};

use crate::background::Background;
use crate::coalesce::LocalQueue;
use crate::config::{Config, QuorlockBuilder, MAX_TTL, RELEASE_CHANNEL_PREFIX};
use crate::core::{quorum, Decision, Failure, Tally, Timing, Vote};
use crate::error::{AcquireError, BuildError, InputError, NodeErrorKind, NodeFailure};
use crate::fanout::Fanout;
use crate::guard::Guard;
use crate::health::Health;
use crate::node::{Found, Node};
use crate::ops::{LockOps, PlainLock};
use crate::token::new_token;
use crate::wait::Waits;
use crate::watchdog::Watchdog;

/// A handle to N independent Redis masters that hands out locks decided by majority.
///
/// Cheap to clone: clones share the connections (one per master for the whole process).
#[derive(Clone, Debug)]
pub struct Quorlock {
    pub(crate) inner: Arc<Inner>,
}

/// What the handle and every guard share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) nodes: Vec<Node>,
    pub(crate) config: Config,
    /// Each master's identity and durability, and whose votes count.
    pub(crate) health: Health,
    /// The renewal scheduler of every kept-alive guard.
    pub(crate) watchdog: Watchdog,
    /// The release listeners of blocked acquires.
    pub(crate) waits: Waits,
    /// The local turns of this process's waiters, per key.
    pub(crate) queue: LocalQueue,
    /// Lock traffic left to tasks (slower masters, dropped guards), for [`Quorlock::settle`].
    pub(crate) background: Background,
}

/// The outcome of releasing one key on a set of masters.
#[derive(Debug, Default)]
pub(crate) struct ReleaseTally {
    /// Masters where our token was found and deleted.
    pub(crate) held: usize,
    /// Masters that answered, but did not hold our token.
    pub(crate) not_held: Vec<NodeFailure>,
    /// Masters that failed to answer.
    pub(crate) errors: Vec<NodeFailure>,
}

impl ReleaseTally {
    /// Warns when a release that nobody awaits (a background task's) failed on some master: the
    /// key stays there until its TTL, and nothing else reports it.
    pub(crate) fn report_unawaited(&self) {
        if !self.errors.is_empty() {
            let failed: Vec<String> = self.errors.iter().map(ToString::to_string).collect();
            warn!(
                failed = %failed.join("; "),
                "a release in the background failed on a master; the key stays there until its TTL"
            );
        }
    }
}

impl Quorlock {
    /// Starts a builder with every setting at its documented default.
    pub fn builder() -> QuorlockBuilder {
        QuorlockBuilder::default()
    }

    /// Builds from a builder: checks the settings, prepares one connection per master and pings
    /// them all concurrently.
    ///
    /// Unreachable masters are only warned about (a majority may come up later); rejected
    /// credentials are an error.
    pub(crate) async fn from_builder(builder: QuorlockBuilder) -> Result<Self, BuildError> {
        let config = builder.config()?;
        let mut nodes: Vec<Node> = Vec::with_capacity(builder.urls.len());
        for (index, url) in builder.urls.iter().enumerate() {
            let node = Node::with_roots(
                index,
                url,
                config.node_timeout,
                config.connect_timeout,
                config.tls_root_certificates.as_deref(),
            )?;
            if let Some(first) = nodes.iter().find(|n| n.addr() == node.addr()) {
                return Err(BuildError::DuplicateNode {
                    addr: node.addr().to_owned(),
                    first: first.index(),
                    second: index,
                });
            }
            nodes.push(node);
        }
        if nodes.len() % 2 == 0 {
            warn!(
                masters = nodes.len(),
                "an even number of masters tolerates no more failures than one fewer; prefer an odd number"
            );
        }
        let pings = nodes
            .iter()
            .map(|node| async move { (node, node.ping(config.connect_timeout).await) });
        for (node, result) in futures::future::join_all(pings).await {
            match result {
                Ok(()) => {}
                Err(NodeErrorKind::Auth(message)) => {
                    return Err(BuildError::Auth {
                        node: node.index(),
                        addr: node.addr().to_owned(),
                        message,
                    });
                }
                Err(kind) => {
                    warn!(node = node.index(), addr = node.addr(), error = %kind, "master not usable at build (unreachable, or answering with errors); it counts as a no until it answers")
                }
            }
        }
        let health = Health::new(nodes.len(), &config);
        let inner = Inner {
            waits: Waits::new(&nodes, config.connect_timeout),
            nodes,
            config,
            watchdog: Watchdog::new(),
            queue: LocalQueue::default(),
            health,
            background: Background::new(),
        };
        crate::health::check_at_build(&inner).await;
        same_server_twice(&inner)?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The checked configuration.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The number of masters.
    pub fn masters(&self) -> usize {
        self.inner.nodes.len()
    }

    /// The number of masters that make a majority.
    pub fn quorum(&self) -> usize {
        quorum(self.inner.nodes.len())
    }

    /// Acquires `resource` for `ttl`, waiting until the attempt count or the wait deadline runs
    /// out.
    ///
    /// While another holder has it, the wait ends as soon as the holder releases (announced on
    /// the resource's release channel) or the key expires on a majority; other tasks of this
    /// process waiting for the same resource queue behind this one. See the builder's
    /// `wake_on_release` and `local_queue`.
    ///
    /// # Errors
    /// [`AcquireError::Input`] for a bad resource name or TTL (nothing is sent);
    /// [`AcquireError::Exhausted`] when every attempt failed, carrying the last round's failure;
    /// [`AcquireError::Queued`] when the deadline passed behind other tasks of this process;
    /// a non-retryable round failure (authentication, wrong key type) is returned at once.
    #[instrument(skip_all, fields(resource = %resource, attempt = field::Empty, ok = field::Empty, failed = field::Empty, validity_ms = field::Empty))]
    pub async fn acquire(&self, resource: &str, ttl: Duration) -> Result<Guard, AcquireError> {
        let timing = self.inner.check(resource, ttl)?;
        self.inner.acquire_waiting(resource, timing).await
    }

    /// Makes exactly one round for `resource`, with no retries.
    ///
    /// # Errors
    /// [`AcquireError::NoQuorum`] when a majority did not grant it, [`AcquireError::TooSlow`] when
    /// the majority came too late, [`AcquireError::Input`] for bad arguments.
    #[instrument(skip_all, fields(resource = %resource, attempt = 1, ok = field::Empty, failed = field::Empty, validity_ms = field::Empty))]
    pub async fn try_acquire(&self, resource: &str, ttl: Duration) -> Result<Guard, AcquireError> {
        let timing = self.inner.check(resource, ttl)?;
        self.inner.round(resource, timing).await
    }

    /// Waits until the lock traffic this client handed to background tasks has finished: the
    /// requests of won rounds to masters slower than the majority, the rest of releases a
    /// majority already confirmed, releases of dropped guards and abandoned acquires, and fair
    /// waiters leaving their queue. Returns at once when there is none.
    ///
    /// Call it before the process exits, once this client's work is done, so that no key is left
    /// on a slow master to expire with its TTL and every master that grants a plain lock gets it
    /// (a fenced round drops its requests to the slower masters instead). Every such task is
    /// bounded by a few node timeouts, so this returns within a few node timeouts unless other
    /// tasks keep locking meanwhile (it waits for their background work too). The tasks run on the
    /// runtime the lock calls ran on, which must keep running meanwhile. It neither releases held
    /// guards nor stops their watchdogs: release them first.
    ///
    /// ```no_run
    /// # async fn run(locks: quorlock::Quorlock) -> Result<(), Box<dyn std::error::Error>> {
    /// # use std::time::Duration;
    /// let guard = locks.acquire("nightly-report", Duration::from_secs(60)).await?;
    /// // ... the job ...
    /// guard.release().await?; // returns once a majority confirmed
    /// locks.settle().await; // the slower masters too, before the process ends
    /// # Ok(()) }
    /// ```
    pub async fn settle(&self) {
        self.inner.background.settled().await;
    }
}

impl Inner {
    /// The key of a resource.
    pub(crate) fn key(&self, resource: &str) -> String {
        let mut key = String::with_capacity(self.config.key_prefix.len() + resource.len());
        key.push_str(&self.config.key_prefix);
        key.push_str(resource);
        key
    }

    /// The key of a resource, made once for everything that shares it (local queue, rounds, guard):
    /// one allocation when it is short enough to be joined on the stack first.
    pub(crate) fn shared_key(&self, resource: &str) -> Arc<str> {
        let prefix = self.config.key_prefix.as_bytes();
        let mut joined = [0u8; 256];
        let len = prefix.len() + resource.len();
        match joined.get_mut(..len) {
            Some(buf) => {
                let (head, tail) = buf.split_at_mut(prefix.len());
                head.copy_from_slice(prefix);
                tail.copy_from_slice(resource.as_bytes());
                // Two joined strings are valid UTF-8: the other arm only avoids a panic path.
                match std::str::from_utf8(buf) {
                    Ok(key) => Arc::from(key),
                    Err(_) => self.key(resource).into(),
                }
            }
            None => self.key(resource).into(),
        }
    }

    /// Checks per-call arguments against the configuration.
    pub(crate) fn check_ttl(&self, ttl: Duration) -> Result<Timing, InputError> {
        if ttl.is_zero() {
            return Err(InputError::ZeroTtl);
        }
        if ttl > MAX_TTL {
            return Err(InputError::TtlTooLarge { ttl, max: MAX_TTL });
        }
        if self.config.node_timeout >= ttl {
            return Err(InputError::NodeTimeoutNotBelowTtl {
                node_timeout: self.config.node_timeout,
                ttl,
            });
        }
        let timing = Timing::new(ttl, self.config.drift_factor, self.config.min_validity)?;
        self.health.note_ttl(ttl);
        Ok(timing)
    }

    pub(crate) fn check(&self, resource: &str, ttl: Duration) -> Result<Timing, InputError> {
        if resource.is_empty() {
            return Err(InputError::EmptyResource);
        }
        self.check_ttl(ttl)
    }

    /// One acquire round: fan out, decide, and on failure release everywhere.
    pub(crate) async fn round(
        self: &Arc<Self>,
        resource: &str,
        timing: Timing,
    ) -> Result<Guard, AcquireError> {
        self.round_keyed(resource, self.shared_key(resource), timing)
            .await
    }

    /// As [`Inner::round`], with the resource's key already made.
    pub(crate) async fn round_keyed(
        self: &Arc<Self>,
        resource: &str,
        key: Arc<str>,
        timing: Timing,
    ) -> Result<Guard, AcquireError> {
        debug_assert_eq!(&*key, self.key(resource), "a round's key is its resource's key");
        let token = new_token()?;
        // Sized for its arguments up front: no buffer grows while it is built.
        let mut cmd = redis::Cmd::with_capacity(6, 40 + key.len() + token.len());
        cmd.arg("SET")
            .arg(&*key)
            .arg(&*token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_millis(timing.ttl()));
        let cmd = Arc::new(cmd);
        let ops: Arc<dyn LockOps> = Arc::new(PlainLock::sharing(&key, &token));
        self.round_with(resource, key, token, timing, ops, |node| {
            let cmd = Arc::clone(&cmd);
            async move { node.set_nx(&cmd).await }
        })
        .await
    }

    /// Makes attempts with `round` until one succeeds, one fails for good, or the retry plan runs
    /// out; between attempts it awaits `pause` with the jittered delay and whether another holder
    /// refused the attempt (a kind may wake earlier).
    pub(crate) async fn retrying<F, Fut, P, PFut>(
        &self,
        resource: &str,
        pause: P,
        mut round: F,
    ) -> Result<Guard, AcquireError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Guard, AcquireError>>,
        P: Fn(Duration, bool) -> PFut,
        PFut: Future<Output = ()>,
    {
        let plan = self.config.retry;
        let started = Instant::now();
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            Span::current().record("attempt", attempts);
            let err = match round().await {
                Ok(guard) => return Ok(guard),
                Err(err) => err,
            };
            if !err.is_retryable() {
                return Err(err);
            }
            let delay = self.config.backoff.jitter(&mut rand::rng());
            match plan.next_delay(attempts, started.elapsed(), delay) {
                Some(delay) => {
                    debug!(attempt = attempts, delay_ms = delay.as_millis() as u64, error = %err, "retrying");
                    pause(delay, err.is_contended()).await;
                }
                None => {
                    return Err(AcquireError::Exhausted {
                        resource: resource.to_owned(),
                        attempts,
                        waited: started.elapsed(),
                        last: Box::new(err),
                    })
                }
            }
        }
    }

    /// One acquire round of any kind of lock: `send` asks one master for the lock and answers `Ok`
    /// when it granted it; `ops` releases what was taken when the round fails or is dropped.
    ///
    /// The per-master requests own what they use (`send` gets an [`OwnedNode`]), so the ones still
    /// in flight when the round is decided can finish in a task: see [`finish_stragglers`].
    pub(crate) async fn round_with<F, Fut>(
        self: &Arc<Self>,
        resource: &str,
        key: Arc<str>,
        token: Arc<str>,
        timing: Timing,
        ops: Arc<dyn LockOps>,
        send: F,
    ) -> Result<Guard, AcquireError>
    where
        F: Fn(OwnedNode) -> Fut,
        Fut: Future<Output = Result<(), NodeErrorKind>> + Send + 'static,
    {
        crate::health::tick(self);
        // Armed until the round is settled: dropping this future part-way releases from a task.
        let mut cleanup = ReleaseOnDrop::new(self.clone(), Arc::clone(&ops));
        let started = Instant::now();
        let mut tally = Tally::new(self.nodes.len(), timing, started);
        let mut pending: Fanout<_> = (0..self.nodes.len())
            .map(|index| {
                let request = send(OwnedNode {
                    inner: Arc::clone(self),
                    index,
                });
                async move { (index, request.await) }
            })
            .collect();
        let mut failures = Vec::new();
        let decision = self.decide(&mut tally, &mut pending, &mut failures).await;
        match decision {
            Decision::Acquired { valid_until, .. } => {
                cleanup.disarm();
                finish_stragglers(&self.background, pending);
                Ok(Guard::new(
                    self.clone(),
                    resource.to_owned(),
                    key,
                    token,
                    ops,
                    timing.ttl(),
                    valid_until,
                ))
            }
            Decision::Failed(_) => {
                drop(pending);
                self.release_failed(&ops, |i| tally.vote(i).is_none(), &mut failures)
                    .await;
                cleanup.disarm();
                Err(round_error(resource, &tally, decision, started, timing, failures))
            }
            Decision::Pending => Err(round_error(resource, &tally, decision, started, timing, failures)),
        }
    }

    /// Releases what a failed round may have taken, before its error is returned: on the masters
    /// whose request may still land (`in_flight`, or failed as unreachable) from a task, as their
    /// `SET`, if it lands, is ordered before the release on the same connection; on the others at
    /// once. A master whose release meets a key of another type is recorded in `failures` as such
    /// (the round saw it as held), so the error names it and is not retried; `failures` ends up
    /// sorted by master.
    pub(crate) async fn release_failed(
        self: &Arc<Self>,
        ops: &Arc<dyn LockOps>,
        in_flight: impl Fn(usize) -> bool,
        failures: &mut Vec<NodeFailure>,
    ) {
        // A master that timed out or could not be reached may still take the key too (its `SET`
        // may be queued behind a stall), and waiting on it would cost another node timeout: both
        // are released from the task. Only the answers of the others are awaited (they tell a key
        // of another type).
        let unreachable = |i: usize| failures.iter().any(|f| f.node == i && f.kind.is_unreachable());
        let (late, answered): (Vec<usize>, Vec<usize>) =
            (0..self.nodes.len()).partition(|i| in_flight(*i) || unreachable(*i));
        if !late.is_empty() {
            spawn_release(Arc::clone(self), Arc::clone(ops), late, Releasing::Partial);
        }
        let released = self.release_on(ops.as_ref(), &answered).await;
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

    /// Feeds replies to the tally until it decides, or until time alone decides.
    ///
    /// Every reply that is not a yes is recorded in `failures`.
    pub(crate) async fn decide<F>(
        &self,
        tally: &mut Tally,
        pending: &mut Fanout<F>,
        failures: &mut Vec<NodeFailure>,
    ) -> Decision
    where
        F: Future<Output = (usize, Result<(), NodeErrorKind>)>,
    {
        let deadline = tokio::time::Instant::from_std(tally.deadline());
        // One timer for the whole round, not one per reply, and none when the requests' own node
        // timeouts (at most two in a row per request) end them all before time could decide: a
        // reply is only a yes with validity left at its arrival anyway. Registering a timer can
        // cost a wake-up of the runtime's timer thread.
        let answered_by = Instant::now().checked_add(self.config.node_timeout.saturating_mul(2));
        let timed = answered_by.is_none_or(|by| by >= tally.deadline());
        let time_decides = tokio::time::sleep_until(deadline);
        tokio::pin!(time_decides);
        loop {
            let decision = tokio::select! {
                biased;
                reply = pending.next() => match reply {
                    Some((node, result)) => {
                        // A yes from a master that restarted recently, or is being checked after a
                        // reconnect, is not counted.
                        let result = result.and_then(|()| match self.nodes.get(node) {
                            Some(n) => self.health.admit(n, Instant::now()),
                            None => Ok(()),
                        });
                        let vote = match result {
                            Ok(()) => Vote::Yes,
                            Err(kind) => {
                                failures.push(self.failure(node, kind));
                                Vote::No
                            }
                        };
                        debug!(node, addr = self.addr(node), ?vote, "master replied");
                        tally.handle_reply(node, vote, Instant::now())
                    }
                    // Every master has answered: the tally is decided unless something is badly wrong.
                    None => match tally.poll(Instant::now()) {
                        Decision::Pending => Decision::Failed(Failure::NoQuorum),
                        decided => decided,
                    },
                },
                () = &mut time_decides, if timed => {
                    let decided = tally.poll(Instant::now());
                    if !decided.is_final() {
                        // The runtime's clock ran ahead of the monotonic clock the tally reads
                        // (paused test time): look again shortly rather than spin on a fired timer.
                        time_decides.as_mut().reset(tokio::time::Instant::now() + Duration::from_millis(1));
                    }
                    decided
                }
            };
            if decision.is_final() {
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

    /// Releases a lock on the masters listed, concurrently, and counts what it found.
    pub(crate) async fn release_on(self: &Arc<Self>, ops: &dyn LockOps, nodes: &[usize]) -> ReleaseTally {
        self.release_until(ops, nodes.iter().copied(), None, || {}).await
    }

    /// As [`Inner::release_on`], calling `queued` as soon as every master's release has been handed
    /// to its connection, before any reply.
    pub(crate) async fn release_on_queued(
        self: &Arc<Self>,
        ops: &dyn LockOps,
        nodes: &[usize],
        queued: impl FnOnce(),
    ) -> ReleaseTally {
        self.release_until(ops, nodes.iter().copied(), None, queued).await
    }

    /// Releases a lock on every master, returning as soon as a majority confirmed the release; the
    /// masters still in flight then finish in a background task, so a stalled master costs nothing.
    pub(crate) async fn release_all(
        self: &Arc<Self>,
        ops: &dyn LockOps,
        queued: impl FnOnce(),
    ) -> ReleaseTally {
        self.release_until(ops, 0..self.nodes.len(), Some(quorum(self.nodes.len())), queued)
            .await
    }

    /// Sends the release to `nodes` and counts the answers, until `enough` masters confirmed (then
    /// the rest is left to a task) or all have answered. `queued` runs once every request has been
    /// polled once, which hands it to its master's connection.
    async fn release_until(
        self: &Arc<Self>,
        ops: &dyn LockOps,
        nodes: impl IntoIterator<Item = usize>,
        enough: Option<usize>,
        queued: impl FnOnce(),
    ) -> ReleaseTally {
        // By SHA1 where the kind allows it (see `lua.rs`), else the kind's own command.
        let cmd = Arc::new(match ops.release_call() {
            Some(call) => Ok(call),
            None => Err(ops.release_cmd()),
        });
        let mut pending: Fanout<_> = nodes
            .into_iter()
            .map(|node| {
                let (inner, cmd) = (Arc::clone(self), Arc::clone(&cmd));
                async move {
                    let result = match (inner.nodes.get(node), cmd.as_ref()) {
                        (Some(n), Ok(call)) => n.run_script(call).await,
                        (Some(n), Err(cmd)) => n.script(cmd).await,
                        (None, _) => Err(NodeErrorKind::Protocol(format!("no master {node}"))),
                    };
                    (node, result)
                }
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
            self.count_release(&mut out, node, result);
        }
        loop {
            if enough.is_some_and(|enough| out.held >= enough) && !pending.is_empty() {
                // Replies already in are counted here: a task is spawned only for masters that
                // have not answered yet.
                while let Some(Some((node, result))) = pending.next().now_or_never() {
                    self.count_release(&mut out, node, result);
                }
                if pending.is_empty() {
                    break;
                }
                if let Ok(handle) = tokio::runtime::Handle::try_current() {
                    let inner = Arc::clone(self);
                    self.background.spawn_on(&handle, async move {
                        let mut rest = ReleaseTally::default();
                        while let Some((node, result)) = pending.next().await {
                            inner.count_release(&mut rest, node, result);
                        }
                        rest.report_unawaited();
                    });
                    break;
                }
            }
            let Some((node, result)) = pending.next().await else {
                break;
            };
            self.count_release(&mut out, node, result);
        }
        out
    }

    /// Records one master's answer to a release.
    fn count_release(&self, out: &mut ReleaseTally, node: usize, result: Result<Found, NodeErrorKind>) {
        match result {
            Ok(Found::Ours) => out.held += 1,
            Ok(other) => {
                if let Err(kind) = other.into_result() {
                    out.not_held.push(self.failure(node, kind));
                }
            }
            Err(kind) => {
                // In the release's result for its caller, or warned about once per background
                // release (`report_unawaited`); a warning here would repeat on every retry of a
                // round against a master that is down.
                debug!(node, addr = self.addr(node), error = %kind, "release failed on a master");
                out.errors.push(self.failure(node, kind));
            }
        }
    }

    pub(crate) fn failure(&self, node: usize, kind: NodeErrorKind) -> NodeFailure {
        NodeFailure {
            node,
            addr: self.addr(node).to_owned(),
            kind,
        }
    }

    fn addr(&self, node: usize) -> &str {
        self.nodes.get(node).map(Node::addr).unwrap_or("?")
    }
}

/// The release channel of a key as one command argument, written straight into the command.
pub(crate) struct ChannelArg<'a>(pub(crate) &'a str);

impl redis::ToRedisArgs for ChannelArg<'_> {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        use std::io::Write;
        let mut arg = out.writer_for_next_arg();
        // Writing into the command's own buffer cannot fail.
        let _ = arg.write_all(RELEASE_CHANNEL_PREFIX.as_bytes());
        let _ = arg.write_all(self.0.as_bytes());
    }
}

/// The pub/sub channel a release of `key` is announced on.
pub(crate) fn release_channel(key: &str) -> String {
    let mut channel = String::with_capacity(RELEASE_CHANNEL_PREFIX.len() + key.len());
    channel.push_str(RELEASE_CHANNEL_PREFIX);
    channel.push_str(key);
    channel
}

/// A TTL in whole milliseconds, rounded up and at least 1 (PX 0 is an error on the server).
///
/// Rounding up keeps the key alive at least as long as the validity computed from the exact TTL
/// assumes; rounding down would overstate the validity by up to a millisecond.
pub(crate) fn ttl_millis(ttl: Duration) -> u64 {
    let whole = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    let rounded = if ttl.subsec_nanos() % 1_000_000 == 0 {
        whole
    } else {
        whole.saturating_add(1)
    };
    rounded.max(1)
}

/// One master of a handle, owned: what a request that may outlive its round refers to.
pub(crate) struct OwnedNode {
    inner: Arc<Inner>,
    /// Always a valid index into `inner.nodes`: only [`Inner::round_with`] makes these.
    index: usize,
}

impl std::ops::Deref for OwnedNode {
    type Target = Node;

    fn deref(&self) -> &Node {
        &self.inner.nodes[self.index]
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
fn finish_stragglers<Fut>(background: &Background, mut pending: Fanout<Fut>)
where
    Fut: Future + Send + 'static,
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

/// The error of a round that did not win (`decision` is not `Acquired`): too slow, or no majority
/// with the tally's counts and each master's failure, in the masters' order.
pub(crate) fn round_error(
    resource: &str,
    tally: &Tally,
    decision: Decision,
    started: Instant,
    timing: Timing,
    mut failures: Vec<NodeFailure>,
) -> AcquireError {
    if matches!(decision, Decision::Failed(Failure::TooSlow)) {
        return AcquireError::TooSlow {
            resource: resource.to_owned(),
            elapsed: started.elapsed(),
            ttl: timing.ttl(),
        };
    }
    failures.sort_by_key(|f| f.node);
    AcquireError::NoQuorum {
        resource: resource.to_owned(),
        acquired: tally.yes(),
        required: tally.required(),
        masters: tally.masters(),
        failures,
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

/// Releases a lock from a spawned task, when a runtime is there to run it.
pub(crate) fn spawn_release(inner: Arc<Inner>, ops: Arc<dyn LockOps>, nodes: Vec<usize>, what: Releasing) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            let releasing = Arc::clone(&inner);
            inner.background.spawn_on(&handle, async move {
                let out = releasing.release_on(ops.as_ref(), &nodes).await;
                debug!(lock = ?ops, held = out.held, errors = out.errors.len(), "background release done");
                if what == Releasing::Held {
                    out.report_unawaited();
                }
            });
        }
        Err(_) => warn!(lock = ?ops, "no async runtime to release the lock from; it expires with its TTL"),
    }
}

/// Refuses two URLs of one server: their addresses differ (a host name and an address, two
/// names), but the same `run_id` answered on both, and that server would vote twice. Masters that
/// did not answer at build cannot be compared.
fn same_server_twice(inner: &Inner) -> Result<(), BuildError> {
    let ids: Vec<Option<String>> = inner
        .nodes
        .iter()
        .map(|node| inner.health.verified_run_id(node))
        .collect();
    for (second, id) in ids.iter().enumerate() {
        let Some(id) = id else { continue };
        let Some(first) = ids
            .iter()
            .take(second)
            .position(|other| other.as_ref() == Some(id))
        else {
            continue;
        };
        return Err(BuildError::SameServer {
            first,
            first_addr: inner.addr(first).to_owned(),
            second,
            second_addr: inner.addr(second).to_owned(),
            run_id: id.clone(),
        });
    }
    Ok(())
}

/// Releases everywhere on drop unless disarmed: the cancel-safety net of an acquire round.
pub(crate) struct ReleaseOnDrop {
    armed: Option<(Arc<Inner>, Arc<dyn LockOps>)>,
}

impl ReleaseOnDrop {
    /// Arms the net for `ops` on every master of `inner`.
    pub(crate) fn new(inner: Arc<Inner>, ops: Arc<dyn LockOps>) -> Self {
        Self {
            armed: Some((inner, ops)),
        }
    }

    /// The round is settled: nothing to release on drop.
    pub(crate) fn disarm(&mut self) {
        self.armed = None;
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        if let Some((inner, ops)) = self.armed.take() {
            let all = (0..inner.nodes.len()).collect();
            spawn_release(inner, ops, all, Releasing::Partial);
        }
    }
}

impl QuorlockBuilder {
    /// Checks every setting, prepares one connection per master and pings each once.
    ///
    /// # Errors
    /// [`BuildError`] naming the bad setting, an unparseable or duplicate URL, one server under two
    /// names ([`BuildError::SameServer`]), or a master that rejected the credentials. An
    /// unreachable master is only warned about.
    pub async fn build(self) -> Result<Quorlock, BuildError> {
        Quorlock::from_builder(self).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_channel_argument_is_the_release_channel() {
        for key in ["", "k", "prefix:long key with spaces", "clé-ü"] {
            let (mut joined, mut plain) = (redis::cmd("PUBLISH"), redis::cmd("PUBLISH"));
            joined.arg(ChannelArg(key)).arg("x");
            plain.arg(release_channel(key)).arg("x");
            assert_eq!(joined.get_packed_command(), plain.get_packed_command(), "{key:?}");
        }
    }

    #[tokio::test]
    async fn a_shared_key_is_the_key_at_any_length() {
        let locks = Quorlock::builder()
            .nodes(["redis://127.0.0.1:1"])
            .key_prefix("app:ü:")
            .connect_timeout(Duration::from_millis(10))
            .build()
            .await
            .expect("an unreachable master is only warned about");
        // The prefix is 7 bytes: 249 more fill the 256 joined on the stack, 250 take the other path.
        let long = "r".repeat(600);
        for resource in ["x", "ключ", &long[..249], &long[..250], &long[..]] {
            assert_eq!(
                &*locks.inner.shared_key(resource),
                locks.inner.key(resource),
                "{}",
                resource.len()
            );
        }
    }

    #[test]
    fn ttl_in_millis_is_never_zero_and_never_shorter() {
        assert_eq!(ttl_millis(Duration::from_micros(10)), 1);
        assert_eq!(ttl_millis(Duration::from_secs(2)), 2000);
        assert_eq!(ttl_millis(Duration::from_micros(100_900)), 101);
        assert_eq!(ttl_millis(Duration::from_millis(100)), 100);
    }
}
