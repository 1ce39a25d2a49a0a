//! Durations on the command line (`--duration`, `--ttl`, `--phase`), in the grammar of the
//! `quorlock` command: the `humantime` crate's (`30s`, `1500ms`, `2m`, `1m30s`, `1.5s`). A bare
//! number is refused, naming the value, rather than guessed.

use std::time::Duration;

/// Parses a duration such as `30s`, `1500ms` or `2m`.
///
/// # Errors
/// A message naming `text` when it is a bare number (no unit), or not a duration at all.
pub fn parse(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "invalid duration {text:?}: a number needs a unit, ms, s, m or h (examples: 30s, 1500ms, 2m)"
        ));
    }
    humantime::parse_duration(trimmed)
        .map_err(|err| format!("invalid duration {text:?}: {err} (examples: 30s, 1500ms, 2m)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("1500ms"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
    }

    #[test]
    fn bare_numbers_and_garbage_are_refused_naming_the_value() {
        for bad in ["7", "0", "2.5", "fast", "3x", ""] {
            let err = parse(bad).expect_err(bad);
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        assert!(parse("7").unwrap_err().contains("needs a unit"));
    }
}
