//! The integration tests, one binary: the real `iocurve` binary on real files, loop devices,
//! the fault device, agents in network namespaces and a real browser. They need root, as the
//! project's machines provide. One module per subject; tests named `regression_…` guard a
//! finding of an issue (`cargo test -p iocurve --test it regression_` runs them all).
//!
//! `fallback.rs` stays a binary of its own: it disables io_uring machine-wide for a moment, and
//! `cargo test` runs test binaries one at a time, so no other test sees it.

mod browser;
mod util;

mod agents;
mod data;
mod deploy;
mod everyday;
mod faultdev;
mod faults;
mod fio;
mod fio_plot;
mod formats;
mod launch;
mod metrics;
mod precondition;
mod report;
mod runs;
mod size;
mod slurm;
mod storage_faults;
mod store;
mod stuck;
mod verify;
mod write_safety;
