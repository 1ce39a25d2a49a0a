//! One `redis-server` as the process backend runs it: finding the program, spawning it with
//! its output kept in its master's dir, waiting until it answers PING as itself (telling a
//! port someone else holds from a real startup failure, with the log tail), and the direct
//! connections and PING probes every part of the harness uses to reach a master.
//!
//! It knows nothing of a cluster's options: the caller gives the command line and URL, so
//! the cluster logic (which masters, which ports, what configuration) stays in `cluster`.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::AsyncConnectionConfig;

use crate::error::HarnessError;
use crate::process;
use crate::servers::Server;

/// How long a master may take to answer PING after being spawned.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Name of the redis log file inside a master's dir.
pub(crate) const LOG_FILE: &str = "redis.log";
/// Name of the file collecting the child's stdout and stderr.
pub(crate) const STDERR_FILE: &str = "stderr.log";
/// Lines of log shown in startup errors.
const LOG_TAIL_LINES: usize = 25;

/// Finds the binary of the server `QUORLOCK_TEST_SERVER` selects: `redis-server` on `PATH` by
/// default, or a Valkey build (see [`Server::binary`]).
pub fn redis_server_path() -> Result<PathBuf, HarnessError> {
    Ok(Server::from_env()?.binary()?)
}

/// Outcome of waiting for a freshly spawned master.
pub(crate) enum Readiness {
    Ready,
    PortBusy,
}

/// How far the master's log files reached before a spawn, so that a failed start is judged
/// by what that start wrote.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LogOffsets {
    log: u64,
    stderr: u64,
}

impl LogOffsets {
    /// The current ends of the log files in `dir`.
    pub(crate) fn now(dir: &Path) -> LogOffsets {
        LogOffsets {
            log: file_len(&dir.join(LOG_FILE)),
            stderr: file_len(&dir.join(STDERR_FILE)),
        }
    }
}

/// Spawns `server` with `args` in `dir`, its stdout and stderr appended to the dir's
/// [`STDERR_FILE`]; the child dies with the spawning thread. `port` only names the attempt in
/// errors.
pub(crate) fn spawn(
    server: &Path,
    args: Vec<String>,
    dir: &Path,
    env: &[(OsString, OsString)],
    port: u16,
) -> Result<Child, HarnessError> {
    let out_path = dir.join(STDERR_FILE);
    let out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&out_path)
        .map_err(|e| HarnessError::io(format!("opening {}", out_path.display()), e))?;
    let err = out
        .try_clone()
        .map_err(|e| HarnessError::io(format!("duplicating {}", out_path.display()), e))?;
    let mut cmd = Command::new(server);
    cmd.args(args)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    process::spawn(&mut cmd)
        .map_err(|e| HarnessError::io(format!("spawning {} on port {port}", server.display()), e))
}

/// Waits until the child answers PING at `url` as itself, or reports why it will not: its
/// port is held by another process, it exited, or it took longer than [`READY_TIMEOUT`].
pub(crate) async fn wait_ready(
    child: &mut Child,
    url: &str,
    index: usize,
    port: u16,
    dir: &Path,
    offsets: LogOffsets,
) -> Result<Readiness, HarnessError> {
    let started = tokio::time::Instant::now();
    let expected_pid = child.id();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                let new_output = format!(
                    "{}{}",
                    read_from(&dir.join(LOG_FILE), offsets.log),
                    read_from(&dir.join(STDERR_FILE), offsets.stderr)
                );
                if new_output.contains("Address already in use")
                    || new_output.contains("Failed listening on port")
                {
                    return Ok(Readiness::PortBusy);
                }
                return Err(HarnessError::Exited {
                    index,
                    port,
                    status: status.to_string(),
                    log: dir.join(LOG_FILE),
                    log_tail: log_tail(dir),
                });
            }
            Ok(None) => {}
            Err(e) => return Err(HarnessError::io(format!("polling master {index}"), e)),
        }
        if let Some(pid) = ping_pid(url).await {
            if pid == expected_pid {
                return Ok(Readiness::Ready);
            }
            // Another redis-server owns this port; ours will fail to bind.
            return Ok(Readiness::PortBusy);
        }
        if started.elapsed() >= READY_TIMEOUT {
            return Err(HarnessError::StartTimeout {
                index,
                port,
                waited: READY_TIMEOUT,
                log: dir.join(LOG_FILE),
                log_tail: log_tail(dir),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls `url` with PING until it answers or `timeout` passes.
pub(crate) async fn wait_for_ping(url: &str, index: usize, timeout: Duration) -> Result<(), HarnessError> {
    let started = tokio::time::Instant::now();
    loop {
        if ping_pid(url).await.is_some() {
            return Ok(());
        }
        if started.elapsed() >= timeout {
            return Err(HarnessError::NotReady {
                index,
                url: url.to_string(),
                waited: timeout,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// PINGs the server at `url` and returns its `process_id`, or `None` if it is not ready.
async fn ping_pid(url: &str) -> Option<u32> {
    // Short: the caller polls until READY_TIMEOUT, and a port held by a non-redis
    // listener would otherwise stall every probe.
    let mut conn = connect(url, Duration::from_millis(300)).await.ok()?;
    let pong: String = redis::cmd("PING").query_async(&mut conn).await.ok()?;
    if pong != "PONG" {
        return None;
    }
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .ok()?;
    info.lines()
        .find_map(|line| line.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok())
}

/// A direct connection to the master at `url`, with `timeout` for connecting and for each
/// response.
pub(crate) async fn connect(url: &str, timeout: Duration) -> redis::RedisResult<MultiplexedConnection> {
    let client = redis::Client::open(url)?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    client.get_multiplexed_async_connection_with_config(&config).await
}

fn file_len(path: &Path) -> u64 {
    fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn read_from(path: &Path, offset: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(path) {
        if file.seek(SeekFrom::Start(offset)).is_ok() {
            let mut bytes = Vec::new();
            let _ = file.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    text
}

/// The last lines of a master's redis log and stderr, for error messages.
fn log_tail(dir: &Path) -> String {
    let mut out = String::new();
    for name in [LOG_FILE, STDERR_FILE] {
        let text = read_from(&dir.join(name), 0);
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.len().saturating_sub(LOG_TAIL_LINES);
        if !lines.is_empty() {
            let _ = writeln!(out, "--- {name} ---");
            for line in &lines[start..] {
                let _ = writeln!(out, "{line}");
            }
        }
    }
    if out.is_empty() {
        out.push_str("(no log output)");
    }
    out
}
