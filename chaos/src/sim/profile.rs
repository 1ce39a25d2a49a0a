//! What one seed's masters and clients are set up with, drawn from a generator of its own (the
//! seed's *operations* generator), so that the classic run's draws stay what they were: a seed
//! whose profile has no operations replays its classic history exactly.
//!
//! A profile with operations sets up what real deployments differ in: masters persisting with
//! `appendfsync everysec` (a crash loses the last second), a memory limit with one of the eviction
//! policies on up to two masters, a replica behind every master (what a promotion brings up);
//! clients of different configurations in one run (each with its own TTLs, its own
//! `restart_grace` or the library's default, its own `health_refresh`, semaphores of 2 or 3
//! permits on the same names), one of them started in the middle of the run; and, in some runs,
//! every kind on the same resource names. Every choice stays in model: a configured grace is never
//! shorter than the longest TTL any client uses (the docs ask for that), and a client with the
//! default grace uses the longest TTL in its first call, so that its own grace covers every other
//! client's from the start (a TTL first used by one client reaches another only at that client's
//! next check: out of model for so long).

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use super::controls::Control;
use super::master::EvictionPolicy;
use super::record::SEMAPHORE_PERMITS;

/// Mixed into the seed for the operations generator, so that it draws apart from the classic one.
const OPERATIONS_SALT: u64 = 0x6f70_735f_7365_6564;

/// Of four seeds without a control, this many have operations (the others run the classic mix
/// alone, history for history as before operations existed).
const WITH_OPERATIONS: u32 = 3;

/// A master's setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MasterSetup {
    /// It persists with `appendfsync everysec` (an AOF with a second of writes at risk),
    /// whatever the classic draw said.
    pub everysec: bool,
    /// Its `maxmemory` and policy, if it has a limit.
    pub memory: Option<(u64, EvictionPolicy)>,
    /// It has a replica (which a promotion brings up).
    pub replica: bool,
}

/// A client's setup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSetup {
    /// Its `restart_grace`; `None` for the library's default (its longest TTL, raised to what
    /// other clients declared in the masters' records).
    pub grace: Option<Duration>,
    /// Its `health_refresh`; `None` for the library's default.
    pub health_refresh: Option<Duration>,
    /// The shortest and longest TTL it asks for, in ms.
    pub ttl_ms: (u64, u64),
    /// The TTL of its first call, if it must be this one.
    pub first_ttl_ms: Option<u64>,
    /// The permits of its semaphores.
    pub permits: u32,
    /// When it is built and starts, in ms from the run start.
    pub starts_at_ms: u64,
}

/// One seed with operations in this many runs with a lock-delay and paused holders.
pub const LOCK_DELAY_ONE_IN: u64 = 5;

/// One seed's setup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// Whether this seed has operations (its world, its clients and its plan beyond the classic).
    pub operations: bool,
    /// Whether every kind uses the same resource names.
    pub shared_keys: bool,
    /// Whether its clients take every lock with a lock-delay longer than any pause, and their
    /// holders of unfenced locks now and then pause past their validity before they write.
    pub lock_delay: bool,
    /// The longest TTL any client asks for, in ms.
    pub max_ttl_ms: u64,
    /// Each master.
    pub masters: Vec<MasterSetup>,
    /// Each client, the classic ones first.
    pub clients: Vec<ClientSetup>,
    /// Seeds the world's operations (losses, new servers) and their plan.
    pub seed: u64,
}

impl Profile {
    /// The classic setup: every master as drawn, no replicas, no memory limit; every client with a
    /// grace of `ttl_ms.1`, TTLs in `ttl_ms`, semaphores of [`SEMAPHORE_PERMITS`] permits.
    pub fn classic(masters: usize, clients: usize, ttl_ms: (u64, u64), seed: u64) -> Profile {
        Profile {
            operations: false,
            shared_keys: false,
            lock_delay: false,
            max_ttl_ms: ttl_ms.1,
            masters: vec![
                MasterSetup {
                    everysec: false,
                    memory: None,
                    replica: false,
                };
                masters
            ],
            clients: vec![
                ClientSetup {
                    grace: Some(Duration::from_millis(ttl_ms.1)),
                    health_refresh: None,
                    ttl_ms,
                    first_ttl_ms: None,
                    permits: SEMAPHORE_PERMITS,
                    starts_at_ms: 0,
                };
                clients
            ],
            seed,
        }
    }

    /// The generator of a seed's operations: apart from its classic generator.
    pub fn generator(seed: u64) -> StdRng {
        StdRng::seed_from_u64(seed ^ OPERATIONS_SALT)
    }

    /// Draws seed `seed`'s setup for `masters` masters and `clients` classic clients over a run
    /// of `run_ms`: classic under a control (whose runs stay as they were), else with operations
    /// three times in four.
    pub fn draw(
        rng: &mut StdRng,
        control: Option<Control>,
        masters: usize,
        clients: usize,
        ttl_ms: (u64, u64),
        run_ms: u64,
    ) -> Profile {
        let seed = rng.random();
        let operations = match control {
            // Drawn as without a control, so that its seeds replay an in-model seed's history
            // but for the connections kept; always with operations.
            Some(Control::KeptConnections) => {
                let _ = rng.random_ratio(WITH_OPERATIONS, 4);
                true
            }
            Some(control) => control.with_operations(),
            None => rng.random_ratio(WITH_OPERATIONS, 4),
        };
        if !operations {
            return Profile::classic(masters, clients, ttl_ms, seed);
        }
        // The grace boundary: half the runs keep the classic longest TTL, the others draw one.
        let max_ttl_ms = if rng.random_bool(0.5) {
            ttl_ms.1
        } else {
            rng.random_range(400..=2_500)
        };
        let lo = (max_ttl_ms / 5).max(ttl_ms.0.min(max_ttl_ms / 2));
        let mut setups = Vec::with_capacity(masters);
        for _ in 0..masters {
            setups.push(MasterSetup {
                everysec: rng.random_ratio(1, 4),
                memory: None,
                replica: true,
            });
        }
        // Up to two masters with a memory limit (a minority: the others keep a majority).
        let limited = match rng.random_range(0..6u8) {
            0..=2 => 0,
            3 | 4 => 1,
            _ => 2,
        };
        for _ in 0..limited {
            let m = rng.random_range(0..masters);
            let policy = EvictionPolicy::ALL[rng.random_range(0..EvictionPolicy::ALL.len())];
            let limit = super::master::BASE_USED + rng.random_range(24_000..=200_000u64);
            setups[m].memory = Some((limit, policy));
        }
        let mid_run = rng.random_bool(0.5);
        let total = clients + usize::from(mid_run);
        let mut client_setups = Vec::with_capacity(total);
        for c in 0..total {
            let (grace, hi, first) = match rng.random_range(0..3u8) {
                // The library's default grace: its longest TTL is the fleet's, used at once.
                0 => (None, max_ttl_ms, Some(max_ttl_ms)),
                // Exactly the longest TTL: the boundary itself.
                1 => (
                    Some(Duration::from_millis(max_ttl_ms)),
                    if rng.random_bool(0.5) {
                        max_ttl_ms
                    } else {
                        rng.random_range(lo + 1..=max_ttl_ms)
                    },
                    None,
                ),
                _ => (
                    Some(Duration::from_millis(max_ttl_ms + rng.random_range(1..=500))),
                    rng.random_range(lo + 1..=max_ttl_ms),
                    None,
                ),
            };
            let health_refresh = rng
                .random_bool(0.5)
                .then(|| Duration::from_millis(rng.random_range(200..=3_000)));
            let permits = if rng.random_ratio(1, 3) {
                3
            } else {
                SEMAPHORE_PERMITS
            };
            let starts_at_ms = if c >= clients {
                rng.random_range(run_ms / 10..=run_ms / 2)
            } else {
                0
            };
            client_setups.push(ClientSetup {
                grace,
                health_refresh,
                ttl_ms: (lo, hi),
                first_ttl_ms: first,
                permits,
                starts_at_ms,
            });
        }
        let mut profile = Profile {
            operations: true,
            // From the seed already drawn, so that no other draw moves.
            lock_delay: control.is_none() && seed % LOCK_DELAY_ONE_IN == 1,
            shared_keys: rng.random_ratio(1, 3),
            max_ttl_ms,
            masters: setups,
            clients: client_setups,
            seed,
        };
        if let Some(control) = control.filter(|c| c.removes_mechanism()) {
            profile.focus(rng, control);
        }
        profile
    }

    /// Sets up what a control that removes a mechanism needs for that mechanism to matter: durable
    /// masters without memory limits where a restart or a replica is what it answers (so nothing
    /// else keeps them out), a majority with an evicting limit for the eviction rule, clients
    /// checking often enough to see a runtime change, semaphores of 2 and 3 permits side by side.
    fn focus(&mut self, rng: &mut StdRng, control: Control) {
        let majority = self.masters.len() / 2 + 1;
        for (m, setup) in self.masters.iter_mut().enumerate() {
            // The epoch check answers the increments a crash loses: every master may lose some.
            setup.everysec = control == Control::WithoutEpochCheck;
            setup.memory = None;
            if control == Control::WithoutEvictionRule && m < majority {
                let limit = super::master::BASE_USED + rng.random_range(24_000..=60_000u64);
                setup.memory = Some((limit, EvictionPolicy::AllKeysLru));
            }
        }
        if control == Control::WithoutEpochCheck {
            // Short TTLs, so a short grace: the attempts made while the restarted masters' votes
            // wait it out still draw from their counters, and over a long grace they would draw
            // back every increment a crash lost.
            self.max_ttl_ms = 300;
            for client in &mut self.clients {
                client.ttl_ms = (200, 300);
                client.first_ttl_ms = Some(300);
                client.grace = None;
            }
        }
        for (c, client) in self.clients.iter_mut().enumerate() {
            client.health_refresh = Some(Duration::from_millis(rng.random_range(200..=400)));
            if control == Control::WithoutPermitsCheck {
                client.permits = 2 + u32::from(c % 2 == 1);
            }
        }
    }

    /// Whether a control's masters must all persist every write (by their configuration file).
    pub fn durable_masters(control: Option<Control>) -> bool {
        matches!(
            control,
            Some(Control::WithoutReplacedRule | Control::WithoutDurabilityRule)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grace_covers_the_longest_ttl_and_controls_stay_classic() {
        for seed in 0..200 {
            let mut rng = Profile::generator(seed);
            let p = Profile::draw(&mut rng, None, 5, 6, (200, 1_000), 30_000);
            for c in &p.clients {
                assert!(c.ttl_ms.0 < c.ttl_ms.1 && c.ttl_ms.1 <= p.max_ttl_ms, "{p:?}");
                match c.grace {
                    Some(g) => assert!(g >= Duration::from_millis(p.max_ttl_ms), "{p:?}"),
                    None => assert_eq!(c.first_ttl_ms, Some(p.max_ttl_ms), "{p:?}"),
                }
            }
            assert!(p.masters.iter().filter(|m| m.memory.is_some()).count() <= 2);
            let mut rng = Profile::generator(seed);
            let control = Profile::draw(&mut rng, Some(Control::ClockJump), 5, 6, (200, 1_000), 30_000);
            assert!(!control.operations);
            let mut rng = Profile::generator(seed);
            let focused = Profile::draw(
                &mut rng,
                Some(Control::WithoutPermitsCheck),
                5,
                6,
                (200, 1_000),
                30_000,
            );
            assert!(focused.operations);
            let counts: std::collections::BTreeSet<u32> = focused.clients.iter().map(|c| c.permits).collect();
            assert_eq!(counts.into_iter().collect::<Vec<_>>(), [2, 3], "{focused:?}");
        }
    }
}
