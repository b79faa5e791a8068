//! Impact of a run against a baseline: per workload, the change of throughput and latency at a
//! chosen point, as the published controller-failure tables give it ("809 kIOPS → 431 kIOPS,
//! −47 %").

use serde::Serialize;

use crate::result::{LatencyStats, Point, RunResult, WorkloadResult};
use crate::workload::MIN_NOISE;

/// Which point of each workload to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum At {
    /// The workload's first step (1 worker): the latency of a lone request.
    Speed,
    Maximum,
    Optimum,
    Sla,
}

impl At {
    pub fn point(self, w: &WorkloadResult) -> Option<Point> {
        match self {
            At::Speed => w.speed,
            At::Maximum => w.maximum,
            At::Optimum => w.optimum,
            At::Sla => w.sla_maximum,
        }
    }

    /// The point is undecided on this side: its top step too noisy (issue 37).
    pub fn undecided(self, w: &WorkloadResult) -> bool {
        match self {
            At::Maximum => w.maximum_undecided.is_some(),
            At::Speed | At::Optimum => false,
            At::Sla => w.sla_maximum_undecided.is_some(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            At::Speed => "speed",
            At::Maximum => "maximum",
            At::Optimum => "optimum",
            At::Sla => "SLA maximum",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Impact {
    /// The baseline's label (the run's where only the run has it).
    pub workload: String,
    /// The run's label where it differs: paired by settings (shared/DESIGN.md), not by name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_workload: Option<String>,
    pub sequential: bool,
    /// Throughput compared in MB/s: a sequential workload, or one whose block sizes differ
    /// between the runs (issue 37, finding 4: IOPS of 4k against IOPS of 8k said +0 % where
    /// MB/s doubled).
    pub in_mbps: bool,
    /// None when the workload or its point is missing on that side.
    pub baseline: Option<Point>,
    pub run: Option<Point>,
    /// The point is undecided on that side (too noisy to tell): no figure, and said so.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub baseline_undecided: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub run_undecided: bool,
    /// At the SLA maximum: whether the workload's answer is open loop (rate steps, the one to
    /// quote) or closed loop (a worker ramp's, an upper bound). None at other points.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open_loop: Option<bool>,
    /// Change of throughput (IOPS, or MB/s for sequential workloads) in percent.
    pub throughput_pct: Option<f64>,
    /// Change of mean latency at the point, in percent.
    pub latency_pct: Option<f64>,
    /// Change of mean latency at the point, µs (run − baseline): what synchronous mirroring
    /// adds to every write ("+295 µs at 8 KB") reads better in µs than in percent.
    #[serde(default)]
    pub latency_us: Option<f64>,
    /// Change of mean latency at speed (each side's first step: a lone request), µs.
    #[serde(default)]
    pub speed_latency_us: Option<f64>,
    /// Change of the lowest latency seen (each side's `min_lat_us`), µs.
    #[serde(default)]
    pub min_latency_us: Option<f64>,
    /// The throughput loss the change was expected to bring (`compare --expected-loss`), in
    /// percent: 75 for 3 of 4 controllers removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_loss_pct: Option<f64>,
    /// The throughput change against the expected one, in percentage points: +14 where −61 %
    /// came of an expected −75 % (better than expected), negative where worse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_expected_points: Option<f64>,
    /// The noise of the throughput change, in percent: both points' interval-to-interval
    /// spread (CV, at least [`MIN_NOISE`] each) added in quadrature. A change within it is no
    /// finding. None when a side or its steps are missing.
    pub noise_pct: Option<f64>,
}

impl Impact {
    /// The throughput change is within the measurement noise of the two runs.
    pub fn within_noise(&self) -> bool {
        matches!((self.throughput_pct, self.noise_pct), (Some(c), Some(n)) if c.abs() <= n)
    }
}

fn change(base: f64, new: f64) -> Option<f64> {
    (base > 0.0).then(|| (new - base) / base * 100.0)
}

/// One row per workload of the baseline, then those only the run has; workloads paired by
/// their settings ([`crate::pairing`]).
pub fn compare(baseline: &RunResult, run: &RunResult, at: At) -> Vec<Impact> {
    crate::pairing::pairs(baseline, run)
        .into_iter()
        .map(|pair| {
            let (b, r) = (pair.baseline, pair.run);
            let sequential = b.or(r).is_some_and(|w| w.kind == "sequential");
            let bs_differ = matches!((b, r), (Some(x), Some(y)) if x.bs != y.bs);
            let in_mbps = sequential || bs_differ;
            let (bp, rp) = (b.and_then(|w| at.point(w)), r.and_then(|w| at.point(w)));
            let tput = |p: &Point| if in_mbps { p.mbps } else { p.iops };
            let (throughput_pct, latency_pct) = match (bp, rp) {
                (Some(x), Some(y)) => (change(tput(&x), tput(&y)), change(x.lat_us, y.lat_us)),
                _ => (None, None),
            };
            let latency_us = bp.zip(rp).map(|(x, y)| y.lat_us - x.lat_us);
            let speed = |w: Option<&WorkloadResult>| w.and_then(|w| w.speed).map(|p| p.lat_us);
            let min = |w: Option<&WorkloadResult>| w.and_then(|w| w.min_lat_us);
            let cv = |w: Option<&WorkloadResult>, p: Option<Point>| {
                w.zip(p).and_then(|(w, p)| w.steps.get(p.step)).map(|s| s.cv.max(MIN_NOISE))
            };
            let noise_pct = cv(b, bp).zip(cv(r, rp)).map(|(x, y)| (x * x + y * y).sqrt() * 100.0);
            Impact {
                workload: pair.label().to_string(),
                run_workload: pair.run_label().map(str::to_string),
                sequential,
                in_mbps,
                baseline: bp,
                run: rp,
                baseline_undecided: b.is_some_and(|w| at.undecided(w)),
                run_undecided: r.is_some_and(|w| at.undecided(w)),
                // Marked when the sides agree (a pair by label may join a rate ramp to a worker ramp).
                open_loop: match (at, b.and_then(|w| w.sla_answer.as_ref()), r.and_then(|w| w.sla_answer.as_ref())) {
                    (At::Sla, Some(x), Some(y)) if x.open_loop != y.open_loop => None,
                    (At::Sla, x, y) => x.or(y).map(|a| a.open_loop),
                    _ => None,
                },
                throughput_pct,
                latency_pct,
                latency_us,
                speed_latency_us: speed(b).zip(speed(r)).map(|(x, y)| y - x),
                min_latency_us: min(b).zip(min(r)).map(|(x, y)| y - x),
                expected_loss_pct: None,
                vs_expected_points: None,
                noise_pct,
            }
        })
        .collect()
}

/// The impacts against an expected loss of throughput (`loss_pct`, 0 to 100): each change's
/// distance from −loss in percentage points, positive where it lost less than expected ("3 of
/// 4 controllers removed cost 61 % instead of the expected 75 %: 14 points better").
pub fn expecting(mut rows: Vec<Impact>, loss_pct: f64) -> Vec<Impact> {
    for r in &mut rows {
        r.expected_loss_pct = Some(loss_pct);
        r.vs_expected_points = r.throughput_pct.map(|c| c + loss_pct);
    }
    rows
}

/// A target rate a workload was driven at in both runs: its response time on each side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RateImpact {
    pub workload: String,
    pub target_iops: f64,
    pub baseline: LatencyStats,
    pub run: LatencyStats,
    pub baseline_sustained: bool,
    pub run_sustained: bool,
    /// Change of p99 and mean response time, in percent.
    pub p99_pct: Option<f64>,
    pub mean_pct: Option<f64>,
}

/// Every target rate a workload ran at in both runs, in the baseline's order: capacity planning
/// asks what the same load costs in latency on the other configuration.
pub fn rate_impacts(baseline: &RunResult, run: &RunResult) -> Vec<RateImpact> {
    let mut out = Vec::new();
    for pair in crate::pairing::pairs(baseline, run) {
        // The same target IOPS is another load at another block size.
        let (Some(b), Some(r)) = (pair.baseline, pair.run) else { continue };
        if b.bs != r.bs {
            continue;
        }
        for bs in &b.steps {
            let Some(br) = &bs.rate else { continue };
            let found = r.steps.iter().find(|s| s.rate.as_ref().is_some_and(|x| x.target_iops == br.target_iops));
            let Some(rs) = found else { continue };
            out.push(RateImpact {
                workload: b.name.clone(),
                target_iops: br.target_iops,
                baseline: bs.lat_us,
                run: rs.lat_us,
                baseline_sustained: br.sustained,
                run_sustained: rs.rate.as_ref().is_some_and(|x| x.sustained),
                p99_pct: change(bs.lat_us.p99, rs.lat_us.p99),
                mean_pct: change(bs.lat_us.mean, rs.lat_us.mean),
            });
        }
    }
    out
}

/// How two runs differ in what they measured, one line each (empty: like with like): the
/// workloads' keys that change the figures (direct or buffered, back-end, ramp, block size,
/// queue depth, read share, pattern, working set, data), the host count and the targets. An
/// impact between such runs is the difference of two setups, not of the storage alone.
pub fn differences(baseline: &RunResult, run: &RunResult) -> Vec<String> {
    const KEYS: &[&str] = &[
        "direct",
        "backend",
        "ramp",
        "bs",
        "queue_depth",
        "read_pct",
        "pattern",
        "working_set",
        "threads",
        "data",
        "rate",
        "arrival",
        "max_outstanding",
        "overload",
        // What shapes the load (issue 39): absent where a workload has none.
        "write_bs",
        "distribution",
        "hot_layout",
        "think",
        "bursts",
        // Trims (issue 40): absent where a workload does not trim.
        "trim_pct",
        "trim_bs",
        // Ramps of depths and hosts (issue 41): absent where a workload has none.
        "qd_ramp",
        "host_ramp",
    ];
    let workload = |r: &RunResult, name: &str| -> Option<serde_json::Value> {
        r.plan["workloads"].as_array()?.iter().find(|w| w["name"] == name).cloned()
    };
    let mut out = Vec::new();
    for pair in crate::pairing::pairs(baseline, run) {
        let (Some(x), Some(y)) = (pair.baseline, pair.run) else { continue };
        let (Some(a), Some(b)) = (workload(baseline, &x.name), workload(run, &y.name)) else { continue };
        let mut diff: Vec<String> = Vec::new();
        // What two read-only workloads would write differs in nothing they measured.
        let reads_only = x.read_pct >= 100.0 && y.read_pct >= 100.0;
        for k in KEYS.iter().filter(|k| a[**k] != b[**k] && !(reads_only && **k == "data")) {
            match (k, &a[*k], &b[*k]) {
                // `direct vs buffered`, not `direct direct vs buffered`.
                (&"direct", x, y) => diff.push(format!("{} vs {}", worded(k, x), worded(k, y))),
                // `working set backend vs range 1m..8m`, not its fields one by one.
                (&"working_set", x, y) => diff.push(format!("working set {} vs {}", working_set(x), working_set(y))),
                // `think 1ms vs none`, not its fields one by one.
                (&"think", x, y) => diff.push(format!("think {} vs {}", think(x), think(y))),
                // Of a group of keys (data, working set), the ones that differ.
                (_, serde_json::Value::Object(x), serde_json::Value::Object(y)) => {
                    let mut fields: Vec<&String> = x.keys().chain(y.keys().filter(|f| !x.contains_key(*f))).collect();
                    fields.dedup();
                    for f in fields {
                        let (xf, yf) = (
                            x.get(f).unwrap_or(&serde_json::Value::Null),
                            y.get(f).unwrap_or(&serde_json::Value::Null),
                        );
                        if xf != yf {
                            diff.push(format!("{k} {f} {} vs {}", worded(f, xf), worded(f, yf)));
                        }
                    }
                }
                (_, x, y) => {
                    let key = if *k == "read_pct" { "reads".to_string() } else { k.replace('_', " ") };
                    diff.push(format!("{key} {} vs {}", worded(k, x), worded(k, y)))
                }
            }
        }
        if !diff.is_empty() {
            out.push(format!("{}: {}", x.name, diff.join(", ")));
        }
    }
    let hosts = |r: &RunResult| r.host.agents.iter().filter(|a| a.lost.is_none()).count().max(1);
    if hosts(baseline) != hosts(run) {
        out.push(format!("hosts: {} vs {}", hosts(baseline), hosts(run)));
    }
    let targets = |r: &RunResult| {
        let t: Vec<String> =
            r.targets.iter().map(|t| format!("{} ({})", t.path, iocurve_plan::format_size(t.size))).collect();
        if t.is_empty() { "none".to_string() } else { t.join(", ") }
    };
    if targets(baseline) != targets(run) {
        out.push(format!("targets: {} vs {}", targets(baseline), targets(run)));
    }
    out
}

/// A think time in words: `500us`, `1ms every 4 I/Os`, `none`.
fn think(v: &serde_json::Value) -> String {
    match v["time"].as_str() {
        None => "none".into(),
        Some(t) => match v["blocks"].as_u64() {
            Some(b) if b > 1 => format!("{t} every {b} I/Os"),
            _ => t.to_string(),
        },
    }
}

/// A working set in words: `backend`, `frontend of 1000 blocks`, `range 1m..8m`.
fn working_set(v: &serde_json::Value) -> String {
    let size = |f: &str| v[f].as_u64().map_or_else(|| "?".to_string(), iocurve_plan::format_size);
    match v["kind"].as_str() {
        Some("frontend") => match v["blocks"].as_u64() {
            Some(b) => format!("frontend of {b} blocks"),
            None => "frontend".into(),
        },
        Some("range") => format!("range {}..{}", size("start"), size("end")),
        Some(k) => k.to_string(),
        None => worded("working_set", v),
    }
}

/// A plan key's value as a person writes it (issue 37, finding 4: `compare` printed raw JSON,
/// `bs [{"bytes":4096,"weight":1}] vs …`): `4k`, `4k 70 % / 64k 30 %`, `1,2,4`, `direct`.
fn worded(key: &str, v: &serde_json::Value) -> String {
    use serde_json::Value;
    match (key, v) {
        ("bs", Value::Array(sizes)) => {
            let size = |s: &Value| s["bytes"].as_u64().map(iocurve_plan::format_size);
            let total: u64 = sizes.iter().filter_map(|s| s["weight"].as_u64()).sum();
            match sizes.as_slice() {
                [one] => size(one).unwrap_or_else(|| one.to_string()),
                _ => sizes
                    .iter()
                    .map(|s| match (size(s), s["weight"].as_u64()) {
                        (Some(b), Some(w)) if total > 0 => format!("{b} {:.0} %", w as f64 * 100.0 / total as f64),
                        (Some(b), _) => b,
                        _ => s.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(" / "),
            }
        }
        ("direct", Value::Bool(d)) => if *d { "direct" } else { "buffered" }.into(),
        ("write_bs", Value::Array(_)) => worded("bs", v),
        ("write_bs", Value::Null) => "as reads".into(),
        ("trim_bs", Value::Array(_)) => worded("bs", v),
        ("trim_bs", Value::Null) => "as bs".into(),
        ("trim_pct", Value::Null) => "0 %".into(),
        ("trim_pct", Value::Number(n)) => format!("{} %", n.as_f64().unwrap_or_default()),
        ("distribution", Value::Null) => "uniform".into(),
        ("hot_layout", Value::Null) => "contiguous".into(),
        ("read_pct", Value::Number(n)) => format!("{} %", n.as_f64().unwrap_or_default()),
        (_, Value::Null) => "none".into(),
        (_, Value::String(s)) => s.clone(),
        (_, Value::Number(n)) => n.to_string(),
        (_, Value::Bool(b)) => b.to_string(),
        (_, Value::Array(items)) => items.iter().map(|i| worded("", i)).collect::<Vec<_>>().join(","),
        (_, Value::Object(fields)) => {
            fields.iter().map(|(k, v)| format!("{k} {}", worded(k, v))).collect::<Vec<_>>().join(", ")
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::result::HostInfo;

    pub(crate) fn workload(name: &str, kind: &str, max: (f64, f64, f64)) -> WorkloadResult {
        let p =
            Point { step: 0, workers: 64, queue_depth: 1, iops: max.0, mbps: max.1, lat_us: max.2, target_iops: None };
        WorkloadResult {
            name: name.into(),
            settings: Default::default(),
            kind: kind.into(),
            working_set: "backend".into(),
            read_pct: 100.0,
            trim_pct: 0.0,
            bs: "8k".into(),
            queue_depth: 1,
            shape: String::new(),
            backend: "io_uring".into(),
            steps: vec![],
            speed: None,
            optimum: Some(p),
            maximum: Some(p),
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
        }
    }

    pub(crate) fn run(workloads: Vec<WorkloadResult>) -> RunResult {
        RunResult {
            schema_version: 1,
            tool_version: "t".into(),
            started_at: String::new(),
            finished_at: String::new(),
            interrupted: false,
            status: "complete".into(),
            status_reason: None,
            host: HostInfo {
                facts: iocurve_stats::HostFacts {
                    hostname: "h".into(),
                    kernel: "k".into(),
                    cpu_model: "c".into(),
                    cores: 2,
                    ..Default::default()
                },
                backend: "io_uring".into(),
                backend_note: None,
                agents: Vec::new(),
            },
            sla: None,
            targets: vec![],
            plan: serde_json::Value::Null,
            workloads,
            final_verification: None,
            reclaims: Vec::new(),
            marks: Vec::new(),
            array: Vec::new(),
            array_checks: Vec::new(),
        }
    }

    /// Issue 37, finding 4: "not like with like" printed raw JSON (`bs [{"bytes":4096,
    /// "weight":1}] vs …`), and random workloads of different block sizes were compared in IOPS
    /// (MB/s doubled, it said +0 %).
    #[test]
    fn regression_differences_are_worded_and_other_block_sizes_compare_mb_s() {
        let plan = |bs: serde_json::Value, direct: bool, ramp: serde_json::Value| {
            serde_json::json!({"workloads": [{"name": "w", "bs": bs, "direct": direct, "ramp": ramp,
                "data": {"compress": 0.5, "dedupe": 1}}]})
        };
        let mut base = run(vec![workload("w", "random", (10_000.0, 40.96, 100.0))]);
        let mut new = run(vec![workload("w", "random", (10_000.0, 81.92, 100.0))]);
        base.workloads[0].bs = "4k".into();
        new.workloads[0].bs = "8k".into();
        // Writes: the data they write is part of what they measured.
        base.workloads[0].read_pct = 0.0;
        new.workloads[0].read_pct = 0.0;
        base.plan = plan(serde_json::json!([{"bytes": 4096, "weight": 1}]), true, serde_json::json!([1, 2]));
        new.plan = plan(
            serde_json::json!([{"bytes": 4096, "weight": 7}, {"bytes": 65536, "weight": 3}]),
            false,
            serde_json::json!([1, 4]),
        );
        new.plan["workloads"][0]["data"]["compress"] = serde_json::json!(0.4);
        let d = differences(&base, &new);
        assert_eq!(
            d,
            vec!["w: direct vs buffered, ramp 1,2 vs 1,4, bs 4k vs 4k 70 % / 64k 30 %, data compress 0.5 vs 0.4"]
        );
        // Reads, queue depth and working set in words too (found by an outside attack:
        // `read_pct 100.0 vs 70.0`, `working_set kind backend vs range, working_set end none vs …`).
        let (mut wb, mut wn) = (base.clone(), new.clone());
        let w0 =
            serde_json::json!({"name": "w", "read_pct": 100.0, "queue_depth": 1, "working_set": {"kind": "backend"}});
        let w1 = serde_json::json!({"name": "w", "read_pct": 70.0, "queue_depth": 4, "working_set": {"kind": "range", "start": 1048576, "end": 8388608}});
        (wb.plan, wn.plan) = (serde_json::json!({"workloads": [w0]}), serde_json::json!({"workloads": [w1]}));
        assert_eq!(
            differences(&wb, &wn),
            ["w: queue depth 1 vs 4, reads 100 % vs 70 %, working set backend vs range 1m..8m"]
        );
        // What shapes the load (issue 39: a zipf run was paired with a uniform one and the note
        // did not say how they differ).
        let w0 = serde_json::json!({"name": "w"});
        let w1 = serde_json::json!({"name": "w", "distribution": "zipf:1.2", "hot_layout": "scattered",
            "write_bs": [{"bytes": 65536, "weight": 1}], "think": {"time": "1ms", "blocks": 4}, "bursts": "100ms/900ms"});
        (wb.plan, wn.plan) = (serde_json::json!({"workloads": [w0]}), serde_json::json!({"workloads": [w1]}));
        assert_eq!(
            differences(&wb, &wn),
            [
                "w: write bs as reads vs 64k, distribution uniform vs zipf:1.2, hot layout contiguous vs scattered, think none vs 1ms every 4 I/Os, bursts none vs 100ms/900ms"
            ]
        );
        // Reads write nothing: what their data would be is no difference.
        let (mut rb, mut rn) = (base.clone(), new.clone());
        (rb.workloads[0].read_pct, rn.workloads[0].read_pct) = (100.0, 100.0);
        assert!(!differences(&rb, &rn)[0].contains("data"));
        let rows = compare(&base, &new, At::Maximum);
        let r = &rows[0];
        assert!(r.in_mbps && !r.sequential, "{r:?}");
        assert!((r.throughput_pct.unwrap() - 100.0).abs() < 1e-9, "MB/s doubled: {r:?}");
        // The same block size: IOPS, as before.
        new.workloads[0].bs = "4k".into();
        let r = &compare(&base, &new, At::Maximum)[0];
        assert!(!r.in_mbps && r.throughput_pct.unwrap().abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn published_controller_failure_figures() {
        // 8 of 8 controllers vs 7 of 8: random in IOPS, sequential in MB/s.
        let base = run(vec![
            workload("backend-random-read-8k", "random", (809_000.0, 6_627.0, 250.0)),
            workload("backend-seq-read-1m", "sequential", (1_000.0, 20_000.0, 1_000.0)),
            workload("only-in-baseline", "random", (1.0, 1.0, 1.0)),
        ]);
        let new = run(vec![
            workload("backend-random-read-8k", "random", (431_000.0, 3_531.0, 400.0)),
            workload("backend-seq-read-1m", "sequential", (999.0, 12_600.0, 1_100.0)),
            workload("only-in-run", "random", (1.0, 1.0, 1.0)),
        ]);
        let rows = compare(&base, &new, At::Maximum);
        assert_eq!(rows.len(), 4);
        let r = &rows[0];
        assert!((r.throughput_pct.unwrap() - (-46.72435105067985)).abs() < 1e-9, "{r:?}");
        assert!((r.latency_pct.unwrap() - 60.0).abs() < 1e-9);
        // Sequential workloads compare MB/s, not IOPS.
        assert!((rows[1].throughput_pct.unwrap() - (-37.0)).abs() < 1e-9, "{:?}", rows[1]);
        assert_eq!((rows[2].run, rows[2].throughput_pct), (None, None));
        assert_eq!((rows[3].workload.as_str(), rows[3].baseline), ("only-in-run", None));
        // No SLA maximum on either side: nothing to compare, no invented figures.
        assert!(compare(&base, &new, At::Sla).iter().all(|r| r.throughput_pct.is_none()));
    }

    /// Issue 42: synchronous mirroring added 290–300 µs at 8 KB (in µs, at speed); 3 of 4
    /// controllers removed cost 61 % of the throughput where 75 % was expected.
    #[test]
    fn latency_in_microseconds_and_the_loss_against_the_expected() {
        let at_speed = |mut w: WorkloadResult, lat: f64, min: f64| {
            w.speed = Some(Point {
                step: 0,
                workers: 1,
                queue_depth: 1,
                iops: 1.0,
                mbps: 1.0,
                lat_us: lat,
                target_iops: None,
            });
            w.min_lat_us = Some(min);
            w
        };
        let base = run(vec![at_speed(workload("w", "random", (100_000.0, 819.2, 400.0)), 210.0, 120.0)]);
        let new = run(vec![at_speed(workload("w", "random", (39_000.0, 319.5, 1000.0)), 505.0, 200.0)]);
        let r = &compare(&base, &new, At::Speed)[0];
        assert_eq!((r.latency_us, r.speed_latency_us), (Some(295.0), Some(295.0)), "{r:?}");
        assert_eq!(r.min_latency_us, Some(80.0));
        let r = &expecting(compare(&base, &new, At::Maximum), 75.0)[0];
        assert_eq!(r.latency_us, Some(600.0), "at the maximum: 400 → 1000 µs");
        assert_eq!(r.speed_latency_us, Some(295.0), "at speed whatever the point");
        assert!((r.throughput_pct.unwrap() + 61.0).abs() < 1e-9, "{r:?}");
        assert_eq!(r.expected_loss_pct, Some(75.0));
        assert!((r.vs_expected_points.unwrap() - 14.0).abs() < 1e-9, "{r:?}");
        // A side without the point: nothing to set against the expectation.
        assert_eq!(expecting(compare(&base, &new, At::Sla), 75.0)[0].vs_expected_points, None);
    }

    /// Issue 16: each impact comes with the noise of both runs; a change inside it is no
    /// finding.
    #[test]
    fn impacts_carry_the_noise_of_both_runs() {
        let with_cv = |mut w: WorkloadResult, cv: f64| {
            let mut st = iocurve_stats::IntervalStats::with_samples(1);
            st.read.record(1000, 4096);
            let mut rec = iocurve_stats::StepRecord::new(64, 1, 1, 1.0, 1.0);
            rec.push_interval(st, iocurve_stats::CpuUsage::default(), 1.0);
            let mut s = crate::analyze_step(&rec, false, &crate::Thresholds::default());
            s.cv = cv;
            w.steps = vec![s];
            w
        };
        let base = run(vec![with_cv(workload("w", "random", (100_000.0, 400.0, 100.0)), 0.03)]);
        let new = run(vec![with_cv(workload("w", "random", (98_000.0, 392.0, 100.0)), 0.04)]);
        let r = &compare(&base, &new, At::Maximum)[0];
        assert!((r.noise_pct.unwrap() - 5.0).abs() < 1e-9, "√(3² + 4²) = 5 %: {r:?}");
        assert!(r.within_noise(), "-2 % within ±5 %");
        // A steady pair: the floor of 1 % each.
        let base = run(vec![with_cv(workload("w", "random", (100_000.0, 400.0, 100.0)), 0.0)]);
        let new = run(vec![with_cv(workload("w", "random", (90_000.0, 360.0, 100.0)), 0.0)]);
        let r = &compare(&base, &new, At::Maximum)[0];
        assert!((r.noise_pct.unwrap() - 2f64.sqrt()).abs() < 1e-9 && !r.within_noise(), "{r:?}");
    }

    /// Issue 16, finding 5: `compare` of runs that measured different things (buffered against
    /// direct, other ramps) printed impacts without a word.
    #[test]
    fn runs_that_measured_different_things_are_named_so() {
        let mut base = run(vec![workload("w", "random", (1.0, 1.0, 1.0))]);
        let mut new = base.clone();
        let plan = |direct: bool, ramp: &[u32]| serde_json::json!({"workloads": [{"name": "w", "direct": direct, "ramp": ramp, "bs": [{"bytes": 8192, "weight": 1}]}]});
        base.plan = plan(true, &[1, 2, 4]);
        new.plan = plan(true, &[1, 2, 4]);
        assert!(differences(&base, &new).is_empty(), "like with like");
        new.plan = plan(false, &[1, 2]);
        new.targets = vec![crate::TargetInfo {
            path: "/dev/sdb".into(),
            kind: "block device".into(),
            size: 1 << 30,
            logical_block: 512,
            group: "targets".into(),
            scratch: false,
            preconditioned_at: None,
            lun: None,
            device: None,
        }];
        let d = differences(&base, &new);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0], "w: direct vs buffered, ramp 1,2,4 vs 1,2");
        assert_eq!(d[1], "targets: none vs /dev/sdb (1g)", "{d:?}");
    }
}
