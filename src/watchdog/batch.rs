//! One watchdog tick's renewals: every due lock's extend in one pipeline per master, each lock
//! counted by its own tally, and its status updated the moment its majority is known.
//!
//! Script renewals go out as `EVALSHA`, with the scripts' `SCRIPT LOAD` at the head of the same
//! pipeline: a tick carries each script's source once instead of once per lock, and a master that
//! lost its script cache (a restart) still finds the script loaded before the first renewal that
//! needs it. A master too slow for the tick counts as a no; the schedule retries inside the
//! remaining validity.

use std::sync::Arc;

use futures::stream::StreamExt;
use redis::{Cmd, Value};
use tokio::time::Instant;
use tracing::{debug, warn};

use super::{Due, Outcome, RENEWAL_TIME_ALLOWANCE};
use crate::config::Config;
use crate::core::renewal::{self, Verdict};
use crate::core::{Decision, Tally, Vote};
use crate::error::NodeErrorKind;
use crate::fanout::Fanout;
use crate::link::{compare_extend, Call, Masters};
use crate::lua::Lua;
use crate::metrics::{self, Cause};
use crate::names::ttl_millis;

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
        match config.timing(d.ttl) {
            Ok(timing) => {
                let ttl_ms = ttl_millis(d.ttl);
                // Built by SHA1 from the start where the kind allows it: no source copied per lock.
                let (cmd, native) = match d.held.ops.extend(ttl_ms) {
                    Call::Script(call) => {
                        scripts.load(call.script());
                        (call.into_by_sha(), None)
                    }
                    Call::CompareExtend {
                        key,
                        token,
                        ttl_ms,
                        script,
                    } => {
                        scripts.load(script.script());
                        let native = compare_extend(&key, &token, ttl_ms);
                        (script.into_by_sha(), Some(native))
                    }
                    // A release is never a renewal: sent as built, it would only fail.
                    Call::CompareDelete { script, .. } => {
                        scripts.load(script.script());
                        (script.into_by_sha(), None)
                    }
                };
                cmds.push(cmd);
                natives.push(native);
                rounds.push(Round {
                    due: i,
                    tally: Tally::new(masters, timing, started.into_std()),
                    yes: 0,
                    unreachable: 0,
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
    let mut answered = 0;
    while let Some((node, reply)) = pending.next().await {
        answered += 1;
        let now = clock.now();
        match reply {
            Ok(values) if values.len() == count => {
                for (round, value) in rounds.iter_mut().zip(values) {
                    let vote = match value {
                        // A script's 1, or `SET ... IFEQ`'s OK.
                        Value::Int(1) | Value::Okay => {
                            round.yes += 1;
                            Vote::Yes
                        }
                        Value::Int(-1) => {
                            round.conflict = true;
                            Vote::No
                        }
                        _ => Vote::No,
                    };
                    round.tally.handle_reply(node, vote, now.into_std());
                    round.settle(&due[round.due]);
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
                metrics::node_error(masters_of.addr(node), &kind);
                for round in rounds.iter_mut() {
                    if kind.is_unreachable() {
                        round.unreachable += 1;
                    }
                    round.tally.handle_reply(node, Vote::No, now.into_std());
                    round.settle(&due[round.due]);
                }
            }
        }
        // Once every lock is decided, a straggling master cannot change anything: stop waiting.
        if rounds.iter().all(|r| r.tally.decision().is_final()) {
            break;
        }
    }
    drop(pending);
    // Masters that did not answer yet might still hold our token: a failed round may be retried.
    let silent = masters.saturating_sub(answered);
    let now = clock.now();
    let mut lost = 0u64;
    for round in rounds.iter_mut() {
        round.tally.poll(now.into_std());
        round.settle(&due[round.due]);
        let held = &due[round.due].held;
        metrics::renewal(round.applied);
        outcomes[round.due] = if round.applied {
            Outcome::Renewed { started }
        } else {
            match renewal::verdict(masters, round.yes, round.unreachable + silent, round.conflict) {
                Verdict::Retry => {
                    debug!(resource = %held.resource, yes = round.yes, unreachable = round.unreachable, "renewal short of a majority; retrying");
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

/// One lock's renewal round within a tick.
struct Round {
    due: usize,
    tally: Tally,
    yes: usize,
    unreachable: usize,
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
        if !self.used.iter().any(|s| s.slot == script.slot) {
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
