//! A model of N masters applying the read-write rules and clients deciding with the crate's tally,
//! to check under any interleaving of grants, expiries, releases, lost cleanups and unreachable
//! masters that no reader overlaps a writer, that two writers never overlap, and that a writer
//! waiting on a majority keeps every new reader out. A variant whose readers ignore waiting writers
//! is run as a negative control of the last check, and one whose writers ignore readers as a control of the
//! first.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

use super::{MasterRw, RwReply};
use crate::core::timing::{quorum, Timing};
use crate::core::{Decision, Tally, Vote};

const TTL_MS: u64 = 1_000;
const WAIT_MS: u64 = 300;

#[derive(Debug, Clone)]
enum Step {
    Read {
        client: usize,
        reach: u32,
        cleanup: bool,
    },
    Write {
        client: usize,
        reach: u32,
        cleanup: bool,
    },
    Release {
        client: usize,
        reach: u32,
    },
    Leave {
        client: usize,
        reach: u32,
    },
    Advance(u64),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Read,
    Write,
}

/// A deliberate flaw in the masters' rules, for the negative controls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flaw {
    /// The rules as shipped.
    None,
    /// Readers ignore waiting writers: the control for writer preference.
    ReadersIgnoreWaiting,
    /// Writers ignore readers: the control for exclusion.
    WritersIgnoreReaders,
}

struct World {
    flaw: Flaw,
    masters: Vec<MasterRw<u64>>,
    /// Each client's hold: mode, token, validity end.
    holds: Vec<Option<(Mode, u64, u64)>>,
    /// Each writer's waiting id, kept over the rounds of one acquire (0: none yet).
    waiters: Vec<u64>,
    next_token: u64,
    now: u64,
    base: Instant,
    timing: Timing,
}

impl World {
    fn new(masters: usize, clients: usize, flaw: Flaw) -> Self {
        Self {
            flaw,
            masters: vec![MasterRw::default(); masters],
            holds: vec![None; clients],
            waiters: vec![0; clients],
            next_token: 1,
            now: 0,
            base: Instant::now(),
            timing: Timing::new(Duration::from_millis(TTL_MS), 0.01, Duration::ZERO).expect("timing"),
        }
    }

    fn valid(&self, mode: Mode) -> usize {
        self.holds
            .iter()
            .flatten()
            .filter(|(m, _, until)| *m == mode && *until > self.now)
            .count()
    }

    /// How many masters have a writer waiting now.
    fn waiting(&mut self) -> usize {
        let now = self.now;
        let mut count = 0;
        for m in &mut self.masters {
            m.purge(now);
            count += usize::from(!m.waiting.is_empty());
        }
        count
    }

    /// One round; returns whether it was granted.
    fn round(&mut self, client: usize, mode: Mode, reach: u32, cleanup: bool) -> bool {
        let client = client % self.holds.len();
        if self.holds[client].is_some_and(|(_, _, until)| until > self.now) {
            return false;
        }
        self.next_token += 1;
        let token = self.next_token;
        // A writer keeps its waiting id over its rounds, so its mark is refreshed, not doubled.
        if mode == Mode::Write && self.waiters[client] == 0 {
            self.next_token += 1;
            self.waiters[client] = self.next_token;
        }
        let waiter = self.waiters[client];
        let (now, n) = (self.now, self.masters.len());
        let at = self.base + Duration::from_millis(now);
        let mut tally = Tally::new(n, self.timing, at);
        for i in 0..n {
            let vote = if reach & (1 << i) == 0 {
                Vote::No
            } else {
                let m = &mut self.masters[i];
                let reply = match mode {
                    Mode::Read if self.flaw == Flaw::ReadersIgnoreWaiting => {
                        let waiting = std::mem::take(&mut m.waiting);
                        let reply = m.read(token, TTL_MS, now);
                        m.waiting = waiting;
                        reply
                    }
                    Mode::Read => m.read(token, TTL_MS, now),
                    Mode::Write if self.flaw == Flaw::WritersIgnoreReaders => {
                        let readers = std::mem::take(&mut m.readers);
                        let reply = m.write(token, &waiter, TTL_MS, WAIT_MS, now);
                        m.readers = readers;
                        reply
                    }
                    Mode::Write => m.write(token, &waiter, TTL_MS, WAIT_MS, now),
                };
                if reply == RwReply::Granted {
                    Vote::Yes
                } else {
                    Vote::No
                }
            };
            tally.handle_reply(i, vote, at);
        }
        if let Decision::Acquired { valid_until, .. } = tally.decision() {
            let until = u64::try_from(valid_until.duration_since(self.base).as_millis()).unwrap_or(u64::MAX);
            self.holds[client] = Some((mode, token, until));
            if mode == Mode::Write {
                self.waiters[client] = 0;
            }
            true
        } else {
            if cleanup {
                for (i, m) in self.masters.iter_mut().enumerate() {
                    if reach & (1 << i) != 0 {
                        m.release(&token);
                    }
                }
            }
            false
        }
    }

    fn step(&mut self, step: &Step) -> Result<(), TestCaseError> {
        let q = quorum(self.masters.len());
        match *step {
            Step::Advance(ms) => self.now += ms,
            Step::Read {
                client,
                reach,
                cleanup,
            } => {
                let waited = self.waiting() >= q;
                let granted = self.round(client, Mode::Read, reach, cleanup);
                prop_assert!(
                    !(waited && granted),
                    "a reader got in past a writer waiting on a majority"
                );
            }
            Step::Write {
                client,
                reach,
                cleanup,
            } => {
                self.round(client, Mode::Write, reach, cleanup);
            }
            Step::Release { client, reach } | Step::Leave { client, reach } => {
                let client = client % self.holds.len();
                let token = match (step, self.holds[client]) {
                    (Step::Release { .. }, Some((_, token, _))) => token,
                    _ => self.waiters[client],
                };
                for (i, m) in self.masters.iter_mut().enumerate() {
                    if reach & (1 << i) != 0 {
                        m.release(&token);
                        m.leave(&token);
                    }
                }
                if matches!(step, Step::Release { .. }) {
                    self.holds[client] = None;
                } else {
                    self.waiters[client] = 0;
                }
            }
        }
        let (readers, writers) = (self.valid(Mode::Read), self.valid(Mode::Write));
        prop_assert!(writers <= 1, "{writers} writers at once after {step:?}");
        prop_assert!(
            readers == 0 || writers == 0,
            "{readers} readers and a writer at once after {step:?}"
        );
        Ok(())
    }
}

fn step(clients: usize, masters: usize) -> impl Strategy<Value = Step> {
    let all = (1u32 << masters) - 1;
    let reach = move || (0..clients, 0..=all);
    prop_oneof![
        4 => (reach(), any::<bool>()).prop_map(|((client, reach), cleanup)| Step::Read { client, reach, cleanup }),
        3 => (reach(), any::<bool>()).prop_map(|((client, reach), cleanup)| Step::Write { client, reach, cleanup }),
        1 => reach().prop_map(|(client, reach)| Step::Release { client, reach }),
        1 => reach().prop_map(|(client, reach)| Step::Leave { client, reach }),
        2 => (1u64..700).prop_map(Step::Advance),
    ]
}

fn scenario() -> impl Strategy<Value = (usize, usize, Vec<Step>)> {
    (prop::sample::select(vec![3usize, 5]), 2usize..6).prop_flat_map(|(masters, clients)| {
        (
            Just(masters),
            Just(clients),
            prop::collection::vec(step(clients, masters), 1..60),
        )
    })
}

fn check(masters: usize, clients: usize, steps: &[Step], flaw: Flaw) -> Result<(), TestCaseError> {
    let mut world = World::new(masters, clients, flaw);
    for s in steps {
        world.step(s)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(Config::with_cases(512))]

    /// No reader overlaps a writer, writers never overlap, and a writer waiting on a majority
    /// keeps new readers out, under any interleaving.
    #[test]
    fn readers_and_writers_never_overlap((masters, clients, steps) in scenario()) {
        check(masters, clients, &steps, Flaw::None)?;
    }
}

/// Runs the property with `flaw` under proptest's search and returns the failure it finds.
fn caught(flaw: Flaw) -> String {
    let mut runner = TestRunner::new(Config {
        cases: 4096,
        failure_persistence: None,
        ..Config::default()
    });
    match runner.run(&scenario(), |(masters, clients, steps)| {
        check(masters, clients, &steps, flaw)
    }) {
        Err(TestError::Fail(reason, _)) => reason.message().to_owned(),
        other => panic!("{flaw:?} was not caught: {other:?}"),
    }
}

/// The negative control of writer preference: readers that ignore waiting writers let a reader in
/// past a writer waiting on a majority, and the same check finds it.
#[test]
fn the_preference_check_catches_readers_that_ignore_waiting_writers() {
    let reason = caught(Flaw::ReadersIgnoreWaiting);
    assert!(reason.contains("past a writer waiting"), "{reason}");
}

/// The negative control of exclusion: writers that ignore readers overlap them, and the same check
/// finds it.
#[test]
fn the_exclusion_check_catches_writers_that_ignore_readers() {
    let reason = caught(Flaw::WritersIgnoreReaders);
    assert!(reason.contains("readers and a writer at once"), "{reason}");
}

/// The scenario the preference exists for, step by step: a reader holds, a writer is refused and
/// waits on every master, a second reader is refused, and once the first reader leaves the writer
/// gets in.
#[test]
fn a_waiting_writer_is_not_starved_by_new_readers() {
    let mut world = World::new(3, 3, Flaw::None);
    let all = 0b111;
    assert!(world.round(0, Mode::Read, all, true));
    assert!(!world.round(1, Mode::Write, all, true));
    assert!(!world.round(2, Mode::Read, all, true));
    world
        .step(&Step::Release {
            client: 0,
            reach: all,
        })
        .expect("safe");
    assert!(world.round(1, Mode::Write, all, true));
}
