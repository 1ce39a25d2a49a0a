//! Contending workers: several clients of one `Quorlock` competing for a few resources, each hold
//! doing a deliberately unsafe read-modify-write that only the lock keeps correct.
//!
//! Every outcome is counted against the phase it happened in: an acquisition against the phase it
//! was granted in (its hold and release may end in the next), a refusal against the phase it came
//! back in, by its reason: contention (another worker held the lock: the lock doing its job) or no
//! majority (too few masters answered). Every hold is recorded in the run's [`History`] for the
//! checker and the timeline, and every refusal, with its time and reason, for the timeline's rate
//! panel.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use quorlock::{AcquireError, NodeErrorKind, Quorlock};
use quorlock_chaos::svg::{Refusal, RefusalKind};
use quorlock_chaos::{History, LockRecord};
use rand::RngExt;
use tokio::task::JoinHandle;

/// Lifetime of each lock the workers take.
pub const TTL: Duration = Duration::from_secs(2);
/// Time spent inside each hold, between the read and the write of the witness counter.
const WORK: Duration = Duration::from_millis(2);
/// Pause after a refusal that involved unreachable masters.
const REFUSED_PAUSE: Duration = Duration::from_millis(100);

/// What happened during one phase.
#[derive(Debug, Clone, Default)]
pub struct PhaseStats {
    /// Locks acquired.
    pub acquired: u64,
    /// Attempts refused because another worker held the lock.
    pub contention: u64,
    /// Attempts refused because too few masters answered to make a majority.
    pub no_majority: u64,
    /// Time from calling acquire to holding the lock, per acquisition.
    pub latencies: Vec<Duration>,
    /// The message of the refusal that saw the most unreachable masters (the latest among equals).
    pub reason: Option<(usize, String)>,
}

/// The state shared by the workers and the demo.
#[derive(Debug)]
pub struct Board {
    phase: AtomicUsize,
    stop: AtomicBool,
    stats: Mutex<Vec<PhaseStats>>,
    history: History,
    /// One unprotected counter per resource, incremented only under its lock.
    witness: Vec<AtomicU64>,
    /// Increments the workers completed under the lock.
    increments: AtomicU64,
    /// Every refusal, with its time and reason.
    refusals: Mutex<Vec<Refusal>>,
}

impl Board {
    /// A board for `phases` phases and `resources` resources, recording into `history`.
    pub fn new(phases: usize, resources: usize, history: History) -> Self {
        Self {
            phase: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            stats: Mutex::new(vec![PhaseStats::default(); phases]),
            history,
            witness: (0..resources).map(|_| AtomicU64::new(0)).collect(),
            increments: AtomicU64::new(0),
            refusals: Mutex::new(Vec::new()),
        }
    }

    /// Every refusal so far, in the order they came back.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.refusals
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Starts counting outcomes against phase `index`.
    pub fn enter(&self, index: usize) {
        self.phase.store(index, Ordering::SeqCst);
    }

    /// A copy of phase `index`'s counters.
    pub fn stats(&self, index: usize) -> PhaseStats {
        self.lock_stats().get(index).cloned().unwrap_or_default()
    }

    /// The witness counters' total, and the increments made under the lock.
    pub fn witness(&self) -> (u64, u64) {
        let actual = self.witness.iter().map(|w| w.load(Ordering::SeqCst)).sum();
        (self.increments.load(Ordering::SeqCst), actual)
    }

    /// The phase outcomes are counted against now.
    fn current(&self) -> usize {
        self.phase.load(Ordering::SeqCst)
    }

    fn record(&self, update: impl FnOnce(&mut PhaseStats)) {
        self.record_in(self.current(), update);
    }

    fn record_in(&self, index: usize, update: impl FnOnce(&mut PhaseStats)) {
        if let Some(stats) = self.lock_stats().get_mut(index) {
            update(stats);
        }
    }

    fn lock_stats(&self) -> MutexGuard<'_, Vec<PhaseStats>> {
        self.stats.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Starts `count` workers spread over `resources`; they run until [`stop`].
pub fn spawn(locks: &Quorlock, board: &Arc<Board>, count: usize, resources: &[&str]) -> Vec<JoinHandle<()>> {
    (0..count)
        .map(|client| {
            let which = client % resources.len();
            let resource = resources[which].to_owned();
            tokio::spawn(work(locks.clone(), Arc::clone(board), client, which, resource))
        })
        .collect()
}

/// Stops the workers and waits for them to finish their current attempt.
pub async fn stop(board: &Board, workers: Vec<JoinHandle<()>>) {
    board.stop.store(true, Ordering::SeqCst);
    for worker in workers {
        let _ = worker.await;
    }
}

async fn work(locks: Quorlock, board: Arc<Board>, client: usize, which: usize, resource: String) {
    let clock = board.history.clock();
    while !board.stop.load(Ordering::SeqCst) {
        let invoked = clock.now();
        let started = Instant::now();
        let pause = match locks.try_acquire(&resource, TTL).await {
            Ok(guard) => {
                let latency = started.elapsed();
                let granted_in = board.current();
                let mut record = LockRecord::invoked(client, resource.as_str(), invoked);
                record.acquired = Some(clock.now());
                record.validity_end = Some(clock.offset(guard.valid_until().into_std()));
                record.token = guard.token().to_owned();
                // The unsafe read-modify-write that the lock protects.
                let witness = &board.witness[which];
                let value = witness.load(Ordering::SeqCst);
                tokio::time::sleep(WORK).await;
                witness.store(value + 1, Ordering::SeqCst);
                board.increments.fetch_add(1, Ordering::SeqCst);
                // The holder stops acting here; the release only tells the masters.
                record.released = Some(clock.now());
                if let Err(err) = guard.release().await {
                    record.error = Some(err.to_string());
                }
                board.history.push(record);
                board.record_in(granted_in, |s| {
                    s.acquired += 1;
                    s.latencies.push(latency);
                });
                Duration::from_millis(rand::rng().random_range(0..10))
            }
            Err(err) => {
                let unreachable = err.failures().iter().filter(|f| f.kind.is_unreachable()).count();
                let kind = reason(&err, locks.masters(), locks.quorum());
                board
                    .refusals
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Refusal {
                        at: clock.now(),
                        kind,
                    });
                board.record(|s| {
                    match kind {
                        RefusalKind::Contention => s.contention += 1,
                        RefusalKind::NoMajority => s.no_majority += 1,
                    }
                    if s.reason.as_ref().is_none_or(|(most, _)| unreachable >= *most) {
                        s.reason = Some((unreachable, err.to_string()));
                    }
                });
                if unreachable > 0 {
                    REFUSED_PAUSE
                } else {
                    // Plain contention: another worker holds it; try again soon.
                    Duration::from_millis(rand::rng().random_range(5..25))
                }
            }
        };
        tokio::time::sleep(pause).await;
    }
}

/// Why an attempt was refused: no majority when the masters that did not answer leave fewer than a
/// majority able to, else contention when another worker held it on some master.
fn reason(err: &AcquireError, masters: usize, quorum: usize) -> RefusalKind {
    let kinds: Vec<&NodeErrorKind> = err.failures().iter().map(|f| &f.kind).collect();
    classify(&kinds, masters, quorum)
}

/// [`reason`], on the kinds of the failed masters.
fn classify(kinds: &[&NodeErrorKind], masters: usize, quorum: usize) -> RefusalKind {
    let unreachable = kinds.iter().filter(|k| k.is_unreachable()).count();
    let contended = kinds.iter().any(|k| k.is_contention());
    if masters.saturating_sub(unreachable) < quorum || !contended {
        RefusalKind::NoMajority
    } else {
        RefusalKind::Contention
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_for_want_of_a_majority_only_when_too_few_masters_could_answer() {
        let (held, down) = (NodeErrorKind::Held, NodeErrorKind::Timeout);
        // 2 of 5 down, held elsewhere on one: the lock doing its job.
        assert_eq!(classify(&[&down, &down, &held], 5, 3), RefusalKind::Contention);
        // 3 of 5 down: nobody can hold it, whatever the others say.
        assert_eq!(
            classify(&[&down, &down, &down, &held], 5, 3),
            RefusalKind::NoMajority
        );
        // Only unreachable masters and no holder: not contention.
        assert_eq!(classify(&[&down], 5, 3), RefusalKind::NoMajority);
    }
}
