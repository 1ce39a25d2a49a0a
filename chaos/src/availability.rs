//! Which masters each client group could reach over a run, derived purely from the faults
//! applied: the windows without a reachable majority (when no acquisition may succeed), the
//! complementary windows (for liveness), heal times, labelled fault windows for the timeline,
//! and the actions that heal whatever is still broken when the clients are done
//! ([`heal_actions`], which every driver of a run applies in its own way).

use std::collections::BTreeSet;
use std::time::Duration;

use crate::cluster::DataMode;
use crate::faults::{FaultAction, ScheduledFault};
use crate::history::FaultWindow;

/// An action as it was applied: it started at `started` and had taken effect by `finished`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedFault {
    /// When the harness began applying it.
    pub started: Duration,
    /// When applying it returned.
    pub finished: Duration,
    /// The action.
    pub action: FaultAction,
}

impl From<&ScheduledFault> for AppliedFault {
    fn from(f: &ScheduledFault) -> AppliedFault {
        AppliedFault {
            started: f.at,
            finished: f.at,
            action: f.action.clone(),
        }
    }
}

/// Whether an action takes masters away (effective once applied) or gives them back
/// (counted from the moment it starts). This keeps no-majority windows conservative: they
/// only cover time in which masters were surely unreachable.
fn effect_time(f: &AppliedFault) -> Duration {
    match f.action {
        FaultAction::Kill(_)
        | FaultAction::Pause(_)
        | FaultAction::Blackhole(_)
        | FaultAction::Reset(_)
        | FaultAction::Partition { .. } => f.finished,
        _ => f.started,
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct MasterState {
    killed: bool,
    paused: bool,
    blackholed: bool,
    /// Its proxies reset every connection: no request gets through until the network heals.
    reset: bool,
    partitioned: bool,
}

impl MasterState {
    fn reachable(&self) -> bool {
        !(self.killed || self.paused || self.blackholed || self.reset || self.partitioned)
    }
}

/// Windows within `[0, run_end]` in which `group` could reach fewer than a majority of the
/// `masters`.
pub fn no_majority_windows(
    applied: &[AppliedFault],
    masters: usize,
    group: usize,
    run_end: Duration,
) -> Vec<(Duration, Duration)> {
    let majority = masters / 2 + 1;
    let mut events: Vec<&AppliedFault> = applied.iter().collect();
    events.sort_by_key(|f| effect_time(f)); // stable: ties keep their order
    let mut state = vec![MasterState::default(); masters];
    let mut windows = Vec::new();
    let mut down_since: Option<Duration> = None;
    for f in events {
        let at = effect_time(f).min(run_end);
        match &f.action {
            FaultAction::Kill(m) => set(&mut state, *m, |s| s.killed = true),
            FaultAction::Pause(m) => set(&mut state, *m, |s| s.paused = true),
            FaultAction::Resume(m) => set(&mut state, *m, |s| s.paused = false),
            FaultAction::Restart(m, _) => set(&mut state, *m, |s| {
                s.killed = false;
                s.paused = false;
            }),
            FaultAction::Blackhole(m) => set(&mut state, *m, |s| s.blackholed = true),
            FaultAction::Reset(m) => set(&mut state, *m, |s| s.reset = true),
            FaultAction::Partition {
                group: g,
                masters: cut,
            } if *g == group => {
                for m in cut {
                    set(&mut state, *m, |s| s.partitioned = true);
                }
            }
            FaultAction::HealNetwork => {
                for s in &mut state {
                    s.blackholed = false;
                    s.reset = false;
                    s.partitioned = false;
                }
            }
            _ => {}
        }
        let up = state.iter().filter(|s| s.reachable()).count();
        match (up < majority, down_since) {
            (true, None) => down_since = Some(at),
            (false, Some(since)) => {
                if at > since {
                    windows.push((since, at));
                }
                down_since = None;
            }
            _ => {}
        }
    }
    if let Some(since) = down_since {
        if run_end > since {
            windows.push((since, run_end));
        }
    }
    windows
}

fn set(state: &mut [MasterState], master: usize, change: impl FnOnce(&mut MasterState)) {
    if let Some(s) = state.get_mut(master) {
        change(s);
    }
}

/// The complement of `down` within `[0, run_end]`: when a majority was reachable.
pub fn majority_windows(down: &[(Duration, Duration)], run_end: Duration) -> Vec<(Duration, Duration)> {
    let mut up = Vec::new();
    let mut from = Duration::ZERO;
    for &(start, end) in down {
        if start > from {
            up.push((from, start));
        }
        from = from.max(end);
    }
    if run_end > from {
        up.push((from, run_end));
    }
    up
}

/// The moments a majority came back (ends of `down` windows before `run_end`).
pub fn heals(down: &[(Duration, Duration)], run_end: Duration) -> Vec<Duration> {
    down.iter()
        .map(|&(_, end)| end)
        .filter(|&end| end < run_end)
        .collect()
}

/// Labelled windows for the timeline: each fault from when it was applied until the action
/// that undoes it (or the run end); one-shot actions get a short mark (1/200 of the run)
/// so that they stay visible.
pub fn fault_windows(applied: &[AppliedFault], run_end: Duration) -> Vec<FaultWindow> {
    windows_with_mark(applied, run_end, (run_end / 200).max(Duration::from_millis(1)))
}

/// The same windows as [`fault_windows`], but one-shot actions (a restart, a clock jump)
/// last only as long as they took to apply: the spans during which a fault was really
/// active, for counting what happened under faults.
pub fn fault_spans(applied: &[AppliedFault], run_end: Duration) -> Vec<FaultWindow> {
    windows_with_mark(applied, run_end, Duration::ZERO)
}

fn windows_with_mark(applied: &[AppliedFault], run_end: Duration, mark: Duration) -> Vec<FaultWindow> {
    let mut windows = Vec::new();
    for (i, f) in applied.iter().enumerate() {
        let undone_by = |later: &AppliedFault| match (&f.action, &later.action) {
            (FaultAction::Kill(a), FaultAction::Restart(b, _)) => a == b,
            (FaultAction::Pause(a), FaultAction::Resume(b) | FaultAction::Restart(b, _)) => a == b,
            (
                FaultAction::Latency(..)
                | FaultAction::Blackhole(_)
                | FaultAction::Reset(_)
                | FaultAction::Partition { .. },
                FaultAction::HealNetwork,
            ) => true,
            _ => false,
        };
        let end = match &f.action {
            FaultAction::Kill(_)
            | FaultAction::Pause(_)
            | FaultAction::Latency(..)
            | FaultAction::Blackhole(_)
            | FaultAction::Reset(_)
            | FaultAction::Partition { .. } => applied[i + 1..]
                .iter()
                .find(|later| undone_by(later))
                .map_or(run_end, |later| later.started),
            FaultAction::PauseClient(_, stall) => f.started + *stall,
            FaultAction::Resume(_) | FaultAction::HealNetwork => continue,
            FaultAction::Restart(..) => {
                let follows_kill = applied[..i]
                    .iter()
                    .rev()
                    .find(|earlier| earlier.action.master() == f.action.master())
                    .is_some_and(|earlier| matches!(earlier.action, FaultAction::Kill(_)));
                if follows_kill {
                    continue; // already drawn as the end of the kill
                }
                f.finished.max(f.started + mark)
            }
            FaultAction::ClockJump(..) => f.started + mark,
        };
        windows.push(FaultWindow {
            start: f.started,
            end: end.min(run_end).max(f.started),
            label: f.action.to_string(),
        });
    }
    windows
}

/// What heals every fault still in effect after `applied`: resume the paused masters, restart
/// the killed ones keeping their data (in that order, each by master), and heal the network if
/// a network fault is still on. Clock jumps and client pauses need no healing.
pub fn heal_actions(applied: &[AppliedFault]) -> Vec<FaultAction> {
    let mut killed = BTreeSet::new();
    let mut paused = BTreeSet::new();
    let mut network = false;
    for f in applied {
        match &f.action {
            FaultAction::Kill(i) => {
                killed.insert(*i);
                paused.remove(i);
            }
            FaultAction::Pause(i) => {
                paused.insert(*i);
            }
            FaultAction::Resume(i) => {
                paused.remove(i);
            }
            FaultAction::Restart(i, _) => {
                killed.remove(i);
                paused.remove(i);
            }
            FaultAction::Latency(..)
            | FaultAction::Blackhole(_)
            | FaultAction::Reset(_)
            | FaultAction::Partition { .. } => network = true,
            FaultAction::HealNetwork => network = false,
            FaultAction::ClockJump(..) | FaultAction::PauseClient(..) => {}
        }
    }
    let mut heal: Vec<FaultAction> = paused.into_iter().map(FaultAction::Resume).collect();
    heal.extend(
        killed
            .into_iter()
            .map(|i| FaultAction::Restart(i, DataMode::Keep)),
    );
    if network {
        heal.push(FaultAction::HealNetwork);
    }
    heal
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    fn at(t: u64, action: FaultAction) -> AppliedFault {
        AppliedFault {
            started: s(t),
            finished: s(t),
            action,
        }
    }

    #[test]
    fn the_heal_undoes_what_is_still_broken_and_nothing_else() {
        assert!(heal_actions(&[]).is_empty());
        let applied = vec![
            at(1, FaultAction::Kill(2)),
            at(1, FaultAction::Pause(3)),
            at(2, FaultAction::Pause(0)),
            at(2, FaultAction::Kill(0)),
            at(3, FaultAction::Pause(1)),
            at(4, FaultAction::Resume(1)),
            at(4, FaultAction::Kill(4)),
            at(5, FaultAction::Restart(4, DataMode::Wipe)),
            at(5, FaultAction::Blackhole(1)),
            at(6, FaultAction::ClockJump(1, s(4))),
        ];
        assert_eq!(
            heal_actions(&applied),
            vec![
                FaultAction::Resume(3),
                FaultAction::Restart(0, DataMode::Keep),
                FaultAction::Restart(2, DataMode::Keep),
                FaultAction::HealNetwork,
            ]
        );
        // A network already healed is left alone; a partition still on is healed.
        let healed = vec![
            at(
                1,
                FaultAction::Partition {
                    group: 0,
                    masters: vec![0],
                },
            ),
            at(2, FaultAction::HealNetwork),
        ];
        assert!(heal_actions(&healed).is_empty());
        assert_eq!(heal_actions(&healed[..1]), vec![FaultAction::HealNetwork]);
    }

    #[test]
    fn killing_a_majority_opens_a_window_until_the_first_restart() {
        let applied = vec![
            at(10, FaultAction::Kill(0)),
            at(10, FaultAction::Kill(1)),
            at(10, FaultAction::Kill(2)),
            at(20, FaultAction::Restart(0, DataMode::Keep)),
            at(21, FaultAction::Restart(1, DataMode::Keep)),
        ];
        let down = no_majority_windows(&applied, 5, 0, s(30));
        assert_eq!(down, vec![(s(10), s(20))]);
        assert_eq!(
            majority_windows(&down, s(30)),
            vec![(s(0), s(10)), (s(20), s(30))]
        );
        assert_eq!(heals(&down, s(30)), vec![s(20)]);
    }

    #[test]
    fn a_minority_fault_never_opens_a_window() {
        let applied = vec![at(10, FaultAction::Pause(0)), at(10, FaultAction::Blackhole(1))];
        assert!(no_majority_windows(&applied, 5, 0, s(30)).is_empty());
        let applied = vec![at(10, FaultAction::Reset(3)), at(10, FaultAction::Reset(4))];
        assert!(no_majority_windows(&applied, 5, 0, s(30)).is_empty());
        assert!(no_majority_windows(&applied, 5, 1, s(30)).is_empty());
    }

    #[test]
    fn reset_masters_are_down_for_every_group_until_the_network_heals() {
        // A restart does not undo a reset: the proxies in front still reset every connection.
        let applied = vec![
            at(5, FaultAction::Reset(0)),
            at(5, FaultAction::Reset(1)),
            at(5, FaultAction::Reset(2)),
            at(8, FaultAction::Restart(0, DataMode::Keep)),
            at(15, FaultAction::HealNetwork),
        ];
        for group in 0..2 {
            let down = no_majority_windows(&applied, 5, group, s(30));
            assert_eq!(down, vec![(s(5), s(15))], "group {group}");
            assert_eq!(heals(&down, s(30)), vec![s(15)]);
            assert_eq!(majority_windows(&down, s(30)), vec![(s(0), s(5)), (s(15), s(30))]);
        }
        // Two resets and a kill make a majority down too; the heal brings back only the resets.
        let mixed = vec![
            at(5, FaultAction::Reset(3)),
            at(5, FaultAction::Reset(4)),
            at(7, FaultAction::Kill(0)),
            at(15, FaultAction::HealNetwork),
            at(20, FaultAction::Restart(0, DataMode::Keep)),
        ];
        assert_eq!(no_majority_windows(&mixed, 5, 0, s(30)), vec![(s(7), s(15))]);
        // Unhealed, the window runs to the end of the run.
        assert_eq!(
            no_majority_windows(&applied[..3], 5, 0, s(30)),
            vec![(s(5), s(30))]
        );
    }

    #[test]
    fn a_reset_counts_only_once_it_has_been_applied() {
        let applied = vec![
            AppliedFault {
                started: s(10),
                finished: s(11),
                action: FaultAction::Reset(0),
            },
            AppliedFault {
                started: s(20),
                finished: s(21),
                action: FaultAction::HealNetwork,
            },
        ];
        assert_eq!(no_majority_windows(&applied, 1, 0, s(30)), vec![(s(11), s(20))]);
    }

    #[test]
    fn partitions_affect_only_their_group_and_unhealed_windows_run_to_the_end() {
        let applied = vec![
            at(
                5,
                FaultAction::Partition {
                    group: 0,
                    masters: vec![0, 1, 2],
                },
            ),
            at(
                5,
                FaultAction::Partition {
                    group: 1,
                    masters: vec![3, 4],
                },
            ),
        ];
        assert_eq!(no_majority_windows(&applied, 5, 0, s(30)), vec![(s(5), s(30))]);
        assert!(no_majority_windows(&applied, 5, 1, s(30)).is_empty());
        let healed = [applied, vec![at(15, FaultAction::HealNetwork)]].concat();
        assert_eq!(no_majority_windows(&healed, 5, 0, s(30)), vec![(s(5), s(15))]);
    }

    #[test]
    fn windows_are_conservative_about_slow_actions() {
        // The kill took 2 s to apply and the restart 3 s: only [12, 20] is surely down.
        let applied = vec![
            AppliedFault {
                started: s(10),
                finished: s(12),
                action: FaultAction::Kill(0),
            },
            AppliedFault {
                started: s(20),
                finished: s(23),
                action: FaultAction::Restart(0, DataMode::Keep),
            },
        ];
        assert_eq!(no_majority_windows(&applied, 1, 0, s(30)), vec![(s(12), s(20))]);
    }

    #[test]
    fn fault_windows_pair_faults_with_their_healing() {
        let applied = vec![
            at(1, FaultAction::Kill(0)),
            at(2, FaultAction::Blackhole(1)),
            at(4, FaultAction::Restart(0, DataMode::Keep)),
            at(5, FaultAction::HealNetwork),
            at(6, FaultAction::Pause(2)),
            at(7, FaultAction::Restart(3, DataMode::Wipe)),
            at(8, FaultAction::Reset(4)),
        ];
        let windows = fault_windows(&applied, s(10));
        let got: Vec<(Duration, Duration, &str)> = windows
            .iter()
            .map(|w| (w.start, w.end, w.label.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (s(1), s(4), "kill m0"),
                (s(2), s(5), "blackhole m1"),
                (s(6), s(10), "pause m2"),
                (s(7), s(7) + Duration::from_millis(50), "restart m3 (wipe)"),
                (s(8), s(10), "reset m4"),
            ]
        );
        // For counting, the restart lasts only as long as it took (here: no time at all).
        let spans = fault_spans(&applied, s(10));
        assert_eq!(spans[..3], windows[..3]);
        assert_eq!((spans[3].start, spans[3].end), (s(7), s(7)));
        assert_eq!(spans[4], windows[4]);
        // A later heal ends the reset.
        let healed = [applied, vec![at(9, FaultAction::HealNetwork)]].concat();
        let last = fault_windows(&healed, s(10)).pop().unwrap();
        assert_eq!(
            (last.start, last.end, last.label.as_str()),
            (s(8), s(9), "reset m4")
        );
    }
}
