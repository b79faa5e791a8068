//! What a tender document opens with (issue 43): the key figures of every workload (the seeds'
//! "Kennzahlen" table), a summary that pastes into a document, the run's parameters and the
//! block size × read share matrices — as cells, shared by the terminal (`show`), the HTML
//! report and the overview export. The figures are the analysis's; this only words them.

use iocurve_analysis::overview::{self, CACHE_ONLY, Matrix};
use iocurve_analysis::{Point, RunResult, WorkloadResult};

use crate::format;
use crate::terminal;

/// The key-figures table's columns.
pub const KEY_HEADERS: [&str; 7] =
    ["workload", "speed (1 worker)", "optimum", "maximum", "nearly as good", "min latency", "SLA maximum"];

/// One workload's key figures, as cells.
pub struct KeyRow<'a> {
    pub workload: &'a WorkloadResult,
    /// The cells under [`KEY_HEADERS`].
    pub cells: [String; 7],
    /// A frontend's: [`CACHE_ONLY`].
    pub cache_only: bool,
}

/// A point's cell with what its step is called where that is not the column's: `lowest step:
/// 2'000 IOPS @ 120 µs (2 w)`.
fn speed_cell(w: &WorkloadResult) -> String {
    let seq = w.kind == "sequential";
    match overview::speed_name(w) {
        "speed" => terminal::point_cell(&w.speed, seq),
        other => format!("{other}: {}", terminal::point_cell(&w.speed, seq)),
    }
}

fn maximum_cell(w: &WorkloadResult) -> String {
    // Why, at length, is under the workload's own table: a cell says only that it is.
    match &w.maximum_undecided {
        Some(_) => "undecided (too noisy)".into(),
        None => terminal::point_cell(&w.maximum, w.kind == "sequential"),
    }
}

fn sla_cell(r: &RunResult, w: &WorkloadResult) -> String {
    match overview::sla_quote(r, w) {
        Some(q) => sla_words(w, &q),
        None => match &w.sla_maximum_undecided {
            Some(_) => "undecided (too noisy)".into(),
            None => "—".into(),
        },
    }
}

/// An SLA maximum with whose answer it is: `… (open loop: NAME)`, `… (open loop)`, or a closed
/// loop's `… (closed loop: an upper bound)` — never a closed-loop figure as the answer.
fn sla_words(w: &WorkloadResult, q: &overview::SlaQuote) -> String {
    let cell = terminal::point_cell(&Some(q.point), w.kind == "sequential");
    if q.from.name != w.name {
        format!("{cell} (open loop: {})", q.from.name)
    } else if q.open_loop {
        format!("{cell} (open loop)")
    } else {
        format!("{cell} (closed loop: an upper bound)")
    }
}

fn near_cell(w: &WorkloadResult) -> String {
    terminal::point_cell(&overview::near_maximum(w), w.kind == "sequential")
}

fn min_lat_cell(w: &WorkloadResult) -> String {
    w.min_lat_us.map_or_else(|| "—".into(), format::latency)
}

/// Every workload with steps: its speed, optimum, maximum, the second value, min latency and
/// SLA maximum (the open-loop answer where one ran).
pub fn key_rows(r: &RunResult) -> Vec<KeyRow<'_>> {
    r.workloads
        .iter()
        .filter(|w| !w.steps.is_empty())
        .map(|w| KeyRow {
            workload: w,
            cells: [
                w.name.clone(),
                speed_cell(w),
                terminal::point_cell(&w.optimum, w.kind == "sequential"),
                maximum_cell(w),
                near_cell(w),
                min_lat_cell(w),
                sla_cell(r, w),
            ],
            cache_only: overview::cache_only(w),
        })
        .collect()
}

/// `1–512 workers (10 steps)`, `rates 10'000–80'000 IOPS (8 steps)`.
fn ramp_words(w: &serde_json::Value) -> Option<String> {
    let list = |k: &str| -> Vec<f64> {
        w[k].as_array().map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect()).unwrap_or_default()
    };
    let (rates, workers, depths) = (list("rate"), list("ramp"), list("qd_ramp"));
    let span = |v: &[f64], unit: &str| match v {
        [] => None,
        [one] => Some(format!("{} {unit}", format::group(*one as u64))),
        [first, .., last] => {
            Some(format!("{}–{} {unit} ({} steps)", format::group(*first as u64), format::group(*last as u64), v.len()))
        }
    };
    let mut parts: Vec<String> = Vec::new();
    // A replay's steps are its speeds, each as long as its trace (found by an outside test: the
    // overview said "1–32 workers (6 steps)" of a replay).
    if let Some(trace) = w["replay"].as_str() {
        let speeds = list("replay_speed");
        let speeds = if speeds.is_empty() { vec![1.0] } else { speeds };
        let each: Vec<String> = speeds.iter().map(|s| format!("{}×", format::speed(*s))).collect();
        let steps = if speeds.len() == 1 { "1 step".to_string() } else { format!("{} steps", speeds.len()) };
        return Some(format!(
            "replay of {trace} at {} ({steps}), each as long as the trace at its speed",
            each.join(", ")
        ));
    }
    if !rates.is_empty() {
        // A sequential workload's rates are MB/s.
        let unit = if w["pattern"] == "sequential" { "MB/s target rates" } else { "IOPS target rates" };
        parts.extend(span(&rates, unit));
    } else {
        parts.extend(span(&workers, "workers"));
        if depths.len() > 1 {
            parts.extend(span(&depths, "outstanding I/Os per worker"));
        }
    }
    let timing = match (w["warmup_s"].as_f64(), w["intervals"].as_u64(), w["interval_s"].as_f64()) {
        (Some(warm), Some(n), Some(t)) => Some(format!("{warm} s warm-up, {n} × {t} s measured per step")),
        _ => None,
    };
    parts.extend(timing);
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// The run's parameters a reader needs beside its figures: (what, value).
pub fn parameters(r: &RunResult, plan: &str) -> Vec<(String, String)> {
    let mut out = vec![("plan".to_string(), plan.to_string())];
    let f = &r.host.facts;
    let hosts = if r.host.agents.is_empty() {
        format!("{} ({}, {} cores, kernel {}{})", f.hostname, f.cpu_model, f.cores, f.kernel, f.cpu_extras())
    } else {
        format!("{} agents, coordinated from {}", r.host.agents.len(), f.hostname)
    };
    out.push(("hosts".into(), hosts));
    out.push(("back-end".into(), r.host.backend.clone()));
    let size = overview::targets_size(&r.targets);
    out.push((
        "targets".into(),
        format!(
            "{} target{}, {} in all: {}",
            r.targets.len(),
            if r.targets.len() == 1 { "" } else { "s" },
            format::size(size),
            r.targets.iter().map(|t| t.path.as_str()).collect::<Vec<_>>().join(", ")
        ),
    ));
    // Each distinct ramp and timing, with how many workloads ran it.
    let mut ramps: Vec<(String, usize)> = Vec::new();
    for w in r.plan["workloads"].as_array().into_iter().flatten() {
        if let Some(words) = ramp_words(w) {
            match ramps.iter_mut().find(|(k, _)| *k == words) {
                Some((_, n)) => *n += 1,
                None => ramps.push((words, 1)),
            }
        }
    }
    let one = ramps.len() == 1;
    for (words, n) in ramps {
        let who = if one { String::new() } else { format!(" ({n} workload{})", if n == 1 { "" } else { "s" }) };
        out.push(("ramp".into(), format!("{words}{who}")));
    }
    if let Some(s) = r.sla {
        out.push(("SLA".into(), s.describe()));
    }
    out.push(("started".into(), r.started_at.clone()));
    out.push(("tool".into(), format!("iocurve {}", r.tool_version)));
    out
}

/// The summary that pastes into a document: an opening sentence, a line per workload, and the
/// frontend's caveat where there is one.
pub struct SummaryBlock {
    pub opening: String,
    pub lines: Vec<String>,
    pub closing: Option<String>,
}

impl SummaryBlock {
    /// As plain text: the opening, a `- ` line per workload, the closing.
    pub fn text(&self) -> String {
        let mut out = self.opening.clone();
        for l in &self.lines {
            out.push_str("\n- ");
            out.push_str(l);
        }
        if let Some(c) = &self.closing {
            out.push('\n');
            out.push_str(c);
        }
        out
    }
}

fn at(p: &Option<Point>, seq: bool) -> Option<String> {
    p.map(|p| terminal::point_cell(&Some(p), seq))
}

pub fn summary_block(title: &str, r: &RunResult) -> SummaryBlock {
    let measured: Vec<&WorkloadResult> = r.workloads.iter().filter(|w| !w.steps.is_empty()).collect();
    let f = &r.host.facts;
    let on = if r.host.agents.is_empty() {
        format!("on {} ({} cores)", f.hostname, f.cores)
    } else {
        format!("from {} hosts", r.host.agents.len())
    };
    let size = overview::targets_size(&r.targets);
    let opening = format!(
        "iocurve {} measured {title} {on}, back-end {}, on {} target{} ({}): {} workload{}{}.",
        r.tool_version,
        r.host.backend,
        r.targets.len(),
        if r.targets.len() == 1 { "" } else { "s" },
        format::size(size),
        measured.len(),
        if measured.len() == 1 { "" } else { "s" },
        if r.interrupted { ", the run stopped early (the figures cover the finished intervals)" } else { "" }
    );
    let lines = measured
        .iter()
        .map(|w| {
            let seq = w.kind == "sequential";
            let mut parts = Vec::new();
            match (&w.maximum_undecided, at(&w.maximum, seq)) {
                (Some(_), _) => parts.push("maximum undecided (too noisy)".to_string()),
                (None, Some(m)) => parts.push(format!("maximum {m}")),
                (None, None) => {}
            }
            if let Some(near) = at(&overview::near_maximum(w), seq) {
                parts.push(format!("nearly as good {near}"));
            }
            parts.extend(at(&w.optimum, seq).map(|o| format!("optimum {o}")));
            parts.extend(w.min_lat_us.map(|m| format!("lowest latency {}", format::latency(m))));
            if let Some(q) = overview::sla_quote(r, w) {
                parts.push(format!("within the SLA {}", sla_words(w, &q)));
            }
            if parts.is_empty() {
                parts.push("no figure: none of its steps can be compared (its notes say why)".into());
            }
            let cache = if overview::cache_only(w) { format!(" [{CACHE_ONLY}]") } else { String::new() };
            format!("{}{cache}: {}", w.name, parts.join("; "))
        })
        .collect();
    let closing = measured.iter().any(|w| overview::cache_only(w)).then(|| {
        "Frontend figures come from a few blocks per target that the array serves from its cache: cache-only, not for sizing.".to_string()
    });
    SummaryBlock { opening, lines, closing }
}

/// One measure of a matrix as cells: the header (block size, then the read shares) and a row
/// per block size.
pub struct MatrixTable {
    pub what: &'static str,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

/// A matrix's cell from its workload.
type Measure = Box<dyn Fn(&WorkloadResult) -> String>;

/// The measures of a matrix, each a table: maximum, nearly as good, optimum, min latency.
pub fn matrix_tables(r: &RunResult, m: &Matrix) -> Vec<MatrixTable> {
    let seq = m.sequential;
    let cell = |f: &dyn Fn(&WorkloadResult) -> String| -> Vec<Vec<String>> {
        m.block_sizes
            .iter()
            .zip(&m.cells)
            .map(|((bs, _), row)| {
                std::iter::once(bs.clone())
                    .chain(row.iter().map(|c| c.map_or_else(|| "—".to_string(), |i| f(&r.workloads[i]))))
                    .collect()
            })
            .collect()
    };
    let header: Vec<String> =
        std::iter::once("block size".to_string()).chain(m.read_shares.iter().map(|&p| Matrix::share_name(p))).collect();
    let measures: [(&'static str, Measure); 4] = [
        ("maximum", Box::new(maximum_cell)),
        ("nearly as good (≥ 90 % of the maximum at fewer outstanding I/Os and a lower latency)", Box::new(near_cell)),
        ("optimum", Box::new(move |w| terminal::point_cell(&w.optimum, seq))),
        ("min latency", Box::new(min_lat_cell)),
    ];
    measures.into_iter().map(|(what, f)| MatrixTable { what, header: header.clone(), rows: cell(&*f) }).collect()
}

/// The overview as `show` prints it first: the summary, the parameters, the key figures and
/// the matrices.
pub fn overview_text(title: &str, plan: &str, r: &RunResult) -> String {
    let mut out = String::from("\nOverview\n");
    out.push_str(&summary_block(title, r).text());
    out.push_str("\n\n");
    for (k, v) in parameters(r, plan) {
        out.push_str(&format!("  {k:<9} {v}\n"));
    }
    let keys = key_rows(r);
    // A frontend's figures say so in a last column, where there are any.
    let note = keys.iter().any(|k| k.cache_only);
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            let mut row = k.cells.to_vec();
            if note {
                row.push(if k.cache_only { format!("frontend: {CACHE_ONLY}") } else { String::new() });
            }
            row
        })
        .collect();
    if !rows.is_empty() {
        let header: Vec<&str> = KEY_HEADERS.iter().copied().chain(note.then_some("note")).collect();
        out.push_str("\nKey figures\n");
        out.push_str(&terminal::table(&header, &rows, |i| (1..7).contains(&i)));
        out.push('\n');
    }
    for m in overview::matrices(r) {
        out.push_str(&format!("\nBlock size × read share: {}\n", m.title));
        // A measure no cell has (no second value anywhere) is left out.
        for t in matrix_tables(r, &m).into_iter().filter(|t| t.rows.iter().any(|row| row[1..].iter().any(|c| c != "—")))
        {
            out.push_str(&format!("{}\n", t.what));
            let header: Vec<&str> = t.header.iter().map(String::as_str).collect();
            out.push_str(&terminal::table(&header, &t.rows, |i| i > 0));
            out.push('\n');
        }
        for l in &m.left_out {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out
}

/// Columns of the overview CSV (`export --format overview`): a row per workload with its key
/// figures as numbers, for a spreadsheet's pivot into block size × read share matrices.
pub const OVERVIEW_COLUMNS: &[&str] = &[
    "run",
    "label",
    "workload",
    "kind",
    "working_set",
    "cache_only",
    "read_pct",
    "bs",
    "bs_bytes",
    "queue_depth",
    "shape",
    "backend",
    "speed_is_one_worker",
    "speed_workers",
    "speed_iops",
    "speed_mb_per_s",
    "speed_lat_us",
    "optimum_workers",
    "optimum_iops",
    "optimum_mb_per_s",
    "optimum_lat_us",
    "maximum_workers",
    "maximum_iops",
    "maximum_mb_per_s",
    "maximum_lat_us",
    "maximum_undecided",
    "near_workers",
    "near_iops",
    "near_mb_per_s",
    "near_lat_us",
    "min_lat_us",
    "sla_workers",
    "sla_iops",
    "sla_mb_per_s",
    "sla_lat_us",
    "sla_open_loop",
    "sla_from",
];

/// The overview as CSV: [`OVERVIEW_COLUMNS`], a row per workload with steps; a point's cells are
/// empty where it has none.
pub fn overview_csv(run: i64, label: &str, r: &RunResult) -> String {
    let point = |p: Option<Point>| -> [String; 4] {
        match p {
            Some(p) => {
                [p.workers.to_string(), format!("{:.1}", p.iops), format!("{:.3}", p.mbps), format!("{:.1}", p.lat_us)]
            }
            None => Default::default(),
        }
    };
    let mut out = OVERVIEW_COLUMNS.join(",");
    out.push('\n');
    for w in r.workloads.iter().filter(|w| !w.steps.is_empty()) {
        let sla = overview::sla_quote(r, w).map(|q| (q.point, q.from, q.open_loop));
        let mut row = vec![
            run.to_string(),
            crate::export::field(label),
            crate::export::field(&w.name),
            w.kind.clone(),
            w.working_set.clone(),
            overview::cache_only(w).to_string(),
            format!("{}", w.read_pct),
            crate::export::field(&w.bs),
            iocurve_plan::parse_size(&w.bs).map(|b| b.to_string()).unwrap_or_default(),
            w.queue_depth.to_string(),
            crate::export::field(&w.shape),
            w.backend.clone(),
            (overview::speed_name(w) == "speed").to_string(),
        ];
        row.extend(point(w.speed));
        row.extend(point(w.optimum));
        row.extend(point(w.maximum));
        row.push(w.maximum_undecided.is_some().to_string());
        row.extend(point(overview::near_maximum(w)));
        row.push(w.min_lat_us.map(|v| format!("{v:.1}")).unwrap_or_default());
        row.extend(point(sla.map(|(p, _, _)| p)));
        row.push(sla.map(|(_, _, open)| open.to_string()).unwrap_or_default());
        row.push(sla.map(|(_, f, _)| crate::export::field(&f.name)).unwrap_or_default());
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}
