//! `quorlock status KEY`: each master's view of a lock, and whether one token holds a majority
//! (`--permits P` and `--rw` show a semaphore or a read-write lock, see `status_kinds`).
//!
//! For operators: which masters answer, which token each holds and for how much longer, and the
//! verdict the lock's clients would reach. A read-only snapshot; it never changes the lock. With
//! `--json`, the state goes into the invocation's report (see `report`).

use std::fmt::Write as _;
use std::time::Duration;

use quorlock::{Inspection, MasterState, NodeErrorKind};
use serde_json::{json, Value};

use crate::args::StatusArgs;
use crate::connect::Masters;
use crate::duration::show;
use crate::exit::{Failure, OK, UNAVAILABLE, USAGE};
use crate::report::Report;
use crate::status_kinds;

/// Prints the lock's state as a table, or fills the report for `--json`, and returns 0, or 69
/// when fewer than a majority of the masters answered (the state printed is then partial, and no
/// lock can be taken).
///
/// # Errors
/// A configuration error, or an empty key.
pub async fn status(args: StatusArgs, report: &mut Report) -> Result<u8, Failure> {
    let masters = Masters {
        args: args.masters.clone(),
        restart_grace: None,
        lock_delay: None,
    };
    let locks = masters.connect(Duration::ZERO).await?;
    let usage = |e: quorlock::InputError| Failure::new(USAGE, e.to_string());
    if let Some(permits) = args.permits {
        let inspection = locks.inspect_semaphore(&args.key, permits).await.map_err(usage)?;
        status_kinds::semaphore(&inspection, args.json, report);
        let reachable = inspection.slots.first().map_or(0, Inspection::reachable);
        return Ok(if reachable < locks.quorum() {
            UNAVAILABLE
        } else {
            OK
        });
    }
    if args.rw {
        let inspection = locks.inspect_rwlock(&args.key).await.map_err(usage)?;
        status_kinds::rwlock(&inspection, args.json, report);
        let reachable = inspection.writer.reachable();
        return Ok(if reachable < locks.quorum() {
            UNAVAILABLE
        } else {
            OK
        });
    }
    let inspection = locks
        .inspect(&args.key)
        .await
        .map_err(|e| Failure::new(USAGE, e.to_string()))?;
    if args.json {
        if let Value::Object(fields) = to_json(&inspection) {
            for (name, value) in fields {
                report.set(&name, value);
            }
        }
    } else {
        print!("{}", to_table(&inspection));
    }
    Ok(if inspection.reachable() < inspection.quorum {
        UNAVAILABLE
    } else {
        OK
    })
}

/// The headline verdict.
fn verdict(i: &Inspection) -> String {
    let n = i.masters.len();
    let reachable = i.reachable();
    let mut line = match (i.holder(), i.leading()) {
        (Some(token), _) => {
            let count = i.masters.iter().filter(|m| m.token() == Some(token)).count();
            format!(
                "lock {:?} is held: token {token} on {count} of {n} masters ({} needed)",
                i.resource, i.quorum
            )
        }
        (None, Some((token, count))) => format!(
            "lock {:?} is not held: no token on a majority (at most {token} on {count} of {n}, {} needed)",
            i.resource, i.quorum
        ),
        (None, None) => {
            // A master that answered with an error (a key of another type, a garbage reply) did
            // not say the lock is free there.
            let failed = i
                .masters
                .iter()
                .filter(|m| matches!(&m.state, Err(kind) if !kind.is_unreachable()))
                .count();
            if failed == 0 {
                format!("lock {:?} is free on every master that answered", i.resource)
            } else {
                let free = i.masters.iter().filter(|m| matches!(m.state, Ok(None))).count();
                format!(
                    "lock {:?} is not held: free on {free} of {n} masters, {failed} answered with an error",
                    i.resource
                )
            }
        }
    };
    let _ = write!(line, "; {reachable} of {n} masters answered");
    if reachable < i.quorum {
        line.push_str(", fewer than a majority: no lock can be taken now");
    }
    line
}

/// The human-readable table.
fn to_table(i: &Inspection) -> String {
    let mut out = verdict(i);
    out.push('\n');
    let width = i.masters.iter().map(|m| m.addr.len()).max().unwrap_or(0).max(7);
    let _ = writeln!(
        out,
        "  {:<6}  {:<width$}  {:<11}  {:<32}  ttl",
        "master", "address", "state", "token"
    );
    for m in &i.masters {
        let (state, token, ttl) = match &m.state {
            Ok(Some(h)) => (
                "held",
                h.token.as_str(),
                h.ttl.map_or_else(|| "no expiry".to_owned(), show),
            ),
            Ok(None) => ("free", "-", "-".to_owned()),
            Err(kind) if kind.is_unreachable() => ("unreachable", "-", one_line(kind)),
            Err(kind) => ("error", "-", one_line(kind)),
        };
        let _ = writeln!(
            out,
            "  {:<6}  {:<width$}  {state:<11}  {token:<32}  {ttl}",
            m.node, m.addr
        );
    }
    out
}

/// An error on one line of the table (a parse error can quote a multi-line reply).
fn one_line(kind: &NodeErrorKind) -> String {
    kind.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The machine-readable form: the fields `status` adds to the report (`stored_key` is the key on
/// the masters, with `--key-prefix`).
fn to_json(i: &Inspection) -> Value {
    let nodes: Vec<Value> = i.masters.iter().map(node_json).collect();
    json!({
        "resource": i.resource,
        "stored_key": i.key,
        "masters": i.masters.len(),
        "quorum": i.quorum,
        "reachable": i.reachable(),
        "held": i.is_held(),
        "holder": i.holder(),
        "nodes": nodes,
    })
}

fn node_json(m: &MasterState) -> Value {
    let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let (token, pttl, error) = match &m.state {
        Ok(Some(h)) => (Some(h.token.as_str()), h.ttl.map(millis), None),
        Ok(None) => (None, None, None),
        Err(kind) => (None, None, Some(kind.to_string())),
    };
    json!({
        "node": m.node,
        "addr": m.addr,
        "reachable": m.is_reachable(),
        "token": token,
        "pttl_ms": pttl,
        "error": error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quorlock::Holding;

    fn sample() -> Inspection {
        let held = |node: usize, token: &str| {
            MasterState::new(
                node,
                format!("127.0.0.1:700{node}"),
                Ok(Some(Holding::new(token, Some(Duration::from_millis(2500))))),
            )
        };
        let masters = vec![
            held(0, "abc"),
            MasterState::new(1, "127.0.0.1:7001", Err(NodeErrorKind::Timeout)),
            held(2, "abc"),
        ];
        Inspection::new("k", "k", 2, masters)
    }

    #[test]
    fn json_names_the_holder_and_each_master() {
        let v = to_json(&sample());
        assert_eq!(v["held"], true);
        assert_eq!(v["holder"], "abc");
        assert_eq!(v["reachable"], 2);
        assert_eq!(v["nodes"][1]["reachable"], false);
        assert_eq!(v["nodes"][1]["error"], "timed out");
        assert_eq!(v["nodes"][2]["pttl_ms"], 2500);
    }

    #[test]
    fn table_has_a_verdict_and_one_row_per_master() {
        let table = to_table(&sample());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 5, "{table}");
        assert!(lines[0].contains("is held: token abc on 2 of 3"), "{table}");
        assert!(lines[3].contains("unreachable"), "{table}");
    }

    #[test]
    fn a_master_that_answered_an_error_is_not_counted_free() {
        let mut i = sample();
        i.masters[0].state = Ok(None);
        i.masters[2].state = Err(NodeErrorKind::WrongType);
        let line = verdict(&i);
        assert!(
            line.contains("is not held: free on 1 of 3 masters, 1 answered with an error"),
            "{line}"
        );
        i.masters[2].state = Ok(None);
        assert!(verdict(&i).contains("is free on every master that answered"));
        i.masters[2].state = Err(NodeErrorKind::Protocol("line one\nline two".into()));
        assert_eq!(to_table(&i).lines().count(), 5, "{}", to_table(&i));
    }
}
