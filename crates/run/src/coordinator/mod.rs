//! The coordinator: connects to the agents (or starts the in-process one), measures their
//! clocks, starts every step on all of them at one moment, follows their streams and merges
//! their intervals exactly; the precondition and verification passes likewise. The interval
//! merger and the clock estimate are pure units, tested without gRPC. The agents and the wire
//! are `iocurve_net`'s.

pub mod client;
pub mod clock;
mod coordinate;
pub use coordinate::{HostIoLog, Lost};
pub(crate) use coordinate::{all_lost, host_share};
pub mod merge;
mod passes;
pub mod relay;
mod summaries;
