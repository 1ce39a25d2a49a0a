//! The process backend: N independent `redis-server` masters as child processes of the
//! test, each on its own free port and in its own temp dir, with fault controls
//! (kill, pause, resume, restart keeping or wiping data).
//!
//! It exists so that tests can run RedLock against real servers without Docker or root,
//! many clusters in parallel, and without leaking processes when a test dies.
//!
//! This file is the cluster logic: which masters exist, their options, ports and dirs, how a
//! launch retries a taken port, and what each fault does to a master. Running one
//! `redis-server` (spawn, readiness, logs, connections) is in `server`; signals and the
//! child's lifetime are in `process`.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;
use std::time::Duration;

use nix::unistd::Pid;
use redis::aio::MultiplexedConnection;

use crate::credentials::Credentials;
pub use crate::error::HarnessError;
use crate::process;
pub use crate::server::redis_server_path;
use crate::server::{self, connect, Readiness, LOG_FILE, STDERR_FILE};
use crate::servers::Server;

/// How many times a master is respawned when its port turns out to be taken.
const BIND_ATTEMPTS: u32 = 8;
/// Options for [`Cluster::start_with`].
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// Number of independent masters.
    pub masters: usize,
    /// `requirepass` for the default user.
    pub password: Option<String>,
    /// An ACL user `(name, password)` created with `on >pass ~* &* +@all`; URLs then use it.
    pub acl_user: Option<(String, String)>,
    /// `true` (default): `appendonly yes` + `appendfsync always`, so acknowledged writes
    /// survive a kill. `false`: `appendonly no`, so a restart comes back empty.
    pub appendfsync_always: bool,
    /// Extra `redis-server` arguments, appended last (so they override the defaults).
    pub extra_args: Vec<String>,
    /// The server the masters run; `None` (default): the one `QUORLOCK_TEST_SERVER` selects.
    pub server: Option<Server>,
}

impl ClusterOptions {
    /// The credentials clients use: the ACL user if set, else the default user's password.
    pub fn credentials(&self) -> Credentials {
        match &self.acl_user {
            Some((user, pass)) => Credentials {
                user: Some(user.clone()),
                password: Some(pass.clone()),
            },
            None => Credentials {
                user: None,
                password: self.password.clone(),
            },
        }
    }
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            masters: 5,
            password: None,
            acl_user: None,
            appendfsync_always: true,
            extra_args: Vec::new(),
            server: None,
        }
    }
}

/// What [`Cluster::restart`] does with a master's data before starting it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataMode {
    /// Keep the data dir: the AOF is replayed on startup.
    Keep,
    /// Delete the data dir's contents (logs excepted): the master comes back empty.
    Wipe,
}

/// One master: its port, dir and (when running) its process.
#[derive(Debug)]
struct Master {
    port: u16,
    dir: PathBuf,
    env: Vec<(OsString, OsString)>,
    child: Mutex<Option<Child>>,
    paused: bool,
}

/// N independent `redis-server` masters running as children of this process.
///
/// Dropping the cluster kills every master and removes its temp dirs. Children also get
/// `SIGKILL` if the thread that spawned them exits, so create and restart masters from a
/// long-lived thread (a test's thread or a runtime worker, not `spawn_blocking`).
#[derive(Debug)]
pub struct Cluster {
    opts: ClusterOptions,
    server: PathBuf,
    root: PathBuf,
    masters: Vec<Master>,
}

impl Cluster {
    /// Starts `masters` masters with default options.
    pub async fn start(masters: usize) -> Result<Cluster, HarnessError> {
        Cluster::start_with(ClusterOptions {
            masters,
            ..ClusterOptions::default()
        })
        .await
    }

    /// Starts a cluster with the given options; returns once every master answers PING.
    pub async fn start_with(opts: ClusterOptions) -> Result<Cluster, HarnessError> {
        Cluster::start_with_env(opts, Vec::new()).await
    }

    /// Like [`Cluster::start_with`], with extra environment variables for some masters:
    /// `env[i]` is added to master `i`'s environment on every (re)start (e.g. libfaketime).
    pub async fn start_with_env(
        opts: ClusterOptions,
        env: Vec<Vec<(OsString, OsString)>>,
    ) -> Result<Cluster, HarnessError> {
        validate(&opts)?;
        if env.len() > opts.masters {
            return Err(HarnessError::InvalidOptions(format!(
                "environment given for {} masters but the cluster has {}",
                env.len(),
                opts.masters
            )));
        }
        let mut env = env.into_iter();
        let server = Server::resolve(opts.server)?.binary()?;
        let root = make_root_dir()?;
        // From here on, `cluster`'s Drop cleans up whatever was started.
        let mut cluster = Cluster {
            opts,
            server,
            root,
            masters: Vec::new(),
        };
        let ports = distinct_free_ports(cluster.opts.masters)?;
        for (index, port) in ports.into_iter().enumerate() {
            let dir = cluster.root.join(format!("m{index}"));
            fs::create_dir_all(&dir)
                .map_err(|e| HarnessError::io(format!("creating {}", dir.display()), e))?;
            cluster.masters.push(Master {
                port,
                dir,
                env: env.next().unwrap_or_default(),
                child: Mutex::new(None),
                paused: false,
            });
        }
        let launches = cluster.masters.iter().enumerate().map(|(index, m)| {
            launch(
                &cluster.server,
                &cluster.opts,
                Target {
                    index,
                    dir: &m.dir,
                    env: &m.env,
                },
                m.port,
                PortPolicy::MayMove,
            )
        });
        let results = futures::future::join_all(launches).await;
        let mut first_error = None;
        for (master, result) in cluster.masters.iter_mut().zip(results) {
            match result {
                Ok((child, port)) => {
                    master.port = port;
                    *master.child.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(child);
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(cluster),
        }
    }

    /// Number of masters.
    pub fn len(&self) -> usize {
        self.masters.len()
    }

    /// `true` if the cluster has no masters (never the case for a started cluster).
    pub fn is_empty(&self) -> bool {
        self.masters.is_empty()
    }

    /// URLs of all masters, with credentials when configured.
    pub fn urls(&self) -> Vec<String> {
        (0..self.len()).map(|i| self.url(i)).collect()
    }

    /// URL of master `i`, e.g. `redis://127.0.0.1:PORT` or `redis://user:pass@127.0.0.1:PORT`.
    ///
    /// # Panics
    /// If `i >= len()`, like slice indexing.
    pub fn url(&self, i: usize) -> String {
        url_for(&self.opts, "127.0.0.1", self.masters[i].port)
    }

    /// Port of master `i`.
    ///
    /// # Panics
    /// If `i >= len()`, like slice indexing.
    pub fn port(&self, i: usize) -> u16 {
        self.masters[i].port
    }

    /// Data dir of master `i` (it also holds `redis.log`).
    ///
    /// # Panics
    /// If `i >= len()`, like slice indexing.
    pub fn dir(&self, i: usize) -> &Path {
        &self.masters[i].dir
    }

    /// Options the cluster was started with.
    pub fn options(&self) -> &ClusterOptions {
        &self.opts
    }

    /// Kills master `i` with SIGKILL and waits for it to exit. Killing a dead master is a no-op.
    pub fn kill(&mut self, i: usize) -> Result<(), HarnessError> {
        let master = self.master_mut(i)?;
        let child = master.child.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        master.paused = false;
        match child {
            Some(mut child) => reap(&mut child, i),
            None => Ok(()),
        }
    }

    /// Stops master `i` with SIGSTOP; it keeps its connections but answers nothing.
    pub fn pause(&mut self, i: usize) -> Result<(), HarnessError> {
        let pid = self.running_pid(i)?;
        process::stop(pid)?;
        self.master_mut(i)?.paused = true;
        Ok(())
    }

    /// Continues master `i` with SIGCONT after [`Cluster::pause`].
    pub fn resume(&mut self, i: usize) -> Result<(), HarnessError> {
        let pid = self.running_pid(i)?;
        process::cont(pid)?;
        self.master_mut(i)?.paused = false;
        Ok(())
    }

    /// Kills master `i` if it runs, optionally wipes its data, and starts it again on the
    /// same port; returns once it answers PING.
    pub async fn restart(&mut self, i: usize, data: DataMode) -> Result<(), HarnessError> {
        self.kill(i)?;
        let (dir, port, env) = {
            let master = self.master(i)?;
            (master.dir.clone(), master.port, master.env.clone())
        };
        if data == DataMode::Wipe {
            wipe_dir(&dir)?;
        }
        let target = Target {
            index: i,
            dir: &dir,
            env: &env,
        };
        let (child, port) = launch(&self.server, &self.opts, target, port, PortPolicy::Fixed).await?;
        let master = self.master_mut(i)?;
        master.port = port;
        *master.child.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(child);
        Ok(())
    }

    /// A direct connection to master `i`, for inspecting keys in tests.
    pub async fn client(&self, i: usize) -> Result<MultiplexedConnection, HarnessError> {
        let master = self.master(i)?;
        if !self.is_running(i) {
            return Err(HarnessError::NotRunning {
                index: i,
                port: master.port,
            });
        }
        if master.paused {
            return Err(HarnessError::Paused {
                index: i,
                port: master.port,
            });
        }
        connect(&self.url(i), Duration::from_secs(5))
            .await
            .map_err(|e| HarnessError::redis(format!("connecting to master {i}"), e))
    }

    /// `KEYS pattern` on master `i`; an error if it is down or paused.
    pub async fn keys(&self, i: usize, pattern: &str) -> Result<Vec<String>, HarnessError> {
        let mut conn = self.client(i).await?;
        redis::cmd("KEYS")
            .arg(pattern)
            .query_async(&mut conn)
            .await
            .map_err(|e| HarnessError::redis(format!("KEYS {pattern:?} on master {i}"), e))
    }

    /// `true` if master `i`'s process exists (paused masters count as running).
    pub fn is_running(&self, i: usize) -> bool {
        let Some(master) = self.masters.get(i) else {
            return false;
        };
        let mut guard = master.child.lock().unwrap_or_else(|e| e.into_inner());
        match guard.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// Process id of master `i` while its process exists.
    pub fn pid(&self, i: usize) -> Option<u32> {
        let master = self.masters.get(i)?;
        let guard = master.child.lock().unwrap_or_else(|e| e.into_inner());
        guard.as_ref().map(Child::id)
    }

    /// `true` if master `i` is stopped by [`Cluster::pause`].
    pub fn is_paused(&self, i: usize) -> bool {
        self.masters.get(i).is_some_and(|m| m.paused)
    }

    fn master(&self, i: usize) -> Result<&Master, HarnessError> {
        let len = self.masters.len();
        self.masters
            .get(i)
            .ok_or(HarnessError::NoSuchMaster { index: i, len })
    }

    fn master_mut(&mut self, i: usize) -> Result<&mut Master, HarnessError> {
        let len = self.masters.len();
        self.masters
            .get_mut(i)
            .ok_or(HarnessError::NoSuchMaster { index: i, len })
    }

    fn running_pid(&mut self, i: usize) -> Result<Pid, HarnessError> {
        let master = self.master_mut(i)?;
        let port = master.port;
        let guard = master.child.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(child) = guard.as_mut() {
            if matches!(child.try_wait(), Ok(None)) {
                return Ok(process::pid_of(child));
            }
        }
        Err(HarnessError::NotRunning { index: i, port })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for master in &mut self.masters {
            let slot = master.child.get_mut().unwrap_or_else(|e| e.into_inner());
            if let Some(child) = slot.take() {
                process::discard(child);
            }
        }
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn validate(opts: &ClusterOptions) -> Result<(), HarnessError> {
    if opts.masters == 0 {
        return Err(HarnessError::InvalidOptions(
            "masters must be at least 1, got 0".into(),
        ));
    }
    if opts.password.as_deref() == Some("") {
        return Err(HarnessError::InvalidOptions(
            "password must not be empty (use None for no password)".into(),
        ));
    }
    if let Some((user, pass)) = &opts.acl_user {
        if user.is_empty() || user.chars().any(char::is_whitespace) {
            return Err(HarnessError::InvalidOptions(format!(
                "ACL user name {user:?} must be non-empty and contain no whitespace"
            )));
        }
        if pass.is_empty() {
            return Err(HarnessError::InvalidOptions(format!(
                "ACL user {user:?} needs a non-empty password"
            )));
        }
    }
    Ok(())
}

/// The URL clients use for a master at `host:port` under `opts`' credentials.
pub(crate) fn url_for(opts: &ClusterOptions, host: &str, port: u16) -> String {
    opts.credentials().url(host, port)
}

fn make_root_dir() -> Result<PathBuf, HarnessError> {
    let base = std::env::temp_dir();
    for _ in 0..16 {
        let dir = base.join(format!(
            "quorlock-chaos-{}-{:016x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(HarnessError::io(format!("creating {}", dir.display()), e)),
        }
    }
    Err(HarnessError::io(
        format!("creating a temp dir under {}", base.display()),
        io::Error::from(io::ErrorKind::AlreadyExists),
    ))
}

/// Picks `n` distinct free ports by holding all listeners until every port is known.
fn distinct_free_ports(n: usize) -> Result<Vec<u16>, HarnessError> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| HarnessError::io("binding 127.0.0.1:0 to pick a free port", e))?;
    listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| HarnessError::io("reading a picked port", e))
}

fn free_port() -> Result<u16, HarnessError> {
    Ok(distinct_free_ports(1)?.first().copied().unwrap_or(0))
}

/// Deletes everything in `dir` except the log files.
fn wipe_dir(dir: &Path) -> Result<(), HarnessError> {
    let entries = fs::read_dir(dir).map_err(|e| HarnessError::io(format!("reading {}", dir.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| HarnessError::io(format!("reading {}", dir.display()), e))?;
        let name = entry.file_name();
        if name == LOG_FILE || name == STDERR_FILE {
            continue;
        }
        let path = entry.path();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        let result = if is_dir {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        result.map_err(|e| HarnessError::io(format!("wiping {}", path.display()), e))?;
    }
    Ok(())
}

/// Kills master `index`'s child and waits for it to exit.
fn reap(child: &mut Child, index: usize) -> Result<(), HarnessError> {
    process::kill_and_reap(child)
        .map_err(|e| HarnessError::io(format!("waiting for master {index} to exit"), e))
}

fn server_args(opts: &ClusterOptions, dir: &Path, port: u16) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--port".into(),
        port.to_string(),
        "--bind".into(),
        "127.0.0.1".into(),
        "--protected-mode".into(),
        "no".into(),
        "--daemonize".into(),
        "no".into(),
        "--dir".into(),
        dir.display().to_string(),
        "--dbfilename".into(),
        "dump.rdb".into(),
        "--save".into(),
        String::new(),
        "--logfile".into(),
        dir.join(LOG_FILE).display().to_string(),
    ];
    if opts.appendfsync_always {
        args.extend(["--appendonly", "yes", "--appendfsync", "always"].map(String::from));
    } else {
        args.extend(["--appendonly", "no"].map(String::from));
    }
    if let Some(pass) = &opts.password {
        args.extend(["--requirepass".to_string(), pass.clone()]);
    }
    if let Some((user, pass)) = &opts.acl_user {
        args.extend([
            "--user".to_string(),
            user.clone(),
            "on".into(),
            format!(">{pass}"),
            "~*".into(),
            "&*".into(),
            "+@all".into(),
        ]);
    }
    args.extend(opts.extra_args.iter().cloned());
    args
}

/// Whether a launch may pick another port when the requested one is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PortPolicy {
    /// First start: move to another free port.
    MayMove,
    /// Restart: the port is part of the master's identity; retry it for a while.
    Fixed,
}

/// Which master a launch is for, and where it lives.
#[derive(Debug, Clone, Copy)]
struct Target<'a> {
    index: usize,
    dir: &'a Path,
    env: &'a [(OsString, OsString)],
}

/// Spawns a master and waits until it answers PING, retrying when its port is taken.
async fn launch(
    server: &Path,
    opts: &ClusterOptions,
    target: Target<'_>,
    port: u16,
    policy: PortPolicy,
) -> Result<(Child, u16), HarnessError> {
    let Target { index, dir, env } = target;
    let mut port = port;
    for _ in 0..BIND_ATTEMPTS {
        let log_offsets = server::LogOffsets::now(dir);
        let mut child = server::spawn(server, server_args(opts, dir, port), dir, env, port)?;
        let url = url_for(opts, "127.0.0.1", port);
        match server::wait_ready(&mut child, &url, index, port, dir, log_offsets).await {
            Ok(Readiness::Ready) => return Ok((child, port)),
            Ok(Readiness::PortBusy) => {
                let _ = reap(&mut child, index);
                match policy {
                    PortPolicy::MayMove => port = free_port()?,
                    PortPolicy::Fixed => tokio::time::sleep(Duration::from_millis(250)).await,
                }
            }
            Err(e) => {
                let _ = reap(&mut child, index);
                return Err(e);
            }
        }
    }
    Err(HarnessError::PortUnavailable {
        index,
        port,
        attempts: BIND_ATTEMPTS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_use_the_acl_user_over_the_password() {
        let mut opts = ClusterOptions::default();
        assert_eq!(url_for(&opts, "h", 1), "redis://h:1");
        opts.password = Some("pw".into());
        assert_eq!(url_for(&opts, "h", 1), "redis://:pw@h:1");
        opts.acl_user = Some(("alice".into(), "s3cr:t".into()));
        assert_eq!(url_for(&opts, "h", 1), "redis://alice:s3cr%3At@h:1");
    }

    #[test]
    fn invalid_options_are_rejected_with_the_bad_value() {
        let opts = ClusterOptions {
            masters: 0,
            ..ClusterOptions::default()
        };
        assert!(validate(&opts).is_err());
        let opts = ClusterOptions {
            acl_user: Some(("bad user".into(), "x".into())),
            ..ClusterOptions::default()
        };
        let err = validate(&opts).unwrap_err().to_string();
        assert!(err.contains("bad user"), "{err}");
    }

    #[test]
    fn default_args_enable_fsync_always_and_disable_rdb() {
        let args = server_args(&ClusterOptions::default(), Path::new("/d"), 7);
        let joined = args.join(" ");
        assert!(
            joined.contains("--appendonly yes --appendfsync always"),
            "{joined}"
        );
        assert!(joined.contains("--port 7 "), "{joined}");
        let save = args.iter().position(|a| a == "--save").unwrap();
        assert_eq!(args[save + 1], "");
    }

    #[test]
    fn missing_redis_server_message_says_how_to_install() {
        let err = crate::servers::ServerError::RedisMissing {
            searched: "/nowhere".into(),
        }
        .to_string();
        assert!(err.contains("apt-get install redis-server"));
        assert!(err.contains("brew install redis"));
        assert!(err.contains("docker compose up"));
    }
}

#[cfg(test)]
mod port_race_tests {
    use super::*;

    fn temp_master_dir() -> PathBuf {
        let dir = make_root_dir().unwrap();
        fs::create_dir_all(dir.join("m0")).unwrap();
        dir
    }

    #[tokio::test]
    async fn a_taken_port_moves_a_first_start_elsewhere() {
        let holder = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = holder.local_addr().unwrap().port();
        let root = temp_master_dir();
        let server = redis_server_path().unwrap();
        let opts = ClusterOptions::default();
        let (mut child, port) = launch(
            &server,
            &opts,
            Target {
                index: 0,
                dir: &root.join("m0"),
                env: &[],
            },
            taken,
            PortPolicy::MayMove,
        )
        .await
        .unwrap();
        assert_ne!(port, taken);
        reap(&mut child, 0).unwrap();
        fs::remove_dir_all(root).unwrap();
    }

    #[tokio::test]
    async fn a_taken_port_fails_a_restart_with_port_unavailable() {
        let holder = TcpListener::bind("127.0.0.1:0").unwrap();
        let taken = holder.local_addr().unwrap().port();
        let root = temp_master_dir();
        let server = redis_server_path().unwrap();
        let opts = ClusterOptions::default();
        let err = launch(
            &server,
            &opts,
            Target {
                index: 0,
                dir: &root.join("m0"),
                env: &[],
            },
            taken,
            PortPolicy::Fixed,
        )
        .await
        .unwrap_err();
        assert!(
            matches!(err, HarnessError::PortUnavailable { port, .. } if port == taken),
            "{err}"
        );
        fs::remove_dir_all(root).unwrap();
    }
}
