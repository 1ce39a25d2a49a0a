//! The simulation's checks on hand-made histories: each must flag the violation it exists for,
//! and stay quiet on a history that keeps the rule, so a clean simulated run means something.

use std::collections::BTreeMap;
use std::time::Duration;

use quorlock_chaos::sim::checks::{self, Check};
use quorlock_chaos::sim::record::{CallKind, SimRecord};
use quorlock_chaos::FaultWindow;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A hold of `resources` (several for multi) by `client` from `from` ms, valid for 900 ms,
/// released at `to` ms.
fn holding(client: usize, kind: CallKind, resources: &[&str], from: u64, to: u64) -> SimRecord {
    let asked: Vec<String> = resources.iter().map(|&r| r.to_owned()).collect();
    let mut r = SimRecord::invoked(client, kind, &asked, ms(from), ms(from), ms(1_000), ms(1_000));
    r.held = asked;
    r.lock.acquired = Some(ms(from));
    r.lock.validity_end = Some(ms(from + 900));
    r.lock.released = Some(ms(to));
    r.ended = ms(to);
    r.released_ok = true;
    r
}

fn hold(client: usize, kind: CallKind, resource: &str, from: u64, to: u64) -> SimRecord {
    holding(client, kind, &[resource], from, to)
}

fn permit(client: usize, slot: u32, from: u64, to: u64) -> SimRecord {
    let mut r = hold(client, CallKind::Semaphore, "semaphore:0", from, to);
    r.permit = Some(slot);
    r
}

#[test]
fn overlapping_holds_of_two_clients_are_flagged_and_disjoint_ones_are_not() {
    let ok = [
        hold(0, CallKind::Plain, "plain:0", 0, 100),
        hold(1, CallKind::Plain, "plain:0", 100, 200),
    ];
    assert!(checks::exclusion(&ok).is_empty());
    let bad = [
        hold(0, CallKind::Plain, "plain:0", 0, 100),
        hold(1, CallKind::Plain, "plain:0", 50, 200),
    ];
    let found = checks::exclusion(&bad);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].check, Check::Exclusion);
    assert_eq!(
        found[0].text,
        "mutual exclusion: plain:0 held by c0 from 0ns and by c1 from 50ms, 50ms of overlap"
    );
    // A hold's safe interval ends with its validity, even if it released later.
    let mut late = hold(0, CallKind::Plain, "plain:0", 0, 5_000);
    late.lock.released = Some(ms(4_000));
    late.lock.validity_end = Some(ms(900));
    assert!(checks::exclusion(&[late, hold(1, CallKind::Plain, "plain:0", 950, 1_000)]).is_empty());
}

#[test]
fn a_hold_ends_at_its_loss_signal_and_a_renewed_one_at_its_last_validity() {
    // Kept alive past its TTL: the validity the guard last confirmed counts.
    let mut kept = hold(0, CallKind::Plain, "plain:0", 0, 3_000);
    kept.kept_alive = true;
    kept.lock.validity_end = Some(ms(3_200));
    let after = hold(1, CallKind::Plain, "plain:0", 2_000, 2_100);
    assert_eq!(checks::exclusion(&[kept.clone(), after.clone()]).len(), 1);
    // The watchdog said it was lost at 1.5 s: the hold is over there, whatever came later.
    kept.lost = Some(ms(1_500));
    assert!(checks::exclusion(&[kept.clone(), after.clone()]).is_empty());
    let early = hold(1, CallKind::Plain, "plain:0", 1_400, 1_450);
    assert_eq!(checks::exclusion(&[kept, early]).len(), 1);
}

#[test]
fn more_semaphore_holders_than_permits_or_two_on_one_slot_are_flagged() {
    let two = [permit(0, 0, 0, 500), permit(1, 1, 100, 600)];
    assert!(checks::semaphore(&two).is_empty());
    // Permits do not count against the exclusion of the other kinds.
    assert!(checks::exclusion(&two).is_empty());
    let three = [
        permit(0, 0, 0, 500),
        permit(1, 1, 100, 600),
        permit(2, 0, 200, 300),
    ];
    let found = checks::semaphore(&three);
    assert!(found.iter().all(|v| v.check == Check::Semaphore), "{found:?}");
    assert!(found.iter().any(|v| v.text.contains("3 holders")), "{found:?}");
    assert!(found.iter().any(|v| v.text.contains("slot 0")), "{found:?}");
    // Two on one slot, below the permits: the slot check alone sees it.
    let shared = [permit(0, 1, 0, 500), permit(1, 1, 100, 600)];
    assert_eq!(checks::semaphore(&shared).len(), 1);
    // One after the other on a slot is fine.
    assert!(checks::semaphore(&[
        permit(0, 1, 0, 100),
        permit(1, 1, 100, 600),
        permit(2, 0, 50, 700)
    ])
    .is_empty());
}

#[test]
fn a_reader_beside_a_writer_or_two_writers_are_flagged_and_readers_together_are_not() {
    let readers = [
        hold(0, CallKind::Read, "rw:0", 0, 500),
        hold(1, CallKind::Read, "rw:0", 100, 600),
    ];
    assert!(checks::readers_and_writers(&readers).is_empty());
    assert!(checks::exclusion(&readers).is_empty());
    let mut with_writer = readers.to_vec();
    with_writer.push(hold(2, CallKind::Write, "rw:0", 550, 700));
    assert_eq!(checks::readers_and_writers(&with_writer).len(), 1);
    let after = [readers[0].clone(), hold(2, CallKind::Write, "rw:0", 500, 700)];
    assert!(checks::readers_and_writers(&after).is_empty());
    // On another resource a writer meets nobody.
    assert!(
        checks::readers_and_writers(&[readers[0].clone(), hold(2, CallKind::Write, "rw:1", 0, 700)])
            .is_empty()
    );
    let writers = [
        hold(0, CallKind::Write, "rw:0", 0, 500),
        hold(1, CallKind::Write, "rw:0", 400, 600),
    ];
    assert_eq!(checks::exclusion(&writers).len(), 1);
}

#[test]
fn a_multi_hold_missing_a_resource_is_flagged() {
    let mut multi = holding(0, CallKind::Multi, &["multi:0", "multi:1"], 0, 100);
    multi.held = vec!["multi:0".into()];
    let found = checks::all_or_nothing(std::slice::from_ref(&multi));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].check, Check::AllOrNothing);
    assert_eq!(
        found[0].text,
        "multi: c0 asked for [\"multi:0\", \"multi:1\"] and holds [\"multi:0\"]"
    );
    multi.held.push("multi:1".into());
    assert!(checks::all_or_nothing(&[multi]).is_empty());
}

#[test]
fn fencing_tokens_going_backwards_or_repeating_are_flagged() {
    let mut a = hold(0, CallKind::Fenced, "fenced:0", 0, 100);
    let mut b = hold(1, CallKind::Fenced, "fenced:0", 200, 300);
    a.lock.fencing = Some(5);
    b.lock.fencing = Some(6);
    assert!(checks::fencing(&[a.clone(), b.clone()]).is_empty());
    b.lock.fencing = Some(4);
    let found = checks::fencing(&[a.clone(), b.clone()]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].check, Check::Fencing);
    b.lock.fencing = Some(5);
    assert!(!checks::fencing(&[a, b]).is_empty());
}

#[test]
fn a_later_ticket_served_first_is_flagged_only_without_faults() {
    let mut early = hold(0, CallKind::Fair, "fair:0", 0, 900);
    early.lock.acquired = Some(ms(500));
    let late = hold(1, CallKind::Fair, "fair:0", 100, 400);
    let records = [early, late];
    let found = checks::fair_order(&records, &[]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].check, Check::FairOrder);
    let fault = FaultWindow {
        start: ms(50),
        end: ms(60),
        label: "partition".into(),
    };
    assert!(checks::fair_order(&records, &[fault]).is_empty());
    // Called later in true time but earlier by its own clock (a slow client's): its ticket is
    // the earlier one, and serving it first is fair.
    let [mut early, mut late] = records;
    early.stamped = ms(2);
    late.stamped = ms(0);
    assert!(checks::fair_order(&[early, late], &[]).is_empty());
}

#[test]
fn a_failed_acquire_with_nothing_in_its_way_is_a_liveness_violation() {
    let mut failed = hold(0, CallKind::Plain, "plain:1", 10_000, 11_000);
    failed.lock.acquired = None;
    failed.lock.error = Some("timed out".into());
    let found = checks::liveness(std::slice::from_ref(&failed), &[]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].check, Check::Liveness);
    assert_eq!(
        found[0].text,
        "liveness: c0 could not take [\"plain:1\"] (wait 1s) at 10s with every master reachable and no other caller: timed out"
    );
    let other = hold(1, CallKind::Plain, "plain:1", 10_500, 10_600);
    assert!(checks::liveness(&[failed, other], &[]).is_empty());
}

#[test]
fn lost_updates_count_acknowledged_writes_the_store_does_not_show() {
    let writes = BTreeMap::from([("w:a".to_owned(), 5), ("w:b".to_owned(), 2)]);
    let finals = BTreeMap::from([("w:a".to_owned(), 3), ("w:b".to_owned(), 2)]);
    assert_eq!(checks::lost_updates(&writes, &finals), 2);
    assert_eq!(checks::lost_updates(&writes, &writes), 0);
}

/// Every check's words, pinned: reports and the replay lines of failing seeds show them, and each
/// finding names the check that made it.
#[test]
fn each_finding_names_its_check_in_words_that_do_not_change() {
    let mut a = hold(0, CallKind::Fenced, "fenced:0", 0, 100);
    let mut b = hold(1, CallKind::Fenced, "fenced:0", 200, 300);
    a.lock.fencing = Some(5);
    b.lock.fencing = Some(5);
    let mut early = hold(0, CallKind::Fair, "fair:0", 0, 900);
    early.lock.acquired = Some(ms(500));
    let late = hold(1, CallKind::Fair, "fair:0", 100, 400);
    let three = [
        permit(0, 0, 0, 500),
        permit(1, 1, 100, 600),
        permit(2, 0, 200, 300),
    ];
    let rw = [
        hold(0, CallKind::Read, "rw:0", 0, 500),
        hold(2, CallKind::Write, "rw:0", 450, 700),
    ];
    let found: Vec<(Check, String)> = [
        checks::fencing(&[a, b]),
        checks::fair_order(&[early, late], &[]),
        checks::semaphore(&three),
        checks::readers_and_writers(&rw),
    ]
    .concat()
    .into_iter()
    .map(|f| (f.check, f.text))
    .collect();
    let expected = [
        (
            Check::Fencing,
            "fencing: fenced:0 token 5 (c1 at 200ms) after token 5 (c0) had ended",
        ),
        (Check::Fencing, "fencing: token Some(5) handed to c0 and c1 on fenced:0"),
        (
            Check::FairOrder,
            "fair: fair:0 granted to c1 (called at 100ms) at 100ms while c0 (called earlier, at 0ns) waited",
        ),
        (
            Check::Semaphore,
            "semaphore: semaphore:0 had 3 holders at 200ms (c0 from 0ns, c1 from 100ms, c2 from 200ms), above its 2 permits",
        ),
        (
            Check::Semaphore,
            "semaphore: semaphore:0 slot 0 held by c0 from 0ns and by c2 from 200ms, 100ms of overlap",
        ),
        (
            Check::ReadWrite,
            "read-write: rw:0 written by c2 from 450ms while read by c0 from 0ns, 50ms of overlap",
        ),
    ];
    let expected: Vec<(Check, String)> = expected.into_iter().map(|(c, t)| (c, t.to_owned())).collect();
    assert_eq!(found, expected);
}
