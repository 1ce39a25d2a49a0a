//! From the command line to a connected client: which masters, and how patiently to wait.
//!
//! Masters come from `--nodes`, else from `QUORLOCK_NODES` (clap reads both), else the command
//! fails with a configuration error that says how to give them. `--wait` is the only bound on
//! how long an acquire keeps trying: the attempt count is lifted so a long wait is honoured. Every
//! command settles its client before it returns (`Masters::with_client`).

use std::future::Future;
use std::time::Duration;

use quorlock::{AcquireError, Guard, Quorlock};

use crate::args::NODES_ENV;
use crate::exit::{Failure, CONFIG};

/// What every command needs to reach the masters.
#[derive(Debug, Clone)]
pub struct Masters {
    /// The raw `--nodes` / `QUORLOCK_NODES` value.
    pub nodes: Option<String>,
    /// `--node-timeout`, when given.
    pub node_timeout: Option<Duration>,
    /// `--restart-grace`, when given.
    pub restart_grace: Option<Duration>,
}

impl Masters {
    /// The master URLs, in order.
    ///
    /// # Errors
    /// A [`CONFIG`] failure when no master is given.
    pub fn urls(&self) -> Result<Vec<String>, Failure> {
        let urls: Vec<String> = self
            .nodes
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|url| !url.is_empty())
            .map(str::to_owned)
            .collect();
        if urls.is_empty() {
            return Err(Failure::new(
                CONFIG,
                format!(
                    "no Redis masters given: pass --nodes redis://host:port,... or set {NODES_ENV} (an odd number, e.g. 3 or 5)"
                ),
            ));
        }
        Ok(urls)
    }

    /// Connects to the masters; `wait` bounds how long an acquire keeps trying.
    ///
    /// # Errors
    /// A [`CONFIG`] failure for missing masters, a bad URL or rejected credentials.
    pub async fn connect(&self, wait: Duration) -> Result<Quorlock, Failure> {
        let mut builder = Quorlock::builder()
            .nodes(self.urls()?)
            .wait(wait)
            .max_attempts(u32::MAX);
        if let Some(timeout) = self.node_timeout {
            builder = builder.node_timeout(timeout);
        }
        if let Some(grace) = self.restart_grace {
            builder = builder.restart_grace(grace);
        }
        Ok(builder.build().await?)
    }

    /// Connects, runs `work` with the client, then waits for the lock traffic it left to tasks
    /// (the slower masters' share of an acquire or a release, the release of a failed or abandoned
    /// round: see [`Quorlock::settle`]) whatever the outcome, so the process exits with none of it
    /// cut off.
    ///
    /// # Errors
    /// As [`Masters::connect`], or `work`'s failure.
    pub async fn with_client<T, F, Fut>(&self, wait: Duration, work: F) -> Result<T, Failure>
    where
        F: FnOnce(Quorlock) -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let locks = self.connect(wait).await?;
        let outcome = work(locks.clone()).await;
        locks.settle().await;
        outcome
    }
}

/// Acquires `resource`, fenced when `fence` is set.
///
/// # Errors
/// As [`Quorlock::acquire`].
pub async fn take(
    locks: &Quorlock,
    resource: &str,
    ttl: Duration,
    fence: bool,
) -> Result<Guard, AcquireError> {
    if fence {
        locks.acquire_fenced(resource, ttl).await
    } else {
        locks.acquire(resource, ttl).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masters(nodes: Option<&str>) -> Masters {
        Masters {
            nodes: nodes.map(str::to_owned),
            node_timeout: None,
            restart_grace: None,
        }
    }

    #[test]
    fn urls_are_split_on_commas_and_trimmed() {
        assert_eq!(
            masters(Some("redis://a:1, redis://b:2,,")).urls(),
            Ok(vec!["redis://a:1".to_owned(), "redis://b:2".to_owned()])
        );
    }

    #[test]
    fn no_masters_is_a_config_error_saying_how_to_give_them() {
        for nodes in [None, Some(""), Some(" , ")] {
            let err = masters(nodes).urls().expect_err("no masters");
            assert_eq!(err.code, CONFIG);
            assert!(err.message.contains("--nodes") && err.message.contains(NODES_ENV));
        }
    }
}
