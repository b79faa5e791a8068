//! Workers × queue-depth grids and host-count sweeps in the report (issue 41): each grid
//! charted as a queue-depth ramp per worker count, each sweep as a ramp per host count (a
//! series each, its figures those of its line), and a grid drawn as heat maps of throughput and
//! mean latency, the optimum and maximum cells outlined.

use iocurve_analysis::{Axis, Grid, Point, RunResult, StepResult, WorkloadResult};
use serde::Serialize;

use super::{MAXIMUM, OPTIMUM, ReportRun};
use crate::format;

/// The runs as the charts show them: every grid split into its rows, a queue-depth ramp per
/// worker count named `NAME @ 4 workers`, each with the speed, optimum and maximum of its line.
pub(super) fn with_rows(runs: &[ReportRun]) -> Vec<ReportRun> {
    runs.iter()
        .map(|r| ReportRun {
            id: r.id,
            label: r.label.clone(),
            plan: r.plan.clone(),
            status: r.status.clone(),
            result: RunResult { workloads: r.result.workloads.iter().flat_map(rows).collect(), ..r.result.clone() },
        })
        .collect()
}

/// Whether a step is on a line (at its worker count, or its host count).
type OnLine = fn(&StepResult, u32) -> bool;

/// A workload, a grid's rows or a sweep's host counts.
fn rows(w: &WorkloadResult) -> Vec<WorkloadResult> {
    let (lines, on_line, unit): (&[Axis], OnLine, &str) = match (&w.grid, &w.host_sweep) {
        (Some(g), _) => (&g.by_workers, |s, n| s.workers == n, "worker"),
        (None, Some(h)) => (&h.by_hosts, |s, n| s.planned_hosts == n, "host"),
        (None, None) => return vec![w.clone()],
    };
    lines
        .iter()
        .map(|line| {
            let kept: Vec<usize> = (0..w.steps.len()).filter(|&i| on_line(&w.steps[i], line.at)).collect();
            // A point of the line, its index into the row's steps.
            let moved = |p: &Option<Point>| {
                p.and_then(|p| kept.iter().position(|&i| i == p.step).map(|k| Point { step: k, ..p }))
            };
            let at = if line.at == 1 { format!("1 {unit}") } else { format!("{} {unit}s", line.at) };
            WorkloadResult {
                name: format!("{} @ {at}", w.name),
                steps: kept.iter().map(|&i| w.steps[i].clone()).collect(),
                speed: moved(&line.speed),
                optimum: moved(&line.optimum),
                maximum: moved(&line.maximum),
                maximum_undecided: line.maximum_undecided.clone(),
                // The SLA's answer is the whole grid's: in its heat map and the terminal.
                sla_maximum: None,
                sla_maximum_undecided: None,
                sla_answer: None,
                min_lat_us: kept.iter().map(|&i| w.steps[i].lat_us.min).reduce(f64::min),
                grid: None,
                // The line's own: its link ceiling drawn over its throughput.
                host_sweep: w
                    .host_sweep
                    .as_ref()
                    .map(|_| iocurve_analysis::HostSweep { host_counts: vec![line.at], by_hosts: vec![line.clone()] }),
                ..w.clone()
            }
        })
        .collect()
}

/// A step's figure a heat map shows.
type Figure = fn(&StepResult) -> f64;

/// One grid's heat maps.
#[derive(Serialize)]
pub(super) struct HeatMaps {
    pub title: String,
    /// `qd 1`, `qd 2` …
    pub columns: Vec<String>,
    pub maps: Vec<HeatMap>,
    /// The figures along each axis, a line each.
    pub lines: Vec<String>,
}

#[derive(Serialize)]
pub(super) struct HeatMap {
    /// `IOPS`, `mean latency µs`.
    pub what: String,
    /// A row per worker count: its label, then its cells.
    pub rows: Vec<(String, Vec<HeatCell>)>,
}

#[derive(Serialize)]
pub(super) struct HeatCell {
    pub text: String,
    /// Inline style: the cell's shade, and an outline for the optimum (blue) or maximum
    /// (orange) of the whole grid.
    pub style: String,
    /// What the outline marks, for the cell's title.
    pub mark: String,
}

/// Every grid of every run, as heat maps.
pub(super) fn heat_maps(runs: &[ReportRun]) -> Vec<HeatMaps> {
    runs.iter()
        .flat_map(|r| r.result.workloads.iter().map(move |w| (r, w)))
        .filter_map(|(r, w)| {
            let g = w.grid.as_ref()?;
            let title = if runs.len() > 1 { format!("{}: {}", r.title(), w.name) } else { w.name.clone() };
            Some(heat_map(title, w, g))
        })
        .collect()
}

fn heat_map(title: String, w: &WorkloadResult, g: &Grid) -> HeatMaps {
    let seq = w.kind == "sequential";
    let unit = if seq { "MB/s" } else { "IOPS" };
    let throughput: Figure = if seq { |s| s.mbps } else { |s| s.iops };
    // Throughput: the more, the greener; latency: the more, the redder.
    let maps: [(String, Figure, f64); 2] =
        [(unit.to_string(), throughput, 130.0), ("mean latency µs".to_string(), |s| s.lat_us.mean, 0.0)];
    let mark = |i: usize| {
        let opt = w.optimum.is_some_and(|p| p.step == i);
        let max = w.maximum.is_some_and(|p| p.step == i);
        match (opt, max) {
            (true, true) => {
                (format!("outline: 3px solid {MAXIMUM}; box-shadow: inset 0 0 0 3px {OPTIMUM};"), "optimum and maximum")
            }
            (true, false) => (format!("outline: 3px solid {OPTIMUM};"), "optimum"),
            (false, true) => (format!("outline: 3px solid {MAXIMUM};"), "maximum"),
            (false, false) => (String::new(), ""),
        }
    };
    let maps = maps
        .into_iter()
        .map(|(what, value, hue)| {
            // Shades in proportion to the value (0 lightest, the grid's most darkest): a few µs
            // between cells must not look like a cliff.
            let hi = w.steps.iter().filter(|s| s.ops() > 0).map(value).fold(0.0, f64::max);
            let rows = g
                .workers
                .iter()
                .map(|&n| {
                    let cells = g
                        .queue_depths
                        .iter()
                        .map(|&qd| match Grid::cell(&w.steps, n, qd).filter(|&i| w.steps[i].ops() > 0) {
                            None => HeatCell { text: "—".into(), style: String::new(), mark: String::new() },
                            Some(i) => {
                                let v = value(&w.steps[i]);
                                // 95 % light at 0, 55 % at the most of the grid.
                                let share = if hi > 0.0 { v / hi } else { 0.0 };
                                let (outline, marks) = mark(i);
                                HeatCell {
                                    text: if hue > 0.0 { cell_throughput(v, seq) } else { format::lat_us(v) },
                                    style: format!(
                                        "background: hsl({hue}, 60%, {:.0}%); {outline}",
                                        95.0 - 40.0 * share
                                    ),
                                    mark: marks.to_string(),
                                }
                            }
                        })
                        .collect();
                    (if n == 1 { "1 worker".to_string() } else { format!("{n} workers") }, cells)
                })
                .collect();
            HeatMap { what, rows }
        })
        .collect();
    let lines = g
        .by_workers
        .iter()
        .map(|a| line(a, "along the queue depth at", if a.at == 1 { " worker" } else { " workers" }, seq))
        .chain(g.by_queue_depth.iter().map(|a| line(a, "along the workers at qd", "", seq)))
        .collect();
    HeatMaps { title, columns: g.queue_depths.iter().map(|qd| format!("qd {qd}")).collect(), maps, lines }
}

fn cell_throughput(v: f64, seq: bool) -> String {
    if seq { format::mbps_number(v) } else { format::iops(v) }
}

/// `along the queue depth at 4 workers: speed …, optimum …, maximum …`.
fn line(a: &Axis, what: &str, unit: &str, seq: bool) -> String {
    let cell = |p: &Option<Point>| crate::terminal::point_cell(p, seq);
    let maximum = match &a.maximum_undecided {
        Some(u) => format!("undecided ({})", u.reason),
        None => cell(&a.maximum),
    };
    format!("{what} {}{unit}: speed {}, optimum {}, maximum {maximum}", a.at, cell(&a.speed), cell(&a.optimum))
}
