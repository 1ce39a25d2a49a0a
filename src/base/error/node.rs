//! What went wrong with one master: the kind of failure, the master it happened on, and the
//! sorting of a redis-rs error into what it means for a lock, with credentials kept out.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use super::Elapsed;

/// What a master (or the client library talking to it) said went wrong, with the redis-rs error it
/// came from when there is one ([`std::error::Error::source`] of the kind and the failure reach it).
///
/// Compared and shown by its message alone.
#[derive(Clone)]
pub struct Detail {
    message: String,
    cause: Option<Arc<redis::RedisError>>,
}

impl Detail {
    /// The message, as the server sent it or as the client library put it, without credentials.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same message, carrying the error it came from.
    fn caused_by(message: String, cause: &redis::RedisError) -> Self {
        // The error's own text could carry a URL's password: only one that needed no redaction
        // is kept as the cause.
        let cause = (!cause.to_string().contains('@')).then(|| Arc::new(cause.clone()));
        Self { message, cause }
    }

    fn cause(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl Deref for Detail {
    type Target = str;

    fn deref(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl fmt::Debug for Detail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.message, f)
    }
}

impl PartialEq for Detail {
    fn eq(&self, other: &Self) -> bool {
        self.message == other.message
    }
}

impl Eq for Detail {}

/// Written as its message alone: the error it came from stays behind.
#[cfg(feature = "serde")]
impl serde::Serialize for Detail {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.message)
    }
}

/// Read from its message; the error it came from is not restored.
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for Detail {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Detail::from)
    }
}

impl From<String> for Detail {
    fn from(message: String) -> Self {
        Self { message, cause: None }
    }
}

impl From<&str> for Detail {
    fn from(message: &str) -> Self {
        message.to_owned().into()
    }
}

/// What went wrong with one master during one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
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
    Connection(Detail),
    /// The master rejected our credentials.
    Auth(Detail),
    /// The master answered with an error.
    Server(Detail),
    /// The master answered something that is not a valid reply to our command.
    Protocol(Detail),
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
    /// The server at the master's address may lack writes it acknowledged: another server answers
    /// there (a replacement, a promoted replica), or it restarted after persisting less than
    /// `appendfsync always`, as the record it keeps shows. Its vote is ignored until the grace
    /// has passed since a client first saw it, `seen` ago.
    Replaced {
        /// How long ago a client first saw this incarnation of it.
        seen: Duration,
        /// How long its votes are still ignored.
        remaining: Duration,
    },
    /// The master may evict keys (a `maxmemory` limit with `policy` other than `noeviction`), a
    /// held lock's included, so its votes are refused (`QuorlockBuilder::refuse_evicting_masters`).
    Evicting {
        /// Its `maxmemory-policy`.
        policy: String,
    },
    /// The semaphore is in use on this master with `in_use` permits, not the number asked for.
    PermitsMismatch {
        /// The permits the semaphore's holders use.
        in_use: u32,
    },
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
            NodeErrorKind::Replaced { seen, remaining } => write!(
                f,
                "may lack acknowledged writes (another server at its address, or a restart after weaker persistence), first seen {} ago; vote ignored for another {}",
                Elapsed(*seen),
                Elapsed(*remaining)
            ),
            NodeErrorKind::Evicting { policy } => write!(
                f,
                "may evict lock keys (maxmemory with maxmemory-policy {policy}); votes refused"
            ),
            NodeErrorKind::PermitsMismatch { in_use } => {
                write!(f, "the semaphore is in use here with {in_use} permits")
            }
        }
    }
}

/// One master's failure: its index in the configured list, its address, and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
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

impl std::error::Error for NodeErrorKind {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NodeErrorKind::Connection(d)
            | NodeErrorKind::Auth(d)
            | NodeErrorKind::Server(d)
            | NodeErrorKind::Protocol(d) => d.cause(),
            _ => None,
        }
    }
}

impl std::error::Error for NodeFailure {
    /// The redis-rs error behind the failure, when there is one.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(&self.kind)
    }
}

/// The masters that did not do what an operation asked, in the masters' order.
///
/// Reads as a slice of [`NodeFailure`]s. As an error, its [`source`](std::error::Error::source) is
/// the first failure that came from a redis-rs error, so a chain from an operation's error reaches
/// the [`redis::RedisError`] behind it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Failures(Vec<NodeFailure>);

impl Failures {
    /// The failures, by value.
    pub fn into_vec(self) -> Vec<NodeFailure> {
        self.0
    }
}

impl Deref for Failures {
    type Target = [NodeFailure];

    fn deref(&self) -> &[NodeFailure] {
        &self.0
    }
}

impl From<Vec<NodeFailure>> for Failures {
    fn from(failures: Vec<NodeFailure>) -> Self {
        Self(failures)
    }
}

impl FromIterator<NodeFailure> for Failures {
    fn from_iter<I: IntoIterator<Item = NodeFailure>>(failures: I) -> Self {
        Self(failures.into_iter().collect())
    }
}

impl IntoIterator for Failures {
    type Item = NodeFailure;
    type IntoIter = std::vec::IntoIter<NodeFailure>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Failures {
    type Item = &'a NodeFailure;
    type IntoIter = std::slice::Iter<'a, NodeFailure>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl fmt::Display for Failures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, failure) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{failure}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Failures {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0
            .iter()
            .find(|f| std::error::Error::source(*f).is_some())
            .map(|f| f as &(dyn std::error::Error + 'static))
    }
}

/// A list of failures after an error message: `: a; b`, or nothing.
pub(crate) struct Listed<'a>(&'a [NodeFailure]);

impl fmt::Display for Listed<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, failure) in self.0.iter().enumerate() {
            f.write_str(if i == 0 { ": " } else { "; " })?;
            write!(f, "{failure}")?;
        }
        Ok(())
    }
}

pub(crate) fn list(failures: &[NodeFailure]) -> Listed<'_> {
    Listed(failures)
}

/// Sorts a redis-rs error into what it means for the lock.
pub(crate) fn classify(err: &redis::RedisError) -> NodeErrorKind {
    use redis::ErrorKind;
    let code = err.code().unwrap_or_default();
    if code == "WRONGTYPE" || err.to_string().contains("WRONGTYPE") {
        return NodeErrorKind::WrongType;
    }
    let detail = || Detail::caused_by(describe(err), err);
    if err.kind() == ErrorKind::AuthenticationFailed || matches!(code, "NOAUTH" | "WRONGPASS" | "NOPERM") {
        return NodeErrorKind::Auth(detail());
    }
    if err.is_timeout() {
        return NodeErrorKind::Timeout;
    }
    if err.is_io_error() || err.is_connection_refusal() || err.is_connection_dropped() {
        return NodeErrorKind::Connection(detail());
    }
    match err.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => NodeErrorKind::Protocol(detail()),
        _ => NodeErrorKind::Server(detail()),
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
