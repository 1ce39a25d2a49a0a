//! Numbers as Redis reads and writes them: strict integer parsing (`string2ll`), float parsing
//! for scores and ranges, and C's `%.17g`, which Redis uses for scores and for Lua numbers passed
//! to `redis.call`. Replies must match the real server byte for byte, so these follow its rules
//! rather than Rust's.

/// Parses a signed 64-bit integer the way Redis's `string2ll` does: optional `-`, no `+`, no
/// leading zeros, no spaces, no overflow.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    // Accumulate as a negative number so that i64::MIN fits.
    let mut value: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(c - b'0'))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// Parses a float the way Redis reads scores (`strtod` over the whole argument): no leading
/// space, no trailing garbage, no NaN, no overflow to infinity from a finite literal.
pub(crate) fn parse_f64(s: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(s).ok()?;
    if text.is_empty() || text.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let value: f64 = text.parse().ok()?;
    if value.is_nan() {
        return None;
    }
    if value.is_infinite() {
        let body = text.trim_start_matches(['+', '-']).to_ascii_lowercase();
        if body != "inf" && body != "infinity" {
            return None;
        }
    }
    Some(value)
}

/// Formats `x` as C's `printf("%.17g", x)` does with glibc.
pub(crate) fn format_g17(x: f64) -> String {
    let mut out = String::new();
    push_g17(&mut out, x);
    out
}

/// Appends `x` formatted as C's `printf("%.17g", x)`.
pub(crate) fn push_g17(out: &mut String, x: f64) {
    const PRECISION: i32 = 17;
    if x.is_nan() {
        out.push_str(if x.is_sign_negative() { "-nan" } else { "nan" });
        return;
    }
    if x.is_infinite() {
        out.push_str(if x < 0.0 { "-inf" } else { "inf" });
        return;
    }
    if x == 0.0 {
        out.push_str(if x.is_sign_negative() { "-0" } else { "0" });
        return;
    }
    // The exponent %g decides on is the one of the %e conversion at precision P - 1.
    let sci = format!("{:.*e}", (PRECISION - 1) as usize, x);
    let (mantissa, exponent) = match sci.split_once('e') {
        Some(parts) => parts,
        None => {
            out.push_str(&sci);
            return;
        }
    };
    let exponent: i32 = exponent.parse().unwrap_or(0);
    if !(-4..PRECISION).contains(&exponent) {
        out.push_str(strip_fraction_zeros(mantissa));
        out.push('e');
        out.push(if exponent < 0 { '-' } else { '+' });
        let magnitude = exponent.unsigned_abs();
        if magnitude < 10 {
            out.push('0');
        }
        out.push_str(&magnitude.to_string());
    } else {
        let decimals = (PRECISION - 1 - exponent) as usize;
        let fixed = format!("{x:.decimals$}");
        out.push_str(strip_fraction_zeros(&fixed));
    }
}

/// Drops trailing zeros of a fraction, and the point if nothing is left after it.
fn strip_fraction_zeros(s: &str) -> &str {
    if !s.contains('.') {
        return s;
    }
    s.trim_end_matches('0').trim_end_matches('.')
}

/// A Lua number as Redis turns it into an integer reply: a C cast to `long long`, which truncates
/// toward zero and gives `i64::MIN` for NaN and out-of-range values on x86-64.
pub(crate) fn lua_number_to_i64(x: f64) -> i64 {
    // 2^63 exactly: the first double past i64::MAX.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if x.is_nan() || !(-LIMIT..LIMIT).contains(&x) {
        i64::MIN
    } else {
        x as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_like_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"+1",
            b"01",
            b"-0",
            b" 1",
            b"1 ",
            b"1.0",
            b"9223372036854775808",
            b"-",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn floats_parse_like_scores() {
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_f64(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_f64(b"1e3"), Some(1000.0));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b"1e400"), None);
        assert_eq!(parse_f64(b" 1"), None);
        assert_eq!(parse_f64(b"x"), None);
    }

    #[test]
    fn g17_matches_glibc() {
        let cases = [
            (1.5, "1.5"),
            (1e20, "1e+20"),
            (0.1, "0.10000000000000001"),
            (-0.0, "-0"),
            (9007199254740992.0, "9007199254740992"),
            (123456789012345678.0, "1.2345678901234568e+17"),
            (2.5e-3, "0.0025000000000000001"),
            (1e-5, "1.0000000000000001e-05"),
            (100.0, "100"),
            (1700000000123.0, "1700000000123"),
            (f64::INFINITY, "inf"),
            (1e-4, "0.0001"),
            (1e16, "10000000000000000"),
            (1e17, "1e+17"),
            (1e100, "1e+100"),
        ];
        for (x, want) in cases {
            assert_eq!(format_g17(x), want, "{x}");
        }
    }

    #[test]
    fn lua_numbers_truncate_like_a_c_cast() {
        assert_eq!(lua_number_to_i64(3.99), 3);
        assert_eq!(lua_number_to_i64(-3.99), -3);
        assert_eq!(lua_number_to_i64(1e20), i64::MIN);
        assert_eq!(lua_number_to_i64(f64::NAN), i64::MIN);
        assert_eq!(lua_number_to_i64(-9.3e18), i64::MIN);
    }
}
