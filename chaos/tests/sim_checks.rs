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
    }
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
