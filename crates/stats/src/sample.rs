//! One sample of a step: a second (or an interval's slice) of its I/Os.

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
        self.ops = self.ops.saturating_add(other.ops);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.lat_sum_ns = self.lat_sum_ns.saturating_add(other.lat_sum_ns);
        self.lat_max_ns = self.lat_max_ns.max(other.lat_max_ns);
        self.errors = self.errors.saturating_add(other.errors);
    }

    pub fn mean_lat_ns(&self) -> f64 {
        if self.ops == 0 { 0.0 } else { self.lat_sum_ns as f64 / self.ops as f64 }
    }
}
