//! Fault actions and how they are applied: one enum naming every fault the harness can
//! inject (process, network, clock, client), and an executor that turns an action into
//! calls on a [`Backend`], a [`ProxyGroup`], the masters' clocks and the clients.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::Backend;
use crate::clock::MasterClocks;
use crate::cluster::DataMode;
use crate::error::HarnessError;
use crate::proxy::{ProxyGroup, ProxyMode};

/// One fault (or its healing), applied at a point of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultAction {
    /// SIGKILL a master.
    Kill(usize),
    /// SIGSTOP a master.
    Pause(usize),
    /// SIGCONT a paused master.
    Resume(usize),
    /// Kill and start a master, keeping or wiping its data.
    Restart(usize, DataMode),
    /// Add latency to every group's traffic with a master.
    Latency(usize, Duration),
    /// Blackhole every group's traffic with a master.
    Blackhole(usize),
    /// Reset every group's connections to a master, and each new one right after accept.
    Reset(usize),
    /// Blackhole one client group's traffic with some masters.
    Partition {
        /// The client group cut off.
        group: usize,
        /// The masters it can no longer reach.
        masters: Vec<usize>,
    },
    /// Put every proxy back to pass-through.
    HealNetwork,
    /// Jump a master's wall clock forward.
    ClockJump(usize, Duration),
    /// Make a client stall this long inside its next hold (past its validity).
    PauseClient(usize, Duration),
}

impl fmt::Display for FaultAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultAction::Kill(m) => write!(f, "kill m{m}"),
            FaultAction::Pause(m) => write!(f, "pause m{m}"),
            FaultAction::Resume(m) => write!(f, "resume m{m}"),
            FaultAction::Restart(m, DataMode::Keep) => write!(f, "restart m{m} (keep)"),
            FaultAction::Restart(m, DataMode::Wipe) => write!(f, "restart m{m} (wipe)"),
            FaultAction::Latency(m, d) => write!(f, "latency m{m} +{}ms", d.as_millis()),
            FaultAction::Blackhole(m) => write!(f, "blackhole m{m}"),
            FaultAction::Reset(m) => write!(f, "reset m{m}"),
            FaultAction::Partition { group, masters } => {
                let list: Vec<String> = masters.iter().map(|m| format!("m{m}")).collect();
                write!(f, "partition g{group} | {}", list.join(","))
            }
            FaultAction::HealNetwork => write!(f, "heal network"),
            FaultAction::ClockJump(m, d) => write!(f, "clock m{m} +{}ms", d.as_millis()),
            FaultAction::PauseClient(c, d) => write!(f, "pause client c{c} {}ms", d.as_millis()),
        }
    }
}

impl FaultAction {
    /// The master this action targets, if it targets exactly one.
    pub fn master(&self) -> Option<usize> {
        match self {
            FaultAction::Kill(m)
            | FaultAction::Pause(m)
            | FaultAction::Resume(m)
            | FaultAction::Restart(m, _)
            | FaultAction::Latency(m, _)
            | FaultAction::Blackhole(m)
            | FaultAction::Reset(m)
            | FaultAction::ClockJump(m, _) => Some(*m),
            _ => None,
        }
    }
}

/// An action at an offset from the run start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduledFault {
    /// When to apply it.
    pub at: Duration,
    /// What to do.
    pub action: FaultAction,
}

/// Requests to stall clients inside their next hold; shared by the executor and clients.
///
/// While a stall is pending or under way the run's clients keep going past the run's end
/// ([`ClientPauses::busy`]), so that the stalled client gets its turn and the others take the
/// lock under it: what the stall exists to show happens every run, not only when the timing
/// allows.
#[derive(Debug, Clone, Default)]
pub struct ClientPauses {
    pending: Arc<Mutex<HashMap<usize, Duration>>>,
    stalling: Arc<std::sync::atomic::AtomicUsize>,
}

impl ClientPauses {
    /// No pauses requested.
    pub fn new() -> ClientPauses {
        ClientPauses::default()
    }

    /// Asks `client` to stall for `duration` inside its next hold.
    pub fn request(&self, client: usize, duration: Duration) {
        self.lock().insert(client, duration);
    }

    /// Takes `client`'s pending stall, if any (called by the client while holding); the
    /// client calls [`ClientPauses::finish`] once it is over.
    pub fn take(&self, client: usize) -> Option<Duration> {
        let mut pending = self.lock();
        let stall = pending.remove(&client);
        if stall.is_some() {
            self.stalling.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        stall
    }

    /// Ends a stall [`ClientPauses::take`] handed out.
    pub fn finish(&self) {
        let _ = self.stalling.fetch_update(
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
            |n| n.checked_sub(1),
        );
    }

    /// `true` while a stall is requested and not yet taken, or taken and not yet over.
    pub fn busy(&self) -> bool {
        !self.lock().is_empty() || self.stalling.load(std::sync::atomic::Ordering::SeqCst) > 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<usize, Duration>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Everything an action can be applied to.
pub struct FaultTargets<'a> {
    /// The masters' processes.
    pub backend: &'a mut dyn Backend,
    /// The proxies clients connect through (network faults need them).
    pub proxies: Option<&'a ProxyGroup>,
    /// The masters' clocks.
    pub clocks: &'a mut MasterClocks,
    /// The clients' stall requests.
    pub clients: &'a ClientPauses,
}

/// Applies one action.
pub async fn apply(action: &FaultAction, targets: &mut FaultTargets<'_>) -> Result<(), HarnessError> {
    let proxies = || {
        targets.proxies.ok_or_else(|| {
            HarnessError::InvalidOptions(format!("`{action}` needs proxies, but the run has none"))
        })
    };
    match action {
        FaultAction::Kill(m) => targets.backend.kill(*m).await,
        FaultAction::Pause(m) => targets.backend.pause(*m).await,
        FaultAction::Resume(m) => targets.backend.resume(*m).await,
        FaultAction::Restart(m, data) => targets.backend.restart(*m, *data).await,
        FaultAction::Latency(m, delay) => proxies()?.set_master_mode(*m, ProxyMode::Latency(*delay)),
        FaultAction::Blackhole(m) => proxies()?.set_master_mode(*m, ProxyMode::Blackhole),
        FaultAction::Reset(m) => proxies()?.set_master_mode(*m, ProxyMode::Reset),
        FaultAction::Partition { group, masters } => proxies()?.partition(*group, masters),
        FaultAction::HealNetwork => {
            proxies()?.heal();
            Ok(())
        }
        FaultAction::ClockJump(m, forward) => {
            let url = targets
                .backend
                .urls()
                .get(*m)
                .cloned()
                .ok_or(HarnessError::NoSuchMaster {
                    index: *m,
                    len: targets.backend.len(),
                })?;
            targets.clocks.jump(*m, &url, *forward).await
        }
        FaultAction::PauseClient(c, duration) => {
            targets.clients.request(*c, *duration);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_name_the_target() {
        assert_eq!(FaultAction::Kill(1).to_string(), "kill m1");
        assert_eq!(
            FaultAction::Restart(2, DataMode::Wipe).to_string(),
            "restart m2 (wipe)"
        );
        assert_eq!(
            FaultAction::Partition {
                group: 0,
                masters: vec![0, 3]
            }
            .to_string(),
            "partition g0 | m0,m3"
        );
        assert_eq!(
            FaultAction::Latency(4, Duration::from_millis(25)).to_string(),
            "latency m4 +25ms"
        );
        assert_eq!(FaultAction::HealNetwork.master(), None);
        assert_eq!(FaultAction::Blackhole(3).master(), Some(3));
        assert_eq!(FaultAction::Reset(2).to_string(), "reset m2");
        assert_eq!(FaultAction::Reset(2).master(), Some(2));
    }

    #[test]
    fn client_pauses_are_taken_once() {
        let pauses = ClientPauses::new();
        let shared = pauses.clone();
        shared.request(3, Duration::from_secs(2));
        assert_eq!(pauses.take(2), None);
        assert_eq!(pauses.take(3), Some(Duration::from_secs(2)));
        assert_eq!(pauses.take(3), None);
    }
}
