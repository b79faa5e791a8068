//! The typed test plan: what to run, against which targets, with which ramp.
//!
//! A plan comes from a TOML file or a built-in suite (embedded TOML, parsed by the same code),
//! optionally overridden from the command line. Every workload key is defined once, by its row
//! in [`options`]: the `[defaults]` table, each `[[workloads]]` entry and the CLI overrides are
//! all values of one struct made from the rows, layered in that order. Resolution validates
//! everything and reports the file, line and key (or the CLI option) of a bad value.
//!
//! This crate never does I/O beyond reading the plan file itself.

#[macro_use]
mod declare;
pub mod backend;
pub mod claims;
pub mod error;
pub mod fio;
pub mod keys;
pub mod links;
mod locate;
pub mod model;
pub mod options;
pub mod pace;
pub mod reclaim;
pub mod replay;
mod resolve;
pub mod resolved;
pub mod size;
pub mod skew;
mod spec;
pub mod suites;

pub use backend::{Availability, ThreadModel};
pub use claims::Claim;
pub use error::PlanError;
pub use keys::PlanFile;
pub use model::{
    Arrival, Backend, BlockSize, DATA_SECTOR, DataPattern, FRONTEND_MAX_FRACTION, Fault, FaultKind,
    MIN_RANDOM_PER_SECTOR, OnError, Overload, Pattern, Remap, STEADY_WINDOW, Split, SteadyState, WorkingSet,
};
pub use options::{Workload, WorkloadKeys};
pub use pace::{Bursts, Think, ThinkTime};
pub use reclaim::{Reclaim, ReclaimKeys};
pub use resolve::{Overrides, check_workload, load_file, parse_str, read_plan_text, writing_workload};
pub use resolved::{
    HostSpec, MAX_WORKERS_SCALE, Plan, RampStep, SLA_SEARCH_MAX_PROBES, TargetGroup, is_glob, scaled_workers,
};
pub use size::{format_size, parse_size};
pub use skew::{Distribution, HotLayout, Placement};
pub use spec::{BlockSizeSpec, WorkingSetSpec};
