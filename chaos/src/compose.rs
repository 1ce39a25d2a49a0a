//! The compose backend: masters are services of a docker compose project (by default the
//! root file's `redis1`..`redis5` on host ports 7001-7005), faulted with `docker compose kill |
//! pause | unpause | start | run`, and cut off from their clients with `docker network
//! disconnect | connect`. It exists for machines where redis-server is not installed locally
//! but Docker is, and so that chaos runs can kill real containers.
//!
//! Bringing a project up and always taking it down again is [`project`]'s concern; running the
//! `docker` program is `docker`'s; finding what a killed run left behind is [`sweep`]'s; the
//! operations (a failover, a runtime downgrade, eviction) and their controls are
//! [`operations`]'.

pub mod clients;
mod docker;
pub mod drive;
pub mod operations;
pub mod project;
pub mod sweep;
pub mod wire;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;

use crate::backend::Backend;
use crate::cluster::DataMode;
use crate::credentials::Credentials;
use crate::error::HarnessError;
use crate::server::wait_for_ping;

pub(crate) use docker::DockerCommand;

/// How often a pause is tried when the freezer cannot freeze the container at once.
const PAUSE_ATTEMPTS: u32 = 10;

/// Options for [`Compose`].
#[derive(Debug, Clone)]
pub struct ComposeOptions {
    /// The compose file, passed as `-f FILE`.
    pub file: PathBuf,
    /// Files layered over it, each passed as a further `-f FILE`.
    pub overrides: Vec<PathBuf>,
    /// The project name, passed as `-p NAME` when set (otherwise the file's own `name`).
    pub project: Option<String>,
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
            overrides: Vec::new(),
            project: None,
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

impl ComposeOptions {
    /// The `compose [-p NAME] -f FILE [-f OVERRIDE]...` prefix of every compose call.
    pub(crate) fn compose_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["compose".into()];
        if let Some(project) = &self.project {
            args.extend(["-p".into(), project.into()]);
        }
        for file in std::iter::once(&self.file).chain(&self.overrides) {
            args.extend(["-f".into(), file.clone().into()]);
        }
        args
    }
}

/// Masters run as docker compose services.
#[derive(Debug, Clone)]
pub struct Compose {
    opts: ComposeOptions,
    /// The networks each master was disconnected from, to connect it back to.
    cut: Arc<Mutex<BTreeMap<usize, Vec<String>>>>,
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
        Ok(Compose {
            opts,
            cut: Arc::default(),
        })
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

    /// Runs `docker compose [-p NAME] -f FILE... ARGS...` and returns its stdout.
    pub async fn run(&self, args: &[&str]) -> Result<String, HarnessError> {
        self.docker(self.opts.compose_args()).args(args).output().await
    }

    /// A plain `docker ARGS...` call with the options' program and environment.
    pub(crate) fn docker<I, S>(&self, args: I) -> DockerCommand<'_>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        DockerCommand::new(&self.opts.docker, &self.opts.env).args(args)
    }

    /// `docker compose kill SERVICE` (SIGKILL).
    pub async fn kill(&self, i: usize) -> Result<(), HarnessError> {
        self.run(&["kill", self.service(i)?]).await.map(drop)
    }

    /// `docker compose pause SERVICE` (the cgroup freezer). A master in the middle of an
    /// fsync sits in uninterruptible sleep, and the runtime then gives up with "unable to
    /// freeze"; the pause is retried a few times before that is reported.
    pub async fn pause(&self, i: usize) -> Result<(), HarnessError> {
        let service = self.service(i)?;
        let mut attempt = 0;
        loop {
            attempt += 1;
            match self.run(&["pause", service]).await {
                Err(HarnessError::Command { stderr, .. })
                    if stderr.contains("unable to freeze") && attempt < PAUSE_ATTEMPTS =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => return other.map(drop),
            }
        }
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

    /// The id of master `i`'s container (`docker compose ps -a -q SERVICE`).
    pub async fn container(&self, i: usize) -> Result<String, HarnessError> {
        let service = self.service(i)?;
        let out = self.run(&["ps", "-a", "-q", service]).await?;
        out.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(String::from)
            .ok_or_else(|| HarnessError::Command {
                command: format!("docker compose ps -a -q {service}"),
                status: "no container".into(),
                stderr: format!("service {service} has no container; is the project up?"),
            })
    }

    /// The networks master `i`'s container is on now.
    pub async fn networks(&self, i: usize) -> Result<Vec<String>, HarnessError> {
        let container = self.container(i).await?;
        let listed = self
            .docker([
                "inspect",
                "--format",
                "{{range $name, $_ := .NetworkSettings.Networks}}{{$name}}\n{{end}}",
                container.as_str(),
            ])
            .output()
            .await?;
        Ok(listed
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect())
    }

    /// Cuts master `i` off from everyone: `docker network disconnect` from each network its
    /// container is on. Its published port stops answering too (the port forward goes through
    /// those networks); the process keeps running with its data. Cutting a master that is
    /// already cut changes nothing.
    pub async fn disconnect(&self, i: usize) -> Result<(), HarnessError> {
        if self.cut_networks().contains_key(&i) {
            return Ok(());
        }
        let container = self.container(i).await?;
        let listed = self
            .docker([
                "inspect",
                "--format",
                "{{range $name, $_ := .NetworkSettings.Networks}}{{$name}}\n{{end}}",
                container.as_str(),
            ])
            .output()
            .await?;
        let networks: Vec<String> = listed
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect();
        for network in &networks {
            self.docker(["network", "disconnect", network.as_str(), container.as_str()])
                .output()
                .await?;
        }
        self.cut_networks().insert(i, networks);
        Ok(())
    }

    /// Connects master `i` back to the networks [`Compose::disconnect`] took it off, under
    /// its service name (other containers of the project find it by that name).
    pub async fn connect(&self, i: usize) -> Result<(), HarnessError> {
        let Some(networks) = self.cut_networks().remove(&i) else {
            return Ok(());
        };
        let service = self.service(i)?.to_string();
        let container = self.container(i).await?;
        for network in &networks {
            self.docker([
                "network",
                "connect",
                "--alias",
                service.as_str(),
                network.as_str(),
                container.as_str(),
            ])
            .output()
            .await?;
        }
        Ok(())
    }

    fn cut_networks(&self) -> std::sync::MutexGuard<'_, BTreeMap<usize, Vec<String>>> {
        self.cut.lock().unwrap_or_else(|e| e.into_inner())
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
