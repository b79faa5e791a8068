//! Small numerical helpers shared by the laws: compensated sums and the ratios `expm1(t)/t` and
//! `ln1p(t)/t` that stay accurate (and finite) when `t` goes to 0.

/// Neumaier's compensated sum: sums of millions of probabilities keep about 1e-16 relative
/// accuracy instead of losing a digit per factor of ten in the number of terms.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Sum {
    sum: f64,
    carry: f64,
}

impl Sum {
    pub(crate) fn add(&mut self, x: f64) {
        let t = self.sum + x;
        // The low-order bits lost by `t` are kept in `carry`, from whichever operand was smaller.
        if self.sum.abs() >= x.abs() {
            self.carry += (self.sum - t) + x;
        } else {
            self.carry += (x - t) + self.sum;
        }
        self.sum = t;
    }

    pub(crate) fn value(self) -> f64 {
        self.sum + self.carry
    }
}

/// Below this, the ratios use their Taylor series: `expm1(t)/t` would divide two tiny numbers
/// (0/0 at t = 0), while the series' first omitted term is about t^4/120 < 1e-22.
const SMALL: f64 = 1e-5;

/// `(e^t - 1)/t`, 1 at t = 0.
pub(crate) fn expm1_ratio(t: f64) -> f64 {
    if t.abs() < SMALL { 1.0 + t * (0.5 + t * (1.0 / 6.0 + t / 24.0)) } else { t.exp_m1() / t }
}

/// `ln(1 + t)/t`, 1 at t = 0.
pub(crate) fn ln1p_ratio(t: f64) -> f64 {
    if t.abs() < SMALL { 1.0 - t * (0.5 - t * (1.0 / 3.0 - t / 4.0)) } else { t.ln_1p() / t }
}

/// The chance that a position of probability `p` is hit at least once in `draws` independent
/// draws, `1 - (1 - p)^draws`, computed without the cancellation of the direct formula.
pub(crate) fn touched(p: f64, draws: f64) -> f64 {
    if draws <= 0.0 || p <= 0.0 {
        return 0.0;
    }
    if p >= 1.0 {
        return 1.0;
    }
    -(draws * (-p).ln_1p()).exp_m1()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_are_continuous_at_the_series_switch() {
        for t in [SMALL * 0.999_999, SMALL * 1.000_001, -SMALL * 0.999_999, -SMALL * 1.000_001] {
            let direct_e = t.exp_m1() / t;
            let direct_l = t.ln_1p() / t;
            assert!((expm1_ratio(t) - direct_e).abs() < 1e-14, "{t}");
            assert!((ln1p_ratio(t) - direct_l).abs() < 1e-14, "{t}");
        }
        assert_eq!(expm1_ratio(0.0), 1.0);
        assert_eq!(ln1p_ratio(0.0), 1.0);
    }

    #[test]
    fn compensated_sum_keeps_small_terms() {
        let mut s = Sum::default();
        s.add(1.0);
        for _ in 0..1_000_000 {
            s.add(1e-16);
        }
        // A plain sum would stay at 1.0: each 1e-16 is below half an ulp of 1.
        assert!((s.value() - (1.0 + 1e-10)).abs() < 3e-16, "{}", s.value());
    }

    #[test]
    fn touched_matches_the_direct_formula() {
        for (p, d) in [(0.5, 3.0), (1e-3, 1000.0), (0.25, 1.0)] {
            let direct = 1.0 - (1.0_f64 - p).powf(d);
            assert!((touched(p, d) - direct).abs() < 1e-14);
        }
        assert_eq!(touched(1.0, 5.0), 1.0);
        assert_eq!(touched(0.3, 0.0), 0.0);
        assert_eq!(touched(0.0, 10.0), 0.0);
    }
}
