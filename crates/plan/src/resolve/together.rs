//! Concurrent steps (issue 41): workloads that run at one time (`together`), checked as a set —
//! two or more of them, stepping alike (the same ramp and timing, so that their intervals are
//! the same seconds), each closed-loop and without what a shared step cannot give (its own
//! steady-state end, a rate, a depth ramp, verification, follow-ups) — and every workload's
//! `target_groups` against the plan's groups.

use super::Resolver;
use crate::error::PlanError;
use crate::model::SteadyState;
use crate::options::Workload;
use crate::resolved::TargetGroup;

impl Resolver<'_> {
    /// `all`: (index in the plan, workload) of every workload that runs.
    pub(super) fn together(&self, all: &[(usize, &Workload)], groups: &[TargetGroup]) -> Result<(), PlanError> {
        for &(i, w) in all {
            // Where the value came from: the workload, `[defaults]` or the command line (a
            // built-in default: the workload that has it).
            let err = |key: &'static str, msg: String| match self.origin(i, key) {
                super::Origin::Builtin => self.err(
                    &[crate::locate::Seg::Key("workloads"), crate::locate::Seg::Index(i), crate::locate::Seg::Key(key)],
                    format!("workloads[{i}].{key}"),
                    msg,
                ),
                _ => self.key_err(i, key, msg),
            };
            if let Some(g) = w.target_groups.iter().find(|g| !groups.iter().any(|t| t.name == **g)) {
                let names: Vec<&str> = groups.iter().map(|t| t.name.as_str()).collect();
                return Err(err(
                    "target_groups",
                    format!("target group `{g}` is not one of the run's: {}", names.join(", ")),
                ));
            }
            let Some(name) = &w.together else {
                if w.share != 1.0 {
                    return Err(err(
                        "share",
                        format!(
                            "share = {} is a member's share of a concurrent step's workers, but workload {} runs alone: set `together` to the step's name, or drop share",
                            w.share, w.name
                        ),
                    ));
                }
                continue;
            };
            let members: Vec<&(usize, &Workload)> =
                all.iter().filter(|(_, o)| o.together.as_ref() == Some(name)).collect();
            if members.len() < 2 {
                return Err(err(
                    "together",
                    format!(
                        "concurrent step `{name}` has one workload ({}): give `together = \"{name}\"` to the workloads that run with it, or drop it",
                        w.name
                    ),
                ));
            }
            if all.iter().any(|(_, o)| o.name == *name) {
                return Err(err(
                    "together",
                    format!(
                        "concurrent step `{name}` is stored under its name, the name of a workload: rename one of them"
                    ),
                ));
            }
            single(w)
                .map_err(|(key, m)| err(key, format!("workload {} runs in concurrent step `{name}`: {m}", w.name)))?;
            let first = members[0].1;
            // One descriptor per target serves every member: one way of opening it (O_DIRECT
            // or buffered) for all.
            let same: [(&'static str, bool, String); 7] = [
                ("direct", first.direct == w.direct, first.direct.to_string()),
                ("ramp", first.ramp == w.ramp, format!("{:?}", first.ramp)),
                ("host_ramp", first.host_ramp == w.host_ramp, format!("{:?}", first.host_ramp)),
                ("warmup_s", first.warmup_s == w.warmup_s, first.warmup_s.to_string()),
                ("intervals", first.intervals == w.intervals, first.intervals.to_string()),
                ("interval_s", first.interval_s == w.interval_s, first.interval_s.to_string()),
                ("pause_s", first.pause_s == w.pause_s, first.pause_s.to_string()),
            ];
            if let Some((key, _, want)) = same.into_iter().find(|(_, equal, _)| !equal) {
                return Err(err(
                    key,
                    format!(
                        "the workloads of concurrent step `{name}` run their steps at one time, measured over the same seconds: {key} must be {first}'s ({want})",
                        first = first.name
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// What a member of a concurrent step cannot have, as (key, why).
fn single(w: &Workload) -> Result<(), (&'static str, String)> {
    let refuse = |key: &'static str, why: &str| Err((key, why.to_string()));
    if !w.rate.is_empty() {
        return refuse("rate", "a concurrent step shares out workers, not a rate: drop rate (closed loop)");
    }
    if !w.qd_ramp.is_empty() {
        return refuse(
            "qd_ramp",
            "its members step through the workers together; each keeps its own queue_depth: drop qd_ramp",
        );
    }
    if w.verify {
        return refuse(
            "verify",
            "members may write the same blocks, and one map cannot follow two workloads' writes: verify the workloads alone",
        );
    }
    if w.steady_state != SteadyState::None {
        return refuse(
            "steady_state",
            "its members end their steps together, after all their intervals: drop steady_state",
        );
    }
    if !w.curve.is_empty() || w.sla_search {
        return refuse(
            if w.sla_search { "sla_search" } else { "curve" },
            "a curve or SLA search follows one workload's maximum with rate steps: run it on the workload alone",
        );
    }
    Ok(())
}
