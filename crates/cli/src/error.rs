//! Errors of the command line and their exit codes: 2 for bad input (plan, options, targets,
//! refused writes), 1 for failures of the tool or the host, 3 when the run finished but the
//! storage failed I/Os or a step completed none (see `run`), 4 when verification found lost,
//! corrupted or misplaced blocks, 130 for Ctrl-C.

use std::process::ExitCode;

use iocurve_engine::EngineError;
use iocurve_plan::PlanError;
use iocurve_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Plan(#[from] PlanError),
    #[error("{0}")]
    Engine(#[from] EngineError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Runtime(String),
    /// Ctrl-C before anything was measured (exit code 130).
    #[error("{0}")]
    Interrupted(String),
    /// The run's own policy ended it (`on_error = abort`, `--on-host-loss abort`): exit code 1,
    /// status `aborted`.
    #[error("{0}")]
    Aborted(String),
    /// Verification found lost, corrupted or misplaced blocks (exit code 4).
    #[error("{0}")]
    Verification(String),
}

impl CliError {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CliError::Plan(_) | CliError::Usage(_) => ExitCode::from(2),
            CliError::Engine(e) if e.is_input_error() => ExitCode::from(2),
            // A run id that does not exist is the user's input; anything else is the database.
            CliError::Store(StoreError::NoSuchRun(_)) => ExitCode::from(2),
            CliError::Engine(_) | CliError::Store(_) | CliError::Runtime(_) | CliError::Aborted(_) => ExitCode::from(1),
            CliError::Interrupted(_) => ExitCode::from(130),
            CliError::Verification(_) => ExitCode::from(4),
        }
    }
}
