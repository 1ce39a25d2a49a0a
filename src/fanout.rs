//! The set of per-master requests of one round, release or extend, yielded as they complete.
//!
//! A lock fans out to a handful of masters, and a round lives for one or two round trips. For that
//! shape `FuturesUnordered` does more than needed: a shared ready-to-run queue (two allocations
//! per set), a waker and an atomic handshake per request. Here the requests are boxed side by
//! side and every poll of the set polls each request still pending, in turn, with the caller's
//! waker; at N masters that is at most N cheap polls per wake-up.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;

/// Requests that run concurrently and are yielded in the order they complete.
pub(crate) struct Fanout<F> {
    slots: Vec<Option<Pin<Box<F>>>>,
    /// Requests not yet complete.
    pending: usize,
    /// Where the next poll starts, so that an early slot that is always ready cannot starve the
    /// later ones.
    start: usize,
}

impl<F: Future> Fanout<F> {
    /// Whether every request has completed.
    pub(crate) fn is_empty(&self) -> bool {
        self.pending == 0
    }
}

impl<F: Future> FromIterator<F> for Fanout<F> {
    fn from_iter<I: IntoIterator<Item = F>>(requests: I) -> Self {
        let slots: Vec<_> = requests.into_iter().map(|f| Some(Box::pin(f))).collect();
        Self {
            pending: slots.len(),
            slots,
            start: 0,
        }
    }
}

impl<F: Future> Stream for Fanout<F> {
    type Item = F::Output;

    /// Polls the pending requests in turn and yields the first that completes; `Pending` only once
    /// every pending request has been polled with this context's waker.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<F::Output>> {
        // The requests are boxed, so the set itself is `Unpin`.
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
            let Some(request) = slot.as_mut() else {
                continue;
            };
            if let Poll::Ready(out) = request.as_mut().poll(cx) {
                *slot = None;
                this.pending -= 1;
                this.start = (at + 1) % n;
                return Poll::Ready(Some(out));
            }
        }
        Poll::Pending
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.pending, Some(self.pending))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{FutureExt, StreamExt};
    use std::time::Duration;

    #[tokio::test]
    async fn yields_in_completion_order_and_ends() {
        let mut set: Fanout<_> = [30u64, 10, 20]
            .into_iter()
            .map(|ms| async move {
                tokio::time::sleep(Duration::from_millis(ms)).await;
                ms
            })
            .collect();
        assert_eq!(set.size_hint(), (3, Some(3)));
        let mut order = Vec::new();
        while let Some(ms) = set.next().await {
            order.push(ms);
        }
        assert_eq!(order, vec![10, 20, 30]);
        assert!(set.is_empty());
        assert_eq!(set.next().await, None);
    }

    #[tokio::test]
    async fn an_empty_set_ends_at_once() {
        let mut set: Fanout<std::future::Ready<()>> = std::iter::empty().collect();
        assert!(set.is_empty());
        assert_eq!(set.next().now_or_never(), Some(None));
    }

    #[test]
    fn ready_requests_come_out_in_turn_without_a_runtime() {
        let mut set: Fanout<_> = (0..4).map(std::future::ready).collect();
        let mut got = Vec::new();
        while let Some(Some(i)) = set.next().now_or_never() {
            got.push(i);
        }
        assert_eq!(got, vec![0, 1, 2, 3]);
    }

    /// A request that completes only when told, counting the polls it gets.
    struct Gate {
        open: std::sync::Arc<std::sync::atomic::AtomicBool>,
        polls: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    }

    impl Future for Gate {
        type Output = ();
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
            use std::sync::atomic::Ordering::SeqCst;
            self.polls.fetch_add(1, SeqCst);
            if self.open.load(SeqCst) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }
    }

    #[test]
    fn pending_means_every_pending_request_was_polled_and_done_ones_are_not_polled_again() {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
        use std::sync::Arc;
        let gates: Vec<(Arc<AtomicBool>, Arc<AtomicUsize>)> = (0..3)
            .map(|_| (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0))))
            .collect();
        let mut set: Fanout<Gate> = gates
            .iter()
            .map(|(open, polls)| Gate {
                open: Arc::clone(open),
                polls: Arc::clone(polls),
            })
            .collect();
        assert_eq!(set.next().now_or_never(), None);
        assert!(gates.iter().all(|(_, polls)| polls.load(SeqCst) == 1));
        gates[1].0.store(true, SeqCst);
        assert_eq!(set.next().now_or_never(), Some(Some(())));
        assert_eq!(set.size_hint(), (2, Some(2)));
        assert_eq!(set.next().now_or_never(), None);
        // The finished request is left alone; the others were each polled again.
        assert_eq!(gates[1].1.load(SeqCst), 2);
        assert!(gates[0].1.load(SeqCst) >= 2 && gates[2].1.load(SeqCst) >= 2);
    }
}
