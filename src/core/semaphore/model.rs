//! A model of N masters and several clients taking permits, to check the semaphore's safety claim
//! against any interleaving of grants, expiries, lost cleanups and unreachable masters, and to show
//! that the same check catches the design it replaces (a per-master count accepted at a simple
//! majority).
//!
//! Time is whole milliseconds from a fixed start. Every round's replies arrive at the instant the
//! round starts, and each client decides with the crate's own [`Tally`], so a holder's validity is
//! the one the client would compute. A master keeps its keys (a master that loses keys is out of the
//! model, as for the plain lock); an unreachable master simply gives no vote.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use super::{aim, SlotReply};
use crate::core::timing::{quorum, Timing};
use crate::core::{Decision, Tally, Vote};

const TTL_MS: u64 = 1_000;

/// How the masters count permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Design {
    /// The design shipped: each slot a lock decided by a majority.
    Slots,
    /// The unsafe design: each master counts holders, a client holds on a simple majority.
    MajorityCount,
}

/// One step of an interleaving.
#[derive(Debug, Clone)]
enum Step {
    /// Client `client` makes one round, reaching only the masters in the bit mask `reach`; `aim`
    /// overrides the slot it aims at (modulo the permits) instead of the last round's hint.
    Acquire {
        client: usize,
        reach: u32,
        aim: Option<u32>,
        cleanup: bool,
    },
    /// Client `client` releases what it holds, on the masters in `reach`.
    Release { client: usize, reach: u32 },
    /// Time passes.
    Advance(u64),
}

/// One master: each held slot (or, for the counting design, each counted holder) and its expiry.
#[derive(Debug, Default, Clone)]
struct Master {
    held: HashMap<u32, (usize, u64)>,
}

impl Master {
    fn purge(&mut self, now: u64) {
        self.held.retain(|_, (_, expires)| *expires > now);
    }

    /// The script: take `slot` if free, else name the first free slot, else full.
    fn take_slot(&mut self, client: usize, slot: u32, permits: u32, now: u64) -> SlotReply {
        self.purge(now);
        if let std::collections::hash_map::Entry::Vacant(free) = self.held.entry(slot) {
            free.insert((client, now + TTL_MS));
            return SlotReply::Took;
        }
        (0..permits)
            .find(|s| !self.held.contains_key(s))
            .map_or(SlotReply::Full, SlotReply::Free)
    }

    /// The unsafe design: count this client in if fewer than `permits` are counted.
    fn count_in(&mut self, client: usize, permits: u32, now: u64) -> bool {
        self.purge(now);
        let n = u32::try_from(self.held.len()).unwrap_or(u32::MAX);
        match (0..permits).find(|s| !self.held.contains_key(s)) {
            Some(s) if n < permits => {
                self.held.insert(s, (client, now + TTL_MS));
                true
            }
            _ => false,
        }
    }

    fn release(&mut self, client: usize) {
        self.held.retain(|_, (c, _)| *c != client);
    }
}

/// The whole system: masters, and each client's hold (its validity end) and next aim.
struct World {
    design: Design,
    permits: u32,
    masters: Vec<Master>,
    holds: Vec<Option<u64>>,
    aims: Vec<u32>,
    now: u64,
    base: Instant,
    timing: Timing,
}

impl World {
    fn new(design: Design, masters: usize, clients: usize, permits: u32) -> Self {
        Self {
            design,
            permits,
            masters: vec![Master::default(); masters],
            holds: vec![None; clients],
            aims: vec![0; clients],
            now: 0,
            base: Instant::now(),
            timing: Timing::new(Duration::from_millis(TTL_MS), 0.01, Duration::ZERO).expect("timing"),
        }
    }

    fn at(&self, ms: u64) -> Instant {
        self.base + Duration::from_millis(ms)
    }

    /// Clients whose validity has not ended.
    fn holders(&self) -> usize {
        self.holds
            .iter()
            .flatten()
            .filter(|until| **until > self.now)
            .count()
    }

    fn step(&mut self, step: &Step) {
        let n = self.masters.len();
        match *step {
            Step::Advance(ms) => self.now += ms,
            Step::Release { client, reach } => {
                let client = client % self.holds.len();
                for (i, m) in self.masters.iter_mut().enumerate() {
                    if reach & (1 << i) != 0 {
                        m.release(client);
                    }
                }
                self.holds[client] = None;
            }
            Step::Acquire {
                client,
                reach,
                aim: forced,
                cleanup,
            } => {
                let client = client % self.holds.len();
                if self.holds[client].is_some_and(|until| until > self.now) {
                    return;
                }
                let slot = forced.map_or(self.aims[client], |s| s % self.permits);
                let mut tally = Tally::new(n, self.timing, self.at(self.now));
                let mut hints = Vec::new();
                let (permits, now) = (self.permits, self.now);
                for i in 0..n {
                    let vote = if reach & (1 << i) == 0 {
                        Vote::No
                    } else {
                        match self.design {
                            Design::Slots => match self.masters[i].take_slot(client, slot, permits, now) {
                                SlotReply::Took => Vote::Yes,
                                other => {
                                    hints.push(other);
                                    Vote::No
                                }
                            },
                            Design::MajorityCount => {
                                if self.masters[i].count_in(client, permits, now) {
                                    Vote::Yes
                                } else {
                                    Vote::No
                                }
                            }
                        }
                    };
                    tally.handle_reply(i, vote, self.at(now));
                }
                match tally.decision() {
                    Decision::Acquired { valid_until, .. } => {
                        let ms = valid_until.duration_since(self.base).as_millis();
                        self.holds[client] = Some(u64::try_from(ms).unwrap_or(u64::MAX));
                    }
                    _ => {
                        if cleanup {
                            for (i, m) in self.masters.iter_mut().enumerate() {
                                if reach & (1 << i) != 0 {
                                    m.release(client);
                                }
                            }
                        }
                        self.aims[client] = aim(&hints).unwrap_or(slot);
                    }
                }
            }
        }
    }
}

fn step(clients: usize, masters: usize) -> impl Strategy<Value = Step> {
    let all = (1u32 << masters) - 1;
    prop_oneof![
        4 => (0..clients, 0..=all, prop::option::of(0u32..8), any::<bool>())
            .prop_map(|(client, reach, aim, cleanup)| Step::Acquire { client, reach, aim, cleanup }),
        1 => (0..clients, 0..=all).prop_map(|(client, reach)| Step::Release { client, reach }),
        2 => (1u64..700).prop_map(Step::Advance),
    ]
}

/// A system and an interleaving: masters, clients, permits and the steps.
fn scenario() -> impl Strategy<Value = (usize, usize, u32, Vec<Step>)> {
    (prop::sample::select(vec![3usize, 5]), 2usize..7, 1u32..4).prop_flat_map(
        |(masters, clients, permits)| {
            (
                Just(masters),
                Just(clients),
                Just(permits),
                prop::collection::vec(step(clients, masters), 1..60),
            )
        },
    )
}

/// The safety property: after every step, at most `permits` clients hold a valid permit.
fn at_most_permits(
    design: Design,
    masters: usize,
    clients: usize,
    permits: u32,
    steps: &[Step],
) -> Result<(), TestCaseError> {
    let mut world = World::new(design, masters, clients, permits);
    for s in steps {
        world.step(s);
        let holders = world.holders();
        prop_assert!(
            holders <= permits as usize,
            "{holders} holders of {permits} permits on {masters} masters after {s:?}"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(Config::with_cases(512))]

    /// The shipped design: no interleaving of grants, expiries, releases, lost cleanups and
    /// unreachable masters gives more holders than permits.
    #[test]
    fn slots_never_admit_more_than_the_permits((masters, clients, permits, steps) in scenario()) {
        at_most_permits(Design::Slots, masters, clients, permits, &steps)?;
    }
}

/// Client `c` of the counterexample reaches the `q` masters from `c * q` on, cyclically: the
/// clients' majorities spread evenly, so no master counts more than `permits`.
fn rotating(masters: usize, clients: usize) -> Vec<Step> {
    let q = quorum(masters);
    (0..clients)
        .map(|c| {
            let reach = (0..q).fold(0u32, |m, k| m | 1 << ((c * q + k) % masters));
            Step::Acquire {
                client: c,
                reach,
                aim: None,
                cleanup: false,
            }
        })
        .collect()
}

/// The counterexample, made exactly: majority counting admits `⌊n·P/q⌋` holders, and the
/// slots, under the same partitions, admit at most `P`.
#[test]
fn majority_counting_admits_n_p_over_q_holders_and_slots_do_not() {
    for masters in [3usize, 5, 7] {
        let q = quorum(masters);
        for permits in 1u32..5 {
            let bound = masters * permits as usize / q;
            let steps = rotating(masters, bound + 2);
            let mut counting = World::new(Design::MajorityCount, masters, bound + 2, permits);
            let mut slots = World::new(Design::Slots, masters, bound + 2, permits);
            for s in &steps {
                counting.step(s);
                slots.step(s);
            }
            assert_eq!(counting.holders(), bound, "n={masters} P={permits}");
            assert!(slots.holders() <= permits as usize, "n={masters} P={permits}");
            if permits >= 2 {
                assert!(bound > permits as usize, "the counterexample exceeds the permits");
            }
        }
    }
}

/// The negative control: the very property that holds for the slots, run by proptest's own search
/// over random interleavings against majority counting, fails, and its failing case has more
/// holders than permits. A check that could not fail would pass here too.
#[test]
fn the_safety_property_catches_majority_counting() {
    let mut runner = TestRunner::new(Config {
        cases: 4096,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = runner.run(&scenario(), |(masters, clients, permits, steps)| {
        at_most_permits(Design::MajorityCount, masters, clients, permits, &steps)
    });
    match outcome {
        Err(TestError::Fail(reason, (_, _, permits, _))) => {
            assert!(reason.message().contains("holders of"), "{reason}");
            assert!(permits >= 2, "one permit is a plain lock, and safe: {reason}");
        }
        other => panic!("majority counting was not caught: {other:?}"),
    }
}
