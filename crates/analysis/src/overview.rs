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

/// The SLA maximum to quote for a workload, and whose it is.
#[derive(Debug, Clone, Copy)]
pub struct SlaQuote<'a> {
    pub point: Point,
    /// The workload whose answer it is: this one, or the rate ramp its closed loop names.
    pub from: &'a WorkloadResult,
    /// Open loop (to quote); closed loop is an upper bound.
    pub open_loop: bool,
}

/// The SLA maximum to quote for a workload: the open-loop answer of the rate ramp its
/// closed-loop answer names (`sla_answer.follows`), else its own (a closed loop's an upper bound).
pub fn sla_quote<'a>(r: &'a RunResult, w: &'a WorkloadResult) -> Option<SlaQuote<'a>> {
    if let Some(name) = w.sla_answer.as_ref().and_then(|a| a.follows.as_ref())
        && let Some(open) = r.workloads.iter().find(|o| &o.name == name)
        && let Some(p) = open.sla_maximum
    {
        return Some(SlaQuote { point: p, from: open, open_loop: true });
    }
    let open_loop = w.sla_answer.as_ref().is_some_and(|a| a.open_loop) || w.steps.iter().any(|s| s.rate.is_some());
    w.sla_maximum.map(|p| SlaQuote { point: p, from: w, open_loop })
}

/// The size of a set of targets, each LUN once: paths of one LUN (multipath nodes, or several
/// agents' paths to a shared LUN) are one LUN's size, not one each.
pub fn targets_size<'a>(targets: impl IntoIterator<Item = &'a crate::result::TargetInfo>) -> u64 {
    let mut seen: Vec<&str> = Vec::new();
    let mut size = 0;
    for t in targets {
        let id = t.lun.as_deref().unwrap_or(&t.path);
        if !seen.contains(&id) {
            seen.push(id);
            size += t.size;
        }
    }
    size
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
    let own: Option<Vec<&crate::result::TargetInfo>> = (!s.targets.is_empty())
        .then(|| s.targets.iter().map(|t| r.targets.iter().find(|i| i.path == t.target)).collect::<Option<Vec<_>>>())
        .flatten();
    let size = match own {
        Some(own) => targets_size(own),
        None => targets_size(&r.targets),
    };
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
    /// Workloads of an occupied cell, in words.
    pub left_out: Vec<String>,
}

impl Matrix {
    /// A column's name: `read`, `write`, `70 % read`.
    pub fn share_name(pct: f64) -> String {
        if pct >= 100.0 {
            "read".into()
        } else if pct <= 0.0 {
            "write".into()
        } else {
            format!("{} % read", (pct * 10.0).round() / 10.0)
        }
    }
}

/// What the workloads of one matrix share: their settings but read share and block size (and,
/// for a read-only workload, the data it would write: it writes none).
fn shared_settings(w: &WorkloadResult) -> (String, Option<String>) {
    if !w.settings.known() {
        // Documents written before workloads kept their settings: what the result says.
        return (format!("{}, {}, qd {}, {}, {}", w.kind, w.working_set, w.queue_depth, w.shape, w.backend), None);
    }
    let mut data = None;
    let mut rest = Vec::new();
    for (i, term) in w.settings.access.split(", ").enumerate() {
        if term.starts_with("data ") {
            // A dedupe unit of the block size (the default) follows the block size, as the
            // rows do: it is no difference between two cells.
            let own = iocurve_plan::parse_size(&w.bs).map(|b| format!(" unit {b} ")).unwrap_or_default();
            data = Some(term.replacen(&own, " unit BS ", 1));
        } else if i != 1 {
            rest.push(term);
        }
    }
    (format!("{}, qd {}, {}", rest.join(", "), w.settings.queue_depth, w.backend), data)
}

/// A workload that can be a cell: a worker ramp of one block size that neither trims nor runs in
/// a concurrent step (nor is one), no grid or host-count sweep; its block size in bytes.
fn cell_bytes(w: &WorkloadResult) -> Option<u64> {
    let plain = w.members.is_empty()
        && !w.settings.access.contains("in concurrent step")
        && w.grid.is_none()
        && w.host_sweep.is_none()
        && w.trim_pct == 0.0
        && !w.steps.is_empty()
        && !w.steps.iter().any(|s| s.rate.is_some())
        && !w.ramps_queue_depth();
    plain.then(|| iocurve_plan::parse_size(&w.bs).ok()).flatten()
}

/// A workload of a matrix: its index in the run, block size in bytes, read share.
type Cell = (usize, u64, f64);

/// The matrices of a run: workloads whose settings differ in nothing but block size and read
/// share (worker ramps of one block size: a weighted mix, a rate ramp, a grid, a host-count
/// sweep, a concurrent step or a workload that trims is no cell), over at least two block sizes
/// or two read shares. Writing workloads of another data pattern make a matrix of their own (a
/// read-only workload, which writes nothing, is in each); a second workload of an occupied cell
/// is named in `left_out`.
pub fn matrices(r: &RunResult) -> Vec<Matrix> {
    // (what they share, the data they write, their cells)
    let mut groups: Vec<(String, Option<String>, Vec<Cell>)> = Vec::new();
    let mut reads: Vec<(String, Cell)> = Vec::new();
    for (i, w) in r.workloads.iter().enumerate() {
        let Some(bytes) = cell_bytes(w) else { continue };
        let (key, data) = shared_settings(w);
        if data.is_none() && w.read_pct >= 100.0 {
            reads.push((key, (i, bytes, w.read_pct)));
            continue;
        }
        match groups.iter_mut().find(|(k, d, _)| *k == key && *d == data) {
            Some((_, _, cells)) => cells.push((i, bytes, w.read_pct)),
            None => groups.push((key, data, vec![(i, bytes, w.read_pct)])),
        }
    }
    for (key, cell) in reads {
        let mut joined = false;
        for (_, _, cells) in groups.iter_mut().filter(|(k, _, _)| *k == key) {
            cells.push(cell);
            joined = true;
        }
        if !joined {
            match groups.iter_mut().find(|(k, d, _)| *k == key && d.is_none()) {
                Some((_, _, cells)) => cells.push(cell),
                None => groups.push((key, None, vec![cell])),
            }
        }
    }
    groups.into_iter().filter_map(|(_, _, mut cells)| matrix(r, &mut cells)).collect()
}

fn matrix(r: &RunResult, cells: &mut [Cell]) -> Option<Matrix> {
    // In the run's order: the first of two workloads of one cell keeps it.
    cells.sort_by_key(|c| c.0);
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
    let mut left_out = Vec::new();
    for &(i, bytes, pct) in cells.iter() {
        let row = sizes.iter().position(|&b| b == bytes)?;
        let col = shares.iter().position(|&p| p == pct)?;
        match grid[row][col] {
            None => grid[row][col] = Some(i),
            Some(k) => left_out.push(format!(
                "{} is left out: {} × {} is {}'s",
                r.workloads[i].name,
                iocurve_plan::format_size(bytes),
                Matrix::share_name(pct),
                r.workloads[k].name
            )),
        }
    }
    let first = &r.workloads[cells[0].0];
    let shape = if first.shape.is_empty() { String::new() } else { format!(", {}", first.shape) };
    Some(Matrix {
        title: format!("{}, {}, qd {}{shape}, {}", first.kind, first.working_set, first.queue_depth, first.backend),
        sequential: first.kind == "sequential",
        block_sizes: sizes.iter().map(|&b| (iocurve_plan::format_size(b), b)).collect(),
        read_shares: shares,
        cells: grid,
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::{run, workload};

    /// Steps of 1, 2, 4 … workers with the given (IOPS, mean µs), built through the real
    /// analysis (the workload tests' steps, p99 at the mean).
    fn steps(v: &[(f64, f64)]) -> Vec<StepResult> {
        crate::workload::tests::steps(&v.iter().map(|&(iops, mean)| (iops, mean, mean)).collect::<Vec<_>>())
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

    /// Settings as `Settings::of` words them: the read share second, the data a writer writes.
    fn settings(w: &mut WorkloadResult, extra: &str) {
        let unit = iocurve_plan::parse_size(&w.bs).unwrap_or(0);
        let data = if w.read_pct < 100.0 {
            format!(", data compress 1 dedupe 1 unit {unit} constant false")
        } else {
            String::new()
        };
        w.settings = crate::result::Settings {
            access: format!("random, {} % read, backend{data}{extra}, worker ramp", w.read_pct),
            bs: w.bs.clone(),
            queue_depth: 1,
        };
    }

    /// The blocksize-sweep suite's shape: random 4k and 8k at 100, 70 and 0 % reads, a
    /// sequential 1m read apart (another pattern), a weighted mix left out; a second 4k write
    /// of other data makes a matrix of its own (with the reads, which write nothing); a
    /// concurrent step's member is no cell; a second workload of one cell is named.
    #[test]
    fn workloads_that_differ_in_block_size_and_read_share_make_a_matrix() {
        let mut ws = Vec::new();
        for (bs, read) in
            [("8k", 100.0), ("4k", 100.0), ("4k", 70.0), ("4k", 0.0), ("8k", 0.0), ("4k:70,64k:30", 100.0)]
        {
            let mut w = workload(&format!("{bs}-{read}"), "random", (1.0, 1.0, 1.0));
            (w.bs, w.read_pct) = (bs.into(), read);
            w.steps = steps(&[(1000.0, 100.0)]);
            settings(&mut w, "");
            ws.push(w);
        }
        let mut seq = workload("seq", "sequential", (1.0, 1.0, 1.0));
        (seq.bs, seq.steps) = ("1m".into(), steps(&[(1000.0, 100.0)]));
        settings(&mut seq, "");
        seq.settings.access = seq.settings.access.replace("random", "sequential");
        ws.push(seq);
        let mut member = ws[4].clone();
        member.name = "8k-member".into();
        settings(&mut member, ", in concurrent step g at share 1");
        ws.push(member);
        let mut again = ws[3].clone();
        again.name = "4k-0-again".into();
        ws.push(again);
        let mut other = ws[3].clone();
        other.name = "4k-0-compressible".into();
        other.settings.access = other.settings.access.replace("compress 1", "compress 2");
        ws.push(other);
        let m = matrices(&run(ws));
        assert_eq!(m.len(), 2, "{m:?}");
        let (a, b) = (&m[0], &m[1]);
        assert_eq!(a.title, "random, backend, qd 1, io_uring");
        assert_eq!(a.block_sizes, vec![("4k".to_string(), 4096), ("8k".to_string(), 8192)]);
        assert_eq!(a.read_shares, vec![100.0, 70.0, 0.0]);
        assert_eq!(a.cells, vec![vec![Some(1), Some(2), Some(3)], vec![Some(0), None, Some(4)]]);
        assert_eq!(a.left_out, vec!["4k-0-again is left out: 4k × write is 4k-0's".to_string()]);
        // Other data: the compressible write with the reads.
        assert_eq!(b.read_shares, vec![100.0, 0.0]);
        assert_eq!(b.cells, vec![vec![Some(1), Some(9)], vec![Some(0), None]]);
        assert_eq!(Matrix::share_name(70.0), "70 % read");
        assert_eq!(Matrix::share_name(200.0 / 3.0), "66.7 % read");
    }

    /// The second value is a worker step's: none for a rate ramp, and a step that lost a host
    /// (not like with like) is never it.
    #[test]
    fn the_second_value_leaves_out_rate_steps_and_steps_that_lost_a_host() {
        let mut w = workload("w", "random", (0.0, 0.0, 0.0));
        w.steps = steps(&[(100_000.0, 100.0), (950_000.0, 300.0), (1_000_000.0, 900.0)]);
        w.maximum = Some(crate::workload::point(&w.steps, 2));
        assert_eq!(near_maximum(&w).map(|p| p.step), Some(1));
        w.steps[1].flags.push(crate::result::Flag { code: "host_lost".into(), message: String::new() });
        assert_eq!(near_maximum(&w), None, "a step that lost a host");
        w.steps[1].flags.clear();
        let mut rated = w.clone();
        rated.steps[0].rate = Some(crate::result::RateResult {
            target_iops: 1000.0,
            due: 1000,
            achieved_pct: 100.0,
            dropped: 0,
            backlog: 0,
            service_us: Default::default(),
            lag_us: Default::default(),
            sustained: true,
            replay_speed: None,
            behind: None,
            intended_iops: Vec::new(),
        });
        assert_eq!(near_maximum(&rated), None, "a rate ramp has none");
    }

    /// Two paths of one LUN are its size once.
    #[test]
    fn the_targets_size_counts_each_lun_once() {
        let t = |path: &str, lun: Option<&str>| crate::result::TargetInfo {
            path: path.into(),
            kind: "block device".into(),
            size: 1 << 40,
            logical_block: 512,
            group: "default".into(),
            scratch: false,
            preconditioned_at: None,
            lun: lun.map(str::to_string),
            device: None,
        };
        let ts = [t("a:/dev/sdb", Some("wwn-1")), t("b:/dev/sdc", Some("wwn-1")), t("/dev/sdd", None)];
        assert_eq!(targets_size(&ts), 2 << 40);
    }
}
