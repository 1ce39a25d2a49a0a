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
use std::sync::Arc;

use redis::Value;

use crate::api::kinds::kind::{Ctx, Held, Kind, Lost, Wait};
use crate::base::error::{AcquireError, InputError, NodeErrorKind};
use crate::base::lua::{eval, lua, ScriptCall};
use crate::base::names::RELEASE_CHANNEL_PREFIX;
use crate::mechanisms::ops::LockOps;
use crate::mechanisms::round::Read;
use crate::seam::link::Call;

lua! {
    /// A multi-resource lock's acquire: every key or none.
    static ACQUIRE = include_str!("../../scripts/multi_acquire.lua");
    /// A multi-resource lock's release, announced per key.
    static RELEASE = include_str!("../../scripts/multi_release.lua");
    /// A multi-resource lock's extend.
    static EXTEND = include_str!("../../scripts/multi_extend.lua");
}

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

/// A multi-resource lock: the set, sorted and without duplicates, and its keys.
#[derive(Debug)]
pub(crate) struct Multi {
    names: Vec<String>,
    keys: Vec<String>,
    /// The set as one name, for errors, logs and [`Guard::resource`](crate::Guard::resource).
    label: String,
    /// The keys as one name, for the guard.
    key_label: Arc<str>,
    /// A resource name was empty.
    empty: bool,
}

impl Multi {
    /// The lock on every resource of `resources`, sorted, each once.
    pub(crate) fn new<I, S>(ctx: &Ctx<'_>, resources: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut empty = false;
        let mut names = BTreeSet::new();
        for resource in resources {
            let resource = resource.as_ref();
            empty |= resource.is_empty();
            names.insert(resource.to_owned());
        }
        let names: Vec<String> = names.into_iter().collect();
        let keys: Vec<String> = names.iter().map(|r| ctx.names.key(r)).collect();
        Self {
            label: label(&names),
            key_label: label(&keys).into(),
            names,
            keys,
            empty,
        }
    }
}

/// A set's names as one label: `{a, b}`.
pub(crate) fn label(names: &[String]) -> String {
    format!("{{{}}}", names.join(", "))
}

impl Kind for Multi {
    type Hold = MultiLock;
    /// The 0-based positions of the resources a master found held.
    type Note = Vec<usize>;
    /// How many resources the set has.
    type Reads = usize;

    fn resource(&self) -> &str {
        &self.label
    }

    fn check(&self) -> Result<(), InputError> {
        if self.empty {
            return Err(InputError::EmptyResource);
        }
        if self.names.is_empty() {
            return Err(InputError::NoResources);
        }
        Ok(())
    }

    fn wait(&self) -> Wait {
        Wait::Released(self.keys.clone())
    }

    fn hold(&self, ctx: &Ctx<'_>) -> Result<Held<MultiLock>, AcquireError> {
        Held::fresh(ctx, &self.key_label, |_, token| MultiLock {
            resources: self.names.clone(),
            keys: self.keys.clone(),
            token: Arc::clone(token),
        })
    }

    fn call(&self, held: &Held<MultiLock>, ttl_ms: u64) -> Call {
        Call::Script(held.hold.acquire_cmd(ttl_ms))
    }

    fn reads(&self) -> usize {
        self.names.len()
    }

    fn read(resources: usize, reply: Value) -> Read<Vec<usize>> {
        match conflicts(reply, resources) {
            Ok(held) if held.is_empty() => Read::vote(Ok(())),
            Ok(held) => Read::noting(Err(NodeErrorKind::Held), held),
            Err(kind) => Read::vote(Err(kind)),
        }
    }

    /// A round refused because some resources were held fails with
    /// [`AcquireError::Conflict`], naming them.
    fn lost(&self, error: AcquireError, notes: Vec<(usize, Vec<usize>)>, _round: usize) -> Lost {
        let held: BTreeSet<usize> = notes.into_iter().flat_map(|(_, held)| held).collect();
        Lost::Stop(match error {
            AcquireError::NoQuorum {
                resource,
                acquired,
                required,
                masters,
                failures,
            } if !held.is_empty() => AcquireError::Conflict {
                resource,
                conflicts: held
                    .into_iter()
                    .filter_map(|i| self.names.get(i).cloned())
                    .collect(),
                acquired,
                required,
                masters,
                failures,
            },
            other => other,
        })
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
    use crate::base::names::Names;
    use crate::seam::token::Entropy;

    #[test]
    fn resource_sets_are_sorted_deduplicated_and_checked() {
        let names = Names::new("p:");
        let config = crate::mechanisms::config::QuorlockBuilder::default()
            .node("redis://127.0.0.1:1")
            .config()
            .expect("a valid configuration");
        let ctx = Ctx {
            names: &names,
            entropy: &Entropy::Os,
            config: &config,
        };
        let set = Multi::new(&ctx, ["b", "a", "b"]);
        assert!(set.check().is_ok());
        assert_eq!(set.names, ["a", "b"]);
        assert_eq!(set.label, "{a, b}");
        assert!(matches!(
            Multi::new(&ctx, Vec::<String>::new()).check(),
            Err(InputError::NoResources)
        ));
        assert!(matches!(
            Multi::new(&ctx, ["a", ""]).check(),
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
