//! What one step measured, as the engine hands it to the analysis: pure data.

use crate::{CpuUsage, IntervalStats};

#[derive(Debug, Clone)]
pub struct IntervalRecord {
    pub stats: IntervalStats,
    /// Host CPU over the interval.
    pub cpu: CpuUsage,
    pub duration_s: f64,
}

#[derive(Debug, Clone)]
pub struct StepRecord {
    pub workers: u32,
    pub queue_depth: u32,
    /// I/O threads that ran the step.
    pub threads: usize,
    pub interval_s: f64,
    /// Length of one sample (1 s, or the interval when shorter).
    pub sample_s: f64,
    /// Complete intervals only, in order.
    pub intervals: Vec<IntervalRecord>,
    /// Stopped before all planned intervals ran.
    pub interrupted: bool,
}
