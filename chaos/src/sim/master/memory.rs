//! The memory limit of one master and what it does when a command finds it over the limit
//! (`maxmemory`, `maxmemory-policy`), as Redis's `performEvictions` before each command: expired
//! keys go first, then keys picked by the policy from a few sampled ones (the approximate LRU,
//! LFU and TTL of a real server, sampled from the master's own seeded generator), until the
//! estimate is under the limit. When nothing can be evicted (`noeviction`, or a `volatile-*`
//! policy without keys with a deadline), the master is out of memory for that command: commands
//! that may grow memory (`denyoom`), and the same commands called from a script, fail with `OOM`.

use super::config::EvictionPolicy;
use super::keyspace::Usage;
use super::server::Server;

/// What an empty master uses (a real empty `redis-server` reports about this `used_memory`).
pub const BASE_USED: u64 = 900_000;

/// How many keys a policy looks at to pick one (`maxmemory-samples`, 5 by default).
const SAMPLES: usize = 5;

/// The error of a command refused for memory, as Redis 7.0 words it.
pub(crate) const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// The memory the master uses now, as it estimates it.
pub(crate) fn used(server: &Server) -> u64 {
    BASE_USED + server.keyspace.bytes()
}

/// Frees memory before a command as the policy allows; returns `true` when the master is still
/// over its limit (the command's out-of-memory state). Nothing happens without a limit.
pub(crate) fn make_room(server: &mut Server) -> bool {
    if server.maxmemory == 0 {
        return false;
    }
    let now = server.now;
    if used(server) <= server.maxmemory {
        return false;
    }
    server.keyspace.expire_due(now);
    loop {
        if used(server) <= server.maxmemory {
            return false;
        }
        if server.policy == EvictionPolicy::NoEviction {
            return true;
        }
        let Some(victim) = pick(server) else {
            return true;
        };
        server.keyspace.remove_now(&victim);
        server.evicted_keys += 1;
    }
}

/// The key the policy evicts next, from a few sampled ones; `None` when there is none to take.
fn pick(server: &mut Server) -> Option<Vec<u8>> {
    let policy = server.policy;
    let mut samples: Vec<(Vec<u8>, Usage)> = Vec::with_capacity(SAMPLES);
    if policy.volatile_only() {
        let volatile: Vec<(Vec<u8>, Usage)> =
            server.keyspace.volatile().map(|(k, u)| (k.to_vec(), u)).collect();
        if volatile.is_empty() {
            return None;
        }
        for _ in 0..SAMPLES {
            let i = server.samples.below(volatile.len());
            samples.push(volatile[i].clone());
        }
    } else {
        let n = server.keyspace.len();
        if n == 0 {
            return None;
        }
        for _ in 0..SAMPLES {
            let i = server.samples.below(n);
            if let Some((key, usage)) = server.keyspace.nth(i) {
                samples.push((key.to_vec(), usage));
            }
        }
    }
    let best = match policy {
        EvictionPolicy::AllKeysLru | EvictionPolicy::VolatileLru => {
            samples.into_iter().min_by_key(|(_, u)| u.touched)
        }
        EvictionPolicy::AllKeysLfu | EvictionPolicy::VolatileLfu => {
            samples.into_iter().min_by_key(|(_, u)| (u.hits, u.touched))
        }
        EvictionPolicy::VolatileTtl => samples
            .into_iter()
            .min_by_key(|(_, u)| u.expires_at.unwrap_or(u64::MAX)),
        EvictionPolicy::AllKeysRandom | EvictionPolicy::VolatileRandom | EvictionPolicy::NoEviction => {
            samples.into_iter().next()
        }
    };
    best.map(|(key, _)| key)
}
