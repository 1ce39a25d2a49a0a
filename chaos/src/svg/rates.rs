//! The rate panel, on the timeline's time axis: acquisitions and refusals by reason per
//! [`BUCKET`], and the p99 acquire latency.

use std::fmt::Write as _;
use std::time::Duration;

use super::canvas::Canvas;
use super::layout::{
    Refusal, RefusalKind, Scale, ACQUIRED, BUCKET, CONTENTION, NO_MAJORITY, P99, PANEL, PANEL_GAP,
};
use crate::history::LockRecord;

/// Per [`BUCKET`] of `[0, run_end]`: acquisitions, refusals by reason, and the p99 acquire
/// latency of the acquisitions (nearest rank; `None` without any).
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    /// Acquisitions per bucket.
    pub acquired: Vec<usize>,
    /// Refusals for contention per bucket.
    pub contention: Vec<usize>,
    /// Refusals for want of a majority per bucket.
    pub no_majority: Vec<usize>,
    /// The p99 acquire latency per bucket.
    pub p99: Vec<Option<Duration>>,
}

/// The rates of `records` and `refusals` over `[0, run_end]`.
pub fn rates(records: &[LockRecord], refusals: &[Refusal], run_end: Duration) -> Rates {
    let n = (run_end.as_nanos() / BUCKET.as_nanos()) as usize + 1;
    let bucket = |t: Duration| ((t.as_nanos() / BUCKET.as_nanos()) as usize).min(n - 1);
    let mut latencies = vec![Vec::new(); n];
    let mut rates = Rates {
        acquired: vec![0; n],
        contention: vec![0; n],
        no_majority: vec![0; n],
        p99: vec![None; n],
    };
    for record in records {
        if let Some(acquired) = record.acquired {
            rates.acquired[bucket(acquired)] += 1;
            latencies[bucket(acquired)].push(acquired.saturating_sub(record.invoked));
        }
    }
    for refusal in refusals {
        match refusal.kind {
            RefusalKind::Contention => rates.contention[bucket(refusal.at)] += 1,
            RefusalKind::NoMajority => rates.no_majority[bucket(refusal.at)] += 1,
        }
    }
    for (p99, mut values) in rates.p99.iter_mut().zip(latencies) {
        values.sort_unstable();
        if !values.is_empty() {
            let rank = (values.len() * 99).div_ceil(100).clamp(1, values.len());
            *p99 = values.get(rank - 1).copied();
        }
    }
    rates
}

/// The rate panel from `top`: returns its bottom.
pub(super) fn rate_panel(
    c: &mut Canvas,
    records: &[LockRecord],
    refusals: &[Refusal],
    run_end: Duration,
    x: &Scale,
    top: f64,
) -> f64 {
    let r = rates(records, refusals, run_end);
    let bar_x = |i: usize| x.at(BUCKET * i as u32);
    let bar_w = |i: usize| (bar_x(i + 1) - bar_x(i) - 0.5).max(0.5);
    let _ = writeln!(c.out, r#"<g class="rate-panel">"#);
    // Acquisitions.
    let max = r.acquired.iter().copied().max().unwrap_or(0).max(1) as f64;
    panel_frame(c, x, top, "acquired / 100 ms", &format!("{max:.0}"));
    for (i, &n) in r.acquired.iter().enumerate().filter(|(_, n)| **n > 0) {
        let h = n as f64 / max * (PANEL - 4.0);
        c.rect_attrs(
            "rate-acquired",
            bar_x(i),
            top + PANEL - h,
            bar_w(i),
            h,
            &format!(r#"fill="{ACQUIRED}""#),
            None,
        );
    }
    // Refusals, stacked by reason.
    let top2 = top + PANEL + PANEL_GAP;
    let max = r
        .contention
        .iter()
        .zip(&r.no_majority)
        .map(|(a, b)| a + b)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    panel_frame(c, x, top2, "refused / 100 ms", &format!("{max:.0}"));
    for i in 0..r.contention.len() {
        let hc = r.contention[i] as f64 / max * (PANEL - 4.0);
        let hn = r.no_majority[i] as f64 / max * (PANEL - 4.0);
        if hn > 0.0 {
            c.rect_attrs(
                "rate-no-majority",
                bar_x(i),
                top2 + PANEL - hn,
                bar_w(i),
                hn,
                &format!(r#"fill="{NO_MAJORITY}""#),
                None,
            );
        }
        if hc > 0.0 {
            let y = top2 + PANEL - hn - hc;
            c.rect_attrs(
                "rate-contention",
                bar_x(i),
                y,
                bar_w(i),
                hc,
                &format!(r#"fill="{CONTENTION}""#),
                None,
            );
        }
    }
    // p99 latency, a line broken where a bucket had no acquisition.
    let top3 = top2 + PANEL + PANEL_GAP;
    let max = r
        .p99
        .iter()
        .flatten()
        .max()
        .copied()
        .unwrap_or(Duration::from_millis(1));
    let max_ms = (max.as_secs_f64() * 1e3).max(0.001);
    panel_frame(c, x, top3, "p99 acquire latency", &format!("{max_ms:.1} ms"));
    let mut segment: Vec<String> = Vec::new();
    let flush = |segment: &mut Vec<String>, c: &mut Canvas| {
        if !segment.is_empty() {
            let _ = writeln!(
                c.out,
                r#"<polyline class="rate-p99" points="{}" fill="none" stroke="{P99}" stroke-width="1.5"/>"#,
                segment.join(" ")
            );
            segment.clear();
        }
    };
    for (i, p99) in r.p99.iter().enumerate() {
        match p99 {
            Some(p) => {
                let y = top3 + PANEL - (p.as_secs_f64() * 1e3 / max_ms) * (PANEL - 4.0);
                segment.push(format!("{:.1},{y:.1}", bar_x(i) + bar_w(i) / 2.0));
            }
            None => flush(&mut segment, c),
        }
    }
    flush(&mut segment, c);
    let _ = writeln!(c.out, "</g>");
    top3 + PANEL
}

/// A panel's background, its name in the margin and its scale's top value.
fn panel_frame(c: &mut Canvas, x: &Scale, top: f64, name: &str, max: &str) {
    c.rect_attrs(
        "panel",
        x.left,
        top,
        x.width,
        PANEL,
        r##"fill="#fafafa" fill-opacity="0.5" stroke="#dddddd""##,
        None,
    );
    c.text(
        "panel-label",
        x.left - 6.0,
        top + PANEL / 2.0 + 4.0,
        "end",
        "#333",
        name,
    );
    c.text(
        "panel-max",
        x.left - 6.0,
        top + 10.0,
        "end",
        "#777",
        &format!("max {max}"),
    );
}
