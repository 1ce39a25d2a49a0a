//! The multi-resource lock: a set of resources taken all-or-nothing, decided by one quorum.
//!
//! One Lua call per master checks every key and sets them all, or sets none and reports which keys
//! were held. The call is atomic on its master, so two clients taking overlapping sets in different
//! orders can never each hold a part of what the other needs: there is no lock ordering to get
//! wrong and no deadlock. The keys are the plain locks' keys, each holding the same random token,
//! so a multi-resource lock on `{a, b}` excludes a plain lock on `a`, and the other way round.
//! Quorum, validity, extend and release work as for one resource; the masters' refusals are gathered
//! into [`AcquireError::Conflict`], which names the resources that were held.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::FutureExt;
use redis::Value;

use crate::client::{Guard, Inner};
use crate::core::{RetryPlan, Timing};
use crate::error::{AcquireError, InputError, NodeErrorKind};
use crate::link::Call;
use crate::lua::{
    eval, ScriptCall, MULTI_ACQUIRE as ACQUIRE, MULTI_EXTEND as EXTEND, MULTI_RELEASE as RELEASE,
};
use crate::names::{ttl_millis, RELEASE_CHANNEL_PREFIX};
use crate::ops::LockOps;

/// A held set of resources: how it is extended and released on one master.
pub(crate) struct MultiLock {
    resources: Vec<String>,
    keys: Vec<String>,
    token: Arc<str>,
}

impl fmt::Debug for MultiLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The token stays out of logs: whoever has it can extend or release every key.
        f.debug_struct("MultiLock")
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

impl MultiLock {
    fn acquire_cmd(&self, ttl_ms: u64) -> ScriptCall {
        let mut cmd = eval(&ACQUIRE, &self.keys);
        cmd.push(&*self.token).push(ttl_ms);
        cmd
    }
}

impl LockOps for MultiLock {
    fn extend(&self, ttl_ms: u64) -> Call {
        let mut cmd = eval(&EXTEND, &self.keys);
        cmd.push(&*self.token).push(ttl_ms);
        Call::Script(cmd)
    }

    fn release(&self) -> Call {
        let mut cmd = eval(&RELEASE, &self.keys);
        cmd.push(&*self.token).push(RELEASE_CHANNEL_PREFIX);
        Call::Script(cmd)
    }

    fn resources(&self) -> Option<&[String]> {
        Some(&self.resources)
    }
}

/// The checked resources of one multi-resource request: sorted, without duplicates.
struct ResourceSet {
    names: Vec<String>,
    /// The set as one name, for errors, logs and [`Guard::resource`].
    label: String,
}

impl ResourceSet {
    /// Checks the set and the TTL, and records the set on the current span.
    fn checked<I, S>(inner: &Inner, resources: I, ttl: Duration) -> Result<(Self, Timing), InputError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let set = Self::new(resources)?;
        tracing::Span::current().record("resource", set.label.as_str());
        Ok((set, inner.check_ttl(ttl)?))
    }

    fn new<I, S>(resources: I) -> Result<Self, InputError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut names = BTreeSet::new();
        for resource in resources {
            let resource = resource.as_ref();
            if resource.is_empty() {
                return Err(InputError::EmptyResource);
            }
            names.insert(resource.to_owned());
        }
        if names.is_empty() {
            return Err(InputError::NoResources);
        }
        let names: Vec<String> = names.into_iter().collect();
        let label = format!("{{{}}}", names.join(", "));
        Ok(Self { names, label })
    }
}

/// Acquires every resource in `resources`, or none: retrying within `plan`, or one round when
/// `plan` is `None`. The set, as one label, is recorded as the current span's resource.
pub(crate) async fn acquire(
    inner: &Arc<Inner>,
    resources: &[String],
    ttl: Duration,
    plan: Option<RetryPlan>,
) -> Result<Guard, AcquireError> {
    let (set, timing) = ResourceSet::checked(inner, resources, ttl)?;
    match plan {
        Some(plan) => {
            let keys = set.names.iter().map(|r| inner.names().key(r)).collect();
            inner
                .retrying_woken(&set.label, plan, keys, || round(inner, &set, timing))
                .await
        }
        None => round(inner, &set, timing).await,
    }
}

/// One quorum round taking every resource of `set` on each master, or none.
async fn round(inner: &Arc<Inner>, set: &ResourceSet, timing: Timing) -> Result<Guard, AcquireError> {
    let keys: Vec<String> = set.names.iter().map(|r| inner.names().key(r)).collect();
    let token = inner.entropy().token()?;
    let lock = MultiLock {
        resources: set.names.clone(),
        keys,
        token: Arc::clone(&token),
    };
    let cmd = lock.acquire_cmd(ttl_millis(timing.ttl()));
    let key_label = format!("{{{}}}", lock.keys.join(", "));
    let ops: Arc<dyn LockOps> = Arc::new(lock);
    // Positions (0-based) of the resources some master reported held.
    let held: Arc<Mutex<BTreeSet<usize>>> = Arc::new(Mutex::new(BTreeSet::new()));
    let cmd = Arc::new(cmd);
    let resources = set.names.len();
    let result = inner
        .acquire_round(&set.label, key_label.into(), token, timing, ops, |link| {
            let held = Arc::clone(&held);
            link.run_script(&cmd).map(move |reply| {
                let conflicts = conflicts(reply?, resources)?;
                if conflicts.is_empty() {
                    return Ok(());
                }
                held.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(conflicts);
                Err(NodeErrorKind::Held)
            })
        })
        .await;
    let held = std::mem::take(&mut *held.lock().unwrap_or_else(PoisonError::into_inner));
    match result {
        Err(AcquireError::NoQuorum {
            resource,
            acquired,
            required,
            masters,
            failures,
        }) if !held.is_empty() => Err(AcquireError::Conflict {
            resource,
            conflicts: held
                .into_iter()
                .filter_map(|i| set.names.get(i).cloned())
                .collect(),
            acquired,
            required,
            masters,
            failures,
        }),
        other => other,
    }
}

/// Reads the acquire script's reply: the 0-based positions of the held keys (empty: all taken).
fn conflicts(reply: Value, keys: usize) -> Result<Vec<usize>, NodeErrorKind> {
    let bad =
        |what: String| NodeErrorKind::Protocol(format!("multi-resource acquire answered {what}").into());
    let Value::Array(items) = reply else {
        return Err(bad(format!("{reply:?}, expected an array")));
    };
    items
        .into_iter()
        .map(|item| {
            let position = match &item {
                Value::Int(i) => usize::try_from(*i).ok(),
                _ => None,
            };
            match position {
                Some(p) if (1..=keys).contains(&p) => Ok(p - 1),
                _ => Err(bad(format!("{item:?}, expected a key position in 1..={keys}"))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_sets_are_sorted_deduplicated_and_checked() {
        let set = ResourceSet::new(["b", "a", "b"]).expect("valid set");
        assert_eq!(set.names, ["a", "b"]);
        assert_eq!(set.label, "{a, b}");
        assert!(matches!(
            ResourceSet::new(Vec::<String>::new()),
            Err(InputError::NoResources)
        ));
        assert!(matches!(
            ResourceSet::new(["a", ""]),
            Err(InputError::EmptyResource)
        ));
    }

    #[test]
    fn debug_leaves_the_token_out() {
        let lock = MultiLock {
            resources: vec!["a".into(), "b".into()],
            keys: vec!["p:a".into(), "p:b".into()],
            token: "0123456789abcdef0123456789abcdef".into(),
        };
        let shown = format!("{lock:?}");
        assert!(shown.contains("p:a") && shown.contains("p:b"), "{shown}");
        assert!(!shown.contains(&*lock.token), "{shown}");
    }

    #[test]
    fn conflict_replies_are_positions_within_the_set() {
        assert_eq!(conflicts(Value::Array(vec![]), 2), Ok(vec![]));
        assert_eq!(conflicts(Value::Array(vec![Value::Int(2)]), 2), Ok(vec![1]));
        assert!(conflicts(Value::Array(vec![Value::Int(3)]), 2).is_err());
        assert!(conflicts(Value::Int(1), 2).is_err());
    }
}
