//! Latency histogram in nanoseconds.
//!
//! Error bound: values are kept with 3 significant decimal digits, so any reported value
//! (percentile, min, max) is within 0.1 % of a value that was actually recorded — HDR
//! histograms bucket by powers of two with 2048 linear sub-buckets, which gives a relative
//! resolution of at most 1/1024 < 0.1 %. The lowest discernible value is 1 ns, so latencies
//! below 1 µs keep full sub-microsecond resolution.
//!
//! Histograms merge exactly by adding bucket counts, across threads and (later) hosts: the
//! merge of per-thread histograms is identical to the histogram of all values.

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer, V2Serializer};

/// Significant decimal digits kept; see the module doc for the resulting error bound.
pub const SIGNIFICANT_DIGITS: u8 = 3;
/// Highest value the histogram is pre-sized for: 60 s. Larger values still record (the
/// histogram grows), which only happens for pathological stalls.
const PRESIZED_MAX_NS: u64 = 60_000_000_000;

#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    inner: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.inner.len() == other.inner.len()
            && self
                .inner
                .iter_recorded()
                .map(|v| (v.value_iterated_to(), v.count_at_value()))
                .eq(other.inner.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())))
    }
}

impl LatencyHistogram {
    pub fn new() -> Self {
        let mut inner = Histogram::new_with_bounds(1, PRESIZED_MAX_NS, SIGNIFICANT_DIGITS)
            .expect("constant histogram bounds are valid");
        inner.auto(true);
        Self { inner }
    }

    /// A histogram of 2 significant digits (values within 1 % of one recorded), an eighth of the
    /// memory of [`LatencyHistogram::new`]: one per target per I/O thread (issue 42) — a path's
    /// percentiles need no finer grain, and hundreds of threads × targets must fit.
    pub fn coarse() -> Self {
        let mut inner = Histogram::new_with_bounds(1, PRESIZED_MAX_NS, 2).expect("constant histogram bounds are valid");
        inner.auto(true);
        Self { inner }
    }

    /// Empties the histogram, keeping its memory.
    pub fn reset(&mut self) {
        self.inner.reset();
    }

    /// Records `n` latencies of `ns` each.
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n > 0 && self.inner.record_n(ns.max(1), n).is_err() {
            self.inner.saturating_record_n(ns.max(1), n);
        }
    }

    /// Records one latency. Zero is recorded as 1 ns (the lowest discernible value).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        // `record` grows the histogram past its pre-sized range (a rare stall); counts
        // saturate. Should growing ever fail, clamp rather than lose the value.
        if self.inner.record(ns.max(1)).is_err() {
            self.inner.saturating_record(ns.max(1));
        }
    }

    /// Adds all counts of `other` (exact merge).
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Both sides auto-resize, so adding never fails for range reasons.
        self.inner.add(&other.inner).expect("auto-resizing histograms always merge");
    }

    pub fn count(&self) -> u64 {
        self.inner.len()
    }

    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }

    /// Smallest recorded value (0 when empty).
    pub fn min_ns(&self) -> u64 {
        if self.is_empty() { 0 } else { self.inner.min() }
    }

    pub fn max_ns(&self) -> u64 {
        if self.is_empty() { 0 } else { self.inner.max() }
    }

    pub fn mean_ns(&self) -> f64 {
        if self.is_empty() { 0.0 } else { self.inner.mean() }
    }

    pub fn stddev_ns(&self) -> f64 {
        if self.is_empty() { 0.0 } else { self.inner.stdev() }
    }

    /// Value at percentile `p` (0..=100), e.g. 99.9.
    pub fn percentile_ns(&self, p: f64) -> u64 {
        if self.is_empty() { 0 } else { self.inner.value_at_percentile(p) }
    }

    /// Recorded (value, count) pairs, value being the highest equivalent value of its bucket.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.inner.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value()))
    }

    /// Number of recorded values at or below `ns` (bucket resolution).
    pub fn count_at_or_below(&self, ns: u64) -> u64 {
        self.inner.count_between(0, ns)
    }

    /// Compact, portable encoding (HdrHistogram V2), for shipping between hosts and storing.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        V2Serializer::new().serialize(&self.inner, &mut out).expect("serializing into a Vec cannot fail");
        out
    }

    /// The standard compressed encoding (HdrHistogram V2 + deflate, what other HdrHistogram
    /// libraries write and read — Python's `HdrHistogram.decode` takes it base64-encoded), for
    /// storing: a fraction of the plain encoding's size, every bucket kept.
    pub fn to_compressed_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        V2DeflateSerializer::new().serialize(&self.inner, &mut out).expect("serializing into a Vec cannot fail");
        out
    }

    /// Reads either encoding, plain or compressed.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let mut inner: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &bytes[..])
            .map_err(|e| format!("invalid latency histogram: {e:?}"))?;
        inner.auto(true);
        Ok(Self { inner })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn exact_percentile(sorted: &[u64], p: f64) -> u64 {
        // Same rank rule as HdrHistogram: the smallest value with at least p % at or below it.
        let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
        sorted[rank.min(sorted.len()) - 1]
    }

    #[test]
    fn the_compressed_encoding_keeps_every_bucket_and_is_smaller() {
        let mut h = LatencyHistogram::new();
        let mut x: u64 = 12345;
        for _ in 0..200_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            h.record(20_000 + (x >> 40) % 2_000_000);
        }
        let (plain, packed) = (h.to_bytes(), h.to_compressed_bytes());
        assert!(packed.len() < plain.len(), "{} vs {}", packed.len(), plain.len());
        assert_eq!(LatencyHistogram::from_bytes(&packed).unwrap(), h);
        assert_eq!(LatencyHistogram::from_bytes(&plain).unwrap(), h, "older rows stay readable");
    }

    proptest! {
        #[test]
        fn merge_of_parts_equals_histogram_of_all(
            values in prop::collection::vec(1u64..5_000_000_000, 1..400),
            split in 1usize..8,
        ) {
            let mut all = LatencyHistogram::new();
            let mut parts: Vec<LatencyHistogram> = (0..split).map(|_| LatencyHistogram::new()).collect();
            for (i, v) in values.iter().enumerate() {
                all.record(*v);
                parts[i % split].record(*v);
            }
            let mut merged = LatencyHistogram::new();
            for p in &parts { merged.merge(p); }
            prop_assert_eq!(&merged, &all);
            prop_assert_eq!(merged.count(), values.len() as u64);
        }

        #[test]
        fn percentiles_within_documented_error(
            mut values in prop::collection::vec(1u64..10_000_000_000, 1..500),
            p in prop::sample::select(vec![50.0, 90.0, 99.0, 99.9, 99.99, 100.0]),
        ) {
            let mut h = LatencyHistogram::new();
            for v in &values { h.record(*v); }
            values.sort_unstable();
            let exact = exact_percentile(&values, p) as f64;
            let got = h.percentile_ns(p) as f64;
            prop_assert!((got - exact).abs() <= exact * 0.001 + 1.0,
                "p{p}: exact {exact}, histogram {got}");
            let min = *values.first().unwrap() as f64;
            let max = *values.last().unwrap() as f64;
            prop_assert!((h.min_ns() as f64 - min).abs() <= min * 0.001 + 1.0);
            prop_assert!((h.max_ns() as f64 - max).abs() <= max * 0.001 + 1.0);
        }

        #[test]
        fn serialization_round_trips(values in prop::collection::vec(1u64..100_000_000, 0..200)) {
            let mut h = LatencyHistogram::new();
            for v in &values { h.record(*v); }
            let back = LatencyHistogram::from_bytes(&h.to_bytes()).unwrap();
            prop_assert_eq!(back, h);
        }
    }

    #[test]
    fn sub_microsecond_values_keep_resolution() {
        let mut h = LatencyHistogram::new();
        h.record(250);
        h.record(999);
        assert_eq!(h.min_ns(), 250);
        assert_eq!(h.max_ns(), 999);
    }

    #[test]
    fn values_beyond_presized_range_are_kept() {
        let mut h = LatencyHistogram::new();
        h.record(120_000_000_000); // a 2-minute stall
        assert!(h.max_ns() >= 119_900_000_000);
    }

    #[test]
    fn garbage_bytes_are_an_error_not_a_panic() {
        assert!(LatencyHistogram::from_bytes(b"not a histogram").is_err());
    }
}
