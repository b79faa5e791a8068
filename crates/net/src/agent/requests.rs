//! What the agent makes of a request before it acts on it: every field checked as a plan's
//! would be (the requests come from an authenticated coordinator, but the agent trusts no value
//! it did not check). Public for the fuzz target `agent_request`.

use iocurve_engine::precondition::PreConfig;
use iocurve_plan::{Backend, Fault, TargetGroup, Workload};
use tonic::Status;

use crate::pb;

/// A step request's share of a rate step's schedule, for the engine (which refuses a rate
/// that is not above 0 and finite, or a host beyond the hosts). Only an exact 0 is a closed
/// loop: NaN, negative and infinite rates are not run as one.
pub fn rate_share(r: &pb::StepRequest) -> Option<iocurve_engine::arrival::RateShare> {
    (r.rate_iops != 0.0).then_some(iocurve_engine::arrival::RateShare {
        iops: r.rate_iops,
        host: r.host,
        hosts: r.hosts.max(1),
    })
}

/// What the agent makes of a step request before it acts on it: the workload, the back-end and
/// the faults, or why it refuses the request (public for the fuzz target `agent_request`).
pub fn step_request(r: &pb::StepRequest) -> Result<(Workload, Backend, Vec<Fault>), Status> {
    let w: Workload = serde_json::from_str(&r.workload_json)
        .map_err(|e| Status::invalid_argument(format!("the workload does not parse: {e}")))?;
    let backend = Backend::parse(&r.backend)
        .ok_or_else(|| Status::invalid_argument(format!("unknown back-end `{}`", r.backend)))?;
    let faults: Vec<Fault> = if r.faults_json.is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(&r.faults_json)
            .map_err(|e| Status::invalid_argument(format!("the faults do not parse: {e}")))?
    };
    // The plan's rules: a request carries a resolved workload, but the engine trusts none it
    // did not check (fuzzing, issue 13: `"bs": []` panicked the I/O threads, `"intervals":
    // 4294967295` aborted the agent on a failed allocation, 0 workers panicked the step).
    iocurve_plan::check_workload(&w, &faults, "the step request")
        .map_err(|e| Status::invalid_argument(format!("the workload is not valid: {e}")))?;
    // The start moment is converted to this agent's clock by the coordinator: it lies within
    // seconds of now (0: at once). One far away would hold the step, and its targets, for ever.
    let now = crate::unix_ns();
    if r.start_at_unix_ns != 0 && r.start_at_unix_ns.saturating_sub(now).saturating_abs() > 3_600_000_000_000 {
        return Err(Status::invalid_argument(format!(
            "the step is to start {:.0} s from now on this agent's clock: a start lies within an hour of now",
            r.start_at_unix_ns.saturating_sub(now) as f64 / 1e9
        )));
    }
    if !(1..=65536).contains(&r.workers) || r.threads > 1024 {
        return Err(Status::invalid_argument(format!(
            "{} workers and {} threads: a step has 1 to 65536 workers and 0 (one per core) to 1024 threads",
            r.workers, r.threads
        )));
    }
    Ok((w, backend, faults))
}

/// A step request's replay share (issue 45), unpacked and checked; None: not a replay.
pub fn replay_request(r: &pb::StepRequest) -> Result<Option<iocurve_engine::replay::ReplayShare>, Status> {
    if !r.relayed_replays.is_empty() {
        return Err(Status::invalid_argument(
            "a relay's replay step (its agents' shares) came to an agent that is no relay of this run",
        ));
    }
    if r.replay.is_empty() {
        return Ok(None);
    }
    if r.rate_iops != 0.0 || !r.members.is_empty() {
        return Err(Status::invalid_argument(
            "a replay step has neither a rate nor members: its trace sets every I/O's time",
        ));
    }
    iocurve_engine::replay::decode(&r.replay)
        .map(Some)
        .map_err(|e| Status::invalid_argument(format!("the replay share is not valid: {e}")))
}

/// The largest step request an agent reads: a replay share of a few million I/Os (about ten
/// bytes each) fits; the 4 MiB gRPC default held a third of a million.
pub const MAX_REQUEST_BYTES: usize = 64 << 20;

/// The most members a concurrent step may have.
pub const MAX_MEMBERS: usize = 64;

/// A step request's members (a concurrent step; empty otherwise): each workload checked as a
/// step's is, with its workers, refused where a member cannot be what the plan refuses it
/// (public for the fuzz target `agent_request`).
pub fn member_requests(r: &pb::StepRequest) -> Result<Vec<(Workload, u32)>, Status> {
    // The step's workload times the step: every member is measured over its seconds.
    let step: Option<Workload> = serde_json::from_str(&r.workload_json).ok();
    if r.members.len() > MAX_MEMBERS {
        return Err(Status::invalid_argument(format!(
            "{} members: a concurrent step has at most {MAX_MEMBERS}",
            r.members.len()
        )));
    }
    r.members
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let w: Workload = serde_json::from_str(&m.workload_json)
                .map_err(|e| Status::invalid_argument(format!("member {i}'s workload does not parse: {e}")))?;
            iocurve_plan::check_workload(&w, &[], "the step request")
                .map_err(|e| Status::invalid_argument(format!("member {} is not valid: {e}", w.name)))?;
            if w.verify || !w.rate.is_empty() || w.steady_state != iocurve_plan::SteadyState::None {
                return Err(Status::invalid_argument(format!(
                    "member {} verifies, has a rate or ends once steady: a concurrent step's members do none of these",
                    w.name
                )));
            }
            if let Some(s) = &step
                && (s.warmup_s != w.warmup_s
                    || s.intervals != w.intervals
                    || s.interval_s != w.interval_s
                    || s.direct != w.direct)
            {
                return Err(Status::invalid_argument(format!(
                    "member {} has another timing or way of opening the targets than the step: a concurrent step's members share its warm-up, intervals and O_DIRECT",
                    w.name
                )));
            }
            if !(1..=65536).contains(&m.workers) {
                return Err(Status::invalid_argument(format!(
                    "member {} has {} workers: 1 to 65536",
                    w.name, m.workers
                )));
            }
            Ok((w, m.workers))
        })
        .collect()
}

/// What the agent makes of a precondition request: the pass's configuration (the workload's
/// data pattern, checked as a step's workload is), or why it refuses the request.
pub fn precondition_request(r: &pb::PreconditionRequest) -> Result<PreConfig, Status> {
    let w: Workload = serde_json::from_str(&r.workload_json)
        .map_err(|e| Status::invalid_argument(format!("the workload does not parse: {e}")))?;
    iocurve_plan::check_workload(&w, &[], "the precondition request")
        .map_err(|e| Status::invalid_argument(format!("the workload is not valid: {e}")))?;
    if !(512..=64 << 20).contains(&r.bs) || !r.bs.is_multiple_of(512) || !(1..=1024).contains(&r.qd) {
        return Err(Status::invalid_argument(format!(
            "writes of {} bytes, {} in flight: a precondition pass writes 512 bytes to 64 MiB (a multiple of 512), 1 to 1024 at a time",
            r.bs, r.qd
        )));
    }
    Ok(PreConfig { bs: r.bs, qd: r.qd, pattern: w.data, dedupe_unit: w.dedupe_unit() })
}

/// The target groups of a request, checked: a request names at least one group, every group a
/// name, a weight of at least 1 and at least one target (public for the fuzz target
/// `agent_request`). Weights are kept: a plan's "50 % local, 50 % mirrored LUNs" holds on every
/// agent (issue 14: the groups used to collapse into one on agents).
pub fn target_groups(groups: &[pb::TargetGroup]) -> Result<Vec<TargetGroup>, Status> {
    const MAX_GROUPS: usize = 1024;
    const MAX_TARGETS: usize = 65_536;
    const MAX_NAME: usize = 4096;
    if groups.is_empty() {
        return Err(Status::invalid_argument("the request names no target groups"));
    }
    let count: usize = groups.iter().map(|g| g.targets.len()).sum();
    if groups.len() > MAX_GROUPS || count > MAX_TARGETS {
        return Err(Status::invalid_argument(format!(
            "{} groups with {count} targets: a request has at most {MAX_GROUPS} groups and {MAX_TARGETS} targets",
            groups.len()
        )));
    }
    let mut out = Vec::with_capacity(groups.len());
    for (i, g) in groups.iter().enumerate() {
        let name = if g.name.is_empty() { format!("group{}", i + 1) } else { g.name.clone() };
        if g.weight == 0 {
            return Err(Status::invalid_argument(format!(
                "target group `{name}` has weight 0: weights are at least 1"
            )));
        }
        if g.targets.is_empty() {
            return Err(Status::invalid_argument(format!("target group `{name}` names no targets")));
        }
        if name.len() > MAX_NAME || g.targets.iter().any(|t| t.is_empty() || t.len() > MAX_NAME) {
            return Err(Status::invalid_argument(format!(
                "target group `{}`: names and paths are 1 to {MAX_NAME} bytes",
                name.chars().take(64).collect::<String>()
            )));
        }
        out.push(TargetGroup { name, weight: g.weight, targets: g.targets.clone() });
    }
    Ok(out)
}

/// How long a pass (preconditioning, verification) waits for a write or read before it takes
/// the storage for stopped: the coordinator's `--stuck-after-s`, 0.1 s to a day; 0 (a
/// coordinator that did not say): 30 s.
pub(super) fn stuck_after(secs: f64) -> std::time::Duration {
    if secs > 0.0 {
        std::time::Duration::from_secs_f64(secs.clamp(0.1, 86_400.0))
    } else {
        std::time::Duration::from_secs_f64(iocurve_engine::PASS_STUCK_AFTER_S)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(workers: u32, change: fn(&mut Workload)) -> pb::StepRequest {
        let mut w = iocurve_plan::suites::load("quick", &Default::default()).unwrap().workloads.remove(0);
        change(&mut w);
        let workload_json = serde_json::to_string(&w).unwrap();
        pb::StepRequest { workload_json, workers, backend: "null".into(), ..Default::default() }
    }

    /// Found by the fuzz target `agent_request`: the agent ran any workload that parsed.
    #[test]
    fn a_step_request_is_checked_as_a_plan_is() {
        assert!(step_request(&request(4, |_| {})).is_ok());
        for r in [
            request(4, |w| w.bs.clear()),
            request(4, |w| w.queue_depth = 0),
            request(4, |w| w.intervals = u32::MAX),
            request(4, |w| w.working_set = iocurve_plan::WorkingSet::Range { start: 4096, end: 0 }),
            request(0, |_| {}),
            request(65537, |_| {}),
            pb::StepRequest { threads: 100_000, ..request(4, |_| {}) },
            pb::StepRequest { start_at_unix_ns: i64::MIN, ..request(4, |_| {}) },
            pb::StepRequest { start_at_unix_ns: crate::unix_ns() + 7_200_000_000_000, ..request(4, |_| {}) },
        ] {
            let e = step_request(&r).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        }
    }

    /// Review: only an exact 0 is a closed loop; every other rate goes to the engine, which
    /// refuses what it cannot run (tested there).
    #[test]
    fn only_a_zero_rate_is_a_closed_loop() {
        let req = |rate_iops: f64| pb::StepRequest { rate_iops, host: 1, hosts: 0, ..Default::default() };
        assert_eq!(rate_share(&req(0.0)), None);
        for r in [f64::NAN, -1.0, f64::INFINITY, 500.0] {
            let share = rate_share(&req(r)).expect("handed to the engine");
            assert!(share.iops.is_nan() == r.is_nan() && (r.is_nan() || share.iops == r));
            assert_eq!((share.host, share.hosts), (1, 1), "no zero host count reaches the engine");
        }
    }

    /// Issue 46: a relay's replay step (its agents' shares) is no step for an agent that is no
    /// relay of the run: refused, not run as a closed loop.
    #[test]
    fn a_relays_replay_shares_are_refused_by_an_agent() {
        let r = pb::StepRequest { relayed_replays: vec![vec![0u8; 8]], ..Default::default() };
        let e = replay_request(&r).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("an agent that is no relay of this run"), "{e:?}");
    }

    #[test]
    fn a_pass_waits_30_s_unless_told_and_never_outside_its_bounds() {
        use std::time::Duration;
        assert_eq!(super::stuck_after(0.0), Duration::from_secs(30), "a coordinator that did not say");
        assert_eq!(super::stuck_after(f64::NAN), Duration::from_secs(30));
        assert_eq!(super::stuck_after(-5.0), Duration::from_secs(30));
        assert_eq!(super::stuck_after(1.0), Duration::from_secs(1));
        assert_eq!(super::stuck_after(1e-9), Duration::from_millis(100));
        assert_eq!(super::stuck_after(f64::INFINITY), Duration::from_secs(86_400));
    }
}
