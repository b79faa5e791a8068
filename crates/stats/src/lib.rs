//! Measurement primitives shared by the engine (which fills them) and the analysis (which reads
//! them): latency histograms, per-direction counters, per-second samples and host CPU.
//!
//! Everything here is pure and clock-free: callers pass timestamps and durations in. That keeps
//! the hot path of the engine free of hidden syscalls and makes every piece testable alone.

pub mod array;
pub mod cpu;
pub mod date;
pub mod histogram;
pub mod host;
pub mod interval;
pub mod marks;
pub mod sample;
pub mod seconds;
pub mod steady;
pub mod step;
pub mod target;

pub use cpu::{CpuMean, CpuTimes, CpuUsage, IoCpu};
pub use histogram::LatencyHistogram;
pub use host::HostFacts;
pub use interval::{DirStats, ErrorCounts, FinalVerification, IntervalStats, RateStats, UNKNOWN_TARGET, VerifyCounts};
pub use marks::Mark;
pub use sample::Sample;
pub use seconds::{SecondHist, SecondHists};
pub use step::{Drain, HostClock, HostRecord, IntervalRecord, Rates, StepProgress, StepRecord, TargetFigures};
pub use target::{DeviceIo, DeviceQueue, TargetStats};
