//! How a lock request carries its kind: as a value ([`Choose`]) that a method of
//! [`Lock`](crate::Lock) sets, written in the kind's own file, and that hands the request's kind
//! to the one acquire path (`acquire.rs`) when the request is sent.
//!
//! A kind's file so holds all of it: the kind ([`Kind`](crate::api::kinds::kind::Kind)), its
//! choice and its builder method. What a request may combine (a set of resources, a fencing token)
//! is refused here, the same way for every kind that does not take it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use super::acquire::Attempt;
use super::{Guard, Inner};
use crate::api::kinds::kind::Ctx;
use crate::base::error::{AcquireError, InputError};
use crate::core::RetryPlan;

/// What a request locks.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// One resource.
    One(String),
    /// A set, all or nothing.
    All(Vec<String>),
}

/// A kind of lock as a request carries it until it is sent.
pub(crate) trait Choose: fmt::Debug + Send + Sync {
    /// The kind's name, in errors.
    fn name(&self) -> &'static str;

    /// The kind's name in metrics and spans, for `target`, `fenced` when a token was asked for:
    /// its name unless the kind says otherwise.
    fn label(&self, _target: &Target, _fenced: bool) -> &'static str {
        self.name()
    }

    /// Why a fencing token does not go with this kind (the kinds that take one never ask).
    fn fencing_refused(&self) -> String {
        format!(
            "a fenced {} lock (only a plain lock or a write hold takes a fencing token)",
            self.name()
        )
    }

    /// Acquires this kind as `request` asks.
    fn acquire<'a>(&'a self, request: Request<'a>) -> BoxFuture<'a, Result<Guard, AcquireError>>;
}

/// A request as its kind receives it: what to lock and how, and the one acquire path to send it
/// through.
pub(crate) struct Request<'a> {
    pub(crate) inner: &'a Arc<Inner>,
    /// What to lock.
    pub(crate) target: Target,
    /// The TTL asked for.
    pub(crate) ttl: Duration,
    /// The attempts and the wait; `None` for one attempt.
    pub(crate) plan: Option<RetryPlan>,
    /// Whether a fencing token was asked for.
    pub(crate) fenced: bool,
    /// The lock-delay asked for; `None` for the configured one.
    pub(crate) lock_delay: Option<Duration>,
}

impl Request<'_> {
    /// What the kind may build its keys and holds with.
    pub(crate) fn ctx(&self) -> Ctx<'_> {
        self.inner.ctx()
    }

    /// The one resource of a kind that takes neither a set nor a fencing token.
    ///
    /// # Errors
    /// [`InputError::Unsupported`] for a set or a fencing token.
    pub(crate) fn resource(&mut self, kind: &dyn Choose) -> Result<String, AcquireError> {
        if self.fenced && matches!(self.target, Target::One(_)) {
            return Err(InputError::Unsupported {
                what: kind.fencing_refused(),
            }
            .into());
        }
        self.fenceable_resource(kind)
    }

    /// The one resource of a kind that takes a fencing token but no set.
    ///
    /// # Errors
    /// [`InputError::Unsupported`] for a set.
    pub(crate) fn fenceable_resource(&mut self, kind: &dyn Choose) -> Result<String, AcquireError> {
        match &mut self.target {
            Target::One(resource) => Ok(std::mem::take(resource)),
            Target::All(_) => Err(self.set_refused(kind)),
        }
    }

    /// Why a set of resources does not go with `kind`, or with fencing.
    pub(crate) fn set_refused(&self, kind: &dyn Choose) -> AcquireError {
        let what = if self.fenced {
            "a fenced lock on a set of resources (fence each resource with its own lock)".to_owned()
        } else {
            format!("a {} lock on a set of resources", kind.name())
        };
        InputError::Unsupported { what }.into()
    }

    /// Sends `kind` through the one acquire path.
    pub(crate) async fn acquire<A: Attempt>(&self, kind: A) -> Result<Guard, AcquireError> {
        let times = (self.ttl, self.lock_delay);
        self.inner.acquire(kind, times, self.plan).await
    }
}

impl<'a> Request<'a> {
    /// Acquires the kind that `make` builds for the request's one resource, as a [`Choose`] that
    /// takes neither a set nor a fencing token (`chosen`) does.
    ///
    /// # Errors
    /// [`InputError::Unsupported`] for a set or a fencing token; `make`'s error; the acquire's.
    pub(crate) fn one<K, F>(
        mut self,
        chosen: &dyn Choose,
        make: F,
    ) -> BoxFuture<'a, Result<Guard, AcquireError>>
    where
        K: Attempt + Send + Sync + 'a,
        F: FnOnce(&Ctx<'_>, String) -> Result<K, AcquireError> + Send + 'a,
    {
        let resource = self.resource(chosen);
        Box::pin(async move {
            let kind = make(&self.ctx(), resource?)?;
            self.acquire(kind).await
        })
    }
}
