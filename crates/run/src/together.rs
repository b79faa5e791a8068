//! A concurrent step (issue 41) as the run carries it: its members at each step (their share of
//! the step's workers, each at its own queue depth), their steps in the store beside the step's
//! own, and the step's workload as stored (its members named in it, so that a stored run knows
//! them).

use iocurve_plan::{RampStep, Workload};
use iocurve_stats::StepRecord;

use crate::recorder::MemberStep;

/// The workload as the results database keeps it: a concurrent step's names its members.
pub(crate) fn stored_json(w: &Workload, members: &[Workload]) -> String {
    let mut v = serde_json::to_value(w).unwrap_or_default();
    if !members.is_empty()
        && let Some(o) = v.as_object_mut()
    {
        o.insert("members".into(), members.iter().map(|m| m.name.clone()).collect::<Vec<_>>().into());
    }
    v.to_string()
}

/// The members at `step`: each as its step runs it (its own queue depth) with its share of the
/// step's workers.
pub(crate) fn at_step(members: &[Workload], step: &RampStep) -> Vec<(Workload, u32)> {
    let workers = Workload::member_workers(members, step.workers);
    members
        .iter()
        .zip(workers)
        .map(|(m, n)| (m.at_step(&RampStep { queue_depth: m.queue_depth, ..*step }), n))
        .collect()
}

/// Where each member's step is stored (`ids`: their workloads' rows), before it starts;
/// `scales`: the `workers_scale` of each host the step runs on (uneven hosts run their share of
/// each member's workers).
pub(crate) fn member_steps(members: &[(Workload, u32)], ids: &[i64], scales: &[f64]) -> Vec<MemberStep> {
    members
        .iter()
        .zip(ids)
        .map(|((m, workers), &id)| {
            let mut rec = StepRecord::new(*workers, m.queue_depth, 0, m.interval_s, m.interval_s);
            if scales.iter().any(|&s| s != 1.0) {
                let each: u64 = scales.iter().map(|&s| iocurve_plan::scaled_workers(*workers, s) as u64).sum();
                rec.outstanding = Some(each * m.queue_depth as u64);
            }
            MemberStep { workload_id: id, step_id: None, rec }
        })
        .collect()
}
