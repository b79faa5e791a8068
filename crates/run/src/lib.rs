//! iocurve's runner: a plan on its hosts — the targets opened, scratch files sized, the back-end
//! chosen, preconditioned and verified where asked — step by step into the results database and
//! the analysis.
//!
//! ```text
//! Runner::new(plan, hosts, options)   what to run, where, with which store and map
//!     .observe(&mut terminal)         who hears of it: progress, events, warnings, results
//!     .cancel(cancel)                 a Cancel another thread (or a signal) may set
//!     .run()                          -> Outcome: the result, its run id, what ended it
//! ```
//!
//! Nothing here prints: every line a user reads goes to an [`Observer`]. Cancellation is a
//! value ([`Cancel`]), not a global: several runs can share a process, and a test can stop one.
//! Local and multi-host runs share everything from the steps on: a local run drives one
//! in-process agent on the targets it opened, a multi-host run drives remote agents, both
//! through the same coordinator ([`cluster`]).

mod cancel;
pub mod cluster;
pub mod coordinator;
pub mod datameter;
mod error;
mod events;
mod execute;
pub mod iolog;
pub mod launch;
pub mod live;
pub mod marks;
mod observe;
mod options;
pub mod precondition;
mod ramp;
mod reclaim;
mod recorder;
pub mod replay;
mod runner;
pub mod search;
mod setup;
mod status;
pub mod threads;
pub mod time;
mod together;
pub mod verification;

pub use cancel::Cancel;
pub use error::Error;
pub use events::RunEvent;
pub use observe::{Observer, Observers, StepAt};
pub use options::{Hosts, RunOptions};
pub use runner::{
    AgentOptions, DEFAULT_SCRATCH, Runner, check_plan, default_target, open_existing_store, open_read_store, open_store,
};
pub use status::{Outcome, storage_verdict};
