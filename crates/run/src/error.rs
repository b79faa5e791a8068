//! Errors of a run and the exit codes they map to: 2 for bad input (plan, options, targets,
//! refused writes), 1 for failures of the tool or the host, 3 when the run finished but the
//! storage failed I/Os or a step completed none (see `run`), 4 when verification found lost,
//! corrupted or misplaced blocks, 130 for Ctrl-C.

use std::process::ExitCode;

use iocurve_engine::EngineError;
use iocurve_net::NetError;
use iocurve_plan::PlanError;
use iocurve_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
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
    /// The results database refused a write mid-run (full, gone read-only): the run stopped
    /// there; what was stored stays (exit code 1).
    #[error("{0}")]
    StoreRefused(String),
    /// Ctrl-C before anything was measured (exit code 130).
    #[error("{0}")]
    Interrupted(String),
    /// The run's own policy ended it (`on_error = abort`, `--on-host-loss abort`): exit code 1,
    /// status `aborted`.
    #[error("{0}")]
    Aborted(String),
    /// Every host of the run was lost, so it could not go on (exit code 3: hosts were lost;
    /// status `aborted`). Issue 36: it exited 1, as if the tool had failed.
    #[error("{0}")]
    HostsLost(String),
    /// Verification found lost, corrupted or misplaced blocks (exit code 4).
    #[error("{0}")]
    Verification(String),
}

impl Error {
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Error::Plan(_) | Error::Usage(_) => ExitCode::from(2),
            Error::Engine(e) if e.is_input_error() => ExitCode::from(2),
            // A run id that does not exist is the user's input; anything else is the database.
            Error::Store(StoreError::NoSuchRun(_)) => ExitCode::from(2),
            Error::Engine(_) | Error::Store(_) | Error::Runtime(_) | Error::StoreRefused(_) | Error::Aborted(_) => {
                ExitCode::from(1)
            }
            Error::Interrupted(_) => ExitCode::from(130),
            Error::HostsLost(_) => ExitCode::from(3),
            Error::Verification(_) => ExitCode::from(4),
        }
    }
}

impl From<NetError> for Error {
    fn from(e: NetError) -> Self {
        match e {
            NetError::Input(m) => Error::Usage(m),
            NetError::Failed(m) => Error::Runtime(m),
            NetError::Aborted(m) => Error::Aborted(m),
            NetError::Lost(m) => Error::HostsLost(m),
            NetError::Interrupted(m) => Error::Interrupted(m),
        }
    }
}

/// The results database refused a write mid-run: the run stops there (exit code 1).
pub(crate) fn store_error(e: StoreError) -> Error {
    Error::StoreRefused(format!("{e}: the run stops so that no measurement goes unrecorded"))
}
