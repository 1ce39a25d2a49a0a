//! What each simulated client does: a seeded loop of lock calls through the real quorlock API
//! (plain, fenced with a `FencedStore`, reentrant with nesting, multi-resource, fair, a semaphore
//! of [`SEMAPHORE_PERMITS`] permits or the client's own count, the read and write holds of a
//! read-write lock and, in runs with operations, its fenced write), each kind on names of its own
//! or, in some runs, every kind on the same names; and a record of every call on the simulated
//! clock for the checks ([`SimRecord`]). What a holder does inside its hold (the witness writes,
//! keep-alive and extend) is in `hold.rs`; what the client runs with, in `context.rs`.

use std::time::Duration;

use quorlock::{FencedStore, LockOwner};
use rand::RngExt;
use tokio::time::Instant;

use super::client::StoreConn;
use super::context::ClientCtx;
use super::hold::hold;
#[cfg(doc)]
use super::record::SEMAPHORE_PERMITS;
use super::record::{CallKind, SimRecord};

/// Runs the client's loop until `until`, then settles its background work.
pub async fn run_client(mut ctx: ClientCtx) {
    let owner = LockOwner::from(format!("owner-c{}", ctx.id));
    let fenced = FencedStore::new(ctx.store.clone());
    while Instant::now() < ctx.until {
        let kind = ctx.behaviour.kinds[ctx.rng.random_range(0..ctx.behaviour.kinds.len())];
        let r = ctx.rng.random_range(0..ctx.behaviour.resources);
        let prefix = if ctx.behaviour.shared {
            "shared"
        } else {
            kind.name()
        };
        let resources = match kind {
            CallKind::Multi => {
                let other = (r + 1 + ctx.rng.random_range(0..ctx.behaviour.resources.max(2) - 1))
                    % ctx.behaviour.resources.max(2);
                vec![format!("{prefix}:{r}"), format!("{prefix}:{other}")]
            }
            _ => vec![format!("{prefix}:{r}")],
        };
        let (lo, hi) = ctx.behaviour.ttl_ms;
        let drawn = ctx.rng.random_range(lo..=hi);
        let ttl = Duration::from_millis(ctx.behaviour.first_ttl_ms.take().unwrap_or(drawn));
        let wait = Duration::from_millis(ctx.rng.random_range(0..=1_500));
        let record = one_call(&mut ctx, &owner, &fenced, kind, resources, ttl, wait).await;
        ctx.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(record);
        let think = ctx.rng.random_range(0..=20);
        ctx.clock.sleep(Duration::from_millis(think)).await;
    }
    ctx.locks.settle().await;
}

async fn one_call(
    ctx: &mut ClientCtx,
    owner: &LockOwner,
    fenced: &FencedStore<StoreConn>,
    kind: CallKind,
    resources: Vec<String>,
    ttl: Duration,
    wait: Duration,
) -> SimRecord {
    let invoked = ctx.at();
    let stamped = ctx.clock.now().saturating_duration_since(ctx.start);
    let mut record = SimRecord::invoked(ctx.id, kind, &resources, invoked, stamped, wait, ttl);
    if kind == CallKind::Semaphore {
        record.permits = Some(ctx.behaviour.permits);
    }
    let lock = match kind {
        CallKind::Multi => ctx.locks.lock_all(resources.iter().map(String::as_str), ttl),
        _ => ctx.locks.lock(&resources[0], ttl),
    };
    let lock = match kind {
        CallKind::Fenced => lock.fenced(),
        CallKind::Reentrant => lock.reentrant(owner),
        CallKind::Fair => lock.fair(),
        CallKind::Semaphore => lock.permits(ctx.behaviour.permits),
        CallKind::Read => lock.read(),
        CallKind::Write => lock.write(),
        CallKind::FencedWrite => lock.write().fenced(),
        CallKind::Plain | CallKind::Multi => lock,
    };
    let guard = match lock.wait(wait).acquire().await {
        Ok(guard) => guard,
        Err(e) => {
            record.lock.error = Some(e.to_string());
            record.ended = ctx.at();
            return record;
        }
    };
    record.lock.acquired = Some(ctx.at());
    record.held = guard.resources().into_iter().map(str::to_owned).collect();
    record.lock.fencing = guard.fencing_token();
    record.permit = guard.permit();
    if kind == CallKind::Reentrant && ctx.rng.random_ratio(1, 3) {
        if let Ok(inner) = ctx
            .locks
            .lock(&resources[0], ttl)
            .reentrant(owner)
            .try_acquire()
            .await
        {
            record.reentered = true;
            let _ = inner.release().await;
        }
    }
    hold(ctx, fenced, &guard, &mut record).await;
    // A holder that ignores its validity believes it holds until it releases; the others, until
    // the last validity the guard confirmed (extended by keep-alive or extend), on the client's
    // clock, mapped to true time.
    record.lock.validity_end = (!ctx.behaviour.ignore_validity).then(|| ctx.offset(guard.valid_until()));
    record.lock.released = Some(ctx.at());
    let released = guard.release().await;
    record.released_ok = released.is_ok();
    record.ended = ctx.at();
    record
}
