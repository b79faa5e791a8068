//! Regression tests an ordinary user can run: each guards a bug an issue named (see
//! `it/regression/` for those that need root).

mod agents;
mod everyday;
mod metrics;
mod runs;
