//! Hot pieces of the engine: offset generation, data stamping, and the whole submit/reap loop
//! over the null back-end (the tool's own cost per I/O).

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use criterion::{Criterion, Throughput, black_box, criterion_group, criterion_main};
use iocurve_engine::ops::{OpGen, TargetGeom};
use iocurve_engine::rng::Rng;
use iocurve_engine::{NoObserver, OpenOptions, StepConfig, TargetSet, data, run_step};
use iocurve_plan::{Backend, BlockSize, DataPattern, Pattern, TargetGroup, WorkingSet, Workload};

fn workload(read_pct: f64, pattern: Pattern, qd: u32, seconds: f64) -> Workload {
    Workload {
        name: "bench".into(),
        read_pct,
        bs: vec![BlockSize { bytes: 4096, weight: 1 }],
        pattern,
        working_set: WorkingSet::Backend,
        queue_depth: qd,
        ramp: vec![1],
        warmup_s: 0.0,
        intervals: 1,
        interval_s: seconds,
        direct: false,
        backend: Backend::Null,
        threads: 1,
        ..Workload::default()
    }
}

fn offsets(c: &mut Criterion) {
    let geom = vec![TargetGeom { start: 0, len: 1 << 40 }];
    for (name, w) in [
        ("offset random 70/30", workload(70.0, Pattern::Random, 1, 1.0)),
        ("offset sequential", workload(100.0, Pattern::Sequential, 1, 1.0)),
    ] {
        let mut g = OpGen::new(&w, 4, geom.clone(), &[(1, vec![0])]).expect("a uniform workload");
        let mut rng = Rng::new(1);
        c.bench_function(name, |b| b.iter(|| black_box(g.next(black_box(1), &mut rng))));
    }
}

fn data_pattern(c: &mut Criterion) {
    let mut g = c.benchmark_group("data");
    for size in [4096usize, 1 << 20] {
        let mut buf = vec![0u8; size];
        g.throughput(Throughput::Bytes(size as u64));
        let mut rng = Rng::new(3);
        g.bench_function(format!("random fill {size} B"), |b| b.iter(|| rng.fill(black_box(&mut buf))));
        // The per-write cost of fresh data: unique, compress 0.4, and deduplicating.
        let pool = std::sync::Arc::new(data::Pool::new());
        for (name, compress, dedupe) in [("unique", 0.0, 1.0), ("compress 0.4", 0.4, 1.0), ("dedupe 2", 0.4, 2.0)] {
            let p = DataPattern { compress, dedupe, dedupe_unit: 4096, constant: 0 };
            let mut gen_ = data::DataGen::new(&p, 4096, pool.clone(), &mut rng);
            g.bench_function(format!("{name} fill {size} B"), |b| {
                b.iter(|| gen_.fill(black_box(&mut buf), 8192, &mut rng))
            });
        }
    }
}

/// Time per I/O of the real worker loop over the null back-end: one I/O thread, 64 in flight.
fn null_loop(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let groups = vec![TargetGroup { name: "g".into(), weight: 1, targets: vec![path.display().to_string()] }];
    let targets =
        TargetSet::open(&groups, &OpenOptions { write: true, scratch_size: 1 << 20, ..Default::default() }).unwrap();
    let stop = AtomicBool::new(false);
    let mut g = c.benchmark_group("loop");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    for (name, read_pct) in [("null loop 4k reads qd64", 100.0), ("null loop 4k writes qd64", 0.0)] {
        let w = workload(read_pct, Pattern::Random, 64, 0.2);
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let cfg = StepConfig {
                    workload: &w,
                    workers: 1,
                    backend: Backend::Null,
                    threads: 1,
                    targets: &targets,
                    stop: &stop,
                    faults: &[],
                    verify: None,
                    journal: None,
                    abort: None,
                    start_at: None,
                    synchronized: false,
                    rate: None,
                    replay: None,
                    host: 0,
                    end: None,
                    iolog: None,
                };
                let rec = run_step(&cfg, &mut NoObserver).unwrap();
                // One iteration = one I/O: scale the measured time per I/O to `iters`.
                let per_io = 0.2 / rec.total.ops() as f64;
                Duration::from_secs_f64(per_io * iters as f64)
            })
        });
    }
}

criterion_group!(benches, offsets, data_pattern, null_loop);
criterion_main!(benches);
