//! Durations on the command line, in one grammar: the `humantime` crate's (`30s`, `500ms`, `2m`,
//! `1h`, `1m30s`, `1.5s`).
//!
//! Lock TTLs, waits and grace periods are typed by people in shells and cron files; a bare number
//! is refused rather than guessed (seconds? milliseconds?), and every error names the bad value.

use std::time::Duration;

/// Examples shown with every refusal.
const EXAMPLES: &str = "examples: 30s, 500ms, 2m, 1m30s";

/// Parses a duration such as `30s`, `500ms` or `1m30s`.
///
/// # Errors
/// A message naming `text` when it is a bare number (no unit), or not a duration at all.
pub fn parse(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "invalid duration {text:?}: a number needs a unit, ms, s, m or h ({EXAMPLES})"
        ));
    }
    humantime::parse_duration(trimmed).map_err(|err| format!("invalid duration {text:?}: {err} ({EXAMPLES})"))
}

/// As [`parse`], for a duration that must not be zero (a TTL, a node timeout).
///
/// # Errors
/// As [`parse`], and a message naming `text` when it adds up to zero.
pub fn positive(text: &str) -> Result<Duration, String> {
    match parse(text)? {
        Duration::ZERO => Err(format!("invalid duration {text:?}: must be greater than zero")),
        d => Ok(d),
    }
}

/// Formats a duration the way people read it: `950ms`, `12.3s`, `4m05s`.
pub fn show(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        let secs = d.as_secs();
        format!("{}m{:02}s", secs / 60, secs % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_positive_duration_is_not_zero() {
        assert_eq!(positive("1ms"), Ok(Duration::from_millis(1)));
        assert!(positive("0s").is_err_and(|e| e.contains("\"0s\"") && e.contains("greater than zero")));
        assert!(positive("0m0ms").is_err());
        assert!(positive("5").is_err(), "still a duration first");
    }

    #[test]
    fn units_sums_and_fractions() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse(" 5s "), Ok(Duration::from_secs(5)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1s250ms"), Ok(Duration::from_millis(1250)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn bare_numbers_are_refused_naming_the_value() {
        for bare in ["30", "0", "1.5", " 7 "] {
            let err = parse(bare).expect_err(bare);
            assert!(
                err.contains(&format!("{bare:?}")) && err.contains("needs a unit"),
                "{err}"
            );
        }
    }

    #[test]
    fn errors_name_the_value() {
        for bad in ["", "5x", "s", "-1s", "99999999999999999999s"] {
            let err = parse(bad).expect_err(bad);
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn shown_for_people() {
        assert_eq!(show(Duration::from_millis(950)), "950ms");
        assert_eq!(show(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(show(Duration::from_secs(245)), "4m05s");
    }
}
