//! Exact zipf draws by rejection-inversion, and the normalising constant for probabilities.
//!
//! Ranks are k = 1..n here (the crate's rank is k - 1), with weight `h(k) = k^-θ`. The method
//! of Hörmann and Derflinger (1996) covers the ranks with a continuous "hat": rank k >= 2 owns
//! the interval `[k - ½, k + ½)` under the curve `h(x) = x^-θ`, whose area is at least `h(k)`
//! because h is convex. A point is drawn uniformly in the total area by inverting the
//! integral `H` of `h`; it belongs to rank `k = round(x)` and is kept when it lies in the last
//! `h(k)` of that rank's area, so each rank is kept with probability exactly proportional to
//! `h(k)`. Rank 1 is given an area of exactly `h(1)` just below `H(1.5)`, so it is always kept.
//! Nearly all draws are kept on the first try, with no table, for any θ > 0 and any n.

use crate::numeric::{Sum, expm1_ratio, ln1p_ratio};
use crate::rng::unit;
use std::sync::OnceLock;

/// Draws rejected this many times in a row only happen if the floating point has gone wrong;
/// the sampler then settles for the hottest rank instead of looping.
const MAX_TRIES: u32 = 1000;

/// Above θ = 1 + this, `H` drops its constant term. Below it, `x^(1-θ) >= 2^-6.4` for every x
/// up to 2^64, so the subtraction from 1 costs at most 7 bits.
const POWER_FORM_MARGIN: f64 = 0.1;

/// Up to this many ranks the normalising sum is added term by term; beyond, Euler–Maclaurin
/// replaces the tail.
pub(crate) const EXACT_TERMS: u64 = 1 << 20;

#[derive(Debug, Clone)]
pub(crate) struct Zipf {
    n: u64,
    theta: f64,
    /// 1 - θ, the exponent of the hat's integral.
    q: f64,
    /// Whether `H` is taken as `x^(1-θ)/(1-θ)` rather than `(x^(1-θ) - 1)/(1-θ)` (see
    /// `hat_integral`).
    power_form: bool,
    /// `H(1.5) - h(1)`: where rank 1's area starts, the low end of the draws.
    area_low: f64,
    /// `H(n + ½)`: the high end of the draws.
    area_high: f64,
    /// A draw at `x >= k - squeeze` is inside rank k's kept area: accept without computing H.
    squeeze: f64,
    /// Σ k^-θ over the n ranks, computed on the first call to `probability`: draws never need
    /// it, and it costs up to a million powers.
    norm: OnceLock<f64>,
}

impl Zipf {
    pub(crate) fn new(theta: f64, n: u64) -> Self {
        let mut z = Zipf {
            n,
            theta,
            q: 1.0 - theta,
            power_form: theta > 1.0 + POWER_FORM_MARGIN,
            area_low: 0.0,
            area_high: 0.0,
            squeeze: 0.0,
            norm: OnceLock::new(),
        };
        z.area_low = z.hat_integral(1.5) - 1.0;
        z.area_high = z.hat_integral(n as f64 + 0.5);
        // The squeeze is set so that rank 2's kept area starts at x = 2 - squeeze; for larger
        // ranks the kept share of a rank's interval only grows (checked in the tests).
        z.squeeze = 2.0 - z.hat_integral_inverse(z.hat_integral(2.5) - z.hat(2.0));
        z
    }

    /// `h(x) = x^-θ`.
    #[inline]
    fn hat(&self, x: f64) -> f64 {
        (-self.theta * x.ln()).exp()
    }

    /// An integral `H` of `h` (the method only uses differences of H and its inverse, so the
    /// constant is free). Near θ = 1, `(x^(1-θ) - 1)/(1-θ)`, written so it stays exact through
    /// θ = 1 (where it is ln x). For larger θ that form tends to 1/(θ-1) and its inverse loses
    /// the digits of large x in the subtraction from 1; `x^(1-θ)/(1-θ)` tends to 0 instead and
    /// keeps them.
    #[inline]
    fn hat_integral(&self, x: f64) -> f64 {
        let log = x.ln();
        if self.power_form { (self.q * log).exp() / self.q } else { log * expm1_ratio(self.q * log) }
    }

    /// `H⁻¹`: `(1 + (1-θ)·y)^(1/(1-θ))` (e^y at θ = 1), or `((1-θ)·y)^(1/(1-θ))`.
    #[inline]
    fn hat_integral_inverse(&self, y: f64) -> f64 {
        if self.power_form {
            // (1-θ)·y > 0 here; rounding to 0 or below means x = ∞, which the caller clamps.
            ((self.q * y).max(0.0).ln() / self.q).exp()
        } else {
            // Rounding may push (1-θ)·y just below -1, where the power is undefined: x = 0.
            let t = (self.q * y).max(-1.0);
            (y * ln1p_ratio(t)).exp()
        }
    }

    /// A rank in [0, n), 0 the hottest.
    #[inline]
    pub(crate) fn sample(&self, rand: &mut impl FnMut() -> u64) -> u64 {
        let nf = self.n as f64;
        for _ in 0..MAX_TRIES {
            let u = self.area_high + unit(rand) * (self.area_low - self.area_high);
            let x = self.hat_integral_inverse(u);
            let k = (x + 0.5).floor().clamp(1.0, nf);
            if k - x <= self.squeeze || u >= self.hat_integral(k + 0.5) - self.hat(k) {
                // The cast saturates (and maps NaN to 0); the clamp keeps the rank below n even
                // where n itself is not a double.
                return (k as u64).clamp(1, self.n.max(1)) - 1;
            }
        }
        0
    }

    /// Probability of rank `r` (0 the hottest).
    pub(crate) fn probability(&self, rank: u64) -> f64 {
        if rank >= self.n {
            return 0.0;
        }
        self.hat(rank as f64 + 1.0) / self.norm()
    }

    /// The normalising constant, `H(n, θ) = Σ_{k=1..n} k^-θ`.
    pub(crate) fn norm(&self) -> f64 {
        *self.norm.get_or_init(|| harmonic(self.n, self.theta))
    }
}

/// The generalized harmonic number `H(n, θ) = Σ_{k=1..n} k^-θ`: exact summation up to
/// `EXACT_TERMS` terms, Euler–Maclaurin past them.
pub(crate) fn harmonic(n: u64, theta: f64) -> f64 {
    if n <= EXACT_TERMS { power_sum(1, n, theta) } else { euler_maclaurin(n, theta, EXACT_TERMS) }
}

/// Σ_{k=from..=to} k^-θ, smallest terms first and compensated, so the many small terms are not
/// rounded away against the large ones.
fn power_sum(from: u64, to: u64, theta: f64) -> f64 {
    let mut sum = Sum::default();
    for k in (from..=to).rev() {
        sum.add((-theta * (k as f64).ln()).exp());
    }
    sum.value()
}

/// `H(n, θ)` as the exact sum of the first `m - 1` terms plus the Euler–Maclaurin formula for
/// Σ_{k=m..n} f(k), f(x) = x^-θ:
/// `∫ₘⁿ f + (f(m) + f(n))/2 + Σ_j B₂ⱼ/(2j)!·(f⁽²ʲ⁻¹⁾(n) − f⁽²ʲ⁻¹⁾(m))`, to j = 3.
/// The first omitted term is about θ⁷/(1.2e6·m^(θ+7)): nothing at m = 2^20.
pub(crate) fn euler_maclaurin(n: u64, theta: f64, m: u64) -> f64 {
    let head = power_sum(1, m - 1, theta);
    let (mf, nf) = (m as f64, n as f64);
    let q = 1.0 - theta;
    let power = |x: f64, e: f64| (e * x.ln()).exp();
    // ∫ₘⁿ x^-θ dx = m^(1-θ)·((n/m)^(1-θ) - 1)/(1-θ), exact through θ = 1.
    let span = nf.ln() - mf.ln();
    let integral = power(mf, q) * span * expm1_ratio(q * span);
    let ends = 0.5 * (power(mf, -theta) + power(nf, -theta));
    // f^(2j-1)(x) = -θ(θ+1)…(θ+2j-2)·x^(-θ-2j+1).
    let c1 = -theta;
    let c3 = c1 * (theta + 1.0) * (theta + 2.0);
    let c5 = c3 * (theta + 3.0) * (theta + 4.0);
    let diff = |c: f64, e: f64| c * (power(nf, e) - power(mf, e));
    let corrections = diff(c1, -theta - 1.0) / 12.0 - diff(c3, -theta - 3.0) / 720.0 + diff(c5, -theta - 5.0) / 30240.0;
    let mut sum = Sum::default();
    for part in [corrections, ends, integral, head] {
        sum.add(part);
    }
    sum.value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squeeze_never_accepts_outside_the_kept_area() {
        // Quick acceptance at x >= k - squeeze must imply H(x) >= H(k + ½) - h(k): it must hold
        // for every rank, not only rank 2 where the squeeze is computed.
        for theta in [1e-6, 0.3, 0.8, 1.0, 1.2, 2.0, 5.0, 10.0] {
            let z = Zipf::new(theta, 1 << 40);
            assert!(z.squeeze > 0.0 && z.squeeze <= 0.5, "θ {theta}: squeeze {}", z.squeeze);
            let ranks = (2..20_000u64).chain((1..40).map(|j| 1u64 << j));
            for k in ranks {
                let kf = k as f64;
                let start = z.hat_integral(kf - z.squeeze);
                let kept = z.hat_integral(kf + 0.5) - z.hat(kf);
                assert!(start >= kept - 1e-12 * kept.abs(), "θ {theta} k {k}: {start} < {kept}");
            }
        }
    }

    #[test]
    fn inverse_undoes_the_integral() {
        for theta in [1e-6, 0.5, 1.0, 1.0 + 1e-9, 1.05, 1.1, 1.1 + 1e-12, 1.5, 3.0, 10.0] {
            let z = Zipf::new(theta, 100);
            for x in [0.6, 1.0, 1.5, 2.5, 77.0, 1e6, 1e18] {
                let back = z.hat_integral_inverse(z.hat_integral(x));
                assert!((back - x).abs() <= 1e-9 * x, "θ {theta} x {x}: {back}");
            }
        }
    }

    #[test]
    fn euler_maclaurin_matches_the_exact_sum() {
        // At 2·10^6 ranks both ways are available: the exact sum of all terms, and the
        // Euler–Maclaurin tail past 2^20 that `harmonic` uses for larger n.
        let n = 2_000_000;
        for theta in [0.5, 0.8, 1.0, 1.2, 3.0] {
            let exact = power_sum(1, n, theta);
            let em = harmonic(n, theta);
            assert!((em - exact).abs() <= 1e-13 * exact, "θ {theta}: {em} vs {exact}");
            // A short head exercises the correction terms harder.
            let short = euler_maclaurin(n, theta, 50);
            assert!((short - exact).abs() <= 1e-12 * exact, "θ {theta}: {short} vs {exact}");
        }
    }

    #[test]
    fn euler_maclaurin_probabilities_sum_to_one_at_ten_million() {
        let n = 10_000_000;
        let z = Zipf::new(1.2, n);
        let mut sum = Sum::default();
        (0..n).for_each(|r| sum.add(z.probability(r)));
        assert!((sum.value() - 1.0).abs() < 1e-9, "{}", sum.value());
    }

    #[test]
    fn harmonic_one_is_the_ordinary_harmonic_number() {
        assert!((harmonic(4, 1.0) - 25.0 / 12.0).abs() < 1e-15);
        // H(n) = ln n + γ + 1/2n - 1/12n² + …
        let n = 1u64 << 30;
        let nf = n as f64;
        let asymptotic = nf.ln() + 0.577_215_664_901_532_9 + 0.5 / nf - 1.0 / (12.0 * nf * nf);
        assert!((harmonic(n, 1.0) - asymptotic).abs() < 1e-13 * asymptotic);
    }

    #[test]
    fn hot_share_quoted_in_the_crate_doc() {
        // "With a million positions, the hottest 1 % get about 36 %, 68 %, 91 %."
        let share = |theta: f64| harmonic(10_000, theta) / harmonic(1_000_000, theta);
        for (theta, quoted) in [(0.8, 0.36), (1.0, 0.68), (1.2, 0.91)] {
            assert!((share(theta) - quoted).abs() < 0.005, "θ {theta}: {}", share(theta));
        }
    }

    #[test]
    fn samples_stay_in_range_at_the_extremes() {
        let mut state = 3;
        let mut rand = || crate::rng::splitmix64(&mut state);
        for (theta, n) in [(1e-9, 1u64), (10.0, 2), (1.0, 3), (0.5, (1 << 63) - 1), (1.0, u64::MAX), (10.0, u64::MAX)] {
            let z = Zipf::new(theta, n);
            for _ in 0..10_000 {
                assert!(z.sample(&mut rand) < n);
            }
        }
    }
}
