//! The compose backend: masters are services of a docker compose file (by default
//! `redis1`..`redis5` on host ports 7001-7005), faulted with `docker compose kill | pause |
//! unpause | start | run`. It exists for machines where redis-server is not installed
//! locally but Docker is.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::process::Command;

use crate::backend::Backend;
use crate::cluster::DataMode;
use crate::credentials::Credentials;
use crate::error::HarnessError;
use crate::server::wait_for_ping;

/// How often a spawn is retried when the program file is momentarily busy (ETXTBSY).
const SPAWN_ATTEMPTS: u32 = 20;

/// Options for [`Compose`].
#[derive(Debug, Clone)]
pub struct ComposeOptions {
    /// The compose file, passed as `-f FILE`.
    pub file: PathBuf,
    /// Service name of each master, in master order.
    pub services: Vec<String>,
    /// Host where the services' ports are published.
    pub host: String,
    /// Published host port of each master, in master order.
    pub ports: Vec<u16>,
    /// The docker program (default `docker`, looked up on the command's `PATH`).
    pub docker: PathBuf,
    /// Extra environment for docker commands (e.g. `PATH`); the harness's own environment
    /// is never modified.
    pub env: Vec<(OsString, OsString)>,
    /// Credentials clients use.
    pub credentials: Credentials,
    /// How long to wait for PING after a restart; `None` skips the wait.
    pub ready_timeout: Option<Duration>,
    /// The data directory inside each service's container (emptied by a wipe).
    pub data_dir: String,
}

impl ComposeOptions {
    /// Defaults for `file`: services `redis1`..`redis5` on 127.0.0.1:7001-7005.
    pub fn new(file: impl Into<PathBuf>) -> ComposeOptions {
        ComposeOptions {
            file: file.into(),
            services: (1..=5).map(|i| format!("redis{i}")).collect(),
            host: "127.0.0.1".into(),
            ports: (7001..=7005).collect(),
            docker: PathBuf::from("docker"),
            env: Vec::new(),
            credentials: Credentials::default(),
            ready_timeout: Some(Duration::from_secs(30)),
            data_dir: "/data".into(),
        }
    }
}

/// Masters run as docker compose services.
#[derive(Debug, Clone)]
pub struct Compose {
    opts: ComposeOptions,
}

impl Compose {
    /// Checks the options; runs nothing (bring the services up with `docker compose up`).
    pub fn new(opts: ComposeOptions) -> Result<Compose, HarnessError> {
        if opts.services.is_empty() || opts.services.len() != opts.ports.len() {
            return Err(HarnessError::InvalidOptions(format!(
                "compose needs one port per service, got services {:?} and ports {:?}",
                opts.services, opts.ports
            )));
        }
        Ok(Compose { opts })
    }

    /// The options in use.
    pub fn options(&self) -> &ComposeOptions {
        &self.opts
    }

    /// URL of master `i`.
    ///
    /// # Panics
    /// If `i >= len()`, like slice indexing.
    pub fn url(&self, i: usize) -> String {
        self.opts.credentials.url(&self.opts.host, self.opts.ports[i])
    }

    /// Runs `docker compose -f FILE ARGS...` and returns its stdout.
    pub async fn run(&self, args: &[&str]) -> Result<String, HarnessError> {
        let mut full: Vec<OsString> = vec!["compose".into(), "-f".into(), self.opts.file.clone().into()];
        full.extend(args.iter().map(OsString::from));
        let shown = format!(
            "{} {}",
            self.opts.docker.display(),
            full.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        );
        let mut attempt = 0;
        let child = loop {
            attempt += 1;
            let mut cmd = Command::new(&self.opts.docker);
            cmd.args(&full)
                .envs(self.opts.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true);
            match cmd.spawn() {
                Ok(child) => break child,
                // Another thread may still hold the just-written program open for writing.
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && attempt < SPAWN_ATTEMPTS => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => return Err(HarnessError::io(format!("running `{shown}`"), e)),
            }
        };
        let output = child
            .wait_with_output()
            .await
            .map_err(|e| HarnessError::io(format!("waiting for `{shown}`"), e))?;
        if !output.status.success() {
            return Err(HarnessError::Command {
                command: shown,
                status: output.status.to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// `docker compose kill SERVICE` (SIGKILL).
    pub async fn kill(&self, i: usize) -> Result<(), HarnessError> {
        self.run(&["kill", self.service(i)?]).await.map(drop)
    }

    /// `docker compose pause SERVICE`.
    pub async fn pause(&self, i: usize) -> Result<(), HarnessError> {
        self.run(&["pause", self.service(i)?]).await.map(drop)
    }

    /// `docker compose unpause SERVICE`.
    pub async fn resume(&self, i: usize) -> Result<(), HarnessError> {
        self.run(&["unpause", self.service(i)?]).await.map(drop)
    }

    /// Crash-restarts master `i`: `kill` then `start`. With Wipe, the data dir is emptied in
    /// between by a one-off container of the service (`run --rm --no-deps --entrypoint find
    /// SERVICE DATA_DIR -mindepth 1 -delete`), which shares the service's named volumes.
    /// Then waits for PING if `ready_timeout` is set.
    pub async fn restart(&self, i: usize, data: DataMode) -> Result<(), HarnessError> {
        let service = self.service(i)?;
        // A master that is already down makes `kill` fail on some compose versions; the
        // following commands report real problems.
        let _ = self.run(&["kill", service]).await;
        if data == DataMode::Wipe {
            let dir = self.opts.data_dir.as_str();
            self.run(&[
                "run",
                "--rm",
                "--no-deps",
                "--entrypoint",
                "find",
                service,
                dir,
                "-mindepth",
                "1",
                "-delete",
            ])
            .await?;
        }
        self.run(&["start", service]).await?;
        if let Some(timeout) = self.opts.ready_timeout {
            wait_for_ping(&self.url(i), i, timeout).await?;
        }
        Ok(())
    }

    fn service(&self, i: usize) -> Result<&str, HarnessError> {
        self.opts
            .services
            .get(i)
            .map(String::as_str)
            .ok_or(HarnessError::NoSuchMaster {
                index: i,
                len: self.opts.services.len(),
            })
    }
}

impl Backend for Compose {
    fn name(&self) -> &'static str {
        "compose"
    }

    fn len(&self) -> usize {
        self.opts.services.len()
    }

    fn urls(&self) -> Vec<String> {
        (0..self.opts.services.len()).map(|i| self.url(i)).collect()
    }

    fn kill(&mut self, i: usize) -> BoxFuture<'_, Result<(), HarnessError>> {
        Box::pin(Compose::kill(self, i))
    }

    fn pause(&mut self, i: usize) -> BoxFuture<'_, Result<(), HarnessError>> {
        Box::pin(Compose::pause(self, i))
    }

    fn resume(&mut self, i: usize) -> BoxFuture<'_, Result<(), HarnessError>> {
        Box::pin(Compose::resume(self, i))
    }

    fn restart(&mut self, i: usize, data: DataMode) -> BoxFuture<'_, Result<(), HarnessError>> {
        Box::pin(Compose::restart(self, i, data))
    }
}
