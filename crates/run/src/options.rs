//! What a run needs besides its plan: where the I/O runs ([`Hosts`]) and the run's options
//! ([`RunOptions`]): the store, scratch files, what may be written, verification.

use std::path::PathBuf;

use crate::cluster::AgentOptions;

/// What a run needs besides its plan and hosts.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// A free-form label stored with the run.
    pub label: String,
    /// The results database (created when missing).
    pub db: PathBuf,
    /// Size of the scratch files created for targets that do not exist; None: 1 GiB, or less
    /// when the disk has less room (each agent sizes its own to its own disk).
    pub size: Option<u64>,
    /// Keep scratch files after the run.
    pub keep: bool,
    /// Targets that may be written although they carry a signature or were not made by iocurve.
    pub allow_write: Vec<PathBuf>,
    /// Where verifying runs keep the map of acknowledged writes (local runs).
    pub verify_map: PathBuf,
    /// Read every written block back after the workloads.
    pub verify_final: bool,
    /// Journal every verifying write before it is issued (`--verify-journal`), so that a pass
    /// after a crash of this host explains the blocks being written.
    pub verify_journal: bool,
    /// How long the passes (preconditioning, the final verification) wait for a write or read
    /// before they take the storage for stopped (`--stuck-after-s`; default 30 s).
    pub stuck_after_s: Option<f64>,
    /// `--write-iolog FILE`: every I/O the run issues, as a fio version 3 I/O log.
    pub write_iolog: Option<PathBuf>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            label: String::new(),
            db: iocurve_store::DEFAULT_DB.into(),
            size: None,
            keep: false,
            allow_write: Vec::new(),
            verify_map: "iocurve-verify.map".into(),
            verify_final: false,
            verify_journal: false,
            stuck_after_s: None,
            write_iolog: None,
        }
    }
}

/// Where the I/O runs.
#[derive(Clone, Debug)]
pub enum Hosts {
    /// This host, in this process.
    Local,
    /// Agents (`iocurve agent`), all at once; this process coordinates.
    Agents(Box<AgentOptions>),
}
