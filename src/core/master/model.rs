//! The model that keeps exclusion safe through real operations: N masters whose reports lie the
//! way real deployments do, clients whose only knowledge is what they read ([`Belief`], fed by
//! reports and the records on the masters), and ground truth kept only to judge.
//!
//! Test-only. Masters are replaced behind their address by servers that never had the data and
//! report a long uptime and `appendfsync always`; replicas that lag are promoted; persistence is
//! lowered at runtime and the master then crashes, losing its last writes, and comes back
//! reporting its configuration file's `always`; masters get a memory limit and evict keys; new
//! clients join after any of these. The property: no two holders' validities overlap. Each rule
//! the client follows has a negative control, the old rule put back, which the model catches:
//! the grace judged from the reported uptime alone, a restart's durability judged from the new
//! incarnation's report, a promotion ignored, a missing record taken for a fresh deployment, an
//! evicting master counted, a client waiting out only its own grace when another declared a longer
//! TTL in the records.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::record::{next, Missing, Record, Seen};
use super::{Belief, Memory, Report, Rules, Sighting};
use crate::base::error::NodeErrorKind;
use crate::core::timing::{drift, quorum};

/// The TTL every client uses, in ms, but client 0, which uses [`LONG_TTL`]; a client's own grace is
/// its TTL plus its drift, which it declares in the records it writes.
const TTL: u64 = 100;
/// Client 0's TTL: the others learn of it only from the masters' records.
const LONG_TTL: u64 = 4 * TTL;

/// One step. Indices are reduced modulo the number of clients or masters.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// Time passes, in ms.
    Tick(u64),
    /// A client checks a master (its background refresh).
    Check(usize, usize),
    /// A client tries to take the lock once, if it holds nothing.
    Acquire(usize),
    /// A holder releases.
    Release(usize),
    /// A client is replaced by a new process, which checks every master at its build.
    NewClient(usize),
    /// A master crashes and restarts: with its data if it persists every write now, else without
    /// its lock keys (its last writes), reporting its configuration file's persistence.
    Crash(usize),
    /// A master's persistence is lowered at runtime, and a client's refresh sees it.
    Downgrade(usize),
    /// Another server, which never had the data, answers at a master's address; it reports a long
    /// uptime and `appendfsync always`.
    Replace(usize),
    /// A replica lagging by the given ms is promoted behind a master's address.
    Promote(usize, u64),
    /// A master gets a memory limit with `volatile-ttl`, which every client's next check sees
    /// before the master fills up.
    LimitMemory(usize),
    /// A master with a memory limit evicts its lock key.
    Evict(usize),
    /// A client's connection to a master drops (a blip of the network): its votes count again
    /// after the client's next check of it.
    Cut(usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (1..=2 * TTL).prop_map(Op::Tick),
        14 => (0..8usize, 0..8usize).prop_map(|(c, m)| Op::Check(c, m)),
        14 => (0..8usize).prop_map(Op::Acquire),
        5 => (0..8usize).prop_map(Op::Release),
        2 => (0..8usize).prop_map(Op::NewClient),
        2 => (0..8usize).prop_map(Op::Crash),
        1 => (0..8usize).prop_map(Op::Downgrade),
        2 => (0..8usize).prop_map(Op::Replace),
        1 => (0..8usize, 1..=TTL).prop_map(|(m, lag)| Op::Promote(m, lag)),
        1 => (0..8usize).prop_map(Op::LimitMemory),
        2 => (0..8usize).prop_map(Op::Evict),
        3 => (0..8usize, 0..8usize).prop_map(|(c, m)| Op::Cut(c, m)),
    ]
}

/// A master's data: its lock key (hold id, expiry) and its record.
#[derive(Debug, Clone, Default)]
struct Data {
    key: Option<(usize, u64)>,
    record: Option<Record>,
}

/// One master, as it is (ground truth) and as it reports itself.
#[derive(Debug, Clone)]
struct Master {
    data: Data,
    /// Its data at each change, for a replica that lags: (time, data).
    history: Vec<(u64, Data)>,
    run: u64,
    /// When its reported uptime says it started (a replacement's lies about the address's past).
    up_since: u64,
    /// Whether it persists every write now (what `CONFIG GET` says).
    durable: bool,
    /// Whether its configuration file says it does (what a restart comes back with).
    file_durable: bool,
    /// Whether it took over another server's replication history.
    promoted: bool,
    /// Whether a client checked it since it was promoted: a restart only then hides the promotion
    /// (a promoted replica restarted before any check is the window the docs leave out of model).
    seen_promoted: bool,
    /// Whether it has a memory limit with an evicting policy.
    evicting: bool,
}

impl Master {
    fn report(&self, now: u64) -> Report {
        Report {
            run_id: self.run.to_string(),
            uptime_secs: now.saturating_sub(self.up_since) / 1000,
            aof_enabled: true,
            appendfsync: Ok(if self.durable { "always" } else { "everysec" }.into()),
            replicas: 0,
            promoted: self.promoted,
            memory: Memory {
                maxmemory: u64::from(self.evicting),
                policy: Some("volatile-ttl".into()),
                evicted_keys: 0,
            },
        }
    }

    fn changed(&mut self, now: u64) {
        self.history.push((now, self.data.clone()));
    }

    /// A new server process behind the address: connections to it drop.
    fn new_run(&mut self, now: u64) {
        self.run += 1;
        self.up_since = now;
    }
}

#[derive(Debug, Clone)]
struct Client {
    beliefs: Vec<Belief>,
    hold: Option<usize>,
}

#[derive(Debug, Clone, Copy)]
struct Hold {
    client: usize,
    start: u64,
    valid_until: u64,
    released: Option<u64>,
}

/// The old rules, each put back for its negative control.
#[derive(Debug, Clone, Copy, Default)]
struct Old {
    /// The grace judged from the reported uptime alone, ignoring the record.
    uptime_only: bool,
    /// A restart's durability judged from the new incarnation's report, not its history.
    durability_from_report: bool,
    /// Promotions from a replica not noticed.
    ignore_promotion: bool,
    /// A master without a record taken for a fresh one.
    missing_is_fresh: bool,
    /// Masters that may evict keys counted.
    count_evicting: bool,
    /// Each client waits out only its own grace, not the longest another declared.
    own_grace_only: bool,
}

struct Model {
    now: u64,
    base: Instant,
    masters: Vec<Master>,
    clients: Vec<Client>,
    holds: Vec<Hold>,
    /// Each client's disconnect count with each master: bumped when the server behind it changes,
    /// or when that client's connection alone is cut.
    disconnects: Vec<Vec<u64>>,
    old: Old,
}

impl Model {
    fn new(n: usize, clients: usize, old: Old) -> Model {
        let master = Master {
            data: Data::default(),
            history: vec![(0, Data::default())],
            run: 0,
            up_since: 0,
            durable: true,
            file_durable: true,
            promoted: false,
            seen_promoted: false,
            evicting: false,
        };
        let mut model = Model {
            // Ten seconds in: every master has been up (by its report) for far longer than a grace.
            now: 10_000,
            base: Instant::now(),
            masters: (0..n)
                .map(|i| Master {
                    run: i as u64 * 1_000,
                    ..master.clone()
                })
                .collect(),
            clients: Vec::new(),
            holds: Vec::new(),
            disconnects: vec![vec![0; n]; clients],
            old,
        };
        for c in 0..clients {
            model.clients.push(Client {
                beliefs: vec![Belief::default(); n],
                hold: None,
            });
            model.build(c);
        }
        model
    }

    fn at(&self, ms: u64) -> Instant {
        self.base + Duration::from_millis(ms)
    }

    /// Client `c`'s TTL.
    fn ttl(c: usize) -> u64 {
        if c == 0 {
            LONG_TTL
        } else {
            TTL
        }
    }

    /// Client `c`'s own grace: its TTL plus its drift.
    fn own_grace(c: usize) -> Duration {
        let ttl = Duration::from_millis(Self::ttl(c));
        ttl + drift(ttl, 0.01).unwrap_or_default()
    }

    /// The grace client `c` waits out: its own, or the longest any record it read declares.
    fn grace(&self, c: usize) -> Duration {
        let own = Self::own_grace(c);
        if self.old.own_grace_only {
            return own;
        }
        let fleet = self.clients[c]
            .beliefs
            .iter()
            .filter_map(|b| b.sighting.as_ref())
            .map(|s| Duration::from_millis(s.record.grace_ms))
            .max()
            .unwrap_or_default();
        own.max(fleet)
    }

    fn rules(&self, c: usize) -> Rules {
        Rules {
            enforce: true,
            refuse_evicting: !self.old.count_evicting,
            grace: self.grace(c),
            drift_factor: 0.01,
        }
    }

    /// A new process for client `c`: it checks every master, and takes a deployment where none
    /// has a record for a fresh one.
    fn build(&mut self, c: usize) {
        self.clients[c] = Client {
            beliefs: vec![Belief::default(); self.masters.len()],
            hold: None,
        };
        let reads: Vec<Option<bool>> = self
            .masters
            .iter()
            .map(|m| Some(m.data.record.is_some()))
            .collect();
        let missing = super::record::missing(&reads);
        for m in 0..self.masters.len() {
            self.check(c, m, missing);
        }
    }

    /// Client `c` checks master `m`, as the health check does: reads its report and record,
    /// writes the next record, and takes both in.
    fn check(&mut self, c: usize, m: usize, missing: Missing) {
        let now = self.now;
        let old = self.old;
        let master = &mut self.masters[m];
        master.seen_promoted |= master.promoted;
        let report = master.report(now);
        let seen = Seen {
            run_id: report.run_id.clone(),
            now_ms: now,
            durable: report.durable(),
            promoted: report.promoted && !old.ignore_promotion,
            counter: None,
        };
        let missing = if old.missing_is_fresh {
            Missing::Everywhere
        } else {
            missing
        };
        let grace_ms = u64::try_from(Self::own_grace(c).as_millis()).unwrap_or(u64::MAX);
        let found_none = master.data.record.is_none();
        let written = if old.durability_from_report {
            old_next(master.data.record.as_ref(), &seen, grace_ms, missing)
        } else {
            next(master.data.record.as_ref(), &seen, grace_ms, missing)
        };
        if let Some(record) = written {
            master.data.record = Some(record);
            master.changed(now);
        }
        let Some(record) = master.data.record.clone() else {
            return;
        };
        let sighting = Sighting {
            record,
            master_ms: now,
            at: self.at(now),
        };
        let disconnects = self.disconnects[c][m];
        self.clients[c].beliefs[m].checked(&report, Some(sighting), found_none, true, disconnects);
    }

    /// Whether client `c` counts a yes from master `m` now.
    fn admits(&self, c: usize, m: usize) -> bool {
        let belief = &self.clients[c].beliefs[m];
        let now = self.at(self.now);
        if self.old.uptime_only {
            // The old rule: verified, and either durable now or up (by its report) for the grace.
            if !belief.verified(self.disconnects[c][m]) {
                return false;
            }
            return belief.durable == Some(true)
                || belief
                    .started
                    .is_some_and(|s| now.saturating_duration_since(s) >= self.grace(c));
        }
        belief.admit(&self.rules(c), now, self.disconnects[c][m]).is_ok()
    }

    fn acquire(&mut self, c: usize) -> Result<(), TestCaseError> {
        if self.clients[c].hold.is_some() {
            return Ok(());
        }
        let now = self.now;
        let n = self.masters.len();
        let free = |m: &Master| m.data.key.is_none_or(|(_, expires)| expires <= now);
        let granted: Vec<usize> = (0..n)
            .filter(|m| free(&self.masters[*m]))
            .filter(|m| self.admits(c, *m))
            .collect();
        if granted.len() < quorum(n) {
            return Ok(());
        }
        let id = self.holds.len();
        for m in granted {
            let master = &mut self.masters[m];
            master.data.key = Some((id, now + Self::ttl(c)));
            master.changed(now);
        }
        let ttl = Self::ttl(c);
        let drift_ms = u64::try_from(
            drift(Duration::from_millis(ttl), 0.01)
                .unwrap_or_default()
                .as_millis(),
        )
        .unwrap_or(0);
        let hold = Hold {
            client: c,
            start: now,
            valid_until: now + ttl - drift_ms,
            released: None,
        };
        for other in &self.holds {
            let ends = other.released.unwrap_or(u64::MAX).min(other.valid_until);
            prop_assert!(
                ends <= hold.start,
                "two holders, clients {} and {}: {:?} and {:?} (masters {:?})",
                other.client,
                hold.client,
                other,
                hold,
                self.masters.iter().map(|m| &m.data).collect::<Vec<_>>()
            );
        }
        self.holds.push(hold);
        self.clients[c].hold = Some(id);
        Ok(())
    }

    fn release(&mut self, c: usize) {
        let Some(id) = self.clients[c].hold.take() else {
            return;
        };
        let now = self.now;
        self.holds[id].released = Some(now);
        for master in &mut self.masters {
            if master.data.key.is_some_and(|(k, _)| k == id) {
                master.data.key = None;
                master.changed(now);
            }
        }
    }

    fn reconnect_all(&mut self, m: usize) {
        for client in &mut self.disconnects {
            client[m] += 1;
        }
    }

    fn step(&mut self, op: Op) -> Result<(), TestCaseError> {
        let n = self.masters.len();
        let k = self.clients.len();
        let now = self.now;
        match op {
            Op::Tick(d) => self.now += d,
            Op::Check(c, m) => self.check(c % k, m % n, Missing::Alone),
            Op::Acquire(c) => self.acquire(c % k)?,
            Op::Release(c) => self.release(c % k),
            Op::NewClient(c) => {
                // Its hold, if any, runs on in another process that is gone: it stops acting.
                let c = c % k;
                self.release_silently(c);
                self.build(c);
            }
            Op::Crash(m) => {
                let master = &mut self.masters[m % n];
                if !master.durable {
                    // Its last writes are lost: the lock key; a check's record write is older
                    // than the loss window (see `Downgrade`).
                    master.data.key = None;
                }
                master.durable = master.file_durable;
                // The restart forgets the inherited history, once a check has seen it.
                master.promoted &= !master.seen_promoted;
                master.new_run(now);
                master.changed(now);
                self.reconnect_all(m % n);
            }
            Op::Downgrade(m) => {
                let m = m % n;
                self.masters[m].durable = false;
                // The refresh that sees it (a downgrade made after the last refresh, then a
                // crash before the next, is the window the docs leave out of model).
                self.check(0, m, Missing::Alone);
            }
            Op::Replace(m) => {
                let m = m % n;
                // No quorum system survives a majority losing its data at once: a replacement
                // that would leave a majority of masters without a record (none of them seen by
                // a client since it lost its data) is out of model.
                let without = self
                    .masters
                    .iter()
                    .enumerate()
                    .filter(|(i, o)| *i == m || o.data.record.is_none())
                    .count();
                if without >= quorum(n) {
                    return Ok(());
                }
                let master = &mut self.masters[m];
                master.data = Data::default();
                master.durable = true;
                master.file_durable = true;
                master.promoted = false;
                master.new_run(now);
                master.up_since = 0;
                master.changed(now);
                self.reconnect_all(m);
            }
            Op::Promote(m, lag) => {
                let m = m % n;
                let master = &mut self.masters[m];
                let then = now.saturating_sub(lag);
                let copy = master
                    .history
                    .iter()
                    .rev()
                    .find(|(t, _)| *t <= then)
                    .map(|(_, d)| d.clone())
                    .unwrap_or_default();
                master.data = copy;
                master.durable = true;
                master.file_durable = true;
                master.promoted = true;
                master.seen_promoted = false;
                master.new_run(now);
                master.up_since = 0;
                master.changed(now);
                self.reconnect_all(m);
            }
            Op::Cut(c, m) => self.disconnects[c % k][m % n] += 1,
            Op::LimitMemory(m) => {
                let m = m % n;
                self.masters[m].evicting = true;
                // Every client's refresh sees it before the master fills up and evicts (a limit
                // reached between a client's checks is the window the docs leave out of model).
                for c in 0..k {
                    self.check(c, m, Missing::Alone);
                }
            }
            Op::Evict(m) => {
                let master = &mut self.masters[m % n];
                if master.evicting && master.data.key.is_some() {
                    master.data.key = None;
                    master.changed(now);
                }
            }
        }
        Ok(())
    }

    fn release_silently(&mut self, c: usize) {
        if let Some(id) = self.clients[c].hold.take() {
            self.holds[id].released = Some(self.now);
        }
    }
}

/// The old rule for a restart: durable if the new incarnation reports `always`, whatever the old
/// one's history.
fn old_next(previous: Option<&Record>, seen: &Seen, grace_ms: u64, missing: Missing) -> Option<Record> {
    match previous {
        Some(p) if p.run_id != seen.run_id => {
            let mut record = next(previous, seen, grace_ms, missing)?;
            record.lost = seen.durable != Some(true) || seen.promoted;
            Some(record)
        }
        _ => next(previous, seen, grace_ms, missing),
    }
}

fn run(n: usize, clients: usize, old: Old, ops: &[Op]) -> Result<Model, TestCaseError> {
    let mut model = Model::new(n, clients, old);
    for op in ops {
        model.step(*op)?;
    }
    Ok(model)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    /// Through replacements, promotions, runtime downgrades and crashes, eviction and new clients,
    /// no two holders' validities overlap.
    #[test]
    fn exclusion_holds_through_operations_whatever_the_reports_say(
        n in prop_oneof![Just(3usize), Just(5)],
        clients in 2usize..5,
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        run(n, clients, Old::default(), &ops)?;
    }
}

/// How many of `cases` random sequences catch the model with `old` put back, and how many holds
/// the safe rules granted over the same sequences (the model is not idle).
fn caught(old: Old, cases: usize) -> (usize, usize) {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = proptest::collection::vec(op(), 50..200);
    let (mut found, mut holds) = (0, 0);
    for _ in 0..cases {
        let ops = strategy
            .new_tree(&mut runner)
            .expect("generate a sequence")
            .current();
        let safe = run(3, 3, Old::default(), &ops).expect("the rules hold");
        holds += safe.holds.len();
        if run(3, 3, old, &ops).is_err() {
            found += 1;
        }
    }
    (found, holds)
}

/// The steps of a scenario on five masters: `before`; then A (client 0), cut off from masters 3
/// and 4 for a moment, takes the lock on 0, 1 and 2; then `change` happens to masters 0 and 1 (a
/// minority) while A's validity lasts; then B (client 1), built after the change, checks every
/// master and, `wait` ms later, tries.
fn scenario(before: &[Op], change: &[Op], wait: u64) -> Vec<Op> {
    let mut ops = before.to_vec();
    ops.extend([
        Op::Tick(1),
        Op::Cut(0, 3),
        Op::Cut(0, 4),
        Op::Acquire(0),
        Op::Tick(1),
    ]);
    ops.extend_from_slice(change);
    ops.extend([Op::Tick(1), Op::NewClient(1), Op::Tick(wait), Op::Acquire(1)]);
    ops
}

/// Each old rule is caught by the steps it was blind to, and the rules as they are hold through
/// them; the random sequences catch it too now and then (counts printed, for coverage).
fn control(old: Old, ops: &[Op], what: &str) {
    assert!(
        run(5, 2, Old::default(), ops).is_ok(),
        "{what}: the rules as they are let B in"
    );
    assert!(
        run(5, 2, old, ops).is_err(),
        "{what}: the old rule was not caught"
    );
    let (found, holds) = caught(old, 200);
    eprintln!("{what}: the old rule caught in {found} of 200 random sequences ({holds} holds)");
}

#[test]
fn the_old_uptime_rule_is_caught() {
    let old = Old {
        uptime_only: true,
        ..Old::default()
    };
    let ops = scenario(&[], &[Op::Replace(0), Op::Replace(1)], 0);
    control(old, &ops, "replaced, long uptime");
    let (_, holds) = caught(Old::default(), 200);
    assert!(holds > 500, "the random sequences granted only {holds} holds");
}

#[test]
fn the_old_durability_rule_is_caught() {
    let old = Old {
        durability_from_report: true,
        ..Old::default()
    };
    // Downgraded and seen so before A's hold, then crashed during it, back reporting `always`.
    let before = [Op::Downgrade(0), Op::Downgrade(1)];
    control(
        old,
        &scenario(&before, &[Op::Crash(0), Op::Crash(1)], 0),
        "downgraded, then crashed",
    );
}

#[test]
fn an_ignored_promotion_is_caught() {
    let old = Old {
        ignore_promotion: true,
        ..Old::default()
    };
    let ops = scenario(&[], &[Op::Promote(0, 2), Op::Promote(1, 2)], 0);
    control(old, &ops, "promoted lagging replicas");
}

#[test]
fn a_missing_record_taken_for_a_fresh_master_is_caught() {
    let old = Old {
        missing_is_fresh: true,
        ..Old::default()
    };
    let ops = scenario(&[], &[Op::Replace(0), Op::Replace(1)], 0);
    control(old, &ops, "replaced, no record");
}

#[test]
fn a_counted_evicting_master_is_caught() {
    let old = Old {
        count_evicting: true,
        ..Old::default()
    };
    // The limit comes after A's hold (A counted them without it), before the eviction.
    let change = [Op::LimitMemory(0), Op::LimitMemory(1), Op::Evict(0), Op::Evict(1)];
    control(old, &scenario(&[], &change, 0), "evicting counted");
}

/// A client that waits out only its own grace, shorter than the TTL another client declared in
/// the records, is caught: A (client 0, four times the others' TTL) holds on three of five
/// masters, two of them are replaced, and B, whose own grace is a quarter of A's, admits them once
/// its own grace has passed while A's lock is still valid.
#[test]
fn a_client_ignoring_the_graces_others_declared_is_caught() {
    let old = Old {
        own_grace_only: true,
        ..Old::default()
    };
    let ops = scenario(&[], &[Op::Replace(0), Op::Replace(1)], 2 * TTL);
    control(old, &ops, "own grace only");
}

/// The refusals the model's masters give name what the client believes, not the truth.
#[test]
fn a_replacement_is_refused_with_the_replaced_reason() {
    let mut model = Model::new(3, 2, Old::default());
    let _ = model.step(Op::Acquire(0));
    let _ = model.step(Op::Replace(1));
    model.check(1, 1, Missing::Alone);
    let now = model.at(model.now);
    let verdict = model.clients[1].beliefs[1].admit(&model.rules(1), now, model.disconnects[1][1]);
    assert!(
        matches!(verdict, Err(NodeErrorKind::Replaced { .. })),
        "{verdict:?}"
    );
}
