//! Lock tokens: 128 bits of OS randomness each, drawn from a small pool that each client refills
//! from the OS a few hundred bytes at a time.
//!
//! A token only has to be unique among the holders of a key; it is taken from the OS's generator,
//! not from a seeded one, so that no two processes can ever share a generator's state. Asking the
//! OS for 16 bytes per lock cost one system call per acquire, on the path every lock waits on;
//! the pool makes that one call per [`POOL`] / 16 locks.
//!
//! The pool belongs to one client (one [`crate::Quorlock`]), never to the process: that is what
//! keeps tokens unique across `fork`. A forked child holds a copy of the parent's unused bytes, so
//! a client that drew from them in both processes would hand the same token to two holders. But a
//! client cannot work in both processes after a fork anyway: its connections are sockets shared
//! with the parent, and the tasks that drive them live in the parent's runtime. A child that locks
//! builds a client of its own, and with it a fresh pool.

use std::sync::{Arc, Mutex, PoisonError};

use rand::TryRngCore;

use crate::error::AcquireError;

/// Bytes of OS randomness fetched at a time: 32 tokens.
const POOL: usize = 512;

/// Bytes of randomness in one token.
const TOKEN_BYTES: usize = 16;

/// The token source of one client.
#[derive(Debug)]
pub(crate) struct Tokens {
    pool: Mutex<Pool>,
}

#[derive(Debug)]
struct Pool {
    bytes: [u8; POOL],
    /// How many of `bytes` were handed out already; `POOL` when the pool must be refilled.
    used: usize,
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens {
            pool: Mutex::new(Pool {
                bytes: [0; POOL],
                used: POOL,
            }),
        }
    }
}

impl Tokens {
    /// A fresh token: 128 bits as 32 lowercase hex digits, in the one allocation the lock and its
    /// guard then share. Fails only when the OS cannot supply randomness.
    pub(crate) fn next(&self) -> Result<Arc<str>, AcquireError> {
        let bytes = self.take()?;
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0u8; 2 * TOKEN_BYTES];
        for (pair, b) in hex.chunks_exact_mut(2).zip(bytes) {
            pair[0] = HEX[usize::from(b >> 4)];
            pair[1] = HEX[usize::from(b & 0x0f)];
        }
        let token = std::str::from_utf8(&hex).map_err(|e| AcquireError::Rng(e.to_string()))?;
        Ok(Arc::from(token))
    }

    /// The next unused 16 bytes of the pool, refilling it first when it is spent. Bytes handed out
    /// are never handed out again.
    fn take(&self) -> Result<[u8; TOKEN_BYTES], AcquireError> {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        if pool.used + TOKEN_BYTES > POOL {
            rand::rngs::OsRng
                .try_fill_bytes(&mut pool.bytes)
                .map_err(|e| AcquireError::Rng(e.to_string()))?;
            pool.used = 0;
        }
        let start = pool.used;
        let mut out = [0u8; TOKEN_BYTES];
        out.copy_from_slice(&pool.bytes[start..start + TOKEN_BYTES]);
        pool.used = start + TOKEN_BYTES;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tokens_are_128_bit_hex_and_never_repeat_across_refills() {
        let tokens = Tokens::default();
        let mut seen = HashSet::new();
        // Several refills' worth.
        for _ in 0..(5 * POOL / TOKEN_BYTES + 3) {
            let t = tokens.next().expect("token");
            assert_eq!(t.len(), 32);
            assert!(t.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
            assert!(seen.insert(t), "a token repeated");
        }
    }

    #[test]
    fn two_clients_draw_different_tokens() {
        let (a, b) = (Tokens::default(), Tokens::default());
        let from_a: HashSet<_> = (0..64).map(|_| a.next().expect("token")).collect();
        assert!((0..64).all(|_| !from_a.contains(&b.next().expect("token"))));
    }
}
