//! zoned, zoned_abs and hot bands: mixtures of uniform laws over runs of positions.
//!
//! Each is a list of parts `(share, first position, length)`: a draw picks a part with
//! probability `share`, then a position uniformly inside it. Zones are parts side by side; hot
//! bands are parts plus one more part spanning the whole working set for the accesses the
//! bands leave over, so band positions get both shares.

use crate::numeric::{Sum, touched};
use crate::rng::{below, unit};
use crate::validate::{SLACK, fmt_size};
use crate::{Band, Zone, ZoneAbs};

#[derive(Debug, Clone, Copy)]
struct Part {
    /// Draws in [previous part's `below`, `below`) pick this part; the last one is +∞.
    below: f64,
    share: f64,
    lo: u64,
    len: u64,
}

#[derive(Debug, Clone)]
pub(crate) struct Segments {
    n: u64,
    /// Only parts with a positive share, each with at least one position.
    parts: Vec<Part>,
}

impl Segments {
    /// fio's zoned: zone i covers `[floor(c_{i-1}·n/100), floor(c_i·n/100))`, `c_i` the sum of
    /// the first i ranges in percent (a sum within `SLACK` of 100 ends exactly at n).
    pub(crate) fn zoned(zones: &[Zone], n: u64) -> Result<Self, String> {
        let nf = n as f64;
        let bound = |pct: f64| if pct >= 100.0 - SLACK { n } else { ((pct * nf / 100.0).floor() as u64).min(n) };
        let mut parts = Vec::with_capacity(zones.len());
        let mut cumulative = 0.0;
        for (i, zone) in zones.iter().enumerate() {
            let lo = bound(cumulative);
            cumulative += zone.range_pct;
            let hi = bound(cumulative).max(lo);
            if zone.access_pct > 0.0 && hi == lo {
                return Err(format!(
                    "zoned zone {} ({}/{}) covers no position: the working set has only {n} {}; give the zone \
                     a larger range or use a larger working set",
                    i + 1,
                    zone.access_pct,
                    zone.range_pct,
                    positions(n)
                ));
            }
            parts.push((zone.access_pct, lo, hi - lo));
        }
        Ok(Self::from_parts(n, &parts))
    }

    /// fio's zoned_abs: zone i covers the blocks of its bytes, `[B_{i-1}/unit, B_i/unit)`, `B_i`
    /// the sum of the first i sizes.
    pub(crate) fn zoned_abs(zones: &[ZoneAbs], n: u64, unit: u64) -> Result<Self, String> {
        if unit == 0 {
            return Err("zoned_abs needs the block size to place its zones, and it is 0 bytes".to_owned());
        }
        let available = u128::from(n) * u128::from(unit);
        let needed: u128 = zones.iter().map(|z| u128::from(z.bytes)).sum();
        if needed > available {
            return Err(format!(
                "zoned_abs zones need {} ({needed} bytes) but the working set has {} ({available} bytes: {n} {} \
                 of {unit} bytes); make the zones smaller or the working set larger",
                fmt_size_u128(needed),
                fmt_size_u128(available),
                if n == 1 { "block" } else { "blocks" }
            ));
        }
        let mut parts = Vec::with_capacity(zones.len());
        let mut end = 0u128;
        for (i, zone) in zones.iter().enumerate() {
            let lo = (end / u128::from(unit)) as u64;
            end += u128::from(zone.bytes);
            let hi = (end / u128::from(unit)) as u64;
            if zone.access_pct > 0.0 && hi == lo {
                return Err(format!(
                    "zoned_abs zone {} ({}/{}) covers no position: it does not reach past a block boundary, \
                     and the working set has {n} {} of {unit} bytes; give the zone at least one block",
                    i + 1,
                    zone.access_pct,
                    fmt_size(zone.bytes),
                    positions(n)
                ));
            }
            parts.push((zone.access_pct, lo, hi - lo));
        }
        Ok(Self::from_parts(n, &parts))
    }

    /// Hot bands: band `S-E` covers `[floor(S·n/100), max(that + 1, ceil(E·n/100)))`, so every
    /// band has a position; the accesses the bands leave go to the whole working set.
    pub(crate) fn hot_bands(bands: &[Band], n: u64) -> Self {
        let nf = n as f64;
        let last = n.saturating_sub(1);
        let mut parts = Vec::with_capacity(bands.len() + 1);
        let mut shares = 0.0;
        for band in bands {
            let lo = ((band.start_pct * nf / 100.0).floor() as u64).min(last);
            let hi = ((band.end_pct * nf / 100.0).ceil() as u64).clamp(lo + 1, n.max(1));
            parts.push((band.access_pct, lo, hi - lo));
            shares += band.access_pct;
        }
        let rest = 100.0 - shares;
        if rest > SLACK {
            parts.push((rest, 0, n));
        }
        Self::from_parts(n, &parts)
    }

    /// From `(share in percent, first position, length)`: keeps the parts that can be drawn
    /// and normalises their shares to sum to 1, so `probability` is that of `sample`.
    fn from_parts(n: u64, raw: &[(f64, u64, u64)]) -> Self {
        let kept: Vec<_> = raw.iter().copied().filter(|&(share, _, len)| share > 0.0 && len > 0).collect();
        let total: f64 = kept.iter().map(|p| p.0).sum();
        let mut cumulative = 0.0;
        let mut parts: Vec<Part> = kept
            .iter()
            .map(|&(share, lo, len)| {
                let share = share / total;
                cumulative += share;
                Part { below: cumulative, share, lo, len }
            })
            .collect();
        // Rounding may leave the last threshold a hair below 1: no draw may fall past it.
        if let Some(last) = parts.last_mut() {
            last.below = f64::INFINITY;
        }
        Segments { n, parts }
    }

    #[inline]
    pub(crate) fn sample(&self, rand: &mut impl FnMut() -> u64) -> u64 {
        let u = unit(rand);
        for part in &self.parts {
            if u < part.below {
                return part.lo + below(rand, part.len);
            }
        }
        // Only reachable with no parts, which validation rules out: fall back to uniform.
        below(rand, self.n)
    }

    pub(crate) fn probability(&self, i: u64) -> f64 {
        self.parts.iter().filter(|p| i >= p.lo && i - p.lo < p.len).map(|p| p.share / p.len as f64).sum()
    }

    /// The probability is constant between part boundaries: one term per run instead of one
    /// per position.
    pub(crate) fn expected_distinct(&self, draws: f64) -> f64 {
        let mut cuts: Vec<u64> = vec![0, self.n];
        for p in &self.parts {
            cuts.push(p.lo);
            cuts.push(p.lo + p.len);
        }
        cuts.sort_unstable();
        cuts.dedup();
        let mut sum = Sum::default();
        for run in cuts.windows(2) {
            let (a, b) = (run[0], run[1]);
            sum.add((b - a) as f64 * touched(self.probability(a), draws));
        }
        sum.value()
    }
}

fn positions(n: u64) -> &'static str {
    if n == 1 { "position" } else { "positions" }
}

fn fmt_size_u128(bytes: u128) -> String {
    u64::try_from(bytes).map_or_else(|_| format!("{bytes}"), fmt_size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zones(list: &[(f64, f64)]) -> Vec<Zone> {
        list.iter().map(|&(access_pct, range_pct)| Zone { access_pct, range_pct }).collect()
    }

    #[test]
    fn zones_follow_each_other() {
        let s = Segments::zoned(&zones(&[(60.0, 10.0), (30.0, 20.0), (10.0, 70.0)]), 1000).unwrap();
        let spans: Vec<_> = s.parts.iter().map(|p| (p.lo, p.len)).collect();
        assert_eq!(spans, [(0, 100), (100, 200), (300, 700)]);
        assert!((s.probability(0) - 0.006).abs() < 1e-15);
        assert!((s.probability(150) - 0.0015).abs() < 1e-15);
        assert!((s.probability(999) - 0.1 / 700.0).abs() < 1e-15);
        assert_eq!(s.probability(1000), 0.0);
    }

    #[test]
    fn ranges_short_of_100_leave_the_rest_untouched() {
        let s = Segments::zoned(&zones(&[(50.0, 10.0), (50.0, 10.0)]), 100).unwrap();
        assert_eq!(s.probability(19), 0.05);
        assert_eq!(s.probability(20), 0.0);
        assert!((s.expected_distinct(1e9) - 20.0).abs() < 1e-9);
    }

    #[test]
    fn zero_share_zones_are_gaps() {
        let s = Segments::zoned(&zones(&[(0.0, 50.0), (100.0, 50.0)]), 10).unwrap();
        assert_eq!(s.parts.len(), 1);
        assert_eq!(s.probability(4), 0.0);
        assert!((s.probability(5) - 0.2).abs() < 1e-15);
    }

    #[test]
    fn bands_get_their_share_plus_the_background() {
        let bands = [Band { access_pct: 50.0, start_pct: 0.0, end_pct: 10.0 }];
        let s = Segments::hot_bands(&bands, 100);
        assert!((s.probability(5) - (0.05 + 0.005)).abs() < 1e-15);
        assert!((s.probability(50) - 0.005).abs() < 1e-15);
        // A band at the very end of a tiny working set still gets its position.
        let bands = [Band { access_pct: 100.0, start_pct: 99.0, end_pct: 100.0 }];
        let s = Segments::hot_bands(&bands, 3);
        assert_eq!((s.parts[0].lo, s.parts[0].len), (2, 1));
        assert_eq!(s.parts.len(), 1);
    }

    #[test]
    fn expected_distinct_matches_the_sum_over_positions() {
        let s = Segments::zoned(&zones(&[(60.0, 10.0), (30.0, 20.0), (10.0, 70.0)]), 997).unwrap();
        let direct: f64 = (0..997).map(|i| touched(s.probability(i), 500.0)).sum();
        assert!((s.expected_distinct(500.0) - direct).abs() < 1e-9);
    }
}
