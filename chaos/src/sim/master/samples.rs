//! The generator a master draws its eviction samples from, in a file of its own because both the
//! server state (which owns one) and the eviction (`memory.rs`, which reads the server) need it:
//! kept in either, the two would import each other.

/// The master's own generator for eviction samples: SplitMix64 over its configured seed, so the
/// keys a seed evicts are fixed by the seed.
#[derive(Debug, Clone)]
pub(crate) struct Samples {
    state: u64,
}

impl Samples {
    pub(crate) fn new(seed: u64) -> Samples {
        // Apart from the run ids' sequence, which starts from the same seed.
        Samples {
            state: seed ^ 0x5EED_E71C_7104_0000,
        }
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z % n.max(1) as u64) as usize
    }
}
