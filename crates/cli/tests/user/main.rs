//! The integration tests an ordinary user can run: the real `iocurve` binary on files in
//! temporary directories that user can write, with no root (no loop device, mount, network
//! namespace or cgroup) and no tool beyond what the tests build, each quick. They are the
//! integration part of the fast lane (`scripts/test --fast`, `cargo fast`). Everything else is
//! in `it/`: the tests that need root (they skip without it, and fail so under `scripts/test`),
//! that need a tool the full lane installs (fio, Prometheus, faketime, Python's venv, …), or
//! that take seconds each.
//!
//! The same layout as `it/`: one module per subject, `regression/` for tests guarding a bug an
//! issue named (`cargo test -p iocurve --test user --test it regression::` runs them all).

// A test reads best as one story from setup to assertion: the 150-line bound
// (`too_many_lines`, issue 38) is for the code under test.
#![allow(clippy::too_many_lines)]

use iocurve_testkit as util;

mod agents;
mod data;
mod deploy;
mod everyday;
mod faults;
mod fio;
mod flatfile;
mod grids;
mod launch;
mod layout;
mod marks;
mod overview;
mod precondition;
mod regression;
mod replay;
mod runs;
mod scale;
mod size;
mod slurm;
mod store;
mod together;
mod trace_cli;
mod trims;
