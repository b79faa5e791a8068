//! The integration tests, one binary: the real `iocurve` binary on real files, loop devices,
//! the fault device, agents in network namespaces and a real browser. They need root, as the
//! project's machines provide. One module per subject, and `regression/` for the tests that
//! guard a bug an issue named (`cargo test -p iocurve --test it regression::` runs them all).
//!
//! Two stay binaries of their own, since `cargo test` runs test binaries one at a time:
//! `fallback.rs` disables io_uring machine-wide for a moment, so that no other test sees it, and
//! `report/` judges the HTML report's render time in a browser, which no other test may load
//! (beside this binary's tests it took 2.7 times as long: 1.1 s against 0.4 s).

use iocurve_testkit as util;
/// The shared fixtures (crates/testkit), under the names every module knows them by.
use iocurve_testkit::browser;

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
mod runs;
mod size;
mod slurm;
mod storage_faults;
mod store;
mod stuck;
mod verify;
mod write_safety;
