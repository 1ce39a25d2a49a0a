//! The one acquire path, for every lock kind: check the request, take this process's local turn
//! where the kind queues, make attempts within the retry plan and wait between them as the kind
//! says, leave whatever the kind left waiting on the masters, and hand back the guard.
//!
//! A kind (`kinds/kind.rs`) only supplies its keys, its call, how a reply reads and how it
//! waits; an attempt is one round or more of the one round driver (`round.rs`), or, fenced, the
//! two rounds of `kinds/fenced.rs`. The waits are the retry policies of `retry/policy.rs`: until the
//! holder's release or the key's expiry on a majority (the plain lock), a jittered delay cut short
//! by an announced release, or by a message naming the waiter (the fair lock).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use redis::Value;
use tracing::{debug, warn, Span};

use super::{Guard, Inner};
use crate::api::kinds::fenced::{self, Fenced};
use crate::api::kinds::kind::{Ctx, Departure, Fenceable, Kind, Lost, Wait, Won};
use crate::base::error::AcquireError;
use crate::base::lua::Found;
use crate::base::names::ttl_millis;
use crate::core::{RetryPlan, Timing};
use crate::mechanisms::background::Background;
use crate::mechanisms::coalesce::Turn;
use crate::mechanisms::ops::LockOps;
use crate::mechanisms::removal::Mechanism;
use crate::mechanisms::retry::policy::{
    deadline, Jittered, NamedWake, ReleaseOrExpiry, ReleaseWake, WaitSettings, Woken,
};
use crate::mechanisms::retry::retry;
use crate::mechanisms::round::Read;
use crate::seam::link::{CallRequest, Masters};

impl Inner {
    /// What a kind may use to build its keys and holds.
    pub(crate) fn ctx(&self) -> Ctx<'_> {
        Ctx {
            names: &self.names,
            entropy: &self.entropy,
            config: &self.config,
        }
    }

    /// Acquires `kind` for `ttl`: retrying within `plan`, or one attempt when `plan` is `None`.
    /// Each attempt is one round of the kind's call, or the two rounds of a fenced acquisition
    /// when `kind` is [`Fenced`] (whose token is then recorded on the current span).
    pub(crate) async fn acquire<A: Attempt>(
        self: &Arc<Self>,
        kind: A,
        (ttl, lock_delay): (Duration, Option<Duration>),
        plan: Option<RetryPlan>,
    ) -> Result<Guard, AcquireError> {
        let timing = self.checked(kind.kind(), ttl, lock_delay)?;
        let won = self.acquire_with(kind.kind(), plan, || kind.attempt(self, timing));
        Ok(self.guard_of(kind.kind(), won.await?, timing))
    }

    /// Checks `kind`'s arguments, `ttl` and `lock_delay` before anything is sent.
    fn checked<K: Kind>(
        &self,
        kind: &K,
        ttl: Duration,
        lock_delay: Option<Duration>,
    ) -> Result<Timing, AcquireError> {
        kind.check()?;
        Ok(self.check_ttl(ttl, lock_delay)?)
    }

    /// Runs `attempt` once, or within `plan`, and takes the kind's waiter off the masters on the
    /// way out: before returning when the acquire failed, from a task when it won or is dropped.
    async fn acquire_with<K, F, Fut>(
        &self,
        kind: &K,
        plan: Option<RetryPlan>,
        attempt: F,
    ) -> Result<Won<K::Hold>, AcquireError>
    where
        K: Kind,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Won<K::Hold>, AcquireError>>,
    {
        let mut leaving = Leaving(
            kind.departure()
                .map(|departure| (Arc::clone(&self.masters), self.background.clone(), departure)),
        );
        let result = self.waiting(kind, plan, attempt).await;
        if result.is_err() {
            if let Some((masters, _, departure)) = leaving.0.take() {
                leave(&masters, &departure).await;
            }
        }
        result
    }

    /// Makes one attempt without `plan`; within it, attempts after the local turn where the kind
    /// queues, each pause as the kind waits.
    async fn waiting<K: Kind, Fut>(
        &self,
        kind: &K,
        plan: Option<RetryPlan>,
        mut attempt: impl FnMut() -> Fut,
    ) -> Result<Won<K::Hold>, AcquireError>
    where
        Fut: Future<Output = Result<Won<K::Hold>, AcquireError>>,
    {
        let Some(plan) = plan else {
            return attempt().await;
        };
        let clock = self.clock();
        let started = clock.now();
        let resource = kind.resource();
        let turn = match kind.local_turn() {
            Some(key) => match clock
                .timeout_at(deadline(started, plan), self.queue.turn(key))
                .await
            {
                Ok(turn) => Some(turn),
                Err(_) => {
                    return Err(AcquireError::Queued {
                        resource: resource.to_owned(),
                        waited: clock.now().saturating_duration_since(started),
                    })
                }
            },
            None => None,
        };
        let config = &self.config;
        let settings = WaitSettings {
            plan,
            backoff: config.backoff,
            wake_on_release: config.wake_on_release,
            queue: !config.removed.has(Mechanism::HandOffQueue),
            node_timeout: config.node_timeout,
            clock: clock.clone(),
        };
        let wake = match kind.wait() {
            Wait::ReleasedOrExpired { key, also } => {
                let mut policy = ReleaseOrExpiry::new(
                    settings,
                    self.entropy.clone(),
                    started,
                    &self.waits,
                    &self.masters,
                    (resource, &key, &also),
                );
                let won = retry(resource, clock, started, &mut policy, attempt).await;
                return with_turn(won, turn);
            }
            Wait::Released(keys) => Woken::Released(ReleaseWake::new(
                &self.waits,
                keys,
                config.wake_on_release,
                config.node_timeout,
                clock.clone(),
            )),
            Wait::Named { key, name, cap } => {
                let timeouts = (config.node_timeout, config.connect_timeout);
                Woken::Named(NamedWake::start(
                    &self.waits,
                    &key,
                    &name,
                    cap,
                    timeouts,
                    clock.clone(),
                ))
            }
        };
        let mut policy = Jittered::new(&settings, self.entropy.clone(), started, &wake);
        with_turn(retry(resource, clock, started, &mut policy, attempt).await, turn)
    }

    /// One attempt at `kind`: a round, and another at once while the kind says so (a semaphore
    /// aiming at another slot).
    async fn attempt<K: Kind>(&self, kind: &K, timing: Timing) -> Result<Won<K::Hold>, AcquireError> {
        // The key's life: the TTL plus any lock-delay (the validity counts from the TTL alone).
        let ttl_ms = ttl_millis(timing.key_ttl());
        let round = self.round();
        let mut rounds = 0;
        loop {
            rounds += 1;
            let held = kind.hold(&self.ctx())?;
            let call = kind.call(&held, ttl_ms);
            let ops: Arc<dyn LockOps> = Arc::clone(&held.hold) as Arc<dyn LockOps>;
            // The requests own what they read with: those still in flight at the decision finish
            // in a task.
            let reads = kind.reads();
            let (result, notes) = round
                .acquire(kind.resource(), timing, &ops, |link| {
                    reading(link.call(&call), reads, K::read)
                })
                .await;
            match result {
                Ok(valid_until) => {
                    kind.won(&held, notes, self.masters.len());
                    return Ok(Won {
                        held,
                        valid_until,
                        fence: None,
                        turn: None,
                    });
                }
                Err(error) => match kind.lost(error, notes, rounds) {
                    Lost::Again => {}
                    Lost::Stop(error) => return Err(error),
                },
            }
        }
    }

    /// The guard of a won acquisition of `kind`.
    fn guard_of<K: Kind>(self: &Arc<Self>, kind: &K, won: Won<K::Hold>, timing: Timing) -> Guard {
        let Won {
            held,
            valid_until,
            fence,
            turn,
        } = won;
        let ops: Arc<dyn LockOps> = held.hold;
        let guard = self.guard(kind.resource(), held.key, held.token, ops, timing, valid_until);
        if let Some(fence) = fence {
            // A new guard's cell is empty, so this cannot fail.
            let _ = guard.lease().fencing_token.set(fence);
            Span::current().record("token", fence);
        }
        if let Some(turn) = turn {
            guard.lease().hold_turn(turn);
        }
        guard
    }
}

/// How an acquire attempts a kind: one round of its call (every [`Kind`]), or the two fenced rounds
/// around that call ([`Fenced`]). The rest of the acquire path is the same for both.
pub(crate) trait Attempt {
    /// The kind attempted.
    type Kind: Kind;

    /// The kind attempted.
    fn kind(&self) -> &Self::Kind;

    /// One attempt through `inner`'s masters, the lock valid for `timing`.
    fn attempt(
        &self,
        inner: &Inner,
        timing: Timing,
    ) -> impl Future<Output = Result<Won<<Self::Kind as Kind>::Hold>, AcquireError>> + Send;
}

impl<K: Kind> Attempt for K {
    type Kind = K;

    fn kind(&self) -> &K {
        self
    }

    fn attempt(
        &self,
        inner: &Inner,
        timing: Timing,
    ) -> impl Future<Output = Result<Won<K::Hold>, AcquireError>> {
        inner.attempt(self, timing)
    }
}

impl<K: Fenceable> Attempt for Fenced<K> {
    type Kind = K;

    fn kind(&self) -> &K {
        &self.0
    }

    fn attempt(
        &self,
        inner: &Inner,
        timing: Timing,
    ) -> impl Future<Output = Result<Won<K::Hold>, AcquireError>> {
        fenced::attempt(inner.round(), inner.ctx(), &self.0, timing)
    }
}

/// `request`, its reply read by `read` with `reads`: it owns all it needs, so it may finish in a
/// task after the round's decision.
fn reading<R, N>(
    request: CallRequest,
    reads: R,
    read: fn(R, Value) -> Read<N>,
) -> impl Future<Output = Read<N>> + Unpin + Send + 'static
where
    R: Copy + Send + 'static,
    N: 'static,
{
    request.map(move |reply| match reply {
        Ok(reply) => read(reads, reply),
        Err(error) => Read::vote(Err(error)),
    })
}

/// A won acquisition that holds this process's local turn `turn` on its key.
fn with_turn<H>(won: Result<Won<H>, AcquireError>, turn: Option<Turn>) -> Result<Won<H>, AcquireError> {
    let mut won = won?;
    won.turn = turn;
    Ok(won)
}

/// Takes a departing waiter off every master; a failure only leaves it to lapse.
async fn leave(masters: &Masters, departure: &Departure) {
    let call = &departure.call;
    let replies = crate::mechanisms::fanout::all(masters.iter().map(|link| {
        link.run_script(call)
            .map(|reply| reply.and_then(Found::from_reply))
    }))
    .await;
    for (node, reply) in replies.into_iter().enumerate() {
        if let Err(error) = reply {
            warn!(node, %error, who = %departure.who, "could not leave a master; {}", departure.lapses);
        }
    }
}

/// Leaves from a task when dropped still armed: after a won acquire (the waiter may linger on
/// masters that did not grant it), or an acquire dropped part-way.
struct Leaving(Option<(Arc<Masters>, Background, Departure)>);

impl Drop for Leaving {
    fn drop(&mut self) {
        let Some((masters, background, departure)) = self.0.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                background.spawn_on(&handle, async move {
                    leave(&masters, &departure).await;
                    debug!(who = %departure.who, "left the masters");
                });
            }
            Err(_) => warn!(
                who = %departure.who,
                "no async runtime to leave the masters from; {}", departure.lapses
            ),
        }
    }
}
