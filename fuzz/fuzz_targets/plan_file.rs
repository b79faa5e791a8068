//! Plan files: any text through the plan parser and resolver, as `iocurve run PLAN.toml` reads
//! it, with and without command-line overrides. Every error has a reason; a plan that resolves
//! must also cross the wire: every step of it is a request an agent accepts.
#![no_main]

use iocurve_net::pb;
use iocurve_plan::{Overrides, WorkloadKeys, parse_str};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let cli = Overrides {
        targets: vec!["/dev/loop9".into()],
        keys: WorkloadKeys { queue_depth: Some(2), ramp: Some(vec![1, 3]), ..Default::default() },
        workload_filter: Some("a".into()),
    };
    for overrides in [&cli, &Overrides::default()] {
        if let Err(e) = parse_str(text, "fuzz.toml", overrides) {
            assert!(!e.message.trim().is_empty(), "an error without a reason: {e:?}");
        }
    }
    let Ok(plan) = parse_str(text, "fuzz.toml", &Overrides::default()) else { return };
    // What the coordinator sends for each step (crates/run/src/coordinator/coordinate.rs).
    let faults_json = if plan.faults.is_empty() { String::new() } else { serde_json::to_string(&plan.faults).unwrap() };
    // Every workload, and the rate workloads a curve or an SLA search derives from it after its
    // worker ramp (at a stand-in maximum).
    let derived =
        plan.workloads.iter().flat_map(|w| w.curve_workload(1000.0).into_iter().chain(w.sla_search_workload()));
    let all: Vec<_> = plan.workloads.iter().cloned().chain(derived).collect();
    for w in &all {
        let mut steps = w.steps();
        if w.name.ends_with("-sla-search") && w.rate.is_empty() {
            steps = vec![iocurve_plan::RampStep {
                workers: w.max_outstanding,
                queue_depth: 1,
                hosts: None,
                rate: Some(500.0),
                speed: None,
            }];
        }
        for step in steps {
            let workers = step.workers;
            // As the coordinator sends it: at the step (its depth; no ramp of depths or hosts,
            // no concurrent step left: a member goes as a workload of its own).
            let workload_json = serde_json::to_string(&w.at_step(&step)).expect("a resolved workload serializes");
            let r = pb::StepRequest {
                workload_json: workload_json.clone(),
                workers,
                groups: vec![pb::TargetGroup { name: "targets".into(), weight: 1, targets: vec!["/dev/loop9".into()] }],
                start_at_unix_ns: 0,
                scratch_size: 1 << 30,
                threads: w.threads,
                backend: w.backend.name().into(),
                faults_json: faults_json.clone(),
                rate_iops: step.rate.map_or(0.0, |r| w.rate_iops(r)),
                host: 0,
                hosts: 1,
                run_key: 7,
                members: Vec::new(),
                verify_journal: false,
                replay: Vec::new(),
                write_iolog: false,
                host_intervals: Vec::new(),
                relayed_replays: Vec::new(),
            };
            if let Err(e) = iocurve_net::agent::step_request(&r) {
                panic!("an agent refuses step {workers} of workload {} of a valid plan: {e}\n{workload_json}", w.name);
            }
        }
    }
});
