//! The scripting engine of one master: an embedded Lua 5.1, sandboxed and wired the way Redis 7.0
//! wires its own, so that quorlock's real scripts run here unchanged.
//!
//! - `redis.call` / `redis.pcall` run commands against the master's state through the same
//!   dispatcher clients use; replies convert to Lua and back by Redis's rules (integer → number,
//!   bulk → string, nil → `false`, array → table, status → `{ok=}`, error → `{err=}`; number →
//!   integer, truncated; `true` → 1; `false`/nil → nil; table → array up to the first nil).
//! - `redis.call` raises the error table; a script error reply reads
//!   `<error> script: <sha>, on @user_script:<line>.` as the real server's does.
//! - Globals are read-only: scripts see them through an environment that refuses writes and
//!   raises on unknown names; `os`, `io`, `debug`, `loadfile` and `dofile` are not there.
//! - Compiled functions are cached by SHA1, so `EVALSHA` (and `EVAL` of a known body) only calls.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use mlua::{
    ChunkMode, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value as LuaValue,
    Variadic, VmState,
};
use redis::Value;

use super::exec;
use super::numfmt::{format_g17, lua_number_to_i64};
use super::reply::{error_text, script_error_text, server_error, status, CmdError};
use super::server::Server;

/// Source name scripts are compiled under, as in Redis (it shows in error messages).
const SCRIPT_SOURCE: &str = "@user_script";

/// A script is stopped after this many slices of [`SLICE`] Lua instructions (10^8 instructions,
/// seconds of real time): a runaway script would otherwise hang the whole simulation, where a
/// real server would answer `BUSY` to everyone until `SCRIPT KILL`.
const MAX_SLICES: u32 = 100;
/// Instructions between two checks of a script's budget.
const SLICE: u32 = 1_000_000;

/// The collector's pause, in percent of the heap after the last cycle (Lua's default is 200).
const GC_PAUSE: i32 = 1_000;

/// Deeper nested replies than this convert to nil (a cycle would otherwise never end).
const MAX_DEPTH: usize = 100;

/// Builds the `redis` table and the read-only environment. Runs once per engine.
const PRELUDE: &str = r#"
local call, pcall_impl, sha1hex, random, error_value = ...
local type, error, tostring, setmetatable = type, error, tostring, setmetatable
local redis = {}
redis.call = call
redis.pcall = pcall_impl
redis.error_reply = function(msg)
  if type(msg) ~= 'string' and type(msg) ~= 'number' then
    error('wrong number or type of arguments', 2)
  end
  msg = tostring(msg)
  if msg:sub(1, 1) == '-' then
    msg = msg:sub(2)
  end
  if not msg:find(' ', 1, true) then
    msg = 'ERR ' .. msg
  end
  return {err = msg}
end
redis.status_reply = function(msg)
  if type(msg) ~= 'string' and type(msg) ~= 'number' then
    error('wrong number or type of arguments', 2)
  end
  return {ok = tostring(msg)}
end
redis.sha1hex = sha1hex
redis.log = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.replicate_commands = function() return true end
redis.set_repl = function() end
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.setresp = function() end
math.random = random
math.randomseed = function() end
_G.redis = redis
-- pcall(redis.call, ...) gives the script the error's text, as on the real server.
local raw_pcall = pcall
local function caught(ok, ...)
  if ok then
    return ok, ...
  end
  return ok, error_value((...))
end
_G.pcall = function(...)
  return caught(raw_pcall(...))
end
_G.loadfile, _G.dofile, _G.print = nil, nil, nil
local globals = _G
setmetatable(globals, {__index = function(_, name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
end})
return setmetatable({}, {
  __index = globals,
  __newindex = function() error('Attempt to modify a readonly table', 2) end,
  __metatable = false,
})
"#;

/// A script body seen, and its SHA1.
type SeenBody = (Box<[u8]>, String);

/// A master's Lua state and its compiled scripts.
pub(crate) struct ScriptEngine {
    lua: Lua,
    globals: Table,
    env: Table,
    xpcall: Function,
    handler: Function,
    scripts: HashMap<[u8; 40], Function>,
    /// The SHA1 of every body seen, by length: `EVAL` sends the same few bodies again and again,
    /// and comparing the bytes costs far less than hashing them anew.
    shas: HashMap<usize, Vec<SeenBody>>,
    /// State of `math.random`, reset before every script as Redis reseeds it.
    random: Rc<Cell<u64>>,
    /// Instruction slices the running script has used.
    slices: Rc<Cell<u32>>,
}

impl std::fmt::Debug for ScriptEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptEngine")
            .field("scripts", &self.scripts.len())
            .finish_non_exhaustive()
    }
}

/// The SHA1 of a script body, lower-case hex, as Redis names it.
pub fn sha1_hex(body: &[u8]) -> String {
    sha1_smol::Sha1::from(body).digest().to_string()
}

/// `sha` lower-cased as a cache key, if it has the length of a SHA1.
fn sha_key(sha: &[u8]) -> Option<[u8; 40]> {
    let mut key = [0u8; 40];
    if sha.len() != key.len() {
        return None;
    }
    for (dst, src) in key.iter_mut().zip(sha) {
        *dst = src.to_ascii_lowercase();
    }
    Some(key)
}

/// A command argument taken from Lua: a string borrowed from Lua, or a formatted number.
enum Arg<'a> {
    Borrowed(mlua::BorrowedBytes<'a>),
    Owned(Vec<u8>),
}

impl AsRef<[u8]> for Arg<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            Arg::Borrowed(bytes) => bytes,
            Arg::Owned(bytes) => bytes,
        }
    }
}

/// A Lua number as `redis.call` passes it: `%.17g`, as Redis 7.0 formats it.
fn number_arg(x: f64) -> Vec<u8> {
    format_g17(x).into_bytes()
}

impl ScriptEngine {
    /// A fresh engine whose `redis.call` runs commands on `server`.
    pub(crate) fn new(server: Rc<RefCell<Server>>) -> mlua::Result<ScriptEngine> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let call = {
            let server = Rc::clone(&server);
            lua.create_function(move |lua, args: Variadic<LuaValue>| {
                match redis_command(lua, &server, &args)? {
                    Ok(value) => Ok(value),
                    Err(text) => Err(mlua::Error::external(CallFailed(text.into_owned()))),
                }
            })?
        };
        let pcall = lua.create_function(move |lua, args: Variadic<LuaValue>| {
            match redis_command(lua, &server, &args)? {
                Ok(value) => Ok(value),
                Err(text) => error_table(lua, &text),
            }
        })?;
        let sha1hex = lua.create_function(|_, body: mlua::String| Ok(sha1_hex(&body.as_bytes())))?;
        let random = Rc::new(Cell::new(0u64));
        let random_fn = {
            let random = Rc::clone(&random);
            lua.create_function(move |_, args: Variadic<f64>| math_random(&random, &args))?
        };
        // What `pcall` gives a script for an error, as Redis 7.0's own `pcall`: the `err` text of
        // an error table (and of a failed `redis.call`), any other error as it is.
        let error_value = lua.create_function(|lua, err: LuaValue| match &err {
            LuaValue::Error(e) => match call_failure(e) {
                Some(text) => Ok(LuaValue::String(lua.create_string(text)?)),
                None => Ok(err),
            },
            LuaValue::Table(t) => match t.raw_get::<LuaValue>("err")? {
                text @ LuaValue::String(_) => Ok(text),
                _ => Ok(err),
            },
            _ => Ok(err),
        })?;
        let globals = lua.globals();
        let xpcall: Function = globals.raw_get("xpcall")?;
        let env: Table = lua.load(PRELUDE).set_name("=redis_prelude").call((
            call,
            pcall,
            sha1hex,
            random_fn,
            error_value,
        ))?;
        let handler = lua.create_function(error_handler)?;
        // Scripts leave little behind; a full cycle only once the heap has grown tenfold spends
        // far less time collecting (a real server's Lua heap is as small; only the time differs).
        lua.gc_set_pause(GC_PAUSE);
        let slices = Rc::new(Cell::new(0u32));
        {
            let slices = Rc::clone(&slices);
            lua.set_hook(HookTriggers::new().every_nth_instruction(SLICE), move |_, _| {
                let used = slices.get().saturating_add(1);
                slices.set(used);
                if used > MAX_SLICES {
                    return Err(mlua::Error::external(CallFailed(format!(
                        "ERR Script killed: it ran more than {} Lua instructions (the simulated \
                         master stops runaway scripts)",
                        u64::from(MAX_SLICES) * u64::from(SLICE)
                    ))));
                }
                Ok(VmState::Continue)
            })?;
        }
        Ok(ScriptEngine {
            lua,
            globals,
            env,
            xpcall,
            handler,
            scripts: HashMap::new(),
            shas: HashMap::new(),
            random,
            slices,
        })
    }

    /// Compiles `body` and caches it; returns its SHA1, or the compile error's reply text.
    pub(crate) fn load(&mut self, body: &[u8]) -> Result<String, String> {
        let sha = self.sha_of(body);
        let Some(key) = sha_key(sha.as_bytes()) else {
            return Err("ERR SHA1 of the script is malformed".to_owned());
        };
        if !self.scripts.contains_key(&key) {
            let function = self.compile(body)?;
            self.scripts.insert(key, function);
        }
        Ok(sha)
    }

    /// `sha1_hex(body)`, remembered.
    fn sha_of(&mut self, body: &[u8]) -> String {
        let same_length = self.shas.entry(body.len()).or_default();
        if let Some((_, sha)) = same_length.iter().find(|(seen, _)| **seen == *body) {
            return sha.clone();
        }
        let sha = sha1_hex(body);
        same_length.push((body.into(), sha.clone()));
        sha
    }

    fn compile(&self, body: &[u8]) -> Result<Function, String> {
        self.lua
            .load(body)
            .set_name(SCRIPT_SOURCE)
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| {
                let message = match e {
                    mlua::Error::SyntaxError { message, .. } => message,
                    other => other.to_string(),
                };
                format!("ERR Error compiling script (new function): {message}")
            })
    }

    /// `true` when a script with this SHA1 is cached (any case).
    pub(crate) fn exists(&self, sha: &[u8]) -> bool {
        sha_key(sha).is_some_and(|key| self.scripts.contains_key(&key))
    }

    /// Forgets every cached script.
    pub(crate) fn flush(&mut self) {
        self.scripts.clear();
        // Dropping the functions is enough; collect now so memory does not grow across flushes.
        let _ = self.lua.gc_collect();
    }

    /// Runs the cached script `sha` with `keys` and `argv`; `None` when it is not cached.
    pub(crate) fn run(&mut self, sha: &[u8], keys: &[&[u8]], argv: &[&[u8]]) -> Option<Value> {
        let key = sha_key(sha)?;
        let function = self.scripts.get(&key)?.clone();
        Some(self.call(&function, &key, keys, argv))
    }

    fn call(&self, function: &Function, sha: &[u8; 40], keys: &[&[u8]], argv: &[&[u8]]) -> Value {
        let sha = String::from_utf8_lossy(sha);
        match self.try_call(function, keys, argv) {
            Ok(Ok(value)) => value,
            Ok(Err(failure)) => server_error(&match failure.line {
                Some(line) => format!("{} script: {sha}, on {SCRIPT_SOURCE}:{line}.", failure.message),
                None => format!("{} script: {sha}", failure.message),
            }),
            Err(e) => server_error(&format!("ERR Error running script: {e} script: {sha}")),
        }
    }

    fn try_call(
        &self,
        function: &Function,
        keys: &[&[u8]],
        argv: &[&[u8]],
    ) -> mlua::Result<Result<Value, Failure>> {
        self.random.set(0);
        self.slices.set(0);
        self.globals.raw_set("KEYS", self.sequence(keys)?)?;
        self.globals.raw_set("ARGV", self.sequence(argv)?)?;
        let mut results: MultiValue = self.xpcall.call((function.clone(), self.handler.clone()))?;
        let ok = matches!(results.pop_front(), Some(LuaValue::Boolean(true)));
        let value = results.pop_front().unwrap_or(LuaValue::Nil);
        Ok(if ok {
            Ok(to_reply(&value, 0))
        } else {
            Err(Failure::from_lua(&value))
        })
    }

    fn sequence(&self, items: &[&[u8]]) -> mlua::Result<Table> {
        self.lua
            .create_sequence_from(items.iter().map(|item| match std::str::from_utf8(item) {
                // Text goes straight onto Lua's stack; other bytes through a string handle.
                Ok(text) => mlua::Either::Left(text),
                Err(_) => mlua::Either::Right(Bytes(item)),
            }))
    }
}

/// Bytes going into Lua as a string.
struct Bytes<'a>(&'a [u8]);

impl mlua::IntoLua for Bytes<'_> {
    fn into_lua(self, lua: &Lua) -> mlua::Result<LuaValue> {
        lua.create_string(self.0).map(LuaValue::String)
    }
}

/// Why a script failed: the error's text and the script line it was raised on.
struct Failure {
    message: String,
    line: Option<i64>,
}

impl Failure {
    /// Reads the table the error handler made (or any other error value).
    fn from_lua(err: &LuaValue) -> Failure {
        let LuaValue::Table(table) = err else {
            return Failure {
                message: format!("ERR {}", lua_display(err)),
                line: None,
            };
        };
        let message = match table.raw_get::<LuaValue>("err") {
            Ok(LuaValue::String(s)) => s.to_string_lossy(),
            _ => "ERR unknown error".to_owned(),
        };
        let line = match table.raw_get::<LuaValue>("line") {
            Ok(LuaValue::Integer(line)) => Some(line),
            Ok(LuaValue::Number(line)) => Some(line as i64),
            _ => None,
        };
        Failure { message, line }
    }
}

/// How Lua's `tostring` shows an error value that is not a table.
fn lua_display(value: &LuaValue) -> String {
    match value {
        LuaValue::Nil => "nil".to_owned(),
        LuaValue::Boolean(b) => b.to_string(),
        LuaValue::Integer(i) => i.to_string(),
        LuaValue::Number(n) => format_g17(*n),
        LuaValue::String(s) => s.to_string_lossy(),
        LuaValue::Error(e) => e.to_string(),
        other => other.type_name().to_owned(),
    }
}

/// The message handler of every script call, as Redis's: turns the error into a table
/// `{err=...}` ("ERR " before a plain message) and records the script line it came from.
fn error_handler(lua: &Lua, err: LuaValue) -> mlua::Result<Table> {
    let table = match err {
        LuaValue::Table(table) => table,
        LuaValue::Error(e) if call_failure(&e).is_some() => {
            let table = lua.create_table()?;
            table.raw_set("err", call_failure(&e).unwrap_or_default())?;
            table
        }
        other => {
            let table = lua.create_table()?;
            table.raw_set("err", format!("ERR {}", lua_display(&other)))?;
            table
        }
    };
    // The innermost frame of the script itself (skipping `error`, `redis.call` and this handler).
    for level in 0..256 {
        let frame = lua.inspect_stack(level, |debug| {
            let source = debug.source();
            (
                source.source.as_deref() == Some(SCRIPT_SOURCE),
                debug.current_line(),
            )
        });
        match frame {
            None => break,
            Some((true, line)) => {
                if let Some(line) = line {
                    table.raw_set("source", SCRIPT_SOURCE)?;
                    table.raw_set("line", line)?;
                }
                break;
            }
            Some((false, _)) => {}
        }
    }
    Ok(table)
}

/// A table `{err = text}`.
fn error_table(lua: &Lua, text: &str) -> mlua::Result<LuaValue> {
    let table = lua.create_table()?;
    table.raw_set("err", text)?;
    Ok(LuaValue::Table(table))
}

/// The error `redis.call` raises when a command fails; the message handler turns it into the
/// `{err=...}` table Redis raises.
#[derive(Debug)]
struct CallFailed(String);

impl std::fmt::Display for CallFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CallFailed {}

/// The text of a [`CallFailed`] inside a Lua error, however mlua wrapped it.
fn call_failure(error: &mlua::Error) -> Option<&str> {
    let mut current = error;
    loop {
        if let Some(CallFailed(text)) = current.downcast_ref::<CallFailed>() {
            return Some(text);
        }
        current = current.parent()?;
    }
}

/// Runs one command for `redis.call` / `redis.pcall`: its reply in Lua, or the error's text.
fn redis_command(
    lua: &Lua,
    server: &Rc<RefCell<Server>>,
    args: &[LuaValue],
) -> mlua::Result<Result<LuaValue, Cow<'static, str>>> {
    if args.is_empty() {
        return Ok(Err(Cow::Borrowed(
            "ERR Please specify at least one argument for this redis lib call",
        )));
    }
    let mut parts: Vec<Arg<'_>> = Vec::with_capacity(args.len());
    for arg in args {
        parts.push(match arg {
            LuaValue::String(s) => Arg::Borrowed(s.as_bytes()),
            LuaValue::Integer(i) if i.unsigned_abs() < 100_000_000_000_000_000 => {
                Arg::Owned(i.to_string().into_bytes())
            }
            LuaValue::Integer(i) => Arg::Owned(number_arg(*i as f64)),
            LuaValue::Number(n) => Arg::Owned(number_arg(*n)),
            _ => {
                return Ok(Err(Cow::Borrowed(
                    "ERR Lua redis lib command arguments must be strings or integers",
                )))
            }
        });
    }
    let argv: Vec<&[u8]> = parts.iter().map(AsRef::as_ref).collect();
    let result = {
        let Ok(mut server) = server.try_borrow_mut() else {
            return Ok(Err(Cow::Borrowed("ERR simulated master is busy")));
        };
        match exec::resolve(&server, &argv) {
            Ok(spec) if spec.noscript() => Err(CmdError::NotFromScript),
            Ok(spec) => {
                exec::admit(&mut server, spec, &argv).and_then(|()| exec::run(&mut server, spec.cmd, &argv))
            }
            Err(e) => Err(e),
        }
    };
    Ok(match result {
        Ok(Value::ServerError(e)) => Err(Cow::Owned(error_text(&Value::ServerError(e)).unwrap_or_default())),
        Ok(value) => Ok(to_lua(lua, &value, 0)?),
        Err(e) => Err(script_error_text(&e)),
    })
}

/// A command's reply as a script sees it.
fn to_lua(lua: &Lua, value: &Value, depth: usize) -> mlua::Result<LuaValue> {
    Ok(match value {
        Value::Nil => LuaValue::Boolean(false),
        Value::Int(i) => LuaValue::Number(*i as f64),
        Value::BulkString(bytes) => LuaValue::String(lua.create_string(bytes)?),
        Value::Okay => {
            let table = lua.create_table_with_capacity(0, 1)?;
            table.raw_set("ok", "OK")?;
            LuaValue::Table(table)
        }
        Value::SimpleString(text) => {
            let table = lua.create_table_with_capacity(0, 1)?;
            table.raw_set("ok", text.as_str())?;
            LuaValue::Table(table)
        }
        Value::Array(items) if depth < MAX_DEPTH => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, to_lua(lua, item, depth + 1)?)?;
            }
            LuaValue::Table(table)
        }
        Value::ServerError(_) => return error_table(lua, &error_text(value).unwrap_or_default()),
        Value::Double(d) => LuaValue::Number(*d),
        Value::Boolean(b) => LuaValue::Boolean(*b),
        _ => LuaValue::Boolean(false),
    })
}

/// A script's return value as the client reads it.
fn to_reply(value: &LuaValue, depth: usize) -> Value {
    match value {
        LuaValue::Boolean(true) => Value::Int(1),
        LuaValue::Integer(i) => Value::Int(*i),
        LuaValue::Number(n) => Value::Int(lua_number_to_i64(*n)),
        LuaValue::String(s) => Value::BulkString(s.as_bytes().to_vec()),
        LuaValue::Table(table) if depth < MAX_DEPTH => {
            if let Ok(LuaValue::String(e)) = table.raw_get::<LuaValue>("err") {
                return server_error(&e.to_string_lossy());
            }
            if let Ok(LuaValue::String(ok)) = table.raw_get::<LuaValue>("ok") {
                return status(&ok.to_string_lossy());
            }
            let mut items = Vec::new();
            for i in 1.. {
                match table.raw_get::<LuaValue>(i) {
                    Ok(LuaValue::Nil) | Err(_) => break,
                    Ok(item) => items.push(to_reply(&item, depth + 1)),
                }
            }
            Value::Array(items)
        }
        _ => Value::Nil,
    }
}

/// `math.random` as in Lua 5.1, over a generator reset before each script (Redis reseeds it
/// so that scripts are deterministic).
fn math_random(state: &Cell<u64>, args: &[f64]) -> mlua::Result<f64> {
    // SplitMix64 step, then 53 bits into [0, 1).
    let next = state.get().wrapping_add(0x9E37_79B9_7F4A_7C15);
    state.set(next);
    let mut z = next;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    let r = (z >> 11) as f64 / (1u64 << 53) as f64;
    match args {
        [] => Ok(r),
        [m] if *m >= 1.0 => Ok((r * m.floor()).floor() + 1.0),
        [m, n] if m <= n => Ok((r * (n.floor() - m.floor() + 1.0)).floor() + m.floor()),
        [_] | [_, _] => Err(mlua::Error::runtime(
            "bad argument to 'random' (interval is empty)",
        )),
        _ => Err(mlua::Error::runtime("wrong number of arguments")),
    }
}
