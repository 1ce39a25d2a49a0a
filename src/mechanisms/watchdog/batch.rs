//! One watchdog tick's renewals: every due lock's extend in one pipeline per master, each lock
//! counted by its own tally, and its status updated the moment its majority is known.
//!
//! Script renewals go out as `EVALSHA`, with the scripts' `SCRIPT LOAD` at the head of the same
//! pipeline: a tick carries each script's source once instead of once per lock, and a master that
//! lost its script cache (a restart) still finds the script loaded before the first renewal that
//! needs it. A master too slow for the tick counts as a no; the schedule retries inside the
//! remaining validity.
//!
//! The tick is one round of the round driver (`round.rs`), counted per lock: each master's votes
//! are admitted by the same rule as an acquire's or an extend's.

use std::sync::Arc;
use std::time::Duration;

use redis::{Cmd, Value};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::{Due, Outcome, RENEWAL_TIME_ALLOWANCE};
use crate::base::error::NodeErrorKind;
use crate::base::lua::Lua;
use crate::base::metrics::{self, Cause};
use crate::base::names::ttl_millis;
use crate::core::renewal::{self, Verdict};
use crate::core::{Decision, Tally, Vote};
use crate::mechanisms::config::Config;
use crate::mechanisms::fanout::Fanout;
use crate::mechanisms::health::Health;
use crate::mechanisms::round::{Count, Driver};
use crate::seam::clock::later;
use crate::seam::link::{Call, Masters};

/// What one tick did.
pub(super) struct Tick {
    /// Per due lock, what became of it.
    pub(super) outcomes: Vec<Outcome>,
    /// How many renewals were sent (each counted once however many masters it went to).
    pub(super) sent: usize,
    /// How many locks the tick found lost.
    pub(super) lost: u64,
}

/// One tick: renews every due lock with one pipeline per master, and updates each lock's status as
/// soon as its majority is known.
pub(super) async fn renew(
    masters_of: &Arc<Masters>,
    health: &Health,
    config: &Config,
    scripts: &mut Scripts,
    due: &[Due],
) -> Tick {
    let clock = &config.clock;
    let started = clock.now();
    let masters = masters_of.len();
    let mut outcomes = vec![Outcome::Busy; due.len()];
    // A lock being extended by hand is skipped this tick: two rounds at once could leave its
    // validity describing the older one.
    let serials: Vec<_> = due.iter().map(|d| d.held.extend_lock.try_lock().ok()).collect();
    let mut cmds = Vec::new();
    // For a plain lock, the native form beside its script (masters with `SET ... IFEQ` get it).
    let mut natives: Vec<Option<Cmd>> = Vec::new();
    let mut rounds = Vec::new();
    for (i, (d, serial)) in due.iter().zip(&serials).enumerate() {
        if serial.is_none() {
            continue;
        }
        if d.held.is_released() || d.held.status.get().lost {
            outcomes[i] = Outcome::Stop;
            continue;
        }
        match config.timing_delayed(d.ttl, d.held.timing.lock_delay()) {
            Ok(timing) => {
                // The key's life: the TTL plus the lock's lock-delay.
                let ttl_ms = ttl_millis(timing.key_ttl());
                // Built by SHA1 from the start where the kind allows it: no source copied per lock.
                let call = d.held.ops.extend(ttl_ms);
                let native = call.native_extend();
                let cmd = match call {
                    Call::Command(cmd) => (*cmd).clone(),
                    // A kind's extend script; the plain lock's compare-and-extend on masters
                    // without `SET ... IFEQ`; and a compare-and-delete, never a renewal (it would
                    // only fail), which goes out the same way.
                    Call::Script(script)
                    | Call::CompareExtend { script, .. }
                    | Call::CompareDelete { script, .. } => {
                        scripts.load(script.script());
                        script.into_by_sha()
                    }
                };
                cmds.push(cmd);
                natives.push(native);
                rounds.push(Round {
                    due: i,
                    tally: Tally::new(masters, timing, started.into_std()),
                    yes: 0,
                    uncertain: 0,
                    conflict: false,
                    applied: false,
                });
            }
            // What is left of a capped hold is too short to renew to.
            Err(_) => outcomes[i] = Outcome::Stop,
        }
    }
    if rounds.is_empty() {
        return Tick {
            outcomes,
            sent: 0,
            lost: 0,
        };
    }
    let count = rounds.len();
    let loads = scripts.loads();
    let skip = loads.len();
    // Masters that have `SET ... IFEQ` get the plain locks' renewals in it; the rest, scripts.
    let native_pipe = natives.iter().any(Option::is_some).then(|| {
        let mut pipe = redis::pipe();
        for load in &loads {
            pipe.add_command(load.clone());
        }
        for (cmd, native) in cmds.iter().zip(&natives) {
            pipe.add_command(native.clone().unwrap_or_else(|| cmd.clone()));
        }
        Arc::new(pipe)
    });
    let mut pipe = redis::pipe();
    for load in loads {
        pipe.add_command(load);
    }
    for cmd in cmds {
        pipe.add_command(cmd);
    }
    let timeout = config
        .node_timeout
        .saturating_add(RENEWAL_TIME_ALLOWANCE.saturating_mul(u32::try_from(count).unwrap_or(u32::MAX)));
    // Bounded by the node timeout (plus a per-renewal allowance), never by the locks' validity: a
    // stalled master must not hold up the tick, and with it every other lock's renewal. A master
    // too slow for this tick counts as a no; the next tick retries inside the remaining validity.
    let pipe = Arc::new(pipe);
    let mut pending: Fanout<_> = masters_of
        .iter()
        .map(|link| {
            let batch = match &native_pipe {
                Some(native) if link.capabilities().set_ifeq => native,
                _ => &pipe,
            };
            (
                link.index(),
                link.master().send_batch(Arc::clone(batch), skip, count, timeout),
            )
        })
        .collect();
    let mut renewals = Renewals {
        rounds,
        due,
        count,
        answered: 0,
        masters: masters_of,
        started,
    };
    // The one round driver, with its one admission rule: a renewal from a master whose vote may
    // not count now is no confirmation.
    let driver = Driver {
        masters: masters_of,
        health,
        clock,
        node_timeout: timeout,
    };
    driver.run(&mut pending, &mut renewals).await;
    drop(pending);
    // Masters that did not answer yet might still hold our token: a failed round may be retried.
    let silent = masters.saturating_sub(renewals.answered);
    let now = clock.now();
    let mut lost = 0u64;
    for round in renewals.rounds.iter_mut() {
        round.tally.poll(now.into_std());
        round.settle(&due[round.due]);
        let held = &due[round.due].held;
        metrics::renewal(round.applied);
        outcomes[round.due] = if round.applied {
            Outcome::Renewed { started }
        } else {
            match renewal::verdict(masters, round.yes, round.uncertain + silent, round.conflict) {
                Verdict::Retry => {
                    debug!(resource = %held.resource, yes = round.yes, uncertain = round.uncertain, "renewal short of a majority; retrying");
                    Outcome::Retry
                }
                verdict => {
                    warn!(resource = %held.resource, ?verdict, yes = round.yes, "watchdog found the lock lost");
                    held.lose(match verdict {
                        Verdict::Conflict => Cause::TakenOver,
                        _ => Cause::RenewalFailed,
                    });
                    lost += 1;
                    Outcome::Stop
                }
            }
        };
    }
    drop(serials);
    Tick {
        outcomes,
        sent: count,
        lost,
    }
}

/// The count of one tick: every due lock's renewal round, fed by each master's pipeline reply.
struct Renewals<'d> {
    rounds: Vec<Round>,
    due: &'d [Due],
    /// How many renewals each pipeline carries.
    count: usize,
    /// How many masters answered.
    answered: usize,
    masters: &'d Masters,
    /// When the tick began.
    started: Instant,
}

impl Count<Result<Vec<Value>, NodeErrorKind>> for Renewals<'_> {
    fn reply(
        &mut self,
        node: usize,
        reply: Result<Vec<Value>, NodeErrorKind>,
        admitted: Result<(), NodeErrorKind>,
        now: Instant,
    ) -> bool {
        self.answered += 1;
        let count = self.count;
        match reply {
            Ok(values) if values.len() == count => {
                if let Err(why) = &admitted {
                    debug!(node, %why, "renewals from a master whose vote does not count now");
                }
                for (round, value) in self.rounds.iter_mut().zip(values) {
                    let vote = match value {
                        // A script's 1, or `SET ... IFEQ`'s OK, from a master whose vote counts.
                        Value::Int(1) | Value::Okay if admitted.is_ok() => {
                            round.yes += 1;
                            Vote::Yes
                        }
                        // Our token is there, but the master's vote may not count yet (within the
                        // restart grace, or unverified since a reconnect): uncertain, not lost.
                        Value::Int(1) | Value::Okay => {
                            round.uncertain += 1;
                            Vote::No
                        }
                        Value::Int(-1) => {
                            round.conflict = true;
                            Vote::No
                        }
                        _ => Vote::No,
                    };
                    round.tally.handle_reply(node, vote, now.into_std());
                    round.settle(&self.due[round.due]);
                }
            }
            other => {
                let kind = match other {
                    Ok(values) => NodeErrorKind::Protocol(
                        format!("{} replies to {count} renewals", values.len()).into(),
                    ),
                    Err(kind) => kind,
                };
                debug!(node, error = %kind, "renewal pipeline failed on a master");
                metrics::node_error(self.masters.addr(node), &kind);
                for round in self.rounds.iter_mut() {
                    if kind.is_unreachable() {
                        round.uncertain += 1;
                    }
                    round.tally.handle_reply(node, Vote::No, now.into_std());
                    round.settle(&self.due[round.due]);
                }
            }
        }
        // Once every lock is decided, a straggling master cannot change anything: stop waiting.
        self.decided()
    }

    /// The earliest deadline of a renewal still open.
    fn deadline(&self) -> Instant {
        self.rounds
            .iter()
            .filter(|r| !r.tally.decision().is_final())
            .map(|r| Instant::from_std(r.tally.deadline()))
            .min()
            .unwrap_or_else(|| later(self.started, FOREVER))
    }

    fn time_is_up(&mut self, now: Instant) -> bool {
        for round in self.rounds.iter_mut() {
            round.tally.poll(now.into_std());
            round.settle(&self.due[round.due]);
        }
        self.decided()
    }

    fn all_answered(&mut self, _now: Instant) {}
}

impl Renewals<'_> {
    fn decided(&self) -> bool {
        self.rounds.iter().all(|r| r.tally.decision().is_final())
    }
}

/// Stands in for "no deadline left" once every renewal is decided.
const FOREVER: Duration = Duration::from_secs(24 * 60 * 60);

/// One lock's renewal round within a tick.
struct Round {
    due: usize,
    tally: Tally,
    yes: usize,
    /// Masters that could still hold our token: unreachable, or whose vote did not count now.
    uncertain: usize,
    conflict: bool,
    applied: bool,
}

impl Round {
    /// Publishes the new validity the moment a majority confirmed the renewal.
    fn settle(&mut self, due: &Due) {
        if self.applied {
            return;
        }
        if let Decision::Acquired { valid_until, .. } = self.tally.decision() {
            self.applied = true;
            if !due.held.is_released() {
                due.held.status.set_valid_until(Instant::from_std(valid_until));
            }
        }
    }
}

/// The scripts a tick's renewals use, for the `SCRIPT LOAD` at the head of its pipelines.
#[derive(Default)]
pub(super) struct Scripts {
    /// The scripts the tick being built uses, each once.
    used: Vec<&'static Lua>,
}

impl Scripts {
    /// Marks a script the tick uses, for its `SCRIPT LOAD`.
    fn load(&mut self, script: &'static Lua) {
        if !self.used.iter().any(|s| std::ptr::eq(*s, script)) {
            self.used.push(script);
        }
    }

    /// `SCRIPT LOAD` of every script the tick uses, to lead its pipeline; resets the tick's list.
    fn loads(&mut self) -> Vec<Cmd> {
        self.used
            .drain(..)
            .map(|script| {
                let mut load = redis::cmd("SCRIPT");
                load.arg("LOAD").arg(script.source());
                load
            })
            .collect()
    }
}
