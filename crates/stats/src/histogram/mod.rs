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

mod sparse;
mod v2;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};

use sparse::{Scheme, Sparse};

/// Significant decimal digits kept; see the module doc for the resulting error bound.
pub const SIGNIFICANT_DIGITS: u8 = 3;
/// Highest value the histogram is pre-sized for: 60 s. Larger values still record (the
/// histogram grows), which only happens for pathological stalls.
const PRESIZED_MAX_NS: u64 = 60_000_000_000;
/// A sparse histogram of more buckets than this becomes a full one (its 16 bytes a bucket then
/// cost about a quarter of the full histogram's 8 bytes for every bucket in range).
const SPARSE_MAX_BUCKETS: usize = 4096;

/// A histogram is kept in one of two forms with the same answers: the full HDR histogram, which
/// records in constant time (the I/O threads', allocated before their step starts), or only its
/// buckets that hold counts — what [`LatencyHistogram::from_bytes`] reads and
/// [`LatencyHistogram::empty`] starts as, so that a coordinator or relay merging thousands of
/// hosts' intervals (issue 46) walks and keeps their recorded buckets only. Recording into a
/// sparse histogram makes it full.
#[derive(Clone, Debug)]
enum Form {
    Full(Histogram<u64>),
    Sparse(Sparse),
}

#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    form: Form,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.count() == other.count() && self.buckets().eq(other.buckets())
    }
}

impl LatencyHistogram {
    /// A histogram to record into: its memory allocated now, so that recording never
    /// allocates (an I/O thread's first I/O follows its start by microseconds).
    pub fn new() -> Self {
        Self::full_of(SIGNIFICANT_DIGITS)
    }

    /// A histogram of 2 significant digits (values within 1 % of one recorded), an eighth of the
    /// memory of [`LatencyHistogram::new`]: one per target per I/O thread (issue 42) — a path's
    /// percentiles need no finer grain, and hundreds of threads × targets must fit.
    pub fn coarse() -> Self {
        Self::full_of(2)
    }

    /// An empty histogram to merge into (3 digits): no memory until it does — a merge of
    /// sparse histograms stays sparse, a full one's is copied.
    pub fn empty() -> Self {
        let scheme = Scheme::new(SIGNIFICANT_DIGITS).expect("3 digits are valid");
        Self { form: Form::Sparse(Sparse::empty(scheme, PRESIZED_MAX_NS)) }
    }

    fn full_of(digits: u8) -> Self {
        let mut h =
            Histogram::new_with_bounds(1, PRESIZED_MAX_NS, digits).expect("constant histogram bounds are valid");
        h.auto(true);
        Self { form: Form::Full(h) }
    }

    /// The full histogram, made from the sparse one's buckets where it is sparse.
    fn full(&mut self) -> &mut Histogram<u64> {
        if let Form::Sparse(s) = &self.form {
            // Sized as the histograms it comes from (their values' range, not what a header
            // states: an agent's u64::MAX would double it).
            let mut h = Histogram::new_with_bounds(1, PRESIZED_MAX_NS.max(s.max()), s.scheme.digits)
                .expect("a sparse histogram's digits and range are valid");
            h.auto(true);
            add_sparse(&mut h, s);
            self.form = Form::Full(h);
        }
        match &mut self.form {
            Form::Full(h) => h,
            Form::Sparse(_) => unreachable!("made full above"),
        }
    }

    /// Empties the histogram, keeping its memory.
    pub fn reset(&mut self) {
        match &mut self.form {
            Form::Full(h) => h.reset(),
            Form::Sparse(s) => *s = Sparse::empty(s.scheme, s.highest),
        }
    }

    /// Records `n` latencies of `ns` each.
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n > 0 {
            record_into(self.full(), ns.max(1), n);
        }
    }

    /// Records one latency. Zero is recorded as 1 ns (the lowest discernible value).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        let h = self.full();
        // `record` grows the histogram past its pre-sized range (a rare stall); counts
        // saturate. Should growing ever fail, clamp rather than lose the value.
        if h.record(ns.max(1)).is_err() {
            h.saturating_record(ns.max(1));
        }
    }

    /// Adds all counts of `other` (exact merge).
    pub fn merge(&mut self, other: &LatencyHistogram) {
        if other.is_empty() {
            return;
        }
        match (&mut self.form, &other.form) {
            // Both sides auto-resize, so adding never fails for range reasons.
            (Form::Full(a), Form::Full(b)) => a.add(b).expect("auto-resizing histograms always merge"),
            (Form::Full(a), Form::Sparse(b)) => add_sparse(a, b),
            (Form::Sparse(a), Form::Sparse(b)) => {
                a.merge(b);
                if a.counts.len() > SPARSE_MAX_BUCKETS {
                    self.full();
                }
            }
            // An empty histogram takes a full one's copy where it has the same buckets (what
            // `Histogram::add` does into an empty one of its shape): the I/O threads' merge into
            // a fresh interval. Another program's coarser lowest value is not copied: it would
            // coarsen every later merge.
            (Form::Sparse(a), Form::Full(b)) if a.total == 0 && a.scheme.digits == b.sigfig() && b.low() == 1 => {
                self.form = Form::Full(b.clone());
            }
            (Form::Sparse(_), Form::Full(b)) => {
                self.full().add(b).expect("auto-resizing histograms always merge");
            }
        }
    }

    pub fn count(&self) -> u64 {
        match &self.form {
            Form::Full(h) => h.len(),
            Form::Sparse(s) => s.total,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.count() == 0
    }

    /// Smallest recorded value (0 when empty).
    pub fn min_ns(&self) -> u64 {
        match &self.form {
            _ if self.is_empty() => 0,
            Form::Full(h) => h.min(),
            Form::Sparse(s) => s.min(),
        }
    }

    pub fn max_ns(&self) -> u64 {
        match &self.form {
            _ if self.is_empty() => 0,
            Form::Full(h) => h.max(),
            Form::Sparse(s) => s.max(),
        }
    }

    pub fn mean_ns(&self) -> f64 {
        match &self.form {
            _ if self.is_empty() => 0.0,
            Form::Full(h) => h.mean(),
            Form::Sparse(s) => s.mean(),
        }
    }

    pub fn stddev_ns(&self) -> f64 {
        match &self.form {
            _ if self.is_empty() => 0.0,
            Form::Full(h) => h.stdev(),
            Form::Sparse(s) => s.stdev(),
        }
    }

    /// Value at percentile `p` (0..=100), e.g. 99.9.
    pub fn percentile_ns(&self, p: f64) -> u64 {
        match &self.form {
            _ if self.is_empty() => 0,
            // Beyond what one encoding holds (only merges of absurd counts, a hostile agent's,
            // get there) hdrhistogram's walk adds unchecked: a panic in a debug build, wrapped
            // figures in a release one. The sparse walk saturates, as the full histogram's
            // counts and total do.
            Form::Full(h) if h.len() > i64::MAX as u64 => sparse_view(h).percentile(p),
            Form::Full(h) => h.value_at_percentile(p),
            Form::Sparse(s) => s.percentile(p),
        }
    }

    /// Recorded (value, count) pairs, value being the highest equivalent value of its bucket.
    pub fn buckets(&self) -> Box<dyn Iterator<Item = (u64, u64)> + '_> {
        match &self.form {
            Form::Full(h) => Box::new(h.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value()))),
            Form::Sparse(s) => Box::new(s.buckets()),
        }
    }

    /// Number of recorded values at or below `ns` (bucket resolution).
    pub fn count_at_or_below(&self, ns: u64) -> u64 {
        match &self.form {
            Form::Full(h) => h.count_between(0, ns),
            Form::Sparse(s) => s.count_at_or_below(ns),
        }
    }

    /// Compact, portable encoding (HdrHistogram V2), for shipping between hosts and storing.
    pub fn to_bytes(&self) -> Vec<u8> {
        match &self.form {
            Form::Full(h) => encode_full(h, V2Serializer::new),
            Form::Sparse(s) => v2::write(s),
        }
    }

    /// The standard compressed encoding (HdrHistogram V2 + deflate, what other HdrHistogram
    /// libraries write and read — Python's `HdrHistogram.decode` takes it base64-encoded), for
    /// storing: a fraction of the plain encoding's size, every bucket kept.
    pub fn to_compressed_bytes(&self) -> Vec<u8> {
        match &self.form {
            Form::Full(h) => encode_full(h, V2DeflateSerializer::new),
            Form::Sparse(s) => v2::write_compressed(s),
        }
    }

    /// Reads either encoding, plain or compressed, as a sparse histogram (see `v2`).
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, String> {
        let sparse = v2::read(bytes).map_err(|e| format!("invalid latency histogram: {e}"))?;
        Ok(Self { form: Form::Sparse(sparse) })
    }
}

/// Records `n` values of `v`; counts saturate should the histogram fail to grow.
fn record_into(h: &mut Histogram<u64>, v: u64, n: u64) {
    if h.record_n(v, n).is_err() {
        h.saturating_record_n(v, n);
    }
}

/// Adds a sparse histogram's counts: each bucket's lowest value lands in its bucket of `into`
/// (as `Histogram::add` moves counts between histograms of other shapes).
fn add_sparse(into: &mut Histogram<u64>, s: &Sparse) {
    for &(i, c) in &s.counts {
        record_into(into, s.scheme.value_for(i as usize), c);
    }
}

/// A full histogram in `serializer`'s encoding; counts the encoding cannot hold (see
/// [`clamped`]) lowered to what it can rather than a panic.
fn encode_full<S: Serializer<SerializeError: std::fmt::Debug>>(h: &Histogram<u64>, serializer: fn() -> S) -> Vec<u8> {
    let mut out = Vec::new();
    if serializer().serialize(h, &mut out).is_err() {
        out.clear();
        serializer().serialize(&clamped(h), &mut out).expect("clamped counts serialize");
    }
    out
}

/// `h`'s buckets in the sparse form (its lowest value is 1 ns, as every full one's here).
fn sparse_view(h: &Histogram<u64>) -> Sparse {
    let scheme = Scheme::new(h.sigfig()).expect("a full histogram's digits are valid");
    let counts = h.iter_recorded().map(|v| (scheme.index_for(v.value_iterated_to()) as u32, v.count_at_value()));
    Sparse { scheme, highest: h.high(), counts: counts.collect(), total: h.len() }
}

/// `h` with every count above 2^63 − 1 (what the encoding holds; only merges of absurd counts
/// get there, each read one being below it) lowered to it, as the sparse form writes them.
fn clamped(h: &Histogram<u64>) -> Histogram<u64> {
    let mut out = Histogram::new_with_bounds(h.low(), h.high(), h.sigfig()).expect("the bounds of a histogram");
    out.auto(true);
    for v in h.iter_recorded() {
        out.saturating_record_n(v.value_iterated_to(), v.count_at_value().min(i64::MAX as u64));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::Deserializer;
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

    /// A full histogram of `values` (3 digits, or 2 where `coarse`).
    fn full_of(values: &[(u64, u64)], coarse: bool) -> LatencyHistogram {
        let mut h = if coarse { LatencyHistogram::coarse() } else { LatencyHistogram::new() };
        for &(v, n) in values {
            h.record_n(v, n);
        }
        assert!(values.is_empty() || matches!(h.form, Form::Full(_)));
        h
    }

    fn sparse_of(h: &LatencyHistogram) -> LatencyHistogram {
        let s = LatencyHistogram::from_bytes(&h.to_bytes()).unwrap();
        assert!(matches!(s.form, Form::Sparse(_)));
        s
    }

    /// Every answer of `a` and `b`, which must be the same histogram in any form, to the bit.
    fn same_answers(a: &LatencyHistogram, b: &LatencyHistogram, probes: &[u64]) -> Result<(), TestCaseError> {
        prop_assert_eq!(a.count(), b.count());
        prop_assert_eq!(a.buckets().collect::<Vec<_>>(), b.buckets().collect::<Vec<_>>());
        prop_assert_eq!((a.min_ns(), a.max_ns()), (b.min_ns(), b.max_ns()));
        prop_assert_eq!(a.mean_ns().to_bits(), b.mean_ns().to_bits());
        prop_assert_eq!(a.stddev_ns().to_bits(), b.stddev_ns().to_bits());
        for p in [0.0, 0.001, 1.0, 25.0, 50.0, 90.0, 99.0, 99.9, 99.99, 99.999, 100.0, 120.0] {
            prop_assert_eq!(a.percentile_ns(p), b.percentile_ns(p), "p{}", p);
        }
        for &ns in probes {
            prop_assert_eq!(a.count_at_or_below(ns), b.count_at_or_below(ns), "at or below {}", ns);
        }
        Ok(())
    }

    fn latencies() -> impl Strategy<Value = Vec<(u64, u64)>> {
        // Mostly an I/O's range, some beyond the 60 s the histogram is sized for.
        prop::collection::vec(
            (prop_oneof![8 => 1u64..20_000_000, 1 => 1u64..200_000_000_000, 1 => 0u64..3], 1u64..1_000),
            0..120,
        )
    }

    proptest! {
        /// Issue 46: a histogram read from its encoding is kept sparse, and answers every
        /// question exactly as the full one it was encoded from, and encodes to the same bytes.
        #[test]
        fn a_sparse_histogram_answers_as_the_full_one(
            values in latencies(),
            coarse in any::<bool>(),
            probes in prop::collection::vec(0u64..300_000_000_000, 8),
        ) {
            let full = full_of(&values, coarse);
            let sparse = sparse_of(&full);
            same_answers(&sparse, &full, &probes)?;
            prop_assert_eq!(sparse.to_bytes(), full.to_bytes());
            prop_assert_eq!(sparse.to_compressed_bytes(), full.to_compressed_bytes());
            let back = LatencyHistogram::from_bytes(&full.to_compressed_bytes()).unwrap();
            prop_assert!(matches!(back.form, Form::Sparse(_)));
            same_answers(&back, &full, &probes)?;
            // hdrhistogram's own reader takes the sparse form's encodings.
            for bytes in [sparse.to_bytes(), sparse.to_compressed_bytes()] {
                let theirs: Histogram<u64> = Deserializer::new().deserialize(&mut &bytes[..]).unwrap();
                prop_assert_eq!(theirs.len(), full.count());
                prop_assert_eq!(theirs.mean().to_bits(), full.mean_ns().to_bits());
            }
        }

        /// Merging in any form — sparse into sparse, sparse into full, full into sparse, a
        /// fine histogram into a coarse one and back — gives what merging the full ones gives.
        #[test]
        fn merges_in_any_form_equal_the_full_merge(
            parts in prop::collection::vec((latencies(), any::<bool>(), 0u8..4), 1..6),
            into_coarse in any::<bool>(),
            probes in prop::collection::vec(0u64..300_000_000_000, 8),
        ) {
            let mut want = full_of(&[(7, 1)], into_coarse);
            let mut got = sparse_of(&want);
            for (values, coarse, form) in &parts {
                let full = full_of(values, *coarse);
                want.merge(&full);
                match form {
                    0 => got.merge(&full),
                    1 => got.merge(&sparse_of(&full)),
                    2 => {
                        // The other way round: the part takes what was merged so far.
                        let mut part = sparse_of(&full);
                        if *coarse == into_coarse {
                            part.merge(&got);
                            got = part;
                        } else {
                            got.merge(&part);
                        }
                    }
                    _ => {
                        let mut dense = got.clone();
                        dense.full();
                        dense.merge(&sparse_of(&full));
                        got = dense;
                    }
                }
            }
            same_answers(&got, &want, &probes)?;
        }
    }

    #[test]
    fn an_empty_histogram_is_sparse_until_it_records_or_takes_a_full_one() {
        let mut h = LatencyHistogram::empty();
        assert!(matches!(h.form, Form::Sparse(_)));
        assert!(matches!(LatencyHistogram::new().form, Form::Full(_)), "a histogram to record into is allocated");
        assert_eq!(h.to_bytes(), LatencyHistogram::new().to_bytes());
        h.merge(&sparse_of(&full_of(&[(500, 2)], false)));
        assert!(matches!(h.form, Form::Sparse(_)));
        h.record(1_000);
        assert!(matches!(h.form, Form::Full(_)));
        assert_eq!((h.count(), h.min_ns(), h.max_ns()), (3, 500, 1_000));
        let mut e = LatencyHistogram::empty();
        e.merge(&h);
        assert!(matches!(e.form, Form::Full(_)));
        assert_eq!(e, h);
    }

    #[test]
    fn a_sparse_histogram_of_many_buckets_becomes_full() {
        let mut wide = LatencyHistogram::new();
        // 1 ns to 20 µs: over 5,000 buckets.
        for v in 1..=20_000u64 {
            wide.record(v);
        }
        let mut merged = sparse_of(&full_of(&[(5, 1)], false));
        merged.merge(&sparse_of(&wide));
        assert!(matches!(merged.form, Form::Full(_)));
        merged.merge(&sparse_of(&wide));
        assert_eq!(merged.count(), 40_001);
        assert_eq!(merged.buckets().count(), wide.buckets().count());
    }

    #[test]
    fn encodings_iocurve_does_not_write_are_refused() {
        // Another lowest discernible value (review of fef5a4d: it went to hdrhistogram's reader,
        // which allocated every bucket its header stated — 442 KB for 40 bytes of lowest 2 and
        // highest 2^64 - 1): refused, whatever the range.
        let mut other: Histogram<u64> = Histogram::new_with_bounds(1_000, 1_000_000_000, 3).unwrap();
        other.record(5_000_000).unwrap();
        let mut bytes = Vec::new();
        V2Serializer::new().serialize(&other, &mut bytes).unwrap();
        assert!(Deserializer::new().deserialize::<u64, _>(&mut &bytes[..]).is_ok());
        let err = LatencyHistogram::from_bytes(&bytes).unwrap_err();
        assert!(err.contains("its lowest discernible value is 1000 ns (iocurve's histograms have 1 ns)"), "{err}");
        let mut bytes = LatencyHistogram::empty().to_bytes();
        bytes[16..24].copy_from_slice(&2u64.to_be_bytes());
        bytes[24..32].copy_from_slice(&u64::MAX.to_be_bytes());
        assert!(LatencyHistogram::from_bytes(&bytes).unwrap_err().contains("lowest discernible value is 2 ns"));
        // A normalizing offset, a conversion ratio, a highest value below 2: refused, as
        // hdrhistogram refuses them, with what was found.
        for (at, value) in [
            (8, 5u32.to_be_bytes().to_vec()),
            (32, 2.0f64.to_bits().to_be_bytes().to_vec()),
            (24, 1u64.to_be_bytes().to_vec()),
        ] {
            let mut bytes = LatencyHistogram::empty().to_bytes();
            bytes[at..at + value.len()].copy_from_slice(&value);
            let err = LatencyHistogram::from_bytes(&bytes).unwrap_err();
            assert!(err.contains("a header iocurve does not write"), "{err}");
        }
        // Runs of empty buckets up to usize::MAX, then a zero count: the bucket's index would
        // wrap to 0 (review of fef5a4d: a release build took it, its buckets out of order, its
        // maximum 0; a debug build panicked). Refused, as hdrhistogram refuses it.
        let mut bytes = LatencyHistogram::new().to_bytes();
        bytes.truncate(40);
        bytes.push(2); // a count of 1 in bucket 0
        for _ in 0..2 {
            bytes.extend([0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]); // skip 2^63 - 1
        }
        bytes.extend([0, 2]); // a zero count, then a count of 1
        let n = (bytes.len() - 40) as u32;
        bytes[4..8].copy_from_slice(&n.to_be_bytes());
        assert!(Deserializer::new().deserialize::<u64, _>(&mut &bytes[..]).is_err());
        let err = LatencyHistogram::from_bytes(&bytes).unwrap_err();
        assert!(err.contains("a run of empty buckets beyond any histogram"), "{err}");
        // A count beyond the range its header states: refused, as hdrhistogram refuses it.
        let mut bytes = LatencyHistogram::new().to_bytes();
        bytes.truncate(40);
        let skip = 59_999u64; // zig-zag of -30,000: skip 30,000 buckets (27,648 exist), then a count of 1
        bytes.extend([(skip & 0x7f) as u8 | 0x80, ((skip >> 7) & 0x7f) as u8 | 0x80, (skip >> 14) as u8, 2]);
        bytes[4..8].copy_from_slice(&4u32.to_be_bytes());
        assert!(Deserializer::new().deserialize::<u64, _>(&mut &bytes[..]).is_err());
        let err = LatencyHistogram::from_bytes(&bytes).unwrap_err();
        assert!(err.contains("a count in bucket 30000, beyond the 27648 its range holds"), "{err}");
        // A run of 2^63 empty buckets (the fuzzer's find: hdrhistogram's reader panics on it in
        // a debug build): refused.
        {
            let mut bytes = LatencyHistogram::new().to_bytes();
            bytes.truncate(40);
            bytes.extend([0xff; 9]); // zig-zag u64::MAX: -2^63
            bytes.push(2);
            bytes[4..8].copy_from_slice(&10u32.to_be_bytes());
            let err = LatencyHistogram::from_bytes(&bytes).unwrap_err();
            assert!(err.contains("a run of empty buckets beyond any histogram"), "{err}");
        }
        // Counts adding up beyond 2^63 - 1 (the fuzzer's second find: hdrhistogram's percentile
        // walk overflows on them; no real histogram has them): refused.
        {
            let mut bytes = LatencyHistogram::new().to_bytes();
            bytes.truncate(40);
            for _ in 0..3 {
                bytes.extend([0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]); // zig-zag 2^63 - 1
            }
            bytes[4..8].copy_from_slice(&27u32.to_be_bytes());
            let err = LatencyHistogram::from_bytes(&bytes).unwrap_err();
            assert!(err.contains("its counts add up beyond 2^63 - 1"), "{err}");
        }
        // Merges of counts read at the limit (two agents' 2^63 - 1 each) still encode, in
        // either form, their counts lowered to what the encoding holds (review of 58d0226).
        let at_limit = {
            let mut b = LatencyHistogram::new().to_bytes();
            b.truncate(40);
            b.extend([0x83, 0x10]); // zig-zag -1,026: skip to bucket 1,026 (1,026 ns)
            b.extend([0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]); // 2^63 - 1
            let n = (b.len() - 40) as u32;
            b[4..8].copy_from_slice(&n.to_be_bytes());
            LatencyHistogram::from_bytes(&b).unwrap()
        };
        for full in [false, true] {
            let mut m = at_limit.clone();
            if full {
                m.full();
            }
            m.merge(&at_limit);
            for encoded in [m.to_bytes(), m.to_compressed_bytes()] {
                let back = LatencyHistogram::from_bytes(&encoded).unwrap();
                assert_eq!(back.buckets().collect::<Vec<_>>(), [(1_026, i64::MAX as u64)], "full: {full}");
            }
        }
        // Three such agents in three buckets: their counts add up beyond 2^64. hdrhistogram's
        // percentile walk overflowed (review of fef5a4d: a panic in a debug build, p100 = 0 in a
        // release one); both forms give the same figures, their sums saturated.
        let at = |value: u64| {
            let mut h = LatencyHistogram::empty();
            for _ in 0..2 {
                let mut one = full_of(&[(value, 1)], false);
                if let Form::Full(f) = &mut one.form {
                    f.reset();
                    f.record_n(value, i64::MAX as u64 / 2 + 1).unwrap();
                }
                h.merge(&LatencyHistogram::from_bytes(&one.to_bytes()).unwrap());
            }
            h
        };
        let (mut sparse, mut full) = (LatencyHistogram::empty(), LatencyHistogram::empty());
        full.full();
        for v in [1_026, 2_000_000, 3_000_000_000] {
            sparse.merge(&at(v));
            full.merge(&at(v));
        }
        assert!(matches!((&sparse.form, &full.form), (Form::Sparse(_), Form::Full(_))));
        assert_eq!((sparse.count(), full.count()), (u64::MAX, u64::MAX));
        for p in [0.0, 10.0, 50.0, 99.0, 100.0] {
            assert_eq!(sparse.percentile_ns(p), full.percentile_ns(p), "p{p}");
        }
        // Not 0: the walk's sum saturates at 2^64 - 1 in the second bucket (2^63 + 2^63).
        assert_eq!(full.percentile_ns(100.0), 2_000_895);
        // Another program's lowest value (1,000 ns) is not copied into an empty histogram.
        let mut other: Histogram<u64> = Histogram::new_with_bounds(1_000, 1_000_000_000, 3).unwrap();
        other.record(5_000_000).unwrap();
        let mut e = LatencyHistogram::empty();
        e.merge(&LatencyHistogram { form: Form::Full(other) });
        e.merge(&full_of(&[(5, 1)], false));
        assert_eq!(e.min_ns(), 5);
        // A histogram of more than 3 digits is refused before it is allocated.
        let mut five = LatencyHistogram::new().to_bytes();
        five[12..16].copy_from_slice(&5u32.to_be_bytes());
        assert!(LatencyHistogram::from_bytes(&five).unwrap_err().contains("5 significant digits"));
        let full = full_of(&[(1_026, 1)], false);
        assert_eq!(at_limit.percentile_ns(f64::NAN), full.percentile_ns(f64::NAN), "NaN as hdrhistogram takes it");
        // Cut short anywhere: refused where hdrhistogram refuses it, else read to the same
        // histogram — except a compressed stream missing its last bytes (its checksum), which
        // hdrhistogram reads as long as the counts inflate, and we refuse as cut short.
        let full = full_of(&[(1_000, 3), (9_000_000, 1), (70_000_000_000, 2)], false);
        for (bytes, compressed) in [(full.to_bytes(), false), (full.to_compressed_bytes(), true)] {
            for cut in 0..=bytes.len() {
                let ours = LatencyHistogram::from_bytes(&bytes[..cut]);
                let theirs = Deserializer::new().deserialize::<u64, _>(&mut &bytes[..cut]);
                if compressed && cut < bytes.len() {
                    assert!(ours.is_err(), "cut at {cut} of {}", bytes.len());
                    continue;
                }
                assert_eq!(ours.is_ok(), theirs.is_ok(), "cut at {cut} of {}", bytes.len());
                if let (Ok(ours), Ok(theirs)) = (ours, theirs) {
                    assert_eq!(ours.count(), theirs.len());
                }
            }
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
