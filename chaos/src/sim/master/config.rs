//! What kind of server a simulated master plays: its flavor (which decides the version it reports
//! and the commands it knows), its persistence (which decides what survives a restart and what
//! `INFO` / `CONFIG GET` say), its memory limit and eviction policy, and the seed its `run_id`s
//! (and its eviction samples) are drawn from. This is the configuration file: `CONFIG SET` changes
//! the running server, and a restart goes back to this.

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

/// What a master does when a write would take it past its `maxmemory` (`maxmemory-policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvictionPolicy {
    /// Refuse writes (`OOM` errors) and evict nothing: the default.
    NoEviction,
    /// Evict the least recently used key, of all keys.
    AllKeysLru,
    /// Evict the least recently used key with a deadline.
    VolatileLru,
    /// Evict the least frequently used key, of all keys.
    AllKeysLfu,
    /// Evict the least frequently used key with a deadline.
    VolatileLfu,
    /// Evict a random key.
    AllKeysRandom,
    /// Evict a random key with a deadline.
    VolatileRandom,
    /// Evict the key with a deadline nearest to expiry.
    VolatileTtl,
}

impl EvictionPolicy {
    /// Every policy, in the order Redis documents them.
    pub const ALL: [EvictionPolicy; 8] = [
        EvictionPolicy::NoEviction,
        EvictionPolicy::AllKeysLru,
        EvictionPolicy::VolatileLru,
        EvictionPolicy::AllKeysLfu,
        EvictionPolicy::VolatileLfu,
        EvictionPolicy::AllKeysRandom,
        EvictionPolicy::VolatileRandom,
        EvictionPolicy::VolatileTtl,
    ];

    /// The name `CONFIG` and `INFO` use.
    pub fn name(self) -> &'static str {
        match self {
            EvictionPolicy::NoEviction => "noeviction",
            EvictionPolicy::AllKeysLru => "allkeys-lru",
            EvictionPolicy::VolatileLru => "volatile-lru",
            EvictionPolicy::AllKeysLfu => "allkeys-lfu",
            EvictionPolicy::VolatileLfu => "volatile-lfu",
            EvictionPolicy::AllKeysRandom => "allkeys-random",
            EvictionPolicy::VolatileRandom => "volatile-random",
            EvictionPolicy::VolatileTtl => "volatile-ttl",
        }
    }

    /// The policy called `name` (any case).
    pub fn parse(name: &[u8]) -> Option<EvictionPolicy> {
        EvictionPolicy::ALL
            .into_iter()
            .find(|p| p.name().as_bytes().eq_ignore_ascii_case(name))
    }

    /// `true` when it only evicts keys with a deadline.
    pub fn volatile_only(self) -> bool {
        matches!(
            self,
            EvictionPolicy::VolatileLru
                | EvictionPolicy::VolatileLfu
                | EvictionPolicy::VolatileRandom
                | EvictionPolicy::VolatileTtl
        )
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
    /// `maxmemory` in bytes; 0 for no limit.
    pub maxmemory: u64,
    /// `maxmemory-policy`.
    pub policy: EvictionPolicy,
}

impl MasterConfig {
    /// A master of `flavor` with `persistence`, its run ids drawn from `seed`, on port 6379.
    pub fn new(flavor: Flavor, persistence: Persistence, seed: u64) -> MasterConfig {
        MasterConfig {
            flavor,
            persistence,
            seed,
            port: 6379,
            maxmemory: 0,
            policy: EvictionPolicy::NoEviction,
        }
    }

    /// The same server with a memory limit of `maxmemory` bytes and `policy`.
    pub fn with_memory(self, maxmemory: u64, policy: EvictionPolicy) -> MasterConfig {
        MasterConfig {
            maxmemory,
            policy,
            ..self
        }
    }
}
