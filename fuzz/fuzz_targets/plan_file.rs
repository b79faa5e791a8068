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
    for w in &plan.workloads {
        let workload_json = serde_json::to_string(w).expect("a resolved workload serializes");
        for &workers in &w.ramp {
            let r = pb::StepRequest {
                workload_json: workload_json.clone(),
                workers,
                groups: vec![pb::TargetGroup { name: "targets".into(), weight: 1, targets: vec!["/dev/loop9".into()] }],
                start_at_unix_ns: 0,
                scratch_size: 1 << 30,
                threads: w.threads,
                backend: w.backend.name().into(),
                faults_json: faults_json.clone(),
            };
            if let Err(e) = iocurve_net::agent::step_request(&r) {
                panic!("an agent refuses step {workers} of workload {} of a valid plan: {e}\n{workload_json}", w.name);
            }
        }
    }
});
