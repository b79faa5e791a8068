//! A run at a glance, as a tender document opens (issue 43): the key figures of every workload
//! (the seeds' "Kennzahlen" table), the block size × read share matrices of workloads that
//! differ in nothing else, the IBM paper's second value beside each maximum, and how much of
//! its targets a backend step moved. Pure: worked out from the result on demand, never stored.

use serde::Serialize;

use crate::result::{Point, RunResult, StepResult, WorkloadResult};
use crate::workload::compared;

/// The share of the maximum's throughput the second value reaches at least: "nearly as good at
/// lower parallelism and latency" (the IBM paper's second row under each maximum).
pub const NEARLY: f64 = 0.9;

/// The second value of a worker ramp: the step with the fewest outstanding I/Os (then the
/// lowest latency) that reaches [`NEARLY`] of the maximum's throughput at a lower mean latency.
/// None where the maximum is the only such step, or for a rate ramp (whose steps are rates).
pub fn near_maximum(w: &WorkloadResult) -> Option<Point> {
    let max = w.maximum?;
    if w.steps.iter().any(|s| s.rate.is_some()) {
        return None;
    }
    let seq = w.kind == "sequential";
    let top = w.steps.get(max.step)?;
    let floor = top.throughput(seq) * NEARLY;
    let near = compared(&w.steps)
        .steps
        .into_iter()
        .filter(|&i| i != max.step)
        .filter(|&i| {
            let s = &w.steps[i];
            s.outstanding < top.outstanding && s.throughput(seq) >= floor && s.lat_us.mean < top.lat_us.mean
        })
        .min_by(|&a, &b| {
            let (sa, sb) = (&w.steps[a], &w.steps[b]);
            sa.outstanding.cmp(&sb.outstanding).then(sa.lat_us.mean.total_cmp(&sb.lat_us.mean))
        })?;
    Some(crate::workload::point(&w.steps, near))
}

/// What the first column of a summary calls a workload's first point: `speed` only where it is
/// a step of one worker (per host), as the seeds define it; a ramp that starts higher has a
/// `lowest step`, a rate ramp a `lowest rate`.
pub fn speed_name(w: &WorkloadResult) -> &'static str {
    match w.speed.and_then(|p| w.steps.get(p.step)) {
        Some(s) if s.rate.is_some() => "lowest rate",
        Some(s) if s.workers == 1 => "speed",
        Some(_) => "lowest step",
        None => "speed",
    }
}

/// Whether a workload measured its targets' cache only (a frontend working set): its figures
/// are not for sizing (the HP paper's warning).
pub fn cache_only(w: &WorkloadResult) -> bool {
    w.working_set == "frontend"
}

/// The words that go with a cache-only figure wherever it is shown.
pub const CACHE_ONLY: &str = "cache-only, not for sizing";

/// The SLA maximum to quote for a workload: its own, or the open-loop answer of the rate ramp
/// its closed-loop answer names (`sla_answer.follows`), with that workload's name.
pub fn sla_quote<'a>(r: &'a RunResult, w: &'a WorkloadResult) -> Option<(Point, &'a WorkloadResult)> {
    if let Some(name) = w.sla_answer.as_ref().and_then(|a| a.follows.as_ref())
        && let Some(open) = r.workloads.iter().find(|o| &o.name == name)
        && let Some(p) = open.sla_maximum
    {
        return Some((p, open));
    }
    w.sla_maximum.map(|p| (p, w))
}

/// How much of its targets a step moved: bytes read, written and trimmed over the working
/// set's size (a backend's: the targets' whole size), and, for a uniform random or sequential
/// workload, the share of blocks that were touched at least once.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Coverage {
    /// Bytes moved ÷ target size, in percent (may exceed 100: blocks moved more than once).
    pub moved_pct: f64,
    /// The share of the target's blocks touched at least once, in percent: sequential passes
    /// touch each block once (up to 100 %), uniform random offsets `1 − e^(−moved)` of them
    /// (a Poisson estimate). None for skewed access, whose share depends on its hot region.
    pub touched_pct: Option<f64>,
    /// The working set's size, bytes.
    pub size: u64,
}

impl Coverage {
    /// `moved 0.35 × the targets' 64 GiB (≈ 30 % of the blocks touched)`.
    pub fn describe(&self) -> String {
        let touched = match self.touched_pct {
            Some(t) if t < 1.0 => format!(" (≈ {t:.1} % of its blocks touched)"),
            Some(t) => format!(" (≈ {t:.0} % of its blocks touched)"),
            None => " (skewed access: how many blocks it touched depends on its hot region)".into(),
        };
        let x = self.moved_pct / 100.0;
        let times = if x < 10.0 { format!("{x:.2}") } else { format!("{x:.0}") };
        format!("moved {times} × the targets' {}{touched}", crate::format::size(self.size))
    }
}

/// A backend step's coverage (None for a frontend or range working set, or targets of unknown
/// size). The targets are the step's own where it names them, else the run's.
pub fn coverage(r: &RunResult, w: &WorkloadResult, s: &StepResult) -> Option<Coverage> {
    if w.working_set != "backend" {
        return None;
    }
    let own: Option<u64> = (!s.targets.is_empty())
        .then(|| {
            s.targets.iter().map(|t| r.targets.iter().find(|i| i.path == t.target).map(|i| i.size)).sum::<Option<u64>>()
        })
        .flatten();
    let size = own.unwrap_or_else(|| r.targets.iter().map(|t| t.size).sum());
    if size == 0 {
        return None;
    }
    let moved = (s.read.bytes + s.write.bytes + s.trim.bytes) as f64 / size as f64;
    let touched = if w.kind == "sequential" {
        Some(moved.min(1.0) * 100.0)
    } else if w.shape.is_empty() || !w.shape.contains("distribution") {
        Some((1.0 - (-moved).exp()) * 100.0)
    } else {
        None
    };
    Some(Coverage { moved_pct: moved * 100.0, touched_pct: touched, size })
}

/// Workloads that differ only in block size and read share, laid out as a matrix: a row per
/// block size (smallest first), a column per read share (reads first).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Matrix {
    /// What its workloads share: `random, backend, qd 1`.
    pub title: String,
    pub sequential: bool,
    /// The block sizes of its rows (`4k`), and their bytes.
    pub block_sizes: Vec<(String, u64)>,
    /// The read shares of its columns, in percent, highest first.
    pub read_shares: Vec<f64>,
    /// `cells[row][column]`: the index of the workload in the run's `workloads`.
    pub cells: Vec<Vec<Option<usize>>>,
}

impl Matrix {
    /// A column's name: `read`, `write`, `70 % read`.
    pub fn share_name(pct: f64) -> String {
        if pct >= 100.0 {
            "read".into()
        } else if pct <= 0.0 {
            "write".into()
        } else {
            format!("{pct} % read")
        }
    }
}

/// What the workloads of one matrix share: everything but block size and read share.
#[derive(PartialEq)]
struct Shared<'a> {
    kind: &'a str,
    working_set: &'a str,
    queue_depth: u32,
    shape: &'a str,
    backend: &'a str,
}

/// A workload of a matrix: its index in the run, block size in bytes, read share.
type Cell = (usize, u64, f64);

/// The matrices of a run: workloads of one pattern, working set, queue depth, shape and back-end
/// over at least two block sizes or two read shares. Worker ramps of one block size only (a
/// weighted mix, a rate ramp, a grid, a host-count sweep, a concurrent step or a workload that
/// trims is no cell); the first of two workloads with the same cell keeps it.
pub fn matrices(r: &RunResult) -> Vec<Matrix> {
    let mut groups: Vec<(Shared, Vec<Cell>)> = Vec::new();
    for (i, w) in r.workloads.iter().enumerate() {
        let plain = w.members.is_empty()
            && w.grid.is_none()
            && w.host_sweep.is_none()
            && w.trim_pct == 0.0
            && !w.steps.is_empty()
            && !w.steps.iter().any(|s| s.rate.is_some())
            && !w.ramps_queue_depth();
        let Some(bytes) = plain.then(|| iocurve_plan::parse_size(&w.bs).ok()).flatten() else { continue };
        let shared = Shared {
            kind: &w.kind,
            working_set: &w.working_set,
            queue_depth: w.queue_depth,
            shape: &w.shape,
            backend: &w.backend,
        };
        match groups.iter_mut().find(|(s, _)| *s == shared) {
            Some((_, cells)) => cells.push((i, bytes, w.read_pct)),
            None => groups.push((shared, vec![(i, bytes, w.read_pct)])),
        }
    }
    groups
        .into_iter()
        .filter_map(|(shared, cells)| {
            let mut sizes: Vec<u64> = cells.iter().map(|c| c.1).collect();
            sizes.sort_unstable();
            sizes.dedup();
            let mut shares: Vec<f64> = cells.iter().map(|c| c.2).collect();
            shares.sort_by(|a, b| b.total_cmp(a));
            shares.dedup();
            if sizes.len() < 2 && shares.len() < 2 {
                return None;
            }
            let mut grid = vec![vec![None; shares.len()]; sizes.len()];
            for (i, bytes, pct) in cells {
                let row = sizes.iter().position(|&b| b == bytes)?;
                let col = shares.iter().position(|&p| p == pct)?;
                grid[row][col].get_or_insert(i);
            }
            let shape = if shared.shape.is_empty() { String::new() } else { format!(", {}", shared.shape) };
            Some(Matrix {
                title: format!(
                    "{}, {}, qd {}{shape}, {}",
                    shared.kind, shared.working_set, shared.queue_depth, shared.backend
                ),
                sequential: shared.kind == "sequential",
                block_sizes: sizes.iter().map(|&b| (iocurve_plan::format_size(b), b)).collect(),
                read_shares: shares,
                cells: grid,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::{run, workload};

    /// Steps of 1, 2, 4 … workers with the given (IOPS, mean µs), built through the real
    /// analysis.
    fn steps(v: &[(f64, f64)]) -> Vec<StepResult> {
        use iocurve_stats::{CpuUsage, IntervalStats, StepRecord};
        v.iter()
            .enumerate()
            .map(|(i, &(iops, mean))| {
                let mut st = IntervalStats::with_samples(1);
                st.read.record(1000, 4096);
                let mut rec = StepRecord::new(1 << i, 1, 1, 1.0, 1.0);
                rec.push_interval(st, CpuUsage::default(), 1.0);
                let mut s = crate::analyze_step(&rec, false, &crate::Thresholds::default());
                (s.iops, s.lat_us.mean) = (iops, mean);
                s
            })
            .collect()
    }

    /// The IBM paper's second value: 64 workers give 1.00 M IOPS at 900 µs, 16 give 0.93 M at
    /// 420 µs — nearly as good at a quarter of the parallelism and half the latency. 8 workers
    /// (0.85 M) fall short of 90 %.
    #[test]
    fn the_second_value_is_the_fewest_workers_within_90_percent_at_lower_latency() {
        let mut w = workload("w", "random", (0.0, 0.0, 0.0));
        w.steps = steps(&[
            (100_000.0, 100.0),
            (200_000.0, 110.0),
            (400_000.0, 120.0),
            (850_000.0, 150.0),
            (930_000.0, 420.0),
            (960_000.0, 600.0),
            (1_000_000.0, 900.0),
        ]);
        w.maximum = Some(crate::workload::point(&w.steps, 6));
        let near = near_maximum(&w).unwrap();
        assert_eq!((near.step, near.workers, near.iops, near.lat_us), (4, 16, 930_000.0, 420.0));
        // At exactly 90 % it still counts; the maximum alone has none.
        w.steps[3].iops = 900_000.0;
        assert_eq!(near_maximum(&w).unwrap().workers, 8);
        w.steps.truncate(1);
        w.maximum = Some(crate::workload::point(&w.steps, 0));
        assert_eq!(near_maximum(&w), None);
    }

    #[test]
    fn speed_is_said_only_for_a_step_of_one_worker() {
        let mut w = workload("w", "random", (0.0, 0.0, 0.0));
        w.steps = steps(&[(1000.0, 100.0), (1900.0, 105.0)]);
        w.speed = Some(crate::workload::point(&w.steps, 0));
        assert_eq!(speed_name(&w), "speed");
        w.speed = Some(crate::workload::point(&w.steps, 1));
        assert_eq!(speed_name(&w), "lowest step");
    }

    /// A 64 GiB backend target after 16 GiB of uniform random 4k reads: 0.25 × moved, about
    /// 22 % of the blocks touched (1 − e^−0.25); sequential: 25 %; a frontend: none.
    #[test]
    fn coverage_is_bytes_moved_over_the_targets_size() {
        let mut w = workload("w", "random", (0.0, 0.0, 0.0));
        w.steps = steps(&[(1000.0, 100.0)]);
        w.steps[0].read.bytes = 16 << 30;
        let mut r = run(vec![w.clone()]);
        r.targets = vec![crate::result::TargetInfo {
            path: "/dev/sdb".into(),
            kind: "block device".into(),
            size: 64 << 30,
            logical_block: 512,
            group: "default".into(),
            scratch: false,
            preconditioned_at: None,
            lun: None,
            device: None,
        }];
        let c = coverage(&r, &w, &w.steps[0]).unwrap();
        assert_eq!(c.moved_pct, 25.0);
        assert!((c.touched_pct.unwrap() - 22.12).abs() < 0.01, "{c:?}");
        assert_eq!(c.describe(), "moved 0.25 × the targets' 64 GiB (≈ 22 % of its blocks touched)");
        w.kind = "sequential".into();
        assert_eq!(coverage(&r, &w, &w.steps[0]).unwrap().touched_pct, Some(25.0));
        w.shape = "distribution zipf:1.2".into();
        w.kind = "random".into();
        assert_eq!(coverage(&r, &w, &w.steps[0]).unwrap().touched_pct, None);
        w.working_set = "frontend".into();
        assert_eq!(coverage(&r, &w, &w.steps[0]), None);
    }

    /// The blocksize-sweep suite's shape: random 4k and 8k at 100, 70 and 0 % reads, a
    /// sequential 1m read apart (another pattern), a weighted mix left out.
    #[test]
    fn workloads_that_differ_in_block_size_and_read_share_make_a_matrix() {
        let mut ws = Vec::new();
        for (bs, read) in
            [("8k", 100.0), ("4k", 100.0), ("4k", 70.0), ("4k", 0.0), ("8k", 0.0), ("4k:70,64k:30", 100.0)]
        {
            let mut w = workload(&format!("{bs}-{read}"), "random", (1.0, 1.0, 1.0));
            (w.bs, w.read_pct) = (bs.into(), read);
            w.steps = steps(&[(1000.0, 100.0)]);
            ws.push(w);
        }
        let mut seq = workload("seq", "sequential", (1.0, 1.0, 1.0));
        (seq.bs, seq.steps) = ("1m".into(), steps(&[(1000.0, 100.0)]));
        ws.push(seq);
        let m = matrices(&run(ws));
        assert_eq!(m.len(), 1, "{m:?}");
        let m = &m[0];
        assert_eq!(m.title, "random, backend, qd 1, io_uring");
        assert_eq!(m.block_sizes, vec![("4k".to_string(), 4096), ("8k".to_string(), 8192)]);
        assert_eq!(m.read_shares, vec![100.0, 70.0, 0.0]);
        assert_eq!(m.cells, vec![vec![Some(1), Some(2), Some(3)], vec![Some(0), None, Some(4)]]);
        assert_eq!(Matrix::share_name(70.0), "70 % read");
    }
}
