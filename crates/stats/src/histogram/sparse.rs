//! A latency histogram's recorded buckets only (issue 46): what a coordinator or relay holds of
//! each host's interval. The full histogram spans 1 ns to 60 s at 3 digits — 27,648 buckets,
//! 216 KiB — while an interval's latencies fill a few hundred; allocating, zeroing, adding and
//! walking the empty ones was most of the coordinator's cost per host (BENCHMARKS.md).
//!
//! Every figure is computed with `hdrhistogram`'s arithmetic, in its order, so that a sparse
//! histogram answers exactly as the full one would: the same buckets, the mean and deviation to
//! the bit, the same percentiles (the module's tests compare them over random histograms).

/// HDR's bucket arithmetic for a lowest discernible value of 1 ns and `digits` significant
/// digits: which index holds a value, which values an index holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Scheme {
    pub digits: u8,
    half_magnitude: u32,
    sub_mask: u64,
    lz_base: u32,
}

impl Scheme {
    /// None beyond HDR's 5 digits.
    pub fn new(digits: u8) -> Option<Scheme> {
        if digits > 5 {
            return None;
        }
        // As `Histogram::new_with_bounds` derives them (lowest 1: unit magnitude 0).
        let largest = 2 * 10_u32.pow(u32::from(digits));
        let count_magnitude = f64::from(largest).log2().ceil() as u32;
        Some(Scheme {
            digits,
            half_magnitude: count_magnitude - 1,
            sub_mask: (1u64 << count_magnitude) - 1,
            lz_base: 64 - count_magnitude,
        })
    }

    fn half(self) -> u64 {
        1 << self.half_magnitude
    }

    fn bucket_for(self, value: u64) -> u32 {
        self.lz_base - (value | self.sub_mask).leading_zeros()
    }

    pub fn index_for(self, value: u64) -> usize {
        let bucket = self.bucket_for(value);
        let sub = value >> bucket;
        // ((bucket + 1) << half) + sub - half: sub ≥ half beyond bucket 0, so it never goes below 0.
        (((u64::from(bucket) + 1) << self.half_magnitude) + sub - self.half()) as usize
    }

    /// The lowest value of bucket `index`.
    pub fn value_for(self, index: usize) -> u64 {
        let index = index as u64;
        let bucket = (index >> self.half_magnitude) as i64 - 1;
        let sub = (index & (self.half() - 1)) + self.half();
        if bucket < 0 { sub - self.half() } else { sub << bucket }
    }

    fn range(self, value: u64) -> u64 {
        1 << self.bucket_for(value)
    }

    pub fn lowest_equivalent(self, value: u64) -> u64 {
        let bucket = self.bucket_for(value);
        (value >> bucket) << bucket
    }

    pub fn highest_equivalent(self, value: u64) -> u64 {
        if value == u64::MAX { u64::MAX } else { self.lowest_equivalent(value).saturating_add(self.range(value)) - 1 }
    }

    fn median_equivalent(self, value: u64) -> u64 {
        self.lowest_equivalent(value) + (self.range(value) >> 1)
    }

    /// How many buckets a full histogram of this scheme tracking up to `high` has (what its
    /// encoding may index), as `Histogram::resize` counts them.
    pub fn counts_len(self, high: u64) -> usize {
        let mut untrackable = self.sub_mask + 1;
        let mut buckets = 1u64;
        while untrackable <= high {
            if untrackable > u64::MAX / 2 {
                buckets += 1;
                break;
            }
            untrackable <<= 1;
            buckets += 1;
        }
        ((buckets + 1) * self.half()) as usize
    }
}

/// The buckets that hold counts, ascending by index, counts above zero.
#[derive(Clone, Debug)]
pub(super) struct Sparse {
    pub scheme: Scheme,
    /// The highest trackable value its encoding states (what a full histogram is sized for).
    pub highest: u64,
    pub counts: Vec<(u32, u64)>,
    pub total: u64,
}

impl Sparse {
    pub fn empty(scheme: Scheme, highest: u64) -> Sparse {
        Sparse { scheme, highest, counts: Vec::new(), total: 0 }
    }

    pub fn min(&self) -> u64 {
        match self.counts.first() {
            None | Some(&(0, _)) => 0,
            Some(&(i, _)) => self.scheme.value_for(i as usize),
        }
    }

    pub fn max(&self) -> u64 {
        self.counts.last().map_or(0, |&(i, _)| self.scheme.highest_equivalent(self.scheme.value_for(i as usize)))
    }

    /// Each bucket's (highest equivalent value, count), as `iter_recorded` gives them.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.counts.iter().map(|&(i, c)| (self.scheme.highest_equivalent(self.scheme.value_for(i as usize)), c))
    }

    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        // `Histogram::mean`'s fold, term for term.
        self.buckets()
            .fold(0.0_f64, |sum, (v, c)| sum + self.scheme.median_equivalent(v) as f64 * c as f64 / self.total as f64)
    }

    pub fn stdev(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let mean = self.mean();
        let squares = self.buckets().fold(0.0_f64, |sum, (v, c)| {
            let dev = self.scheme.median_equivalent(v) as f64 - mean;
            sum + (dev * dev) * c as f64
        });
        (squares / self.total as f64).sqrt()
    }

    /// `Histogram::value_at_percentile`.
    pub fn percentile(&self, p: f64) -> u64 {
        // As hdrhistogram caps it (`min` would make NaN 1.0).
        let quantile = if p / 100.0 > 1.0 { 1.0 } else { p / 100.0 };
        let wanted = ((quantile * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for &(i, c) in &self.counts {
            seen = seen.saturating_add(c);
            if seen >= wanted {
                let v = self.scheme.value_for(i as usize);
                return if quantile == 0.0 {
                    self.scheme.lowest_equivalent(v)
                } else {
                    self.scheme.highest_equivalent(v)
                };
            }
        }
        0
    }

    /// Counts at or below `ns`'s bucket.
    pub fn count_at_or_below(&self, ns: u64) -> u64 {
        let last = self.scheme.index_for(ns);
        self.counts.iter().take_while(|&&(i, _)| i as usize <= last).fold(0u64, |t, &(_, c)| t.saturating_add(c))
    }

    /// Adds `other`'s counts (exact): bucket by bucket where the schemes agree, else each of
    /// its buckets' lowest value into this scheme's bucket, as `Histogram::add` does.
    pub fn merge(&mut self, other: &Sparse) {
        if other.total == 0 {
            return;
        }
        let (mine, theirs) = (self.scheme, other.scheme);
        let mapped = other.counts.iter().map(|&(i, c)| {
            if mine == theirs { (i, c) } else { (mine.index_for(theirs.value_for(i as usize)) as u32, c) }
        });
        // Room for both, so that the merge never grows the list (a grown one holds up to twice
        // what it needs: 188 KiB of every host's step totals at the coordinator, heaptrack of 256
        // simulated agents)...
        let mut out = Vec::with_capacity(self.counts.len() + other.counts.len());
        let mut a = self.counts.iter().copied().peekable();
        for (i, c) in mapped {
            while let Some(&(j, d)) = a.peek() {
                if j >= i {
                    break;
                }
                out.push((j, d));
                a.next();
            }
            match (a.peek().copied(), out.last_mut()) {
                (Some((j, d)), _) if j == i => {
                    out.push((i, d.saturating_add(c)));
                    a.next();
                }
                // Two of theirs in one of my buckets (a finer scheme into a coarser one).
                (_, Some(last)) if last.0 == i => last.1 = last.1.saturating_add(c),
                _ => out.push((i, c)),
            }
        }
        out.extend(a);
        // ...and what the union did not take given back: intervals mostly fill the same buckets.
        out.shrink_to_fit();
        self.counts = out;
        self.total = self.total.saturating_add(other.total);
        self.highest = self.highest.max(other.highest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::Histogram;
    use proptest::prelude::*;

    proptest! {
        /// The scheme's arithmetic is `hdrhistogram`'s, at every value and digit count used.
        #[test]
        fn the_scheme_is_hdrhistograms(v in 0u64..u64::MAX, shift in 0u32..64, digits in 0u8..=5) {
            let v = v >> shift;
            let s = Scheme::new(digits).unwrap();
            let h = Histogram::<u64>::new_with_bounds(1, 2, digits).unwrap();
            prop_assert_eq!(s.lowest_equivalent(v), h.lowest_equivalent(v));
            prop_assert_eq!(s.highest_equivalent(v), h.highest_equivalent(v));
            prop_assert_eq!(s.median_equivalent(v), h.median_equivalent(v));
            prop_assert_eq!(s.value_for(s.index_for(v)), h.lowest_equivalent(v));
            // Neighbouring buckets have neighbouring indices.
            let next = h.next_non_equivalent(v);
            if next != u64::MAX && next > v {
                prop_assert_eq!(s.index_for(next), s.index_for(v) + 1);
            }
        }

        #[test]
        fn counts_len_is_the_full_histograms(high in 2u64..u64::MAX, digits in 0u8..=5) {
            let s = Scheme::new(digits).unwrap();
            let mut h = Histogram::<u64>::new_with_bounds(1, high, digits).unwrap();
            let len = s.counts_len(high);
            // The last index holds a count, one beyond does not exist.
            let top = s.value_for(len - 1);
            prop_assert!(h.record(top).is_ok(), "index {} of {len}", len - 1);
            prop_assert_eq!(h.buckets() as usize + 1, len >> s.half_magnitude);
        }
    }
}
