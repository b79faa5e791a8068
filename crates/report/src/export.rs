//! Exports of a result: pure functions from the result document to text.
//!
//! - CSV: steps (one row per step per workload) and samples (one row per sample per step; one
//!   host for now, named in a column so multi-host results fit the same layout).
//! - The step histograms as CSV, each second's histogram as CSV, and the verification problems.
//!
//! fio's JSON layout is in [`crate::fio`].

use iocurve_analysis::RunResult;
use iocurve_stats::StepRecord;

/// Columns of the steps CSV, in order.
pub const STEP_COLUMNS: &[&str] = &[
    "run",
    "label",
    "workload",
    "kind",
    "working_set",
    "read_pct",
    "bs",
    "queue_depth",
    "step",
    "workers",
    "outstanding",
    "duration_s",
    "iops",
    "mb_per_s",
    "lat_mean_us",
    "lat_min_us",
    "lat_max_us",
    "lat_p50_us",
    "lat_p90_us",
    "lat_p99_us",
    "lat_p99_9_us",
    "lat_p99_99_us",
    "read_iops",
    "write_iops",
    "read_lat_mean_us",
    "write_lat_mean_us",
    // The interval-to-interval spread and the host CPU in percent, as the report shows them.
    "cv_pct",
    "cpu_user_pct",
    "cpu_system_pct",
    "cpu_iowait_pct",
    "errors",
    // Space-separated codes; not `flags`, which pandas' DataFrame.flags would shadow.
    "step_flags",
    // Appended after the flags (issue 13), so that existing columns keep their places.
    "late_ios",
    "stuck_ios",
    "stuck_age_s",
    "unmeasured_errors",
    "target_iops",
    "achieved_pct",
    "sustained",
    "service_p99_us",
    "lag_p99_us",
    "not_issued",
    // The workload's speed, optimum, maximum and SLA maximum: this step or not (issue 16).
    "is_speed",
    "is_optimum",
    "is_maximum",
    "is_sla_maximum",
    // Each direction's throughput and tail, and what shapes the load (issue 39).
    "read_mb_per_s",
    "write_mb_per_s",
    "read_lat_p99_us",
    "write_lat_p99_us",
    "shape",
    // Trims apart (issue 40): 0 for a workload that does not trim.
    "trim_pct",
    "trim_iops",
    "trim_mb_per_s",
    "trim_lat_mean_us",
    "trim_lat_p99_us",
    // Hosts (issue 41): those that ran the step, and those it was planned on (a host-count
    // sweep's step: its count).
    "host_count",
    "planned_hosts",
    // A replay's step (issue 45): its speed over the trace's timing; empty for any other step.
    "replay_speed",
];

/// Columns of the samples CSV, in order.
pub const SAMPLE_COLUMNS: &[&str] = &[
    "run",
    "workload",
    "step",
    "workers",
    "host",
    "t_s",
    "dur_s",
    "ops",
    "iops",
    "mb_per_s",
    "lat_mean_us",
    "lat_max_us",
    "errors",
    "time_utc",
    "lat_p50_us",
    "lat_p99_us",
    "lat_p99_9_us",
];

/// Columns of the verification problems CSV (`verify --problems`, `export --format problems`),
/// in order.
pub const PROBLEM_COLUMNS: &[&str] =
    &["target", "block", "offset", "kind", "expected_generation", "found_generation", "found"];

/// The header line of the problems CSV.
pub fn problems_csv_header() -> String {
    line(PROBLEM_COLUMNS.iter().map(|s| s.to_string()).collect())
}

/// One line of the problems CSV (rows are written one by one: a pass may list a million).
pub fn problem_csv_row(p: &iocurve_analysis::VerifyProblem) -> String {
    line(vec![
        p.target.clone(),
        p.block.to_string(),
        p.offset.to_string(),
        p.kind.clone(),
        p.expected_generation.to_string(),
        p.found_generation.map(|g| g.to_string()).unwrap_or_default(),
        p.found.clone(),
    ])
}

/// Quotes a CSV field when it needs it (RFC 4180).
pub(crate) fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

fn line(fields: Vec<String>) -> String {
    fields.iter().map(|f| field(f)).collect::<Vec<_>>().join(",") + "\n"
}

pub fn steps_csv(run_id: i64, label: &str, r: &RunResult) -> String {
    let mut out = line(STEP_COLUMNS.iter().map(|s| s.to_string()).collect());
    for w in &r.workloads {
        for (i, s) in w.steps.iter().enumerate() {
            let flags: Vec<&str> = s.flags.iter().map(|f| f.code.as_str()).collect();
            let mut fields = vec![
                run_id.to_string(),
                label.to_string(),
                w.name.clone(),
                w.kind.clone(),
                w.working_set.clone(),
                w.read_pct.to_string(),
                w.bs.clone(),
                s.queue_depth.to_string(),
                i.to_string(),
                s.workers.to_string(),
                s.outstanding.to_string(),
                s.duration_s.to_string(),
                format!("{:.3}", s.iops),
                format!("{:.3}", s.mbps),
                format!("{:.3}", s.lat_us.mean),
                format!("{:.3}", s.lat_us.min),
                format!("{:.3}", s.lat_us.max),
                format!("{:.3}", s.lat_us.p50),
                format!("{:.3}", s.lat_us.p90),
                format!("{:.3}", s.lat_us.p99),
                format!("{:.3}", s.lat_us.p99_9),
                format!("{:.3}", s.lat_us.p99_99),
                format!("{:.3}", s.read.iops),
                format!("{:.3}", s.write.iops),
                format!("{:.3}", s.read.lat_us.mean),
                format!("{:.3}", s.write.lat_us.mean),
                format!("{:.3}", s.cv * 100.0),
                format!("{:.2}", s.cpu.user),
                format!("{:.2}", s.cpu.system),
                format!("{:.2}", s.cpu.iowait),
                s.errors.to_string(),
                flags.join(" "),
                s.late_ios.to_string(),
                s.stuck_ios.to_string(),
                format!("{:.3}", s.stuck_age_s),
                s.unmeasured_errors.iter().map(|e| e.count).sum::<u64>().to_string(),
            ];
            // Rate steps only; empty for closed-loop steps.
            let r = s.rate.as_ref();
            fields.extend([
                r.map_or_else(String::new, |r| format!("{:.3}", r.target_iops)),
                r.map_or_else(String::new, |r| format!("{:.3}", r.achieved_pct)),
                r.map_or_else(String::new, |r| r.sustained.to_string()),
                r.map_or_else(String::new, |r| format!("{:.3}", r.service_us.p99)),
                r.map_or_else(String::new, |r| format!("{:.3}", r.lag_us.p99)),
                r.map_or_else(String::new, |r| (r.dropped + r.backlog).to_string()),
            ]);
            let is = |p: &Option<iocurve_analysis::Point>| p.is_some_and(|p| p.step == i).to_string();
            fields.extend([is(&w.speed), is(&w.optimum), is(&w.maximum), is(&w.sla_maximum)]);
            fields.extend([
                format!("{:.3}", s.read.mbps),
                format!("{:.3}", s.write.mbps),
                format!("{:.3}", s.read.lat_us.p99),
                format!("{:.3}", s.write.lat_us.p99),
                w.shape.clone(),
                w.trim_pct.to_string(),
                format!("{:.3}", s.trim.iops),
                format!("{:.3}", s.trim.mbps),
                format!("{:.3}", s.trim.lat_us.mean),
                format!("{:.3}", s.trim.lat_us.p99),
                s.hosts.to_string(),
                s.planned_hosts.to_string(),
                r.and_then(|r| r.replay_speed).map_or_else(String::new, |v| v.to_string()),
            ]);
            out.push_str(&line(fields));
        }
    }
    out
}

/// Columns of the histogram export: every recorded latency bucket of every step, merged over
/// its hosts (`host` empty) and for each host of a multi-host step.
pub const HISTOGRAM_COLUMNS: &[&str] =
    &["run_id", "workload", "step", "workers", "host", "direction", "latency_ns", "count"];

/// The steps' latency histograms as recorded (1 ns resolution, 3 significant digits):
/// `latency_ns` is the highest value of its bucket, `count` the I/Os in it. Any percentile can
/// be computed from these rows; a host's rows added up give the merged rows.
pub fn histograms_csv(run_id: i64, workloads: &[(String, Vec<StepRecord>)]) -> String {
    let mut out = line(HISTOGRAM_COLUMNS.iter().map(|s| s.to_string()).collect());
    for (name, steps) in workloads {
        for (i, step) in steps.iter().enumerate() {
            let parts = std::iter::once((String::new(), step))
                .chain(step.per_host.iter().map(|h| (h.address.clone(), &h.record)));
            for (host, rec) in parts {
                for (dir, d) in [("read", &rec.total.read), ("write", &rec.total.write), ("trim", &rec.total.trim)] {
                    for (ns, count) in d.hist.buckets() {
                        out.push_str(&line(vec![
                            run_id.to_string(),
                            name.clone(),
                            i.to_string(),
                            // A host's own workers (uneven hosts run their share).
                            rec.workers.to_string(),
                            host.clone(),
                            dir.into(),
                            ns.to_string(),
                            count.to_string(),
                        ]));
                    }
                }
            }
        }
    }
    out
}

/// Columns of `export --format targets`: each target's per-second figures (issue 42).
pub const TARGET_COLUMNS: &[&str] = &[
    "run",
    "workload",
    "step",
    "workers",
    "target",
    "lun",
    "t_s",
    "dur_s",
    "ops",
    "iops",
    "mb_per_s",
    "lat_mean_us",
    "lat_max_us",
    "errors",
];

/// Every target's per-second figures of every step: `workloads` as stored (name, steps), the
/// run's targets for their paths and LUNs.
pub fn targets_csv(
    run_id: i64,
    workloads: &[(String, Vec<StepRecord>)],
    targets: &[iocurve_analysis::TargetInfo],
) -> String {
    let mut out = line(TARGET_COLUMNS.iter().map(|s| s.to_string()).collect());
    for (name, steps) in workloads {
        for (i, rec) in steps.iter().enumerate() {
            let per_s = |x: f64| if rec.sample_s > 0.0 { x / rec.sample_s } else { 0.0 };
            for (k, iv) in rec.intervals.iter().enumerate() {
                for t in &iv.targets {
                    let info = targets.get(t.target as usize);
                    for (j, x) in t.samples.iter().enumerate() {
                        out.push_str(&line(vec![
                            run_id.to_string(),
                            name.clone(),
                            i.to_string(),
                            rec.workers.to_string(),
                            info.map_or_else(|| format!("target {}", t.target), |i| i.path.clone()),
                            info.and_then(|i| i.lun.clone()).unwrap_or_default(),
                            format!("{:.3}", k as f64 * rec.interval_s + j as f64 * rec.sample_s),
                            format!("{:.3}", rec.sample_s),
                            x.ops.to_string(),
                            format!("{:.3}", per_s(x.ops as f64)),
                            format!("{:.3}", per_s(x.bytes as f64 / 1e6)),
                            format!("{:.3}", x.mean_lat_ns() / 1e3),
                            format!("{:.3}", x.lat_max_ns as f64 / 1e3),
                            x.errors.to_string(),
                        ]));
                    }
                }
            }
        }
    }
    out
}

pub fn samples_csv(run_id: i64, r: &RunResult) -> String {
    let mut out = line(SAMPLE_COLUMNS.iter().map(|s| s.to_string()).collect());
    for w in &r.workloads {
        for (i, s) in w.steps.iter().enumerate() {
            for x in &s.samples {
                out.push_str(&line(vec![
                    run_id.to_string(),
                    w.name.clone(),
                    i.to_string(),
                    s.workers.to_string(),
                    r.host.facts.hostname.clone(),
                    format!("{:.3}", x.t_s),
                    format!("{:.3}", x.dur_s),
                    x.ops.to_string(),
                    format!("{:.3}", x.iops),
                    format!("{:.3}", x.mbps),
                    format!("{:.3}", x.lat_mean_us),
                    format!("{:.3}", x.lat_max_us),
                    x.errors.to_string(),
                    // The sample's start on the wall clock; empty for steps stored before
                    // iocurve kept the time.
                    s.measured_from_unix_ns
                        .map(|t| iocurve_stats::date::rfc3339_ns(t + (x.t_s * 1e9) as i64))
                        .unwrap_or_default(),
                    // The second's own percentiles (issue 44); empty where it kept no
                    // histogram.
                    x.p50_us.map_or_else(String::new, |v| format!("{v:.3}")),
                    x.p99_us.map_or_else(String::new, |v| format!("{v:.3}")),
                    x.p99_9_us.map_or_else(String::new, |v| format!("{v:.3}")),
                ]));
            }
        }
    }
    out
}

/// Columns of `export --format seconds`: each second's latency histogram (issue 44).
pub const SECOND_COLUMNS: &[&str] =
    &["run", "workload", "step", "workers", "t_s", "lat_max_ns", "lat_from_ns", "lat_to_ns", "count"];

/// Every second's latency histogram of every step, every direction together: a row per
/// non-empty bucket, `lat_from_ns` to `lat_to_ns` (both inclusive) holding `count` I/Os, and the
/// second's slowest I/O. A second's percentile p is the `lat_to_ns` of the bucket where the
/// running count first reaches ⌈p/100 × the second's I/Os⌉, capped at `lat_max_ns`: what the
/// samples CSV's `lat_p99_us` says.
pub fn seconds_csv(run_id: i64, r: &RunResult) -> String {
    let mut out = line(SECOND_COLUMNS.iter().map(|s| s.to_string()).collect());
    for w in &r.workloads {
        for (i, s) in w.steps.iter().enumerate() {
            for x in &s.samples {
                for [from, to, count] in &x.lat_hist {
                    out.push_str(&line(vec![
                        run_id.to_string(),
                        w.name.clone(),
                        i.to_string(),
                        s.workers.to_string(),
                        format!("{:.3}", x.t_s),
                        format!("{:.0}", x.lat_max_us * 1e3),
                        from.to_string(),
                        to.to_string(),
                        count.to_string(),
                    ]));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_headers_are_pinned() {
        // Snapshot: changing a column breaks users' scripts; change these only on purpose and
        // say so in the CHANGELOG.
        assert_eq!(
            STEP_COLUMNS.join(","),
            "run,label,workload,kind,working_set,read_pct,bs,queue_depth,step,workers,outstanding,duration_s,iops,\
             mb_per_s,lat_mean_us,lat_min_us,lat_max_us,lat_p50_us,lat_p90_us,lat_p99_us,lat_p99_9_us,lat_p99_99_us,\
             read_iops,write_iops,read_lat_mean_us,write_lat_mean_us,cv_pct,cpu_user_pct,cpu_system_pct,\
             cpu_iowait_pct,errors,step_flags,late_ios,stuck_ios,stuck_age_s,unmeasured_errors,target_iops,\
             achieved_pct,sustained,service_p99_us,lag_p99_us,not_issued,is_speed,is_optimum,is_maximum,\
             is_sla_maximum,read_mb_per_s,write_mb_per_s,read_lat_p99_us,write_lat_p99_us,shape,trim_pct,trim_iops,trim_mb_per_s,\
             trim_lat_mean_us,trim_lat_p99_us,host_count,planned_hosts,replay_speed"
        );
        assert_eq!(
            SAMPLE_COLUMNS.join(","),
            "run,workload,step,workers,host,t_s,dur_s,ops,iops,mb_per_s,lat_mean_us,lat_max_us,errors,time_utc,\
             lat_p50_us,lat_p99_us,lat_p99_9_us"
        );
        assert_eq!(SECOND_COLUMNS.join(","), "run,workload,step,workers,t_s,lat_max_ns,lat_from_ns,lat_to_ns,count");
        assert_eq!(
            TARGET_COLUMNS.join(","),
            "run,workload,step,workers,target,lun,t_s,dur_s,ops,iops,mb_per_s,lat_mean_us,lat_max_us,errors"
        );
    }

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("plain"), "plain");
    }
}
