//! The failover, for real: master 0 (service `m1`) has a replica container (`r1`, the
//! `replica` profile of `compose.operations.yml`) on its network. The replica is first cut off
//! from that network, so that its copy lags from then on (the writes it misses are exactly the
//! ones a lagging replica would); then the master is killed, the replica promoted with
//! `REPLICAOF NO ONE`, the dead master taken off the network and the replica connected in its
//! place under the alias `m1`, so that the same name reaches it: what a managed failover behind a
//! stable DNS name does. The promoted replica reports its own long uptime and its own
//! `appendfsync always`; only its record (another server's `run_id`) and its replication history
//! (`second_repl_offset`) tell the clients what happened.

use std::time::{Duration, Instant};

use super::super::clients::docker;
use super::super::project::parse_port;
use super::super::Compose;
use super::reach::{cli, info_field};
use crate::error::HarnessError;

/// The replica's service.
pub(crate) const REPLICA: &str = "r1";
/// The compose profile it is under.
const PROFILE: &str = "replica";
/// How long the replica may take to come up and catch up with its master.
const SYNC_PATIENCE: Duration = Duration::from_secs(30);

/// The replica of master 0, and the network they share.
#[derive(Debug, Clone)]
pub(crate) struct Failover {
    /// The replica's container.
    replica: String,
    /// Master 0's network.
    network: String,
}

impl Failover {
    /// Starts the replica and waits until it is linked to master 0.
    ///
    /// # Errors
    /// When docker fails or the replica does not link in time.
    pub(crate) async fn prepare(compose: &Compose) -> Result<Failover, HarnessError> {
        compose
            .run(&["--profile", PROFILE, "up", "-d", "--no-deps", "--wait", REPLICA])
            .await?;
        let listed = compose
            .run(&["--profile", PROFILE, "ps", "-a", "-q", REPLICA])
            .await?;
        let replica = listed
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(String::from)
            .ok_or_else(|| HarnessError::Command {
                command: format!("docker compose --profile {PROFILE} ps -a -q {REPLICA}"),
                status: "no container".into(),
                stderr: format!("the {REPLICA} service has no container after `up`"),
            })?;
        let network =
            compose.networks(0).await?.into_iter().next().ok_or_else(|| {
                HarnessError::InvalidOptions("master 0's container is on no network".into())
            })?;
        let failover = Failover { replica, network };
        let deadline = Instant::now() + SYNC_PATIENCE;
        loop {
            let info = cli(compose, &failover.replica, &["INFO", "replication"]).await?;
            if info_field(&info, "master_link_status") == Some("up") {
                return Ok(failover);
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::Workload(format!(
                    "the replica {REPLICA} did not link to m1 within {SYNC_PATIENCE:?}: {info}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the replica has every write master 0 made so far (the clients' records among
    /// them), then cuts it off from master 0's network: from now on its copy lags. Returns what
    /// it did, in words.
    ///
    /// # Errors
    /// When docker fails or the replica does not catch up in time.
    pub(crate) async fn lag(&self, compose: &Compose) -> Result<String, HarnessError> {
        let master = compose.container(0).await?;
        let info = cli(compose, &master, &["INFO", "replication"]).await?;
        let target: u64 = info_field(&info, "master_repl_offset")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let deadline = Instant::now() + SYNC_PATIENCE;
        let copied = loop {
            let info = cli(compose, &self.replica, &["INFO", "replication"]).await?;
            let copied: u64 = info_field(&info, "slave_repl_offset")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            if copied >= target {
                break copied;
            }
            if Instant::now() >= deadline {
                return Err(HarnessError::Workload(format!(
                    "the replica {REPLICA} reached offset {copied} of m1's {target} within {SYNC_PATIENCE:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        docker(compose)
            .args([
                "network",
                "disconnect",
                self.network.as_str(),
                self.replica.as_str(),
            ])
            .output()
            .await?;
        Ok(format!(
            "replica {REPLICA} caught up with m0 (offset {copied}), then cut off from its network: its copy lags from here"
        ))
    }

    /// Kills master 0, promotes the replica and moves master 0's name to it; when `key` was held
    /// through master 0 (`held`), checks that the promoted replica lacks it, as a lagging copy
    /// must. Returns what it did, in words.
    ///
    /// # Errors
    /// When docker fails, the promotion is refused, or the replica has the key after all (the
    /// counterexample could not be built).
    pub(crate) async fn strike(
        &self,
        compose: &Compose,
        key: &str,
        held: bool,
    ) -> Result<String, HarnessError> {
        let master = compose.container(0).await?;
        compose.kill(0).await?;
        let promoted = cli(compose, &self.replica, &["REPLICAOF", "NO", "ONE"]).await?;
        if promoted != "OK" {
            return Err(HarnessError::Workload(format!(
                "REPLICAOF NO ONE on {REPLICA} answered {promoted:?}"
            )));
        }
        docker(compose)
            .args(["network", "disconnect", self.network.as_str(), master.as_str()])
            .output()
            .await?;
        docker(compose)
            .args([
                "network",
                "connect",
                "--alias",
                compose.options().services[0].as_str(),
                self.network.as_str(),
                self.replica.as_str(),
            ])
            .output()
            .await?;
        let info = cli(compose, &self.replica, &["INFO", "replication"]).await?;
        let history = info_field(&info, "second_repl_offset").unwrap_or("?").to_string();
        let has = cli(compose, &self.replica, &["EXISTS", key]).await?;
        if held && has != "0" {
            return Err(HarnessError::Workload(format!(
                "the promoted replica has {key}, which was set after it was cut off: the failover lost nothing"
            )));
        }
        Ok(format!(
            "m0 killed, {REPLICA} promoted (REPLICAOF NO ONE, second_repl_offset {history}) and connected to m0's \
             network as {}; {}",
            compose.options().services[0],
            if held {
                format!("it lacks {key}, which the first probe holds")
            } else {
                "the first probe held nothing".to_string()
            }
        ))
    }

    /// The promoted replica's URL from the host (its published port, read again: it changes
    /// when it reconnects).
    ///
    /// # Errors
    /// When docker fails or it publishes no port.
    pub(crate) async fn url(&self, compose: &Compose) -> Result<String, HarnessError> {
        let out = compose
            .run(&["--profile", PROFILE, "port", REPLICA, "6379"])
            .await?;
        let port = parse_port(&out).ok_or_else(|| HarnessError::Command {
            command: format!("docker compose --profile {PROFILE} port {REPLICA} 6379"),
            status: "no published port".into(),
            stderr: out.clone(),
        })?;
        Ok(compose.options().credentials.url(&compose.options().host, port))
    }
}
