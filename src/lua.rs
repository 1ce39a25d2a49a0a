//! Script calls that can travel by SHA1 (`EVALSHA`) instead of carrying the script's source.
//!
//! A release or a renewal is a short Lua script. Sending it as `EVAL` copies its source (hundreds of
//! bytes) into every command, and makes every master hash that source again on every call. A
//! [`ScriptCall`] is built once in its `EVALSHA sha numkeys args..` form; the `EVAL source ..` form
//! is only built when a master may not have the script cached:
//!
//! - On the shared connection of a master ([`crate::node::Node::run_script`]), `EVALSHA` is used
//!   only once the script is known to be cached on that master's *current connection epoch*: an
//!   `EVAL` of it succeeded since the connection was last lost (a restart of the master always
//!   drops the connection, and a new connection starts a new epoch). A `NOSCRIPT` reply, which means
//!   nothing ran, falls back to `EVAL` at once.
//! - The watchdog's renewal pipelines put a `SCRIPT LOAD` of each script they use at their head.
//!
//! What this gives up: a release whose `EVALSHA` sits queued behind a stalled master after the
//! client stopped waiting for it (the per-node timeout) has nobody left to retry it if it meets
//! `NOSCRIPT`. A command queued on a connection runs on that connection's server process or not at
//! all, so a restart cannot cause this; only a `SCRIPT FLUSH` on the same connection between the
//! load and the release can (or a proxy that swaps the server behind a kept client connection).
//! That release is then lost, and the key expires with its TTL, exactly as when the master is
//! unreachable.

use std::sync::LazyLock;

use redis::{Arg, Cmd};

use crate::node::{EXTEND_SCRIPT, RELEASE_SCRIPT};

/// A script the client can send by SHA1, with a slot per master to remember where it is cached.
#[derive(Debug)]
pub(crate) struct Lua {
    /// Index into each node's record of cached scripts.
    pub(crate) slot: usize,
    source: &'static str,
    sha: LazyLock<String>,
}

/// How many scripts have a [`Lua`] (the size of each node's cache record).
pub(crate) const SCRIPTS: usize = 2;

/// The compare-and-delete release of a plain lock.
pub(crate) static RELEASE: Lua = Lua {
    slot: 0,
    source: RELEASE_SCRIPT,
    sha: LazyLock::new(|| sha1_hex(RELEASE_SCRIPT)),
};

/// The compare-and-PEXPIRE extend of a plain lock.
pub(crate) static EXTEND: Lua = Lua {
    slot: 1,
    source: EXTEND_SCRIPT,
    sha: LazyLock::new(|| sha1_hex(EXTEND_SCRIPT)),
};

/// The SHA1 Redis files `source` under.
pub(crate) fn sha1_hex(source: &str) -> String {
    redis::Script::new(source).get_hash().to_owned()
}

impl Lua {
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
        ScriptCall { script: self, cmd }
    }
}

/// One call of a [`Lua`] script, held in its `EVALSHA` form.
#[derive(Debug, Clone)]
pub(crate) struct ScriptCall {
    script: &'static Lua,
    cmd: Cmd,
}

impl ScriptCall {
    /// Adds a key or an argument.
    pub(crate) fn arg<T: redis::ToRedisArgs>(mut self, arg: T) -> Self {
        self.cmd.arg(arg);
        self
    }

    /// The script called.
    pub(crate) fn script(&self) -> &'static Lua {
        self.script
    }

    /// `EVALSHA sha numkeys args..`.
    pub(crate) fn by_sha(&self) -> &Cmd {
        &self.cmd
    }

    /// The `EVALSHA` form, by value.
    pub(crate) fn into_by_sha(self) -> Cmd {
        self.cmd
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
        assert_eq!(eval[1], RELEASE_SCRIPT.as_bytes());
        assert_eq!(&eval[2..], &sha[2..]);
    }

    #[test]
    fn sha_is_redis_sha1_of_the_source() {
        // SHA1 of the empty script, as `SCRIPT LOAD ""` answers.
        assert_eq!(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(RELEASE.sha().len(), 40);
        assert_ne!(RELEASE.sha(), EXTEND.sha());
    }
}
