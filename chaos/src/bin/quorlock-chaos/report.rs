//! The demo's summary: one row per phase (masters up, locks acquired, attempts refused by reason,
//! acquire latency), then the checks over the whole run. Refusals for contention are the lock
//! doing its job (another worker held it); refusals for want of a majority are the faults.

use std::fmt::Write as _;
use std::time::Duration;

use crate::workers::PhaseStats;

/// One phase of the demo, as reported.
#[derive(Debug, Clone)]
pub struct Row {
    /// What the phase did.
    pub name: String,
    /// Masters running during the phase.
    pub up: usize,
    /// Masters in the cluster.
    pub masters: usize,
    /// The phase's counters.
    pub stats: PhaseStats,
}

/// The summary table.
pub fn table(rows: &[Row]) -> String {
    let name_width = rows.iter().map(|r| r.name.len()).max().unwrap_or(5).max(5);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<name_width$}  {:>10}  {:>8}  {:>12}  {:>12}  {:>11}  {:>11}",
        "phase", "masters up", "acquired", "refused:", "refused:", "p50 acquire", "p99 acquire"
    );
    let _ = writeln!(
        out,
        "{:<name_width$}  {:>10}  {:>8}  {:>12}  {:>12}  {:>11}  {:>11}",
        "", "", "", "contention", "no majority", "", ""
    );
    for row in rows {
        let mut latencies = row.stats.latencies.clone();
        latencies.sort_unstable();
        let _ = writeln!(
            out,
            "{:<name_width$}  {:>10}  {:>8}  {:>12}  {:>12}  {:>11}  {:>11}",
            row.name,
            format!("{} of {}", row.up, row.masters),
            row.stats.acquired,
            row.stats.contention,
            row.stats.no_majority,
            percentile(&latencies, 50).map_or_else(|| "-".to_owned(), millis),
            percentile(&latencies, 99).map_or_else(|| "-".to_owned(), millis),
        );
    }
    out
}

/// The `p`th percentile of sorted `values` (nearest rank).
fn percentile(sorted: &[Duration], p: usize) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (sorted.len() * p).div_ceil(100).clamp(1, sorted.len());
    sorted.get(rank - 1).copied()
}

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let values: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&values, 50), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&values, 99), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&values[..1], 99), Some(Duration::from_millis(1)));
        assert_eq!(percentile(&[], 50), None);
    }

    #[test]
    fn one_line_per_phase_under_a_header() {
        let rows = vec![Row {
            name: "all up".into(),
            up: 5,
            masters: 5,
            stats: PhaseStats::default(),
        }];
        let t = table(&rows);
        assert_eq!(t.lines().count(), 3);
        assert!(t.lines().next().is_some_and(|l| l.contains("refused:")), "{t}");
        assert!(
            t.lines()
                .nth(1)
                .is_some_and(|l| l.contains("contention") && l.contains("no majority")),
            "{t}"
        );
        assert!(t.lines().nth(2).is_some_and(|l| l.contains("5 of 5")), "{t}");
    }
}
