//! Turning the caller's uniform 64-bit numbers into what the laws need: doubles in [0, 1) or
//! (0, 1], and unbiased integers below a bound. Also the 64-bit mixer the permutation's keys and
//! rounds use.

/// 2^-53: the spacing of the doubles built from the top 53 bits of a draw.
const UNIT: f64 = 1.0 / (1u64 << 53) as f64;

/// A uniform double in [0, 1), from the top 53 bits (every value a multiple of 2^-53).
#[inline]
pub(crate) fn unit(rand: &mut impl FnMut() -> u64) -> f64 {
    (rand() >> 11) as f64 * UNIT
}

/// A uniform double in (0, 1]: for logarithms, which must never see 0.
#[inline]
pub(crate) fn unit_open_zero(rand: &mut impl FnMut() -> u64) -> f64 {
    ((rand() >> 11) + 1) as f64 * UNIT
}

/// A uniform integer in [0, n), without the bias of `rand() % n`: the product of a draw and `n`
/// spreads 2^64 draws over `n` buckets of 2^64/n draws; the few leftover draws that would favour
/// some buckets are redrawn (Lemire's method), which costs the division only on the rare draws
/// that land near a bucket edge. `n` = 0 gives 0 rather than dividing by zero.
#[inline]
pub(crate) fn below(rand: &mut impl FnMut() -> u64, n: u64) -> u64 {
    if n <= 1 {
        return 0;
    }
    let mut product = u128::from(rand()) * u128::from(n);
    if (product as u64) < n {
        let threshold = n.wrapping_neg() % n;
        while (product as u64) < threshold {
            product = u128::from(rand()) * u128::from(n);
        }
    }
    (product >> 64) as u64
}

/// A bijective 64-bit mixer (the finaliser of splitmix64): flips about half the output bits
/// for any one input bit.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The next number of a splitmix64 sequence: a Weyl step through the mixer.
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    mix64(*state)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut state = 1;
        let mut rand = || splitmix64(&mut state);
        let mut seen = [0u32; 7];
        for _ in 0..7000 {
            seen[below(&mut rand, 7) as usize] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800 && c < 1200), "{seen:?}");
        assert_eq!(below(&mut rand, 0), 0);
        assert_eq!(below(&mut rand, 1), 0);
        for _ in 0..1000 {
            assert!(below(&mut rand, u64::MAX) < u64::MAX);
        }
    }

    #[test]
    fn below_redraws_the_biased_leftovers() {
        // With n = 3·2^62, 2^64 mod n = 2^62: draws whose low product part is below that are
        // redrawn. Feed one such draw first and check the second one is used.
        let n = 3u64 << 62;
        let mut feed = [0u64, u64::MAX].into_iter();
        let mut rand = || feed.next().unwrap_or(0);
        assert_eq!(below(&mut rand, n), ((u128::from(u64::MAX) * u128::from(n)) >> 64) as u64);
    }

    #[test]
    fn units_stay_in_their_intervals() {
        let mut max = || u64::MAX;
        let mut zero = || 0;
        assert!(unit(&mut max) < 1.0);
        assert_eq!(unit(&mut zero), 0.0);
        assert_eq!(unit_open_zero(&mut max), 1.0);
        assert!(unit_open_zero(&mut zero) > 0.0);
    }
}
