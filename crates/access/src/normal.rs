//! The normal law on the circle of positions, and the error function it needs.
//!
//! A draw is `floor(μ + s·z)` taken modulo `n`, with `z` standard normal, `μ` the centre and `s`
//! the standard deviation in positions. Position `i` therefore collects the probability of every
//! interval `[i + k·n, i + 1 + k·n)` of the real line, one per wrap `k`.

use crate::numeric::Sum;
use crate::rng::{unit, unit_open_zero};
use std::f64::consts::{FRAC_2_SQRT_PI, PI, SQRT_2};

/// The normal law on `[0, n)`.
#[derive(Debug)]
pub(crate) struct Normal {
    n: u64,
    /// Mean, in positions.
    mu: f64,
    /// Standard deviation, in positions.
    s: f64,
    /// Box–Muller makes two independent values per pair of draws; the second waits here.
    spare: Option<f64>,
}

/// A clone starts without the spare value: clones handed to separate streams must not all
/// begin with the same pending draw.
impl Clone for Normal {
    fn clone(&self) -> Self {
        Normal { spare: None, ..*self }
    }
}

impl Normal {
    /// `sigma_pct` in percent of `n`, `centre` a share of `n`.
    pub(crate) fn new(sigma_pct: f64, centre: f64, n: u64) -> Self {
        let nf = n as f64;
        Normal { n, mu: centre * nf, s: sigma_pct / 100.0 * nf, spare: None }
    }

    #[inline]
    pub(crate) fn sample(&mut self, rand: &mut impl FnMut() -> u64) -> u64 {
        let z = match self.spare.take() {
            Some(z) => z,
            None => {
                let (z, spare) = box_muller(rand);
                self.spare = Some(spare);
                z
            }
        };
        // |z| < 8.6 (from 53-bit uniforms), so x is within about ±9.6·n and fits an i128
        // exactly; the float-to-int cast saturates and maps NaN to 0, so nothing can panic.
        let x = (self.mu + self.s * z).floor() as i128;
        x.rem_euclid(i128::from(self.n)) as u64
    }

    /// Probability of position `i`: the normal mass of every wrap `[i + k·n, i + 1 + k·n)`.
    pub(crate) fn probability(&self, i: u64) -> f64 {
        let nf = self.n as f64;
        let width = 1.0 / self.s;
        let start = |k: f64| (i as f64 + k * nf - self.mu) / self.s;
        // The wrap whose interval is nearest the mean carries the most; the others fall off
        // monotonically on each side (they lie wholly above or below the mean), so each side
        // stops at the first term too small to count.
        let k0 = ((self.mu - i as f64 - 0.5) / nf).round();
        let mut sum = Sum::default();
        sum.add(mass(start(k0), width));
        for direction in [1.0, -1.0] {
            for step in 1..=MAX_WRAPS {
                let term = mass(start(k0 + direction * f64::from(step)), width);
                sum.add(term);
                if term <= sum.value() * 1e-18 {
                    break;
                }
            }
        }
        sum.value()
    }
}

/// A bound on wraps summed per side; with σ <= 100 % of n, wraps past ±40 carry e^-800 = 0.
const MAX_WRAPS: u32 = 64;

/// Two independent standard normal values from two uniforms (Box–Muller): a radius from the
/// exponential law of `r²/2` and a uniform angle.
#[inline]
fn box_muller(rand: &mut impl FnMut() -> u64) -> (f64, f64) {
    let radius = (-2.0 * unit_open_zero(rand).ln()).sqrt();
    let (sin, cos) = (2.0 * PI * unit(rand)).sin_cos();
    (radius * cos, radius * sin)
}

/// `erfc(x) = 1 - erf(x)`, to about 1e-15 relative for x < 2.5 and 1e-15 beyond (where the
/// value is below 4e-4 and a subtraction from 1 would lose the digits).
pub(crate) fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 2.5 { 1.0 - erf_series(x) } else { erfc_continued_fraction(x) }
}

/// erf for x >= 0 from the series `erf x = 2/√π · e^{-x²} · Σ 2^k x^{2k+1} / (1·3·…·(2k+1))`,
/// whose terms are all positive: no cancellation, unlike the alternating Taylor series.
fn erf_series(x: f64) -> f64 {
    let x2 = x * x;
    let (mut term, mut sum) = (x, x);
    for k in 1..200 {
        term *= 2.0 * x2 / f64::from(2 * k + 1);
        sum += term;
        if term < sum * 1e-17 {
            break;
        }
    }
    FRAC_2_SQRT_PI * (-x2).exp() * sum
}

/// erfc for x >= 2.5 from Laplace's continued fraction
/// `erfc x = e^{-x²}/√π · 1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …))))`, evaluated forwards with the
/// modified Lentz method (which needs no guess of the depth).
fn erfc_continued_fraction(x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut f = x;
    let (mut c, mut d) = (x, 0.0);
    for j in 1..500 {
        let a = f64::from(j) / 2.0;
        d = x + a * d;
        d = if d.abs() < TINY { 1.0 / TINY } else { 1.0 / d };
        c = x + a / c;
        if c.abs() < TINY {
            c = TINY;
        }
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-x * x).exp() / (f * PI.sqrt())
}

/// Upper tail of the standard normal, P(Z >= x).
fn upper_tail(x: f64) -> f64 {
    0.5 * erfc(x / SQRT_2)
}

/// Standard normal density.
fn density(x: f64) -> f64 {
    const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
    INV_SQRT_2PI * (-0.5 * x * x).exp()
}

/// P(a <= Z < a + w) for a standard normal Z, to about 1e-13 relative.
///
/// A difference of two tail values loses the digits their common part holds, which for
/// the width of one position (w = 1/s, tiny on big working sets) is nearly all of them; narrow
/// intervals are therefore integrated directly instead: by the Taylor series of the density
/// around the midpoint when very narrow (one exponential), by 5-point Gauss–Legendre when
/// moderately narrow. Only wide intervals use the tails, where the difference is not small.
pub(crate) fn mass(a: f64, w: f64) -> f64 {
    let b = a + w;
    let reach = a.abs().max(b.abs());
    if w * reach.max(3.0) <= 0.01 {
        midpoint_series(a + 0.5 * w, w)
    } else if w <= 0.3 && w * reach <= 0.5 {
        gauss_legendre(a + 0.5 * w, w)
    } else {
        let m = if a >= 0.0 {
            upper_tail(a) - upper_tail(b)
        } else if b <= 0.0 {
            upper_tail(-b) - upper_tail(-a)
        } else {
            1.0 - upper_tail(-a) - upper_tail(b)
        };
        m.max(0.0)
    }
}

/// ∫ φ over [m - w/2, m + w/2] = w·φ(m)·Σ He_2k(m)·(w/2)^2k/(2k+1)!, with the probabilists'
/// Hermite polynomials He₂ = m² − 1, He₄ = m⁴ − 6m² + 3, He₆ = m⁶ − 15m⁴ + 45m² − 15 (the
/// even derivatives of φ are He_2k·φ). With w·max(|m|, 3) <= 0.01 the first omitted term is
/// below 1e-20 of the result.
fn midpoint_series(m: f64, w: f64) -> f64 {
    let m2 = m * m;
    let he2 = m2 - 1.0;
    let he4 = (m2 - 6.0) * m2 + 3.0;
    let he6 = ((m2 - 15.0) * m2 + 45.0) * m2 - 15.0;
    let h2 = w * w / 4.0;
    let series = 1.0 + h2 * (he2 / 6.0 + h2 * (he4 / 120.0 + h2 * he6 / 5040.0));
    w * density(m) * series
}

/// Nodes and weights of 5-point Gauss–Legendre on [-1, 1]: nodes 0, ±⅓√(5 ∓ 2√(10/7)),
/// weights 128/225 and (322 ± 13√70)/900 (checked against those forms in the tests).
const GL_NODES: [f64; 3] = [0.0, 0.538_469_310_105_683_1, 0.906_179_845_938_664];
const GL_WEIGHTS: [f64; 3] = [0.568_888_888_888_888_9, 0.478_628_670_499_366_5, 0.236_926_885_056_189_1];

/// ∫ φ over [m - w/2, m + w/2] by 5-point Gauss–Legendre: exact for polynomials of degree 9,
/// so its error is about 4e-13·w^10·|He₁₀| relative, below 1e-13 under the caller's bounds.
fn gauss_legendre(m: f64, w: f64) -> f64 {
    let half = 0.5 * w;
    let mut sum = GL_WEIGHTS[0] * density(m);
    for j in 1..3 {
        let dx = half * GL_NODES[j];
        sum += GL_WEIGHTS[j] * (density(m - dx) + density(m + dx));
    }
    half * sum
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn erfc_matches_reference_values() {
        // erfc values from the closed forms' published tables (Abramowitz & Stegun 7.1, and
        // 1 - erf for the small ones).
        let table = [
            (0.0, 1.0),
            (0.1, 0.887_537_083_981_715_2),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_13),
            (2.0, 0.004_677_734_981_047_266),
            (2.5, 4.069_520_174_449_59e-4),
            (3.0, 2.209_049_699_858_544e-5),
            (5.0, 1.537_459_794_428_035e-12),
            (10.0, 2.088_487_583_762_545e-45),
            (-1.0, 1.842_700_792_949_715),
        ];
        for (x, want) in table {
            assert!(close(erfc(x), want, 1e-13), "erfc({x}) = {} want {want}", erfc(x));
        }
        assert_eq!(erfc(30.0), 0.0);
        assert_eq!(erfc(-30.0), 2.0);
        assert!(erfc(f64::NAN).is_nan());
    }

    #[test]
    fn erfc_is_smooth_at_the_method_switch() {
        let below = erfc(2.5 - 1e-12);
        let above = erfc(2.5);
        // The slope is -2/√π·e^{-6.25} ≈ -2.2e-3, so 1e-12 apart they differ by about 2e-15.
        assert!(close(below, above, 1e-11), "{below} {above}");
    }

    #[test]
    fn gauss_legendre_constants_match_their_closed_forms() {
        let r = (10.0f64 / 7.0).sqrt();
        let nodes = [0.0, (5.0 - 2.0 * r).sqrt() / 3.0, (5.0 + 2.0 * r).sqrt() / 3.0];
        let s70 = 70.0f64.sqrt();
        let weights = [128.0 / 225.0, (322.0 + 13.0 * s70) / 900.0, (322.0 - 13.0 * s70) / 900.0];
        for j in 0..3 {
            assert!((nodes[j] - GL_NODES[j]).abs() < 1e-15);
            assert!((weights[j] - GL_WEIGHTS[j]).abs() < 1e-15);
        }
    }

    #[test]
    fn mass_agrees_across_methods() {
        // The same interval cut into pieces narrow enough for each method must add up to the
        // tail difference of the whole (which is accurate for a wide interval).
        for (a, w) in [(-0.7, 0.6), (1.3, 0.9), (4.0, 0.5), (-2.0, 4.0)] {
            let whole = mass(a, w);
            for pieces in [3u32, 40, 2000] {
                let step = w / f64::from(pieces);
                let sum: f64 = (0..pieces).map(|j| mass(a + f64::from(j) * step, step)).sum();
                assert!(close(sum, whole, 1e-12), "a {a} w {w} pieces {pieces}: {sum} vs {whole}");
            }
        }
        assert!(close(mass(-40.0, 80.0), 1.0, 1e-15));
    }

    #[test]
    fn probabilities_sum_to_one_on_the_circle() {
        for (sigma, centre, n) in [(5.0, 0.5, 1000u64), (100.0, 0.1, 7), (0.01, 0.999, 10_000), (30.0, 0.0, 1)] {
            let law = Normal::new(sigma, centre, n);
            let mut sum = Sum::default();
            (0..n).for_each(|i| sum.add(law.probability(i)));
            assert!((sum.value() - 1.0).abs() < 1e-12, "σ {sigma} c {centre} n {n}: {}", sum.value());
        }
    }

    #[test]
    fn clones_do_not_share_the_pending_draw() {
        let mut state = 5;
        let mut rand = || crate::rng::splitmix64(&mut state);
        let mut law = Normal::new(5.0, 0.5, 1000);
        law.sample(&mut rand);
        assert!(law.spare.is_some());
        assert!(law.clone().spare.is_none());
    }

    #[test]
    fn wide_bell_wraps_around() {
        // σ = 100 % on 4 positions: nearly flat, but the centre position is still the likeliest.
        let law = Normal::new(100.0, 0.5, 4);
        let p: Vec<f64> = (0..4).map(|i| law.probability(i)).collect();
        assert!(p.iter().all(|&x| x > 0.2 && x < 0.3), "{p:?}");
        assert!(p[2] >= p[0] && p[1] > p[0] - 1e-12);
    }
}
