//! Errors of targets, their safety rules and the passes on them (the engine's `EngineError`).
//! Each says what failed, on which target, and what the user can do.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// The user asked for something that cannot be done as asked (exit code 2).
    #[error("{0}")]
    Input(String),
    /// An agent's allow list does not admit what was asked (exit code 2): told apart so that the
    /// agent's audit trail records it as a refusal.
    #[error("{0}")]
    OutsideAllowList(String),
    /// Writing was refused by the safety rules (exit code 2).
    #[error(
        "refusing to write to {path}: {reasons}.\n  If you are sure its contents may be destroyed, name it exactly: --allow-write {path}"
    )]
    WriteRefused { path: PathBuf, reasons: String },
    /// An operating-system call failed during setup or a step (exit code 1).
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

impl TargetError {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        TargetError::Io { what: what.into(), source }
    }

    /// True when the problem is in the user's input (plan, options, targets), not the system.
    pub fn is_input_error(&self) -> bool {
        matches!(self, TargetError::Input(_) | TargetError::OutsideAllowList(_) | TargetError::WriteRefused { .. })
    }
}
