//! `quorlock status KEY --permits P` and `quorlock status KEY --rw`: a semaphore's permits held and
//! free, and a read-write lock's writer, readers and waiting writers.
//!
//! Kept apart from `status.rs`, which shows one lock master by master: these show what a majority
//! agrees on for each part of the kind, one line each. With `--json`, the same goes into the report.

use std::fmt::Write as _;

use quorlock::{RwInspection, SemaphoreInspection};
use serde_json::json;

use crate::report::Report;

/// Prints or reports a semaphore's state.
pub fn semaphore(i: &SemaphoreInspection, json: bool, report: &mut Report) {
    if json {
        report.set("resource", i.resource.as_str());
        report.set("permits", i.permits());
        report.set("held", i.held());
        report.set("free", i.free());
        let slots: Vec<_> = i
            .slots
            .iter()
            .enumerate()
            .map(|(slot, s)| json!({"slot": slot, "holder": s.holder(), "reachable": s.reachable()}))
            .collect();
        report.set("slots", slots);
        return;
    }
    let mut out = format!(
        "semaphore {:?}: {} of {} permits held, {} free\n",
        i.resource,
        i.held(),
        i.permits(),
        i.free()
    );
    for (slot, s) in i.slots.iter().enumerate() {
        let _ = match s.holder() {
            Some(token) => writeln!(out, "  slot {slot}: held by {token}"),
            None => writeln!(out, "  slot {slot}: free"),
        };
    }
    print!("{out}");
}

/// Prints or reports a read-write lock's state.
pub fn rwlock(i: &RwInspection, json: bool, report: &mut Report) {
    let readers = i.readers();
    if json {
        report.set("resource", i.resource.as_str());
        report.set("writer", i.writer());
        report.set("readers", json!(readers));
        report.set("writers_waiting_on", i.writers_waiting());
        return;
    }
    let mut out = match i.writer() {
        Some(token) => format!("read-write lock {:?}: written by {token}\n", i.resource),
        None if readers.is_empty() => format!("read-write lock {:?}: free\n", i.resource),
        None => format!(
            "read-write lock {:?}: read by {} holder(s)\n",
            i.resource,
            readers.len()
        ),
    };
    for token in &readers {
        let _ = writeln!(out, "  reader {token}");
    }
    let waiting = i.writers_waiting();
    if waiting > 0 {
        let _ = writeln!(
            out,
            "  a writer waits on {waiting} of {} masters (new readers wait behind it where that is a majority)",
            i.readers.len()
        );
    }
    print!("{out}");
}
