//! Random identities (lock tokens, reentrant lock owners, fair-queue tickets) and the rest of a
//! client's randomness: the jitter between attempts, and the wall-clock time a fair ticket carries.
//!
//! Each identity must be unique among the processes that use the same masters: a release or an
//! extend acts on whatever key holds its token, and a reentrant hold re-enters whatever lock holds
//! its owner. So every identity is a version-4 UUID (written as 32 lowercase hex digits, the form
//! every RedLock client only compares) whose bits come from the OS's generator at the moment it is
//! made. A generator kept in the process (a pool of OS bytes, or a seeded generator such as `rand`'s
//! thread-local one) is copied into a child by `fork`, and parent and child would then hand out the
//! same identities. Noticing a fork without a system call needs `pthread_atfork`, which this crate's
//! `forbid(unsafe_code)` rules out, and a client can keep working in a forked child (a
//! single-threaded runtime is copied whole, and its connections reconnect), so the one system call
//! per identity stays. Jitter needs no such care and comes from the thread-local generator.
//!
//! A client built with an [`Environment`] of its own (the `seam` feature; the deterministic
//! simulation uses it) draws all of it from there instead, so one seed gives one history.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use std::convert::Infallible;

use rand::{RngExt, TryRng};

use crate::base::error::AcquireError;
use crate::core::Backoff;
use crate::seam::Environment;

/// Where a client draws its randomness and its wall-clock time.
#[derive(Clone, Default)]
pub(crate) enum Entropy {
    /// The OS for identities, the thread-local generator for jitter, the system clock.
    #[default]
    Os,
    /// An environment the application supplied.
    #[cfg_attr(not(feature = "seam"), allow(dead_code))]
    Custom(Arc<dyn Environment>),
}

impl std::fmt::Debug for Entropy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Entropy::Os => "Entropy::Os",
            Entropy::Custom(_) => "Entropy::Custom",
        })
    }
}

impl Entropy {
    /// A lock token, in the one allocation the lock and its guard then share. Fails only when the
    /// OS cannot supply randomness.
    pub(crate) fn token(&self) -> Result<Arc<str>, AcquireError> {
        let mut bytes = [0u8; 16];
        match self {
            Entropy::Os => rand::rngs::SysRng
                .try_fill_bytes(&mut bytes)
                .map_err(|e| AcquireError::Rng(e.to_string()))?,
            Entropy::Custom(env) => env.fill(&mut bytes),
        }
        // Written on the stack: the lock and its guard share the token's one allocation.
        let mut text = [0u8; uuid::fmt::Simple::LENGTH];
        Ok(Arc::from(&*uuid(bytes).simple().encode_lower(&mut text)))
    }

    /// An identity for an infallible constructor (a lock owner, a ticket): the OS's bits, mixed
    /// with the thread-local generator's. The mix is as unpredictable as either part, and differs
    /// between a parent and its forked child because the OS's part does. Only if the OS cannot
    /// supply randomness (it always can once a Linux system has booted) does the mix fall back to
    /// the thread-local generator alone, whose state a forked child shares.
    pub(crate) fn id(&self) -> String {
        let mut bytes = [0u8; 16];
        match self {
            Entropy::Os => {
                if rand::rngs::SysRng.try_fill_bytes(&mut bytes).is_err() {
                    bytes = [0; 16];
                }
                let mixed = u128::from_le_bytes(bytes) ^ rand::rng().random::<u128>();
                bytes = mixed.to_le_bytes();
            }
            Entropy::Custom(env) => env.fill(&mut bytes),
        }
        identity(bytes)
    }

    /// One delay of `backoff`, uniformly in its range.
    pub(crate) fn jitter(&self, backoff: &Backoff) -> Duration {
        match self {
            Entropy::Os => backoff.jitter(&mut rand::rng()),
            Entropy::Custom(env) => backoff.jitter(&mut EnvRng(env.as_ref())),
        }
    }

    /// A number drawn uniformly from `low..=high`.
    pub(crate) fn between(&self, low: u64, high: u64) -> u64 {
        match self {
            Entropy::Os => rand::rng().random_range(low..=high),
            Entropy::Custom(env) => EnvRng(env.as_ref()).random_range(low..=high),
        }
    }

    /// Milliseconds since the Unix epoch, on the wall clock (a fair ticket's place in the queue).
    pub(crate) fn wall_ms(&self) -> u64 {
        match self {
            Entropy::Os => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
                .unwrap_or_default(),
            Entropy::Custom(env) => env.wall_clock_ms(),
        }
    }
}

/// 128 random bits as a version-4 UUID.
fn uuid(bytes: [u8; 16]) -> uuid::Uuid {
    uuid::Builder::from_random_bytes(bytes).into_uuid()
}

/// 128 random bits as a version-4 UUID in its simple form: 32 lowercase hex digits.
fn identity(bytes: [u8; 16]) -> String {
    uuid(bytes).simple().to_string()
}

/// An application's environment as a generator.
struct EnvRng<'a>(&'a dyn Environment);

impl TryRng for EnvRng<'_> {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        let mut bytes = [0u8; 4];
        self.0.fill(&mut bytes);
        Ok(u32::from_le_bytes(bytes))
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        let mut bytes = [0u8; 8];
        self.0.fill(&mut bytes);
        Ok(u64::from_le_bytes(bytes))
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), Infallible> {
        self.0.fill(dest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::sync::Mutex;

    #[test]
    fn tokens_are_128_bit_hex_uuids_and_distinct() {
        let tokens: HashSet<Arc<str>> = (0..1000).map(|_| Entropy::Os.token().expect("token")).collect();
        assert_eq!(tokens.len(), 1000);
        for t in &tokens {
            assert_eq!(t.len(), 32);
            assert!(t.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
            let parsed = uuid::Uuid::parse_str(t).expect("a uuid");
            assert_eq!(parsed.get_version_num(), 4);
        }
        let ids: HashSet<String> = (0..1000).map(|_| Entropy::Os.id()).collect();
        assert_eq!(ids.len(), 1000);
    }

    /// A counter for bytes: the same environment gives the same identities and jitter.
    struct Counting(Mutex<u8>);

    impl Environment for Counting {
        fn fill(&self, bytes: &mut [u8]) {
            let mut next = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            for b in bytes {
                *b = *next;
                *next = next.wrapping_add(1);
            }
        }

        fn wall_clock_ms(&self) -> u64 {
            42
        }
    }

    #[test]
    fn an_environment_of_our_own_gives_the_same_draws_every_time() {
        let draws = || {
            let env = Entropy::Custom(Arc::new(Counting(Mutex::new(0))));
            let backoff = Backoff::new(Duration::from_millis(100), Duration::from_millis(50)).expect("valid");
            (
                env.token().expect("token"),
                env.id(),
                env.jitter(&backoff),
                env.between(1, 1000),
                env.wall_ms(),
            )
        };
        assert_eq!(draws(), draws());
        assert_eq!(draws().4, 42);
    }
}
