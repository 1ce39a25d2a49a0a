//! The model that proves fencing tokens monotonic: N masters with counters, clients interleaved
//! arbitrarily, checked by proptest.
//!
//! Test-only: it states the protocol of `super` as a state machine (round 1, the commit, repair,
//! restarts that lose writes, clients that pause anywhere) and checks after every run that the tokens
//! of successive holders strictly increase. Its negative controls show that it catches each flaw
//! the protocol guards against: a commit that skips the key check, no commit round at all, a repair
//! that skips the grace, a lost increment unseen by a fresh client, and a repair judged light from
//! what the restarted master reports.
//!
//! Whether a master's restart lost anything is judged as the client judges it, from reports and
//! the master's record (`core::master::record`): a master lowered to `appendfsync everysec` at
//! runtime (seen so by a check) that then crashes comes back reporting its configuration file's
//! `always`. What it really lost is ground truth, kept only to drive the masters.
//!
//! The key may be a read-write lock's writer key (a fenced write): readers then come and go on each
//! master at any moment, and round 1 is refused on a master where they hold (`rw_write_fenced.lua`:
//! the write rule and the draw in one step). Readers only remove grants, so the same properties
//! must hold with them in the interleaving.

use super::*;
use crate::core::master::record::{next, Missing, Record, Seen};
use proptest::prelude::*;

/// One step of the interleaving. Indices are reduced modulo the number of clients or masters.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// A client starts an acquisition (if idle).
    Start(usize),
    /// A client's round-1 script runs on a master.
    Ask(usize, usize),
    /// A client ends round 1 (with a majority: computes T and moves to commit; else fails).
    EndRound1(usize),
    /// A client's commit script runs on a master that granted it.
    Commit(usize, usize),
    /// A client ends round 2: issued with a majority of commits, else fails and releases.
    EndCommit(usize),
    /// A holder releases its keys.
    Release(usize),
    /// A master's key vanishes (TTL, clock jump, eviction): at any time, as early as you like.
    Expire(usize),
    /// A master restarts keeping its data (keys whose TTL passed meanwhile are gone). It has a
    /// new run_id, so its epoch is stale.
    Restart(usize),
    /// A master restarts without its data.
    Wipe(usize),
    /// A master restarts having lost its last writes: its persistence was lowered at runtime
    /// (`appendfsync everysec`, seen by a check), its counter is set back by up to the given
    /// amount, its keys are gone, its epoch is stale, and it comes back reporting `always`.
    Lose(usize, u64),
    /// Readers join a master (a read is refused while the writer key is there; readers hold no
    /// key and draw no counter).
    Read(usize),
    /// The readers of a master release or expire.
    Unread(usize),
    /// A client repairs a master that lost its counter or has a stale epoch (only once the
    /// grace has passed, unless it lost nothing), without hearing from a second master (slow or
    /// down during the read).
    Repair(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    // Data loss is rare enough that a majority of masters is usually intact.
    prop_oneof![
        8 => (0..8usize).prop_map(Op::Start),
        40 => (0..8usize, 0..8usize).prop_map(|(c, m)| Op::Ask(c, m)),
        12 => (0..8usize).prop_map(Op::EndRound1),
        40 => (0..8usize, 0..8usize).prop_map(|(c, m)| Op::Commit(c, m)),
        12 => (0..8usize).prop_map(Op::EndCommit),
        8 => (0..8usize).prop_map(Op::Release),
        4 => (0..8usize).prop_map(Op::Expire),
        2 => (0..8usize).prop_map(Op::Restart),
        1 => (0..8usize).prop_map(Op::Wipe),
        1 => (0..8usize, 1..5u64).prop_map(|(m, d)| Op::Lose(m, d)),
        6 => (0..8usize, 0..8usize).prop_map(|(m, s)| Op::Repair(m, s)),
    ]
}

/// The steps of fenced writes: the same, with readers coming and going on the masters.
fn write_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => op(),
        1 => (0..8usize).prop_map(Op::Read),
        4 => (0..8usize).prop_map(Op::Unread),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct KeyOwner {
    client: usize,
    attempt: u64,
}

#[derive(Debug, Clone)]
struct Master {
    key: Option<(KeyOwner, u64)>,
    /// Whether unexpired readers hold it: a fenced write's round 1 is refused there.
    readers: bool,
    counter: Option<u64>,
    /// When it last lost data (wiped, or lost its last writes).
    wiped_at: Option<u64>,
    /// Whether it lost data since it was last repaired (ground truth, never read by a rule).
    lost: bool,
    /// The record it keeps about itself, as the clients' checks wrote it.
    record: Option<Record>,
    /// Its run, new at every restart, and the run its counter was last vouched for under.
    run: u64,
    epoch: Option<u64>,
}

#[derive(Debug, Clone)]
enum Phase {
    Idle,
    Round1 {
        asked: Vec<bool>,
        granted: Vec<(usize, u64)>,
    },
    Commit {
        token: u64,
        granted: Vec<usize>,
        asked: Vec<bool>,
        committed: usize,
    },
    Holding,
}

#[derive(Debug, Clone)]
struct Client {
    phase: Phase,
    attempt: u64,
    started: u64,
    round1_end: u64,
    commit_start: Option<u64>,
    /// The highest counter this client has seen on each master (what a client knows alone).
    floor: Vec<u64>,
}

#[derive(Debug, Clone, Copy)]
struct Issue {
    token: u64,
    started: u64,
    round1_end: u64,
    commit_start: u64,
    issued: u64,
}

struct Model {
    masters: Vec<Master>,
    clients: Vec<Client>,
    now: u64,
    issues: Vec<Issue>,
    /// Acquisitions that finished round 1 but were never issued a token.
    denied: usize,
    /// Round-1 asks refused only because readers held the master.
    refused_by_readers: usize,
    /// Whether repair waits out the grace (the real client always does).
    grace: bool,
    /// A deliberately broken commit that does not check the key (for the negative control).
    blind_commit: bool,
    /// Whether round 1 checks the master's epoch (the real script does); without it, only a
    /// client's own floor reveals a counter that went back (for the negative control).
    epochs: bool,
    /// The old rule, for its negative control: a repair is light when the restarted master
    /// reports `appendfsync always`, whatever its record shows.
    light_from_report: bool,
    /// How far behind the model's clock a restart starts the counters (0 in the real client; more,
    /// for the negative control of a clock behind).
    restart_behind: u64,
}

impl Model {
    fn new(n: usize, clients: usize) -> Self {
        Self {
            masters: vec![
                Master {
                    key: None,
                    readers: false,
                    counter: Some(0),
                    wiped_at: None,
                    lost: false,
                    record: Some(Record {
                        run_id: "0".into(),
                        since_ms: 0,
                        lost: false,
                        durable: true,
                        grace_ms: 0,
                        hwm: 0,
                    }),
                    run: 0,
                    epoch: Some(0),
                };
                n
            ],
            clients: vec![
                Client {
                    phase: Phase::Idle,
                    attempt: 0,
                    started: 0,
                    round1_end: 0,
                    commit_start: None,
                    floor: vec![0; n],
                };
                clients
            ],
            now: 0,
            issues: Vec::new(),
            denied: 0,
            refused_by_readers: 0,
            grace: true,
            blind_commit: false,
            epochs: true,
            light_from_report: false,
            restart_behind: 0,
        }
    }

    /// The first check of master `m` after it restarted: its record judged from its report (it
    /// says `always`, as every restart here comes back with) and from the record it had.
    fn checked_after_restart(&mut self, m: usize) {
        let master = &mut self.masters[m];
        let seen = Seen {
            run_id: master.run.to_string(),
            now_ms: self.now,
            durable: Some(true),
            promoted: false,
            counter: master.counter,
        };
        let record = next(master.record.as_ref(), &seen, 0, Missing::Alone);
        if let Some(record) = record {
            master.record = Some(record);
        }
    }

    /// Whether a repair of master `m` may be light (no grace): its record, for its current run,
    /// shows it lost nothing; under the old rule, it reports `always` (every restart here does).
    fn light(&self, m: usize) -> bool {
        if self.light_from_report {
            return true;
        }
        let master = &self.masters[m];
        master
            .record
            .as_ref()
            .is_some_and(|r| r.run_id == master.run.to_string() && !r.lost)
    }

    fn owner(&self, c: usize) -> KeyOwner {
        KeyOwner {
            client: c,
            attempt: self.clients[c].attempt,
        }
    }

    fn release(&mut self, c: usize) {
        let me = self.owner(c);
        for m in &mut self.masters {
            if m.key.is_some_and(|(k, _)| k == me) {
                m.key = None;
            }
        }
        self.clients[c].phase = Phase::Idle;
    }

    fn fail(&mut self, c: usize) {
        let client = &self.clients[c];
        if !matches!(client.phase, Phase::Idle | Phase::Round1 { .. } | Phase::Holding) {
            self.denied += 1;
        }
        self.release(c);
    }

    /// After a repair, a client's floor at `m` is the repaired counter (each client that finds
    /// the counter below its floor repairs once more, a raise that changes nothing, and takes it
    /// as its floor): increments above it were never committed.
    fn repaired(&mut self, m: usize) {
        let counter = self.masters[m].counter.unwrap_or(0);
        for client in &mut self.clients {
            client.floor[m] = client.floor[m].min(counter);
        }
    }

    fn step(&mut self, op: Op) {
        self.now += 1;
        let n = self.masters.len();
        let k = self.clients.len();
        let q = quorum(n);
        match op {
            Op::Start(c) => {
                let c = c % k;
                if matches!(self.clients[c].phase, Phase::Idle) {
                    let client = &mut self.clients[c];
                    client.attempt += 1;
                    client.started = self.now;
                    client.commit_start = None;
                    client.phase = Phase::Round1 {
                        asked: vec![false; n],
                        granted: Vec::new(),
                    };
                }
            }
            Op::Ask(c, m) => {
                let (c, m) = (c % k, m % n);
                let me = self.owner(c);
                let now = self.now;
                let epochs = self.epochs;
                let client = &mut self.clients[c];
                if let Phase::Round1 { asked, granted } = &mut client.phase {
                    // The next master this client has not asked yet, from `m` on.
                    let Some(m) = (0..n).map(|j| (m + j) % n).find(|i| !asked[*i]) else {
                        return;
                    };
                    asked[m] = true;
                    // The round-1 script: no vote from a missing counter, one below this client's
                    // floor, or one whose epoch is not the master's current run.
                    let master = &mut self.masters[m];
                    let vouched = !epochs || master.epoch == Some(master.run);
                    if let Some(counter) = master.counter.as_mut() {
                        let free = master.key.is_none() && !master.readers;
                        if master.key.is_none() && master.readers {
                            self.refused_by_readers += 1;
                        }
                        if free && *counter >= client.floor[m] && vouched {
                            master.key = Some((me, now));
                            *counter += 1;
                            granted.push((m, *counter));
                            client.floor[m] = client.floor[m].max(*counter);
                        }
                    }
                }
            }
            Op::EndRound1(c) => {
                let c = c % k;
                if let Phase::Round1 { granted, asked } = &self.clients[c].phase {
                    let all_asked = asked.iter().all(|a| *a);
                    if granted.len() >= q {
                        let token = fencing_token(granted.iter().map(|(_, v)| *v));
                        let granted = granted.iter().map(|(m, _)| *m).collect();
                        let client = &mut self.clients[c];
                        client.round1_end = self.now;
                        client.phase = Phase::Commit {
                            token: token.unwrap_or(0),
                            granted,
                            asked: vec![false; n],
                            committed: 0,
                        };
                    } else if all_asked {
                        self.release(c);
                    }
                }
            }
            Op::Commit(c, m) => {
                let (c, m) = (c % k, m % n);
                let me = self.owner(c);
                let now = self.now;
                let blind = self.blind_commit;
                let client = &mut self.clients[c];
                if let Phase::Commit {
                    token,
                    granted,
                    asked,
                    committed,
                } = &mut client.phase
                {
                    client.commit_start.get_or_insert(now);
                    // The next granted master not yet asked to commit, from `m` on.
                    let Some(m) = (0..n)
                        .map(|j| (m + j) % n)
                        .find(|i| granted.contains(i) && !asked[*i])
                    else {
                        return;
                    };
                    asked[m] = true;
                    // The commit script.
                    let master = &mut self.masters[m];
                    if blind || master.key.is_some_and(|(o, _)| o == me) {
                        let counter = master.counter.get_or_insert(0);
                        *counter = (*counter).max(*token);
                        *committed += 1;
                        client.floor[m] = client.floor[m].max(*token);
                    }
                }
            }
            Op::EndCommit(c) => {
                let c = c % k;
                let now = self.now;
                let client = &mut self.clients[c];
                if let Phase::Commit {
                    token,
                    committed,
                    ref granted,
                    ref asked,
                } = client.phase
                {
                    let all_asked = granted.iter().all(|m| asked[*m]);
                    let commit_start = *client.commit_start.get_or_insert(now);
                    if committed >= q {
                        self.issues.push(Issue {
                            token,
                            started: client.started,
                            round1_end: client.round1_end,
                            commit_start,
                            issued: now,
                        });
                        client.phase = Phase::Holding;
                    } else if all_asked {
                        self.fail(c);
                    }
                }
            }
            Op::Release(c) => {
                let c = c % k;
                if matches!(self.clients[c].phase, Phase::Holding) {
                    self.release(c);
                }
            }
            Op::Expire(m) => self.masters[m % n].key = None,
            Op::Read(m) => {
                let master = &mut self.masters[m % n];
                if master.key.is_none() {
                    master.readers = true;
                }
            }
            Op::Unread(m) => self.masters[m % n].readers = false,
            Op::Restart(m) => {
                let master = &mut self.masters[m % n];
                master.key = None;
                master.run += 1;
                self.checked_after_restart(m % n);
            }
            Op::Wipe(m) => {
                let master = &mut self.masters[m % n];
                master.key = None;
                master.readers = false;
                master.counter = None;
                master.epoch = None;
                master.record = None;
                master.run += 1;
                master.wiped_at = Some(self.now);
                master.lost = true;
                self.checked_after_restart(m % n);
            }
            Op::Lose(m, d) => {
                let master = &mut self.masters[m % n];
                // The runtime downgrade, seen by a check before the crash.
                if let Some(record) = master.record.as_mut() {
                    record.durable = false;
                }
                master.key = None;
                master.readers = false;
                master.counter = master.counter.map(|v| v.saturating_sub(d));
                master.run += 1;
                master.wiped_at = Some(self.now);
                master.lost = true;
                self.checked_after_restart(m % n);
            }
            Op::Repair(m, silent) => {
                let (m, silent) = (m % n, silent % n);
                // What some client can notice: a missing counter, one below its floor, or (with
                // epochs, any client) a stale epoch.
                let noticed = |i: usize| {
                    let master = &self.masters[i];
                    master.counter.is_none()
                        || master
                            .counter
                            .is_some_and(|v| self.clients.iter().any(|c| c.floor[i] > v))
                        || (self.epochs && master.epoch != Some(master.run))
                };
                // The next master that needs it, from `m` on.
                let Some(m) = (0..n).map(|j| (m + j) % n).find(|i| noticed(*i)) else {
                    return;
                };
                let light = self.light(m);
                let master = &self.masters[m];
                let epochs = self.epochs;
                let vouched = move |i: usize, master: &Master| {
                    i != m && i != silent && (!epochs || master.epoch == Some(master.run))
                };
                if light {
                    // It lost nothing: raise it to the intact counters read and stamp its epoch.
                    let max = self
                        .masters
                        .iter()
                        .enumerate()
                        .filter(|(i, o)| vouched(*i, o))
                        .filter_map(|(_, o)| o.counter)
                        .max()
                        .unwrap_or(0);
                    let master = &mut self.masters[m];
                    master.counter = master.counter.map(|v| v.max(max));
                    master.epoch = Some(master.run);
                    self.repaired(m);
                    return;
                }
                let wiped_at = master.wiped_at.unwrap_or(0);
                // The grace has passed: every key set before the loss has expired, and every
                // acquisition that started before it is past its validity and cannot be issued.
                let masters: &mut [Master] = if self.grace { &mut self.masters } else { &mut [] };
                for master in masters {
                    if master.key.is_some_and(|(_, set)| set < wiped_at) {
                        master.key = None;
                    }
                }
                for c in 0..k {
                    let client = &self.clients[c];
                    let running = matches!(client.phase, Phase::Round1 { .. } | Phase::Commit { .. });
                    if self.grace && running && client.started < wiped_at {
                        self.fail(c);
                    }
                }
                let reads: Vec<CounterRead> = self
                    .masters
                    .iter()
                    .enumerate()
                    .map(|(i, master)| match master.counter {
                        _ if i == silent => CounterRead::Unusable,
                        None => CounterRead::Absent,
                        Some(v) if vouched(i, master) => CounterRead::Present(v),
                        // The master being repaired, or one whose epoch is stale and whose
                        // record does not show that it lost nothing (the client's own reading).
                        Some(_) if i == m || (epochs && !self.light(i)) => CounterRead::Lost,
                        Some(_) => CounterRead::Unusable,
                    })
                    .collect();
                let target = match repair_target(&reads) {
                    RepairTarget::Raise(v) => v,
                    RepairTarget::Bootstrap => 0,
                    // The clock in the model's steps: a counter grows by at most one a step.
                    RepairTarget::Restart => self.now.saturating_sub(self.restart_behind),
                    RepairTarget::Undecided { .. } => return,
                };
                let master = &mut self.masters[m];
                master.counter = Some(master.counter.unwrap_or(0).max(target));
                master.epoch = Some(master.run);
                master.lost = false;
                self.repaired(m);
            }
        }
    }

    fn check(&self) -> Result<(), TestCaseError> {
        for (i, a) in self.issues.iter().enumerate() {
            for b in &self.issues[i + 1..] {
                prop_assert_ne!(a.token, b.token, "two holders were issued the same token");
                for (x, y) in [(a, b), (b, a)] {
                    if x.issued < y.started {
                        prop_assert!(
                            x.token < y.token,
                            "a later holder got a lower token: {:?} then {:?}",
                            x,
                            y
                        );
                    }
                    // y acquired entirely while x was paused between its rounds: x gets nothing.
                    if y.started > x.round1_end && y.issued < x.commit_start {
                        prop_assert!(
                            false,
                            "a holder paused between rounds was issued a token: {:?} during {:?}",
                            y,
                            x
                        );
                    }
                }
            }
        }
        Ok(())
    }
}

fn run(n: usize, clients: usize, ops: &[Op]) -> Result<Model, TestCaseError> {
    run_with(Model::new(n, clients), ops)
}

fn run_with(mut model: Model, ops: &[Op]) -> Result<Model, TestCaseError> {
    for op in ops {
        model.step(*op);
    }
    model.check()?;
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn tokens_of_successive_holders_strictly_increase(
            n in prop_oneof![Just(3usize), Just(5)],
            clients in 2usize..5,
            ops in proptest::collection::vec(op(), 1..300),
        ) {
            run(n, clients, &ops)?;
        }

        #[test]
        fn tokens_of_successive_fenced_writers_strictly_increase(
            n in prop_oneof![Just(3usize), Just(5)],
            clients in 2usize..5,
            ops in proptest::collection::vec(write_op(), 1..300),
        ) {
            run(n, clients, &ops)?;
        }
    }

    /// Fenced writes among readers: the readers' refusals happen, tokens are still issued and
    /// strictly increase, and the blind commit is still caught.
    #[test]
    fn fenced_writes_among_readers_keep_tokens_increasing() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::deterministic_rng(RngAlgorithm::ChaCha),
        );
        let strategy = proptest::collection::vec(write_op(), 100..300);
        let (mut issued, mut refused, mut caught) = (0, 0, 0);
        for _ in 0..600 {
            let ops = strategy
                .new_tree(&mut runner)
                .expect("generate a sequence")
                .current();
            let model = run(5, 3, &ops).expect("the protocol holds among readers");
            issued += model.issues.len();
            refused += model.refused_by_readers;
            let mut blind = Model::new(5, 3);
            blind.blind_commit = true;
            if run_with(blind, &ops).is_err() {
                caught += 1;
            }
        }
        eprintln!("fenced writes: issued {issued}, refused by readers {refused}, caught {caught}");
        // Readers refuse many asks, so fewer tokens are issued than without them.
        assert!(issued > 50, "only {issued} tokens issued");
        assert!(refused > 50, "readers refused only {refused} asks");
        assert!(caught > 0, "the blind commit was never caught among readers");
    }

    /// The random interleavings do reach the interesting states: tokens issued, and acquisitions
    /// denied at the commit; and a commit that skips the key check is caught.
    #[test]
    fn random_interleavings_issue_tokens_and_catch_a_blind_commit() {
        use proptest::strategy::ValueTree;
        use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::deterministic_rng(RngAlgorithm::ChaCha),
        );
        let strategy = proptest::collection::vec(op(), 100..300);
        let (mut issued, mut denied, mut caught) = (0, 0, 0);
        for _ in 0..600 {
            let ops = strategy
                .new_tree(&mut runner)
                .expect("generate a sequence")
                .current();
            let model = run(5, 3, &ops).expect("the protocol holds");
            issued += model.issues.len();
            denied += model.denied;
            let mut blind = Model::new(5, 3);
            blind.blind_commit = true;
            if run_with(blind, &ops).is_err() {
                caught += 1;
            }
        }
        eprintln!("issued {issued}, denied {denied}, caught {caught}");
        assert!(issued > 100, "only {issued} tokens issued");
        assert!(denied > 50, "only {denied} acquisitions denied at commit");
        assert!(caught > 0, "the blind commit was never caught");
    }

    /// The same model must catch the flaw it is there for: with the token taken from the round-1
    /// counters but no commit round, a holder paused between the rounds keeps a token lower than a
    /// later holder's and writes with it after that holder.
    #[test]
    fn the_model_catches_a_paused_holder_when_it_need_not_commit() {
        let mut model = Model::new(3, 2);
        model.step(Op::Start(0));
        model.step(Op::Ask(0, 0));
        model.step(Op::Ask(0, 1));
        model.step(Op::EndRound1(0));
        // Client 0 pauses; its keys expire; client 1 acquires and is issued a token.
        model.step(Op::Expire(0));
        model.step(Op::Expire(1));
        for op in [
            Op::Start(1),
            Op::Ask(1, 0),
            Op::Ask(1, 1),
            Op::EndRound1(1),
            Op::Commit(1, 0),
            Op::Commit(1, 1),
            Op::EndCommit(1),
        ] {
            model.step(op);
        }
        assert!(model.check().is_ok());
        // With the commit round, client 0 is denied.
        model.step(Op::Commit(0, 0));
        model.step(Op::Commit(0, 1));
        model.step(Op::EndCommit(0));
        assert_eq!(model.issues.len(), 1);
        assert_eq!(model.denied, 1);
        // Skipping the commit (issuing straight from round 1) is what the properties reject.
        let skipped = Issue {
            token: 2,
            started: 1,
            round1_end: 4,
            commit_start: model.now,
            issued: model.now,
        };
        model.issues.push(skipped);
        assert!(model.check().is_err());
    }

    /// Repair without the grace (raising from a read that races a commit) is caught by the model:
    /// this is why a master that lost its counter waits out the longest TTL first.
    #[test]
    fn the_model_catches_a_repair_that_skips_the_grace() {
        let hasty = |grace: bool| {
            let mut model = Model::new(5, 2);
            model.grace = grace;
            for (m, counter) in [10u64, 1, 1, 1, 1].into_iter().enumerate() {
                model.masters[m].counter = Some(counter);
            }
            // A is granted on 0, 1, 2 (11, 2, 2: T = 11) and commits on 0 and 1.
            for op in [
                Op::Start(0),
                Op::Ask(0, 0),
                Op::Ask(0, 1),
                Op::Ask(0, 2),
                Op::EndRound1(0),
                Op::Commit(0, 0),
                Op::Commit(0, 1),
                // Master 0 loses its data and is repaired from 2, 3, 4 (master 1 silent): 2.
                Op::Wipe(0),
                Op::Repair(0, 1),
                // A commits on 2 and is issued 11 (if it still can).
                Op::Commit(0, 2),
                Op::EndCommit(0),
                // B is then granted on 0, 3, 4 (3, 2, 2: T = 3).
                Op::Start(1),
                Op::Ask(1, 0),
                Op::Ask(1, 3),
                Op::Ask(1, 4),
                Op::EndRound1(1),
                Op::Commit(1, 0),
                Op::Commit(1, 3),
                Op::Commit(1, 4),
                Op::EndCommit(1),
            ] {
                model.step(op);
            }
            model
        };
        let unsafe_model = hasty(false);
        assert_eq!(unsafe_model.issues.len(), 2);
        assert!(
            unsafe_model.check().is_err(),
            "the hasty repair lets tokens go backwards"
        );
        let safe = hasty(true);
        assert!(safe.check().is_ok());
        assert_eq!(
            safe.issues.len(),
            1,
            "A, which started before the loss, is denied"
        );
    }

    /// Client `c` acquires on masters `a` and `b` alone: both rounds, then the end of each.
    fn acquire_on(model: &mut Model, c: usize, a: usize, b: usize) {
        for op in [
            Op::Start(c),
            Op::Ask(c, a),
            Op::Ask(c, b),
            Op::EndRound1(c),
            Op::Commit(c, a),
            Op::Commit(c, b),
            Op::EndCommit(c),
        ] {
            model.step(op);
        }
    }

    /// Client 0 is issued three tokens (1, 2, 3) committed on masters 0 and 1; master 2 stays at 0.
    fn issue_three_on_0_and_1(model: &mut Model) {
        for _ in 0..3 {
            acquire_on(model, 0, 0, 1);
            model.step(Op::Release(0));
        }
    }

    /// The light repair judged from the restarted master's report (the old rule) is caught: A is
    /// issued its tokens on masters 0 and 1; master 1 is lowered at runtime, crashes losing its
    /// last increments and comes back reporting `always`; repaired lightly from master 2 alone
    /// (master 0 silent), it lets B be issued a token below A's. Judged from its record (the
    /// downgrade was seen), the repair is a full one, waits out the grace and needs a majority of
    /// intact counters, which master 2 alone is not: B gets nothing lower.
    #[test]
    fn the_model_catches_a_light_repair_judged_from_the_report() {
        let scenario = |light_from_report: bool| {
            let mut model = Model::new(3, 2);
            model.light_from_report = light_from_report;
            issue_three_on_0_and_1(&mut model);
            model.step(Op::Lose(1, 3));
            model.step(Op::Repair(1, 0));
            acquire_on(&mut model, 1, 1, 2);
            model
        };
        let old = scenario(true);
        assert!(
            old.check().is_err(),
            "the light repair from the report lets tokens go back"
        );
        let safe = scenario(false);
        assert!(safe.check().is_ok());
        assert_eq!(
            safe.issues.len(),
            3,
            "B is issued nothing: master 1 waits for a full repair"
        );
        // Random interleavings find it too.
        use proptest::strategy::ValueTree;
        use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
        let mut runner = TestRunner::new_with_rng(
            Config::default(),
            TestRng::deterministic_rng(RngAlgorithm::ChaCha),
        );
        let strategy = proptest::collection::vec(op(), 100..300);
        let mut caught = 0;
        for _ in 0..600 {
            let ops = strategy
                .new_tree(&mut runner)
                .expect("generate a sequence")
                .current();
            let mut old = Model::new(5, 3);
            old.light_from_report = true;
            if run_with(old, &ops).is_err() {
                caught += 1;
            }
        }
        eprintln!("light repair from the report: caught in {caught} of 600 random sequences");
    }

    /// A master restarts having lost its last increments, and a client that never saw it (no floor
    /// there) is granted by it and a master the earlier tokens never reached: without the epoch check
    /// in round 1 that client is issued a token below one already issued; with it, the master is
    /// repaired first and the token is larger.
    #[test]
    fn the_model_catches_a_lost_increment_unseen_by_a_fresh_client() {
        let scenario = |epochs: bool| {
            let mut model = Model::new(3, 2);
            model.epochs = epochs;
            issue_three_on_0_and_1(&mut model);
            // Master 0 loses those increments in a restart; client 0 then holds master 1.
            model.step(Op::Lose(0, 3));
            model.step(Op::Start(0));
            model.step(Op::Ask(0, 1));
            // Client 1 (no floor anywhere) asks 0 and 2; once round 1 fails, masters are repaired
            // and it tries again.
            for op in [
                Op::Start(1),
                Op::Ask(1, 0),
                Op::Ask(1, 2),
                Op::Ask(1, 1),
                Op::EndRound1(1),
                Op::Repair(0, 0),
                Op::Start(1),
                Op::Ask(1, 0),
                Op::Ask(1, 2),
                Op::EndRound1(1),
                Op::Commit(1, 0),
                Op::Commit(1, 2),
                Op::EndCommit(1),
            ] {
                model.step(op);
            }
            model
        };
        let blind = scenario(false);
        assert_eq!(blind.issues.last().map(|i| i.token), Some(1));
        assert!(blind.check().is_err(), "the fresh client's token went back");
        let safe = scenario(true);
        assert!(safe.check().is_ok());
        assert_eq!(safe.issues.len(), 4);
        assert!(
            safe.issues.last().is_some_and(|i| i.token > 3),
            "{:?}",
            safe.issues
        );
    }

    /// A majority of masters loses its last increments (masters 0 and 1, which hold every token
    /// issued): no intact majority is left to raise them from, so a raise would wait for ever and
    /// no fenced lock would be issued again. They restart at the clock instead, above every token
    /// issued; a restart from a clock far behind is caught.
    #[test]
    fn a_majority_that_lost_its_counters_restarts_above_every_issued_token() {
        let scenario = |behind: u64| {
            let mut model = Model::new(3, 2);
            model.restart_behind = behind;
            issue_three_on_0_and_1(&mut model);
            model.step(Op::Lose(0, 3));
            model.step(Op::Lose(1, 3));
            // The repair hears nothing from master 2, and master 1 is lost too: master 0
            // restarts; client 1 is then granted by it and master 2 (which no token reached).
            model.step(Op::Repair(0, 2));
            acquire_on(&mut model, 1, 0, 2);
            model
        };
        let safe = scenario(0);
        assert!(safe.check().is_ok());
        assert_eq!(safe.issues.len(), 4, "the fenced lock is issued again");
        assert!(
            safe.issues.last().is_some_and(|i| i.token > 3),
            "{:?}",
            safe.issues
        );
        let behind = scenario(1_000);
        assert_eq!(behind.issues.len(), 4);
        assert!(
            behind.check().is_err(),
            "a restart from a clock behind lets tokens go back"
        );
    }
}
