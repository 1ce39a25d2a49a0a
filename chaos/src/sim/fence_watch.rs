//! Ground truth about the masters' fencing counters, for the judge only: which masters lost their
//! counter in a crash, a replacement or a promotion (it came back absent, or below what it was
//! when the master went down or was taken over) and
//! have not been repaired since (their epoch is not their run_id), and how often more than a
//! minority were so at once. No client reads it; it lets a regression seed assert that the
//! situation it was found in still occurs in its history.

use quorlock::config::{FENCE_COUNTER_KEY, FENCE_EPOCH_KEY};

use super::master::SimMaster;

/// What the world counts when a restart leaves more than a minority of masters with a lost,
/// unrepaired counter.
pub const MAJORITY_LOST: &str = "fencing counters lost on a majority";

/// The fencing counters of every master, as the world saw them at crashes and restarts.
#[derive(Debug, Default)]
pub struct FenceWatch {
    /// Each master's counter when it last went down.
    at_crash: Vec<Option<u64>>,
    /// Whether it came back with less, unrepaired when last looked at.
    lost: Vec<bool>,
}

impl FenceWatch {
    /// A watch over `n` masters.
    pub fn new(n: usize) -> FenceWatch {
        FenceWatch {
            at_crash: vec![None; n],
            lost: vec![false; n],
        }
    }

    /// Master `m` goes down, or another server takes over its address, now.
    pub fn going(&mut self, m: usize, master: &SimMaster, now: u64) {
        if let Some(slot) = self.at_crash.get_mut(m) {
            *slot = counter(master, now);
        }
    }

    /// Master `m` came back (restarted, or a server took over its address); `masters` are all
    /// of them now. Whether more than a minority have a lost, unrepaired counter after this, and
    /// `m` is one of them.
    pub fn back<'a>(&mut self, m: usize, masters: impl Iterator<Item = &'a SimMaster>, now: u64) -> bool {
        let masters: Vec<&SimMaster> = masters.collect();
        let before = self.at_crash.get(m).copied().flatten();
        if let (Some(master), Some(lost)) = (masters.get(m), self.lost.get_mut(m)) {
            let after = counter(master, now);
            *lost |= before.is_some() && after < before;
        }
        let mut count = 0;
        for (i, master) in masters.iter().enumerate() {
            let repaired = master
                .peek_string(FENCE_EPOCH_KEY.as_bytes(), now)
                .is_some_and(|epoch| epoch == master.run_id().as_bytes());
            if let Some(lost) = self.lost.get_mut(i) {
                *lost &= !repaired;
                count += usize::from(*lost);
            }
        }
        let majority = masters.len() / 2 + 1;
        count >= majority && self.lost.get(m).copied().unwrap_or(false)
    }
}

fn counter(master: &SimMaster, now: u64) -> Option<u64> {
    let bytes = master.peek_string(FENCE_COUNTER_KEY.as_bytes(), now)?;
    std::str::from_utf8(&bytes).ok()?.parse().ok()
}
