//! Local coalescing: waiters of one process for the same resource take turns on a local async lock
//! before contending on the masters.
//!
//! Without it, fifty tasks waiting for one resource send fifty `SET NX` rounds after every release,
//! and all but one fail. With it, only the task at the head of the local queue contends remotely;
//! the others wait in FIFO order (Tokio's mutex is fair) and get their turn when the head's guard
//! is released, at which point the key is already free on the masters and the next acquire
//! succeeds at once. The turn is held for as long as the guard lives, as in Spring's
//! `RedisLockRegistry`. Entries exist only while someone holds or waits for a resource.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

type Turns = Arc<Mutex<HashMap<Arc<str>, Arc<AsyncMutex<()>>>>>;

/// The local queues of one [`crate::Quorlock`], one per contended key.
#[derive(Default)]
pub(crate) struct LocalQueue {
    turns: Turns,
}

impl fmt::Debug for LocalQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = self.turns.lock().unwrap_or_else(PoisonError::into_inner).len();
        f.debug_struct("LocalQueue").field("keys", &keys).finish()
    }
}

/// The turn of one task for one key: while it lives, no other task of this process contends for
/// the key through a queueing acquire.
#[derive(Debug)]
pub(crate) struct Turn {
    // Dropped first: the next task in line may go.
    _turn: OwnedMutexGuard<()>,
    _ticket: Ticket,
}

/// A place in a key's queue; the last one to leave removes the key's entry.
#[derive(Debug)]
struct Ticket {
    turns: Turns,
    key: Arc<str>,
    queue: Arc<AsyncMutex<()>>,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
        // Ours and the map's are the only references left: nobody else holds or waits.
        if Arc::strong_count(&self.queue) == 2 {
            if let Entry::Occupied(entry) = turns.entry(Arc::clone(&self.key)) {
                if Arc::ptr_eq(entry.get(), &self.queue) {
                    entry.remove();
                }
            }
        }
    }
}

impl LocalQueue {
    /// Waits for this task's turn on `key`. Cancel-safe: dropping the future leaves the queue.
    ///
    /// The key is shared, not copied: the caller's lock keeps the same one.
    pub(crate) async fn turn(&self, key: &Arc<str>) -> Turn {
        let ticket = {
            let mut turns = self.turns.lock().unwrap_or_else(PoisonError::into_inner);
            // One lookup whether the key has a queue or not.
            let queue = Arc::clone(
                turns
                    .entry(Arc::clone(key))
                    .or_insert_with(|| Arc::new(AsyncMutex::new(()))),
            );
            Ticket {
                turns: Arc::clone(&self.turns),
                key: Arc::clone(key),
                queue,
            }
        };
        let turn = Arc::clone(&ticket.queue).lock_owned().await;
        Turn {
            _turn: turn,
            _ticket: ticket,
        }
    }

    /// How many keys have a holder or a waiter in this process.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.turns.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn turns_are_exclusive_fifo_and_leave_nothing_behind() {
        let queue = Arc::new(LocalQueue::default());
        let first = queue.turn(&"k".into()).await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..5 {
            let (queue, order) = (Arc::clone(&queue), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let _turn = queue.turn(&"k".into()).await;
                order.lock().unwrap().push(i);
            }));
            // Let each waiter enqueue before the next.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Another key is independent.
        drop(queue.turn(&"other".into()).await);
        assert!(order.lock().unwrap().is_empty(), "nobody passes the holder");
        drop(first);
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(queue.len(), 0);
    }

    #[tokio::test]
    async fn a_cancelled_waiter_leaves_the_queue() {
        let queue = LocalQueue::default();
        let first = queue.turn(&"k".into()).await;
        let waited = tokio::time::timeout(Duration::from_millis(10), queue.turn(&"k".into())).await;
        assert!(waited.is_err());
        drop(first);
        assert_eq!(queue.len(), 0);
    }
}
