//! What kind of server a simulated master plays: its flavor (which decides the version it reports
//! and the commands it knows), its persistence (which decides what survives a restart and what
//! `INFO` / `CONFIG GET` say), and the seed its `run_id`s are drawn from.

/// The server a simulated master imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// Redis 7.0: no `SET .. IFEQ`, no `DELIFEQ`.
    Redis70,
    /// Valkey 8.1: `SET .. IFEQ`, no `DELIFEQ`.
    Valkey81,
    /// Valkey 9.1: `SET .. IFEQ` and `DELIFEQ`.
    Valkey91,
}

impl Flavor {
    /// `true` when `SET` takes `IFEQ comparison-value`.
    pub fn has_set_ifeq(self) -> bool {
        !matches!(self, Flavor::Redis70)
    }

    /// `true` when the server knows `DELIFEQ`.
    pub fn has_delifeq(self) -> bool {
        matches!(self, Flavor::Valkey91)
    }

    /// The `redis_version` `INFO` reports (Valkey keeps reporting the Redis version it forked).
    pub fn redis_version(self) -> &'static str {
        match self {
            Flavor::Redis70 => "7.0.15",
            Flavor::Valkey81 | Flavor::Valkey91 => "7.2.4",
        }
    }

    /// The `valkey_version` `INFO` reports, for Valkey.
    pub fn valkey_version(self) -> Option<&'static str> {
        match self {
            Flavor::Redis70 => None,
            Flavor::Valkey81 => Some("8.1.4"),
            Flavor::Valkey91 => Some("9.1.0"),
        }
    }
}

/// How a simulated master persists its data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Persistence {
    /// `appendonly no`: a restart loses everything (the caller restarts with `keep_data: false`).
    None,
    /// `appendonly yes`, `appendfsync always`: every acknowledged write survives a restart.
    AofAlways,
    /// `appendonly yes`, `appendfsync everysec`: up to a second of writes may be lost; the
    /// simulation decides what a restart keeps.
    AofEverysec,
}

impl Persistence {
    /// `true` when the AOF is on.
    pub fn aof_enabled(self) -> bool {
        !matches!(self, Persistence::None)
    }

    /// The `appendfsync` setting (the server default, `everysec`, when the AOF is off).
    pub fn appendfsync(self) -> &'static str {
        match self {
            Persistence::AofAlways => "always",
            Persistence::None | Persistence::AofEverysec => "everysec",
        }
    }
}

/// Everything a [`super::SimMaster`] is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MasterConfig {
    /// The server imitated.
    pub flavor: Flavor,
    /// The persistence configured.
    pub persistence: Persistence,
    /// Seeds the `run_id` drawn at start and at every restart.
    pub seed: u64,
    /// The port `INFO` reports (nothing listens on it).
    pub port: u16,
}

impl MasterConfig {
    /// A master of `flavor` with `persistence`, its run ids drawn from `seed`, on port 6379.
    pub fn new(flavor: Flavor, persistence: Persistence, seed: u64) -> MasterConfig {
        MasterConfig {
            flavor,
            persistence,
            seed,
            port: 6379,
        }
    }
}
