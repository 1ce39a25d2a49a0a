//! Credentials and the `redis://` URLs built from them, shared by every backend and the
//! proxies so that all URLs handed to clients encode credentials the same way.

use std::fmt::Write as _;

/// What a client must present to a master.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// ACL user name; `None` means the default user.
    pub user: Option<String>,
    /// Password of that user; `None` means no AUTH.
    pub password: Option<String>,
}

impl Credentials {
    /// `redis://[user:pass@|:pass@]host:port`, with user and password percent-encoded.
    pub fn url(&self, host: &str, port: u16) -> String {
        match (&self.user, &self.password) {
            (Some(user), Some(pass)) => format!(
                "redis://{}:{}@{host}:{port}",
                percent_encode(user),
                percent_encode(pass)
            ),
            (Some(user), None) => format!("redis://{}@{host}:{port}", percent_encode(user)),
            (None, Some(pass)) => format!("redis://:{}@{host}:{port}", percent_encode(pass)),
            (None, None) => format!("redis://{host}:{port}"),
        }
    }
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_carry_percent_encoded_credentials() {
        let mut creds = Credentials::default();
        assert_eq!(creds.url("h", 1), "redis://h:1");
        creds.password = Some("p@ss word".into());
        assert_eq!(creds.url("h", 1), "redis://:p%40ss%20word@h:1");
        creds.user = Some("alice".into());
        creds.password = Some("s3cr:t".into());
        assert_eq!(creds.url("h", 1), "redis://alice:s3cr%3At@h:1");
    }
}
