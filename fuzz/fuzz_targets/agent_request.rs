//! The agent's requests: any bytes decoded as the protobuf messages an agent takes from a
//! coordinator (prost), and a decoded `StepRequest` through what the agent does with it before
//! I/O: `agent::step_request` (workload, back-end, faults) and then the step itself, as the
//! agent runs it (crates/net/src/agent.rs `run_blocking`) — on a scratch file with the null
//! back-end (no I/O; the requested back-end still decides the resource check), stopped
//! after its first round of I/Os. Whatever an authenticated coordinator sends, the agent
//! refuses it or runs it: it never panics, aborts or hangs.
#![no_main]

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};

use iocurve_engine::{NoObserver, StepConfig, TargetSet, budget, host, run_step};
use iocurve_fuzz::{scratch_target, write_seeds};
use iocurve_net::pb;
use iocurve_plan::{Backend, Overrides, suites};
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// The harness's limit on one step's buffers, which are filled with data before the first
/// write: 8 MiB keeps every input well within the 10-second timeout in an unoptimized build
/// (128 writing workers of 1 MiB took 45 s there, 6 s optimized). Larger steps still get the
/// agent's own limit (`budget::check_step`: 80 % of the host's available memory).
const HARNESS_MEMORY: u64 = 8 << 20;

fn target() -> &'static TargetSet {
    static T: OnceLock<TargetSet> = OnceLock::new();
    T.get_or_init(|| scratch_target("agent.dat", 1 << 20))
}

/// A small tree for globs to walk: a few directories, files and a symlink loop.
fn tree() -> &'static std::path::Path {
    static T: OnceLock<tempfile::TempDir> = OnceLock::new();
    T.get_or_init(|| {
        let d = tempfile::tempdir().expect("a temporary directory");
        for p in ["a/b/c/x.dat", "a/y.dat", "z/.h/w.img"] {
            let p = d.path().join(p);
            std::fs::create_dir_all(p.parent().expect("a parent")).expect("the tree");
            std::fs::write(p, b"").expect("a file");
        }
        std::os::unix::fs::symlink(d.path(), d.path().join("a/loop")).expect("a symlink");
        d
    })
    .path()
}

/// Requests as the coordinator makes them, from every workload of the built-in suites.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for s in suites::SUITES {
        let plan = suites::load(s.name, &Overrides::default()).expect("a built-in suite");
        for (i, w) in plan.workloads.iter().enumerate() {
            let r = pb::StepRequest {
                workload_json: serde_json::to_string(w).expect("a workload serializes"),
                workers: w.ramp[i % w.ramp.len()],
                groups: vec![pb::TargetGroup { name: "targets".into(), weight: 1, targets: vec!["/dev/loop9".into()] }],
                start_at_unix_ns: 0,
                scratch_size: 1 << 30,
                threads: 0,
                backend: w.backend.name().into(),
                faults_json: if i == 0 {
                    r#"[{"kind":"eio","share":0.5,"from_s":0.0,"to_s":null,"target":null,"latency_ms":0.0}]"#.into()
                } else {
                    String::new()
                },
                // Every other seed a rate step: a second host's share of 1000 IOPS.
                rate_iops: if i % 2 == 1 { 1000.0 } else { 0.0 },
                host: (i % 2) as u32,
                hosts: 2,
                run_key: 7,
                verify_journal: i % 3 == 0,
                write_iolog: i % 5 == 0,
                // Every third seed names an agent whose intervals a relay sends in full (an
                // agent ignores it).
                host_intervals: if i % 3 == 1 { vec!["10.0.0.5:7420".into()] } else { Vec::new() },
                // Every fourth seed a concurrent step of this workload and the next.
                members: if i % 4 == 3 {
                    plan.workloads
                        .iter()
                        .cycle()
                        .skip(i)
                        .take(2)
                        .map(|m| pb::Member {
                            workload_json: serde_json::to_string(m).expect("serializes"),
                            workers: 1,
                        })
                        .collect()
                } else {
                    Vec::new()
                },
                replay: Vec::new(),
                relayed_replays: Vec::new(),
            };
            out.push((format!("{}-{i}.pb", s.name), r.encode_to_vec()));
            // Every fifth a replay step instead: a share of 64 I/Os of every direction.
            if i % 5 == 4 {
                use iocurve_engine::ops::{Dir, IoOp};
                use iocurve_engine::replay::{ReplayIo, ReplayShare, encode};
                let ios = (0..64u64)
                    .map(|k| {
                        let dir = [Dir::Read, Dir::Write, Dir::Trim][k as usize % 3];
                        ReplayIo { t_ns: k * 100_000, op: IoOp { target: 0, offset: k * 8192, len: 4096, dir } }
                    })
                    .collect();
                let share = ReplayShare { ios, speed: 2.0, remap: iocurve_plan::Remap::Modulo, spans: vec![1 << 20] };
                let replay = pb::StepRequest { rate_iops: 0.0, members: Vec::new(), replay: encode(&share), ..r };
                out.push((format!("{}-{i}-replay.pb", s.name), replay.encode_to_vec()));
                // And a relay's replay step (its agents' shares), which an agent refuses.
                let shares = vec![replay.replay.clone(); 2];
                let relayed = pb::StepRequest { replay: Vec::new(), relayed_replays: shares, ..replay };
                out.push((format!("{}-{i}-relayed.pb", s.name), relayed.encode_to_vec()));
            }
        }
    }
    let globs = ["/**/zz_nothing", "a/**/x.dat", "*/[ab]?/*.dat", "a/b**/c", "**/**/.h/*"];
    let t = pb::TargetsRequest {
        groups: vec![pb::TargetGroup { name: "g".into(), weight: 1, targets: globs.map(String::from).to_vec() }],
        ..Default::default()
    };
    out.push(("targets-globs.pb".into(), t.encode_to_vec()));
    out
}

fuzz_target!(init: write_seeds("agent_request", seeds), |data: &[u8]| {
    let _ = pb::HelloRequest::decode(data);
    let _ = pb::StopRequest::decode(data);
    if let Ok(v) = pb::VerifyPassRequest::decode(data) {
        let _ = iocurve_net::agent::target_groups(&v.groups);
    }
    if let Ok(p) = pb::PreconditionRequest::decode(data) {
        let _ = iocurve_net::agent::precondition_request(&p);
        let _ = iocurve_net::agent::target_groups(&p.groups);
    }
    if let Ok(t) = pb::TargetsRequest::decode(data) {
        let _ = iocurve_net::agent::target_groups(&t.groups);
        // Each target as the agent expands a glob (issue 35, finding 1): parsed, then walked
        // under a small fixed tree with small bounds (the agent's own walk starts in the
        // directory its allow list names), and made printable for its audit trail.
        for target in t.groups.iter().flat_map(|g| g.targets.iter()) {
            let _ = iocurve_net::printable(target);
            if let Ok(glob) = iocurve_engine::walk::Glob::parse(target) {
                let bounds = iocurve_engine::walk::Bounds {
                    dirs: 64,
                    entries: 4096,
                    time: std::time::Duration::from_secs(1),
                    follow_symlinks: false,
                };
                let _ = iocurve_engine::walk::walk(&glob, tree(), &mut iocurve_engine::walk::Budget::new(bounds), None);
            }
        }
    }
    let Ok(r) = pb::StepRequest::decode(data) else { return };
    let _ = iocurve_net::agent::target_groups(&r.groups);
    let Ok((w, backend, faults)) = iocurve_net::agent::step_request(&r) else { return };
    // A concurrent step's members (issue 41): each parsed and checked as a step's workload.
    let Ok(members) = iocurve_net::agent::member_requests(&r) else { return };
    // A replay's share (issue 45): unpacked and checked, then fitted to the target by the step.
    let Ok(replay) = iocurve_net::agent::replay_request(&r) else { return };
    if !members.is_empty() {
        return;
    }
    // The requested back-end's own limits (psync: one thread per outstanding I/O).
    if budget::check_step(&w, r.workers, backend).is_err() {
        return;
    }
    // A remote agent refuses verifying workloads before anything else (no map there).
    // Counted per outstanding I/O, as a real back-end needs it: this also bounds the slots the
    // harness drives (the null back-end's shared buffers would let a million through, each
    // taking its time: a libFuzzer timeout, CI of stop 28).
    if w.verify || budget::step_memory(&w, r.workers, Backend::IoUring) > HARNESS_MEMORY {
        return;
    }
    // Waiting for `start_at_unix_ns` is the coordinator's to end (it closes the stream).
    let threads = if r.threads == 0 { host::cores() } else { r.threads as usize };
    let stop = AtomicBool::new(false);
    let end = iocurve_engine::StepEnd::new();
    let cfg = StepConfig {
        workload: &w,
        workers: r.workers,
        backend: Backend::Null,
        threads,
        targets: target(),
        stop: &stop,
        faults: &faults,
        verify: None,
        journal: None,
        // Set before the start: the I/O threads issue one round and drain.
        abort: Some(Arc::new(AtomicBool::new(true))),
        start_at: None,
        synchronized: false,
        rate: iocurve_net::agent::rate_share(&r),
        replay: replay.as_ref(),
        host: r.host,
        // As the agent runs it: the coordinator ends a steady step.
        end: Some(&end),
        iolog: None,
    };
    let _ = run_step(&cfg, &mut NoObserver);
});
