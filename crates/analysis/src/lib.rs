//! Analysis: from what the engine measured to what a storage engineer decides on.
//!
//! Per step: throughput, latency statistics, interval steadiness and quality flags. Per
//! workload: speed (1 worker), optimum (last step up to which throughput grows faster than
//! latency), maximum (highest throughput) and the lowest latency seen. The result types here
//! are the `--json` contract. Pure: no I/O, no clocks.

pub mod array;
pub mod assemble;
pub mod claims;
pub mod compare;
pub mod economics;
pub mod format;
pub mod overview;
pub mod pairing;
pub mod reclaim;
pub mod result;
pub mod sizing;
pub mod step;
pub mod targets;
mod together;
pub mod workload;

pub use assemble::RunFacts;
pub use compare::{At, Impact, compare};
/// The SNIA steady-state rule (pure, in `iocurve_stats` so that the engine can end a step by it).
pub use iocurve_stats::steady;
pub use result::*;
pub use step::{FEWER_HOSTS, Thresholds, analyze_step, analyze_step_on, fewer_hosts_message};
pub use workload::{Compared, Maximum, NOISE_CAP, analyze_workload, compared, maximum_of, optimum_index, sla_index};
