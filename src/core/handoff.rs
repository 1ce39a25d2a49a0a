//! The plain lock's hand-off between processes, decided: a waiting process's place in the key's
//! queue, read from the masters' answers, and how long its waiter sleeps when no release wakes it.
//!
//! A release hands a freed key to the first process in the key's queue only (the scripts in
//! `handoff_common.lua`), so one hand-off costs the masters a release and one attempt whatever the
//! number of waiting processes. The queue decides who is woken, never who holds: the woken
//! process still wins the key through a quorum like anyone else, so exclusion does not rest on
//! it. What rests on it is the cost of waiting, and that is what this file bounds: the first
//! process (and a process the masters do not queue) waits as every plain waiter did before the
//! queue, until the holder's release or the key's expiry within [`fallback_wait`]'s cap; a process
//! further back only looks again (reads its place, without an attempt) after a sleep that grows
//! with the square of its place, so the looks of a whole queue add up to a bounded rate however
//! long it is, and at least every [`LOOK_AT_MOST_EVERY`], so that its registration, and the queue
//! (which lives [`QUEUE_LIFE`] unused), never lapse while it waits.

use std::time::Duration;

use super::backoff::fallback_wait;
use super::timing::quorum;

/// How long a key's queue lives without a registration or a look: 120 s. A queue whose every
/// process is gone is not left behind for longer.
pub const QUEUE_LIFE: Duration = Duration::from_secs(120);

/// The longest a queued process sleeps between looks: a quarter of [`QUEUE_LIFE`].
pub const LOOK_AT_MOST_EVERY: Duration = Duration::from_secs(30);

/// What a waiter does when its sleep ends without a wake-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Attempt the lock.
    Attempt,
    /// Read its place and the key again, without an attempt: the process ahead of it is owed the
    /// next hand-off.
    Look,
}

/// A waiter's sleep between a look and the next step, unless a release wakes it first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    /// How long.
    pub sleep: Duration,
    /// Then what.
    pub then: Then,
}

/// This process's place in the key's queue from the masters' answers (how many processes are
/// ahead of it on each; `None` for a master that did not answer or does not queue it): the
/// quorum-th smallest, so that a majority puts it there or further ahead; `None` when fewer than
/// a majority of `masters` answered.
pub fn place(answers: impl IntoIterator<Item = Option<u64>>, masters: usize) -> Option<u64> {
    let mut known: Vec<u64> = answers.into_iter().flatten().collect();
    known.sort_unstable();
    known.get(quorum(masters).saturating_sub(1)).copied()
}

/// How long a waiter sleeps after a look that found the key held, from when the key frees on a
/// majority (`free_in`, see `expiry::free_in`) and its `place`; `cap` is the longest wait for a
/// release or an expiry, and `jitter` spreads the processes.
pub fn pause(free_in: Option<Duration>, place: Option<u64>, cap: Duration, jitter: Duration) -> Pause {
    match place {
        // First in line, or not queued: the wait every plain waiter had before the queue.
        None | Some(0) => Pause {
            sleep: fallback_wait(free_in, cap, jitter),
            then: Then::Attempt,
        },
        // Free on a majority already: whoever was owed it did not take it.
        Some(_) if free_in == Some(Duration::ZERO) => Pause {
            sleep: jitter,
            then: Then::Attempt,
        },
        Some(ahead) => {
            let factor = ahead.saturating_add(1).saturating_mul(ahead.saturating_add(1));
            let sleep = cap
                .saturating_mul(u32::try_from(factor).unwrap_or(u32::MAX))
                .min(LOOK_AT_MOST_EVERY);
            Pause {
                sleep: sleep.saturating_add(jitter),
                then: Then::Look,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CAP: Duration = Duration::from_secs(1);

    #[test]
    fn the_place_is_where_a_majority_puts_the_process() {
        assert_eq!(place([Some(3), Some(0), None, Some(1), Some(7)], 5), Some(3));
        assert_eq!(place([Some(0), Some(0), Some(9)], 3), Some(0));
        assert_eq!(
            place([Some(0), None, None], 3),
            None,
            "one of three is no majority"
        );
        assert_eq!(place([], 0), None);
    }

    #[test]
    fn a_queued_process_looks_rather_than_attempts_and_sleeps_longer_the_further_back() {
        let held = Some(Duration::from_secs(10));
        let head = pause(held, Some(0), CAP, Duration::ZERO);
        assert_eq!(
            head,
            Pause {
                sleep: CAP,
                then: Then::Attempt
            }
        );
        let second = pause(held, Some(1), CAP, Duration::ZERO);
        assert_eq!(
            second,
            Pause {
                sleep: CAP * 4,
                then: Then::Look
            }
        );
        let far = pause(held, Some(1_000_000), CAP, Duration::ZERO);
        assert_eq!(far.sleep, LOOK_AT_MOST_EVERY);
        let free = pause(Some(Duration::ZERO), Some(5), CAP, Duration::from_millis(2));
        assert_eq!(
            free,
            Pause {
                sleep: Duration::from_millis(2),
                then: Then::Attempt
            }
        );
    }

    proptest! {
        /// The first process, and one the masters do not queue, wait exactly as a plain waiter
        /// did before the queue.
        #[test]
        fn the_head_waits_as_before(
            free_ms in prop::option::of(0u64..20_000), first in any::<bool>(), jitter_ms in 0u64..50,
        ) {
            let free = free_ms.map(Duration::from_millis);
            let jitter = Duration::from_millis(jitter_ms);
            let at = if first { Some(0) } else { None };
            prop_assert_eq!(
                pause(free, at, CAP, jitter),
                Pause { sleep: fallback_wait(free, CAP, jitter), then: Then::Attempt }
            );
        }

        /// Behind the head, a process never attempts on its timer while the key is held, and
        /// looks again within LOOK_AT_MOST_EVERY (plus its jitter), so its registration and the
        /// queue stay alive while it waits.
        #[test]
        fn a_queued_process_keeps_its_place_alive_without_attempts(
            free_ms in 1u64..1_000_000, ahead in 1u64..u64::MAX, jitter_ms in 0u64..50,
        ) {
            let jitter = Duration::from_millis(jitter_ms);
            let p = pause(Some(Duration::from_millis(free_ms)), Some(ahead), CAP, jitter);
            prop_assert_eq!(p.then, Then::Look);
            prop_assert!(p.sleep <= LOOK_AT_MOST_EVERY + jitter);
            prop_assert!(p.sleep >= CAP + jitter, "behind the head it sleeps longer than the head");
            prop_assert!(LOOK_AT_MOST_EVERY * 4 <= QUEUE_LIFE);
        }

        /// The timers of a whole queue of `waiters` processes, behind a key held for good, add up
        /// to at most pi^2/6 wake-ups per cap plus one per LOOK_AT_MOST_EVERY for each process
        /// past the first few: a bounded rate per process, not per hand-off.
        #[test]
        fn a_queue_wakes_at_a_bounded_rate(waiters in 1u64..5_000) {
            let held = Some(Duration::from_secs(3_600));
            let rate: f64 = (0..waiters)
                .map(|at| 1.0 / pause(held, Some(at), CAP, Duration::ZERO).sleep.as_secs_f64())
                .sum();
            let bound = std::f64::consts::PI.powi(2) / 6.0 / CAP.as_secs_f64()
                + waiters as f64 / LOOK_AT_MOST_EVERY.as_secs_f64();
            prop_assert!(rate <= bound, "{rate} > {bound}");
            // The rule without the square (a control): every process woken per cap.
            let flat = waiters as f64 / CAP.as_secs_f64();
            prop_assert!(waiters < 4 || flat > bound);
        }
    }
}
