//! Secrets kept off the command line, where every user of the machine can read them (`ps`,
//! `/proc/PID/cmdline`): the masters from a file, a password from the environment, and
//! `release`'s token from stdin.
//!
//! - `--nodes-file FILE`: one URL a line; blank lines and `#` comments are skipped.
//! - `QUORLOCK_PASSWORD`, else `REDISCLI_AUTH` (the variable `redis-cli` reads): the password for
//!   every `redis://` or `rediss://` master whose URL carries none.
//! - The token: the TOKEN argument, else `QUORLOCK_TOKEN` (clap reads both), else the first word
//!   of stdin's first line, so `quorlock acquire --fence KEY | quorlock release KEY` works.

use std::io::BufRead;
use std::path::Path;

use url::Url;

use crate::args::{PASSWORD_ENVS, TOKEN_ENV};
use crate::exit::{Failure, CONFIG, USAGE};

/// The master URLs listed in `path`, in order.
///
/// # Errors
/// A [`CONFIG`] failure naming the file when it cannot be read.
pub fn nodes_file(path: &Path) -> Result<Vec<String>, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::new(
            CONFIG,
            format!("cannot read --nodes-file {}: {e}", path.display()),
        )
    })?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect())
}

/// The password from the environment, if one is set: the first of [`PASSWORD_ENVS`] that is.
pub fn password() -> Option<String> {
    PASSWORD_ENVS
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|value| !value.is_empty()))
}

/// `url` with `password` added, when it is a `redis://` or `rediss://` URL with a host and no
/// password of its own; unchanged otherwise (a Unix socket URL, or one that cannot be parsed,
/// which the library then refuses with its own message).
pub fn with_password(url: &str, password: &str) -> String {
    let Ok(mut parsed) = Url::parse(url) else {
        return url.to_owned();
    };
    let network = matches!(parsed.scheme(), "redis" | "rediss") && parsed.has_host();
    if !network || parsed.password().is_some() {
        return url.to_owned();
    }
    match parsed.set_password(Some(password)) {
        Ok(()) => parsed.into(),
        Err(()) => url.to_owned(),
    }
}

/// The token to release: `given` (the argument or `QUORLOCK_TOKEN`), else the first word of
/// `stdin`'s first line.
///
/// # Errors
/// A [`USAGE`] failure when there is no token anywhere.
pub fn token(given: Option<String>, stdin: impl BufRead) -> Result<String, Failure> {
    if let Some(token) = given.filter(|t| !t.trim().is_empty()) {
        return Ok(token.trim().to_owned());
    }
    let mut first = String::new();
    let mut stdin = stdin;
    // An unreadable stdin (closed, a directory) is the same as an empty one.
    let _ = stdin.read_line(&mut first);
    first.split_whitespace().next().map(str::to_owned).ok_or_else(|| {
        Failure::new(
            USAGE,
            format!("no token to release: give it as TOKEN, in {TOKEN_ENV}, or on stdin"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_goes_only_where_none_is() {
        assert_eq!(
            with_password("redis://10.0.0.1:6379", "s3cret"),
            "redis://:s3cret@10.0.0.1:6379"
        );
        assert_eq!(
            with_password("rediss://app@h:6380/2", "s3cret"),
            "rediss://app:s3cret@h:6380/2"
        );
        assert_eq!(with_password("redis://u:own@h:1", "s3cret"), "redis://u:own@h:1");
        assert_eq!(
            with_password("redis+unix:///tmp/r.sock", "s3cret"),
            "redis+unix:///tmp/r.sock"
        );
        assert_eq!(with_password("not a url", "s3cret"), "not a url");
    }

    #[test]
    fn the_token_comes_from_the_argument_else_stdins_first_word() {
        assert_eq!(token(Some(" abc ".into()), &b"zzz"[..]), Ok("abc".into()));
        assert_eq!(token(None, &b"abc 42\nnext\n"[..]), Ok("abc".into()));
        assert_eq!(token(Some(String::new()), &b"abc\n"[..]), Ok("abc".into()));
        let err = token(None, &b"\n"[..]).expect_err("no token");
        assert_eq!(err.code, USAGE);
        assert!(err.message.contains(TOKEN_ENV), "{}", err.message);
    }

    #[test]
    fn a_nodes_file_skips_blanks_and_comments() {
        let path = std::env::temp_dir().join(format!("quorlock-nodes-{}", std::process::id()));
        std::fs::write(&path, "# masters\nredis://a:1\n\n  redis://b:2  \n#redis://c:3\n").expect("write");
        assert_eq!(
            nodes_file(&path),
            Ok(vec!["redis://a:1".into(), "redis://b:2".into()])
        );
        std::fs::remove_file(&path).expect("remove");
        let err = nodes_file(&path).expect_err("gone");
        assert_eq!(err.code, CONFIG);
        assert!(
            err.message.contains(&path.display().to_string()),
            "{}",
            err.message
        );
    }
}
