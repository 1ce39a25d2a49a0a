//! The `metrics` feature: a few locks taken, refused and released, then every quorlock metric
//! recorded, and each master's health.
//!
//! `cargo run --example metrics --features metrics` against `docker compose up`, or with
//! `QUORLOCK_NODES` set. This example records into `metrics-util`'s debugging recorder and prints
//! it; a service installs an exporter instead (for Prometheus, `metrics-exporter-prometheus`).
//! Every name and label is listed in docs/metrics.md.

mod common;

use std::time::Duration;

use metrics_util::debugging::DebuggingRecorder;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder.install()?;

    let locks = common::connect().await?;
    let ttl = Duration::from_secs(5);
    let guard = locks.acquire("example:metrics", ttl).await?;
    let _ = locks.try_acquire("example:metrics", ttl).await;
    let _ = locks
        .lock("example:metrics", ttl)
        .wait(Duration::from_millis(200))
        .acquire()
        .await;
    guard.release().await?;
    locks.settle().await;

    let mut rows: Vec<String> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let key = key.key();
            let labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={:?}", l.key(), l.value()))
                .collect();
            format!("{}{{{}}} {value:?}", key.name(), labels.join(","))
        })
        .collect();
    rows.sort();
    for row in rows {
        println!("{row}");
    }
    for master in locks.health().masters {
        println!(
            "{}: ignored {:?}, round trip {:?}, last error {:?}",
            master.addr, master.ignored, master.round_trip, master.last_error
        );
    }
    Ok(())
}
