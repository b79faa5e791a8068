//! Test support: a fixed-seed random source, the chi-square test with its p-value, and a bitset
//! for counting distinct positions.

use crate::rng::splitmix64;

/// A splitmix64 stream: fast, and good enough to test samplers with.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        splitmix64(&mut self.0)
    }
}

/// Result of a chi-square goodness-of-fit test.
#[derive(Debug)]
pub(crate) struct Fit {
    pub(crate) statistic: f64,
    pub(crate) df: usize,
    pub(crate) p: f64,
}

/// Pearson's chi-square of `observed` counts against `expected` counts, adjacent cells merged
/// (in the given order) until each merged cell expects at least 5, as the chi-square
/// approximation needs. A leftover tail joins the last cell.
pub(crate) fn chi_square(observed: &[u64], expected: &[f64]) -> Fit {
    assert_eq!(observed.len(), expected.len());
    let mut cells: Vec<(f64, f64)> = Vec::new();
    let (mut o, mut e) = (0.0, 0.0);
    for (&ob, &ex) in observed.iter().zip(expected) {
        o += ob as f64;
        e += ex;
        if e >= 5.0 {
            cells.push((o, e));
            (o, e) = (0.0, 0.0);
        }
    }
    match cells.last_mut() {
        Some(last) => {
            last.0 += o;
            last.1 += e;
        }
        None => cells.push((o, e)),
    }
    let statistic = cells.iter().map(|&(o, e)| (o - e) * (o - e) / e).sum();
    let df = cells.len().saturating_sub(1).max(1);
    Fit { statistic, df, p: chi_square_p(statistic, df) }
}

/// P(χ²_df >= x): the regularized upper incomplete gamma function Q(df/2, x/2).
pub(crate) fn chi_square_p(x: f64, df: usize) -> f64 {
    upper_gamma(df, x / 2.0)
}

/// ln Γ(a) for a = twice_a/2, exactly by the recurrence Γ(a+1) = a·Γ(a) from Γ(1) = 1 or
/// Γ(½) = √π: chi-square only needs integers and halves.
fn ln_gamma_half(twice_a: usize) -> f64 {
    if twice_a.is_multiple_of(2) {
        (1..twice_a / 2).map(|j| (j as f64).ln()).sum()
    } else {
        0.5 * std::f64::consts::PI.ln() + (0..(twice_a - 1) / 2).map(|j| (j as f64 + 0.5).ln()).sum::<f64>()
    }
}

/// Q(a, x) with a = twice_a/2: the series of P = 1 − Q below x = a + 1, where it converges
/// fast; Legendre's continued fraction for Q above, by the modified Lentz method.
fn upper_gamma(twice_a: usize, x: f64) -> f64 {
    let a = twice_a as f64 / 2.0;
    if x <= 0.0 {
        return 1.0;
    }
    // x^a·e^{-x}/Γ(a), the common factor of both expansions.
    let front = (a * x.ln() - x - ln_gamma_half(twice_a)).exp();
    if x < a + 1.0 {
        // P(a, x) = x^a e^{-x}/Γ(a) · Σ x^k/(a(a+1)…(a+k)).
        let (mut term, mut sum) = (1.0 / a, 1.0 / a);
        for k in 1..100_000 {
            term *= x / (a + f64::from(k));
            sum += term;
            if term < sum * 1e-16 {
                break;
            }
        }
        (1.0 - front * sum).max(0.0)
    } else {
        // Q(a, x) = x^a e^{-x}/Γ(a) · 1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/(x+5-a- …))).
        const TINY: f64 = 1e-300;
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / TINY;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..100_000 {
            let fi = f64::from(i);
            let an = -fi * (fi - a);
            b += 2.0;
            d = an * d + b;
            d = if d.abs() < TINY { 1.0 / TINY } else { 1.0 / d };
            c = b + an / c;
            if c.abs() < TINY {
                c = TINY;
            }
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-16 {
                break;
            }
        }
        front * h
    }
}

/// One bit per position.
pub(crate) struct Bitset(Vec<u64>);

impl Bitset {
    pub(crate) fn new(n: u64) -> Self {
        Bitset(vec![0; n.div_ceil(64) as usize])
    }

    pub(crate) fn insert(&mut self, i: u64) {
        self.0[(i / 64) as usize] |= 1 << (i % 64);
    }

    pub(crate) fn count(&self) -> u64 {
        self.0.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p_values_match_known_quantiles() {
        // Two degrees of freedom: Q(1, x/2) = e^{-x/2}, exactly.
        for x in [0.5, 3.0, 5.991_464_547_107_979, 20.0] {
            assert!((chi_square_p(x, 2) - (-x / 2.0).exp()).abs() < 1e-14);
        }
        // One degree of freedom: P(Z² >= x) = erfc(√(x/2)).
        for x in [0.1f64, 1.0, 3.841_458_820_694_124, 10.0] {
            let want = crate::normal::erfc((x / 2.0).sqrt());
            assert!((chi_square_p(x, 1) - want).abs() < 1e-13, "{x}");
        }
        // Tabled 5 % and 1 % points of 10 and 100 degrees of freedom.
        assert!((chi_square_p(18.307_038_053_275_146, 10) - 0.05).abs() < 1e-9);
        assert!((chi_square_p(23.209_251_158_954_356, 10) - 0.01).abs() < 1e-9);
        assert!((chi_square_p(124.342_113_404_727_1, 100) - 0.05).abs() < 1e-8);
        // Large df: the statistic near its mean has p near one half.
        let p = chi_square_p(5000.0, 5000);
        assert!(p > 0.45 && p < 0.5, "{p}");
    }

    #[test]
    fn chi_square_catches_a_wrong_law() {
        let observed = [120, 80, 100, 100];
        let expected = [100.0; 4];
        let fit = chi_square(&observed, &expected);
        assert!((fit.statistic - 8.0).abs() < 1e-12);
        assert_eq!(fit.df, 3);
        assert!(fit.p < 0.05 && fit.p > 0.04, "{}", fit.p);
    }

    #[test]
    fn cells_merge_to_five() {
        let fit = chi_square(&[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], &[1.0; 11]);
        // Cells of 5, 5 and the leftover 1 joined to the last: two cells, one degree of freedom.
        assert_eq!(fit.df, 1);
        assert!(fit.statistic.abs() < 1e-12);
    }
}
