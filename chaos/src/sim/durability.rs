//! What a master's disk holds when it crashes: everything with `appendfsync always`, nothing
//! without an AOF, and with `everysec` what it held a moment before (the write-back lag, up to a
//! second: the last writes are lost, and a fencing counter can come back lower than it was).
//!
//! One case is kept out of the runs on purpose, because the library's docs put it out of model: a
//! master whose persistence was lowered at runtime (`CONFIG SET appendfsync everysec`) and that
//! crashes before a check of its current incarnation recorded the lowering on its disk (the
//! record's `durable` field). Its next incarnation reads its configuration file (`always`), its
//! record says it persisted every write, and nothing a client can read shows the loss. Such a
//! crash loses nothing here (which a real one may also do), and the run counts it.

use super::master::Snapshot;

/// What survives a crash.
#[derive(Debug, Clone)]
pub enum Survival {
    /// Every acknowledged write.
    All,
    /// Nothing.
    Nothing,
    /// What the disk held a moment before the crash.
    Before(Snapshot),
}

/// What the disk held shortly before the crash, as the world took it, and the master's record in
/// it (its `run_id` and `durable` fields, if it had one).
#[derive(Debug, Clone)]
pub struct Before {
    /// The data then.
    pub snapshot: Snapshot,
    /// The `run_id` of the master then.
    pub run_id: String,
    /// The record's `run_id` field then.
    pub record_run_id: Option<Vec<u8>>,
    /// The record's `durable` field then.
    pub record_durable: Option<Vec<u8>>,
}

/// What one crash keeps, and whether it kept everything only because losing anything would have
/// been out of model.
#[derive(Debug, Clone)]
pub struct Judged {
    /// What survives.
    pub survival: Survival,
    /// A lowered master whose lowering no record on its disk shows: kept whole.
    pub spared: bool,
}

/// What survives the crash of a master whose AOF is on or not (`aof`), whose `appendfsync` is
/// `appendfsync` now, whose persistence was lowered at runtime in this incarnation or not
/// (`lowered`), whose `run_id` is `run_id`, and whose disk held `before` a moment ago.
pub fn at_crash(aof: bool, appendfsync: &str, lowered: bool, run_id: &str, before: Option<Before>) -> Judged {
    let judged = |survival| Judged {
        survival,
        spared: false,
    };
    if !aof {
        return judged(Survival::Nothing);
    }
    if appendfsync == "always" {
        return judged(Survival::All);
    }
    // A moment ago it was another incarnation (it restarted or was replaced since): this one's
    // disk holds at most what it started with; take nothing, which a non-durable master may lose.
    let Some(before) = before.filter(|b| b.run_id == run_id) else {
        return judged(Survival::Nothing);
    };
    let recorded = before.record_run_id.as_deref() == Some(run_id.as_bytes())
        && before.record_durable.as_deref() == Some(b"0");
    if lowered && !recorded {
        return Judged {
            survival: Survival::All,
            spared: true,
        };
    }
    judged(Survival::Before(before.snapshot))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::master::{Flavor, MasterConfig, Persistence, SimMaster};

    fn before(run_id: &str, record: Option<(&str, &str)>) -> Before {
        let m = SimMaster::new(MasterConfig::new(Flavor::Redis70, Persistence::AofEverysec, 1), 0)
            .expect("a master");
        Before {
            snapshot: m.snapshot(),
            run_id: run_id.into(),
            record_run_id: record.map(|r| r.0.as_bytes().to_vec()),
            record_durable: record.map(|r| r.1.as_bytes().to_vec()),
        }
    }

    #[test]
    fn a_lowered_master_loses_writes_only_once_its_record_shows_it() {
        let all = |j: &Judged| matches!(j.survival, Survival::All);
        assert!(matches!(
            at_crash(false, "always", false, "a", None).survival,
            Survival::Nothing
        ));
        assert!(all(&at_crash(true, "always", true, "a", None)));
        // everysec from the start: the last second is lost.
        let j = at_crash(true, "everysec", false, "a", Some(before("a", Some(("a", "0")))));
        assert!(matches!(j.survival, Survival::Before(_)) && !j.spared);
        // Lowered at runtime, and no check recorded it on the disk: kept whole, and counted.
        let j = at_crash(true, "everysec", true, "a", Some(before("a", Some(("a", "1")))));
        assert!(all(&j) && j.spared);
        let j = at_crash(true, "everysec", true, "a", Some(before("a", Some(("old", "0")))));
        assert!(all(&j) && j.spared);
        // Recorded: the loss is in model.
        let j = at_crash(true, "everysec", true, "a", Some(before("a", Some(("a", "0")))));
        assert!(matches!(j.survival, Survival::Before(_)));
        // The moment before belonged to another incarnation: nothing.
        let j = at_crash(true, "everysec", false, "b", Some(before("a", Some(("a", "0")))));
        assert!(matches!(j.survival, Survival::Nothing));
    }
}
