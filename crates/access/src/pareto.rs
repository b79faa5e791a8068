//! fio's pareto law, ranked so that rank 0 is the hottest position.
//!
//! fio draws `v = floor(n·u^p)` with `u` uniform in [0, 1) and `p = ln(h)/ln(1-h)`. Then
//! `v/n` has the distribution function `F(x) = P(u^p < x) = x^(1/p)` on [0, 1], so value `j` has
//! probability `F((j+1)/n) - F(j/n)`. For p >= 1 (h <= ½) the small values are the hot ones;
//! for p < 1 the large ones are, and the rank counts from the top.

use crate::rng::unit;

#[derive(Debug, Clone)]
pub(crate) struct Pareto {
    n: u64,
    /// fio's exponent, ln(h)/ln(1-h).
    p: f64,
    /// 1/p, the exponent of the distribution function.
    q: f64,
    /// Whether the hot end is v = 0 (p >= 1).
    hot_low: bool,
}

impl Pareto {
    /// `h` in (0, 1); `n` >= 1.
    pub(crate) fn new(h: f64, n: u64) -> Self {
        let p = h.ln() / (-h).ln_1p();
        Pareto { n, p, q: 1.0 / p, hot_low: p >= 1.0 }
    }

    /// A rank in [0, n), 0 the hottest.
    #[inline]
    pub(crate) fn sample(&self, rand: &mut impl FnMut() -> u64) -> u64 {
        let last = self.n.saturating_sub(1);
        // u < 1, so n·u^p < n; the min guards the rounding of the product (and the cast
        // saturates), so v stays a valid position.
        let v = ((self.n as f64 * unit(rand).powf(self.p)).floor() as u64).min(last);
        if self.hot_low { v } else { last - v }
    }

    /// Probability of rank `r`.
    pub(crate) fn probability(&self, rank: u64) -> f64 {
        if rank >= self.n {
            return 0.0;
        }
        let j = if self.hot_low { rank } else { self.n - 1 - rank };
        let upper = ((j as f64 + 1.0) / self.n as f64).powf(self.q);
        if j == 0 {
            return upper;
        }
        // F(b) - F(a) = F(b)·(1 - (a/b)^q) with a/b = j/(j+1): no cancellation between two
        // nearly equal values, and no overflow when q is huge.
        upper * -(-self.q * (1.0 / j as f64).ln_1p()).exp_m1()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::numeric::Sum;

    #[test]
    fn shares_follow_the_pareto_rule() {
        // A share max(h, 1-h) of the accesses on the hottest min(h, 1-h) of the positions.
        let n = 100_000u64;
        for h in [0.9, 0.8, 0.2, 0.1, 0.7] {
            let law = Pareto::new(h, n);
            let hot = (h.min(1.0 - h) * n as f64) as u64;
            let mut share = Sum::default();
            (0..hot).for_each(|r| share.add(law.probability(r)));
            assert!((share.value() - h.max(1.0 - h)).abs() < 1e-4, "h {h}: {}", share.value());
        }
    }

    #[test]
    fn probabilities_sum_to_one_even_at_the_extremes() {
        for h in [1e-300, 0.01, 0.5, 0.9, 1.0 - 1e-16] {
            for n in [1u64, 2, 7, 1000] {
                let law = Pareto::new(h, n);
                let mut sum = Sum::default();
                (0..n).for_each(|r| sum.add(law.probability(r)));
                assert!((sum.value() - 1.0).abs() < 1e-12, "h {h} n {n}: {}", sum.value());
                assert!((0..n).all(|r| law.probability(r).is_finite()));
            }
        }
    }

    #[test]
    fn rank_zero_is_the_hottest() {
        for h in [0.1, 0.3, 0.7, 0.95] {
            let law = Pareto::new(h, 1000);
            assert!(law.probability(0) >= law.probability(1));
            assert!(law.probability(1) >= law.probability(500));
            assert!(law.probability(500) >= law.probability(999));
        }
    }
}
