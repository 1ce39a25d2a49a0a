//! Random identities: lock tokens, reentrant lock owners and fair-queue tickets.
//!
//! Each must be unique among the processes that use the same masters: a release or an extend acts
//! on whatever key holds its token, and a reentrant hold re-enters whatever lock holds its owner.
//! So every identity takes its bits from the OS's generator at the moment it is made. A generator
//! kept in the process (a pool of OS bytes, or a seeded generator such as `rand`'s thread-local
//! one) is copied into a child by `fork`, and parent and child would then hand out the same
//! identities. Noticing a fork without a system call needs `pthread_atfork`, which this crate's
//! `forbid(unsafe_code)` rules out, and a client can keep working in a forked child (a
//! single-threaded runtime is copied whole, and its connections reconnect), so the one system call
//! per identity stays.

use std::sync::Arc;

use rand::{Rng, TryRngCore};

use crate::error::AcquireError;

/// A lock token: 128 bits from the OS, as 32 lowercase hex digits, in the one allocation the lock
/// and its guard then share. Fails only when the OS cannot supply randomness.
pub(crate) fn new_token() -> Result<Arc<str>, AcquireError> {
    let mut bytes = [0u8; 16];
    rand::rngs::OsRng
        .try_fill_bytes(&mut bytes)
        .map_err(|e| AcquireError::Rng(e.to_string()))?;
    Ok(Arc::from(Hex::of(u128::from_be_bytes(bytes)).as_str()))
}

/// 128 bits as 32 lowercase hex digits, written on the stack: every identity's text form.
pub(crate) struct Hex([u8; 32]);

impl Hex {
    pub(crate) fn of(bits: u128) -> Self {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut hex = [0u8; 32];
        for (i, digit) in hex.iter_mut().enumerate() {
            let nibble = (bits >> (4 * (31 - i))) & 0xf;
            *digit = DIGITS[nibble as usize];
        }
        Self(hex)
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII digits and letters were written.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// 128 random bits for an identity made by an infallible constructor (a lock owner, a ticket).
///
/// The OS's bits, mixed with the thread-local generator's: the mix is as unpredictable as either
/// part, and differs between a parent and its forked child because the OS's part does. Only if the
/// OS cannot supply randomness (it always can once a Linux system has booted) does the mix fall back
/// to the thread-local generator alone, whose state a forked child shares.
pub(crate) fn fresh_id() -> u128 {
    let mut os = [0u8; 16];
    let from_os = match rand::rngs::OsRng.try_fill_bytes(&mut os) {
        Ok(()) => u128::from_le_bytes(os),
        Err(_) => 0,
    };
    from_os ^ rand::rng().random::<u128>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn tokens_are_128_bit_hex_and_distinct() {
        let tokens: HashSet<Arc<str>> = (0..1000).map(|_| new_token().expect("token")).collect();
        assert_eq!(tokens.len(), 1000);
        for t in &tokens {
            assert_eq!(t.len(), 32);
            assert!(t.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
        }
    }

    #[test]
    fn hex_is_the_bits_in_order_with_leading_zeros() {
        assert_eq!(Hex::of(0).as_str(), "0".repeat(32));
        assert_eq!(Hex::of(0xabc).as_str(), format!("{:032x}", 0xabc));
        let bits = 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210_u128;
        assert_eq!(Hex::of(bits).as_str(), format!("{bits:032x}"));
    }

    #[test]
    fn fresh_ids_are_distinct() {
        let ids: HashSet<u128> = (0..1000).map(|_| fresh_id()).collect();
        assert_eq!(ids.len(), 1000);
    }
}
