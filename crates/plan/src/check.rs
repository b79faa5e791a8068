//! The plan's rules for a workload that arrives resolved from elsewhere: an agent checks every
//! step request with them before it acts, so that it runs only what a plan could have asked
//! for (found by fuzzing, issue 13: an agent took any workload that parsed, and `"bs": []`,
//! `"queue_depth": 0` or `"intervals": 4294967295` panicked its I/O threads, idled the step or
//! aborted the agent on a failed allocation).

use crate::keys::{BlockSizeSpec, FaultKeys, PlanFile, WorkingSetSpec, WorkloadKeys};
use crate::model::{Fault, WorkingSet, Workload};
use crate::{PlanError, resolve};

/// Ok when resolving a plan could have given `w` and `faults`: every value is checked as the
/// plan's `[[workloads]]` and `[[faults]]` keys are; errors name the key, from `source`.
pub fn check_workload(w: &Workload, faults: &[Fault], source: &str) -> Result<(), PlanError> {
    let (working_set, frontend_blocks) = match w.working_set {
        WorkingSet::Frontend { blocks } => (WorkingSetSpec::Frontend, Some(blocks)),
        WorkingSet::Backend => (WorkingSetSpec::Backend, None),
        WorkingSet::Range { start, end } => (WorkingSetSpec::Range { start, end }, None),
    };
    let keys = WorkloadKeys {
        name: Some(w.name.clone()),
        read_pct: Some(w.read_pct),
        bs: Some(BlockSizeSpec::Mix(w.bs.iter().map(|b| (b.bytes, b.weight)).collect())),
        pattern: Some(w.pattern),
        working_set: Some(working_set),
        frontend_blocks,
        queue_depth: Some(w.queue_depth),
        ramp: Some(w.ramp.clone()),
        warmup_s: Some(w.warmup_s),
        intervals: Some(w.intervals),
        interval_s: Some(w.interval_s),
        pause_s: Some(w.pause_s),
        direct: Some(w.direct),
        backend: Some(w.backend),
        threads: Some(w.threads),
        compress: Some(w.data.compress),
        dedupe: Some(w.data.dedupe),
        // 0: the smallest block size, as in results stored before the key existed.
        dedupe_unit: (w.data.dedupe_unit != 0).then_some(w.data.dedupe_unit),
        constant: Some(w.data.constant),
        on_error: Some(w.on_error),
        stuck_after_s: w.stuck_after_s,
        verify: Some(w.verify),
        rate: (!w.rate.is_empty()).then(|| w.rate.clone()),
        arrival: Some(w.arrival),
        max_outstanding: Some(w.max_outstanding),
        overload: Some(w.overload),
        seed: Some(w.seed),
        curve: (!w.curve.is_empty()).then(|| w.curve.clone()),
        stop_at_mean_ms: w.stop_at_mean_ms,
        stop_at_p99_ms: w.stop_at_p99_ms,
        steady_state: Some(w.steady_state),
        sla_search: Some(w.sla_search),
    };
    let faults = faults
        .iter()
        .map(|f| FaultKeys {
            kind: f.kind,
            share: Some(f.share),
            from_s: Some(f.from_s),
            to_s: f.to_s,
            target: f.target.clone(),
            latency_ms: Some(f.latency_ms),
        })
        .collect();
    let file = PlanFile { workloads: vec![keys], faults: Some(faults), ..Default::default() };
    resolve::resolve_file(&file, source).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FaultKind, Overrides, parse_str};

    #[test]
    fn a_resolved_workload_passes_and_a_damaged_one_names_its_key() {
        let text = "[[workloads]]\nname = \"w\"\nread_pct = 70\nbs = { \"4k\" = 1, \"4096\" = 2 }\n";
        let ok = parse_str(text, "t", &Overrides::default()).unwrap().workloads.remove(0);
        check_workload(&ok, &[], "coordinator").unwrap();
        type Damage = (&'static str, fn(&mut Workload));
        let bad: [Damage; 8] = [
            ("bs", |w| w.bs.clear()),
            ("bs", |w| w.bs.iter_mut().for_each(|b| b.weight = 0)),
            ("bs", |w| w.bs[0].bytes = 1000),
            ("queue_depth", |w| w.queue_depth = 0),
            ("intervals", |w| w.intervals = u32::MAX),
            ("interval_s", |w| w.interval_s = f64::NAN),
            ("working_set", |w| w.working_set = WorkingSet::Range { start: 4096, end: 0 }),
            ("ramp", |w| w.ramp = vec![0]),
        ];
        for (key, damage) in bad {
            let mut w = ok.clone();
            damage(&mut w);
            let e = check_workload(&w, &[], "coordinator").unwrap_err();
            assert_eq!(e.key, Some(format!("workloads[0].{key}")), "{e}");
            assert_eq!(e.source, "coordinator");
        }
        let stall =
            Fault { kind: FaultKind::Stall, share: 1.0, from_s: 0.0, to_s: None, target: None, latency_ms: 0.0 };
        let e = check_workload(&ok, &[stall], "coordinator").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("faults[0].to_s"), "{e}");
    }
}
