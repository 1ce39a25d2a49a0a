//! The set of per-master requests of one round, release or extend, yielded as they complete.
//!
//! A lock fans out to a handful of masters, and a round lives for one or two round trips. For that
//! shape `FuturesUnordered` does more than needed: a shared ready-to-run queue (two allocations
//! per set), a waker and an atomic handshake per request. Here the requests sit side by side (each
//! is already boxed once by the seam, so the set boxes nothing more) and every poll of the set polls
//! each request still pending, in turn, with the caller's waker; at N masters that is at most N
//! cheap polls per wake-up. Each request comes tagged with the master it went to.
//!
//! It is the crate's one tool for running requests side by side: [`all`] runs any set of futures
//! (a check of every master, the subscriptions of a wait, an inspection) to completion and hands
//! back every output in order.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

/// Requests to masters that run concurrently and are yielded, with their master, in the order they
/// complete.
pub(crate) struct Fanout<F> {
    slots: Vec<Option<(usize, F)>>,
    /// Requests not yet complete.
    pending: usize,
    /// Where the next poll starts: just after the last request yielded, so that requests ready at
    /// the same time are yielded in turn rather than always lowest slot first.
    start: usize,
}

impl<F: Future + Unpin> Fanout<F> {
    /// Whether every request has completed.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending == 0
    }

    /// How many requests have not completed yet.
    pub(crate) fn len(&self) -> usize {
        self.pending
    }
}

impl<F: Future + Unpin> FromIterator<(usize, F)> for Fanout<F> {
    fn from_iter<I: IntoIterator<Item = (usize, F)>>(requests: I) -> Self {
        let slots: Vec<_> = requests.into_iter().map(Some).collect();
        Self {
            pending: slots.len(),
            slots,
            start: 0,
        }
    }
}

impl<F: Future + Unpin> Stream for Fanout<F> {
    type Item = (usize, F::Output);

    /// Polls the pending requests in turn and yields the first that completes; `Pending` only once
    /// every pending request has been polled with this context's waker.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        // The requests are `Unpin`, so the set itself is.
        let this = self.get_mut();
        if this.pending == 0 {
            return Poll::Ready(None);
        }
        let n = this.slots.len();
        for step in 0..n {
            let at = (this.start + step) % n;
            let Some(slot) = this.slots.get_mut(at) else {
                continue;
            };
            let Some((master, request)) = slot.as_mut() else {
                continue;
            };
            if let Poll::Ready(out) = Pin::new(request).poll(cx) {
                let master = *master;
                *slot = None;
                this.pending -= 1;
                this.start = (at + 1) % n;
                return Poll::Ready(Some((master, out)));
            }
        }
        Poll::Pending
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.pending, Some(self.pending))
    }
}

/// Runs every one of `requests` at once and returns their outputs, in the order given.
///
/// Each request is boxed once here, so any future will do (an `async` block included); the ones
/// the seam already boxes can go straight into a [`Fanout`] instead.
pub(crate) async fn all<F: Future>(requests: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    use futures::StreamExt;
    let mut set: Fanout<Pin<Box<F>>> = requests
        .into_iter()
        .enumerate()
        .map(|(i, request)| (i, Box::pin(request)))
        .collect();
    let mut outputs: Vec<Option<F::Output>> = (0..set.slots.len()).map(|_| None).collect();
    while let Some((i, output)) = set.next().await {
        if let Some(slot) = outputs.get_mut(i) {
            *slot = Some(output);
        }
    }
    outputs.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{FutureExt, StreamExt};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
    use std::sync::{Arc, Mutex};
    use std::task::{Wake, Waker};
    use std::time::Duration;

    #[tokio::test]
    async fn yields_in_completion_order_and_ends() {
        tokio::time::pause();
        let mut set: Fanout<_> = [30u64, 10, 20]
            .into_iter()
            .enumerate()
            .map(|(i, ms)| {
                let sleep = Box::pin(async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    ms
                });
                (i, sleep)
            })
            .collect();
        assert_eq!(set.size_hint(), (3, Some(3)));
        let mut order = Vec::new();
        // Bounded: a set that lost its waker would otherwise hang here instead of failing.
        let drained = tokio::time::timeout(Duration::from_secs(5), async {
            while let Some((i, ms)) = set.next().await {
                order.push((i, ms));
            }
        });
        assert!(drained.await.is_ok(), "the set was never woken");
        assert_eq!(order, vec![(1, 10), (2, 20), (0, 30)]);
        assert!(set.is_empty());
        assert_eq!(set.next().await, None);
    }

    #[tokio::test]
    async fn all_returns_every_output_in_the_order_given() {
        tokio::time::pause();
        let outputs = all([30u64, 10, 20].into_iter().map(|ms| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            ms
        }))
        .await;
        assert_eq!(outputs, vec![30, 10, 20]);
        assert_eq!(
            all(std::iter::empty::<std::future::Ready<()>>()).await,
            Vec::<()>::new()
        );
    }

    #[tokio::test]
    async fn an_empty_set_ends_at_once() {
        let mut set: Fanout<std::future::Ready<()>> = std::iter::empty().collect();
        assert!(set.is_empty());
        assert_eq!(set.next().now_or_never(), Some(None));
    }

    #[test]
    fn ready_requests_come_out_in_turn_without_a_runtime() {
        let mut set: Fanout<_> = (0..4).map(|i| (i, std::future::ready(i * 10))).collect();
        let mut got = Vec::new();
        while let Some(Some((i, out))) = set.next().now_or_never() {
            assert_eq!(out, i * 10);
            got.push(i);
        }
        assert_eq!(got, vec![0, 1, 2, 3]);
    }

    /// A request that completes only when told; it counts its polls and keeps the last waker.
    struct Gate {
        open: Arc<AtomicBool>,
        polls: Arc<AtomicUsize>,
        waker: Arc<Mutex<Option<Waker>>>,
    }

    #[derive(Clone, Default)]
    struct Handle {
        open: Arc<AtomicBool>,
        polls: Arc<AtomicUsize>,
        waker: Arc<Mutex<Option<Waker>>>,
    }

    impl Handle {
        fn gate(&self) -> Gate {
            Gate {
                open: Arc::clone(&self.open),
                polls: Arc::clone(&self.polls),
                waker: Arc::clone(&self.waker),
            }
        }

        /// Opens the gate and wakes whoever polled it last, as a reply arriving would.
        fn open(&self) {
            self.open.store(true, SeqCst);
            if let Some(waker) = self.waker.lock().unwrap().take() {
                waker.wake();
            }
        }

        fn polls(&self) -> usize {
            self.polls.load(SeqCst)
        }
    }

    impl Future for Gate {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, SeqCst);
            if self.open.load(SeqCst) {
                return Poll::Ready(());
            }
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    /// Counts its wake-ups.
    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    fn gates(n: usize) -> (Vec<Handle>, Fanout<Gate>) {
        let handles: Vec<Handle> = (0..n).map(|_| Handle::default()).collect();
        let set = handles.iter().map(Handle::gate).enumerate().collect();
        (handles, set)
    }

    #[test]
    fn pending_means_every_pending_request_was_polled_and_done_ones_are_not_polled_again() {
        let (gates, mut set) = gates(3);
        assert_eq!(set.next().now_or_never(), None);
        assert!(gates.iter().all(|g| g.polls() == 1));
        gates[1].open();
        assert_eq!(set.next().now_or_never(), Some(Some((1, ()))));
        assert_eq!(set.size_hint(), (2, Some(2)));
        assert_eq!(set.next().now_or_never(), None);
        // The finished request is left alone; the others were each polled again.
        assert_eq!(gates[1].polls(), 2);
        assert!(gates[0].polls() >= 2 && gates[2].polls() >= 2);
    }

    /// What `finish_stragglers` relies on: a set last polled with a no-op waker, then handed to a
    /// task, is woken through the task's waker when a request completes.
    #[test]
    fn a_set_polled_again_with_a_new_waker_is_woken_through_it() {
        let (gates, mut set) = gates(2);
        assert_eq!(set.next().now_or_never(), None);
        let counting = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&counting));
        let mut cx = Context::from_waker(&waker);
        assert!(Pin::new(&mut set).poll_next(&mut cx).is_pending());
        gates[0].open();
        assert_eq!(counting.0.load(SeqCst), 1, "the new waker was not registered");
        assert_eq!(Pin::new(&mut set).poll_next(&mut cx), Poll::Ready(Some((0, ()))));
    }

    #[test]
    fn requests_ready_together_are_yielded_from_just_after_the_last_one() {
        let (gates, mut set) = gates(4);
        assert_eq!(set.next().now_or_never(), None);
        gates[2].open();
        assert_eq!(set.next().now_or_never(), Some(Some((2, ()))));
        gates[0].open();
        gates[3].open();
        // Slot 3 comes before slot 0: the turn starts after slot 2.
        assert_eq!(set.next().now_or_never(), Some(Some((3, ()))));
        assert_eq!((gates[0].polls(), gates[3].polls()), (2, 2));
        assert_eq!(set.next().now_or_never(), Some(Some((0, ()))));
        assert_eq!(gates[0].polls(), 3);
    }
}
