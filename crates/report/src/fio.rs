//! Results in fio's `--output-format=json` layout, so that tools written for fio read
//! iocurve's steps right.
//!
//! - [`fio_dir`]: one fio document per step, in the directory layout fio-plot's bench-fio
//!   writes (`WORKLOAD/BS/RW-IODEPTH-NUMJOBS.json`): fio-plot's 2D, compare and histogram
//!   graphs take a directory of such files, one file per load level. This is the form to
//!   plot from. Beside each document, the step's per-second samples as fio's logs, for
//!   fio-plot's timeline (`-g`).
//! - [`fio_json`]: one document with a job per step. Tools that read a job as one concurrent
//!   part of a single load (fio-plot does: it adds the jobs of a file up) misread it; it is
//!   kept for scripts that walk the jobs themselves.
//!
//! A step is one job with fio's `group_reporting` figures: `numjobs` is the step's workers,
//! `iodepth` its queue depth. Latencies come from the step's recorded histograms (percentiles
//! at fio's default list, the `latency_ns/us/ms` shares at fio's bucket edges); `iops_*` and
//! `bw_*` from its per-second samples; `timestamp` is the step's end on the wall clock.
//! `slat_ns` and keys iocurve has no value for are zero.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use iocurve_analysis::{DirResult, LatencyStats, RunResult, StepResult, WorkloadResult};
use iocurve_stats::{LatencyHistogram, StepRecord};

/// fio's default `percentile_list`.
const PERCENTILES: [f64; 17] =
    [1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99];

/// fio's latency bucket keys: each is the exclusive upper edge of its range, in the unit of
/// its group (`latency_ns`, `latency_us`; `latency_ms` adds 2000 and `>=2000`).
const EDGES: [u64; 10] = [2, 4, 10, 20, 50, 100, 250, 500, 750, 1000];

/// The steps of a run with what the store recorded of each (for histograms); `records[w][i]`
/// belongs to `r.workloads[w].steps[i]`. Without a record a step's percentiles are the five
/// the result keeps and its latency buckets are empty.
pub struct FioSource<'a> {
    pub run: &'a RunResult,
    pub records: &'a [Vec<StepRecord>],
}

impl FioSource<'_> {
    fn record(&self, w: usize, i: usize) -> Option<&StepRecord> {
        self.records.get(w).and_then(|steps| steps.get(i))
    }
}

/// One document, a job per step.
pub fn fio_json(src: &FioSource) -> String {
    let mut jobs = Vec::new();
    let mut end_ns = None;
    for (wi, w) in src.run.workloads.iter().enumerate() {
        for (i, s) in w.steps.iter().enumerate() {
            jobs.push(job(w, i, s, src.record(wi, i)));
            end_ns = end_ns.max(step_end_ns(s));
        }
    }
    document(src.run, end_ns, jobs)
}

/// One document per step, with its path under the output directory:
/// `WORKLOAD/BS/RW-IODEPTH-NUMJOBS.json` as bench-fio names them (a mixed workload's RW
/// carries its read share, `randrw70`). A rate step goes under `rate-IOPS/` beside them; a
/// second step with the same name under `run-2/`, and so on.
pub fn fio_dir(src: &FioSource) -> Vec<(PathBuf, String)> {
    let mut out: Vec<(PathBuf, String)> = Vec::new();
    for (wi, w) in src.run.workloads.iter().enumerate() {
        for (i, s) in w.steps.iter().enumerate() {
            let mut dir = PathBuf::from(path_part(&w.name)).join(path_part(&w.bs));
            if let Some(r) = &s.rate {
                dir.push(format!("rate-{:.0}", r.target_iops));
            }
            // A host-count sweep's steps apart by their count (not as repeated runs).
            if w.host_sweep.is_some() {
                dir.push(format!("hosts-{}", s.planned_hosts));
            }
            let name = format!("{}-{}-{}.json", mode(w), s.queue_depth, s.workers);
            let mut path = dir.join(&name);
            let mut n = 1;
            while out.iter().any(|(p, _)| *p == path) {
                n += 1;
                path = dir.join(format!("run-{n}")).join(&name);
            }
            let doc = document(src.run, step_end_ns(s), vec![job(w, i, s, src.record(wi, i))]);
            let at = path.parent().map(PathBuf::from).unwrap_or_default();
            out.push((path, doc));
            for (name, text) in logs(w, s) {
                out.push((at.join(name), text));
            }
        }
    }
    out
}

/// The step's per-second samples as fio's logs with `log_avg_msec=1000`, named as bench-fio
/// names them (`RW-iodepth-QD-numjobs-N_iops.1.log`, `_lat`, `_bw`), so that fio-plot's
/// timeline (`-g`) draws them: a line per sample, `msec, value, direction, block size, 0`,
/// the time at the sample's end since the measurement began; IOPS, mean latency in ns,
/// KiB/s. A mixed workload has none: its samples do not part reads from writes, and fio's logs
/// give each direction its own line.
fn logs(w: &WorkloadResult, s: &StepResult) -> Vec<(String, String)> {
    // fio's directions: 0 read, 1 write, 2 trim.
    let direction = match (w.read_pct >= 100.0, w.read_pct <= 0.0 && w.trim_pct <= 0.0, w.trim_pct >= 100.0) {
        (true, _, _) => 0,
        (_, true, _) => 1,
        (_, _, true) => 2,
        _ => return Vec::new(),
    };
    let samples: Vec<_> = s.samples.iter().filter(|x| x.dur_s > 0.0).collect();
    if samples.is_empty() {
        return Vec::new();
    }
    let ops = s.ops();
    let bs = (s.read.bytes + s.write.bytes + s.trim.bytes).checked_div(ops).unwrap_or(0);
    let log = |value: &dyn Fn(&iocurve_analysis::SampleResult) -> f64| -> String {
        samples
            .iter()
            .map(|x| {
                let ms = ((x.t_s + x.dur_s) * 1000.0).round() as u64;
                format!("{ms}, {}, {direction}, {bs}, 0\n", value(x).round().max(0.0) as u64)
            })
            .collect()
    };
    let stem = format!("{}-iodepth-{}-numjobs-{}", fio_rw(w), s.queue_depth, s.workers);
    vec![
        (format!("{stem}_iops.1.log"), log(&|x| x.iops)),
        (format!("{stem}_lat.1.log"), log(&|x| x.lat_mean_us * 1000.0)),
        // A sample's MB/s are of data moved; fio's bandwidth of a trim job is the bytes trimmed.
        (
            format!("{stem}_bw.1.log"),
            log(&|x| if direction == 2 { x.iops * bs as f64 / 1024.0 } else { x.mbps * 1e6 / 1024.0 }),
        ),
    ]
}

/// A workload name or block size as one directory name: anything but letters, digits, `.`,
/// `-` and `_` becomes `_` (a bssplit's `4k:50,64k:50`), and `.`/`..` never stand alone.
fn path_part(s: &str) -> String {
    let p: String =
        s.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') { c } else { '_' }).collect();
    if p.is_empty() || p.chars().all(|c| c == '.') { format!("_{p}") } else { p }
}

/// When a step's measurement ended, ns since the epoch (None for steps stored before iocurve
/// kept the time).
fn step_end_ns(s: &StepResult) -> Option<i64> {
    s.measured_from_unix_ns.map(|t| t + (s.duration_s * 1e9) as i64)
}

fn document(r: &RunResult, end_ns: Option<i64>, jobs: Vec<Value>) -> String {
    // fio stamps its report with the time it wrote it: here, the end of the (last) step.
    let ms = end_ns.map_or(0, |ns| ns.max(0) / 1_000_000);
    let doc = json!({
        "fio version": format!("iocurve-{}", r.tool_version),
        "timestamp": ms / 1000,
        "timestamp_ms": ms,
        "time": end_ns.map_or_else(String::new, |_| iocurve_stats::date::ctime((ms / 1000) as u64)),
        "global options": {},
        "jobs": jobs,
        "disk_util": [],
    });
    serde_json::to_string_pretty(&doc).expect("a JSON value serializes") + "\n"
}

/// fio's name for the access pattern.
fn fio_rw(w: &WorkloadResult) -> &'static str {
    let seq = w.kind == "sequential";
    if w.trim_pct >= 100.0 {
        return if seq { "trim" } else { "randtrim" };
    }
    if w.trim_pct > 0.0 && w.read_pct <= 0.0 {
        return if seq { "trimwrite" } else { "randtrimwrite" };
    }
    match (w.read_pct >= 100.0, w.read_pct <= 0.0, seq) {
        (true, _, false) => "randread",
        (_, true, false) => "randwrite",
        (false, false, false) => "randrw",
        (true, _, true) => "read",
        (_, true, true) => "write",
        (false, false, true) => "rw",
    }
}

/// bench-fio's mode in file and directory names: a mixed mode with its read share.
fn mode(w: &WorkloadResult) -> String {
    let rw = fio_rw(w);
    if matches!(rw, "randrw" | "rw") { format!("{rw}{}", w.read_pct.round()) } else { rw.to_string() }
}

fn ns(us: f64) -> u64 {
    (us * 1000.0).round() as u64
}

fn percentile_key(p: f64) -> String {
    format!("{p:.6}")
}

/// fio's `lat_ns`/`clat_ns` object: from the histogram when there is one (every percentile
/// of fio's list), else from the five percentiles the result keeps.
fn latency(l: &LatencyStats, n: u64, hist: Option<&LatencyHistogram>) -> Value {
    let mut pct = Map::new();
    match hist.filter(|h| h.count() > 0) {
        Some(h) => {
            for p in PERCENTILES {
                pct.insert(percentile_key(p), json!(h.percentile_ns(p)));
            }
        }
        None => {
            for (p, v) in [(50.0, l.p50), (90.0, l.p90), (99.0, l.p99), (99.9, l.p99_9), (99.99, l.p99_99)] {
                pct.insert(percentile_key(p), json!(ns(v)));
            }
        }
    }
    json!({
        "min": ns(l.min),
        "max": ns(l.max),
        "mean": l.mean * 1000.0,
        "stddev": l.stddev * 1000.0,
        "N": n,
        "percentile": Value::Object(pct),
    })
}

/// min, max, mean, sample standard deviation (fio's) and count of a series.
fn series(v: &[f64]) -> (f64, f64, f64, f64, usize) {
    if v.is_empty() {
        return (0.0, 0.0, 0.0, 0.0, 0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) } else { 0.0 };
    (v.iter().copied().fold(f64::INFINITY, f64::min), v.iter().copied().fold(0.0, f64::max), mean, var.sqrt(), v.len())
}

/// One direction in fio's layout. A rate step's `lat_ns` is its response time (from the
/// intended issue time) and `clat_ns` its service time (both directions: iocurve keeps one
/// service histogram per step), as fio's rate jobs would report them if fio measured from the
/// schedule; a closed-loop step has one figure for both.
///
/// The per-second samples count both directions together: a direction's `iops_*` and `bw_*`
/// are the samples scaled by its share of the step's I/Os (exact for a read-only or
/// write-only step, an estimate for a mixed one).
fn direction(d: &DirResult, s: &StepResult, hist: Option<&LatencyHistogram>) -> Value {
    let runtime_ms = (s.duration_s * 1000.0).round() as u64;
    let lat = latency(&d.lat_us, d.ops, hist);
    let clat = match &s.rate {
        Some(r) if d.ops > 0 => latency(&r.service_us, d.ops, None),
        _ => lat.clone(),
    };
    let share = |part: u64, all: u64| if all == 0 { 0.0 } else { part as f64 / all as f64 };
    let op_share = share(d.ops, s.ops());
    // The samples' MB/s are of reads and writes: a direction's share of those. Trims move no
    // data: theirs is their I/Os' share times their mean size.
    let byte_share = share(d.bytes, s.read.bytes + s.write.bytes);
    let trims = std::ptr::eq(d, &s.trim);
    let trim_size = if d.ops > 0 { d.bytes as f64 / d.ops as f64 } else { 0.0 };
    let live: Vec<_> = s.samples.iter().filter(|x| x.dur_s > 0.0 && d.ops > 0).collect();
    let iops: Vec<f64> = live.iter().map(|x| x.iops * op_share).collect();
    // fio's bandwidth is in KiB/s.
    let bw: Vec<f64> = live
        .iter()
        .map(|x| if trims { x.iops * op_share * trim_size / 1024.0 } else { x.mbps * 1e6 / 1024.0 * byte_share })
        .collect();
    let (iops_min, iops_max, iops_mean, iops_dev, iops_n) = series(&iops);
    let (bw_min, bw_max, bw_mean, bw_dev, bw_n) = series(&bw);
    json!({
        "io_bytes": d.bytes,
        "io_kbytes": d.bytes / 1024,
        "bw_bytes": (d.mbps * 1e6).round() as u64,
        "bw": (d.mbps * 1e6 / 1024.0).round() as u64,
        "iops": d.iops,
        "runtime": if d.ops > 0 { runtime_ms } else { 0 },
        "total_ios": d.ops,
        "short_ios": 0,
        "drop_ios": 0,
        "slat_ns": {"min": 0, "max": 0, "mean": 0.0, "stddev": 0.0, "N": 0},
        "clat_ns": clat,
        "lat_ns": lat,
        "bw_min": bw_min.round() as u64,
        "bw_max": bw_max.round() as u64,
        "bw_agg": if bw_n > 0 { 100.0 } else { 0.0 },
        "bw_mean": bw_mean,
        "bw_dev": bw_dev,
        "bw_samples": bw_n,
        "iops_min": iops_min.round() as u64,
        "iops_max": iops_max.round() as u64,
        "iops_mean": iops_mean,
        "iops_stddev": iops_dev,
        "iops_samples": iops_n,
    })
}

/// fio's `latency_ns`, `latency_us` and `latency_ms`: the share of all I/Os (in percent) whose
/// latency lies below each edge and at or above the one before.
fn latency_shares(h: &LatencyHistogram) -> (Value, Value, Value) {
    let total = h.count();
    let mut below_prev = 0;
    let mut share = |below_ns: Option<u64>| {
        let below = below_ns.map_or(total, |b| if b == 0 { 0 } else { h.count_at_or_below(b - 1) });
        let pct = if total == 0 { 0.0 } else { 100.0 * below.saturating_sub(below_prev) as f64 / total as f64 };
        below_prev = below;
        pct
    };
    let mut group = |unit_ns: u64| {
        let mut m = Map::new();
        for e in EDGES {
            m.insert(e.to_string(), json!(share(Some(e * unit_ns))));
        }
        m
    };
    let ns_group = group(1);
    let us_group = group(1_000);
    let mut ms_group = group(1_000_000);
    ms_group.insert("2000".into(), json!(share(Some(2_000_000_000))));
    ms_group.insert(">=2000".into(), json!(share(None)));
    (Value::Object(ns_group), Value::Object(us_group), Value::Object(ms_group))
}

fn job(w: &WorkloadResult, i: usize, s: &StepResult, rec: Option<&StepRecord>) -> Value {
    let runtime_ms = (s.duration_s * 1000.0).round() as u64;
    let mut opts = Map::new();
    opts.insert("rw".into(), json!(fio_rw(w)));
    opts.insert("bs".into(), json!(w.bs));
    opts.insert("iodepth".into(), json!(s.queue_depth.to_string()));
    opts.insert("numjobs".into(), json!(s.workers.to_string()));
    if w.read_pct > 0.0 && w.read_pct < 100.0 {
        opts.insert("rwmixread".into(), json!(format!("{}", w.read_pct)));
    }
    if let Some(r) = &s.rate {
        opts.insert("rate_iops".into(), json!(format!("{:.0}", r.target_iops)));
    }
    let (read_hist, write_hist, trim_hist) =
        (rec.map(|r| &r.total.read.hist), rec.map(|r| &r.total.write.hist), rec.map(|r| &r.total.trim.hist));
    let (lat_n, lat_u, lat_m) = match rec {
        Some(r) => latency_shares(&r.total.combined_hist()),
        None => (json!({}), json!({}), json!({})),
    };
    json!({
        "jobname": format!("{}-step{}-{}w", w.name, i, s.workers),
        "groupid": 0,
        // fio reports the first error's errno.
        "error": s.errors_by_errno.iter().find(|e| e.errno > 0).map_or(0, |e| e.errno),
        "eta": 0,
        "elapsed": (s.duration_s).round() as u64,
        "job options": Value::Object(opts),
        "read": direction(&s.read, s, read_hist),
        "write": direction(&s.write, s, write_hist),
        "trim": direction(&s.trim, s, trim_hist),
        "job_runtime": runtime_ms,
        "usr_cpu": s.cpu.user,
        "sys_cpu": s.cpu.system,
        "ctx": 0,
        "majf": 0,
        "minf": 0,
        "iodepth_level": {},
        "latency_ns": lat_n,
        "latency_us": lat_u,
        "latency_ms": lat_m,
        "latency_depth": s.queue_depth,
        "latency_target": 0,
        "latency_percentile": 100.0,
        "latency_window": 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_shares_fall_below_fios_edges() {
        let mut h = LatencyHistogram::default();
        // [0, 2) ns, [1, 2) µs, [2, 4) µs, [750, 1000) ms, [1, 2) s, ≥ 2 s; 999 ns is still ns.
        for ns in [1, 999, 1_000, 1_999, 2_000, 800_000_000, 1_500_000_000, 3_000_000_000u64] {
            h.record(ns);
        }
        let (n, u, m) = latency_shares(&h);
        let pct = |k: usize| 100.0 * k as f64 / 8.0;
        assert_eq!(n["2"], json!(pct(1)));
        assert_eq!(n["1000"], json!(pct(1)), "999 ns");
        assert_eq!(u["2"], json!(pct(2)), "1000 and 1999 ns");
        assert_eq!(u["4"], json!(pct(1)), "2000 ns");
        assert_eq!(m["1000"], json!(pct(1)));
        assert_eq!(m["2000"], json!(pct(1)));
        assert_eq!(m[">=2000"], json!(pct(1)));
        let sum: f64 =
            [n, u, m].iter().flat_map(|g| g.as_object().unwrap().values()).map(|v| v.as_f64().unwrap()).sum();
        assert!((sum - 100.0).abs() < 1e-9, "{sum}");
        let (n, ..) = latency_shares(&LatencyHistogram::default());
        assert_eq!(n["2"], json!(0.0), "no I/O: zero shares, no division by zero");
    }

    #[test]
    fn path_parts_stay_one_directory() {
        assert_eq!(path_part("backend-random-read-4k"), "backend-random-read-4k");
        assert_eq!(path_part("4k:50,64k:50"), "4k_50_64k_50");
        assert_eq!(path_part("a/../b"), "a_.._b");
        assert_eq!(path_part(".."), "_..");
        assert_eq!(path_part(""), "_");
    }

    #[test]
    fn sample_spread_is_fios_sample_standard_deviation() {
        let (min, max, mean, dev, n) = series(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!((min, max, mean, n), (2.0, 9.0, 5.0, 8));
        assert!((dev - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(series(&[]), (0.0, 0.0, 0.0, 0.0, 0));
        assert_eq!(series(&[3.0]).3, 0.0);
    }
}
