//! A read-only look at a semaphore or a read-write lock on every master: which permits are held and
//! which free, who reads and who writes.
//!
//! Built on the plain inspection (`inspect.rs`): a semaphore's slots are plain lock keys and a
//! read-write lock's writer key is one, so each is read as a lock is; the readers and waiting
//! writers, kept in sorted sets by expiry, are read by one script per master against its own clock.
//! Nothing is written, and like every inspection this is a snapshot for operators, never a reason
//! to act.

use std::collections::HashMap;
use std::sync::Arc;

use futures::FutureExt;
use redis::Value;
use tracing::instrument;

use crate::api::client::Quorlock;
use crate::api::inspect::Inspection;
use crate::base::error::{InputError, NodeErrorKind};
use crate::base::lua::{eval, lua};
use crate::core::semaphore::check_permits;

lua! {
    /// A read-write lock's readers and waiting writers, read only.
    static RW_INSPECT = include_str!("../../scripts/rw_inspect.lua");
}

/// A semaphore's state on every master, from [`Quorlock::inspect_semaphore`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SemaphoreInspection {
    /// The resource inspected.
    pub resource: String,
    /// Each slot's lock, in slot order.
    pub slots: Vec<Inspection>,
}

impl SemaphoreInspection {
    /// An inspection of `resource` whose slots read `slots`, for code that renders or tests one.
    pub fn new(resource: impl Into<String>, slots: Vec<Inspection>) -> Self {
        Self {
            resource: resource.into(),
            slots,
        }
    }

    /// The number of permits.
    pub fn permits(&self) -> usize {
        self.slots.len()
    }

    /// The permits held on a majority of masters.
    pub fn held(&self) -> usize {
        self.slots.iter().filter(|slot| slot.is_held()).count()
    }

    /// The permits not held on a majority (free, or held only on a minority).
    pub fn free(&self) -> usize {
        self.permits() - self.held()
    }
}

/// One master's readers and waiting writers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadersState {
    /// The master's position in the configured list.
    pub node: usize,
    /// The unexpired reader tokens and the number of waiting writers, or the master's failure.
    pub state: Result<(Vec<String>, u64), NodeErrorKind>,
}

/// A read-write lock's state on every master, from [`Quorlock::inspect_rwlock`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RwInspection {
    /// The resource inspected.
    pub resource: String,
    /// The writer key, read as a plain lock.
    pub writer: Inspection,
    /// Each master's readers and waiting writers, in configured order.
    pub readers: Vec<ReadersState>,
}

impl ReadersState {
    /// Master `node`'s readers and waiting writers, or its failure, for code that renders or tests
    /// an inspection.
    pub fn new(node: usize, state: Result<(Vec<String>, u64), NodeErrorKind>) -> Self {
        Self { node, state }
    }
}

impl RwInspection {
    /// An inspection of `resource` with `writer` and each master's `readers`, for code that renders
    /// or tests one.
    pub fn new(resource: impl Into<String>, writer: Inspection, readers: Vec<ReadersState>) -> Self {
        Self {
            resource: resource.into(),
            writer,
            readers,
        }
    }

    /// The writer's token, when one holds a majority.
    pub fn writer(&self) -> Option<&str> {
        self.writer.holder()
    }

    /// The reader tokens held on a majority of masters.
    pub fn readers(&self) -> Vec<&str> {
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for state in &self.readers {
            if let Ok((tokens, _)) = &state.state {
                for token in tokens {
                    *counts.entry(token.as_str()).or_default() += 1;
                }
            }
        }
        let mut held: Vec<&str> = counts
            .into_iter()
            .filter(|(_, n)| *n >= self.writer.quorum)
            .map(|(token, _)| token)
            .collect();
        held.sort_unstable();
        held
    }

    /// How many masters have a writer waiting.
    pub fn writers_waiting(&self) -> usize {
        self.readers
            .iter()
            .filter(|s| matches!(&s.state, Ok((_, waiting)) if *waiting > 0))
            .count()
    }
}

impl Quorlock {
    /// Reads every slot of the semaphore `resource` of `permits` permits from every master.
    ///
    /// # Errors
    /// [`InputError::EmptyResource`], or [`InputError::Permits`] for zero permits or too many.
    #[instrument(skip_all, fields(resource = %resource, permits))]
    pub async fn inspect_semaphore(
        &self,
        resource: &str,
        permits: u32,
    ) -> Result<SemaphoreInspection, InputError> {
        if resource.is_empty() {
            return Err(InputError::EmptyResource);
        }
        let permits = check_permits(permits)?;
        let keys = self.inner.names().slots(resource, permits);
        let slots =
            crate::mechanisms::fanout::all(keys.into_iter().map(|key| self.inspect_key(resource, key))).await;
        Ok(SemaphoreInspection {
            resource: resource.to_owned(),
            slots,
        })
    }

    /// Reads the read-write lock `resource` from every master: its writer, readers and waiting
    /// writers.
    ///
    /// # Errors
    /// [`InputError::EmptyResource`] for an empty resource name.
    #[instrument(skip_all, fields(resource = %resource))]
    pub async fn inspect_rwlock(&self, resource: &str) -> Result<RwInspection, InputError> {
        if resource.is_empty() {
            return Err(InputError::EmptyResource);
        }
        let [writer, readers, waiting] = self.inner.names().rwlock(resource);
        let cmd = Arc::new(eval(&RW_INSPECT, &[&readers, &waiting]));
        let masters = self.inner.masters();
        let (writer, readers) = futures::join!(
            self.inspect_key(resource, writer),
            crate::mechanisms::fanout::all(masters.iter().map(|link| {
                let node = link.index();
                link.run_script(&cmd).map(move |reply| ReadersState {
                    node,
                    state: reply.and_then(parse_readers),
                })
            }))
        );
        Ok(RwInspection {
            resource: resource.to_owned(),
            writer,
            readers,
        })
    }
}

/// Reads the script's `{readers, waiting}` answer.
fn parse_readers(reply: Value) -> Result<(Vec<String>, u64), NodeErrorKind> {
    let unexpected =
        |what: &Value| NodeErrorKind::Protocol(format!("read-write inspection answered {what:?}").into());
    let Value::Array(items) = &reply else {
        return Err(unexpected(&reply));
    };
    let [Value::Array(tokens), Value::Int(waiting)] = items.as_slice() else {
        return Err(unexpected(&reply));
    };
    let tokens = tokens
        .iter()
        .map(|t| match t {
            Value::BulkString(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
            other => Err(unexpected(other)),
        })
        .collect::<Result<_, _>>()?;
    Ok((tokens, u64::try_from(*waiting).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_replies_are_parsed() {
        let reply = Value::Array(vec![
            Value::Array(vec![Value::BulkString(b"a".to_vec())]),
            Value::Int(2),
        ]);
        assert_eq!(parse_readers(reply), Ok((vec!["a".to_owned()], 2)));
        assert!(parse_readers(Value::Int(1)).is_err());
    }
}
