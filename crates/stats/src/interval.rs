//! What one I/O thread (and, merged, a whole host) measured in one interval.

use crate::LatencyHistogram;

/// I/O errors by errno. Errors are rare, so a short list beats a map; it only grows when a
/// new errno appears, which is off the hot path by definition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts(pub Vec<(i32, u64)>);

impl ErrorCounts {
    pub fn add(&mut self, errno: i32, n: u64) {
        match self.0.iter_mut().find(|(e, _)| *e == errno) {
            Some((_, c)) => *c += n,
            None => {
                self.0.push((errno, n));
                self.0.sort_unstable();
            }
        }
    }

    pub fn total(&self) -> u64 {
        self.0.iter().map(|(_, n)| n).sum()
    }

    pub fn merge(&mut self, other: &ErrorCounts) {
        for &(e, n) in &other.0 {
            self.add(e, n);
        }
    }
}

/// Counters and latency histogram of one I/O direction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DirStats {
    pub hist: LatencyHistogram,
    pub ops: u64,
    pub bytes: u64,
    pub errors: ErrorCounts,
}

impl DirStats {
    #[inline]
    pub fn record(&mut self, lat_ns: u64, bytes: u64) {
        self.hist.record(lat_ns);
        self.ops += 1;
        self.bytes += bytes;
    }

    pub fn merge(&mut self, other: &DirStats) {
        self.hist.merge(&other.hist);
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.errors.merge(&other.errors);
    }
}

/// One sample: a slice (one second, or shorter for sub-second intervals) of a step.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    pub ops: u64,
    pub bytes: u64,
    pub lat_sum_ns: u64,
    pub lat_max_ns: u64,
    pub errors: u64,
}

impl Sample {
    #[inline]
    pub fn record(&mut self, lat_ns: u64, bytes: u64) {
        self.ops += 1;
        self.bytes += bytes;
        self.lat_sum_ns += lat_ns;
        self.lat_max_ns = self.lat_max_ns.max(lat_ns);
    }

    pub fn merge(&mut self, other: &Sample) {
        self.ops += other.ops;
        self.bytes += other.bytes;
        self.lat_sum_ns += other.lat_sum_ns;
        self.lat_max_ns = self.lat_max_ns.max(other.lat_max_ns);
        self.errors += other.errors;
    }

    pub fn mean_lat_ns(&self) -> f64 {
        if self.ops == 0 { 0.0 } else { self.lat_sum_ns as f64 / self.ops as f64 }
    }
}

/// Everything measured in one interval, by one thread or merged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntervalStats {
    pub read: DirStats,
    pub write: DirStats,
    /// Consecutive samples covering the interval, equally long.
    pub samples: Vec<Sample>,
}

impl IntervalStats {
    pub fn with_samples(n: usize) -> Self {
        Self { samples: vec![Sample::default(); n], ..Default::default() }
    }

    pub fn merge(&mut self, other: &IntervalStats) {
        self.read.merge(&other.read);
        self.write.merge(&other.write);
        if self.samples.len() < other.samples.len() {
            self.samples.resize(other.samples.len(), Sample::default());
        }
        for (a, b) in self.samples.iter_mut().zip(&other.samples) {
            a.merge(b);
        }
    }

    pub fn ops(&self) -> u64 {
        self.read.ops + self.write.ops
    }

    pub fn bytes(&self) -> u64 {
        self.read.bytes + self.write.bytes
    }

    /// Both directions in one histogram.
    pub fn combined_hist(&self) -> LatencyHistogram {
        let mut h = self.read.hist.clone();
        h.merge(&self.write.hist);
        h
    }

    pub fn errors(&self) -> ErrorCounts {
        let mut e = self.read.errors.clone();
        e.merge(&self.write.errors);
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counters_and_aligns_samples() {
        let mut a = IntervalStats::with_samples(2);
        a.read.record(100, 4096);
        a.samples[0].record(100, 4096);
        let mut b = IntervalStats::with_samples(2);
        b.write.record(300, 8192);
        b.write.errors.add(5, 1);
        b.samples[1].record(300, 8192);
        a.merge(&b);
        assert_eq!(a.ops(), 2);
        assert_eq!(a.bytes(), 12288);
        assert_eq!(a.errors().total(), 1);
        assert_eq!(a.samples[0].ops, 1);
        assert_eq!(a.samples[1].lat_max_ns, 300);
        assert_eq!(a.combined_hist().count(), 2);
    }

    #[test]
    fn error_counts_stay_sorted_and_summed() {
        let mut e = ErrorCounts::default();
        e.add(5, 2);
        e.add(28, 1);
        e.add(5, 3);
        assert_eq!(e.0, vec![(5, 5), (28, 1)]);
        assert_eq!(e.total(), 6);
    }
}
