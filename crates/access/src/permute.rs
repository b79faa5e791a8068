//! A seeded bijection of `[0, n)`: the scattered layout's shuffle.
//!
//! A Feistel network permutes the `2b`-bit numbers for any round function, so it is a
//! bijection of `[0, 4^b)` whatever the keys; `4^b` is the smallest power of four (an even
//! number of bits, so the two halves have equal width) at or above `n`. Numbers at or above `n`
//! are pushed through the network again ("cycle walking") until they land below `n`: following
//! the permutation's cycle from a start below `n` must come back below `n`, so this ends, and it
//! restricts the bijection of `[0, 4^b)` to a bijection of `[0, n)`. As `4^b < 4n`, fewer than 4
//! passes are needed on average.
//!
//! Four rounds with pseudo-random round functions make a permutation that looks random
//! (Luby–Rackoff); a storage shuffle needs no more.

use crate::rng::{mix64, splitmix64};

const ROUNDS: usize = 4;

/// Kept apart from other uses of the seed, so the permutation does not echo another stream
/// drawn from the same seed.
const DOMAIN: u64 = 0x7065_726d_7574_6531; // "permute1"

#[derive(Debug, Clone)]
pub(crate) struct Permutation {
    n: u64,
    /// Width of each half, in bits (1 to 32).
    half: u32,
    mask: u64,
    keys: [u64; ROUNDS],
}

impl Permutation {
    /// The permutation of `[0, n)` for this seed; `n` >= 1 (0 is treated as 1).
    pub(crate) fn new(n: u64, seed: u64) -> Self {
        let n = n.max(1);
        // Bits to number n - 1, rounded up to an even count of at least 2.
        let bits = (64 - (n - 1).leading_zeros()).max(2);
        let half = bits.div_ceil(2);
        // The size takes part in the keys: working sets of other sizes get unrelated shuffles.
        let mut state = seed ^ mix64(n ^ DOMAIN);
        let keys = std::array::from_fn(|_| splitmix64(&mut state));
        Permutation { n, half, mask: (1u64 << half) - 1, keys }
    }

    /// π(x) for x in `[0, n)`. (An x outside is first reduced modulo n: a walk from it might
    /// never come back below n.)
    #[inline]
    pub(crate) fn apply(&self, x: u64) -> u64 {
        let mut y = if x < self.n { x } else { x % self.n };
        loop {
            y = self.forward(y);
            if y < self.n {
                return y;
            }
        }
    }

    /// π⁻¹(y): the position whose image is y.
    pub(crate) fn invert(&self, y: u64) -> u64 {
        let mut x = if y < self.n { y } else { y % self.n };
        loop {
            x = self.backward(x);
            if x < self.n {
                return x;
            }
        }
    }

    #[inline]
    fn round(&self, key: u64, half: u64) -> u64 {
        mix64(half ^ key) & self.mask
    }

    #[inline]
    fn forward(&self, x: u64) -> u64 {
        let (mut left, mut right) = (x >> self.half, x & self.mask);
        for &key in &self.keys {
            (left, right) = (right, left ^ self.round(key, right));
        }
        (left << self.half) | right
    }

    fn backward(&self, y: u64) -> u64 {
        let (mut left, mut right) = (y >> self.half, y & self.mask);
        for &key in self.keys.iter().rev() {
            (left, right) = (right ^ self.round(key, left), left);
        }
        (left << self.half) | right
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hit_once_each(n: u64, seed: u64) -> Result<(), TestCaseError> {
        let p = Permutation::new(n, seed);
        let mut seen = vec![false; n as usize];
        for x in 0..n {
            let y = p.apply(x);
            prop_assert!(y < n, "π({x}) = {y} >= {n}");
            prop_assert!(!seen[y as usize], "{y} hit twice (n = {n}, seed = {seed})");
            seen[y as usize] = true;
            prop_assert_eq!(p.invert(y), x);
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        #[test]
        fn is_a_bijection(n in 1u64..100_000, seed in any::<u64>()) {
            hit_once_each(n, seed)?;
        }
    }

    #[test]
    fn small_and_power_of_four_sizes_are_bijections() {
        for n in [1, 2, 3, 4, 5, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1 << 12] {
            hit_once_each(n, 42).unwrap();
        }
    }

    #[test]
    fn huge_sizes_stay_in_range_and_invert() {
        for n in [(1u64 << 40) + 7, (1 << 63) + 1, u64::MAX] {
            let p = Permutation::new(n, 9);
            for x in [0, 1, n / 2, n - 2, n - 1] {
                let y = p.apply(x);
                assert!(y < n);
                assert_eq!(p.invert(y), x);
            }
        }
    }

    #[test]
    fn seed_decides_the_shuffle() {
        let (a, b, c) = (Permutation::new(1000, 1), Permutation::new(1000, 1), Permutation::new(1000, 2));
        let image = |p: &Permutation| (0..1000).map(|x| p.apply(x)).collect::<Vec<_>>();
        assert_eq!(image(&a), image(&b));
        assert_ne!(image(&a), image(&c));
        // It really shuffles: few positions stay in place (about 1 expected).
        assert!(image(&a).iter().enumerate().filter(|&(x, &y)| x as u64 == y).count() < 10);
    }
}
