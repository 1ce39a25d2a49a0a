//! The workload's clients as hosts of their own: one container per client group, from the
//! masters' offline image with the `quorlock-chaos` binary mounted in, joined to the private
//! network of every master, and a witness container on a network of its own that no fault
//! touches. A partition is then real: `docker network disconnect` takes a group's container
//! off some masters' networks. Every container and network carries the run's label, so the
//! project's removal (or the next run's sweep) takes them too.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::sweep::RUN_LABEL;
use super::wire::{self, ClientOutput};
use super::{Compose, DockerCommand};
use crate::error::HarnessError;
use crate::server::wait_for_ping;

/// The image every container of a run is made from.
pub const IMAGE: &str = "quorlock-master:local";
/// Where the binary is mounted inside a client container.
const BINARY_IN_CONTAINER: &str = "/usr/local/bin/quorlock-chaos";
/// Where the run's start is mounted inside a client container (a directory of the host).
const START_DIR_IN_CONTAINER: &str = "/run/quorlock-chaos";
/// The file in it that holds the start, in milliseconds since the Unix epoch.
const START_FILE: &str = "start-ms";

/// What a client group runs: the arguments of `quorlock-chaos client` besides the group.
#[derive(Debug, Clone)]
pub struct SliceArgs {
    /// Arguments passed to every group's `client` command (`--clients`, `--ttl`, ...).
    pub common: Vec<String>,
}

/// The witness and the client containers of one run.
#[derive(Debug)]
pub struct ContainerClients {
    compose: Compose,
    /// The containers, by group.
    containers: Vec<String>,
    /// The witness's network, which no fault touches.
    witness_network: String,
    /// The master networks, by master.
    master_networks: Vec<String>,
    /// (group, master) pairs currently cut.
    cut: BTreeSet<(usize, usize)>,
    /// The witness's URL from the host.
    witness_host_url: String,
    /// The host directory mounted into the containers, where the start is written.
    start_dir: PathBuf,
}

impl Drop for ContainerClients {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.start_dir);
    }
}

impl ContainerClients {
    /// Starts the witness container and creates (without starting) one client container per
    /// group, each on every master's network and the witness's. `binary` is the
    /// `quorlock-chaos` program mounted into them.
    ///
    /// # Errors
    /// When docker fails or the witness does not answer.
    pub async fn create(
        compose: &Compose,
        run_id: &str,
        binary: &Path,
        slice: &SliceArgs,
        groups: usize,
    ) -> Result<ContainerClients, HarnessError> {
        let label = format!("{RUN_LABEL}={run_id}");
        let prefix = format!("qlchaos-{run_id}");
        let mut master_networks = Vec::with_capacity(compose.options().services.len());
        for i in 0..compose.options().services.len() {
            let net = compose.networks(i).await?.into_iter().next().ok_or_else(|| {
                HarnessError::InvalidOptions(format!("master {i}'s container is on no network"))
            })?;
            // A partition cuts a group off from some masters only if no two share a network.
            if let Some(j) = master_networks.iter().position(|n| *n == net) {
                return Err(HarnessError::InvalidOptions(format!(
                    "clients in containers need each master on a network of its own (as in \
                     chaos/docker/compose.masters.yml), but masters {j} and {i} share {net}"
                )));
            }
            master_networks.push(net);
        }
        let witness_net = format!("{prefix}-witness");
        docker(compose)
            .args(["network", "create", "--label", &label, &witness_net])
            .output()
            .await?;
        let port = super::project::free_port()?;
        docker(compose)
            .args([
                "run",
                "-d",
                "--label",
                &label,
                "--name",
                &format!("{prefix}-witness"),
            ])
            .args(["--network", &witness_net, "--network-alias", "witness"])
            .args(["-p", &format!("127.0.0.1:{port}:6379"), IMAGE])
            .args(["redis-server", "--save", "", "--appendonly", "no"])
            .output()
            .await?;
        let witness_host_url = format!("redis://127.0.0.1:{port}");
        wait_for_ping(&witness_host_url, 0, Duration::from_secs(30)).await?;
        let mount = binary_mount(binary)?;
        let start_dir = std::env::temp_dir().join(format!("{prefix}-start"));
        std::fs::create_dir_all(&start_dir)
            .map_err(|e| HarnessError::io(format!("creating {}", start_dir.display()), e))?;
        let start_mount = format!("{}:{START_DIR_IN_CONTAINER}:ro", start_dir.display());
        let start_file = format!("--start-file={START_DIR_IN_CONTAINER}/{START_FILE}");
        let mut networks = vec![witness_net.clone()];
        networks.extend(master_networks.iter().cloned());
        let mut containers = Vec::with_capacity(groups);
        for g in 0..groups {
            let name = format!("{prefix}-clients-g{g}");
            let mut command = vec!["client".to_string()];
            command.extend(slice.common.iter().cloned());
            command.push(start_file.clone());
            command.extend([
                "--group".into(),
                g.to_string(),
                "--groups".into(),
                groups.to_string(),
            ]);
            create_container(
                compose,
                &label,
                &name,
                &[mount.clone(), start_mount.clone()],
                &networks,
                &command,
            )
            .await?;
            containers.push(name);
        }
        Ok(ContainerClients {
            compose: compose.clone(),
            containers,
            witness_network: witness_net,
            master_networks,
            cut: BTreeSet::new(),
            witness_host_url,
            start_dir,
        })
    }

    /// The witness's URL from the host.
    pub fn witness_host_url(&self) -> &str {
        &self.witness_host_url
    }

    /// The witness's network (other containers of the run join it to reach `witness:6379`).
    pub fn witness_network(&self) -> &str {
        &self.witness_network
    }

    /// Each master's network, in master order.
    pub fn master_networks(&self) -> &[String] {
        &self.master_networks
    }
}

impl ContainerClients {
    /// Starts every group's container, then sets the run's start `lead` from now: the clients
    /// wait for it, so however long starting them took, they all begin together on the
    /// harness's timeline. Returns the start.
    pub async fn start(&self, lead: Duration) -> Result<SystemTime, HarnessError> {
        docker(&self.compose)
            .args(["start"])
            .args(&self.containers)
            .output()
            .await?;
        let start = SystemTime::now() + lead;
        let ms = start.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
        // Written whole, then renamed, so a client never reads half of it.
        let tmp = self.start_dir.join(format!("{START_FILE}.tmp"));
        std::fs::write(&tmp, ms.to_string())
            .and_then(|()| std::fs::rename(&tmp, self.start_dir.join(START_FILE)))
            .map_err(|e| {
                HarnessError::io(
                    format!("writing the run's start into {}", self.start_dir.display()),
                    e,
                )
            })?;
        Ok(start)
    }

    /// Cuts group `group` off from `masters` (disconnects its container from their networks).
    pub async fn partition(&mut self, group: usize, masters: &[usize]) -> Result<(), HarnessError> {
        let name = self.container(group)?.to_string();
        for &m in masters {
            let net = self
                .master_networks
                .get(m)
                .cloned()
                .ok_or(HarnessError::NoSuchMaster {
                    index: m,
                    len: self.master_networks.len(),
                })?;
            if self.cut.insert((group, m)) {
                docker(&self.compose)
                    .args(["network", "disconnect", net.as_str(), name.as_str()])
                    .output()
                    .await?;
            }
        }
        Ok(())
    }

    /// Connects every cut (group, master) pair back.
    pub async fn heal(&mut self) -> Result<(), HarnessError> {
        let cut = std::mem::take(&mut self.cut);
        for (g, m) in cut {
            let name = self.container(g)?.to_string();
            let net = self.master_networks[m].clone();
            docker(&self.compose)
                .args(["network", "connect", net.as_str(), name.as_str()])
                .output()
                .await?;
        }
        Ok(())
    }

    /// Waits for every container to exit and reads what each reported.
    ///
    /// # Errors
    /// When a container exits with an error or its output does not parse; the error carries
    /// its stderr.
    pub async fn collect(&self) -> Result<Vec<ClientOutput>, HarnessError> {
        let mut outputs = Vec::with_capacity(self.containers.len());
        for name in &self.containers {
            outputs.push(collect_container(&self.compose, name).await?);
        }
        Ok(outputs)
    }

    fn container(&self, group: usize) -> Result<&str, HarnessError> {
        self.containers
            .get(group)
            .map(String::as_str)
            .ok_or(HarnessError::NoSuchGroup {
                group,
                groups: self.containers.len(),
            })
    }
}

/// The `-v` argument that mounts `binary` (this program) read-only where containers run it.
///
/// # Errors
/// When `binary` cannot be found.
pub(crate) fn binary_mount(binary: &Path) -> Result<String, HarnessError> {
    let binary: PathBuf = binary
        .canonicalize()
        .map_err(|e| HarnessError::io(format!("finding {}", binary.display()), e))?;
    Ok(format!("{}:{BINARY_IN_CONTAINER}:ro", binary.display()))
}

/// Creates (without starting) container `name` of the run labelled `label`, from [`IMAGE`] with
/// `mounts`, on every network of `networks` (the first at creation, the others connected after),
/// running this program with `command`.
///
/// # Errors
/// When docker refuses.
pub(crate) async fn create_container(
    compose: &Compose,
    label: &str,
    name: &str,
    mounts: &[String],
    networks: &[String],
    command: &[String],
) -> Result<(), HarnessError> {
    let (first, others) = networks
        .split_first()
        .ok_or_else(|| HarnessError::InvalidOptions(format!("container {name} needs a network")))?;
    let mut create = docker(compose).args(["create", "--label", label, "--name", name, "--network", first]);
    for mount in mounts {
        create = create.args(["-v", mount.as_str()]);
    }
    create
        .args([IMAGE, BINARY_IN_CONTAINER])
        .args(command)
        .output()
        .await?;
    for net in others {
        docker(compose)
            .args(["network", "connect", net.as_str(), name])
            .output()
            .await?;
    }
    Ok(())
}

/// Waits for container `name` to exit and reads what it reported.
///
/// # Errors
/// When it exits with an error or its output does not parse; the error carries its stderr.
pub(crate) async fn collect_container(compose: &Compose, name: &str) -> Result<ClientOutput, HarnessError> {
    let code = docker(compose).args(["wait", name]).output().await?;
    let (stdout, stderr) = docker(compose)
        .args(["logs", "--since", "0", name])
        .output_split()
        .await?;
    if code.trim() != "0" {
        return Err(HarnessError::Command {
            command: format!("quorlock-chaos in container {name}"),
            status: format!("exit {}", code.trim()),
            stderr: stderr.trim().to_string(),
        });
    }
    wire::parse(name, &stdout)
}

pub(crate) fn docker(compose: &Compose) -> DockerCommand<'_> {
    compose.docker(std::iter::empty::<&str>())
}
