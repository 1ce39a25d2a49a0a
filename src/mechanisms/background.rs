//! Work a client leaves running after the call that started it has returned, counted so that a
//! process can wait for it before it exits.
//!
//! Several paths hand lock traffic to a spawned task so that the caller does not wait on the
//! slowest master: the requests of a won round to masters slower than the majority, the rest of a
//! release that a majority already confirmed, the release of a dropped guard or of an abandoned
//! acquire, and a fair waiter leaving its queue. Each of these is bounded by a few node timeouts. A
//! process that exits right after such a call (a command-line tool, a job, a test) would otherwise
//! cut them off: a key stays on a master until its TTL, or a lock lands on a bare majority.
//! [`crate::Quorlock::settle`] waits for them.
//!
//! Tasks that live as long as the client (the watchdog, pub/sub readers, health checks) are not
//! counted here: waiting for them would never end. Nor are the requests of a fenced round still in
//! flight when it is decided: they borrow the round, so they are dropped, not finished (a master
//! that misses a fenced lock's `SET` only makes the lock's majority smaller).

use std::future::Future;

use tokio::runtime::Handle;
use tokio_util::task::TaskTracker;

/// The counted background tasks of one client.
#[derive(Debug, Clone)]
pub(crate) struct Background {
    /// Closed from the start: closing only lets `wait` finish whenever no task is left, and a
    /// closed tracker still counts the tasks spawned on it.
    tasks: TaskTracker,
}

impl Background {
    pub(crate) fn new() -> Self {
        let tasks = TaskTracker::new();
        tasks.close();
        Self { tasks }
    }

    /// Runs `task` on `runtime`, counted until it ends. Callers look the runtime up themselves,
    /// as each has its own way to carry on without one.
    pub(crate) fn spawn_on<F>(&self, runtime: &Handle, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.tasks.spawn_on(task, runtime);
    }

    /// Completes once no counted task is left running (at once when there is none).
    pub(crate) async fn settled(&self) {
        self.tasks.wait().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn settles_once_every_task_has_ended_and_at_once_when_none_runs() {
        let background = Background::new();
        background.settled().await;
        let (done_tx, mut done_rx) = tokio::sync::mpsc::unbounded_channel();
        let runtime = Handle::current();
        for delay in [10u64, 30, 20] {
            let done_tx = done_tx.clone();
            background.spawn_on(&runtime, async move {
                tokio::time::sleep(Duration::from_millis(delay)).await;
                done_tx.send(delay).expect("receiver alive");
            });
        }
        drop(done_tx);
        background.settled().await;
        let mut ended = Vec::new();
        while let Ok(delay) = done_rx.try_recv() {
            ended.push(delay);
        }
        assert_eq!(ended, [10, 20, 30], "settled before every task ended");
        // Counting goes on after a wait has finished.
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        background.spawn_on(&runtime, async move {
            let _ = rx.await;
        });
        let waiting = tokio::time::timeout(Duration::from_secs(1), background.settled()).await;
        assert!(waiting.is_err(), "settled while a task was still running");
        drop(tx);
        background.settled().await;
    }
}
