//! The data the charts draw: one series per run and pattern, columns of figures with their
//! significant digits, latency bucket labels.

use super::*;

pub(super) struct Series<'a> {
    pub(super) label: String,
    pub(super) color: &'static str,
    pub(super) dashed: bool,
    pub(super) w: &'a WorkloadResult,
    pub(super) data: Value,
}

/// Line style of a working set: the published figures draw frontend (cache) solid, backend
/// (the whole target) dashed, a range dotted.
pub(super) fn dash(working_set: &str) -> Vec<u32> {
    match working_set {
        "frontend" => vec![],
        "range" => vec![2, 3],
        _ => vec![8, 5],
    }
}

pub(super) fn series_of<'a>(runs: &[ReportRun], groups: &[Group<'a>]) -> Vec<Vec<Series<'a>>> {
    groups
        .iter()
        .map(|g| {
            g.members
                .iter()
                .enumerate()
                .map(|(mi, &(ri, w))| {
                    // Two workloads of one pattern and working set in one run are told apart by
                    // name and colour; usually the working set says it all.
                    let same = |&&(r2, w2): &&(usize, &WorkloadResult)| r2 == ri && w2.working_set == w.working_set;
                    let rank = g.members[..mi].iter().filter(same).count();
                    let own =
                        if g.members.iter().filter(same).count() > 1 { w.name.clone() } else { w.working_set.clone() };
                    let label = if runs.len() > 1 { format!("{} {own}", runs[ri].short()) } else { own };
                    let color = PALETTE[(ri + rank * 3) % PALETTE.len()];
                    let mut data = series_data(ri, &label, color, w);
                    super::seconds::add(&mut data, w);
                    Series { label, color, dashed: !dash(&w.working_set).is_empty(), w, data }
                })
                .collect()
        })
        .collect()
}

/// `x` rounded to `digits` significant digits: the charts need no more, and the file stays
/// small (a run of 10 workloads × 10 steps × 600 samples must stay well under 5 MB).
pub(super) fn sig(x: f64, digits: i32) -> Value {
    if !x.is_finite() {
        return Value::Null;
    }
    if x == 0.0 {
        return json!(0);
    }
    let decimals = digits - 1 - x.abs().log10().floor() as i32;
    if decimals <= 0 {
        let p = 10f64.powi(-decimals);
        json!(((x / p).round() * p) as i64)
    } else {
        let p = 10f64.powi(decimals);
        json!((x * p).round() / p)
    }
}

pub(super) fn column(steps: &[StepResult], f: impl Fn(&StepResult) -> f64) -> Vec<Value> {
    steps.iter().map(|s| sig(f(s), 5)).collect()
}

pub(super) fn series_data(run: usize, label: &str, color: &str, w: &WorkloadResult) -> Value {
    let seq = w.kind == "sequential";
    let by_depth = w.ramps_queue_depth();
    let s = &w.steps;
    json!({
        "run": run,
        "name": w.name,
        "label": label,
        "ws": w.working_set,
        // Its parameters, as a chart's PNG and SVG exports name them (issue 43).
        "about": about(w),
        "color": color,
        "dash": dash(&w.working_set),
        // Where the optimum and the maximum are among the steps: marked blue and orange.
        "opt": w.optimum.map(|p| p.step),
        // A rate ramp's stop_at bounds, drawn on its response-time curve.
        "stop_mean_us": w.stop_at.mean_ms.map(|v| v * 1000.0),
        "stop_p99_us": w.stop_at.p99_ms.map(|v| v * 1000.0),
        "max": w.maximum.map(|p| p.step),
        // One block's time on the hosts' link: a floor line on the latency charts (issue 42).
        "floor_us": w.transfer_floor.as_ref().map(|f| sig(f.us, 4)),
        "floor_label": w.transfer_floor.as_ref().map(|f| f.describe()),
        // A host count of a sweep: what its hosts' links carry (MB/s charts only).
        "ceiling": w.host_sweep.as_ref().filter(|h| seq && h.by_hosts.len() == 1).and_then(|h| h.by_hosts[0].link_ceiling_mbps),
        // A replay's steps: the speed of each (issue 45), named beside their rate.
        "speed": s.iter().any(|st| st.rate.as_ref().is_some_and(|r| r.replay_speed.is_some()))
            .then(|| s.iter().map(|st| st.rate.as_ref().and_then(|r| r.replay_speed)).collect::<Vec<_>>()),
        // The x of every step: its workers (a queue-depth ramp's: its depth), or a rate step's
        // target in the chart's unit.
        "x": s.iter().map(|st| match &st.rate {
            Some(_) => sig(crate::terminal::rate_target_value(st, seq).unwrap_or(0.0), if seq { 5 } else { 6 }),
            None if by_depth => json!(st.queue_depth),
            None => json!(st.workers),
        }).collect::<Vec<_>>(),
        "tput": column(s, |s| s.throughput(seq)),
        "mean": column(s, |s| s.lat_us.mean),
        "p50": column(s, |s| s.lat_us.p50),
        "p90": column(s, |s| s.lat_us.p90),
        "p99": column(s, |s| s.lat_us.p99),
        "p999": column(s, |s| s.lat_us.p99_9),
        "busy": column(s, |s| s.cpu.busy()),
        "iowait": column(s, |s| s.cpu.iowait),
        "hist": s.iter().map(|s| s.lat_histogram.iter().map(|b| sig(b.pct, 3)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        // The share of I/Os below each bucket's top: `< 500 µs: 74 %`.
        "hist_cum": s.iter().map(|s| cumulative_pct(&s.lat_histogram)).collect::<Vec<_>>(),
        "flags": s.iter().map(|s| s.flags.iter().map(|f| f.message.clone()).collect::<Vec<_>>()).collect::<Vec<_>>(),
        // When each step's measurement began, Unix seconds: the run's marks on its timeline.
        "from": s.iter().map(|s| s.measured_from_unix_ns.map(|n| n as f64 / 1e9)).collect::<Vec<_>>(),
        "timeline": s.iter().map(|s| json!({
            "t": s.samples.iter().map(|x| sig(x.t_s, 6)).collect::<Vec<_>>(),
            "tput": s.samples.iter().map(|x| sig(if seq { x.mbps } else { x.iops }, 4)).collect::<Vec<_>>(),
            "lat": s.samples.iter().map(|x| sig(x.lat_mean_us, 4)).collect::<Vec<_>>(),
            // The slowest I/O of each second, beside the mean.
            "max": s.samples.iter().map(|x| sig(x.lat_max_us, 3)).collect::<Vec<_>>(),
            // Errors per second only where there were any: the common case costs nothing.
            "errors": s.samples.iter().any(|x| x.errors > 0).then(|| s.samples.iter().map(|x| x.errors).collect::<Vec<_>>()),
            // A replay's intended IOPS in each sample (issue 45), where the throughput is IOPS.
            "intended": s.rate.as_ref().filter(|r| !seq && r.intended_iops.len() == s.samples.len()).map(|r| r.intended_iops.iter().map(|&v| sig(v, 4)).collect::<Vec<_>>()),
        })).collect::<Vec<_>>(),
        // The SNIA steady-state check of every step of 5 intervals or more: each interval's
        // throughput (a round), the window of 5 judged, its mean and best-fit line, the
        // measured range and excursion against the allowed 20 % and 10 %.
        "steady": s.iter().map(|st| st.steady_state.as_ref().map(|c| json!({
            "rounds": st.intervals.iter().map(|i| sig(if seq { i.mbps } else { i.iops }, 5)).collect::<Vec<_>>(),
            "first": c.first_round,
            "n": c.values.len(),
            // In the rounds' unit already (MB/s for a sequential workload).
            "mean": sig(c.mean, 5),
            "slope": sig(c.slope, 5),
            "intercept": sig(c.intercept, 5),
            "range_pct": sig(c.range_pct, 3),
            "excursion_pct": sig(c.excursion_pct, 3),
            "steady": c.steady,
        }))).collect::<Vec<_>>(),
        // Multi-host steps: each host's own timeline (null for a local step).
        "hosts": s.iter().map(|s| (!s.host_results.is_empty()).then(|| s.host_results.iter().map(|h| json!({
            "host": h.host,
            "lost": h.lost_at_s,
            "t": h.samples.iter().map(|x| sig(x.t_s, 6)).collect::<Vec<_>>(),
            "tput": h.samples.iter().map(|x| sig(if seq { x.mbps } else { x.iops }, 4)).collect::<Vec<_>>(),
        })).collect::<Vec<_>>())).collect::<Vec<_>>(),
    })
}

/// A workload's parameters in short: what its series stands for in an exported chart.
fn about(w: &WorkloadResult) -> Value {
    let mut a = json!({
        "kind": w.kind,
        "read_pct": w.read_pct,
        "bs": w.bs,
        "qd": w.queue_depth,
        "working_set": w.working_set,
    });
    if !w.shape.is_empty() {
        a["shape"] = json!(w.shape);
    }
    if w.trim_pct > 0.0 {
        a["trim_pct"] = json!(w.trim_pct);
    }
    a
}

/// The share of I/Os below the top of each bucket, in percent. Below 100 until the last I/O
/// is counted (a share that rounds to 100 % while some I/Os are slower reads `> 99.9 %`).
pub(super) fn cumulative_pct(buckets: &[LatencyBucket]) -> Vec<Value> {
    let total: u64 = buckets.iter().map(|b| b.count).sum();
    let mut below = 0u64;
    buckets
        .iter()
        .map(|b| {
            below += b.count;
            if total == 0 {
                return json!(0);
            }
            let pct = below as f64 * 100.0 / total as f64;
            if below < total { json!(sig(pct, 4).as_f64().unwrap_or(0.0).min(99.99)) } else { json!(100) }
        })
        .collect()
}

/// The top of a bucket as its label names it (`500 µs`, `1 ms`); None for the open last one.
pub(super) fn bucket_top(b: &LatencyBucket) -> Option<String> {
    b.to_us.map(|to| if to >= 1000.0 { format!("{} ms", to / 1000.0) } else { format!("{to} µs") })
}

/// `< 100 µs`, `100–250 µs`, `0.5–1 ms`, `≥ 256 ms`: the published bucket names.
pub(super) fn bucket_label(b: &LatencyBucket) -> String {
    let unit = |us: f64| {
        if us >= 1000.0 { (format!("{}", us / 1000.0), "ms") } else { (format!("{us}"), "µs") }
    };
    match b.to_us {
        None => {
            let (v, u) = unit(b.from_us);
            format!("≥ {v} {u}")
        }
        Some(to) if b.from_us == 0.0 => {
            let (v, u) = unit(to);
            format!("< {v} {u}")
        }
        Some(to) => {
            // A range stays in one unit: 500 µs–1 ms reads as 0.5–1 ms.
            let (v1, u1) = unit(to);
            let from = if u1 == "ms" { format!("{}", b.from_us / 1000.0) } else { format!("{}", b.from_us) };
            format!("{from}–{v1} {u1}")
        }
    }
}

pub(super) fn bucket_labels(runs: &[ReportRun]) -> Vec<String> {
    first_histogram(runs).map(|h| h.iter().map(bucket_label).collect()).unwrap_or_default()
}

pub(super) fn bucket_tops(runs: &[ReportRun]) -> Vec<Option<String>> {
    first_histogram(runs).map(|h| h.iter().map(bucket_top).collect()).unwrap_or_default()
}

fn first_histogram(runs: &[ReportRun]) -> Option<&[LatencyBucket]> {
    runs.iter().flat_map(|r| &r.result.workloads).flat_map(|w| &w.steps).next().map(|s| &s.lat_histogram[..])
}
