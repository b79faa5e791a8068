//! Per-second latency histograms (issue 44, part 4): each sample (a second of a step, every
//! direction together) gets a histogram of its own, so that every second has a true p99 and the
//! report can draw a latency heat map over time.
//!
//! # Resolution
//!
//! A log-linear histogram of our own, not HdrHistogram: 16 linear sub-buckets per power of two
//! (values below 32 ns exact), up to 2^40 ns (18 minutes; a longer latency lands in the last
//! bucket, and the sample's exact maximum still clamps the percentiles). That is 592 buckets,
//! each at most 1/16 of its lower bound wide: a percentile read from it (the highest value of its
//! bucket, as HdrHistogram reports, and never above the second's exact maximum) is within
//! 6.25 % above the true one. HdrHistogram at 1 significant digit has the same grain but wider
//! counts arrays (it sizes sub-buckets to 32 per half-octave pair) and costs more per record; at
//! 2 digits (`LatencyHistogram::coarse`) a second's histogram would be 8× finer than a heat map's
//! pixel and its stored form several times larger (measured in BENCHMARKS.md). A heat map row or
//! a p99 per second needs no finer grain; the step's percentiles still come from the step's
//! 3-digit histograms.
//!
//! # Memory and the hot path
//!
//! An I/O thread records into [`SecondHists`], one dense block of `u32` counts for all of its
//! interval's samples, sized when the interval's stats are made (before the step starts, and
//! reused from interval to interval): a record is a bucket index (a leading-zero count and a
//! shift) and one increment, nothing allocates or locks. 592 × 4 bytes = 2.3 KiB per second
//! and thread, against the ~400 KiB of each of a thread's 3-digit interval histograms. A `u32`
//! count holds 4 billion I/Os in one second of one histogram, more than any host or cluster
//! completes; merges saturate rather than wrap.
//!
//! # Encoding
//!
//! Shipped (agents → coordinator) and stored (the `samples` table, v28) as a format byte, then
//! LEB128 varints from the lowest bucket up: a count `c` as `2c`, a run of `n` empty buckets as
//! `2n + 1` (HdrHistogram V2's idea — counts, with zero runs folded — without its 40-byte
//! header). A second's I/Os fill a few dozen adjacent buckets, so a bucket costs one to three
//! bytes. No deflate: it gains little on so few bytes and costs CPU at the coordinator. On the
//! seconds of a real 70/30 run (`examples/second-sizes.rs`, BENCHMARKS.md) this is smaller than
//! HdrHistogram's V2 at the same grain (1 significant digit), with or without deflate.

/// Linear sub-buckets per power of two (2^SUB_BITS).
pub const SUB_BITS: u32 = 4;
const SUB: u64 = 1 << SUB_BITS;
/// The highest power of two kept apart: latencies from 2^MAX_EXP ns on share the last bucket.
const MAX_EXP: u32 = 40;
/// Seconds an interval keeps histograms for: longer intervals (up to a day) keep none. Two
/// bounds meet here: the coordinator merges an agent's interval of second histograms in 1.2 to
/// 2.3 µs per second (decode and add, `cargo bench -p iocurve-stats --bench histogram --
/// seconds`; BENCHMARKS.md), so 120 seconds stay within the scale-out budget of 0.3 ms per
/// agent and interval (issue 46); and a dense block of 120 seconds is 280 KiB per I/O thread and
/// interval set, less than one of its 3-digit interval histograms (a day-long interval's would
/// be 200 MiB). Longer intervals keep their samples and interval percentiles as before.
pub const MAX_SECONDS: usize = 120;
/// Buckets of one second's histogram.
pub const BUCKETS: usize = (2 * SUB + (MAX_EXP as u64 - SUB_BITS as u64 - 1) * SUB) as usize;
/// The format byte of the encoding (a later resolution gets another).
const FORMAT: u8 = 1;
/// Longest valid encoding: the format byte and every bucket with a gap and a u32 count.
pub const MAX_ENCODED: usize = 1 + BUCKETS * (3 + 5);

/// The bucket of a latency in ns.
#[inline]
pub fn bucket_of(ns: u64) -> usize {
    if ns < 2 * SUB {
        return ns as usize;
    }
    let ns = ns.min((1 << MAX_EXP) - 1);
    let e = 63 - ns.leading_zeros(); // >= SUB_BITS + 1
    let m = ns >> (e - SUB_BITS); // SUB..2*SUB
    (2 * SUB + (e as u64 - SUB_BITS as u64 - 1) * SUB + (m - SUB)) as usize
}

/// The values (ns) bucket `i` holds: lowest and highest, both inclusive.
pub fn bucket_bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * SUB {
        return (i, i);
    }
    let e = (i - 2 * SUB) / SUB + SUB_BITS as u64 + 1;
    let m = SUB + (i - 2 * SUB) % SUB;
    let shift = e - SUB_BITS as u64;
    (m << shift, ((m + 1) << shift) - 1)
}

/// The rank of percentile `p` among `n` values: the smallest count with at least p % at or
/// below it (HdrHistogram's rule), at least 1.
pub fn rank(p: f64, n: u64) -> u64 {
    (((p / 100.0) * n as f64).ceil() as u64).clamp(1, n.max(1))
}

/// The histograms of an interval's seconds as an I/O thread records them: one dense block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecondHists {
    counts: Vec<u32>,
}

impl SecondHists {
    /// `n` empty seconds.
    pub fn with_seconds(n: usize) -> Self {
        Self { counts: vec![0; n * BUCKETS] }
    }

    pub fn seconds(&self) -> usize {
        self.counts.len() / BUCKETS
    }

    /// Records a latency in second `si` (ignored beyond the interval's seconds: the caller
    /// clamps its index to them).
    #[inline]
    pub fn record(&mut self, si: usize, ns: u64) {
        if let Some(c) = self.counts.get_mut(si * BUCKETS + bucket_of(ns)) {
            *c = c.saturating_add(1);
        }
    }

    /// Records `n` latencies of `ns` each in second `si`.
    pub fn record_n(&mut self, si: usize, ns: u64, n: u64) {
        if let Some(c) = self.counts.get_mut(si * BUCKETS + bucket_of(ns)) {
            *c = c.saturating_add(n.min(u32::MAX as u64) as u32);
        }
    }

    /// Empties every second, keeping the memory.
    pub fn reset(&mut self) {
        self.counts.fill(0);
    }

    /// Adds `other`'s counts second by second (exact; grows to the longer of the two).
    pub fn merge(&mut self, other: &SecondHists) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a = a.saturating_add(*b);
        }
    }

    /// Second `si`'s counts, by bucket (empty beyond the seconds held).
    pub fn second(&self, si: usize) -> &[u32] {
        self.counts.get(si * BUCKETS..(si + 1) * BUCKETS).unwrap_or(&[])
    }

    /// Second `si` in its sparse form.
    pub fn get(&self, si: usize) -> SecondHist {
        SecondHist {
            buckets: self.second(si).iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, &c)| (i as u16, c)).collect(),
        }
    }

    /// Every second in its sparse form.
    pub fn to_sparse(&self) -> Vec<SecondHist> {
        (0..self.seconds()).map(|si| self.get(si)).collect()
    }

    /// Dense seconds from sparse ones (what an agent sent): `n` seconds, the missing empty.
    pub fn from_sparse(list: &[SecondHist], n: usize) -> Self {
        let mut out = Self::with_seconds(n.max(list.len()));
        for (si, h) in list.iter().enumerate() {
            let row = &mut out.counts[si * BUCKETS..(si + 1) * BUCKETS];
            for &(i, c) in &h.buckets {
                row[i as usize] = c;
            }
        }
        out
    }
}

/// One second's histogram, sparse: its non-empty buckets in order, as (bucket, count).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecondHist {
    buckets: Vec<(u16, u32)>,
}

impl SecondHist {
    /// A histogram of the given latencies (tests, and whoever builds one by hand).
    pub fn of(values: impl IntoIterator<Item = u64>) -> Self {
        let mut d = SecondHists::with_seconds(1);
        for v in values {
            d.record(0, v);
        }
        d.get(0)
    }

    pub fn count(&self) -> u64 {
        self.buckets.iter().map(|&(_, c)| c as u64).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    /// Its non-empty buckets as (lowest ns, highest ns, count), in order.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.buckets.iter().map(|&(i, c)| {
            let (lo, hi) = bucket_bounds(i as usize);
            (lo, hi, c as u64)
        })
    }

    /// Its non-empty buckets as (bucket index, count).
    pub fn raw(&self) -> &[(u16, u32)] {
        &self.buckets
    }

    /// The latency at percentile `p` (0..=100) in ns: the highest value of the bucket holding
    /// its rank, at most `max_ns` (the second's exact maximum; `u64::MAX` when not known). 0
    /// when empty.
    pub fn percentile_ns(&self, p: f64, max_ns: u64) -> u64 {
        let r = rank(p, self.count());
        let mut seen = 0u64;
        for (lo, hi, c) in self.buckets() {
            seen += c;
            if seen >= r {
                return hi.min(max_ns).max(lo);
            }
        }
        0
    }

    /// Adds `other`'s counts (exact).
    pub fn merge(&mut self, other: &SecondHist) {
        let mut out = Vec::with_capacity(self.buckets.len() + other.buckets.len());
        let (mut a, mut b) = (self.buckets.iter().peekable(), other.buckets.iter().peekable());
        loop {
            match (a.peek(), b.peek()) {
                (Some(&&(i, x)), Some(&&(j, y))) if i == j => {
                    out.push((i, x.saturating_add(y)));
                    a.next();
                    b.next();
                }
                (Some(&&x), Some(&&y)) => {
                    if x.0 < y.0 {
                        out.push(x);
                        a.next();
                    } else {
                        out.push(y);
                        b.next();
                    }
                }
                (Some(&&x), None) => {
                    out.push(x);
                    a.next();
                }
                (None, Some(&&y)) => {
                    out.push(y);
                    b.next();
                }
                (None, None) => break,
            }
        }
        self.buckets = out;
    }

    /// The sparse encoding (see the module doc); empty bytes for an empty histogram.
    pub fn encode(&self) -> Vec<u8> {
        if self.buckets.is_empty() {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(1 + self.buckets.len() * 3);
        out.push(FORMAT);
        let mut next = 0u16;
        for &(i, c) in &self.buckets {
            if i > next {
                put_varint(&mut out, 2 * (i - next) as u64 + 1);
            }
            put_varint(&mut out, 2 * c as u64);
            next = i + 1;
        }
        out
    }

    /// Reads [`SecondHist::encode`]'s bytes, checking everything (they come from agents and
    /// database files): the format, bucket indices within range and increasing, counts of 1 to
    /// 2^32 − 1, no trailing bytes, a bounded length.
    pub fn decode(bytes: &[u8]) -> Result<SecondHist, String> {
        if bytes.is_empty() {
            return Ok(SecondHist::default());
        }
        if bytes.len() > MAX_ENCODED {
            return Err(format!("a second's histogram of {} bytes (at most {MAX_ENCODED})", bytes.len()));
        }
        if bytes[0] != FORMAT {
            return Err(format!("a second's histogram in format {} (this iocurve reads {FORMAT})", bytes[0]));
        }
        let mut rest = &bytes[1..];
        let mut buckets = Vec::new();
        let mut next = 0u64;
        while !rest.is_empty() {
            let v = take_varint(&mut rest)?;
            if v & 1 == 1 {
                // A run of empty buckets.
                next = next.saturating_add(v >> 1);
                continue;
            }
            let (i, count) = (next, v >> 1);
            if i >= BUCKETS as u64 {
                return Err(format!("a second's histogram names bucket {i} (there are {BUCKETS})"));
            }
            if count == 0 || count > u32::MAX as u64 {
                return Err(format!("a second's histogram has a bucket of {count} I/Os (1 to {})", u32::MAX));
            }
            buckets.push((i as u16, count as u32));
            next = i + 1;
        }
        Ok(SecondHist { buckets })
    }
}

/// Checks that an interval's second histograms fit its samples: none (not recorded), or one per
/// sample holding exactly the sample's I/Os. For what arrives from agents and database files.
pub fn check(samples: &[crate::Sample], hists: &[SecondHist]) -> Result<(), String> {
    if hists.is_empty() {
        return Ok(());
    }
    if hists.len() != samples.len() {
        return Err(format!("{} second histograms for {} samples", hists.len(), samples.len()));
    }
    for (k, (s, h)) in samples.iter().zip(hists).enumerate() {
        if h.count() != s.ops {
            return Err(format!("second {k}: a histogram of {} I/Os for a sample of {}", h.count(), s.ops));
        }
    }
    Ok(())
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn take_varint(rest: &mut &[u8]) -> Result<u64, String> {
    let mut v = 0u64;
    for k in 0..10 {
        let Some((&b, tail)) = rest.split_first() else {
            return Err("a second's histogram ends in the middle of a number".into());
        };
        *rest = tail;
        v |= ((b & 0x7f) as u64) << (7 * k);
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("a second's histogram has a number longer than 64 bits".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_tile_the_range_and_are_narrow() {
        assert_eq!(BUCKETS, 592);
        let mut next = 0;
        for i in 0..BUCKETS {
            let (lo, hi) = bucket_bounds(i);
            assert_eq!(lo, next, "bucket {i} starts where {} ended", i.saturating_sub(1));
            assert!(hi >= lo);
            assert!((hi - lo + 1) * SUB <= lo.max(SUB), "bucket {i}: {lo}..={hi} at most 1/16 of its value");
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi), i);
            next = hi + 1;
        }
        assert_eq!(next, 1 << MAX_EXP);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1, "beyond the range: the last bucket");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        // Another format; a count of 0; a run past the last bucket, then a count; a number cut off.
        for bad in [&[2u8, 2][..], &[1, 0], &[1, 0xa1, 0x09, 2], &[1, 0xff, 0xff, 0xff, 0xff, 0xff]] {
            assert!(SecondHist::decode(bad).is_err(), "{bad:?}");
        }
        let long = vec![1u8; MAX_ENCODED + 1];
        assert!(SecondHist::decode(&long).unwrap_err().contains("at most"));
        // Indices that wrap are out of range, not a panic.
        let mut wrap = vec![1u8];
        put_varint(&mut wrap, u64::MAX);
        put_varint(&mut wrap, u64::MAX);
        put_varint(&mut wrap, 2);
        assert!(SecondHist::decode(&wrap).is_err());
    }

    #[test]
    fn the_dense_block_records_per_second_and_resets() {
        let mut d = SecondHists::with_seconds(3);
        d.record(0, 100);
        d.record(2, 5_000_000);
        d.record(2, 5_000_001);
        d.record(3, 7); // beyond: ignored
        assert_eq!(d.get(0).count(), 1);
        assert_eq!(d.get(1).count(), 0);
        assert_eq!(d.get(2).count(), 2);
        let back = SecondHists::from_sparse(&d.to_sparse(), 3);
        assert_eq!(back, d);
        d.reset();
        assert_eq!(d, SecondHists::with_seconds(3));
    }

    fn exact(sorted: &[u64], p: f64) -> u64 {
        sorted[rank(p, sorted.len() as u64) as usize - 1]
    }

    proptest! {
        /// Threads, hosts and intervals merge by adding counts: the merge of parts is the
        /// histogram of all values, in the dense and the sparse form.
        #[test]
        fn merge_of_parts_equals_histogram_of_all(
            values in prop::collection::vec(0u64..5_000_000_000_000, 1..400),
            split in 1usize..6,
        ) {
            let all = SecondHist::of(values.iter().copied());
            let mut dense = SecondHists::with_seconds(1);
            let mut sparse = SecondHist::default();
            for k in 0..split {
                let part: Vec<u64> = values.iter().copied().skip(k).step_by(split).collect();
                let mut d = SecondHists::with_seconds(1);
                part.iter().for_each(|&v| d.record(0, v));
                dense.merge(&d);
                sparse.merge(&SecondHist::of(part));
            }
            prop_assert_eq!(&dense.get(0), &all);
            prop_assert_eq!(&sparse, &all);
            prop_assert_eq!(all.count(), values.len() as u64);
        }

        #[test]
        fn encoding_round_trips(values in prop::collection::vec(0u64..u64::MAX, 0..300)) {
            let h = SecondHist::of(values);
            let bytes = h.encode();
            prop_assert!(bytes.len() <= MAX_ENCODED);
            prop_assert_eq!(SecondHist::decode(&bytes).unwrap(), h);
        }

        /// A percentile is never below the true one and at most 1/16 above it.
        #[test]
        fn percentiles_within_documented_error(
            mut values in prop::collection::vec(1u64..100_000_000_000, 1..500),
            p in prop::sample::select(vec![0.0, 50.0, 90.0, 99.0, 99.9, 100.0]),
        ) {
            let h = SecondHist::of(values.iter().copied());
            values.sort_unstable();
            let max = *values.last().unwrap();
            let (truth, got) = (exact(&values, p), h.percentile_ns(p, max));
            prop_assert!(got >= truth && got as f64 <= truth as f64 * (1.0 + 1.0 / 16.0) + 1.0,
                "p{p}: exact {truth}, histogram {got}");
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
            let _ = SecondHist::decode(&bytes);
        }
    }
}
