//! The integration tests, one binary: the real `iocurve` binary on real files, loop devices,
//! the fault device, agents in network namespaces and a real browser. They need root, as the
//! project's machines provide. One module per subject, and `regression/` for the tests that
//! guard a bug an issue named (`cargo test -p iocurve --test it regression::` runs them all).
//!
//! `fallback.rs` stays a binary of its own: it disables io_uring machine-wide for a moment, and
//! `cargo test` runs test binaries one at a time, so no other test sees it.

mod browser;
/// The shared fixtures (crates/testkit), under the name every module knows them by.
use iocurve_testkit as util;

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
mod regression;
mod report;
mod runs;
mod size;
mod slurm;
mod storage_faults;
mod store;
mod stuck;
mod verify;
mod write_safety;
