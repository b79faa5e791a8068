//! What a run tells beside its steps' figures, as typed values: the terminal words them
//! (`iocurve`'s `words.rs`), live metrics and programs may read the values. Before (issue 38,
//! finding 4) the runner sent 39 English sentences, formatted where they happened.
//!
//! Some events carry text that is data, not wording: a note a workload keeps in the store
//! beside its steps (read back by `show`), what the engine or an agent said of a target or a
//! pass, and a verification's counts as the stats crate describes them.

use iocurve_analysis::{HostInfo, TargetInfo};
use iocurve_stats::VerifyCounts;

/// One event of a run, in the order it happened.
#[derive(Debug, Clone)]
pub enum RunEvent {
    /// The run begins: the tool, the plan, where it runs and on what.
    Header { version: String, plan: String, host: Box<HostInfo>, targets: Vec<TargetInfo> },
    /// Scratch files are being made for targets that do not exist.
    PreparingScratch { count: usize, size: u64, filled: bool, reclaim_only: bool },
    /// What opening the targets found worth saying (the engine's words).
    TargetNote(String),
    /// A note a workload keeps with its steps (why a ramp stopped, its back-end's fallback, an
    /// SLA search's answer): stored as worded, shown by `show` too.
    WorkloadNote { workload: String, note: String },
    /// What follows a workload (its curve, its SLA search), or why nothing does.
    FollowUp(String),
    /// The rest before a workload's next step (`pause_s`).
    Rest { workload: String, seconds: f64 },
    /// A Ctrl-C during preconditioning: no workload ran.
    InterruptedWhilePreconditioning,
    /// A mark came from `iocurve mark` (stored already): its seconds after the run's start.
    Mark { mark: iocurve_stats::Mark, after_start_s: f64 },
    /// The run cannot take marks from `iocurve mark` (why); it runs on without.
    NoMarks(String),
    /// Runs of this host still marked running whose processes are gone, now `interrupted`.
    StaleRunsSettled { ids: Vec<i64> },
    /// Agents started for the run (`--launch`).
    AgentsLaunched {
        launched: usize,
        hosts: usize,
        method: String,
        seconds: f64,
        /// How the binary got there (copied, or already in place).
        copy: String,
        slowest: String,
        slowest_s: f64,
        /// How long the run's credentials are valid at most.
        lifetime_s: f64,
    },
    /// The agents started for the run were stopped: `count` the hosts' agents, `relays` the
    /// groups' relays started beside them (`--relay-every`).
    AgentsStopped { count: usize, relays: usize },
    /// Waiting for agents that are not up yet (`--wait-for-agents-s`).
    WaitingForAgents { seconds: f64, missing: usize, total: usize },
    /// An agent answered: its host, and its clock against the coordinator's. A relay (issue 46)
    /// says how many agents it drives (`relay_of`, 0: none); an agent behind one names it
    /// (`through`), its clock measured by that relay.
    AgentClock {
        addr: String,
        hostname: String,
        cores: u32,
        offset_ms: f64,
        rtt_ms: f64,
        relay_of: u32,
        through: Option<String>,
    },
    /// Preconditioning one target: every block written once.
    PreconditionWriting { target: String, size: u64, bs: u64, in_flight: u32, data: String },
    /// Preconditioning on every agent at once.
    PreconditionOnAgents { agents: usize, targets: usize, bs: u64, in_flight: u32, data: String },
    /// How far preconditioning (or a reclaim step's pass) got (`who`: the target or host, empty
    /// for the only one; `reclaim NAME PASS`).
    PreconditionProgress { who: String, done: u64, total: u64, session: u64, elapsed_s: f64 },
    /// A target was preconditioned before at this size: skipped.
    PreconditionSkipped { target: String, at: String },
    /// A target's preconditioning goes on where an earlier one stopped.
    PreconditionResuming { target: String, at: u64, size: u64, before: u64 },
    /// A target is preconditioned.
    PreconditionComplete { target: String },
    /// A reclaim step begins: its region on every target, and what measures the used space
    /// (empty: nothing).
    ReclaimStarting { name: String, bytes: u64, targets: usize, probe: String },
    /// One pass of a reclaim step is done: `write`, `trim` or `read`.
    ReclaimPass { name: String, pass: String, bytes: u64, seconds: f64, mean_us: f64 },
    /// A reclaim step waits for the trimmed space: `want` bytes free again.
    ReclaimWaiting { name: String, want: u64, timeout_s: f64 },
    /// A target's preconditioning was interrupted (the same command resumes it).
    PreconditionInterrupted { target: String },
    /// What a pass (preconditioning) said of its work, as the engine or an agent worded it.
    PassNote(String),
    /// Preconditioning until steady (`--until-steady`): its rounds.
    SteadyPrecondition { round_s: f64, max_rounds: u32 },
    /// One round of it.
    SteadyRound { index: u32, max: u32, iops: f64 },
    /// A verifying run's map: a new one.
    MapNew { path: String, bs: u64 },
    /// A verifying run continues a map.
    MapContinued { path: String, known: u64 },
    /// A target of a continued map is a new scratch file: what the map knew of it is forgotten.
    MapForgotten { target: String, blocks: u64 },
    /// Every verifying write is journaled before it is issued.
    Journaling { path: String },
    /// How far a verification pass got (`who`: the host, empty for this one).
    VerifyProgress { who: String, done: u64, total: u64 },
    /// What a verification pass found: the counts, the first examples, how many more, and how
    /// many were counted beyond the list's cap (`cap_scope`: " per host" when several hosts'
    /// passes are added up).
    VerifyFound { heading: String, counts: Box<VerifyCounts>, unlisted: u64, cap: usize, cap_scope: String },
}
