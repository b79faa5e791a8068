//! Targets and the code that must never write the wrong device: a target opened through one
//! descriptor that every check and all I/O use ([`target`]), the write-safety rules
//! (signatures, mounts, holders, other processes, locks, an agent's allow list: [`safety`]),
//! scratch files and their identity ([`scratch`]), globs ([`walk`]), and whole transfers for the
//! passes that are not measured ([`fullio`]). It does no measured I/O.

pub mod device;
mod error;
pub mod fdctl;
pub mod fullio;
pub mod process;
pub mod safety;
pub mod scratch;
pub mod target;
pub mod walk;

pub use error::TargetError;
pub use target::{OpenOptions, Target, TargetKind, TargetSet};
