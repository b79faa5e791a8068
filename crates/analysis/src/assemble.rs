//! The one assembly of a run's result from what the run or the store knows, with what is
//! worked out from it (the links' use, the SLA answers): above the result's types and the
//! sizing that reads them.

use crate::result::{FinalVerification, HostInfo, RunResult, SCHEMA_VERSION, Sla, Status, TargetInfo, WorkloadResult};

/// What a run's result says beside its workloads, as the runner has it at the run's end or the
/// store keeps it.
pub struct RunFacts {
    pub tool_version: String,
    pub started_at: String,
    /// Empty while a run goes on (or was killed).
    pub finished_at: String,
    pub status: Status,
    pub status_reason: Option<String>,
    pub host: HostInfo,
    /// The bounds the SLA maxima were found with (unset: none).
    pub sla: Sla,
    pub targets: Vec<TargetInfo>,
    pub plan: serde_json::Value,
    pub final_verification: Option<FinalVerification>,
    /// The reclaim steps, in order.
    pub reclaims: Vec<crate::ReclaimResult>,
    /// Its marks, in time order.
    pub marks: Vec<iocurve_stats::Mark>,
    /// The array's own figures imported beside it.
    pub array: Vec<iocurve_stats::array::ArraySeries>,
}

impl RunResult {
    /// The one assembly of a run's result, for the runner at the run's end and for `show`,
    /// `export` and `report` from the store: `interrupted` and `status` come from one
    /// [`Status`], the links' use and the SLA answers are worked out the same way (issue 38,
    /// finding 4: the runner and `show` each built it, and an aborted run said
    /// `"interrupted": false` in its own JSON and `true` in its export).
    pub fn assemble(f: RunFacts, workloads: Vec<WorkloadResult>) -> RunResult {
        RunResult {
            schema_version: SCHEMA_VERSION,
            tool_version: f.tool_version,
            started_at: f.started_at,
            finished_at: f.finished_at,
            interrupted: f.status.ended_early(),
            status: f.status.as_str().into(),
            status_reason: f.status_reason,
            host: f.host,
            sla: f.sla.is_set().then_some(f.sla),
            targets: f.targets,
            plan: f.plan,
            workloads,
            final_verification: f.final_verification,
            reclaims: f.reclaims,
            marks: f.marks,
            array: f.array,
            array_checks: Vec::new(),
        }
        .with_link_use()
        .with_luns()
        .with_claims()
        .with_sla_answers()
        .with_members()
        .with_array_checks()
    }

    fn with_array_checks(mut self) -> RunResult {
        self.array_checks = crate::array::array_checks(&self);
        self
    }
}
