//! Per-step figures and quality flags.

use iocurve_stats::{CpuUsage, LatencyHistogram, StepRecord};

use crate::result::*;

/// Limits of the quality flags.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    /// Interval throughput CV above this flags the step as unsteady.
    pub unsteady_cv: f64,
    /// First interval off from the mean of the others by more than this share: transient.
    pub transient: f64,
    /// Host busy (user + system) above this percentage: the load host may be the bottleneck.
    pub cpu_busy_pct: f64,
    /// |IOPS × mean latency − outstanding| / outstanding above this: Little's law is off.
    pub littles_law: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds { unsteady_cv: crate::workload::NOISE_CAP, transient: 0.10, cpu_busy_pct: 90.0, littles_law: 0.10 }
    }
}

impl Thresholds {
    /// The thresholds for `w`'s steps: a worker that thinks keeps fewer I/Os in flight than it
    /// could by design, so Little's law is not checked against its outstanding count.
    pub fn for_workload(&self, w: &iocurve_plan::Workload) -> Thresholds {
        // Nor a concurrent step's total: its members keep their own depths, each checked alone.
        if w.think.is_some() || w.is_together_step() {
            Thresholds { littles_law: f64::INFINITY, ..*self }
        } else {
            *self
        }
    }
}

fn us(ns: f64) -> f64 {
    ns / 1000.0
}

pub fn latency_stats(h: &LatencyHistogram) -> LatencyStats {
    LatencyStats {
        mean: us(h.mean_ns()),
        min: us(h.min_ns() as f64),
        max: us(h.max_ns() as f64),
        stddev: us(h.stddev_ns()),
        p50: us(h.percentile_ns(50.0) as f64),
        p90: us(h.percentile_ns(90.0) as f64),
        p99: us(h.percentile_ns(99.0) as f64),
        p99_9: us(h.percentile_ns(99.9) as f64),
        p99_99: us(h.percentile_ns(99.99) as f64),
    }
}

/// Bucket edges of the published latency histogram, in µs.
const BUCKET_EDGES_US: [f64; 12] =
    [100.0, 250.0, 500.0, 1_000.0, 2_000.0, 4_000.0, 8_000.0, 16_000.0, 32_000.0, 64_000.0, 128_000.0, 256_000.0];

pub fn latency_buckets(h: &LatencyHistogram) -> Vec<LatencyBucket> {
    let total = h.count();
    let mut out = Vec::new();
    let mut below_prev = 0u64;
    let mut from = 0.0;
    for edge in BUCKET_EDGES_US {
        // Values strictly below the edge (ns resolution, so "< edge" = "<= edge - 1 ns").
        let below = h.count_at_or_below((edge * 1000.0) as u64 - 1);
        out.push(LatencyBucket { from_us: from, to_us: Some(edge), count: below - below_prev, pct: 0.0 });
        below_prev = below;
        from = edge;
    }
    out.push(LatencyBucket { from_us: from, to_us: None, count: total - below_prev, pct: 0.0 });
    for b in &mut out {
        b.pct = if total == 0 { 0.0 } else { 100.0 * b.count as f64 / total as f64 };
    }
    out
}

/// The name of an errno (`EIO`); `errno N` for one this table lacks, `short` for a short
/// transfer (0). The number stays beside it in every result (`errno`).
fn errno_name(e: i32) -> String {
    if e == 0 {
        return "short".into();
    }
    match ERRNO_NAMES.binary_search_by_key(&e, |(n, _)| *n) {
        Ok(i) => ERRNO_NAMES[i].1.into(),
        Err(_) => format!("errno {e}"),
    }
}

/// Linux errno values (a stable ABI: asm-generic/errno-base.h and errno.h), sorted, kept here so
/// the analysis needs no libc: the base set and every one a storage path can return.
const ERRNO_NAMES: &[(i32, &str)] = &[
    (1, "EPERM"),
    (2, "ENOENT"),
    (3, "ESRCH"),
    (4, "EINTR"),
    (5, "EIO"),
    (6, "ENXIO"),
    (7, "E2BIG"),
    (8, "ENOEXEC"),
    (9, "EBADF"),
    (10, "ECHILD"),
    (11, "EAGAIN"),
    (12, "ENOMEM"),
    (13, "EACCES"),
    (14, "EFAULT"),
    (15, "ENOTBLK"),
    (16, "EBUSY"),
    (17, "EEXIST"),
    (18, "EXDEV"),
    (19, "ENODEV"),
    (20, "ENOTDIR"),
    (21, "EISDIR"),
    (22, "EINVAL"),
    (23, "ENFILE"),
    (24, "EMFILE"),
    (25, "ENOTTY"),
    (26, "ETXTBSY"),
    (27, "EFBIG"),
    (28, "ENOSPC"),
    (29, "ESPIPE"),
    (30, "EROFS"),
    (31, "EMLINK"),
    (32, "EPIPE"),
    (33, "EDOM"),
    (34, "ERANGE"),
    (35, "EDEADLK"),
    (36, "ENAMETOOLONG"),
    (37, "ENOLCK"),
    (38, "ENOSYS"),
    (39, "ENOTEMPTY"),
    (40, "ELOOP"),
    (61, "ENODATA"),
    (62, "ETIME"),
    (71, "EPROTO"),
    (74, "EBADMSG"),
    (75, "EOVERFLOW"),
    (84, "EILSEQ"),
    (95, "EOPNOTSUPP"),
    (103, "ECONNABORTED"),
    (104, "ECONNRESET"),
    (107, "ENOTCONN"),
    (110, "ETIMEDOUT"),
    (112, "EHOSTDOWN"),
    (113, "EHOSTUNREACH"),
    (117, "EUCLEAN"),
    (121, "EREMOTEIO"),
    (122, "EDQUOT"),
    (123, "ENOMEDIUM"),
    (124, "EMEDIUMTYPE"),
    (125, "ECANCELED"),
];

fn dir_result(d: &iocurve_stats::DirStats, secs: f64) -> DirResult {
    DirResult {
        ops: d.ops,
        bytes: d.bytes,
        iops: rate(d.ops as f64, secs),
        mbps: rate(d.bytes as f64 / 1e6, secs),
        lat_us: latency_stats(&d.hist),
    }
}

/// Each target's part of a step, from its record (`paths`: the run's targets' names).
pub fn targets_of(rec: &iocurve_stats::StepRecord, paths: &[String]) -> Vec<crate::result::TargetStepResult> {
    let secs: f64 = rec.intervals.iter().map(|i| i.duration_s).sum();
    let all = rec.total.ops().max(1) as f64;
    let lone = rec.total.targets.len() < 2;
    rec.total
        .targets
        .iter()
        .map(|t| {
            let mean_kib = |bytes: u64, ops: u64| (ops > 0).then(|| bytes as f64 / ops as f64 / 1024.0);
            crate::result::TargetStepResult {
                target: paths.get(t.target as usize).cloned().unwrap_or_else(|| format!("target {}", t.target)),
                iops: rate(t.ops() as f64, secs),
                mbps: rate(t.bytes() as f64 / 1e6, secs),
                lat_us: latency_stats(&t.hist),
                errors: t.errors,
                share_pct: t.ops() as f64 / all * 100.0,
                read_kib: mean_kib(t.read_bytes, t.read_ops),
                write_kib: mean_kib(t.write_bytes, t.write_ops),
                device: t.device.map(|d| crate::result::DeviceSeen {
                    requests_per_s: rate((d.reads + d.writes + d.discards) as f64, secs),
                    read_request_kib: d.read_request_bytes().map(|b| b / 1024.0),
                    write_request_kib: d.write_request_bytes().map(|b| b / 1024.0),
                }),
                samples: if lone { Vec::new() } else { target_samples(rec, t.target) },
            }
        })
        .collect()
}

/// Sample `j` of interval `k`: its figures, timed within the step (percentiles: none here).
fn one_sample(rec: &StepRecord, k: usize, j: usize, s: &iocurve_stats::Sample) -> SampleResult {
    SampleResult {
        t_s: k as f64 * rec.interval_s + j as f64 * rec.sample_s,
        dur_s: rec.sample_s,
        ops: s.ops,
        iops: rate(s.ops as f64, rec.sample_s),
        mbps: rate(s.bytes as f64 / 1e6, rec.sample_s),
        lat_mean_us: us(s.mean_lat_ns()),
        lat_max_us: us(s.lat_max_ns as f64),
        errors: s.errors,
        p50_us: None,
        p99_us: None,
        p99_9_us: None,
        lat_hist: Vec::new(),
    }
}

/// One target's per-second samples over a step's intervals, timed as the step's own (a target
/// keeps no histogram per second: the step's seconds have theirs).
fn target_samples(rec: &StepRecord, target: u32) -> Vec<SampleResult> {
    let mut out = Vec::new();
    for (k, i) in rec.intervals.iter().enumerate() {
        let Some(t) = i.targets.iter().find(|t| t.target == target) else { continue };
        out.extend(t.samples.iter().enumerate().map(|(j, s)| one_sample(rec, k, j, s)));
    }
    out
}

/// A step's per-second samples, each with its own percentiles where it kept a histogram.
pub fn samples_of(rec: &StepRecord) -> Vec<SampleResult> {
    let mut samples = Vec::new();
    for (k, i) in rec.intervals.iter().enumerate() {
        for (j, s) in i.samples.iter().enumerate() {
            let hist = i.seconds.get(j).filter(|h| !h.is_empty());
            let pct = |p: f64| hist.map(|h| us(h.percentile_ns(p, s.lat_max_ns) as f64));
            samples.push(SampleResult {
                p50_us: pct(50.0),
                p99_us: pct(99.0),
                p99_9_us: pct(99.9),
                lat_hist: hist.map_or_else(Vec::new, |h| h.buckets().map(|(lo, hi, n)| [lo, hi, n]).collect()),
                ..one_sample(rec, k, j, s)
            });
        }
    }
    samples
}

/// The nines an exceedance curve reaches: 99.9999 %.
pub const QOS_NINES: f64 = 6.0;

/// The exceedance (QoS) curve of a histogram: the latency at every quarter of a nine (0 %,
/// 43.8 %, 68.4 %, 82.2 %, 90 %, … 99.9999 %), up to the nines its count resolves: of n I/Os
/// the slowest is the 1 − 1/n quantile, so the curve ends at log10(n) nines (and its last point
/// is the slowest I/O).
pub fn exceedance(h: &LatencyHistogram) -> Vec<crate::result::QosPoint> {
    let n = h.count();
    if n == 0 {
        return Vec::new();
    }
    let reach = (n as f64).log10().min(QOS_NINES);
    let mut out: Vec<crate::result::QosPoint> = (0..=(QOS_NINES * 4.0) as u32)
        .map(|q| q as f64 / 4.0)
        .take_while(|x| *x <= reach + 1e-9)
        .map(|x| {
            let pct = 100.0 * (1.0 - 10f64.powf(-x));
            crate::result::QosPoint { pct, lat_us: us(h.percentile_ns(pct) as f64) }
        })
        .collect();
    if reach < QOS_NINES && out.last().is_some_and(|p| p.pct < 100.0 * (1.0 - 1.0 / n as f64) - 1e-9) {
        let pct = 100.0 * (1.0 - 1.0 / n as f64);
        out.push(crate::result::QosPoint { pct, lat_us: us(h.max_ns() as f64) });
    }
    out
}

fn rate(x: f64, secs: f64) -> f64 {
    if secs > 0.0 { x / secs } else { 0.0 }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
}

/// Population coefficient of variation; 0 for fewer than two values or a zero mean.
pub fn cv(v: &[f64]) -> f64 {
    let m = mean(v);
    if v.len() < 2 || m == 0.0 {
        return 0.0;
    }
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64;
    var.sqrt() / m
}

pub fn analyze_step(rec: &StepRecord, sequential: bool, th: &Thresholds) -> StepResult {
    analyze_step_on(rec, sequential, th, &[])
}

/// [`analyze_step`] with the run's target paths, so that errors name their target.
pub fn analyze_step_on(rec: &StepRecord, sequential: bool, th: &Thresholds, targets: &[String]) -> StepResult {
    let all = &rec.total;
    let secs: f64 = rec.intervals.iter().map(|i| i.duration_s).sum();
    let hist = all.combined_hist();
    let lat = latency_stats(&hist);
    let iops = rate(all.ops() as f64, secs);
    let mbps = rate(all.bytes() as f64 / 1e6, secs);
    let intervals: Vec<IntervalResult> = rec
        .intervals
        .iter()
        .map(|i| IntervalResult {
            iops: rate(i.ops as f64, i.duration_s),
            mbps: rate(i.bytes as f64 / 1e6, i.duration_s),
            lat_mean_us: us(i.lat_mean_ns),
            cpu: i.cpu,
        })
        .collect();
    let tput: Vec<f64> = intervals.iter().map(|i| if sequential { i.mbps } else { i.iops }).collect();
    let cpu = CpuUsage::mean(intervals.iter().map(|i| &i.cpu));
    let errors = all.errors();
    let samples = samples_of(rec);
    // Every host its own workers (uneven hosts run their share); a step without per-host
    // records, the step's on each.
    let outstanding = if let Some(n) = rec.outstanding {
        n
    } else if rec.per_host.is_empty() {
        rec.workers as u64 * rec.queue_depth as u64 * rec.hosts.max(1) as u64
    } else {
        // (Not those lost before they started: they kept nothing in flight.)
        rec.per_host
            .iter()
            .filter(|h| h.started_unix_ns > 0 || h.record.measured > 0)
            // (A relay's group row: its hosts' workers together.)
            .map(|h| h.record.workers as u64 * rec.queue_depth as u64)
            .sum()
    };
    let mut step = StepResult {
        workers: rec.workers,
        hosts: rec.hosts.max(1),
        planned_hosts: rec.planned_hosts.max(rec.hosts).max(1),
        host_results: Vec::new(),
        start_spread_us: None,
        clock_uncertainty_us: None,
        queue_depth: rec.queue_depth,
        outstanding,
        threads: rec.threads,
        io_cpu: rec.io_cpu.map(|c| crate::IoCpuResult { busiest_pct: c.busiest * 100.0, total_pct: c.total * 100.0 }),
        duration_s: secs,
        iops,
        mbps,
        lat_us: lat,
        read: dir_result(&all.read, secs),
        write: dir_result(&all.write, secs),
        trim: dir_result(&all.trim, secs),
        cv: cv(&tput),
        iops_min: intervals.iter().map(|i| i.iops).reduce(f64::min).unwrap_or(0.0),
        iops_max: intervals.iter().map(|i| i.iops).fold(0.0, f64::max),
        intervals,
        cpu,
        errors: errors.total(),
        errors_by_errno: errors
            .by_errno()
            .iter()
            .map(|&(e, n)| ErrorCount { errno: e, name: errno_name(e), count: n })
            .collect(),
        errors_by_target: by_target(&errors, targets),
        longest_stall_s: all.max_gap_ns.unwrap_or(0) as f64 / 1e9,
        faults_injected: all.faults_injected + rec.drain.faults_injected,
        late_ios: rec.drain.late,
        stuck_ios: rec.drain.stuck,
        stuck_age_s: rec.drain.stuck_age_ns as f64 / 1e9,
        unmeasured_errors: by_target(&rec.unmeasured_errors, targets),
        verify: (all.verify.checked > 0 || all.verify.problems() > 0).then(|| all.verify.clone()),
        lat_histogram: latency_buckets(&hist),
        exceedance: exceedance(&hist),
        flags: Vec::new(),
        measured_from_unix_ns: rec.measured_from_unix_ns,
        targets: targets_of(rec, targets),
        luns: Vec::new(),
        balance: Vec::new(),
        samples,
        rate: rate_result(rec),
        // (A replay follows its trace: steady state says nothing of the storage there.)
        steady_state: if rec.replay_speed.is_some() { None } else { crate::steady::first_steady(&tput) },
    };
    step.flags = flags(&step, rec, &tput, th);
    (step.host_results, step.start_spread_us) = per_host(rec, sequential, th);
    step.clock_uncertainty_us = step
        .start_spread_us
        .map(|_| rec.per_host.iter().map(|h| h.clock.rtt_ns.max(0) as f64 / 2000.0).fold(0.0, f64::max));
    step.flags.extend(timing_flags(&step, rec));
    step
}

/// The most the hosts' starts may lie apart, or their clocks move during a step, before the
/// step is flagged: 1 ms, or 1 % of an interval when that is more.
pub fn start_bound_us(interval_s: f64) -> f64 {
    (interval_s * 1e6 / 100.0).max(1000.0)
}

/// Multi-host timing: starts further apart than the bound, and clocks that moved during the
/// step (their starts and timelines are off by up to that much, unseen by the spread).
fn timing_flags(s: &StepResult, rec: &StepRecord) -> Vec<Flag> {
    let bound = start_bound_us(rec.interval_s);
    let mut f = Vec::new();
    if let Some(spread) = s.start_spread_us.filter(|&v| v > bound) {
        f.push(Flag {
            code: "start_spread".into(),
            message: format!(
                "the hosts started {:.2} ms apart (more than {:.2} ms; clocks known to ±{:.2} ms): the first and last interval of each host cover different moments",
                spread / 1000.0,
                bound / 1000.0,
                s.clock_uncertainty_us.unwrap_or(0.0) / 1000.0
            ),
        });
    }
    for h in &rec.per_host {
        let moved = h.clock.moved_ns() as f64 / 1000.0;
        if moved.abs() > bound {
            f.push(Flag {
                code: "clock_moved".into(),
                message: format!(
                    "agent {}'s clock moved {:+.2} ms against the coordinator's during the step: its start and timeline may be off by that much",
                    h.address,
                    moved / 1000.0
                ),
            });
        }
    }
    f
}

/// Each host's own figures in a multi-host step, and the spread of their starts (µs) over the
/// hosts that started.
fn per_host(rec: &StepRecord, sequential: bool, th: &Thresholds) -> (Vec<HostStepResult>, Option<f64>) {
    let starts: Vec<i64> = rec.per_host.iter().map(|h| h.started_unix_ns).filter(|&t| t > 0).collect();
    let (Some(&first), Some(&last)) = (starts.iter().min(), starts.iter().max()) else {
        return (Vec::new(), None);
    };
    let hosts = rec
        .per_host
        .iter()
        .map(|h| {
            let s = analyze_step(&h.record, sequential, th);
            HostStepResult {
                host: h.address.clone(),
                hostname: h.hostname.clone(),
                workers: h.record.workers,
                iops: s.iops,
                mbps: s.mbps,
                lat_us: s.lat_us,
                errors: s.errors,
                started_at_us: (h.started_unix_ns.max(first) - first) as f64 / 1000.0,
                lost_at_s: h.lost_at_s,
                clock_offset_ms: h.clock.offset_ns as f64 / 1e6,
                clock_moved_ms: h.clock.offset_after_ns.map(|_| h.clock.moved_ns() as f64 / 1e6),
                samples: s.samples,
                hosts: h.record.hosts.max(1),
            }
        })
        .collect();
    (hosts, Some((last - first) as f64 / 1000.0))
}

/// Error counts with their targets' paths and errno names.
fn by_target(errors: &iocurve_stats::ErrorCounts, targets: &[String]) -> Vec<TargetErrorCount> {
    let name = |t: u32| match targets.get(t as usize) {
        Some(p) => p.clone(),
        None if t == iocurve_stats::UNKNOWN_TARGET => "unknown".into(),
        None => format!("target {t}"),
    };
    let count =
        |&(t, e, n): &(u32, i32, u64)| TargetErrorCount { target: name(t), errno: e, name: errno_name(e), count: n };
    errors.0.iter().map(count).collect()
}

/// A gap between completions this long is a stall.
pub const STALL_S: f64 = 1.0;

/// Achieved below this share of what was due: the rate was not sustained.
pub const SUSTAINED_SHARE: f64 = 0.99;

/// A replay is behind its trace in an interval whose p99 lag passes this (ms): an I/O that much
/// late has moved against its neighbours by more than a disk's seek, a cache's whole answer.
pub const BEHIND_MS: f64 = 10.0;

/// A replay's intended rate in each of the step's samples (IOPS): its bins summed over each
/// sample's span, a bin at a sample's edge shared by its overlap.
fn intended_iops(rec: &StepRecord) -> Vec<f64> {
    if rec.replay_intended.is_empty() {
        return Vec::new();
    }
    let due_in = |from: f64, to: f64| -> f64 {
        let per = 1.0 / rec.replay_bin_s.max(1e-3);
        let (a, b) = ((from * per).max(0.0), (to * per).max(0.0));
        let mut sum = 0.0;
        let mut k = a.floor() as usize;
        while (k as f64) < b && k < rec.replay_intended.len() {
            let overlap = (b.min(k as f64 + 1.0) - a.max(k as f64)).max(0.0);
            sum += rec.replay_intended[k] as f64 * overlap;
            k += 1;
        }
        sum
    };
    let mut out = Vec::new();
    for (k, i) in rec.intervals.iter().enumerate() {
        for j in 0..i.samples.len() {
            let t = k as f64 * rec.interval_s + j as f64 * rec.sample_s;
            out.push(round_sig(rate(due_in(t, t + rec.sample_s), rec.sample_s)));
        }
    }
    out
}

fn round_sig(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

/// When and how far a replay fell behind (None: it kept up, or it is no replay).
fn behind(rec: &StepRecord) -> Option<crate::result::Behind> {
    rec.replay_speed?;
    let bound = (BEHIND_MS * 1e6) as u64;
    let lag_p99 = |i: &iocurve_stats::IntervalRecord| i.lag_p99_ns.unwrap_or(0);
    let first = rec.intervals.iter().position(|i| lag_p99(i) > bound)?;
    let total = rec.total.rate.as_ref().map(|r| &r.lag);
    let late = total.map_or(0, |h| h.count() - h.count_at_or_below(bound));
    Some(crate::result::Behind {
        from_s: first as f64 * rec.interval_s,
        intervals: rec.intervals.iter().filter(|i| lag_p99(i) > bound).count(),
        worst_lag_p99_us: rec.intervals.iter().map(lag_p99).max().unwrap_or(0) as f64 / 1e3,
        late_pct: total.map_or(0.0, |h| if h.count() == 0 { 0.0 } else { late as f64 * 100.0 / h.count() as f64 }),
    })
}

/// A rate step's figures and verdict (None for a closed-loop step).
fn rate_result(rec: &StepRecord) -> Option<RateResult> {
    let target_iops = rec.rate_iops?;
    let r = rec.total.rate.clone().map(|b| *b).unwrap_or_default();
    let ops = rec.total.ops();
    let achieved = if r.due == 0 { 0.0 } else { ops as f64 / r.due as f64 };
    let mut result = RateResult {
        target_iops,
        due: r.due,
        achieved_pct: achieved * 100.0,
        dropped: r.dropped,
        backlog: r.backlog,
        service_us: latency_stats(&r.service),
        lag_us: latency_stats(&r.lag),
        sustained: false,
        replay_speed: rec.replay_speed,
        behind: behind(rec),
        intended_iops: intended_iops(rec),
    };
    result.sustained = unsustained_because(&result, rec).is_empty();
    Some(result)
}

/// Why a rate step was not sustained, in words: the one statement of the rule (none: it was).
fn unsustained_because(r: &RateResult, rec: &StepRecord) -> Vec<String> {
    let (interval_s, interrupted) = (rec.interval_s, rec.interrupted);
    let mut why = Vec::new();
    // No I/O due completes nothing: 0 % (below the share).
    if r.achieved_pct < SUSTAINED_SHARE * 100.0 {
        why.push(format!("{:.1} % of the {} due I/Os completed", r.achieved_pct, r.due));
    }
    if r.dropped > 0 {
        why.push(format!("{} due I/Os were dropped", r.dropped));
    }
    if r.backlog > 0 {
        why.push(format!("{} due I/Os were still waiting for a slot when the measurement ended", r.backlog));
    }
    // From the histogram itself, in ns: the figure rounded to µs could sit on the bound.
    let lag_p99_s = rec.total.rate.as_ref().map_or(0.0, |x| x.lag.percentile_ns(99.0) as f64 / 1e9);
    if lag_p99_s >= interval_s {
        why.push(format!("p99 lag {lag_p99_s:.2} s is not below one interval ({interval_s} s)"));
    } else if r.replay_speed.is_some() && lag_p99_s * 1e3 > BEHIND_MS {
        // A replay keeps up when its I/Os go out near their trace times, not within an interval.
        why.push(format!("p99 lag {:.1} ms is over {BEHIND_MS} ms: behind its trace", lag_p99_s * 1e3));
    }
    if interrupted {
        why.push("the step did not run to its end".into());
    }
    if rec.drain.stuck > 0 {
        why.push(format!("{} I/Os were stuck", rec.drain.stuck));
    }
    // Part of the schedule went with a host or an I/O thread that stopped answering: the due
    // count of the others cannot tell how much.
    if rec.notes.iter().any(|(c, _)| c == "host_lost" || c == "threads_abandoned") {
        why.push("a host or I/O thread stopped answering, and its part of the schedule with it".into());
    }
    if rec.notes.iter().any(|(c, _)| c == "overloaded") {
        why.push("overload ended the step".into());
    }
    why
}

/// Intervals after the first that a transient needs: with fewer, a first interval off the
/// others cannot be told from noise. On the quick suite (3 × 0.5 s) the last interval was the
/// odd one out as often as the first, and a longer warm-up (0.5, 1, 2 s) did not make the first
/// agree more often (issue 16): the flag's advice was wrong there.
const TRANSIENT_MIN_OTHERS: usize = 3;

/// How far the first interval's throughput is off the mean of the others (a share), when it is
/// a transient: more than `bound` off, and more than three standard deviations of the others
/// (over their mean), so that the first interval stands out from their noise. A warm-up that
/// fades over several intervals still stands out: its tail widens the deviation less than the
/// first interval is off.
fn transient_off(tput: &[f64], bound: f64) -> Option<f64> {
    let (first, rest) = tput.split_first()?;
    if rest.len() < TRANSIENT_MIN_OTHERS {
        return None;
    }
    let m = mean(rest);
    if m <= 0.0 {
        return None;
    }
    let off = (first - m) / m;
    let var = rest.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (rest.len() - 1) as f64;
    let sd = var.sqrt() / m;
    (off.abs() > bound && off.abs() > 3.0 * sd).then_some(off)
}

/// The flag of a step that ran on fewer hosts than planned because a host was lost earlier in
/// the run (issue 35, finding 4).
pub const FEWER_HOSTS: &str = "fewer_hosts";

/// Why a step ran on `hosts` of `planned` hosts, naming the earlier losses where known
/// (address, loss): the one wording of the `fewer_hosts` flag.
pub fn fewer_hosts_message(hosts: u32, planned: u32, losses: &[(String, HostLoss)]) -> String {
    let why = if losses.is_empty() {
        "a host was lost earlier in the run".to_string()
    } else {
        let each: Vec<String> = losses.iter().map(|(a, l)| format!("agent {a} lost {}", l.describe())).collect();
        each.join("; ")
    };
    format!(
        "ran on {hosts} of {planned} planned hosts: {why}; not comparable with the steps on all of them, it enters no speed, optimum or maximum"
    )
}

fn flags(s: &StepResult, rec: &StepRecord, tput: &[f64], th: &Thresholds) -> Vec<Flag> {
    let mut f = Vec::new();
    let mut flag = |code: &str, message: String| f.push(Flag { code: code.into(), message });
    if rec.interrupted {
        flag("interrupted", format!("stopped after {} of the planned intervals", rec.intervals.len()));
    }
    if let Some(r) = s.rate.as_ref().filter(|r| !r.sustained) {
        let why = unsustained_because(r, rec).join("; ");
        // Stopped with nothing else wrong: the `interrupted` flag says it, not as falling behind
        // (found by an outside test: a replay stopped by Ctrl-C "did not keep up").
        let only_stopped = rec.interrupted && why == "the step did not run to its end";
        let what = match r.replay_speed {
            _ if only_stopped => String::new(),
            Some(s) => format!(
                "the replay at {}× its trace ({} IOPS) did not keep up",
                crate::format::speed(s),
                r.target_iops.round()
            ),
            None => format!("the target of {} IOPS was not sustained", r.target_iops.round()),
        };
        if !only_stopped {
            flag("unsustained", format!("{what} ({why}): the step enters no optimum or maximum"));
        }
    }
    if s.ops() == 0 {
        flag(
            "no_io",
            "no I/O completed in this step's measured intervals: it has no throughput or latency, and it enters no speed, optimum or maximum".into(),
        );
    }
    // A replay's throughput follows its trace: its intervals differ by design, and steadiness
    // and warm-up say nothing of the storage there.
    let replay = rec.replay_speed.is_some();
    if s.cv > th.unsteady_cv && !replay {
        flag(
            "unsteady",
            format!("throughput varied between intervals (CV {:.1} % > {:.0} %)", s.cv * 100.0, th.unsteady_cv * 100.0),
        );
    }
    if let Some(c) = s.steady_state.as_ref().filter(|c| !c.steady && !replay) {
        flag(
            "not_steady",
            format!(
                "not in steady state by the SNIA rule over the last {} intervals: range {:.1} % of the mean (allowed {:.0} %), best-fit excursion {:.1} % (allowed {:.0} %)",
                c.values.len(),
                c.range_pct,
                crate::steady::MAX_RANGE * 100.0,
                c.excursion_pct,
                crate::steady::MAX_EXCURSION * 100.0
            ),
        );
    }
    if let Some(off) = transient_off(tput, th.transient).filter(|_| !replay) {
        flag(
            "transient",
            format!(
                "the first interval is {:+.0} % off the others, which agree with each other: the warm-up may be too short",
                off * 100.0
            ),
        );
    }
    if s.cpu.busy() > th.cpu_busy_pct {
        flag("cpu_saturated", format!("host CPU {:.0} % busy: the load host may be the bottleneck", s.cpu.busy()));
    }
    // A host lost mid-step changes the I/Os in flight partway: no one count to check against.
    let host_lost = rec.notes.iter().any(|(code, _)| code == "host_lost");
    // A rate step keeps as many in flight as its schedule asks, not `outstanding`.
    if s.iops > 0.0 && s.outstanding > 0 && !host_lost && s.rate.is_none() {
        let l = s.iops * s.lat_us.mean / 1e6;
        let off = (l - s.outstanding as f64) / s.outstanding as f64;
        if off.abs() > th.littles_law {
            flag(
                "littles_law",
                format!(
                    "IOPS × mean latency = {l:.2} I/Os in flight, but {} were kept outstanding ({:+.0} %): time was lost outside the measured I/Os",
                    s.outstanding,
                    off * 100.0
                ),
            );
        }
    }
    if s.errors > 0 {
        let list: Vec<String> =
            s.errors_by_target.iter().map(|e| format!("{} × {} on {}", e.count, e.name, e.target)).collect();
        flag("errors", format!("{} I/O errors ({})", s.errors, list.join(", ")));
    }
    if let Some(v) = s.verify.as_ref().filter(|v| v.problems() > 0) {
        flag("verify", format!("verification: {}; first: {}", v.describe(), v.examples.join("; ")));
    }
    // A host lost earlier in the run: the run says which and where (its `fewer_hosts` note);
    // a run stored before it did gets the bare fact. A loss in this very step is its own flag.
    let said = |c: &str| rec.notes.iter().any(|(code, _)| code == c);
    if s.planned_hosts > s.hosts && !said(FEWER_HOSTS) && !said("host_lost") {
        flag(FEWER_HOSTS, fewer_hosts_message(s.hosts, s.planned_hosts, &[]));
    }
    for (code, message) in &rec.notes {
        flag(code, message.clone());
    }
    if !s.unmeasured_errors.is_empty() {
        let n: u64 = s.unmeasured_errors.iter().map(|e| e.count).sum();
        let list: Vec<String> =
            s.unmeasured_errors.iter().map(|e| format!("{} × {} on {}", e.count, e.name, e.target)).collect();
        flag(
            "unmeasured_errors",
            format!(
                "{n} I/O errors outside the measured intervals (warm-up, or after the step stopped issuing): {}",
                list.join(", ")
            ),
        );
    }
    if s.stuck_ios > 0 {
        let counted = if rec.interrupted {
            "the step was stopped, so no interval holds them"
        } else {
            "their age enters the last interval's latency figures"
        };
        flag(
            "stuck",
            format!(
                "{} I/Os had not completed {:.1} s after the step stopped issuing (oldest {:.1} s): given up as stuck; {counted}",
                s.stuck_ios,
                rec.drain.wait_ns as f64 / 1e9,
                s.stuck_age_s
            ),
        );
    }
    if s.longest_stall_s >= STALL_S {
        flag("stall", format!("no I/O completed for {:.1} s", s.longest_stall_s));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 13, finding 9: errno printed as numbers (26 instead of ETXTBSY).
    #[test]
    fn errno_names_are_sorted_and_name_etxtbsy() {
        assert!(ERRNO_NAMES.windows(2).all(|w| w[0].0 < w[1].0), "sorted for the binary search");
        assert_eq!(errno_name(26), "ETXTBSY");
        assert_eq!(errno_name(5), "EIO");
        assert_eq!(errno_name(0), "short");
        assert_eq!(errno_name(999), "errno 999");
    }
    use iocurve_stats::IntervalStats;

    /// One interval of `ops` reads of `lat_ns` each.
    fn interval(ops: u64, lat_ns: u64) -> IntervalStats {
        let mut stats = IntervalStats::with_samples(1);
        for _ in 0..ops {
            stats.read.record(lat_ns, 4096);
            stats.samples[0].record(lat_ns, 4096);
        }
        stats
    }

    /// Issue 17 (review): a rate step is sustained only when its whole schedule was kept — a
    /// psync thread blocked in the kernel, or a host lost, takes its part of the schedule with
    /// it and the others' due count cannot show it; a stuck I/O is no kept schedule either.
    #[test]
    fn a_rate_step_is_sustained_only_when_the_whole_schedule_was_kept() {
        let rated = |notes: &[&str], stuck: u64| {
            let mut ivs = Vec::new();
            for _ in 0..2 {
                let mut i = interval(1000, 50_000);
                let mut r = iocurve_stats::RateStats { due: 1000, ..Default::default() };
                r.lag.record(10_000);
                r.service.record(40_000);
                i.rate = Some(Box::new(r));
                ivs.push(i);
            }
            let mut rec = record(ivs, 10.0, 64);
            rec.rate_iops = Some(1000.0);
            rec.notes = notes.iter().map(|c| (c.to_string(), "m".to_string())).collect();
            rec.drain.stuck = stuck;
            analyze_step(&rec, false, &Thresholds::default())
        };
        let ok = rated(&[], 0);
        let r = ok.rate.as_ref().unwrap();
        assert!(r.sustained && r.achieved_pct == 100.0 && r.due == 2000, "{r:?}");
        assert!(!ok.flags.iter().any(|f| f.code == "littles_law"), "a rate step keeps no fixed count in flight");
        for (notes, stuck) in
            [(&["threads_abandoned"][..], 0), (&["host_lost"][..], 0), (&[][..], 3), (&["overloaded"][..], 0)]
        {
            let s = rated(notes, stuck);
            assert!(!s.rate.as_ref().unwrap().sustained, "{notes:?} {stuck}");
            assert!(s.flags.iter().any(|f| f.code == "unsustained"), "{:?}", s.flags);
        }
    }

    /// A replay or rate step stopped before its end (Ctrl-C) with nothing else wrong is flagged
    /// as interrupted, not as one that fell behind (found by an outside test: "did not keep up"),
    /// and still enters no optimum or maximum; one that also fell behind says both.
    #[test]
    fn a_step_only_stopped_is_interrupted_not_unsustained() {
        let stopped = |lag_ns: u64| {
            let mut i = interval(1000, 50_000);
            let mut r = iocurve_stats::RateStats { due: 1000, ..Default::default() };
            r.lag.record(lag_ns);
            i.rate = Some(Box::new(r));
            let mut rec = record(vec![i], 10.0, 64);
            rec.rate_iops = Some(1000.0);
            rec.replay_speed = Some(2.0);
            rec.interrupted = true;
            analyze_step(&rec, false, &Thresholds::default())
        };
        let codes = |s: &StepResult| s.flags.iter().map(|f| f.code.clone()).collect::<Vec<_>>();
        let s = stopped(10_000);
        assert!(!s.rate.as_ref().unwrap().sustained);
        assert_eq!(codes(&s), ["interrupted"]);
        let behind = stopped(50_000_000);
        assert!(codes(&behind).contains(&"unsustained".to_string()), "{:?}", behind.flags);
        assert!(behind.flags.iter().any(|f| f.message.contains("did not keep up")), "{:?}", behind.flags);
    }

    /// A step of 1-second intervals with the host `busy` percent.
    fn record(intervals: Vec<IntervalStats>, busy: f64, workers: u32) -> StepRecord {
        let mut rec = StepRecord::new(workers, 1, 1, 1.0, 1.0);
        for s in intervals {
            rec.push_interval(s, CpuUsage { user: busy, ..Default::default() }, 1.0);
        }
        rec
    }

    #[test]
    fn figures_of_a_steady_step() {
        // 1 worker at 99 µs per I/O: 10'000 IOPS, and Little's law holds.
        let mut ivs: Vec<IntervalStats> = (0..3).map(|_| interval(10_000, 99_000)).collect();
        // Bucket edges have the histogram's 0.1 % resolution: test values clear of them.
        ivs[0].read.hist.record(120_000);
        ivs[0].read.hist.record(2_500_000);
        let s = analyze_step(&record(ivs, 20.0, 1), false, &Thresholds::default());
        assert!((s.iops - 10_000.0).abs() < 1e-6);
        assert!((s.mbps - 40.96).abs() < 1e-6);
        assert!((s.lat_us.mean - 99.0).abs() < 0.1);
        assert_eq!(s.cv, 0.0);
        assert!(s.flags.is_empty(), "{:?}", s.flags);
        assert_eq!(s.samples.len(), 3);
        assert_eq!(s.samples[2].t_s, 2.0);
        let b: u64 = s.lat_histogram.iter().map(|b| b.count).sum();
        assert_eq!(b, 30_002);
        assert_eq!(s.lat_histogram[1].count, 1, "120 µs falls in 100–250 µs");
        assert_eq!(s.lat_histogram[5].count, 1, "2.5 ms falls in 2–4 ms");
        assert!((s.lat_histogram[0].pct - 100.0 * 30_000.0 / 30_002.0).abs() < 1e-9);
    }

    #[test]
    fn flags_unsteady_transient_cpu_and_littles_law() {
        let ivs = vec![
            interval(5_000, 100_000),
            interval(10_000, 100_000),
            interval(10_000, 100_000),
            interval(10_000, 100_000),
        ];
        // 4 outstanding, but IOPS × latency ≈ 0.83.
        let s = analyze_step(&record(ivs, 95.0, 4), false, &Thresholds::default());
        let codes: Vec<&str> = s.flags.iter().map(|f| f.code.as_str()).collect();
        assert_eq!(codes, vec!["unsteady", "transient", "cpu_saturated", "littles_law"]);
    }

    /// Issue 16: the quick suite (3 × 0.5 s intervals) flagged `transient` with "lengthen the
    /// warm-up" on a third of its steps, where the first interval was no odder than the others
    /// and a longer warm-up changed nothing. A transient needs three intervals after the first,
    /// and the first must stand out from their noise.
    #[test]
    fn regression_noise_is_not_called_a_transient() {
        let off = |t: &[f64]| transient_off(t, Thresholds::default().transient);
        // Three intervals: too few to tell a warm-up from noise, however far off the first.
        assert_eq!(off(&[50.0, 100.0, 100.0]), None);
        // The others vary as much as the first is off (standard deviation 10 %): noise.
        assert_eq!(off(&[85.0, 90.0, 110.0, 100.0]), None);
        // The first stands out from others that agree within 1 %: a transient, by -15 %.
        let o = off(&[85.0, 99.0, 101.0, 100.0]).expect("a transient");
        assert!((o + 0.15).abs() < 1e-9, "{o}");
        // A warm-up that fades over several intervals is one too.
        assert!(off(&[200.0, 150.0, 110.0, 100.0, 100.0, 100.0]).is_some_and(|o| o > 0.7));
        // One hiccup among many intervals does not hide a transient.
        let mut long = vec![60.0];
        long.extend((0..30).map(|i| if i == 17 { 70.0 } else { 100.0 + (i % 3) as f64 }));
        assert!(off(&long).is_some());
        // Within 10 % is no transient however steady the rest.
        assert_eq!(off(&[95.0, 100.0, 100.0, 100.0]), None);
        assert_eq!(off(&[]), None);
        assert_eq!(off(&[1.0, 0.0, 0.0, 0.0]), None);
        // The quick suite's interval count gives no `transient`; a first interval at half the
        // others' throughput is still `unsteady`.
        let ivs = vec![interval(5_000, 100_000), interval(10_000, 100_000), interval(10_000, 100_000)];
        let s = analyze_step(&record(ivs, 20.0, 1), false, &Thresholds::default());
        let codes: Vec<&str> = s.flags.iter().map(|f| f.code.as_str()).filter(|c| *c != "littles_law").collect();
        assert_eq!(codes, vec!["unsteady"]);
    }

    /// Issue 15, finding 6: an agent's clock stepped +200 ms mid-run made real starts 200 ms
    /// apart while the reported spread stayed below 1.1 ms. Starts further apart than the bound
    /// are flagged, and so is a clock that moved during the step.
    #[test]
    fn hosts_started_apart_or_clocks_that_moved_are_flagged() {
        use iocurve_stats::{HostClock, HostRecord};
        let host = |name: &str, started_unix_ns: i64, clock: HostClock| HostRecord {
            address: name.into(),
            hostname: name.into(),
            started_unix_ns,
            lost_at_s: None,
            clock,
            record: record(vec![interval(10, 1000)], 1.0, 1),
        };
        let steady =
            HostClock { offset_ns: 5_000, rtt_ns: 100_000, offset_after_ns: Some(60_000), rtt_after_ns: 100_000 };
        let codes = |rec: &StepRecord| -> Vec<String> {
            let flags = analyze_step(rec, false, &Thresholds::default()).flags;
            flags.into_iter().map(|f| f.code).filter(|c| c == "start_spread" || c == "clock_moved").collect()
        };
        let mut rec = record(vec![interval(20, 1000)], 1.0, 1);
        rec.per_host = vec![host("a", 1_000_000_000, steady), host("b", 1_009_000_000, steady)];
        assert!(codes(&rec).is_empty(), "9 ms apart is within 1 % of a 1 s interval: {:?}", codes(&rec));
        rec.per_host[1].started_unix_ns = 1_011_000_000;
        assert_eq!(codes(&rec), ["start_spread"]);
        rec.per_host[1].started_unix_ns = 1_000_000_000;
        rec.per_host[1].clock.offset_after_ns = Some(200_005_000);
        let s = analyze_step(&rec, false, &Thresholds::default());
        let f = s.flags.iter().find(|f| f.code == "clock_moved").expect("flagged");
        assert!(f.message.contains("agent b") && f.message.contains("+199.90 ms"), "{}", f.message);
        assert_eq!(s.host_results[1].clock_moved_ms, Some(199.9));
        assert_eq!(start_bound_us(0.05), 1000.0, "1 ms at least");
    }

    /// Issue 35, finding 4: the step after a host was lost ran on fewer hosts with no flag. It
    /// is flagged `fewer_hosts`, with the run's reason where the run gave one (its note), else
    /// with the bare fact (a run stored before); a loss in the step itself is its own flag.
    #[test]
    fn regression_a_step_on_fewer_hosts_than_planned_is_flagged_once() {
        let on = |hosts: u32, planned: u32, notes: &[(&str, &str)]| {
            let mut rec = record(vec![interval(10, 1000)], 1.0, 1);
            (rec.hosts, rec.planned_hosts) = (hosts, planned);
            rec.notes = notes.iter().map(|(c, m)| (c.to_string(), m.to_string())).collect();
            let s = analyze_step(&rec, false, &Thresholds::default());
            let fewer: Vec<String> =
                s.flags.iter().filter(|f| f.code == FEWER_HOSTS).map(|f| f.message.clone()).collect();
            (s.planned_hosts, fewer)
        };
        let (planned, fewer) = on(2, 3, &[]);
        assert_eq!(planned, 3);
        assert_eq!(fewer.len(), 1);
        assert!(fewer[0].starts_with("ran on 2 of 3 planned hosts: a host was lost earlier"), "{fewer:?}");
        let loss = HostLoss {
            at: "2026-11-28T00:00:00Z".into(),
            workload: "rr".into(),
            workload_index: 0,
            step: 3,
            workers: 8,
            into_step_s: 1.25,
            why: "it stopped answering".into(),
        };
        let why = fewer_hosts_message(2, 3, &[("b:7070".into(), loss)]);
        assert!(
            why.starts_with("ran on 2 of 3 planned hosts: agent b:7070 lost in rr at 8 workers, 1.2 s into the step"),
            "{why}"
        );
        assert_eq!(on(2, 3, &[(FEWER_HOSTS, &why)]).1, std::slice::from_ref(&why), "the run's reason, once");
        assert!(on(2, 3, &[("host_lost", "lost before the step started")]).1.is_empty(), "its own flag");
        assert!(on(3, 3, &[]).1.is_empty());
        // Never fewer planned than ran (a record without it says 1).
        assert_eq!(on(2, 1, &[]), (2, Vec::new()));
    }

    #[test]
    fn errors_are_counted_by_name() {
        let mut i = interval(10, 1000);
        i.write.errors.add(1, 5, 3);
        i.write.errors.add(0, 0, 1);
        i.read.errors.add(0, 5, 2);
        let targets = ["/dev/a".to_string(), "/dev/b".to_string()];
        let s = analyze_step_on(&record(vec![i], 1.0, 1), false, &Thresholds::default(), &targets);
        assert_eq!(s.errors, 6);
        let names: Vec<(&str, u64)> = s.errors_by_errno.iter().map(|e| (e.name.as_str(), e.count)).collect();
        assert_eq!(names, vec![("short", 1), ("EIO", 5)]);
        let by_target: Vec<(&str, &str, u64)> =
            s.errors_by_target.iter().map(|e| (e.target.as_str(), e.name.as_str(), e.count)).collect();
        assert_eq!(by_target, vec![("/dev/a", "short", 1), ("/dev/a", "EIO", 2), ("/dev/b", "EIO", 3)]);
        let f = s.flags.iter().find(|f| f.code == "errors").expect("flagged");
        assert!(f.message.contains("3 × EIO on /dev/b"), "{}", f.message);
    }

    #[test]
    fn a_gap_of_a_second_or_more_is_a_stall() {
        let mut i = interval(10, 1000);
        i.max_gap_ns = Some(2_500_000_000);
        let mut j = interval(10, 1000);
        j.max_gap_ns = Some(900_000_000);
        let s = analyze_step(&record(vec![i, j], 1.0, 1), false, &Thresholds::default());
        assert_eq!(s.longest_stall_s, 2.5);
        assert!(s.flags.iter().any(|f| f.code == "stall" && f.message.contains("2.5 s")), "{:?}", s.flags);
        let mut k = interval(10, 1000);
        k.max_gap_ns = Some(999_000_000);
        let s = analyze_step(&record(vec![k], 1.0, 1), false, &Thresholds::default());
        assert!(!s.flags.iter().any(|f| f.code == "stall"));
    }

    #[test]
    fn an_empty_step_does_not_divide_by_zero() {
        let mut rec = record(vec![], 0.0, 1);
        rec.interrupted = true;
        let s = analyze_step(&rec, true, &Thresholds::default());
        assert_eq!(s.iops, 0.0);
        assert_eq!(s.iops_min, 0.0);
        assert!(s.flags.iter().any(|f| f.code == "interrupted"));
        assert!(serde_json::to_string(&s).is_ok());
    }
}
