//! [`SimMaster`]: one simulated Redis/Valkey master. Pure and single-threaded: every call gives
//! the master's clock, nothing reads the wall clock, and the only randomness is the seeded run id.
//! Plain commands go to the dispatcher; `EVAL`, `EVALSHA` and `SCRIPT` go to the master's Lua
//! engine, whose `redis.call` reaches the same state.

use std::cell::RefCell;
use std::rc::Rc;

use redis::Value;

use super::commands::Cmd;
use super::config::{Flavor, MasterConfig, Persistence};
use super::error::MasterError;
use super::exec;
use super::lua::ScriptEngine;
use super::numfmt::parse_i64;
use super::reply::{bulk, client_error_text, server_error, CmdError, Reply, NOT_INTEGER};
use super::server::{RunIds, Server, SubscriberCount};

/// A simulated master.
#[derive(Debug)]
pub struct SimMaster {
    server: Rc<RefCell<Server>>,
    engine: ScriptEngine,
    run_ids: RunIds,
}

/// The reply when the master's state is already in use (a re-entrant call; cannot happen from
/// the public API, which takes `&mut self`).
const BUSY: &str = "ERR simulated master is busy";

impl SimMaster {
    /// A master started at `now` (ms on its own clock), empty.
    pub fn new(config: MasterConfig, now: u64) -> Result<SimMaster, MasterError> {
        let mut run_ids = RunIds::new(config.seed);
        let server = Rc::new(RefCell::new(Server::new(config, run_ids.next_id(), now)));
        let engine = ScriptEngine::new(Rc::clone(&server))?;
        Ok(SimMaster {
            server,
            engine,
            run_ids,
        })
    }

    /// Runs one command (`args[0]` is its name) at `now`, the master's clock in ms since the Unix
    /// epoch. Keys whose deadline is strictly before `now` are gone.
    pub fn execute(&mut self, now: u64, args: &[&[u8]]) -> Reply {
        let cmd = {
            let Ok(mut server) = self.server.try_borrow_mut() else {
                return Reply {
                    value: server_error(BUSY),
                    published: Vec::new(),
                };
            };
            server.now = now;
            server.published.clear();
            match exec::resolve(&server, args) {
                Err(e) => Err(e),
                Ok(spec) => Ok(spec.cmd),
            }
        };
        let value = match cmd {
            Err(e) => server_error(&client_error_text(&e, args)),
            Ok(Cmd::Eval) => self.eval(args, false),
            Ok(Cmd::EvalSha) => self.eval(args, true),
            Ok(Cmd::Script) => self.script(args),
            Ok(cmd) => match self.server.try_borrow_mut() {
                Ok(mut server) => exec::run(&mut server, cmd, args)
                    .unwrap_or_else(|e| server_error(&client_error_text(&e, args))),
                Err(_) => server_error(BUSY),
            },
        };
        let published = match self.server.try_borrow_mut() {
            Ok(mut server) => std::mem::take(&mut server.published),
            Err(_) => Vec::new(),
        };
        Reply { value, published }
    }

    /// Runs a command built with the client library (`redis::cmd(..).arg(..)`).
    pub fn execute_cmd(&mut self, now: u64, cmd: &redis::Cmd) -> Reply {
        let args: Vec<&[u8]> = cmd
            .args_iter()
            .filter_map(|arg| match arg {
                redis::Arg::Simple(bytes) => Some(bytes),
                _ => None,
            })
            .collect();
        self.execute(now, &args)
    }

    /// `EVAL script numkeys ..` or `EVALSHA sha numkeys ..`.
    fn eval(&mut self, args: &[&[u8]], by_sha: bool) -> Value {
        let Some(numkeys) = parse_i64(args[2]) else {
            return server_error(NOT_INTEGER);
        };
        let rest = &args[3..];
        if numkeys > rest.len() as i64 {
            return server_error("ERR Number of keys can't be greater than number of args");
        }
        if numkeys < 0 {
            return server_error("ERR Number of keys can't be negative");
        }
        let (keys, argv) = rest.split_at(numkeys as usize);
        let sha = if by_sha {
            args[1].to_vec()
        } else {
            match self.engine.load(args[1]) {
                Ok(sha) => sha.into_bytes(),
                Err(text) => return server_error(&text),
            }
        };
        self.engine
            .run(&sha, keys, argv)
            .unwrap_or_else(|| server_error("NOSCRIPT No matching script. Please use EVAL."))
    }

    /// `SCRIPT LOAD | EXISTS | FLUSH | KILL`.
    fn script(&mut self, args: &[&[u8]]) -> Value {
        let sub = args[1];
        let is = |word: &str| sub.eq_ignore_ascii_case(word.as_bytes());
        let arity = || {
            server_error(&format!(
                "ERR wrong number of arguments for 'script|{}' command",
                String::from_utf8_lossy(sub).to_lowercase()
            ))
        };
        if is("load") {
            if args.len() != 3 {
                return arity();
            }
            return match self.engine.load(args[2]) {
                Ok(sha) => bulk(sha.as_bytes()),
                Err(text) => server_error(&text),
            };
        }
        if is("exists") {
            if args.len() < 3 {
                return arity();
            }
            return Value::Array(
                args[2..]
                    .iter()
                    .map(|sha| Value::Int(i64::from(self.engine.exists(sha))))
                    .collect(),
            );
        }
        if is("flush") {
            match args {
                [_, _] => {}
                [_, _, mode] if mode.eq_ignore_ascii_case(b"async") || mode.eq_ignore_ascii_case(b"sync") => {
                }
                [_, _, _] => {
                    return server_error("ERR SCRIPT FLUSH only support SYNC|ASYNC option");
                }
                _ => return arity(),
            }
            self.engine.flush();
            return Value::Okay;
        }
        if is("kill") {
            return server_error("NOTBUSY No scripts in execution right now.");
        }
        server_error(&client_error_text(
            &CmdError::Msg(
                format!(
                    "ERR unknown subcommand '{}'. Try SCRIPT HELP.",
                    String::from_utf8_lossy(sub)
                )
                .into(),
            ),
            args,
        ))
    }

    /// Restarts the master at `now`: a new `run_id`, uptime from zero, a fresh Lua state with an
    /// empty script cache. The data survives only with `keep_data` (a restart of an
    /// `appendfsync always` master keeps it; a crash without persistence, or a wipe, loses it).
    pub fn restart(&mut self, keep_data: bool, now: u64) -> Result<(), MasterError> {
        let engine = ScriptEngine::new(Rc::clone(&self.server))?;
        {
            let mut server = self
                .server
                .try_borrow_mut()
                .map_err(|_| MasterError::Lua(BUSY.to_owned()))?;
            if !keep_data {
                server.keyspace.clear();
            }
            server.run_id = self.run_ids.next_id();
            server.started_at = now;
            server.starts += 1;
            server.now = now;
            server.published.clear();
        }
        self.engine = engine;
        Ok(())
    }

    /// Sets what `PUBLISH` answers: the number of subscribers of a channel. Without it, `PUBLISH`
    /// answers 0 (the network layer, which knows the subscribers, delivers the messages).
    pub fn set_subscriber_count(&mut self, count: SubscriberCount) {
        if let Ok(mut server) = self.server.try_borrow_mut() {
            server.subscribers = Some(count);
        }
    }

    /// Deletes every key whose deadline is before `now`; returns how many.
    pub fn expire_due(&mut self, now: u64) -> usize {
        match self.server.try_borrow_mut() {
            Ok(mut server) => server.keyspace.expire_due(now),
            Err(_) => 0,
        }
    }

    /// The keys alive at `now`, in byte order (for leak checks).
    pub fn keys(&self, now: u64) -> Vec<Vec<u8>> {
        match self.server.try_borrow() {
            Ok(server) => server.keyspace.live_keys(now).map(|(k, _)| k.to_vec()).collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Keys stored, as `DBSIZE` counts them (keys past their deadline that nothing touched since
    /// are counted until [`SimMaster::expire_due`] removes them).
    pub fn dbsize(&self) -> usize {
        self.server.try_borrow().map_or(0, |s| s.keyspace.len())
    }

    /// The `run_id` of the current process.
    pub fn run_id(&self) -> String {
        self.server
            .try_borrow()
            .map_or_else(|_| String::new(), |s| s.run_id.clone())
    }

    /// The master's configuration.
    pub fn config(&self) -> MasterConfig {
        match self.server.try_borrow() {
            Ok(server) => server.config,
            // Unreachable through `&self`; the config never changes, so any copy would do.
            Err(_) => MasterConfig::new(Flavor::Redis70, Persistence::None, 0),
        }
    }

    /// When the current process started, on the master's clock.
    pub fn started_at(&self) -> u64 {
        self.server.try_borrow().map_or(0, |s| s.started_at)
    }
}
