//! The Lua scripts quorlock runs on the masters, and calls of them that can travel by SHA1.
//!
//! Every script's text lives in `src/scripts/` and is compiled in with [`lua!`], so the masters, the
//! simulation and the tests all run the same text. The scripts several parts send (the plain lock's
//! release and extend, inspection, fencing, the master checks, the fenced store) are declared here;
//! a lock kind's own scripts are declared in the kind's file, next to the calls that send them. A
//! release or a renewal is a short script: sending it as `EVAL`
//! copies its source (hundreds of bytes) into every command, and makes every master hash that
//! source again on every call. A [`ScriptCall`] is built once in its `EVALSHA sha numkeys args..`
//! form; the `EVAL source ..` form is only built when a master may not have the script cached:
//!
//! - On the shared connection of a master (`Link::run_script` in `link.rs`), `EVALSHA` is used only
//!   once the script is known to be cached on that master's *current connection epoch*: an `EVAL`
//!   of it succeeded since the connection was last lost (a restart of the master always drops the
//!   connection, and a new connection starts a new epoch). A `NOSCRIPT` reply, which means nothing
//!   ran, falls back to `EVAL` at once.
//! - The watchdog's renewal pipelines put a `SCRIPT LOAD` of each script they use at their head.
//!
//! What this gives up: a release whose `EVALSHA` sits queued behind a stalled master after the
//! client stopped waiting for it (the per-node timeout) has nobody left to retry it if it meets
//! `NOSCRIPT`. A command queued on a connection runs on that connection's server process or not at
//! all, so a restart cannot cause this; only a `SCRIPT FLUSH` on the same connection between the
//! load and the release can (or a proxy that swaps the server behind a kept client connection).
//! That release is then lost, and the key expires with its TTL, exactly as when the master is
//! unreachable.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};

use redis::{Arg, Cmd, Value};

use crate::base::error::NodeErrorKind;

/// A script the client sends by SHA1, with a slot per master to remember where it is cached.
/// Declared with [`lua!`], in the file of the kind or mechanism that sends it.
#[derive(Debug)]
pub(crate) struct Lua {
    /// Index into each master's record of cached scripts, given on first use.
    slot: OnceLock<usize>,
    source: &'static str,
    sha: LazyLock<String>,
}

/// Declares scripts as [`Lua`] statics: `lua! { /// doc \n pub(crate) static NAME = source; }`,
/// the source usually `include_str!` of a file in `src/scripts/` (after a shared prelude with
/// `concat!`).
macro_rules! lua {
    ($($(#[$doc:meta])* $vis:vis static $name:ident = $source:expr;)*) => {$(
        $(#[$doc])*
        $vis static $name: $crate::base::lua::Lua =
            $crate::base::lua::Lua::declared($source, || $crate::base::lua::sha1_hex($source));
    )*};
}
pub(crate) use lua;

/// The slot the next script used for the first time gets.
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

lua! {
    /// Compare-and-delete, then the hand-off to the first queued process (or the announcement on
    /// the key's channel when none is queued).
    pub(crate) static RELEASE = concat!(
        include_str!("../scripts/token_common.lua"),
        include_str!("../scripts/handoff_common.lua"),
        include_str!("../scripts/release.lua")
    );
    /// Compare-and-PEXPIRE.
    pub(crate) static EXTEND = concat!(
        include_str!("../scripts/token_common.lua"),
        include_str!("../scripts/extend.lua")
    );
    /// Reads type, value and PTTL of a key atomically (inspection).
    pub(crate) static INSPECT = include_str!("../scripts/inspect.lua");
    /// Fenced round 1: SET NX and, if granted, INCR the counter.
    pub(crate) static FENCE_ACQUIRE = include_str!("../scripts/fence_acquire.lua");
    /// Fenced round 2: raise the counter to the token while our key holds our token.
    pub(crate) static FENCE_COMMIT = concat!(
        include_str!("../scripts/token_common.lua"),
        include_str!("../scripts/fence_commit.lua")
    );
    /// Out of model, for the simulation's negative control only
    /// (`QuorlockBuilder::unsafe_without_for_tests(Mechanism::FenceCommitKey)`): round 2 without
    /// its key check. In every build, though only a build with the `seam` feature can ask for it.
    pub(crate) static FENCE_COMMIT_BLIND = include_str!("../scripts/fence_commit_blind_for_tests.lua");
    /// Fencing repair: raise a counter to a value read from a majority.
    pub(crate) static FENCE_REPAIR = include_str!("../scripts/fence_repair.lua");
    /// A master check's read of the record the master keeps about itself, with its run_id and clock.
    pub(crate) static MASTER_READ = include_str!("../scripts/master_read.lua");
    /// A master check's compare-and-set write of that record.
    pub(crate) static MASTER_RECORD = include_str!("../scripts/master_record.lua");
    /// A fenced store's write: applied only with a token at least the highest seen.
    pub(crate) static FENCED_WRITE = include_str!("../scripts/fenced_write.lua");
    /// A fenced store's read: raises the fence to the reader's token.
    pub(crate) static FENCED_READ = include_str!("../scripts/fenced_read.lua");
}

/// How many scripts there are (the size of each node's cache record).
/// How many scripts each master's cache record has room for: more than there are scripts in
/// `src/scripts/` (a test checks it). A script given a slot beyond it would only ever be sent with
/// its source.
pub(crate) const SCRIPTS: usize = 48;

/// The SHA1 Redis files `source` under.
pub(crate) fn sha1_hex(source: &str) -> String {
    redis::Script::new(source).get_hash().to_owned()
}

impl Lua {
    /// A script with `source`, whose SHA1 `sha` computes on first use ([`lua!`] writes this).
    pub(crate) const fn declared(source: &'static str, sha: fn() -> String) -> Lua {
        Lua {
            slot: OnceLock::new(),
            source,
            sha: LazyLock::new(sha),
        }
    }

    /// The script's slot in each master's record of cached scripts: given on first use, in
    /// the order scripts are first used, one per script.
    pub(crate) fn slot(&self) -> usize {
        *self
            .slot
            .get_or_init(|| NEXT_SLOT.fetch_add(1, Ordering::Relaxed))
    }

    /// The script's source.
    pub(crate) fn source(&self) -> &'static str {
        self.source
    }

    /// The script's SHA1, as Redis files it.
    pub(crate) fn sha(&self) -> &str {
        &self.sha
    }

    /// Starts a call: `EVALSHA sha numkeys`; add keys then arguments with [`ScriptCall::arg`].
    /// `args` and `bytes` size the command for them, so it is allocated once.
    pub(crate) fn call(&'static self, numkeys: usize, args: usize, bytes: usize) -> ScriptCall {
        let mut cmd = Cmd::with_capacity(3 + args, 50 + bytes + 20 * args);
        cmd.arg("EVALSHA").arg(self.sha()).arg(numkeys);
        ScriptCall {
            script: self,
            cmd: Arc::new(cmd),
        }
    }
}

/// One call of a [`Lua`] script, held in its `EVALSHA` form.
#[derive(Debug, Clone)]
pub(crate) struct ScriptCall {
    script: &'static Lua,
    /// Shared by the requests to every master; built completely before the first is sent.
    cmd: Arc<Cmd>,
}

impl ScriptCall {
    /// Adds a key or an argument.
    pub(crate) fn arg<T: redis::ToRedisArgs>(mut self, arg: T) -> Self {
        self.push(arg);
        self
    }

    /// Adds a key or an argument, in place.
    pub(crate) fn push<T: redis::ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        // Not shared yet while it is being built: no copy is made.
        Arc::make_mut(&mut self.cmd).arg(arg);
        self
    }

    /// The script called.
    pub(crate) fn script(&self) -> &'static Lua {
        self.script
    }

    /// `EVALSHA sha numkeys args..`.
    pub(crate) fn by_sha(&self) -> &Arc<Cmd> {
        &self.cmd
    }

    /// The `EVALSHA` form, by value.
    pub(crate) fn into_by_sha(self) -> Cmd {
        Arc::try_unwrap(self.cmd).unwrap_or_else(|shared| (*shared).clone())
    }

    /// `EVAL source numkeys args..`: the same call for a master that may not have the script.
    pub(crate) fn with_source(&self) -> Cmd {
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(self.script.source());
        // Skip `EVALSHA` and the SHA1; everything after them is shared by both forms.
        for arg in self.cmd.args_iter().skip(2) {
            if let Arg::Simple(bytes) = arg {
                cmd.arg(bytes);
            }
        }
        cmd
    }
}

/// A call of `script` over `keys` in its `EVALSHA` form; the caller appends the script's
/// arguments with [`ScriptCall::push`].
pub(crate) fn eval<K: AsRef<str>>(script: &'static Lua, keys: &[K]) -> ScriptCall {
    let bytes = keys.iter().map(|k| k.as_ref().len()).sum();
    let mut call = script.call(keys.len(), keys.len() + 4, bytes);
    for key in keys {
        call.push(key.as_ref());
    }
    call
}

/// What a compare-and-act script found on one master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// Our token was there, and the script acted on it.
    Ours,
    /// The key was absent.
    Absent,
    /// Another token holds the key.
    Other,
}

impl Found {
    /// Reads a compare-and-act script's 1 / 0 / -1 answer.
    pub(crate) fn from_reply(reply: Value) -> Result<Self, NodeErrorKind> {
        match reply {
            Value::Int(1) => Ok(Found::Ours),
            Value::Int(0) => Ok(Found::Absent),
            Value::Int(-1) => Ok(Found::Other),
            Value::Int(other) => Err(NodeErrorKind::Protocol(
                format!("script returned {other}, expected 1, 0 or -1").into(),
            )),
            other => Err(NodeErrorKind::Protocol(
                format!("script answered {other:?}").into(),
            )),
        }
    }

    /// As a vote outcome: only `Ours` is a yes.
    pub(crate) fn into_result(self) -> Result<(), NodeErrorKind> {
        match self {
            Found::Ours => Ok(()),
            Found::Absent => Err(NodeErrorKind::Absent),
            Found::Other => Err(NodeErrorKind::Held),
        }
    }
}

/// Reads a script's integer reply.
pub(crate) fn int_reply(value: Value, what: &str) -> Result<i64, NodeErrorKind> {
    match value {
        Value::Int(n) => Ok(n),
        other => Err(NodeErrorKind::Protocol(
            format!("{what} answered {other:?}, expected an integer").into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_carry_the_same_arguments() {
        let call = RELEASE.call(1, 3, 12).arg("k").arg("tok").arg("chan");
        let sha: Vec<&[u8]> = call
            .by_sha()
            .args_iter()
            .filter_map(|a| match a {
                Arg::Simple(b) => Some(b),
                _ => None,
            })
            .collect();
        assert_eq!(sha[0], b"EVALSHA");
        assert_eq!(sha[1], RELEASE.sha().as_bytes());
        assert_eq!(&sha[2..], &[&b"1"[..], b"k", b"tok", b"chan"]);
        let eval = call.with_source();
        let eval: Vec<&[u8]> = eval
            .args_iter()
            .filter_map(|a| match a {
                Arg::Simple(b) => Some(b),
                _ => None,
            })
            .collect();
        assert_eq!(eval[0], b"EVAL");
        assert_eq!(eval[1], RELEASE.source().as_bytes());
        assert_eq!(&eval[2..], &sha[2..]);
    }

    #[test]
    fn sha_is_redis_sha1_of_the_source() {
        // SHA1 of the empty script, as `SCRIPT LOAD ""` answers.
        assert_eq!(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(RELEASE.sha().len(), 40);
        assert_ne!(RELEASE.sha(), EXTEND.sha());
    }

    #[test]
    fn every_script_fits_the_cache_record_and_has_its_own_slot_and_sha() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/scripts");
        let scripts = std::fs::read_dir(dir)
            .expect("src/scripts")
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| name.ends_with(".lua") && !name.ends_with("_common.lua"))
            .count();
        assert!(
            scripts > 20 && scripts <= SCRIPTS,
            "{scripts} scripts, room for {SCRIPTS}"
        );
        let shared = [
            &RELEASE,
            &EXTEND,
            &INSPECT,
            &FENCE_ACQUIRE,
            &FENCE_COMMIT,
            &FENCE_REPAIR,
        ];
        for (i, script) in shared.iter().enumerate() {
            for other in &shared[i + 1..] {
                assert_ne!(script.slot(), other.slot(), "two scripts share a slot");
                assert_ne!(script.sha(), other.sha(), "two scripts share a source");
            }
        }
    }
}
