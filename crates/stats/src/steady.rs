//! Steady state as the SNIA Solid State Storage Performance Test Specification defines it:
//! over a window of the last 5 rounds, the tracked value (IOPS, MB/s or latency) varies by no
//! more than 20 % of its mean (max − min), and the best-fit line through the window moves by
//! no more than 10 % of the mean from its first round to its last (its excursion). A round is
//! one measurement interval here.

use serde::{Deserialize, Serialize};

/// Rounds in the measurement window.
pub const WINDOW: usize = 5;
/// Allowed range (max − min) within the window, as a share of its mean.
pub const MAX_RANGE: f64 = 0.20;
/// Allowed excursion of the best-fit line across the window, as a share of its mean.
pub const MAX_EXCURSION: f64 = 0.10;

/// The steady-state check of a series' last [`WINDOW`] values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteadyCheck {
    /// The rounds checked (0-based indexes into the series) and their values.
    pub first_round: usize,
    pub values: Vec<f64>,
    pub mean: f64,
    /// max − min, in percent of the mean (allowed: 20).
    pub range_pct: f64,
    /// The best-fit line: value = intercept + slope × round (rounds counted from `first_round`).
    pub slope: f64,
    pub intercept: f64,
    /// |slope| × (rounds − 1), in percent of the mean (allowed: 10).
    pub excursion_pct: f64,
    pub steady: bool,
}

/// The check over the last [`WINDOW`] values of `series`; None with fewer.
pub fn check(series: &[f64]) -> Option<SteadyCheck> {
    if series.len() < WINDOW {
        return None;
    }
    let first_round = series.len() - WINDOW;
    let values = series[first_round..].to_vec();
    let n = WINDOW as f64;
    let mean = values.iter().sum::<f64>() / n;
    let (lo, hi) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    // Least squares over x = 0..n-1.
    let xm = (n - 1.0) / 2.0;
    let sxx: f64 = (0..WINDOW).map(|x| (x as f64 - xm).powi(2)).sum();
    let sxy: f64 = values.iter().enumerate().map(|(x, &y)| (x as f64 - xm) * (y - mean)).sum();
    let slope = sxy / sxx;
    let intercept = mean - slope * xm;
    let pct = |v: f64| if mean.abs() > 0.0 { v / mean.abs() * 100.0 } else { f64::INFINITY };
    let range_pct = pct(hi - lo);
    let excursion_pct = pct(slope.abs() * (n - 1.0));
    let steady = mean > 0.0 && range_pct <= MAX_RANGE * 100.0 + 1e-9 && excursion_pct <= MAX_EXCURSION * 100.0 + 1e-9;
    Some(SteadyCheck { first_round, values, mean, range_pct, slope, intercept, excursion_pct, steady })
}

/// The first window of [`WINDOW`] consecutive values that meets the rule — the one that ends a
/// step with `steady_state = "snia"` — or else the check of the last window; None with fewer
/// than [`WINDOW`] values.
pub fn first_steady(series: &[f64]) -> Option<SteadyCheck> {
    (WINDOW..=series.len()).find_map(|end| check(&series[..end]).filter(|c| c.steady)).or_else(|| check(series))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_flat_series_is_steady_and_needs_five_rounds() {
        assert_eq!(check(&[100.0; 4]), None);
        let c = check(&[50.0, 100.0, 101.0, 99.0, 100.0, 100.0]).unwrap();
        assert_eq!(c.first_round, 1);
        assert!(c.steady && c.range_pct < 2.1 && c.excursion_pct < 1.0, "{c:?}");
    }

    #[test]
    fn a_trend_within_the_range_is_not_steady() {
        // 100 → 108 over 5 rounds: range 8 % (allowed) but the fit moves 8 % … take 12 %.
        let c = check(&[100.0, 103.0, 106.0, 109.0, 112.0]).unwrap();
        assert!(c.range_pct < 20.0, "{c:?}");
        assert!((c.slope - 3.0).abs() < 1e-9 && (c.excursion_pct - 12.0 / 106.0 * 100.0).abs() < 1e-9, "{c:?}");
        assert!(!c.steady);
    }

    #[test]
    fn an_oscillation_beyond_the_range_is_not_steady() {
        // No trend, but max − min = 30 % of the mean.
        let c = check(&[85.0, 115.0, 100.0, 115.0, 85.0]).unwrap();
        assert!(c.excursion_pct < 10.0 && c.range_pct > 20.0, "{c:?}");
        assert!(!c.steady);
    }

    #[test]
    fn the_first_steady_window_is_the_one_that_ended_the_step() {
        // Steady over rounds 2–6, then one round (the one running when the rule held) far off:
        // the last window fails, the first steady one is what ended the step.
        let v = [50.0, 100.0, 101.0, 99.0, 100.0, 100.0, 160.0];
        assert!(!check(&v).unwrap().steady);
        let c = first_steady(&v).unwrap();
        assert!(c.steady && c.first_round == 1, "{c:?}");
        let never = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0];
        assert_eq!(first_steady(&never).unwrap().first_round, 1, "none steady: the last window");
    }

    #[test]
    fn the_published_limits_count_as_inside() {
        // Range exactly 20 % of the mean (90 … 110, mean 100), no trend.
        let c = check(&[90.0, 110.0, 100.0, 110.0, 90.0]).unwrap();
        assert!((c.range_pct - 20.0).abs() < 1e-9 && c.steady, "{c:?}");
    }

    proptest! {
        #[test]
        fn scaling_a_series_changes_neither_share(v in prop::collection::vec(1.0f64..1e6, 5..12), k in 0.001f64..1000.0) {
            let a = check(&v).unwrap();
            let b = check(&v.iter().map(|x| x * k).collect::<Vec<_>>()).unwrap();
            prop_assert!((a.range_pct - b.range_pct).abs() < 1e-6 && (a.excursion_pct - b.excursion_pct).abs() < 1e-6);
        }
    }
}
