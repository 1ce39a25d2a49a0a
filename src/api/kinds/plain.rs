//! The plain lock as a kind: `SET key token NX PX ttl` on every master, the RedLock lock itself,
//! interoperable with every other RedLock client. It queues this process's waiters on a local
//! turn, and waits between attempts for the holder's release or the key's expiry on a majority.
//! With fencing (`fenced.rs`) its first round is `fence_acquire.lua` on the same key.

use std::sync::Arc;

use futures::future::BoxFuture;
use redis::Value;

use crate::api::client::request::{Choose, Request, Target};
use crate::api::client::Guard;
use crate::api::kinds::fenced::Fenced;
use crate::api::kinds::kind::{Ctx, Fenceable, FencingArgs, Held, Kind, Wait};
use crate::api::kinds::multi::Multi;
use crate::base::error::{AcquireError, NodeErrorKind};
use crate::base::lua::{eval, ScriptCall, FENCE_ACQUIRE};
use crate::core::fencing::AcquireReply;
use crate::mechanisms::ops::PlainLock;
use crate::mechanisms::round::Read;
use crate::seam::link::Call;

/// A plain lock on one resource.
#[derive(Debug)]
pub(crate) struct Plain {
    resource: String,
    /// One copy of the key serves the local queue, the rounds and the guard.
    key: Arc<str>,
    /// Whether this process's waiters on the key queue behind each other.
    local_queue: bool,
}

impl Plain {
    /// The plain lock on `resource`.
    pub(crate) fn new(ctx: &Ctx<'_>, resource: String) -> Self {
        Self {
            key: ctx.names.shared_key(&resource),
            resource,
            local_queue: ctx.config.local_queue,
        }
    }
}

impl Kind for Plain {
    type Hold = PlainLock;
    type Note = ();
    type Reads = ();

    fn resource(&self) -> &str {
        &self.resource
    }

    fn wait(&self) -> Wait {
        Wait::ReleasedOrExpired {
            key: Arc::clone(&self.key),
            also: Vec::new(),
        }
    }

    fn local_turn(&self) -> Option<&Arc<str>> {
        self.local_queue.then_some(&self.key)
    }

    fn hold(&self, ctx: &Ctx<'_>) -> Result<Held<PlainLock>, AcquireError> {
        Held::fresh(ctx, &self.key, PlainLock::sharing)
    }

    fn call(&self, held: &Held<PlainLock>, ttl_ms: u64) -> Call {
        // Sized for its arguments up front: no buffer grows while it is built.
        let mut cmd = redis::Cmd::with_capacity(6, 40 + held.key.len() + held.token.len());
        cmd.arg("SET")
            .arg(&*held.key)
            .arg(&*held.token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms);
        Call::Command(Arc::new(cmd))
    }

    fn reads(&self) {}

    fn read((): (), reply: Value) -> Read<()> {
        Read::vote(match reply {
            Value::Okay => Ok(()),
            Value::SimpleString(s) if s == "OK" => Ok(()),
            Value::Nil => Err(NodeErrorKind::Held),
            other => Err(NodeErrorKind::Protocol(
                format!("SET NX answered {other:?}").into(),
            )),
        })
    }
}

impl Fenceable for Plain {
    fn fenced_call(&self, held: &Held<PlainLock>, ttl_ms: u64, f: FencingArgs<'_>) -> ScriptCall {
        let mut call = eval(&FENCE_ACQUIRE, &[&*held.key, f.counter, f.epoch]);
        call.push(&*held.token).push(ttl_ms).push(f.floor).push(f.run_id);
        call
    }

    fn fenced_reply(&self, code: i64) -> Option<AcquireReply> {
        AcquireReply::from_reply(code)
    }
}

/// The plain lock as a request's kind, the default: on one resource, fenced or not, or on a set
/// (the multi-resource lock, `multi.rs`).
#[derive(Debug)]
pub(crate) struct PlainChoice;

impl Choose for PlainChoice {
    fn name(&self) -> &'static str {
        "plain"
    }

    fn label(&self, target: &Target, fenced: bool) -> &'static str {
        match (target, fenced) {
            (_, true) => "fenced",
            (Target::All(_), false) => "multi",
            (Target::One(_), false) => "plain",
        }
    }

    fn acquire<'a>(&'a self, mut request: Request<'a>) -> BoxFuture<'a, Result<Guard, AcquireError>> {
        Box::pin(async move {
            match std::mem::replace(&mut request.target, Target::All(Vec::new())) {
                Target::One(resource) => {
                    let plain = Plain::new(&request.ctx(), resource);
                    if request.fenced {
                        request.acquire(Fenced(plain)).await
                    } else {
                        request.acquire(plain).await
                    }
                }
                Target::All(_) if request.fenced => Err(request.set_refused(self)),
                Target::All(all) => {
                    let multi = Multi::new(&request.ctx(), all);
                    // The set, as one label, is the span's resource.
                    tracing::Span::current().record("resource", multi.resource());
                    request.acquire(multi).await
                }
            }
        })
    }
}
