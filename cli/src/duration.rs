//! Human durations on the command line: `30s`, `500ms`, `2m`, `1h`, or sums such as `1m30s`.
//!
//! Lock TTLs, waits and grace periods are typed by people in shells and cron files; a bare number
//! is refused rather than guessed (seconds? milliseconds?), and the error names the bad value.

use std::time::Duration;

/// Parses a duration made of one or more `<integer><unit>` parts, unit `ms`, `s`, `m` or `h`.
///
/// # Errors
/// A message naming `text` when it is empty, has a number without a unit, an unknown unit, or
/// overflows.
pub fn parse(text: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("invalid duration {text:?}: {why} (examples: 30s, 500ms, 2m, 1m30s)");
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(bad("empty"));
    }
    let mut total = Duration::ZERO;
    let mut rest = trimmed;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad("expected a number"));
        }
        let (number, tail) = rest.split_at(digits);
        let number: u64 = number.parse().map_err(|_| bad("number too large"))?;
        let unit_len = tail.find(|c: char| c.is_ascii_digit()).unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let part = match unit {
            "ms" => Some(Duration::from_millis(number)),
            "s" => Some(Duration::from_secs(number)),
            "m" => number.checked_mul(60).map(Duration::from_secs),
            "h" => number.checked_mul(3600).map(Duration::from_secs),
            "" => return Err(bad("missing unit ms, s, m or h")),
            _ => return Err(bad(&format!("unknown unit {unit:?}, use ms, s, m or h"))),
        };
        total = part
            .and_then(|p| total.checked_add(p))
            .ok_or_else(|| bad("too large"))?;
        rest = tail;
    }
    Ok(total)
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
    fn single_units() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse(" 5s "), Ok(Duration::from_secs(5)));
    }

    #[test]
    fn sums_of_parts() {
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1s250ms"), Ok(Duration::from_millis(1250)));
    }

    #[test]
    fn errors_name_the_value() {
        for bad in [
            "",
            "30",
            "5x",
            "s",
            "1.5s",
            "-1s",
            "1m 30s",
            "99999999999999999999s",
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        assert!(parse("30").unwrap_err().contains("missing unit"));
        assert!(parse(&format!("{}h", u64::MAX / 60)).is_err());
    }

    #[test]
    fn shown_for_people() {
        assert_eq!(show(Duration::from_millis(950)), "950ms");
        assert_eq!(show(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(show(Duration::from_secs(245)), "4m05s");
    }
}
