//! The integration tests of the full lane, one binary: the real `iocurve` binary on real files,
//! loop devices, the fault device, agents in network namespaces, sshd, Slurm, Prometheus. A test
//! here that needs root starts with `needs_root!()`: without root it skips with a message, and
//! under `scripts/test` (CI, root) a skip is a failure. Others need a tool `scripts/test`
//! installs (fio, Prometheus, faketime, Python's venv, …) or take seconds each. The quick ones an
//! ordinary user can run are in `user/`, the fast lane's. One module per subject, and `regression/` for the tests that guard
//! a bug an issue named (`cargo test -p iocurve --test it --test user regression::` runs them
//! all).
//!
//! Two stay binaries of their own: `fallback.rs` disables io_uring machine-wide for a moment,
//! so that no other test may run beside it (scripts/run-tests runs it first, alone), and
//! `report/` loads the HTML report in a browser.

// A test reads best as one story from setup to assertion: the 150-line bound
// (`too_many_lines`, issue 38) is for the code under test.
#![allow(clippy::too_many_lines)]

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
mod grids;
mod hosts;
mod launch;
mod luns;
mod marks;
mod metrics;
mod pods;
mod precondition;
mod regression;
mod replay;
mod runs;
mod shapes;
mod size;
mod slurm;
mod storage_faults;
mod store;
mod stuck;
mod together;
mod trims;
mod verify;
mod write_safety;
