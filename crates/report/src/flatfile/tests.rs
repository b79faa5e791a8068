use super::*;
use iocurve_analysis::{HostInfo, TargetInfo, Thresholds, analyze_step};
use iocurve_stats::{CpuUsage, IntervalStats, Sample};

#[test]
fn the_header_is_pinned() {
    // Snapshot: vdbench users' scripts select these names; change them only on purpose and say
    // so in the CHANGELOG.
    assert_eq!(
        FLAT_COLUMNS.join(" "),
        "tod Run Interval reqrate rate MB/sec bytes/io resp resp_max xfersize threads rdpct seekpct lunsize \
         cpu_used cpu_user cpu_kernel cpu_wait"
    );
}

/// An interval as the store gives it back: `ops` I/Os of 4 KiB in `duration_s`, their mean and
/// slowest latency, and the host's CPU.
fn interval(ops: u64, duration_s: f64, mean_ns: f64, max_ns: u64, cpu: CpuUsage) -> IntervalRecord {
    let half = Sample { ops: ops / 2, bytes: ops / 2 * 4096, lat_sum_ns: 0, lat_max_ns: max_ns / 2, errors: 0 };
    let other = Sample { lat_max_ns: max_ns, ..half };
    IntervalRecord {
        ops,
        bytes: ops * 4096,
        lat_mean_ns: mean_ns,
        samples: vec![half, other],
        seconds: Vec::new(),
        cpu,
        duration_s,
        max_gap_ns: 0,
        faults_injected: 0,
        targets: Vec::new(),
        lag_p99_ns: None,
    }
}

fn cpu(user: f64, system: f64, iowait: f64) -> CpuUsage {
    CpuUsage { user, system, iowait, ..Default::default() }
}

/// A run of one random-read workload with one step of 16 workers at queue depth 2 and two
/// intervals, on 2 targets of 1 GiB and 512 MiB.
fn run_and_records() -> (RunResult, Vec<Vec<StepRecord>>) {
    let mut rec = StepRecord::new(16, 2, 1, 1.0, 0.5);
    let mut stats = IntervalStats::with_samples(2);
    stats.read.record(200_000, 4096);
    rec.push_interval(stats, CpuUsage::default(), 1.0);
    let mut step = analyze_step(&rec, false, &Thresholds::default());
    // The step's figures as the analysis gave them (set here to round numbers).
    step.iops = 1500.0;
    step.mbps = 6.144;
    step.lat_us.mean = 250.6;
    step.cpu = cpu(10.0, 5.0, 2.5);
    step.measured_from_unix_ns = Some(1_790_000_000_123_000_000);
    rec.intervals = vec![
        interval(1000, 1.0, 201_000.0, 1_200_000, cpu(8.0, 4.0, 2.0)),
        interval(4000, 2.0, 300_000.0, 3_456_789, cpu(11.0, 5.5, 3.0)),
    ];
    let w = workload("backend random read", vec![step]);
    let run = RunResult {
        schema_version: 1,
        tool_version: "0.1.0".into(),
        started_at: String::new(),
        finished_at: String::new(),
        interrupted: false,
        status: "complete".into(),
        status_reason: None,
        host: HostInfo {
            facts: Default::default(),
            backend: "io_uring".into(),
            backend_note: None,
            agents: Vec::new(),
        },
        sla: None,
        targets: [1u64 << 30, 1 << 29].iter().enumerate().map(|(i, &size)| target(i, size)).collect(),
        plan: serde_json::Value::Null,
        workloads: vec![w],
        final_verification: None,
        marks: Vec::new(),
        array: Vec::new(),
        array_checks: Vec::new(),
        reclaims: Vec::new(),
    };
    (run, vec![vec![rec]])
}

fn workload(name: &str, steps: Vec<StepResult>) -> WorkloadResult {
    WorkloadResult {
        name: name.into(),
        settings: Default::default(),
        kind: "random".into(),
        working_set: "backend".into(),
        read_pct: 100.0,
        trim_pct: 0.0,
        bs: "4k".into(),
        queue_depth: 2,
        shape: String::new(),
        backend: "io_uring".into(),
        speed: None,
        optimum: None,
        maximum: None,
        sla_maximum: None,
        maximum_undecided: None,
        sla_maximum_undecided: None,
        sla_answer: None,
        min_lat_us: None,
        data: Default::default(),
        data_check: Vec::new(),
        notes: Vec::new(),
        stop_at: Default::default(),
        links: None,
        grid: None,
        host_sweep: None,
        transfer_floor: None,
        claim: None,
        members: Vec::new(),
        steps,
    }
}

/// Target `i`: `/dev/x0`, `/dev/x1` … (two paths of one name would be one LUN's size).
fn target(i: usize, size: u64) -> TargetInfo {
    serde_json::from_value(serde_json::json!({
        "path": format!("/dev/x{i}"), "kind": "block", "size": size, "logical_block": 512, "group": "", "scratch": false
    }))
    .unwrap()
}

#[test]
fn rows_are_each_interval_then_the_step_average_in_vdbench_units() {
    let (run, records) = run_and_records();
    let text = flatfile(&run, &records);
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], FLAT_COLUMNS, "{text}");
    assert_eq!(lines.len(), 1 + 2 + 1, "two intervals and the average: {text}");
    // 1'790'000'000.123 s after the epoch is 2026-09-21 14:13:20.123 UTC; the first interval
    // ends 1 s later, the second 2 s after that.
    assert_eq!(
        lines[1],
        [
            "14:13:21.123",
            "backend_random_read",
            "1",
            "max",
            "1000.00",
            "3.91",
            "4096",
            "0.2010",
            "1.2000",
            "4096",
            "32",
            "100",
            "100",
            "1.500",
            "12.0",
            "8.0",
            "4.0",
            "2.0"
        ],
        "{text}"
    );
    assert_eq!(
        lines[2],
        [
            "14:13:23.123",
            "backend_random_read",
            "2",
            "max",
            "2000.00",
            "7.81",
            "4096",
            "0.3000",
            "3.4568",
            "4096",
            "32",
            "100",
            "100",
            "1.500",
            "16.5",
            "11.0",
            "5.5",
            "3.0"
        ],
        "{text}"
    );
    // The average: the step's own figures; 6.144 MB/s (10^6) are 5.86 MiB/s; its slowest I/O
    // is its intervals' slowest.
    assert_eq!(
        lines[3],
        [
            "14:13:23.123",
            "backend_random_read",
            "avg_1-2",
            "max",
            "1500.00",
            "5.86",
            "4096",
            "0.2506",
            "3.4568",
            "4096",
            "32",
            "100",
            "100",
            "1.500",
            "15.0",
            "10.0",
            "5.0",
            "2.5"
        ],
        "{text}"
    );
    // Columns are aligned: every line as long as the header.
    let widths: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
    assert!(widths.iter().all(|&w| w == widths[0]), "{text}");
}

#[test]
fn a_rate_step_asks_for_its_rate_and_a_step_without_wall_clock_time_drops_tod() {
    let (mut run, records) = run_and_records();
    let s = &mut run.workloads[0].steps[0];
    s.measured_from_unix_ns = None;
    s.rate = Some(
        serde_json::from_value(serde_json::json!({
            "target_iops": 2500.0, "due": 1, "achieved_pct": 100.0, "dropped": 0, "backlog": 0,
            "service_us": s.lat_us, "lag_us": s.lat_us, "sustained": true
        }))
        .unwrap(),
    );
    run.workloads[0].kind = "sequential".into();
    let text = flatfile(&run, &records);
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(lines[0], FLAT_COLUMNS[1..], "{text}");
    assert_eq!((lines[1][2], lines[1][11]), ("2500", "0"), "reqrate and seekpct: {text}");
}

#[test]
fn time_of_day_and_words() {
    assert_eq!(tod(0), "00:00:00.000");
    assert_eq!(tod(86_399_999_999_999), "23:59:59.999");
    assert_eq!(word("a b\tc"), "a_b_c");
    assert_eq!(word(""), "-");
}
