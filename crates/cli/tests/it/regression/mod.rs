//! Regression tests: each guards a bug an issue named, is named after the bug
//! (`regression_…`) and says in its comment which issue and finding it guards. They assert on
//! the protected bytes or the exact figure, and fail without their fix.
//! `cargo test -p iocurve --test it --test user regression::` runs them all (`user/regression/`
//! has those an ordinary user can run). One module per subject, using
//! that subject's helpers.

mod agents;
mod deploy;
mod everyday;
mod faults;
mod metrics;
mod precondition;
mod runs;
mod storage_faults;
mod store;
mod stuck;
mod verify;
