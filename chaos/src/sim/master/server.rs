//! The state a master's commands work on, shared by commands sent by clients and commands called
//! from scripts: the keyspace, the master's clock for the command being run, its identity
//! (`run_id`, start time), what `CONFIG SET` changed in the running server (persistence, memory
//! limit and policy), its memory and replication state, and the messages published so far by the
//! command being run.

use super::config::{EvictionPolicy, MasterConfig};
use super::keyspace::Keyspace;
use super::samples::Samples;

/// Counts the subscribers of a channel when something is published on it.
pub type SubscriberCount = Box<dyn FnMut(&[u8]) -> i64>;

/// One master's state, without its Lua engine.
pub(crate) struct Server {
    pub(crate) config: MasterConfig,
    pub(crate) keyspace: Keyspace,
    /// The master's clock in ms (since the Unix epoch, on the master's own clock) for the command
    /// being run.
    pub(crate) now: u64,
    /// The `run_id` of the current process: 40 hex digits.
    pub(crate) run_id: String,
    /// The clock when the current process started.
    pub(crate) started_at: u64,
    /// How many times the master started (the first start counts), for `process_id`.
    pub(crate) starts: u64,
    /// Messages published by the command being run.
    pub(crate) published: Vec<(Vec<u8>, Vec<u8>)>,
    /// Counts receivers for `PUBLISH`; without it `PUBLISH` answers 0.
    pub(crate) subscribers: Option<SubscriberCount>,
    /// The running server's `appendfsync` (`CONFIG SET` changes it; a restart reads the config).
    pub(crate) appendfsync: &'static str,
    /// The running server's `maxmemory`, in bytes (0: no limit).
    pub(crate) maxmemory: u64,
    /// The running server's `maxmemory-policy`.
    pub(crate) policy: EvictionPolicy,
    /// Keys evicted since the process started (`evicted_keys`).
    pub(crate) evicted_keys: u64,
    /// Whether the command being run found the master over its memory limit with nothing left to
    /// evict: its `denyoom` commands, its scripts' included, fail with `OOM`.
    pub(crate) oom: bool,
    /// The generator of eviction samples.
    pub(crate) samples: Samples,
    /// The replication offset: bytes of write commands so far (`master_repl_offset`).
    pub(crate) repl_offset: u64,
    /// The offset up to which it took over another server's history, if it was promoted from a
    /// replica (`second_repl_offset`; -1 when never).
    pub(crate) second_repl_offset: Option<u64>,
    /// Replicas attached (`connected_slaves`).
    pub(crate) replicas: u64,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("config", &self.config)
            .field("keys", &self.keyspace.len())
            .field("now", &self.now)
            .field("run_id", &self.run_id)
            .field("started_at", &self.started_at)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// A master started at `now` with `run_id`.
    pub(crate) fn new(config: MasterConfig, run_id: String, now: u64) -> Server {
        Server {
            config,
            keyspace: Keyspace::default(),
            now,
            run_id,
            started_at: now,
            starts: 1,
            published: Vec::new(),
            subscribers: None,
            appendfsync: config.persistence.appendfsync(),
            maxmemory: config.maxmemory,
            policy: config.policy,
            evicted_keys: 0,
            oom: false,
            samples: Samples::new(config.seed),
            repl_offset: 0,
            second_repl_offset: None,
            replicas: 0,
        }
    }

    /// Back to the configuration file, as a new process reads it: what `CONFIG SET` changed is
    /// gone, and so are the process's counters.
    pub(crate) fn reset_runtime(&mut self) {
        self.appendfsync = self.config.persistence.appendfsync();
        self.maxmemory = self.config.maxmemory;
        self.policy = self.config.policy;
        self.evicted_keys = 0;
        self.oom = false;
        self.second_repl_offset = None;
    }

    /// Counts a write command of `args` in the replication offset.
    pub(crate) fn note_write(&mut self, args: &[&[u8]]) {
        let bytes: usize = args.iter().map(|a| a.len() + 8).sum();
        self.repl_offset += bytes as u64 + 8;
    }

    /// `uptime_in_seconds`, as a real server computes it: the difference of two whole-second
    /// readings of its clock, now and at its start (0 if the clock went back). It can say one
    /// second more than has passed: started at 10.9 s and read at 11.1 s, it says 1.
    pub(crate) fn uptime_secs(&self) -> u64 {
        self.now.saturating_sub(self.started_at) / 1000 // UPTIME-TEMP
    }
}

/// Draws run ids: SplitMix64 over the configured seed, so the sequence is fixed by the seed and
/// independent of any library's generator.
#[derive(Debug, Clone)]
pub(crate) struct RunIds {
    state: u64,
}

impl RunIds {
    pub(crate) fn new(seed: u64) -> RunIds {
        RunIds { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next run id: 40 lower-case hex digits, as Redis's.
    pub(crate) fn next_id(&mut self) -> String {
        let mut id = String::with_capacity(40);
        for _ in 0..3 {
            id.push_str(&format!("{:016x}", self.next_u64()));
        }
        id.truncate(40);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::RunIds;

    #[test]
    fn run_ids_follow_the_seed() {
        let mut a = RunIds::new(7);
        let mut b = RunIds::new(7);
        let first = a.next_id();
        assert_eq!(first, b.next_id());
        assert_eq!(first.len(), 40);
        assert!(first
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(first, a.next_id());
        assert_ne!(first, RunIds::new(8).next_id());
    }
}
