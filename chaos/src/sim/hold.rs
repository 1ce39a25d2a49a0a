//! What a simulated holder does between its acquire and its release: read-modify-writes of a
//! witness counter in the store (the witness that reveals lost updates), each only while its lock
//! is valid and not known lost. Most holds do one write per resource; some keep the lock alive with
//! the watchdog and hold it for longer than its TTL, and some extend it once. A holder that learns
//! its lock is lost (the watchdog's signal, a failed extend) records when and writes no more.
//! The holder is the client's own code: it measures time on the client's clock (`clock.rs`), as
//! quorlock does, and a pause stops it with the rest of the client.

use std::time::Duration;

use quorlock::{FencedStore, Guard};
use rand::RngExt;
use redis::AsyncCommands;

use super::client::StoreConn;
use super::context::ClientCtx;
use super::record::{CallKind, SimRecord};

/// The slack a holder keeps before its validity ends when it writes: the store's round trip.
const WRITE_MARGIN: Duration = Duration::from_millis(10);

/// How a hold is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One write per resource, inside the validity of the acquire.
    Once,
    /// Kept alive by the watchdog for longer than the TTL, writing now and then.
    KeptAlive,
    /// One write per resource, an `extend`, and another write per resource if it succeeded.
    Extended,
}

/// Everything the holder does inside its hold; the caller releases afterwards.
pub(crate) async fn hold(
    ctx: &mut ClientCtx,
    fenced: &FencedStore<StoreConn>,
    guard: &Guard,
    record: &mut SimRecord,
) {
    // The out-of-model behaviours of the controls and the fenced holder's pause keep to one write.
    let plain_behaviour =
        !ctx.behaviour.ignore_validity && !ctx.behaviour.pause_unfenced && !ctx.behaviour.to_validity_end;
    let mode = match ctx.rng.random_range(0..5u8) {
        0 if plain_behaviour && !record.kind.fenced() => Mode::KeptAlive,
        1 if plain_behaviour && !record.kind.fenced() => Mode::Extended,
        _ => Mode::Once,
    };
    let resources: Vec<String> = record.resources().map(str::to_owned).collect();
    match mode {
        Mode::Once => {
            for resource in &resources {
                critical_section(ctx, fenced, guard, record, resource).await;
            }
            if ctx.behaviour.to_validity_end {
                // Every moment the lock promises, on the client's clock, as the library counts it.
                ctx.clock.sleep_until(guard.valid_until()).await;
            }
        }
        Mode::Extended => {
            for resource in &resources {
                critical_section(ctx, fenced, guard, record, resource).await;
            }
            match guard.extend(record.ttl).await {
                Ok(_) => {
                    record.extended = Some(true);
                    for resource in &resources {
                        critical_section(ctx, fenced, guard, record, resource).await;
                    }
                }
                Err(_) => {
                    record.extended = Some(false);
                    record.lost = Some(ctx.at());
                }
            }
        }
        Mode::KeptAlive => {
            record.kept_alive = true;
            guard.keep_alive();
            let ttl_ms = u64::try_from(record.ttl.as_millis()).unwrap_or(u64::MAX);
            let until = ctx.clock.deadline(Duration::from_millis(
                ctx.rng.random_range(ttl_ms..=ttl_ms * 5 / 2),
            ));
            'hold: while ctx.clock.now() < until {
                for resource in &resources {
                    if guard.is_lost() {
                        break 'hold;
                    }
                    critical_section(ctx, fenced, guard, record, resource).await;
                }
                let pause = Duration::from_millis(ctx.rng.random_range(0..=ttl_ms / 3));
                let lost = tokio::select! {
                    // In a fixed order: one seed, one history.
                    biased;
                    () = guard.lost() => true,
                    () = ctx.clock.sleep(pause) => false,
                };
                if lost {
                    break;
                }
            }
            if guard.is_lost() {
                record.lost = Some(ctx.at());
            }
        }
    }
}

/// The witness counter `resource`'s holder writes: one per semaphore slot, none for a reader. The
/// kinds that do not exclude each other on one name (see [`CallKind::exclusion`]) write counters
/// of their own, and the fenced ones, which write through a `FencedStore`, one of theirs: a
/// fenced holder paused past its validity is refused only by a store every writer fences, so
/// fenced and unfenced writers of one resource keep apart counters (the classic names, where
/// each kind has names of its own, are unchanged).
fn witness(record: &SimRecord, resource: &str) -> Option<String> {
    match record.kind {
        CallKind::Read => None,
        CallKind::Semaphore => Some(format!("w:{resource}:p{}", record.permit.unwrap_or(u32::MAX))),
        CallKind::Fenced if !resource.starts_with("shared:") => Some(format!("w:{resource}")),
        CallKind::Fenced | CallKind::FencedWrite => Some(format!("wf:{resource}")),
        CallKind::Reentrant | CallKind::Fair if resource.starts_with("shared:") => {
            Some(format!("w:{resource}:{}", record.kind.name()))
        }
        _ => Some(format!("w:{resource}")),
    }
}

/// One read-modify-write of the witness in the store, inside the hold (a reader only reads).
async fn critical_section(
    ctx: &mut ClientCtx,
    fenced: &FencedStore<StoreConn>,
    guard: &Guard,
    record: &mut SimRecord,
    resource: &str,
) {
    let key = witness(record, resource);
    let ttl_ms = u64::try_from(record.ttl.as_millis()).unwrap_or(u64::MAX);
    // A holder that ignores its validity also works for longer than it.
    let longest = if ctx.behaviour.ignore_validity {
        ttl_ms * 2
    } else {
        ttl_ms / 4
    };
    let work = Duration::from_millis(ctx.rng.random_range(0..=longest));
    let ignore = ctx.behaviour.ignore_validity;
    // The guard's validity is on the client's clock: so is the holder's check of it.
    let clock = ctx.clock.clone();
    let valid =
        |margin: Duration| ignore || (!guard.is_lost() && clock.deadline(margin) < guard.valid_until());
    if let (Some(token), Some(key)) = (record.lock.fencing, key.as_deref()) {
        // Fenced: the store itself rejects a holder that paused past its validity.
        let Ok(value) = fenced.read::<u64>(key, token).await else {
            record.stale += 1;
            return;
        };
        if ctx.rng.random_ratio(1, 10) {
            record.paused = true;
            pause(ctx, record.ttl * 2).await;
        } else {
            ctx.clock.sleep(work).await;
        }
        match fenced.write(key, token, value.unwrap_or(0) + 1).await {
            Ok(()) => record.written.push(key.to_owned()),
            Err(_) => record.stale += 1,
        }
        return;
    }
    if !valid(WRITE_MARGIN) {
        return;
    }
    let Some(key) = key else {
        // A reader reads what the writers wrote, and writes nothing.
        let mut conn = ctx.store.clone();
        let _ = conn.get::<_, Option<u64>>(format!("w:{resource}")).await;
        ctx.clock.sleep(work).await;
        return;
    };
    let mut conn = ctx.store.clone();
    let Ok(value) = conn.get::<_, Option<u64>>(&key).await else {
        return;
    };
    if ctx.behaviour.pause_unfenced && ctx.rng.random_ratio(1, 10) {
        record.paused = true;
        pause(ctx, record.ttl * 2).await;
    } else {
        ctx.clock.sleep(work).await;
        if !valid(WRITE_MARGIN) {
            return;
        }
    }
    if conn.set::<_, _, ()>(&key, value.unwrap_or(0) + 1).await.is_ok() {
        record.written.push(key);
    }
}

/// The whole client stops for `length` of true time, as in a GC pause: no timer of its clock
/// completes meanwhile (its watchdog, its request timeouts, its waits), its traffic is held both
/// ways, and the holder, the paused program itself, resumes after it.
async fn pause(ctx: &ClientCtx, length: Duration) {
    ctx.clock.pause(length);
    ctx.wire.freeze(length);
    ctx.clock.resumed().await;
}
