//! The probes as hosts of their own: one container each, from the masters' image with this
//! program mounted in, running `quorlock-chaos probe`, on the witness's network and on the
//! networks of exactly the masters its host reaches (the first probe a bare majority of them, the
//! second all), so that where its lock lands is the topology's doing, not a race's.

use std::path::Path;
use std::time::Duration;

use super::super::clients::{binary_mount, collect_container, create_container, docker, ContainerClients};
use super::super::drive::{node_urls, WITNESS_IN_CONTAINERS};
use super::super::sweep::RUN_LABEL;
use super::super::wire::ClientOutput;
use super::super::Compose;
use super::control::Control;
use super::probe::Role;
use crate::error::HarnessError;

/// What one probe container runs.
#[derive(Debug, Clone)]
pub(crate) struct ProbeSpec {
    /// Which probe.
    pub role: Role,
    /// The masters its host reaches.
    pub reaches: Vec<usize>,
    /// Its client number in the run.
    pub client: usize,
    /// Its lock's TTL.
    pub ttl: Duration,
    /// How long its first attempt keeps trying.
    pub first_try: Duration,
    /// Its client's per-master timeout.
    pub node_timeout: Duration,
    /// The lock keys' prefix.
    pub key_prefix: String,
    /// The run's start, in milliseconds since the Unix epoch.
    pub start_ms: u128,
    /// The control its client runs, if any.
    pub control: Option<Control>,
}

impl ProbeSpec {
    /// The `quorlock-chaos` command line (after the program).
    pub(crate) fn command(&self, nodes: &[String]) -> Vec<String> {
        let ms = |d: Duration| format!("{}ms", d.as_millis());
        let reaches: Vec<String> = self.reaches.iter().map(usize::to_string).collect();
        let mut command = vec![
            "probe".to_string(),
            format!("--role={}", self.role.name()),
            format!("--nodes={}", nodes.join(",")),
            format!("--witness={WITNESS_IN_CONTAINERS}"),
            format!("--client={}", self.client),
            format!("--ttl={}", ms(self.ttl)),
            format!("--first-try={}", ms(self.first_try)),
            format!("--node-timeout={}", ms(self.node_timeout)),
            format!("--reaches={}", reaches.join(",")),
            format!("--key-prefix={}", self.key_prefix),
            format!("--start-ms={}", self.start_ms),
        ];
        if let Some(control) = self.control {
            command.push(format!("--unsafe={}", control.name()));
        }
        command
    }
}

/// A probe's container, created and started.
#[derive(Debug, Clone)]
pub(crate) struct ProbeContainer {
    name: String,
}

impl ProbeContainer {
    /// Creates and starts the container of `spec` for run `run_id`, beside `clients` (whose
    /// witness and master networks it joins).
    ///
    /// # Errors
    /// When docker refuses.
    pub(crate) async fn start(
        compose: &Compose,
        clients: &ContainerClients,
        run_id: &str,
        binary: &Path,
        spec: &ProbeSpec,
    ) -> Result<ProbeContainer, HarnessError> {
        let name = format!("qlchaos-{run_id}-probe-{}", spec.role.name());
        let mut networks = vec![clients.witness_network().to_string()];
        for &m in &spec.reaches {
            let net = clients
                .master_networks()
                .get(m)
                .ok_or(HarnessError::NoSuchMaster {
                    index: m,
                    len: clients.master_networks().len(),
                })?;
            networks.push(net.clone());
        }
        let label = format!("{RUN_LABEL}={run_id}");
        let command = spec.command(&node_urls(compose));
        create_container(
            compose,
            &label,
            &name,
            &[binary_mount(binary)?],
            &networks,
            &command,
        )
        .await?;
        docker(compose).args(["start", name.as_str()]).output().await?;
        Ok(ProbeContainer { name })
    }

    /// Waits for it to exit and reads what it reported.
    ///
    /// # Errors
    /// When it failed or its output does not parse.
    pub(crate) async fn collect(&self, compose: &Compose) -> Result<ClientOutput, HarnessError> {
        collect_container(compose, &self.name).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_is_told_everything_on_its_command_line() {
        let spec = ProbeSpec {
            role: Role::First,
            reaches: vec![0, 1],
            client: 16,
            ttl: Duration::from_secs(10),
            first_try: Duration::from_secs(2),
            node_timeout: Duration::from_millis(500),
            key_prefix: "quorlock-chaos:".into(),
            start_ms: 1_700_000_000_000,
            control: Some(Control::CountEvictingMasters),
        };
        let nodes = ["redis://m1:6379".to_string(), "redis://m2:6379".to_string()];
        assert_eq!(
            spec.command(&nodes).join(" "),
            "probe --role=first --nodes=redis://m1:6379,redis://m2:6379 --witness=redis://witness:6379 \
             --client=16 --ttl=10000ms --first-try=2000ms --node-timeout=500ms --reaches=0,1 \
             --key-prefix=quorlock-chaos: --start-ms=1700000000000 --unsafe=count-evicting-masters"
        );
    }
}
