//! One chaos run's compose project, from `docker compose up` to its removal: a project named
//! after a fresh run id, every resource labelled with it, fixed loopback ports so that a
//! master stopped and started again comes back where its clients look, and a guard that takes
//! the project down (containers, networks and volumes) when it is dropped: at the end of a
//! run, on an error, or when a signal makes the caller drop it. What a killed harness could
//! not remove is swept by label ([`super::sweep`]) before the next project comes up.

use std::path::PathBuf;
use std::time::Duration;

use super::sweep::{self, Swept};
use super::{Compose, ComposeOptions, DockerCommand};
use crate::credentials::Credentials;
use crate::error::HarnessError;
use crate::server::wait_for_ping;

/// The masters' port inside their containers.
const CONTAINER_PORT: &str = "6379";

/// What to bring up.
#[derive(Debug, Clone)]
pub struct ProjectSpec {
    /// The compose file, then the files layered over it.
    pub files: Vec<PathBuf>,
    /// The docker program.
    pub docker: PathBuf,
    /// Credentials the masters expect.
    pub credentials: Credentials,
    /// How long `up` may take, health checks included, and how long a restarted master may
    /// take to answer PING.
    pub ready_timeout: Duration,
}

impl ProjectSpec {
    /// The masters of `file` (e.g. `chaos/docker/compose.masters.yml`), 60 s to come up.
    pub fn new(file: impl Into<PathBuf>) -> ProjectSpec {
        ProjectSpec {
            files: vec![file.into()],
            docker: PathBuf::from("docker"),
            credentials: Credentials::default(),
            ready_timeout: Duration::from_secs(60),
        }
    }
}

/// A project that is up; dropping it takes it down.
#[derive(Debug)]
pub struct ComposeProject {
    run_id: String,
    options: ComposeOptions,
    /// What the sweep before `up` removed.
    swept: Swept,
    down: bool,
}

impl ComposeProject {
    /// Sweeps what killed runs left, then brings up every service of the files as a project
    /// of its own and waits until each master answers PING on its published port.
    ///
    /// The `i`-th service (in name order) gets a free loopback port in `QUORLOCK_M<i+1>_PORT`,
    /// which `compose.masters.yml` publishes; a file with fixed ports (the root
    /// `docker-compose.yml`) ignores it. Either way the published ports are read back.
    ///
    /// # Errors
    /// When there is no file, docker or compose fails, or a master does not answer in time;
    /// whatever was created by then is removed before the error returns.
    pub async fn up(spec: ProjectSpec) -> Result<ComposeProject, HarnessError> {
        let Some((file, overrides)) = spec.files.split_first() else {
            return Err(HarnessError::InvalidOptions(
                "a compose project needs a compose file".into(),
            ));
        };
        let swept = {
            let docker = spec.docker.clone();
            tokio::task::spawn_blocking(move || sweep::stale(&docker, &[]))
                .await
                .map_err(|e| HarnessError::Workload(format!("the label sweep panicked: {e}")))??
        };
        let run_id = sweep::new_run_id();
        let mut options = ComposeOptions::new(file);
        options.overrides = overrides.to_vec();
        options.project = Some(format!("qlchaos-{run_id}"));
        options.docker = spec.docker.clone();
        options.credentials = spec.credentials.clone();
        options.ready_timeout = Some(spec.ready_timeout);
        options.env = vec![("QUORLOCK_CHAOS_RUN".into(), run_id.clone().into())];

        let listed = compose(&options).args(["config", "--services"]).output().await?;
        let mut services: Vec<String> = listed
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect();
        services.sort();
        if services.is_empty() {
            return Err(HarnessError::InvalidOptions(format!(
                "{} defines no services",
                file.display()
            )));
        }
        let base_env = options.env.len();
        publish_on_free_ports(&mut options.env, services.len())?;
        options.services = services;
        // From here on, dropping the guard removes whatever `up` managed to create.
        let mut project = ComposeProject {
            run_id,
            options,
            swept,
            down: false,
        };
        // A port found free can be taken by another process before the engine binds it; then
        // the project comes up again on other ports (the containers whose port changed are
        // recreated).
        let mut tries = 0;
        loop {
            tries += 1;
            let up = compose(&project.options).args(["up", "-d", "--wait"]);
            match tokio::time::timeout(spec.ready_timeout, up.output()).await {
                Ok(Err(HarnessError::Command { stderr, .. }))
                    if tries < PORT_TRIES && stderr.contains("port is already allocated") =>
                {
                    project.options.env.truncate(base_env);
                    publish_on_free_ports(&mut project.options.env, project.options.services.len())?;
                }
                Ok(result) => {
                    drop(result?);
                    break;
                }
                Err(_) => {
                    return Err(HarnessError::Command {
                        command: "docker compose up -d --wait".into(),
                        status: format!("not healthy within {:?}", spec.ready_timeout),
                        stderr: String::new(),
                    })
                }
            }
        }
        let mut ports = Vec::with_capacity(project.options.services.len());
        for service in &project.options.services {
            let out = compose(&project.options)
                .args(["port", service.as_str(), CONTAINER_PORT])
                .output()
                .await?;
            ports.push(parse_port(&out).ok_or_else(|| HarnessError::Command {
                command: format!("docker compose port {service} {CONTAINER_PORT}"),
                status: "no published port".into(),
                stderr: format!("service {service} publishes no port for {CONTAINER_PORT}: {out:?}"),
            })?);
        }
        project.options.ports = ports;
        let compose = project.compose()?;
        for (i, url) in crate::backend::Backend::urls(&compose).iter().enumerate() {
            wait_for_ping(url, i, spec.ready_timeout).await?;
        }
        Ok(project)
    }

    /// The run id every resource of the project is labelled with.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The compose project's name.
    pub fn name(&self) -> &str {
        self.options.project.as_deref().unwrap_or_default()
    }

    /// Options reaching the project's masters, for [`Compose`] or a run's backend choice.
    pub fn options(&self) -> &ComposeOptions {
        &self.options
    }

    /// The compose backend over this project's masters.
    ///
    /// # Errors
    /// Never for a project that came up (services and ports match).
    pub fn compose(&self) -> Result<Compose, HarnessError> {
        Compose::new(self.options.clone())
    }

    /// What the sweep before `up` removed (resources of killed runs).
    pub fn swept(&self) -> &Swept {
        &self.swept
    }

    /// Takes the project down now (blocking), reporting a failure instead of ignoring it.
    ///
    /// # Errors
    /// When `docker compose down` or the label sweep of this run fails.
    pub fn down(mut self) -> Result<Swept, HarnessError> {
        self.down = true;
        take_down(&self.options, &self.run_id)
    }
}

impl Drop for ComposeProject {
    fn drop(&mut self) {
        if !self.down {
            self.down = true;
            if let Err(e) = take_down(&self.options, &self.run_id) {
                eprintln!(
                    "quorlock-chaos: could not remove compose project {}: {e}; the next run sweeps it",
                    self.name()
                );
            }
        }
    }
}

/// Removes everything labelled with the run (the masters, and what compose does not know
/// about: client and witness containers on the masters' networks, one-off containers), then
/// `docker compose down --volumes` for what a file without the label made.
fn take_down(options: &ComposeOptions, run_id: &str) -> Result<Swept, HarnessError> {
    let swept = sweep::run(&options.docker, &options.env, run_id);
    let down = compose(options)
        .args(["down", "--volumes", "--remove-orphans", "--timeout", "0"])
        .output_blocking();
    let swept = swept?;
    down.map(|_| swept)
}

fn compose(options: &ComposeOptions) -> DockerCommand<'_> {
    DockerCommand::new(&options.docker, &options.env).args(options.compose_args())
}

/// The port of `docker compose port`'s `HOST:PORT` (or `[::]:PORT`) line.
pub(crate) fn parse_port(out: &str) -> Option<u16> {
    let line = out.lines().map(str::trim).find(|l| !l.is_empty())?;
    line.rsplit_once(':')?.1.parse().ok().filter(|p| *p != 0)
}

/// How many times a project is brought up when a port it was given is taken meanwhile.
const PORT_TRIES: u32 = 3;

/// Gives each of `services` masters a free loopback port to publish on (`QUORLOCK_M<i>_PORT`).
fn publish_on_free_ports(
    env: &mut Vec<(std::ffi::OsString, std::ffi::OsString)>,
    services: usize,
) -> Result<(), HarnessError> {
    for i in 0..services {
        let port = free_port()?;
        env.push((
            format!("QUORLOCK_M{}_PORT", i + 1).into(),
            port.to_string().into(),
        ));
    }
    Ok(())
}

/// A loopback port nothing listens on right now (the kernel's choice).
pub(crate) fn free_port() -> Result<u16, HarnessError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| HarnessError::io("finding a free loopback port", e))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| HarnessError::io("finding a free loopback port", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_ports_are_read_from_compose_port() {
        assert_eq!(parse_port("127.0.0.1:7001\n"), Some(7001));
        assert_eq!(parse_port("0.0.0.0:49153\n[::]:49153\n"), Some(49153));
        assert_eq!(parse_port(":0\n"), None);
        assert_eq!(parse_port(""), None);
        assert_eq!(parse_port("garbage"), None);
    }

    #[test]
    fn compose_calls_name_the_project_and_every_file() {
        let mut options = ComposeOptions::new("a.yml");
        options.overrides = vec!["b.yml".into()];
        options.project = Some("qlchaos-1-00".into());
        options.env = vec![("QUORLOCK_CHAOS_RUN".into(), "1-00".into())];
        let shown = compose(&options).args(["up"]).shown();
        assert_eq!(shown, "docker compose -p qlchaos-1-00 -f a.yml -f b.yml up");
    }

    #[tokio::test]
    async fn a_spec_without_files_is_refused() {
        let mut spec = ProjectSpec::new("x.yml");
        spec.files.clear();
        let err = ComposeProject::up(spec).await.unwrap_err();
        assert!(err.to_string().contains("compose file"), "{err}");
    }
}
