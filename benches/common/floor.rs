//! The command floors: what the masters' commands cost with no lock logic around them, sent over
//! one multiplexed connection per master, so that every benchmark reads quorlock (and its peers)
//! as a ratio against the fastest a client could be on the same masters in the same run.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use quorlock_chaos::servers::NativeCommands;
use quorlock_chaos::{Cluster, Server};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Cmd, Pipeline, Value};

use super::{token, PIPELINE_BUFFER, RELEASE_SCRIPT, TTL};

/// The raw floor: `SET key token NX PX ttl` to every master concurrently, then `DEL key` to every
/// master concurrently, over one multiplexed connection per master, with no lock logic at all.
///
/// The same connections also serve the other floors: the script floor (the compare-and-delete
/// script in place of `DEL`), the native floor (`DELIFEQ` in place of `DEL`, on servers that have
/// it), and the early-quorum floor ([`FloorRelease::AsQuorlock`] with [`Wait::Quorum`]).
pub struct Floor {
    conns: Vec<MultiplexedConnection>,
    /// The SHA1 of quorlock's release script, loaded on every master at connect.
    release_sha: String,
    /// The native commands of the server the masters run.
    native: NativeCommands,
}

/// How a floor releases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorRelease {
    /// `DEL key`: no ownership check.
    Del,
    /// quorlock's compare-and-delete script, source sent every time (`EVAL`).
    Eval,
    /// quorlock's compare-and-delete script by SHA1 (`EVALSHA`), as quorlock sends it.
    EvalSha,
    /// `DELIFEQ key token`, the native compare-and-delete (Valkey 9 and later), with no
    /// announcement.
    DelIfEq,
    /// What quorlock's plain release sends on this server: `DELIFEQ` pipelined with the release
    /// announcement (`PUBLISH`) where the server has it, else the script by SHA1, which announces
    /// the release itself.
    AsQuorlock,
}

/// When a floor's phase returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// At the last master's reply.
    All,
    /// At the q-th reply (`q = N / 2 + 1`); the slower masters' requests finish in a task.
    Quorum,
}

/// One request of a floor to one master, owning what it needs so that it can finish in a task.
enum Request {
    Command(Arc<Cmd>),
    Pipeline(Arc<Pipeline>, usize),
}

/// A request's reply (a pipeline's first reply).
type Reply = Result<Value, redis::RedisError>;

impl Floor {
    /// Connects to every master of `cluster`, with `timeout` as the response timeout.
    pub async fn connect(cluster: &Cluster, timeout: Duration) -> Floor {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(timeout))
            // The same queue depth quorlock gives its connections: the floor must not be slowed
            // by a setting the lock is free to change.
            .set_pipeline_buffer_size(PIPELINE_BUFFER);
        let mut conns = Vec::new();
        for url in cluster.urls() {
            let client = redis::Client::open(url.as_str()).unwrap_or_else(|e| {
                eprintln!("bad url {url}: {e}");
                std::process::exit(1);
            });
            let conn = client
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .unwrap_or_else(|e| {
                    eprintln!("cannot connect to {url}: {e}");
                    std::process::exit(1);
                });
            conns.push(conn);
        }
        let mut release_sha = String::new();
        for conn in &mut conns {
            let mut load = redis::cmd("SCRIPT");
            load.arg("LOAD").arg(RELEASE_SCRIPT);
            release_sha = load.query_async(conn).await.unwrap_or_else(|e| {
                eprintln!("cannot load the release script: {e}");
                std::process::exit(1);
            });
        }
        Floor {
            conns,
            release_sha,
            native: server().commands(),
        }
    }

    /// Whether the masters have `DELIFEQ` (the native floor runs only then).
    pub fn has_delifeq(&self) -> bool {
        self.native.delifeq
    }

    /// What [`FloorRelease::AsQuorlock`] sends on these masters, for reports.
    pub fn quorlock_release(&self) -> &'static str {
        if self.native.delifeq {
            "DELIFEQ + PUBLISH"
        } else {
            "EVALSHA (script)"
        }
    }

    /// One floor acquire + release; returns the two phase times. Fails unless every SET said OK.
    pub async fn once(&self, key: &str) -> Result<(Duration, Duration), String> {
        self.once_with(key, FloorRelease::Del).await
    }

    /// The floor with quorlock's own release command (the compare-and-delete script sent as
    /// `EVAL`) in place of `DEL`: what the wire format costs, without any client logic.
    pub async fn once_script(&self, key: &str) -> Result<(Duration, Duration), String> {
        self.once_with(key, FloorRelease::Eval).await
    }

    /// The early-quorum floor: the `SET` and quorlock's own release command go to all N masters,
    /// and each phase returns at the q-th reply, with no lock logic. No RedLock client can be
    /// faster on the same masters and connections.
    pub async fn once_quorum(&self, key: &str) -> Result<(Duration, Duration), String> {
        self.once_waiting(key, FloorRelease::AsQuorlock, Wait::Quorum)
            .await
    }

    /// One floor cycle releasing as `release` says, each phase waiting for every master.
    pub async fn once_with(&self, key: &str, how: FloorRelease) -> Result<(Duration, Duration), String> {
        self.once_waiting(key, how, Wait::All).await
    }

    /// One floor cycle releasing as `how` says, each phase returning as `wait` says. Fails unless
    /// every `SET` it waited for said OK.
    pub async fn once_waiting(
        &self,
        key: &str,
        how: FloorRelease,
        wait: Wait,
    ) -> Result<(Duration, Duration), String> {
        let token = token();
        let ttl_ms = TTL.as_millis() as u64;
        let need = match wait {
            Wait::All => self.conns.len(),
            Wait::Quorum => self.conns.len() / 2 + 1,
        };
        let t0 = Instant::now();
        let mut set = Cmd::with_capacity(6, 40 + key.len() + token.len());
        set.arg("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(ttl_ms);
        let replies = self.fan_out(Request::Command(Arc::new(set)), need).await;
        let t1 = Instant::now();
        let release = self.release(key, &token, how);
        let released = self.fan_out(release, need).await;
        let t2 = Instant::now();
        for reply in replies {
            match reply {
                Ok(Value::Okay) => {}
                other => return Err(format!("floor SET answered {other:?}")),
            }
        }
        for reply in released {
            if let Err(e) = reply {
                return Err(format!("floor release failed: {e}"));
            }
        }
        Ok((t1 - t0, t2 - t1))
    }

    /// The release request of one cycle.
    fn release(&self, key: &str, token: &str, how: FloorRelease) -> Request {
        let how = match how {
            FloorRelease::AsQuorlock if self.native.delifeq => {
                let mut pipe = redis::pipe();
                pipe.cmd("DELIFEQ").arg(key).arg(token);
                pipe.cmd("PUBLISH")
                    .arg(format!("quorlock:released:{key}"))
                    .arg(token);
                return Request::Pipeline(Arc::new(pipe), 2);
            }
            FloorRelease::AsQuorlock => FloorRelease::EvalSha,
            other => other,
        };
        let cmd = match how {
            FloorRelease::Del => {
                let mut del = redis::cmd("DEL");
                del.arg(key);
                del
            }
            FloorRelease::DelIfEq => {
                let mut del = redis::cmd("DELIFEQ");
                del.arg(key).arg(token);
                del
            }
            _ => {
                let (name, script) = match how {
                    FloorRelease::Eval => ("EVAL", RELEASE_SCRIPT),
                    _ => ("EVALSHA", self.release_sha.as_str()),
                };
                let mut eval = redis::cmd(name);
                eval.arg(script)
                    .arg(1)
                    .arg(key)
                    .arg(token)
                    .arg(format!("quorlock:released:{key}"));
                eval
            }
        };
        Request::Command(Arc::new(cmd))
    }

    /// Sends `request` to every master at once and returns the first `need` replies; the requests
    /// still in flight then finish in a task.
    async fn fan_out(&self, request: Request, need: usize) -> Vec<Reply> {
        let mut pending: FuturesUnordered<_> = self
            .conns
            .iter()
            .map(|c| {
                let mut c = c.clone();
                let request = match &request {
                    Request::Command(cmd) => Request::Command(Arc::clone(cmd)),
                    Request::Pipeline(pipe, count) => Request::Pipeline(Arc::clone(pipe), *count),
                };
                async move {
                    match request {
                        Request::Command(cmd) => c.send_packed_command(&cmd).await,
                        Request::Pipeline(pipe, count) => c
                            .send_packed_commands(&pipe, 0, count)
                            .await
                            .map(|replies| replies.into_iter().next().unwrap_or(Value::Nil)),
                    }
                }
            })
            .collect();
        let mut replies = Vec::with_capacity(need);
        while replies.len() < need {
            match pending.next().await {
                Some(reply) => replies.push(reply),
                None => break,
            }
        }
        if !pending.is_empty() {
            tokio::spawn(async move { while pending.next().await.is_some() {} });
        }
        replies
    }
}

/// The server the masters run, as `QUORLOCK_TEST_SERVER` selects it (the harness reads the same
/// variable); exits with the harness's message when it names no server.
pub fn server() -> Server {
    Server::from_env().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2);
    })
}
