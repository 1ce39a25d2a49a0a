//! The runtime downgrade, for real: master 0 started durable (AOF, `appendfsync always`, as every
//! master of `compose.operations.yml`) has its persistence lowered in two `CONFIG SET`s, the way
//! an operator eases a disk during an incident. First `appendfsync no`: writes still reach the AOF
//! file, now without fsync, and a client's check of the master sees it and records on the master
//! that this incarnation was not durable throughout (`durable 0` in `quorlock:master`), a write
//! that reaches the file like any other. Then `appendonly no`: from here on nothing reaches the
//! file. Then SIGKILL and a restart from the volume: the master comes back with what the file
//! had, the record among it, without every write made since (the first probe's key), and reports
//! the `appendonly yes` and `appendfsync always` of its command line, as if nothing had happened.
//!
//! A SIGKILL alone loses nothing the kernel already has, so a real loss needs the AOF switched
//! off (or a machine crash, which a container cannot have); a check's record write must reach the
//! file before that, which is what the first step leaves room for. A downgrade that no check saw
//! before the crash is out of the library's model (`docs/safety.md`, *Operations*).

use std::time::{Duration, Instant};

use quorlock::config::MASTER_RECORD_KEY;

use super::super::Compose;
use super::reach::{command, info_field};
use crate::cluster::DataMode;
use crate::error::HarnessError;

/// Waits until master 0 has been up longer than `grace` (the probes' restart grace, their
/// longest TTL), so that the first probe's check does not keep it out of its majority as a master
/// that started within the grace and now reports no `appendfsync always`: the first probe must
/// hold through it for the crash to take its key. Returns what it waited for, in words.
///
/// # Errors
/// When the master cannot be read or does not report its uptime.
pub(crate) async fn up_past(compose: &Compose, grace: Duration) -> Result<String, HarnessError> {
    let started = Instant::now();
    loop {
        let info: String = command(compose, 0, &["INFO", "server"]).await?;
        let uptime: u64 = info_field(&info, "uptime_in_seconds")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| HarnessError::Workload(format!("m0 reports no uptime_in_seconds: {info}")))?;
        if Duration::from_secs(uptime) > grace {
            return Ok(format!(
                "m0 up {uptime}s, past the probes' grace of {grace:?} (waited {:.1}s)",
                started.elapsed().as_secs_f64()
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `CONFIG SET appendfsync no` on master 0.
///
/// # Errors
/// When the master refuses.
pub(crate) async fn lower_fsync(compose: &Compose) -> Result<String, HarnessError> {
    let _: () = command(compose, 0, &["CONFIG", "SET", "appendfsync", "no"]).await?;
    Ok("CONFIG SET appendfsync no on m0".into())
}

/// Checks that a client's check recorded the downgrade on master 0 (`durable 0` in its record
/// under `prefix`), before the AOF is switched off.
///
/// # Errors
/// When the record does not say so: the downgrade went unseen, and the run would show nothing the
/// library claims to cover.
pub(crate) async fn recorded(compose: &Compose, prefix: &str) -> Result<String, HarnessError> {
    let key = format!("{prefix}{MASTER_RECORD_KEY}");
    let durable: Option<String> = command(compose, 0, &["HGET", key.as_str(), "durable"]).await?;
    if durable.as_deref() != Some("0") {
        return Err(HarnessError::Workload(format!(
            "after a client's check, m0's record {key} says durable {durable:?}, not 0: the downgrade went unseen"
        )));
    }
    Ok(format!("a check recorded it in m0's {key} (durable 0)"))
}

/// `CONFIG SET appendonly no` on master 0: nothing reaches its AOF from here.
///
/// # Errors
/// When the master refuses.
pub(crate) async fn aof_off(compose: &Compose) -> Result<String, HarnessError> {
    let _: () = command(compose, 0, &["CONFIG", "SET", "appendonly", "no"]).await?;
    Ok("CONFIG SET appendonly no on m0: nothing reaches its AOF from here".into())
}

/// Kills master 0 with SIGKILL and starts it again from its volume; when `key` was held through
/// it (`held`), checks that the restarted master lacks it. Returns what it did, in words.
///
/// # Errors
/// When docker fails, the master does not come back, or it kept the key after all (the
/// counterexample could not be built).
pub(crate) async fn crash(compose: &Compose, key: &str, held: bool) -> Result<String, HarnessError> {
    compose.restart(0, DataMode::Keep).await?;
    let has: i64 = command(compose, 0, &["EXISTS", key]).await?;
    if held && has != 0 {
        return Err(HarnessError::Workload(format!(
            "m0 came back with {key}, which was set after its AOF was switched off: the crash lost nothing"
        )));
    }
    let info: String = command(compose, 0, &["INFO", "persistence"]).await?;
    let fsync: Vec<String> = command(compose, 0, &["CONFIG", "GET", "appendfsync"]).await?;
    Ok(format!(
        "m0 killed (SIGKILL) and restarted from its volume, reporting aof_enabled {} and appendfsync {}; {}",
        info_field(&info, "aof_enabled").unwrap_or("?"),
        fsync.get(1).map_or("?", String::as_str),
        if held {
            format!("it lacks {key}, which the first probe holds")
        } else {
            "the first probe held nothing".to_string()
        }
    ))
}
