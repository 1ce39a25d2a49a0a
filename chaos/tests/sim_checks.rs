//! The simulation's checks on hand-made histories: each must flag the violation it exists for,
//! and stay quiet on a history that keeps the rule, so a clean simulated run means something.

use std::collections::BTreeMap;
use std::time::Duration;

use quorlock_chaos::sim::checks;
use quorlock_chaos::sim::workload::{Kind, SimRecord};
use quorlock_chaos::FaultWindow;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn hold(client: usize, kind: Kind, resource: &str, from: u64, to: u64) -> SimRecord {
    SimRecord {
        client,
        kind,
        resources: vec![resource.to_owned()],
        held: vec![resource.to_owned()],
        invoked: ms(from),
        stamped: ms(from),
        wait: ms(1_000),
        ttl: ms(1_000),
        acquired: Some(ms(from)),
        validity_end: Some(ms(from + 900)),
        releasing: Some(ms(to)),
        ended: ms(to),
        released_ok: true,
        fencing: None,
        error: None,
        written: Vec::new(),
        stale: 0,
        paused: false,
        reentered: false,
        permit: None,
        kept_alive: false,
        extended: None,
        lost: None,
    }
}

fn permit(client: usize, slot: u32, from: u64, to: u64) -> SimRecord {
    let mut r = hold(client, Kind::Semaphore, "semaphore:0", from, to);
    r.permit = Some(slot);
    r
}

#[test]
fn overlapping_holds_of_two_clients_are_flagged_and_disjoint_ones_are_not() {
    let ok = [
        hold(0, Kind::Plain, "plain:0", 0, 100),
        hold(1, Kind::Plain, "plain:0", 100, 200),
    ];
    assert!(checks::exclusion(&ok).is_empty());
    let bad = [
        hold(0, Kind::Plain, "plain:0", 0, 100),
        hold(1, Kind::Plain, "plain:0", 50, 200),
    ];
    assert_eq!(checks::exclusion(&bad).len(), 1);
    // A hold's safe interval ends with its validity, even if it released later.
    let mut late = hold(0, Kind::Plain, "plain:0", 0, 5_000);
    late.releasing = Some(ms(4_000));
    late.validity_end = Some(ms(900));
    assert!(checks::exclusion(&[late, hold(1, Kind::Plain, "plain:0", 950, 1_000)]).is_empty());
}

#[test]
fn a_hold_ends_at_its_loss_signal_and_a_renewed_one_at_its_last_validity() {
    // Kept alive past its TTL: the validity the guard last confirmed counts.
    let mut kept = hold(0, Kind::Plain, "plain:0", 0, 3_000);
    kept.kept_alive = true;
    kept.validity_end = Some(ms(3_200));
    let after = hold(1, Kind::Plain, "plain:0", 2_000, 2_100);
    assert_eq!(checks::exclusion(&[kept.clone(), after.clone()]).len(), 1);
    // The watchdog said it was lost at 1.5 s: the hold is over there, whatever came later.
    kept.lost = Some(ms(1_500));
    assert!(checks::exclusion(&[kept.clone(), after.clone()]).is_empty());
    let early = hold(1, Kind::Plain, "plain:0", 1_400, 1_450);
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
    assert!(found.iter().any(|v| v.contains("3 holders")), "{found:?}");
    assert!(found.iter().any(|v| v.contains("slot 0")), "{found:?}");
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
        hold(0, Kind::Read, "rw:0", 0, 500),
        hold(1, Kind::Read, "rw:0", 100, 600),
    ];
    assert!(checks::readers_and_writers(&readers).is_empty());
    assert!(checks::exclusion(&readers).is_empty());
    let mut with_writer = readers.to_vec();
    with_writer.push(hold(2, Kind::Write, "rw:0", 550, 700));
    assert_eq!(checks::readers_and_writers(&with_writer).len(), 1);
    let after = [readers[0].clone(), hold(2, Kind::Write, "rw:0", 500, 700)];
    assert!(checks::readers_and_writers(&after).is_empty());
    // On another resource a writer meets nobody.
    assert!(
        checks::readers_and_writers(&[readers[0].clone(), hold(2, Kind::Write, "rw:1", 0, 700)]).is_empty()
    );
    let writers = [
        hold(0, Kind::Write, "rw:0", 0, 500),
        hold(1, Kind::Write, "rw:0", 400, 600),
    ];
    assert_eq!(checks::exclusion(&writers).len(), 1);
}

#[test]
fn a_multi_hold_missing_a_resource_is_flagged() {
    let mut multi = hold(0, Kind::Multi, "multi:0", 0, 100);
    multi.resources.push("multi:1".into());
    assert_eq!(checks::all_or_nothing(std::slice::from_ref(&multi)).len(), 1);
    multi.held.push("multi:1".into());
    assert!(checks::all_or_nothing(&[multi]).is_empty());
}

#[test]
fn fencing_tokens_going_backwards_or_repeating_are_flagged() {
    let mut a = hold(0, Kind::Fenced, "fenced:0", 0, 100);
    let mut b = hold(1, Kind::Fenced, "fenced:0", 200, 300);
    a.fencing = Some(5);
    b.fencing = Some(6);
    assert!(checks::fencing(&[a.clone(), b.clone()]).is_empty());
    b.fencing = Some(4);
    assert_eq!(checks::fencing(&[a.clone(), b.clone()]).len(), 1);
    b.fencing = Some(5);
    assert!(!checks::fencing(&[a, b]).is_empty());
}

#[test]
fn a_later_ticket_served_first_is_flagged_only_without_faults() {
    let mut early = hold(0, Kind::Fair, "fair:0", 0, 900);
    early.acquired = Some(ms(500));
    let late = hold(1, Kind::Fair, "fair:0", 100, 400);
    let records = [early, late];
    assert_eq!(checks::fair_order(&records, &[]).len(), 1);
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
    let mut failed = hold(0, Kind::Plain, "plain:1", 10_000, 11_000);
    failed.acquired = None;
    failed.error = Some("timed out".into());
    assert_eq!(checks::liveness(std::slice::from_ref(&failed), &[]).len(), 1);
    let other = hold(1, Kind::Plain, "plain:1", 10_500, 10_600);
    assert!(checks::liveness(&[failed, other], &[]).is_empty());
}

#[test]
fn lost_updates_count_acknowledged_writes_the_store_does_not_show() {
    let writes = BTreeMap::from([("w:a".to_owned(), 5), ("w:b".to_owned(), 2)]);
    let finals = BTreeMap::from([("w:a".to_owned(), 3), ("w:b".to_owned(), 2)]);
    assert_eq!(checks::lost_updates(&writes, &finals), 2);
    assert_eq!(checks::lost_updates(&writes, &writes), 0);
}
