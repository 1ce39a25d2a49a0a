//! The retrying acquires of the lock kinds (reentrant, multi-resource, fenced) wake on the
//! holder's release like a plain `acquire`, instead of sleeping out their retry delay: a waking
//! client and a polling one wait on two resources released at the same moment, and the waking one
//! always gets its lock first.

mod common;

use std::time::Duration;

use common::woken_before_polling;
use futures::FutureExt;
use quorlock::LockOwner;

const HOLD: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_reentrant_waiter_wakes_on_the_last_release() {
    woken_before_polling(|locks, resource| {
        async move {
            let owner = LockOwner::new();
            locks.lock(resource, HOLD).reentrant(&owner).acquire().await
        }
        .boxed()
    })
    .await;
}

#[tokio::test]
async fn a_multi_resource_waiter_wakes_on_release() {
    woken_before_polling(|locks, resource| {
        async move {
            let shared = format!("{resource}:x");
            locks.lock_all([resource, shared.as_str()], HOLD).acquire().await
        }
        .boxed()
    })
    .await;
}

#[tokio::test]
async fn a_fenced_waiter_wakes_on_release() {
    woken_before_polling(|locks, resource| {
        async move { locks.lock(resource, HOLD).fenced().acquire().await }.boxed()
    })
    .await;
}
