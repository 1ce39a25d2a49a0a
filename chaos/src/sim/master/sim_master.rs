//! [`SimMaster`]: one simulated Redis/Valkey master. Pure and single-threaded: every call gives
//! the master's clock, nothing reads the wall clock, and the only randomness is the seeded run id
//! and eviction samples. What operations do to a server is here too: a copy of its data
//! ([`Snapshot`]), a restart that keeps part of it, a VM rolled back, a replica promoted.
//! Plain commands go to the dispatcher; `EVAL`, `EVALSHA` and `SCRIPT` go to the master's Lua
//! engine, whose `redis.call` reaches the same state.

use std::cell::RefCell;
use std::rc::Rc;

use redis::Value;

use super::commands::Cmd;
use super::config::{Flavor, MasterConfig, Persistence};
use super::error::MasterError;
use super::exec;
use super::keyspace::{self, Keyspace};
use super::lua::ScriptEngine;
use super::memory;
use super::numfmt::parse_i64;
use super::reply::{bulk, client_error_text, server_error, CmdError, Reply, NOT_INTEGER};
use super::server::{RunIds, Server, SubscriberCount};

/// A copy of a master's data at one instant ([`SimMaster::snapshot`]), with the replication offset
/// it was taken at.
#[derive(Debug, Clone)]
pub struct Snapshot {
    keyspace: Keyspace,
    offset: u64,
}

/// What a restart keeps of the data.
enum Survives<'a> {
    /// Everything (`appendfsync always`).
    Kept,
    /// Nothing (no persistence, or a wipe).
    Wiped,
    /// What the snapshot holds (what had reached the disk).
    From(&'a Snapshot),
}

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
            server.keyspace.set_clock(now);
            server.published.clear();
            server.oom = memory::make_room(&mut server);
            match exec::resolve(&server, args) {
                Err(e) => Err(e),
                Ok(spec) => exec::admit(&mut server, spec, args).map(|()| spec.cmd),
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
    /// empty script cache, and the configuration file's settings again (what `CONFIG SET` changed
    /// is gone). The data survives only with `keep_data` (a restart of an `appendfsync always`
    /// master keeps it; a crash without persistence, or a wipe, loses it).
    pub fn restart(&mut self, keep_data: bool, now: u64) -> Result<(), MasterError> {
        self.restart_with(
            if keep_data {
                Survives::Kept
            } else {
                Survives::Wiped
            },
            now,
        )
    }

    /// Restarts the master at `now` as [`SimMaster::restart`] does, with the data `snapshot` held
    /// (what an `appendfsync everysec` master had on disk when it crashed).
    pub fn restart_from(&mut self, snapshot: &Snapshot, now: u64) -> Result<(), MasterError> {
        self.restart_with(Survives::From(snapshot), now)
    }

    fn restart_with(&mut self, data: Survives<'_>, now: u64) -> Result<(), MasterError> {
        let engine = ScriptEngine::new(Rc::clone(&self.server))?;
        {
            let mut server = self
                .server
                .try_borrow_mut()
                .map_err(|_| MasterError::Lua(BUSY.to_owned()))?;
            match data {
                Survives::Kept => {}
                Survives::Wiped => server.keyspace.clear(),
                Survives::From(snapshot) => server.keyspace = snapshot.keyspace.clone(),
            }
            server.run_id = self.run_ids.next_id();
            server.started_at = now;
            server.starts += 1;
            server.now = now;
            server.published.clear();
            server.reset_runtime();
        }
        self.engine = engine;
        Ok(())
    }

    /// A copy of the data as it is now, and the replication offset it was taken at: what a
    /// replica that lags by nothing has, what a disk holds, what a VM snapshot keeps.
    pub fn snapshot(&self) -> Snapshot {
        match self.server.try_borrow() {
            Ok(server) => Snapshot {
                keyspace: server.keyspace.clone(),
                offset: server.repl_offset,
            },
            // Unreachable through `&self`: nothing else holds the state between calls.
            Err(_) => Snapshot {
                keyspace: Keyspace::default(),
                offset: 0,
            },
        }
    }

    /// Puts the data of `snapshot` back, keeping the process (`run_id`, uptime, scripts): a VM
    /// restored from an older snapshot of itself. Out of model for quorlock: nothing it can read
    /// tells this master from the one that acknowledged the writes the snapshot lacks.
    pub fn roll_back(&mut self, snapshot: &Snapshot) {
        if let Ok(mut server) = self.server.try_borrow_mut() {
            server.keyspace = snapshot.keyspace.clone();
            server.repl_offset = snapshot.offset;
        }
    }

    /// Turns this master, a replica until now, into a master holding what had replicated to it,
    /// `snapshot`: it takes over the previous master's replication history from the snapshot's
    /// offset (`second_repl_offset`), as `REPLICAOF NO ONE` does, and keeps its own `run_id` and
    /// uptime.
    pub fn promote(&mut self, snapshot: &Snapshot) {
        if let Ok(mut server) = self.server.try_borrow_mut() {
            server.keyspace = snapshot.keyspace.clone();
            server.repl_offset = snapshot.offset;
            server.second_repl_offset = Some(snapshot.offset + 1);
        }
    }

    /// Sets how many replicas `INFO` says are attached.
    pub fn set_replicas(&mut self, replicas: u64) {
        if let Ok(mut server) = self.server.try_borrow_mut() {
            server.replicas = replicas;
        }
    }

    /// The running server's persistence: whether the AOF is on, and its `appendfsync` now
    /// (`CONFIG SET` changes it until the next restart).
    pub fn appendfsync(&self) -> (bool, &'static str) {
        match self.server.try_borrow() {
            Ok(server) => (server.config.persistence.aof_enabled(), server.appendfsync),
            Err(_) => (false, "everysec"),
        }
    }

    /// Keys evicted since the process started.
    pub fn evicted_keys(&self) -> u64 {
        self.server.try_borrow().map_or(0, |s| s.evicted_keys)
    }

    /// The field `field` of the hash at `key`, if it is alive at `now`, read without touching
    /// anything (no access stamp, no expiry): for the simulation's own judgement of a fault.
    pub fn peek_hash_field(&self, key: &[u8], field: &[u8], now: u64) -> Option<Vec<u8>> {
        let server = self.server.try_borrow().ok()?;
        let (_, entry) = server.keyspace.live_keys(now).find(|(k, _)| *k == key)?;
        match &entry.data {
            keyspace::Data::Hash(hash) => hash.get(field).map(<[u8]>::to_vec),
            _ => None,
        }
    }

    /// The string at `key`, if it is alive at `now`, read without touching anything: for the
    /// simulation's own judgement, as [`SimMaster::peek_hash_field`].
    pub fn peek_string(&self, key: &[u8], now: u64) -> Option<Vec<u8>> {
        let server = self.server.try_borrow().ok()?;
        let (_, entry) = server.keyspace.live_keys(now).find(|(k, _)| *k == key)?;
        match &entry.data {
            keyspace::Data::Str(bytes) => Some(bytes.clone()),
            _ => None,
        }
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

    /// The keys alive at `now` and their deadlines (`None`: none), in byte order, read without
    /// touching anything: for the leak checks.
    pub fn deadlines(&self, now: u64) -> Vec<(Vec<u8>, Option<u64>)> {
        match self.server.try_borrow() {
            Ok(server) => server
                .keyspace
                .live_keys(now)
                .map(|(k, e)| (k.to_vec(), e.expires_at))
                .collect(),
            Err(_) => Vec::new(),
        }
    }

    /// Whether it was promoted from a replica in its current incarnation.
    pub fn promoted(&self) -> bool {
        self.server
            .try_borrow()
            .is_ok_and(|s| s.second_repl_offset.is_some())
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
