//! Synchronized starts (issue 15), in a test binary of their own: the test reads the policy of
//! every I/O thread of its process, and the other engine tests' threads would be among them.

use std::sync::atomic::AtomicBool;

use iocurve_engine::{OpenOptions, StepConfig, StepObserver, TargetSet, run_step};
use iocurve_plan::{Backend, BlockSize, Pattern, TargetGroup, WorkingSet, Workload};
use iocurve_stats::{CpuUsage, IntervalStats};

/// The scheduling policy (`/proc/self/task/TID/stat` field 41) of this process's I/O threads.
fn io_thread_policies() -> Vec<u32> {
    let mut out = Vec::new();
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("iocurve-io") {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else { continue };
        // Fields after the command name, which ends at the last ')': state is field 3.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        out.push(rest.split(' ').nth(41 - 3).unwrap().parse().unwrap());
    }
    out
}

/// Issue 15: 64 agents on 2 cores started 10 ms apart (16 agents 1–4 ms) because each woke
/// to zero its histograms (some hundred KiB) and was then queued behind the I/O threads of
/// the agents already running. The threads of a synchronized start now wait at real-time
/// priority, with everything allocated, and drop it once their first I/O is out: a thread
/// left real-time could take the CPU from the rest of the host for the whole step. As a user
/// that may not raise a thread (not root) the threads keep the normal policy throughout, and
/// the test shows only that the step runs the same.
#[test]
fn regression_a_synchronized_start_is_real_time_only_until_the_first_io() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.dat");
    std::fs::write(&path, vec![0x5a; 1 << 20]).unwrap();
    let groups = vec![TargetGroup { name: "g".into(), weight: 1, targets: vec![path.display().to_string()] }];
    let t = TargetSet::open(&groups, &OpenOptions::default()).unwrap();
    let w = Workload {
        name: "t".into(),
        read_pct: 100.0,
        bs: vec![BlockSize { bytes: 4096, weight: 1 }],
        pattern: Pattern::Random,
        working_set: WorkingSet::Backend,
        queue_depth: 4,
        ramp: vec![2],
        warmup_s: 0.0,
        intervals: 2,
        interval_s: 0.2,
        direct: false,
        backend: Backend::Null,
        threads: 2,
        ..Workload::default()
    };
    let stop = AtomicBool::new(false);
    // The root of the test machines may raise a thread; any other user keeps the normal
    // policy, and the step runs the same.
    let permitted = iocurve_engine::host::StartPriority::raise().is_some();
    let at_gate = std::sync::Mutex::new(Vec::new());
    let moment = std::sync::Mutex::new(0i64);
    let start_at = || {
        *at_gate.lock().unwrap() = io_thread_policies();
        // A moment ahead: the threads wait for it themselves, still real-time.
        let ahead = std::time::Duration::from_millis(20);
        *moment.lock().unwrap() = iocurve_stats::date::unix_ns() + ahead.as_nanos() as i64;
        Some(std::time::Instant::now() + ahead)
    };
    struct During<'a>(&'a std::sync::Mutex<Vec<u32>>);
    impl StepObserver for During<'_> {
        fn interval(&mut self, index: u32, _stats: &IntervalStats, _cpu: &CpuUsage, _duration_s: f64) {
            // After the first interval, while both threads run the second.
            if index == 0 {
                *self.0.lock().unwrap() = io_thread_policies();
            }
        }
    }
    let during = std::sync::Mutex::new(Vec::new());
    let cfg = StepConfig {
        workload: &w,
        workers: 2,
        backend: w.backend,
        threads: 2,
        targets: &t,
        stop: &stop,
        faults: &[],
        verify: None,
        journal: None,
        abort: None,
        start_at: Some(&start_at),
        synchronized: true,
        rate: None,
        replay: None,
        host: 0,
        end: None,
        iolog: None,
    };
    let rec = run_step(&cfg, &mut During(&during)).expect("the step runs");
    assert_eq!(rec.intervals.len(), 2);
    assert!(rec.total.read.ops > 0);
    let (gate, running) = (at_gate.into_inner().unwrap(), during.into_inner().unwrap());
    let fifo = libc::SCHED_FIFO as u32;
    let normal = libc::SCHED_OTHER as u32;
    assert_eq!(gate, vec![if permitted { fifo } else { normal }; 2], "waiting at the gate");
    assert_eq!(running, vec![normal; 2], "after the first I/Os were submitted");
    // Issue 46, part 3: the threads wait for the moment themselves, and the start reported is
    // when the latest of them woke for it: not before the moment (the two clock readings that
    // set it lie microseconds apart), and the measurement is timed from the moment itself.
    let moment = moment.into_inner().unwrap();
    let started = rec.started_unix_ns.expect("the engine says when the step began");
    assert!(started >= moment - 100_000, "began {} ns before the moment", moment - started);
    assert!(started < moment + 1_000_000_000, "began {} ns after the moment", started - moment);
    let from = rec.measured_from_unix_ns.unwrap();
    assert!((from - moment).abs() < 5_000_000, "measured from {} ns off the moment", from - moment);
}
