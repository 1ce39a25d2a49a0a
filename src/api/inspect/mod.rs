//! A read-only look at one lock on every master: who holds it where, for how much longer, and
//! whether one token holds a majority.
//!
//! Operators need to see a lock's state without taking part in it (`quorlock status`): a master
//! that is down, a stale key left on a minority, a holder that is about to expire. Each master is
//! asked in one atomic script for the key's type, value and PTTL, concurrently and bounded by the
//! per-node timeout like every other request; nothing is written.

pub(crate) mod kinds;

use std::collections::HashMap;
use std::time::Duration;

use redis::Value;
use tracing::instrument;

use crate::api::client::Quorlock;
use crate::base::error::{InputError, NodeErrorKind};
use crate::base::lua::{eval, INSPECT};
use crate::core::quorum;

/// What one master holds under a lock's key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Holding {
    /// The token stored under the key.
    pub token: String,
    /// Time left before the master expires the key; `None` when the key has no expiry (not set by
    /// a lock client).
    pub ttl: Option<Duration>,
}

/// One master's answer to an inspection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct MasterState {
    /// The master's position in the configured list.
    pub node: usize,
    /// `host:port`, without credentials.
    pub addr: String,
    /// `Ok(Some(..))` when the key holds a token, `Ok(None)` when the key is absent, and the
    /// master's failure otherwise (unreachable, timed out, or a key of another type).
    pub state: Result<Option<Holding>, NodeErrorKind>,
}

impl Holding {
    /// `token` stored under the key, expiring in `ttl` (`None`: no expiry).
    pub fn new(token: impl Into<String>, ttl: Option<Duration>) -> Self {
        Self {
            token: token.into(),
            ttl,
        }
    }
}

impl MasterState {
    /// Master `node` (at `addr`) answered `state`.
    pub fn new(node: usize, addr: impl Into<String>, state: Result<Option<Holding>, NodeErrorKind>) -> Self {
        Self {
            node,
            addr: addr.into(),
            state,
        }
    }

    /// The token this master holds, if it answered and holds one.
    pub fn token(&self) -> Option<&str> {
        match &self.state {
            Ok(Some(holding)) => Some(&holding.token),
            _ => None,
        }
    }

    /// Whether the master answered.
    pub fn is_reachable(&self) -> bool {
        !matches!(&self.state, Err(kind) if kind.is_unreachable())
    }
}

/// The state of one lock on every master, from [`Quorlock::inspect`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Inspection {
    /// The resource inspected.
    pub resource: String,
    /// The key read on every master (the resource with the configured prefix).
    pub key: String,
    /// How many masters make a majority.
    pub quorum: usize,
    /// Each master's answer, in configured order.
    pub masters: Vec<MasterState>,
}

impl Inspection {
    /// The answers `masters` about `resource` (read under `key`), of which `quorum` make a
    /// majority: what [`Quorlock::inspect`] returns, for code that renders or tests one.
    pub fn new(
        resource: impl Into<String>,
        key: impl Into<String>,
        quorum: usize,
        masters: Vec<MasterState>,
    ) -> Self {
        Self {
            resource: resource.into(),
            key: key.into(),
            quorum,
            masters,
        }
    }

    /// The token found on the most masters, with its count (ties go to the lowest token).
    pub fn leading(&self) -> Option<(&str, usize)> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for token in self.masters.iter().filter_map(MasterState::token) {
            *counts.entry(token).or_default() += 1;
        }
        counts
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(a.0)))
    }

    /// The token held on a majority of masters: the lock's holder, if it is held.
    pub fn holder(&self) -> Option<&str> {
        self.leading()
            .filter(|(_, count)| *count >= self.quorum)
            .map(|(token, _)| token)
    }

    /// Whether one token holds the lock on a majority of masters.
    pub fn is_held(&self) -> bool {
        self.holder().is_some()
    }

    /// How many masters answered.
    pub fn reachable(&self) -> usize {
        self.masters.iter().filter(|m| m.is_reachable()).count()
    }
}

impl Quorlock {
    /// Reads the lock on `resource` from every master concurrently, without changing it.
    ///
    /// A snapshot: the answers are taken at slightly different moments, and a lock can change
    /// hands right after. Use it for monitoring and operations, never to decide whether to act.
    ///
    /// # Errors
    /// [`InputError::EmptyResource`] for an empty resource name (nothing is sent). Failures of
    /// single masters are reported in [`MasterState::state`].
    #[instrument(skip_all, fields(resource = %resource))]
    pub async fn inspect(&self, resource: &str) -> Result<Inspection, InputError> {
        if resource.is_empty() {
            return Err(InputError::EmptyResource);
        }
        let key = self.inner.names().key(resource);
        Ok(self.inspect_key(resource, key).await)
    }

    /// Reads `key`, the lock key of `resource` or of one of its kind's keys, from every master.
    pub(crate) async fn inspect_key(&self, resource: &str, key: String) -> Inspection {
        let cmd = std::sync::Arc::new(eval(&INSPECT, &[&key]));
        let masters = self.inner.masters();
        let answers = crate::mechanisms::fanout::all(masters.iter().map(|link| {
            let reply = link.run_script(&cmd);
            async move {
                MasterState {
                    node: link.index(),
                    addr: link.addr().to_owned(),
                    state: reply.await.and_then(parse),
                }
            }
        }))
        .await;
        Inspection {
            resource: resource.to_owned(),
            key,
            quorum: quorum(masters.len()),
            masters: answers,
        }
    }
}

/// Reads the script's `{type, value, pttl}` answer.
fn parse(reply: Value) -> Result<Option<Holding>, NodeErrorKind> {
    let unexpected = |what: &Value| NodeErrorKind::Protocol(format!("inspection answered {what:?}").into());
    let Value::Array(items) = &reply else {
        return Err(unexpected(&reply));
    };
    let [kind, value, pttl] = items.as_slice() else {
        return Err(unexpected(&reply));
    };
    let text = |v: &Value| match v {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    };
    let kind = text(kind).ok_or_else(|| unexpected(&reply))?;
    let Value::Int(pttl) = pttl else {
        return Err(unexpected(&reply));
    };
    match kind.as_str() {
        "none" => Ok(None),
        "string" => {
            let token = text(value).ok_or_else(|| unexpected(&reply))?;
            let ttl = u64::try_from(*pttl).ok().map(Duration::from_millis);
            Ok(Some(Holding { token, ttl }))
        }
        _ => Err(NodeErrorKind::WrongType),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(node: usize, token: Option<&str>) -> MasterState {
        MasterState {
            node,
            addr: format!("m{node}"),
            state: Ok(token.map(|t| Holding {
                token: t.into(),
                ttl: Some(Duration::from_secs(1)),
            })),
        }
    }

    fn inspection(masters: Vec<MasterState>) -> Inspection {
        Inspection {
            resource: "r".into(),
            key: "r".into(),
            quorum: quorum(masters.len()),
            masters,
        }
    }

    #[test]
    fn a_token_on_a_majority_is_the_holder() {
        let mut masters = vec![
            state(0, Some("a")),
            state(1, Some("a")),
            state(2, Some("b")),
            state(3, Some("a")),
        ];
        masters.push(MasterState {
            node: 4,
            addr: "m4".into(),
            state: Err(NodeErrorKind::Timeout),
        });
        let i = inspection(masters);
        assert_eq!(i.holder(), Some("a"));
        assert_eq!(i.reachable(), 4);
    }

    #[test]
    fn a_minority_is_not_held() {
        let i = inspection(vec![
            state(0, Some("a")),
            state(1, Some("a")),
            state(2, None),
            state(3, Some("b")),
            state(4, None),
        ]);
        assert_eq!(i.leading(), Some(("a", 2)));
        assert!(!i.is_held());
    }

    #[test]
    fn script_answers_are_parsed() {
        let absent = Value::Array(vec![
            Value::BulkString(b"none".to_vec()),
            Value::Nil,
            Value::Int(-2),
        ]);
        assert_eq!(parse(absent), Ok(None));
        let held = Value::Array(vec![
            Value::BulkString(b"string".to_vec()),
            Value::BulkString(b"tok".to_vec()),
            Value::Int(1500),
        ]);
        assert_eq!(
            parse(held),
            Ok(Some(Holding {
                token: "tok".into(),
                ttl: Some(Duration::from_millis(1500))
            }))
        );
        let hash = Value::Array(vec![
            Value::BulkString(b"hash".to_vec()),
            Value::Nil,
            Value::Int(-1),
        ]);
        assert_eq!(parse(hash), Err(NodeErrorKind::WrongType));
        assert!(parse(Value::Int(1)).is_err());
    }
}
