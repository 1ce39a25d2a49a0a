//! What went wrong with one master: the kind of failure, the master it happened on, and the
//! sorting of a redis-rs error into what it means for a lock, with credentials kept out.

use std::fmt;
use std::time::Duration;

use super::Elapsed;

/// What went wrong with one master during one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeErrorKind {
    /// The key is held by another token (acquire), or holds another token (extend, release).
    Held,
    /// The key is absent: our lock there has expired or was never set.
    Absent,
    /// The lock is free, but other waiters are ahead of us in a fair lock's queue.
    Queued,
    /// The key holds a value of another type (a hash, a list...), so it is not a lock.
    WrongType,
    /// The master did not answer within the per-node timeout.
    Timeout,
    /// The connection failed or was refused.
    Connection(String),
    /// The master rejected our credentials.
    Auth(String),
    /// The master answered with an error.
    Server(String),
    /// The master answered something that is not a valid reply to our command.
    Protocol(String),
    /// The master restarted `uptime` ago, within the grace period, and does not persist with
    /// `appendfsync always`: it may have lost keys, so its vote is ignored for `remaining`.
    Restarted {
        /// How long ago it (re)started.
        uptime: Duration,
        /// How long its votes are still ignored.
        remaining: Duration,
    },
    /// The connection to the master was re-established and its identity (`run_id`, uptime) is
    /// being checked again; its vote is ignored until then.
    Unverified,
    /// The master's fencing counter is missing or behind (it lost data); its vote in fenced
    /// acquisitions is ignored until the counter is repaired from a majority.
    FenceRepair,
}

impl NodeErrorKind {
    /// Whether this is a refusal by a healthy master rather than a fault (worth retrying later).
    pub fn is_contention(&self) -> bool {
        matches!(self, NodeErrorKind::Held | NodeErrorKind::Queued)
    }

    /// Whether waiting will not help: rejected credentials, or a key that is not a lock.
    pub fn is_permanent(&self) -> bool {
        matches!(self, NodeErrorKind::Auth(_) | NodeErrorKind::WrongType)
    }

    /// Whether the master could not be reached in time.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, NodeErrorKind::Timeout | NodeErrorKind::Connection(_))
    }
}

impl fmt::Display for NodeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeErrorKind::Held => f.write_str("held by another holder"),
            NodeErrorKind::Absent => f.write_str("key absent (expired)"),
            NodeErrorKind::Queued => f.write_str("other waiters are ahead in the fair queue"),
            NodeErrorKind::WrongType => {
                f.write_str("WRONGTYPE: the key holds a non-string value, not a lock")
            }
            NodeErrorKind::Timeout => f.write_str("timed out"),
            NodeErrorKind::Connection(m) => write!(f, "connection failed: {m}"),
            NodeErrorKind::Auth(m) => write!(f, "authentication failed: {m}"),
            NodeErrorKind::Server(m) => write!(f, "server error: {m}"),
            NodeErrorKind::Protocol(m) => write!(f, "unexpected reply: {m}"),
            NodeErrorKind::Restarted { uptime, remaining } => write!(
                f,
                "restarted {} ago without appendfsync always; vote ignored for another {}",
                Elapsed(*uptime),
                Elapsed(*remaining)
            ),
            NodeErrorKind::Unverified => {
                f.write_str("vote ignored until its run_id and uptime are read on this connection (after a reconnect, or while its checks fail)")
            }
            NodeErrorKind::FenceRepair => f.write_str(
                "fencing counter missing or behind (lost data); vote ignored until it is repaired",
            ),
        }
    }
}

/// One master's failure: its index in the configured list, its address, and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFailure {
    /// The master's position in the list given to the builder.
    pub node: usize,
    /// The master's address, `host:port`, without credentials.
    pub addr: String,
    /// What went wrong.
    pub kind: NodeErrorKind,
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "master {} ({}): {}", self.node, self.addr, self.kind)
    }
}

/// Formats a list of node failures for an error message.
pub(crate) struct Failures<'a>(&'a [NodeFailure]);

impl fmt::Display for Failures<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return Ok(());
        }
        f.write_str(": ")?;
        for (i, failure) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{failure}")?;
        }
        Ok(())
    }
}

pub(crate) fn list(failures: &[NodeFailure]) -> Failures<'_> {
    Failures(failures)
}

/// Sorts a redis-rs error into what it means for the lock.
pub(crate) fn classify(err: &redis::RedisError) -> NodeErrorKind {
    use redis::ErrorKind;
    let code = err.code().unwrap_or_default();
    if code == "WRONGTYPE" || err.to_string().contains("WRONGTYPE") {
        return NodeErrorKind::WrongType;
    }
    if err.kind() == ErrorKind::AuthenticationFailed || matches!(code, "NOAUTH" | "WRONGPASS" | "NOPERM") {
        return NodeErrorKind::Auth(describe(err));
    }
    if err.is_timeout() {
        return NodeErrorKind::Timeout;
    }
    if err.is_io_error() || err.is_connection_refusal() || err.is_connection_dropped() {
        return NodeErrorKind::Connection(describe(err));
    }
    match err.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => NodeErrorKind::Protocol(describe(err)),
        _ => NodeErrorKind::Server(describe(err)),
    }
}

/// The message of a redis-rs error, without anything that could carry credentials.
pub(crate) fn describe(err: &redis::RedisError) -> String {
    // A server's error reads as the server sent it ("NOAUTH Authentication required."), not as
    // redis-rs formats it; only server errors have a code.
    let mut text = match (err.code(), err.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        _ => err.to_string(),
    };
    if text.contains('@') {
        text = redact_url(&text);
    }
    text
}

/// Replaces the password (and user) of a URL with `***`, for error messages and logs.
pub(crate) fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    // The last '@' anywhere, not only in a well-formed authority: a password holding '/', '?' or
    // '#' makes the URL unparseable, and that is exactly when it is echoed in an error. Redacting
    // too much is harmless; too little is not.
    match rest.rfind('@') {
        Some(at) => format!("{}***{}", &url[..scheme_end + 3], &rest[at..]),
        None => url.to_owned(),
    }
}
