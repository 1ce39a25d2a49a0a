//! The first fenced acquire on brand-new masters sets their fencing counters up quietly: a new
//! resource is not a damaged master. A master that lost its counter while the others kept theirs
//! still gets its warning. One test per file: it installs the process's log subscriber.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use common::{builder, cluster};
use quorlock_chaos::DataMode;

const TTL: Duration = Duration::from_secs(5);

/// Collects every log line written at WARN and above.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }

    fn clear(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clear();
    }
}

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_new_resource_is_quiet_and_a_master_that_lost_its_counter_is_not() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let mut c = cluster(3).await;
    let locks = builder(&c)
        .restart_grace(Duration::from_millis(500))
        .wait(Duration::from_secs(8))
        .build()
        .await
        .expect("build");
    // The masters run without replicas and with appendfsync always: build warns about nothing.
    captured.clear();
    let g = locks
        .lock("brand-new", TTL)
        .fenced()
        .acquire()
        .await
        .expect("acquire");
    // Counters start at the wall clock in microseconds (so that a start after every master lost
    // its counter is above every token issued before); the first token is one above.
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("time")
        .as_micros() as u64;
    let token = g.fencing_token().expect("a token");
    assert!(
        token <= now_us && token + 60_000_000 > now_us,
        "counters start at the time in microseconds: {token} against {now_us}"
    );
    g.release().await.expect("release");
    let quiet = captured.text();
    assert!(
        !quiet.contains("fencing"),
        "the first fenced acquire warned:\n{quiet}"
    );

    // Master 0 comes back empty while 1 and 2 keep their counters: that one is worth a warning.
    c.restart(0, DataMode::Wipe).await.expect("restart");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !captured
        .text()
        .contains("fencing counter missing on a master while others have one")
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no warning about the lost counter:\n{}",
            captured.text()
        );
        let g = locks
            .lock("brand-new", TTL)
            .fenced()
            .acquire()
            .await
            .expect("acquire");
        g.release().await.expect("release");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
