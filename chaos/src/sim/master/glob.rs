//! Glob-style patterns as Redis matches them in `KEYS`, `SCAN MATCH` and `CONFIG GET`: `*`, `?`,
//! `[abc]`, `[^abc]`, `[a-z]` and `\` escapes, over bytes.

/// `true` when `text` matches `pattern`.
pub(crate) fn matches(pattern: &[u8], text: &[u8]) -> bool {
    match_from(pattern, text, 0)
}

/// Recursion depth guard: a pattern of many stars cannot blow the stack.
const MAX_DEPTH: usize = 1000;

fn match_from(mut p: &[u8], mut t: &[u8], depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    while let Some(&c) = p.first() {
        match c {
            b'*' => {
                while p.len() > 1 && p[1] == b'*' {
                    p = &p[1..];
                }
                if p.len() == 1 {
                    return true;
                }
                for start in 0..=t.len() {
                    if match_from(&p[1..], &t[start..], depth + 1) {
                        return true;
                    }
                }
                return false;
            }
            b'?' => {
                if t.is_empty() {
                    return false;
                }
                t = &t[1..];
                p = &p[1..];
            }
            b'[' => {
                let Some(&ch) = t.first() else {
                    return false;
                };
                let (matched, rest) = match_class(&p[1..], ch);
                if !matched {
                    return false;
                }
                p = rest;
                t = &t[1..];
            }
            b'\\' if p.len() >= 2 => {
                if t.first() != Some(&p[1]) {
                    return false;
                }
                p = &p[2..];
                t = &t[1..];
            }
            _ => {
                if t.first() != Some(&c) {
                    return false;
                }
                p = &p[1..];
                t = &t[1..];
            }
        }
    }
    t.is_empty()
}

/// Matches `ch` against a class whose body starts at `p` (just past `[`); returns whether it
/// matched and the pattern after the closing `]` (or the end, for an unclosed class).
fn match_class(mut p: &[u8], ch: u8) -> (bool, &[u8]) {
    let negate = p.first() == Some(&b'^');
    if negate {
        p = &p[1..];
    }
    let mut matched = false;
    loop {
        match p {
            [] => break,
            [b']', rest @ ..] => {
                p = rest;
                break;
            }
            [b'\\', escaped, rest @ ..] => {
                matched |= *escaped == ch;
                p = rest;
            }
            [lo, b'-', hi, rest @ ..] if *hi != b']' => {
                let (lo, hi) = if lo <= hi { (*lo, *hi) } else { (*hi, *lo) };
                matched |= (lo..=hi).contains(&ch);
                p = rest;
            }
            [c, rest @ ..] => {
                matched |= *c == ch;
                p = rest;
            }
        }
    }
    (matched != negate, p)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs() {
        assert!(matches(b"*", b""));
        assert!(matches(b"*", b"anything"));
        assert!(matches(b"lock:*", b"lock:a"));
        assert!(!matches(b"lock:*", b"fence:a"));
        assert!(matches(b"h?llo", b"hello"));
        assert!(!matches(b"h?llo", b"hllo"));
        assert!(matches(b"h[ae]llo", b"hallo"));
        assert!(!matches(b"h[^e]llo", b"hello"));
        assert!(matches(b"h[a-c]llo", b"hbllo"));
        assert!(matches(b"a\\*b", b"a*b"));
        assert!(!matches(b"a\\*b", b"axb"));
        assert!(matches(b"*a*b*", b"xxaxxbxx"));
        assert!(matches(b"append*", b"appendfsync"));
    }
}
