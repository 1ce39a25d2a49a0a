//! The [`Backend`] trait: the fault controls every way of running masters offers, so the
//! fault schedule and the runner do not care whether masters are local processes or
//! docker compose services.

use futures::future::BoxFuture;

use crate::cluster::{Cluster, DataMode};
use crate::error::HarnessError;

/// A set of masters whose processes can be killed, paused, resumed and restarted.
///
/// Methods return boxed futures so the trait can be used as `dyn Backend`.
pub trait Backend: Send + Sync {
    /// Short name for reports, e.g. `"process"` or `"compose"`.
    fn name(&self) -> &'static str;

    /// Number of masters.
    fn len(&self) -> usize;

    /// `true` if there are no masters.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Client URLs of the masters, with credentials.
    fn urls(&self) -> Vec<String>;

    /// Kills master `i` abruptly (SIGKILL).
    fn kill(&mut self, i: usize) -> BoxFuture<'_, Result<(), HarnessError>>;

    /// Freezes master `i` (SIGSTOP / cgroup freeze).
    fn pause(&mut self, i: usize) -> BoxFuture<'_, Result<(), HarnessError>>;

    /// Unfreezes master `i`.
    fn resume(&mut self, i: usize) -> BoxFuture<'_, Result<(), HarnessError>>;

    /// Restarts master `i`, keeping or wiping its data.
    fn restart(&mut self, i: usize, data: DataMode) -> BoxFuture<'_, Result<(), HarnessError>>;
}

impl Backend for Cluster {
    fn name(&self) -> &'static str {
        "process"
    }

    fn len(&self) -> usize {
        Cluster::len(self)
    }

    fn urls(&self) -> Vec<String> {
        Cluster::urls(self)
    }

    fn kill(&mut self, i: usize) -> BoxFuture<'_, Result<(), HarnessError>> {
        Box::pin(async move { Cluster::kill(self, i) })
    }

    fn pause(&mut self, i: usize) -> BoxFuture<'_, Result<(), HarnessError>> {
        Box::pin(async move { Cluster::pause(self, i) })
    }

    fn resume(&mut self, i: usize) -> BoxFuture<'_, Result<(), HarnessError>> {
        Box::pin(async move { Cluster::resume(self, i) })
    }

    fn restart(&mut self, i: usize, data: DataMode) -> BoxFuture<'_, Result<(), HarnessError>> {
        Box::pin(Cluster::restart(self, i, data))
    }
}
