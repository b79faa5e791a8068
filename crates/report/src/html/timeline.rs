//! The whole run in time (issue 44): every step of every workload on one clock (seconds since
//! the run's start, UTC on the axis), each target's and each host's throughput and latency
//! beside them (the balance: which target slowed down, when), and the run's marks. The samples
//! are binned to at most [`MAX_POINTS`] per line over the run, so that a run of hours keeps the
//! report small; a step's own timeline keeps every second.

use iocurve_analysis::SampleResult;

use super::*;

/// Points per line at most over the whole run.
const MAX_POINTS: f64 = 1500.0;

/// One sample on the run's clock: its start (s since the run's start), length, I/Os, throughput
/// in the line's unit, mean latency (µs).
type Point = (f64, f64, u64, f64, f64);

/// A line binned to `bin` seconds: time-weighted throughput, I/O-weighted latency; a gap (no
/// sample for longer than a bin and a sample) breaks the line.
fn binned(mut pts: Vec<Point>, bin: f64) -> (Vec<Value>, Vec<Value>, Vec<Value>) {
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut t, mut tput, mut lat) = (Vec::new(), Vec::new(), Vec::new());
    let mut i = 0;
    let mut last_end: Option<f64> = None;
    while i < pts.len() {
        let b = (pts[i].0 / bin).floor();
        let (mut dur, mut work, mut ops, mut lat_sum) = (0.0, 0.0, 0u64, 0.0);
        let start = pts[i].0;
        if let Some(end) = last_end
            && start - end > bin.max(pts[i].1) * 0.5
        {
            // Between steps: no line across the warm-up and the rest.
            t.push(sig((end + start) / 2.0, 6));
            tput.push(Value::Null);
            lat.push(Value::Null);
        }
        while i < pts.len() && (pts[i].0 / bin).floor() == b {
            let (_, d, n, v, l) = pts[i];
            dur += d;
            work += v * d;
            ops += n;
            lat_sum += l * n as f64;
            last_end = Some(pts[i].0 + d);
            i += 1;
        }
        t.push(sig(if bin > 1.0 { b * bin } else { start }, 6));
        tput.push(if dur > 0.0 { sig(work / dur, 4) } else { Value::Null });
        lat.push(if ops > 0 { sig(lat_sum / ops as f64, 4) } else { Value::Null });
    }
    (t, tput, lat)
}

fn line(name: &str, pts: Vec<Point>, bin: f64) -> Value {
    let (t, tput, lat) = binned(pts, bin);
    json!({ "name": name, "t": t, "tput": tput, "lat": lat })
}

/// The workloads whose lines the timeline draws: a concurrent step's members, not their total
/// beside them; and those whose targets' and hosts' figures it draws: the total, whose parts are
/// the targets' whole load then (the members' parts at one moment would be two points of one
/// line, averaged to half).
fn drawn(r: &RunResult) -> (Vec<&WorkloadResult>, Vec<&WorkloadResult>) {
    let has = |m: &String| r.workloads.iter().any(|x| &x.name == m);
    let split = |w: &&WorkloadResult| !w.members.is_empty() && w.members.iter().all(has);
    let members: Vec<&str> =
        r.workloads.iter().filter(split).flat_map(|w| w.members.iter().map(String::as_str)).collect();
    let lines = r.workloads.iter().filter(|w| !split(w)).collect();
    let whole = r.workloads.iter().filter(|w| !members.contains(&w.name.as_str())).collect();
    (lines, whole)
}

/// The run's timeline data for the report (None: no step has a start on the clock).
pub(super) fn timeline(ri: usize, run: &ReportRun) -> Option<Value> {
    let r = &run.result;
    let starts = r.workloads.iter().flat_map(|w| w.steps.iter().filter_map(|s| s.measured_from_unix_ns));
    let first = starts.min()?;
    let t0_ns = iocurve_stats::date::parse_timestamp(&r.started_at, Some(0)).unwrap_or(first).min(first);
    let at = |s: &StepResult, t: f64| (s.measured_from_unix_ns.unwrap_or(t0_ns) - t0_ns) as f64 / 1e9 + t;
    let (workloads, whole) = drawn(r);
    let end = workloads.iter().flat_map(|w| w.steps.iter()).map(|s| at(s, s.duration_s)).fold(0.0, f64::max).max(1.0);
    let bin = (end / MAX_POINTS).ceil().max(1.0);
    let seq = |w: &WorkloadResult| w.kind == "sequential";
    let all_seq = workloads.iter().all(|w| seq(w));
    let value = |s: &SampleResult, in_mb: bool| if in_mb { s.mbps } else { s.iops };
    let mut steps = Vec::new();
    let mut lines = Vec::new();
    // Per target and per host: (name, points), in the order first seen.
    let mut targets: Vec<(String, Vec<Point>)> = Vec::new();
    let mut hosts: Vec<(String, Vec<Point>)> = Vec::new();
    let add =
        |list: &mut Vec<(String, Vec<Point>)>, name: &str, p: Point| match list.iter_mut().find(|(n, _)| n == name) {
            Some((_, v)) => v.push(p),
            None => list.push((name.to_string(), vec![p])),
        };
    for w in &workloads {
        let mut pts = Vec::new();
        for (k, s) in w.steps.iter().enumerate().filter(|(_, s)| s.measured_from_unix_ns.is_some()) {
            let label = terminal::step_place(w, k, s);
            steps.push(json!({ "from": sig(at(s, 0.0), 6), "to": sig(at(s, s.duration_s), 6), "label": label, "workload": w.name }));
            pts.extend(s.samples.iter().map(|x| (at(s, x.t_s), x.dur_s, x.ops, value(x, seq(w)), x.lat_mean_us)));
        }
        lines.push(json!({ "unit": if seq(w) { "MB/s" } else { "IOPS" }, "line": line(&w.name, pts, bin) }));
    }
    for s in whole.iter().flat_map(|w| w.steps.iter()).filter(|s| s.measured_from_unix_ns.is_some()) {
        for t in &s.targets {
            // A lone target's timeline is the step's.
            let own: &[SampleResult] = if s.targets.len() == 1 { &s.samples } else { &t.samples };
            for x in own {
                add(&mut targets, &t.target, (at(s, x.t_s), x.dur_s, x.ops, value(x, all_seq), x.lat_mean_us));
            }
        }
        for h in &s.host_results {
            for x in &h.samples {
                add(&mut hosts, &h.host, (at(s, x.t_s), x.dur_s, x.ops, value(x, all_seq), x.lat_mean_us));
            }
        }
    }
    // The array's own series (`iocurve array`), each point a second of its value.
    let array: Vec<Value> = r
        .array
        .iter()
        .map(|s| {
            let pts = s.points.iter().map(|&(at, v)| ((at - t0_ns) as f64 / 1e9, 1.0, 1, v, v)).collect();
            line(&s.name, pts, bin)
        })
        .collect();
    let unit = if all_seq { "MB/s" } else { "IOPS" };
    let marks: Vec<Value> = r
        .marks
        .iter()
        .map(|m| json!({ "t": sig((m.at_unix_ns - t0_ns) as f64 / 1e9, 7), "text": m.text, "at": m.at }))
        .collect();
    Some(json!({
        "id": format!("tl{ri}"),
        "run": ri,
        "title": run.title(),
        // The run's start, Unix seconds: the axis says UTC time.
        "t0": t0_ns as f64 / 1e9,
        "bin": bin,
        "steps": steps,
        "workloads": lines,
        "unit": unit,
        // Each target's and host's line only where there are several to tell apart.
        "targets": if targets.len() > 1 { targets.into_iter().map(|(n, p)| line(&n, p, bin)).collect() } else { Vec::new() },
        "hosts": if hosts.len() > 1 { hosts.into_iter().map(|(n, p)| line(&n, p, bin)).collect() } else { Vec::new() },
        "marks": marks,
        "array": array,
    }))
}

/// What the template lays out of a run's timeline: which charts it has, and its marks as rows
/// (UTC, seconds into the run, the step measuring then, the text, where it came from).
pub(super) fn view(t: &Value, run: &ReportRun) -> Value {
    let some = |k: &str| t[k].as_array().is_some_and(|a| !a.is_empty());
    let marks: Vec<Vec<String>> = run
        .result
        .marks
        .iter()
        .zip(t["marks"].as_array().into_iter().flatten())
        .map(|(m, v)| {
            vec![
                m.at.clone(),
                format!("{:.1}", v["t"].as_f64().unwrap_or(0.0)),
                terminal::mark_place(&run.result, m.at_unix_ns).unwrap_or_else(|| "between steps".into()),
                m.text.clone(),
                m.source.clone(),
            ]
        })
        .collect();
    let checks: Vec<Vec<String>> = run
        .result
        .array_checks
        .iter()
        .filter_map(|c| {
            let w = run.result.workloads.iter().find(|w| w.name == c.workload)?;
            let s = w.steps.get(c.step)?;
            let mb = run.result.array.iter().any(|a| a.name == c.series && a.kind == "mbps");
            let fig = |v: f64| if mb { format::mbps_number(v) } else { format::iops(v) };
            Some(vec![
                terminal::step_place(w, c.step, s),
                format!("{} {}", fig(c.host), if mb { "MB/s" } else { "IOPS" }),
                c.series.clone(),
                fig(c.array),
                format!("{:+.1} %", c.diff_pct),
                c.points.to_string(),
            ])
        })
        .collect();
    json!({
        "id": t["id"],
        "title": t["title"],
        "array": run.result.array.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
        "checks": checks,
        "targets": some("targets"),
        "hosts": some("hosts"),
        "bin": t["bin"],
        "marks": marks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_bin_over_the_run_and_steps_apart_break_the_line() {
        // Two steps of 3 s, 10 s apart; 1-s bins keep every second.
        let pts: Vec<Point> = [0.0, 1.0, 2.0, 13.0, 14.0].iter().map(|&t| (t, 1.0, 100, 100.0 + t, 50.0)).collect();
        let (t, tput, _) = binned(pts.clone(), 1.0);
        let t: Vec<f64> = t.iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(t, [0.0, 1.0, 2.0, 8.0, 13.0, 14.0]);
        assert_eq!(tput[3], Value::Null);
        // Bins of 10 s: the first three seconds are one point, their mean; latency weighted by I/Os.
        let pts = vec![(0.0, 1.0, 100, 100.0, 10.0), (1.0, 1.0, 300, 300.0, 30.0), (2.0, 1.0, 0, 0.0, 0.0)];
        let (t, tput, lat) = binned(pts, 10.0);
        let n = |v: Vec<Value>| v.iter().map(|x| x.as_f64().unwrap()).collect::<Vec<f64>>();
        assert_eq!((n(t), n(tput), n(lat)), (vec![0.0], vec![133.3], vec![25.0]));
    }
}
