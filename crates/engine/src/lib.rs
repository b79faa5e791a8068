//! The engine: opens targets (with the write-safety rules), generates offsets and data, drives
//! I/O through a back-end and timestamps every I/O. It is the only part of iocurve that does
//! storage I/O or reads clocks for latency; it formats nothing.
//!
//! A worker is a logical closed-loop stream, not a thread: the io_uring and null back-ends
//! multiplex many workers onto a few I/O threads, each with its own ring, histograms and
//! counters, handed over at interval boundaries. The psync back-end runs one thread per
//! outstanding I/O as a fallback and cross-check.

pub mod arrival;
pub mod backend;
pub mod budget;
mod end;
pub mod host;
pub mod iolog;
pub mod ops;
pub mod precondition;
pub mod reclaim;
pub mod replay;
pub mod step;
mod think;
pub mod together;
mod worker;

// The rooms of their own (issue 38): the data of written blocks, the targets and their safety,
// verification. Their paths stay as they were.
pub(crate) use iocurve_data::buffer;
pub use iocurve_data::{data, rng};
pub use iocurve_target::TargetError as EngineError;
pub use iocurve_target::{fullio, safety, scratch, target, walk};
pub use iocurve_verify::{journal, keeper, verify};

/// How long a pass outside the measured steps (preconditioning, verification) waits for a write
/// or read before it takes the storage for stopped, unless told (`--stuck-after-s`).
pub const PASS_STUCK_AFTER_S: f64 = 30.0;

pub use end::StepEnd;
pub use iocurve_stats::{Rates, StepProgress};
pub use step::{NoObserver, StepConfig, StepObserver, run_step};
pub use target::{OpenOptions, Target, TargetKind, TargetSet};
pub use worker::samples_per_interval;
