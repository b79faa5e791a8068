//! The terminal summary: one table per workload (a row per step), the speed / optimum /
//! maximum lines and the warnings.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

use iocurve_analysis::{DataCheckRow, HostStepResult, RunResult, StepResult, WorkloadResult};
use iocurve_plan::format_size;

use crate::format::{self, headline};

/// The width tables are fitted to: a terminal's columns, 0 for none (a pipe or a file gets
/// whole rows, as tools reading them expect).
static WIDTH: AtomicUsize = AtomicUsize::new(0);

/// Tables drawn without box characters ([`plain_tables`]).
static PLAIN: AtomicBool = AtomicBool::new(false);

/// Fits the tables made from now on to `columns` characters (the terminal's width; 0: none).
pub fn fit_tables_to(columns: usize) {
    WIDTH.store(columns, Ordering::Relaxed);
}

/// Tables made from now on are plain text (stdout is a pipe or a file: issue 37, finding 7,
/// `iocurve runs | awk '{print $1}'` gave `│`): a header line and a line per row, columns
/// aligned with spaces and at least two between them, a cell never holding two spaces in a
/// row, whole rows however wide. Scripts may rely on it; `--json` is the format for programs.
pub fn plain_tables(on: bool) {
    PLAIN.store(on, Ordering::Relaxed);
}

/// A table of `header` and `rows`, the columns `right` says right-aligned, fitted to the width
/// [`fit_tables_to`] set (or plain, [`plain_tables`]).
fn grid(header: &[&str], rows: &[Vec<String>], right: impl Fn(usize) -> bool) -> String {
    if PLAIN.load(Ordering::Relaxed) {
        return plain_grid(header, rows, right);
    }
    grid_within(WIDTH.load(Ordering::Relaxed), header, rows, right)
}

/// A table as [`grid`] draws it, for the other modules of the report (the overview).
pub fn table(header: &[&str], rows: &[Vec<String>], right: impl Fn(usize) -> bool) -> String {
    grid(header, rows, right)
}

/// The table as plain aligned text (see [`plain_tables`]).
fn plain_grid(header: &[&str], rows: &[Vec<String>], right: impl Fn(usize) -> bool) -> String {
    // One line per cell; no run of spaces inside one (two spaces part the columns).
    let clean = |c: &str| {
        let joined = c.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ");
        let mut out = String::with_capacity(joined.len());
        for ch in joined.chars() {
            if !(ch == ' ' && out.ends_with(' ')) {
                out.push(ch);
            }
        }
        if out.is_empty() { "-".to_string() } else { out }
    };
    let cells: Vec<Vec<String>> = std::iter::once(header.iter().map(|h| clean(h)).collect())
        .chain(rows.iter().map(|r| (0..header.len()).map(|i| clean(r.get(i).map_or("", |c| c.as_str()))).collect()))
        .collect();
    let widths: Vec<usize> =
        (0..header.len()).map(|i| cells.iter().map(|r| r[i].chars().count()).max().unwrap_or(0)).collect();
    cells
        .iter()
        .map(|r| {
            let line: Vec<String> = r
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let pad = " ".repeat(widths[i] - c.chars().count());
                    if right(i) { format!("{pad}{c}") } else { format!("{c}{pad}") }
                })
                .collect();
            line.join("  ").trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The same, within `width` characters (0: any): a table too wide is cut by columns into
/// tables that fit, each repeating the first column (what the row is) — a cell is never
/// broken. A column too wide alone still gets a table of its own.
fn grid_within(width: usize, header: &[&str], rows: &[Vec<String>], right: impl Fn(usize) -> bool) -> String {
    let text_width = |c: &str| c.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    // Each column takes its widest cell, a space either side and the line before it.
    let columns: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| text_width(c))
                .chain([text_width(header[i])])
                .max()
                .unwrap_or(0)
                + 3
        })
        .collect();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group: Vec<usize> = (0..header.len().min(1)).collect();
    let mut used = columns.first().copied().unwrap_or(0) + 1;
    for i in 1..header.len() {
        if width > 0 && used + columns[i] > width && group.len() > 1 {
            groups.push(std::mem::replace(&mut group, vec![0]));
            used = columns[0] + 1;
        }
        group.push(i);
        used += columns[i];
    }
    groups.push(group);
    let tables: Vec<String> = groups
        .iter()
        .map(|g| {
            let mut t = Table::new();
            t.load_preset(UTF8_FULL_CONDENSED).set_content_arrangement(ContentArrangement::Disabled);
            t.set_header(g.iter().map(|&i| header[i]).collect::<Vec<_>>());
            for r in rows {
                t.add_row(g.iter().map(|&i| r.get(i).cloned().unwrap_or_default()).collect::<Vec<_>>());
            }
            for (k, &i) in g.iter().enumerate() {
                if right(i)
                    && let Some(c) = t.column_mut(k)
                {
                    c.set_cell_alignment(CellAlignment::Right);
                }
            }
            t.to_string()
        })
        .collect();
    tables.join("\n")
}

/// The flags' codes, space-separated.
pub fn flag_codes(s: &StepResult) -> String {
    s.flags.iter().map(|f| f.code.as_str()).collect::<Vec<_>>().join(" ")
}

/// Headers of [`step_cells`].
pub const STEP_HEADERS: [&str; 11] =
    ["workers", "in flight", "IOPS", "MB/s", "mean µs", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "CV %", "CPU %"];

/// A step's workers as tables show them: `8`, or in a queue-depth ramp or grid `8 × qd 16`.
pub fn workers_cell(w: &WorkloadResult, s: &StepResult) -> String {
    let cell = if w.ramps_queue_depth() && s.rate.is_none() {
        format!("{} × qd {}", s.workers, s.queue_depth)
    } else {
        s.workers.to_string()
    };
    // A host-count sweep's step says its count.
    if w.host_sweep.is_some() { format!("{cell} on {}", hosts_words(s.planned_hosts)) } else { cell }
}

/// `1 host`, `4 hosts`.
pub fn hosts_words(n: u32) -> String {
    if n == 1 { "1 host".into() } else { format!("{n} hosts") }
}

/// A step's figures as the step tables show them: workers, in flight, IOPS, MB/s, mean, p50,
/// p99, p99.9 and max latency, CV %, CPU %.
pub fn step_cells(w: &WorkloadResult, s: &StepResult) -> Vec<String> {
    vec![
        workers_cell(w, s),
        s.outstanding.to_string(),
        format::iops(s.iops),
        format::mbps_number(s.mbps),
        format::lat_us(s.lat_us.mean),
        format::lat_us(s.lat_us.p50),
        format::lat_us(s.lat_us.p99),
        format::lat_us(s.lat_us.p99_9),
        format::lat_us(s.lat_us.max),
        format!("{:.1}", s.cv * 100.0),
        format!("{:.0}", s.cpu.busy()),
    ]
}

/// Headers of the per-host table.
pub const HOST_HEADERS: [&str; 11] =
    ["workers", "host", "hostname", "IOPS", "MB/s", "mean µs", "p99 µs", "errors", "start +µs", "clock ms", "lost"];

/// One host's figures in a step, as the per-host tables show them (see [`HOST_HEADERS`]).
pub fn host_cells(w: &WorkloadResult, s: &StepResult, h: &HostStepResult) -> Vec<String> {
    // Its own workers where it ran a share of the step's (uneven hosts).
    let own = StepResult { workers: if h.workers > 0 { h.workers } else { s.workers }, ..s.clone() };
    vec![
        workers_cell(w, &own),
        h.host.clone(),
        h.hostname.clone(),
        format::iops(h.iops),
        format::mbps_number(h.mbps),
        format::lat_us(h.lat_us.mean),
        format::lat_us(h.lat_us.p99),
        format::group(h.errors),
        format!("{:.0}", h.started_at_us),
        // Its clock against the coordinator's before the step, and how far it moved during it.
        match h.clock_moved_ms.filter(|m| m.abs() >= 0.05) {
            Some(m) => format!("{:+.2} ({m:+.2})", h.clock_offset_ms),
            None => format!("{:+.2}", h.clock_offset_ms),
        },
        h.lost_at_s.map_or_else(String::new, |at| format!("at {at:.1} s")),
    ]
}

/// Each host's part of every step of a multi-host workload; empty for a local run.
pub fn host_table(w: &WorkloadResult) -> String {
    if w.steps.iter().all(|s| s.host_results.is_empty()) {
        return String::new();
    }
    let rows: Vec<Vec<String>> =
        w.steps.iter().flat_map(|s| s.host_results.iter().map(move |h| host_cells(w, s, h))).collect();
    let t = grid(&HOST_HEADERS, &rows, |i| [0, 3, 4, 5, 6, 7, 8, 9].contains(&i));
    format!("per host:\n{t}\n")
}

/// A rate step's target as planned: IOPS, or for a sequential workload MB/s (from the mean
/// transfer size it measured).
pub fn rate_target(s: &StepResult, sequential: bool) -> String {
    let Some(r) = &s.rate else { return String::new() };
    // A replay is driven by its trace: its speed first, the mean rate that came to beside it.
    if let Some(speed) = r.replay_speed {
        return format!("{}× the trace ({})", format::speed(speed), format::target_rate(r.target_iops, false));
    }
    match rate_target_value(s, sequential) {
        Some(v) => format::target_rate(v, sequential),
        // A sequential step that completed nothing has no transfer size to say MB/s with.
        None => format::target_rate(r.target_iops, false),
    }
}

/// A rate step's target in its workload's unit: IOPS, or MB/s for a sequential workload (from
/// the mean transfer size it measured; None when it completed nothing). None for a closed-loop
/// step.
pub fn rate_target_value(s: &StepResult, sequential: bool) -> Option<f64> {
    let r = s.rate.as_ref()?;
    if !sequential {
        return Some(r.target_iops);
    }
    let ops = s.read.ops + s.write.ops;
    (ops > 0).then(|| r.target_iops * ((s.read.bytes + s.write.bytes) as f64 / ops as f64) / 1e6)
}

/// How far a replay fell behind its trace, in words.
pub fn behind_words(b: &iocurve_analysis::Behind) -> String {
    format!(
        "behind the trace from {:.1} s ({} interval{}, p99 lag up to {}; {:.1} % of I/Os issued over {} ms late)",
        b.from_s,
        b.intervals,
        if b.intervals == 1 { "" } else { "s" },
        format::latency(b.worst_lag_p99_us),
        b.late_pct,
        iocurve_analysis::step::BEHIND_MS
    )
}

/// A rate step in one line: `at 100'000 IOPS: p99 1.8 ms (service p99 0.4 ms, lag p99 12 µs), sustained`.
pub fn rate_line(s: &StepResult, sequential: bool) -> Option<String> {
    let r = s.rate.as_ref()?;
    let stopped = s.flags.iter().any(|f| f.code == "interrupted");
    let mut verdict = match (r.sustained, stopped) {
        (true, _) => "sustained".to_string(),
        // Its figures cover what ran before the stop: neither kept up nor fell behind as a whole.
        (false, true) => format!("stopped before its end ({:.1} % of what was due done by then)", r.achieved_pct),
        (false, false) => format!("NOT sustained ({:.1} % done)", r.achieved_pct),
    };
    if let Some(b) = &r.behind {
        verdict = format!("{verdict}; {}", behind_words(b));
    }
    Some(format!(
        "at {}: p99 {} (service p99 {}, lag p99 {}), {verdict}",
        rate_target(s, sequential),
        format::latency(s.lat_us.p99),
        format::latency(r.service_us.p99),
        format::latency(r.lag_us.p99),
    ))
}

/// Headers of a rate ramp's step table (see [`rate_cells`]).
pub const RATE_HEADERS: [&str; 12] = [
    "target",
    "done %",
    "IOPS",
    "MB/s",
    "resp mean µs",
    "resp p99 µs",
    "svc p99 µs",
    "lag p99 µs",
    "not issued",
    "CPU %",
    "verdict",
    "flags",
];

/// A rate step as its table shows it: target and how far it was kept, then response time (from
/// each I/O's intended issue time), service time and lag; empty for a closed-loop step.
pub fn rate_cells(s: &StepResult, sequential: bool) -> Vec<String> {
    let Some(r) = &s.rate else { return Vec::new() };
    vec![
        rate_target(s, sequential),
        format!("{:.1}", r.achieved_pct),
        format::iops(s.iops),
        format::mbps_number(s.mbps),
        format::lat_us(s.lat_us.mean),
        format::lat_us(s.lat_us.p99),
        format::lat_us(r.service_us.p99),
        format::lat_us(r.lag_us.p99),
        format::group(r.dropped + r.backlog),
        format!("{:.0}", s.cpu.busy()),
        match (r.sustained, s.flags.iter().any(|f| f.code == "interrupted")) {
            (true, _) => "sustained",
            // Stopped before its end: its figures stand for what ran, not for a rate not kept.
            (false, true) => "stopped",
            (false, false) => "UNSUSTAINED",
        }
        .to_string(),
        flag_codes(s),
    ]
}

/// A step as warnings name it: `8 workers`, a step of a queue-depth ramp or grid
/// `8 workers × qd 16`, or a rate step `at 100'000 IOPS`.
pub fn step_label(w: &WorkloadResult, s: &StepResult) -> String {
    if s.rate.is_some() {
        return format!("at {}", rate_target(s, w.kind == "sequential"));
    }
    let mut workers = if s.workers == 1 { "1 worker".to_string() } else { format!("{} workers", s.workers) };
    if w.ramps_queue_depth() {
        workers = format!("{workers} × qd {}", s.queue_depth);
    }
    if w.host_sweep.is_some() { format!("{workers} on {}", hosts_words(s.planned_hosts)) } else { workers }
}

/// Whether a workload ran a rate ramp.
pub fn is_rate_ramp(w: &WorkloadResult) -> bool {
    w.steps.iter().any(|s| s.rate.is_some())
}

/// The step table of a rate ramp.
fn rate_table(w: &WorkloadResult) -> String {
    let seq = w.kind == "sequential";
    let rows: Vec<Vec<String>> = w.steps.iter().filter(|s| s.rate.is_some()).map(|s| rate_cells(s, seq)).collect();
    grid(&RATE_HEADERS, &rows, |i| i < 10)
}

pub fn step_table(w: &WorkloadResult) -> String {
    if is_rate_ramp(w) {
        return rate_table(w);
    }
    let header: Vec<&str> = STEP_HEADERS.iter().chain(&["flags"]).copied().collect();
    let rows: Vec<Vec<String>> = w
        .steps
        .iter()
        .map(|s| {
            let mut row = step_cells(w, s);
            row.push(flag_codes(s));
            row
        })
        .collect();
    grid(&header, &rows, |i| i < 11)
}

/// One direction of a step's figures.
type DirOf = fn(&StepResult) -> &iocurve_analysis::DirResult;

/// A mixed workload's latency per direction, a row per step (issue 44): reads and writes (and
/// trims where some ran) each have their own mean and p99, which the step table's figures of
/// every I/O together hide (a 70/30 mix's p99 is the writes'). Empty for a workload of one
/// direction.
pub fn direction_table(w: &WorkloadResult) -> String {
    let all: [(&str, DirOf); 3] = [("read", |s| &s.read), ("write", |s| &s.write), ("trim", |s| &s.trim)];
    let dirs: Vec<(&str, DirOf)> = all.into_iter().filter(|(_, d)| w.steps.iter().any(|s| d(s).ops > 0)).collect();
    if dirs.len() < 2 {
        return String::new();
    }
    // Rate and replay steps are named by their target, not by their slots.
    let rated = w.steps.iter().any(|s| s.rate.is_some());
    let mut header = vec![if rated { "target" } else { "workers" }.to_string()];
    for (name, _) in &dirs {
        header.push(format!("{name} IOPS"));
        header.push(format!("{name} mean µs"));
        header.push(format!("{name} p99 µs"));
    }
    let rows: Vec<Vec<String>> = w
        .steps
        .iter()
        .map(|s| {
            let first = if s.rate.is_some() { rate_target(s, w.kind == "sequential") } else { workers_cell(w, s) };
            let mut row = vec![first];
            for (_, dir) in &dirs {
                let d = dir(s);
                row.push(format::iops(d.iops));
                row.push(format::lat_us(d.lat_us.mean));
                row.push(format::lat_us(d.lat_us.p99));
            }
            row
        })
        .collect();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    format!("  latency by direction\n{}\n", grid(&header, &rows, |_| true))
}

/// Speed, optimum and maximum of a workload, in the published form.
pub fn summary_lines(w: &WorkloadResult) -> Vec<String> {
    let seq = w.kind == "sequential";
    let mut out = Vec::new();
    let undecided = |u: &Option<iocurve_analysis::Undecided>| u.as_ref().map(|u| u.reason.clone());
    // "speed" only for a step of one worker: a ramp that starts higher has a lowest step (its
    // figures then line up under that longer label).
    let speed = iocurve_analysis::overview::speed_name(w);
    let width = speed.len().max(8);
    for (label, p, why) in [
        (speed, &w.speed, None),
        ("optimum", &w.optimum, None),
        ("maximum", &w.maximum, undecided(&w.maximum_undecided)),
        ("SLA max", &w.sla_maximum, undecided(&w.sla_maximum_undecided)),
    ] {
        if let Some(why) = why {
            out.push(format!("  {label:<width$} undecided: {why}"));
        }
        if let Some(p) = p {
            let mut workers = if p.workers == 1 { "1 worker".to_string() } else { format!("{} workers", p.workers) };
            if w.ramps_queue_depth() {
                workers = format!("{workers} × qd {}", p.queue_depth);
            }
            let hosts = w.steps.get(p.step).map_or(1, |s| s.hosts);
            if let Some(uneven) = w.steps.get(p.step).and_then(uneven_hosts) {
                workers = format!("{workers} per host at scale 1; {uneven}");
            } else if hosts > 1 {
                workers = format!("{workers} per host × {hosts} hosts");
            } else if w.host_sweep.is_some() {
                workers = format!("{workers} on 1 host");
            }
            if let Some(s) = w.steps.get(p.step).filter(|s| s.rate.is_some()) {
                workers = format!("driven at {}", rate_target(s, seq));
            }
            out.push(format!("  {label:<width$} {}  ({workers})", headline(p.iops, p.mbps, p.lat_us, seq)));
            if label == "maximum"
                && let Some(s) = w.steps.get(p.step)
                && [s.read.ops, s.write.ops, s.trim.ops].iter().filter(|&&n| n > 0).count() > 1
            {
                out.push(format!("           {}", directions(s)));
            }
        }
    }
    // Under the SLA answer, what it is and whether to quote it (issue 37, finding 3); a workload
    // with no step within the bounds has none.
    if let Some(a) = &w.sla_answer {
        out.push(format!("           {}", a.says));
    }
    // Steps, but none comparable (every one after a host was lost, say): say so, not nothing.
    if !w.steps.is_empty()
        && w.speed.is_none()
        && w.optimum.is_none()
        && w.maximum.is_none()
        && w.maximum_undecided.is_none()
    {
        out.push("  no speed, optimum or maximum: none of its steps can be compared (its notes say why)".into());
    }
    if let Some(m) = w.min_lat_us {
        out.push(format!("  min latency {}", format::latency(m)));
    }
    if let Some(l) = &w.links {
        out.push(format!("  links    the maximum is {}", l.describe(format::mbps)));
    }
    out.extend(cpu_line(w));
    if let Some(c) = &w.claim {
        out.push(format!("  claim    {}", c.says));
    }
    out.extend(w.steps.iter().filter_map(|s| rate_line(s, seq)).map(|l| format!("  {l}")));
    let checked: Vec<_> = w.steps.iter().filter_map(|s| s.steady_state.as_ref()).collect();
    if !checked.is_empty() {
        out.push(format!(
            "  steady state (SNIA rule over each step's last 5 intervals): {} of {} steps",
            checked.iter().filter(|c| c.steady).count(),
            checked.len()
        ));
    }
    let mut verified = iocurve_analysis::VerifyCounts::default();
    for v in w.steps.iter().filter_map(|s| s.verify.as_ref()) {
        verified.checked += v.checked;
        verified.lost += v.lost;
        verified.corrupt += v.corrupt;
        verified.misplaced += v.misplaced;
    }
    if w.steps.iter().any(|s| s.verify.is_some()) {
        out.push(format!("  verified reads: {}", verified.describe()));
    }
    out
}

/// The maximum of every workload on one line, as `iocurve runs` lists it.
pub fn headlines(heads: &[iocurve_analysis::Headline]) -> String {
    let heads: Vec<String> = heads
        .iter()
        .filter_map(|h| match h.maximum {
            Some(m) => Some(format!("{} {}", h.workload, headline(m.iops, m.mbps, m.lat_us, h.sequential))),
            // Too noisy to tell: said, not a lower step nor nothing (issue 37).
            None if h.undecided => Some(format!("{} maximum undecided (too noisy)", h.workload)),
            None => None,
        })
        .collect();
    if heads.is_empty() { "no finished step".to_string() } else { heads.join("; ") }
}

/// `-47 %`, `+60 %`; a dash where there is nothing to compare.
pub fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_string(), |v| format!("{v:+.0} %"))
}

/// A throughput change, and "(within noise)" when the two runs' spread covers it.
pub fn impact_throughput(r: &iocurve_analysis::Impact) -> String {
    let mut c = pct(r.throughput_pct);
    if r.in_mbps && !r.sequential && r.throughput_pct.is_some() {
        // Random I/O compared in MB/s: its block sizes differ between the runs.
        c.push_str(" MB/s (block sizes differ)");
    }
    if r.within_noise() {
        c = format!("{c} (within noise)");
    }
    // Against the loss expected (issue 42): `-61 % (expected -75 %: 14 points better)`.
    if let (Some(e), Some(d)) = (r.expected_loss_pct, r.vs_expected_points) {
        let e = if e == 0.0 { "0 %".to_string() } else { format!("{:+.0} %", -e) };
        let by = match d.round() {
            0.0 => "as expected".to_string(),
            p if p > 0.0 => format!("{p:.0} points better"),
            p => format!("{:.0} points worse", -p),
        };
        c = format!("{c} (expected {e}: {by})");
    }
    c
}

/// A latency change: in percent and in µs (`+60 % (+150 µs)`).
pub fn impact_latency(r: &iocurve_analysis::Impact) -> String {
    match r.latency_us {
        Some(us) if r.latency_pct.is_some() => format!("{} ({})", pct(r.latency_pct), signed_latency(us)),
        _ => pct(r.latency_pct),
    }
}

/// A latency change with its sign and unit: `+295 µs`, `-1.2 ms`.
pub fn signed_latency(us: f64) -> String {
    format!("{}{}", if us < 0.0 { "-" } else { "+" }, format::latency(us.abs()))
}

/// Under an impact table: each workload's latency change at speed (a lone request) and of its
/// lowest latency, in µs — what synchronous mirroring adds to every write.
pub fn impact_latency_lines(rows: &[iocurve_analysis::Impact]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.speed_latency_us.is_some() || r.min_latency_us.is_some())
        .map(|r| {
            let mut parts = Vec::new();
            parts.extend(r.speed_latency_us.map(|d| format!("{} at speed", signed_latency(d))));
            parts.extend(r.min_latency_us.map(|d| format!("{} min latency", signed_latency(d))));
            format!("· {}: latency {}", impact_workload(r), parts.join(", "))
        })
        .collect()
}

/// `±3 %`: the noise of a change.
pub fn noise(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_string(), |v| format!("±{v:.0} %"))
}

/// A row's workload, at the SLA maximum with the kind of its answer (issue 37, finding 3).
/// Paired by settings under another label in the run: both labels (issue 37, finding 2).
pub fn impact_workload(r: &iocurve_analysis::Impact) -> String {
    let name = match &r.run_workload {
        Some(other) => format!("{} / {other}", r.workload),
        None => r.workload.clone(),
    };
    match r.open_loop {
        Some(true) => format!("{name} (open loop)"),
        Some(false) => format!("{name} (closed loop)"),
        None => name,
    }
}

/// Under a comparison at the SLA maximum: which rows answer "how much load within my SLA".
pub fn sla_loop_note(rows: &[iocurve_analysis::Impact]) -> Option<String> {
    let open = rows.iter().any(|r| r.open_loop == Some(true));
    let closed = rows.iter().any(|r| r.open_loop == Some(false));
    match (open, closed) {
        (true, true) => Some("closed-loop SLA maxima are upper bounds (a worker waits out a stall instead of counting it); quote the open-loop rows for how much load stays within the SLA".into()),
        (false, true) => Some("these SLA maxima are closed loop, upper bounds (a worker waits out a stall instead of counting it); for how much load stays within the SLA run the open-loop search (sla_search = true) and quote that".into()),
        (true, false) => Some("these SLA answers are open loop: quote them for how much load stays within the SLA".into()),
        (false, false) => None,
    }
}

/// A notable point in a cell: `8'144'312 IOPS @ 250 µs (64 w)`, a rate step's `… (at 10'000
/// IOPS)`, `—` for none.
pub fn point_cell(p: &Option<iocurve_analysis::Point>, seq: bool) -> String {
    p.map_or_else(
        || "—".to_string(),
        |p| match p.target_iops {
            Some(t) => format!("{} (at {})", headline(p.iops, p.mbps, p.lat_us, seq), format::target_rate(t, false)),
            // The depth where there is one to tell (a queue-depth ramp's or grid's point).
            None if p.queue_depth > 1 => {
                format!("{} ({} w × qd {})", headline(p.iops, p.mbps, p.lat_us, seq), p.workers, p.queue_depth)
            }
            None => format!("{} ({} w)", headline(p.iops, p.mbps, p.lat_us, seq), p.workers),
        },
    )
}

/// A side of a comparison: its point, or that the point is undecided (too noisy to tell).
pub fn impact_point(p: &Option<iocurve_analysis::Point>, seq: bool, undecided: bool) -> String {
    if undecided && p.is_none() { "undecided (too noisy)".to_string() } else { point_cell(p, seq) }
}

/// The impact of a run against a baseline, one row per workload.
pub fn impact_table(rows: &[iocurve_analysis::Impact]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                impact_workload(r),
                impact_point(&r.baseline, r.in_mbps, r.baseline_undecided),
                impact_point(&r.run, r.in_mbps, r.run_undecided),
                impact_throughput(r),
                noise(r.noise_pct),
                impact_latency(r),
            ]
        })
        .collect();
    grid(&["workload", "baseline", "run", "throughput", "noise", "latency"], &cells, |i| (1..6).contains(&i))
}

/// Headers of [`rate_impact_cells`].
pub const RATE_IMPACT_HEADERS: [&str; 8] =
    ["workload", "target", "baseline p99", "run p99", "p99", "baseline mean", "run mean", "mean"];

/// One target rate both runs drove: each side's response time (p99 with its verdict, mean) and
/// the change.
pub fn rate_impact_cells(r: &iocurve_analysis::compare::RateImpact) -> Vec<String> {
    let side = |lat: f64, sustained: bool| {
        format!("{}{}", format::latency(lat), if sustained { "" } else { " (unsustained)" })
    };
    vec![
        r.workload.clone(),
        format::target_rate(r.target_iops, false),
        side(r.baseline.p99, r.baseline_sustained),
        side(r.run.p99, r.run_sustained),
        pct(r.p99_pct),
        format::latency(r.baseline.mean),
        format::latency(r.run.mean),
        pct(r.mean_pct),
    ]
}

/// A rate ramp against a baseline: at every target rate both ran, the response time of each
/// and its change, with their verdicts.
pub fn rate_impact_table(rows: &[iocurve_analysis::compare::RateImpact]) -> String {
    let cells: Vec<Vec<String>> = rows.iter().map(rate_impact_cells).collect();
    grid(&RATE_IMPACT_HEADERS, &cells, |i| (1..8).contains(&i))
}

/// Every flag of every step, one line each.
pub fn warnings(w: &WorkloadResult) -> Vec<String> {
    let mut out: Vec<String> = w
        .steps
        .iter()
        .flat_map(|s| {
            let at = step_label(w, s);
            s.flags.iter().map(move |f| format!("  ! {at}: {}", f.message))
        })
        .collect();
    out.extend(w.notes.iter().map(|n| format!("  ! {n}")));
    out.extend(data_check_warnings(w));
    out
}

/// One line on the written data's check: every ratio in its promise, or each that is not.
fn data_check_warnings(w: &WorkloadResult) -> Vec<String> {
    if w.data_check.is_empty() {
        return Vec::new();
    }
    let broken: Vec<&DataCheckRow> = w.data_check.iter().filter(|r| !r.holds()).collect();
    if broken.is_empty() {
        return vec![format!(
            "  data as promised: compression {:.2}:1 per 4k…128k and over the whole stream, dedupe {}:1 per 512 B…{} (sample of the engine's data; table in --json and the report)",
            w.data.expected_compression(),
            w.data.dedupe,
            format_size(w.data.dedupe_unit)
        )];
    }
    broken
        .iter()
        .map(|r| {
            let at = r.unit.map_or("the whole stream".to_string(), format_size);
            format!(
                "  ! data: {} {} per {at} gives {:.2}:1, the pattern promises {}{:.2}:1",
                r.kind,
                r.method,
                r.achieved,
                if r.at_most { "at most " } else { "" },
                r.expected
            )
        })
        .collect()
}

/// A mixed step's reads, writes and trims apart: `reads 7'000 IOPS, 28.7 MB/s, mean 250 µs;
/// writes …` (trims only where it trims).
pub fn directions(s: &StepResult) -> String {
    let dir = |name: &str, d: &iocurve_analysis::DirResult| {
        format!(
            "{name} {} IOPS, {}, mean {}, p99 {}",
            format::iops(d.iops),
            format::mbps(d.mbps),
            format::latency(d.lat_us.mean),
            format::latency(d.lat_us.p99)
        )
    };
    // The directions that ran (a mix of writes and trims has no reads).
    [("reads", &s.read), ("writes", &s.write), ("trims", &s.trim)]
        .iter()
        .filter(|(_, d)| d.ops > 0)
        .map(|(name, d)| dir(name, d))
        .collect::<Vec<_>>()
        .join("; ")
}

pub fn workload_report(w: &WorkloadResult) -> String {
    // Only what writes data has a data pattern: a workload of reads and trims writes none.
    let data = if w.read_pct + w.trim_pct < 100.0 { format!(", data {}", w.data.describe()) } else { String::new() };
    let trims = if w.trim_pct > 0.0 { format!(", {} % trims", w.trim_pct) } else { String::new() };
    let mut out = if w.members.is_empty() {
        format!(
            "\n{}  ({}, {} % reads{trims}, bs {}, qd {}, {}, {}{data})\n",
            w.name,
            w.kind,
            w.read_pct,
            w.bs,
            queue_depths(w),
            w.working_set,
            w.backend
        )
    } else {
        // A concurrent step's total: what ran is its members' (each reported after it).
        format!(
            "\n{}  (concurrent step: {} at one time, each step's workers shared out among them; their own figures follow)\n",
            w.name,
            w.members.join(" and ")
        )
    };
    if !w.shape.is_empty() && w.members.is_empty() {
        out.push_str(&format!("  {}\n", w.shape));
    }
    out.push_str(&step_table(w));
    out.push('\n');
    out.push_str(&direction_table(w));
    out.push_str(&grid_report(w));
    out.push_str(&sweep_report(w));
    out.push_str(&host_table(w));
    out.push_str(&target_table(w));
    for l in summary_lines(w).into_iter().chain(warnings(w)) {
        out.push_str(&l);
        out.push('\n');
    }
    out
}

/// The step whose targets a summary shows: the maximum's, else the last step's.
fn targets_step(w: &WorkloadResult) -> Option<&StepResult> {
    w.maximum.and_then(|p| w.steps.get(p.step)).or_else(|| w.steps.last())
}

/// At the maximum (else the last step), each target's figures where there are several: its
/// IOPS, MB/s, latency, errors, share, and the request sizes its device saw; then the LUNs of
/// several paths and how evenly the load spread (issue 42).
pub fn target_table(w: &WorkloadResult) -> String {
    let Some(s) = targets_step(w).filter(|s| s.targets.len() > 1) else { return String::new() };
    let kib = |v: Option<f64>| v.map_or_else(|| "-".into(), |k| format!("{k:.0}"));
    let rows: Vec<Vec<String>> = s
        .targets
        .iter()
        .map(|t| {
            let dev = t.device.as_ref();
            vec![
                t.target.clone(),
                format::iops(t.iops),
                format::mbps_number(t.mbps),
                format::latency(t.lat_us.mean),
                format::latency(t.lat_us.p99),
                t.errors.to_string(),
                format!("{:.0} %", t.share_pct),
                format!("{} / {}", kib(t.read_kib), kib(t.write_kib)),
                dev.map_or_else(
                    || "-".into(),
                    |d| format!("{} / {}", kib(d.read_request_kib), kib(d.write_request_kib)),
                ),
            ]
        })
        .collect();
    // (A rate step's label starts with its own "at".)
    let mut out = format!("  per target at {}:\n", step_label(w, s).trim_start_matches("at "));
    out.push_str(&grid(
        &["target", "IOPS", "MB/s", "mean", "p99", "errors", "share", "KiB r/w", "device KiB r/w"],
        &rows,
        |c| c > 0,
    ));
    out.push('\n');
    for l in &s.luns {
        let bal = l.paths_balance_pct.map(|b| format!(", paths balanced {b:.0} %")).unwrap_or_default();
        out.push_str(&format!(
            "  LUN {}: {} ({}) {} IOPS, {} MB/s, {} mean{bal}\n",
            l.lun,
            if l.paths.len() == 1 { "1 path".to_string() } else { format!("{} paths", l.paths.len()) },
            l.paths.join(", "),
            format::iops(l.iops),
            format::mbps_number(l.mbps),
            format::latency(l.lat_mean_us)
        ));
    }
    for b in &s.balance {
        out.push_str(&format!(
            "  balance over {} {}: {:.0} % (lowest {}, highest {})\n",
            b.units, b.over, b.balance_pct, b.lowest, b.highest
        ));
    }
    out
}

/// What iocurve's own process used of the host's CPU over the steps (`5–10 %`, as the IBM
/// paper says "IOgen used 5–10 %"), and the steal where there was some.
pub fn cpu_line(w: &WorkloadResult) -> Option<String> {
    let own: Vec<f64> = w.steps.iter().filter_map(|s| s.cpu.own).collect();
    if own.is_empty() {
        return None;
    }
    let (lo, hi) = (own.iter().copied().fold(f64::INFINITY, f64::min), own.iter().copied().fold(0.0, f64::max));
    let range = if hi - lo < 0.5 { format!("{hi:.0} %") } else { format!("{lo:.0}–{hi:.0} %") };
    // A shared load host (the seeds' were hypervisors): what others took beside iocurve.
    let others = w.steps.iter().filter_map(|s| s.cpu.others()).fold(0.0, f64::max);
    let steal = w.steps.iter().map(|s| s.cpu.steal).fold(0.0, f64::max);
    let mut beside = format!("; other processes and kernel threads up to {others:.0} %");
    if steal >= 0.5 {
        beside.push_str(&format!(", up to {steal:.0} % stolen by the hypervisor (a shared host)"));
    }
    Some(format!("  host CPU iocurve used {range} of the host's CPU{beside}"))
}

/// What each host of a step of uneven hosts ran (`workers_scale`): `a:7420 8, b:7420 2
/// workers`; None when every host ran the step's workers.
pub fn uneven_hosts(s: &StepResult) -> Option<String> {
    let own = |h: &HostStepResult| if h.workers > 0 { h.workers } else { s.workers };
    if s.host_results.iter().all(|h| own(h) == s.workers) {
        return None;
    }
    let each: Vec<String> = s.host_results.iter().map(|h| format!("{} {}", h.host, own(h))).collect();
    let total: u32 = s.host_results.iter().map(own).sum();
    Some(format!("{} workers ({total} in all)", each.join(", ")))
}

/// A workload's queue depth in words: `4`, or a queue-depth ramp's `1, 4, 16`.
pub fn queue_depths(w: &WorkloadResult) -> String {
    if !w.ramps_queue_depth() {
        return w.queue_depth.to_string();
    }
    let mut depths: Vec<u32> = w.steps.iter().filter(|s| s.rate.is_none()).map(|s| s.queue_depth).collect();
    depths.sort_unstable();
    depths.dedup();
    depths.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// A workers × queue-depth grid: its throughput and mean latency as matrices (a row per
/// worker count, a column per depth; `-` a cell that did not run or completed nothing), and
/// the speed, optimum and maximum along each axis. Empty for any other workload.
pub fn grid_report(w: &WorkloadResult) -> String {
    let Some(g) = &w.grid else { return String::new() };
    let seq = w.kind == "sequential";
    let mut out = String::new();
    for (what, cell) in grid_matrices(seq) {
        let corner = format!("{what}: workers \\ qd");
        let mut header: Vec<String> = vec![corner];
        header.extend(g.queue_depths.iter().map(|qd| format!("qd {qd}")));
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let rows: Vec<Vec<String>> = g
            .workers
            .iter()
            .map(|&n| {
                let mut row = vec![n.to_string()];
                row.extend(g.queue_depths.iter().map(|&qd| {
                    iocurve_analysis::Grid::cell(&w.steps, n, qd)
                        .map(|i| &w.steps[i])
                        .filter(|s| s.ops() > 0)
                        .map_or_else(|| "-".to_string(), cell)
                }));
                row
            })
            .collect();
        out.push_str(&grid(&header, &rows, |_| true));
        out.push('\n');
    }
    let along = |axis: &iocurve_analysis::Axis, by: &str| {
        let at = |p: &Option<iocurve_analysis::Point>| {
            p.map_or_else(
                || "-".to_string(),
                |p| {
                    let on = if by == "qd" { format!("qd {}", p.queue_depth) } else { format!("{} w", p.workers) };
                    format!("{} ({on})", headline(p.iops, p.mbps, p.lat_us, seq))
                },
            )
        };
        format!("speed {}, optimum {}, maximum {}", at(&axis.speed), at(&axis.optimum), at(&axis.maximum))
    };
    for a in &g.by_workers {
        let workers = if a.at == 1 { "1 worker".to_string() } else { format!("{} workers", a.at) };
        out.push_str(&format!("  along the queue depth at {workers}: {}\n", along(a, "qd")));
    }
    for a in &g.by_queue_depth {
        out.push_str(&format!("  along the workers at qd {}: {}\n", a.at, along(a, "workers")));
    }
    out
}

/// A host-count sweep: at each count its speed, optimum and maximum, the links' ceiling of the
/// hosts that ran its maximum and its scaling against the first count. Empty for any other
/// workload.
pub fn sweep_report(w: &WorkloadResult) -> String {
    let Some(sweep) = &w.host_sweep else { return String::new() };
    let seq = w.kind == "sequential";
    let mut out = String::new();
    for a in &sweep.by_hosts {
        let cell = |p: &Option<iocurve_analysis::Point>| point_cell(p, seq);
        let maximum = match &a.maximum_undecided {
            Some(u) => format!("undecided ({})", u.reason),
            None => cell(&a.maximum),
        };
        let mut beside = Vec::new();
        if let Some(c) = a.link_ceiling_mbps {
            beside.push(format!("links carry {}", format::mbps(c)));
        }
        if let Some(p) = a.scaling_pct {
            beside.push(format!("{p:.0} % of linear scaling"));
        }
        let beside = if beside.is_empty() { String::new() } else { format!(" ({})", beside.join("; ")) };
        out.push_str(&format!(
            "  on {}: speed {}, optimum {}, maximum {maximum}{beside}\n",
            hosts_words(a.at),
            cell(&a.speed),
            cell(&a.optimum)
        ));
    }
    out
}

/// A step's figure as a matrix cell shows it.
type Cell = fn(&StepResult) -> String;

/// The grid's matrices: what each shows and a cell's figure.
fn grid_matrices(seq: bool) -> [(&'static str, Cell); 2] {
    let throughput: Cell = if seq { |s| format::mbps_number(s.mbps) } else { |s| format::iops(s.iops) };
    [(if seq { "MB/s" } else { "IOPS" }, throughput), ("mean µs", |s| format::lat_us(s.lat_us.mean))]
}

/// A backend workload's coverage at every step, on one line: `backend coverage per step
/// (bytes moved ÷ the targets' 64 GiB; blocks touched): 1 w 0.02 × (2 %), …`.
pub fn coverage_line(r: &RunResult, w: &WorkloadResult) -> Option<String> {
    let per: Vec<(String, iocurve_analysis::overview::Coverage)> = w
        .steps
        .iter()
        .filter_map(|s| iocurve_analysis::overview::coverage(r, w, s).map(|c| (step_label(w, s), c)))
        .collect();
    let size = per.first()?.1.size;
    let cells: Vec<String> = per
        .iter()
        .map(|(step, c)| {
            let x = c.moved_pct / 100.0;
            let touched = c.touched_pct.map(|t| format!(" (≈ {t:.0} %)")).unwrap_or_default();
            format!("{step} {x:.2} ×{touched}")
        })
        .collect();
    Some(format!(
        "  coverage (bytes moved ÷ the targets' {}; ≈ share of blocks touched): {}",
        format::size(size),
        cells.join(", ")
    ))
}

/// A step as the run's timeline and its marks name it: `backend-rand-read step 4, 8 workers`
/// (the rest as [`step_label`] words it: `at 50'000 IOPS`, `8 workers × qd 16`).
pub fn step_place(w: &WorkloadResult, i: usize, s: &StepResult) -> String {
    format!("{} step {}, {}", w.name, i + 1, step_label(w, s))
}

/// Where a mark fell: the step measuring then (`backend-rand-read step 4, 8 workers`), if any.
pub fn mark_place(r: &RunResult, at_unix_ns: i64) -> Option<String> {
    r.workloads.iter().find_map(|w| {
        w.steps.iter().enumerate().find_map(|(i, s)| {
            let from = s.measured_from_unix_ns?;
            let to = from + (s.duration_s * 1e9) as i64;
            (from..=to).contains(&at_unix_ns).then(|| step_place(w, i, s))
        })
    })
}

/// The run's marks, a line each: when (UTC, and seconds into the run), where, what, whence.
pub fn marks_report(r: &RunResult) -> String {
    if r.marks.is_empty() {
        return String::new();
    }
    let start = iocurve_stats::date::parse_timestamp(&r.started_at, Some(0)).ok();
    let mut out = String::from("\nmarks:\n");
    for m in &r.marks {
        let into = start.map(|s| format!(" (+{:.1} s)", (m.at_unix_ns - s) as f64 / 1e9)).unwrap_or_default();
        let place = mark_place(r, m.at_unix_ns).map(|p| format!(" during {p}")).unwrap_or_default();
        out.push_str(&format!("  {}{into}{place}: {}  [{}]\n", m.at, m.text, m.source));
    }
    out
}

/// The host against the array: a line per step and series of the array's front-end figures,
/// the difference named (`+4.2 %`).
pub fn array_report(r: &RunResult) -> String {
    if r.array.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = r.array.iter().map(|s| s.name.as_str()).collect();
    let mut out = format!("\nthe array's figures: {}\n", names.join(", "));
    for c in &r.array_checks {
        let Some(w) = r.workloads.iter().find(|w| w.name == c.workload) else { continue };
        let Some(s) = w.steps.get(c.step) else { continue };
        let unit = if r.array.iter().any(|a| a.name == c.series && a.kind == "mbps") { "MB/s" } else { "IOPS" };
        let fig = |v: f64| {
            if unit == "MB/s" {
                format!("{} MB/s", format::mbps_number(v))
            } else {
                format!("{} IOPS", format::iops(v))
            }
        };
        out.push_str(&format!(
            "  {}: iocurve {}, the array ({}) {} ({:+.1} %)\n",
            step_place(w, c.step, s),
            fig(c.host),
            c.series,
            fig(c.array),
            c.diff_pct
        ));
    }
    out
}

/// The whole summary printed after a run.
pub fn run_report(r: &RunResult) -> String {
    let mut out = String::new();
    let targets: Vec<String> = r
        .targets
        .iter()
        .map(|t| match &t.device {
            Some(d) => format!("{} ({})", t.path, d.describe()),
            None => t.path.clone(),
        })
        .collect();
    out.push_str(&format!(
        "\niocurve {} on {} ({}, {} cores, kernel {}{}), back-end {}\ntargets: {}\n",
        r.tool_version,
        r.host.facts.hostname,
        r.host.facts.cpu_model,
        r.host.facts.cores,
        r.host.facts.kernel,
        r.host.facts.cpu_extras(),
        r.host.backend,
        targets.join(", ")
    ));
    for a in &r.host.agents {
        out.push_str(&format!("agent {}\n", agent_line(a)));
    }
    out.push_str(&run_notes(r));
    for w in &r.workloads {
        out.push_str(&workload_report(w));
        if let Some(l) = coverage_line(r, w) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    for c in &r.reclaims {
        out.push_str(&reclaim_report(c));
    }
    out.push_str(&marks_report(r));
    out.push_str(&array_report(r));
    if let Some(v) = &r.final_verification {
        out.push_str(&final_verification(v));
    }
    out.push_str(&interrupted_note(r));
    out
}

/// A reclaim step: its passes, the used space and how long it took to come back.
pub fn reclaim_report(c: &iocurve_analysis::ReclaimResult) -> String {
    use iocurve_analysis::format::size;
    let targets = if c.targets.len() == 1 { "1 target".to_string() } else { format!("{} targets", c.targets.len()) };
    let probe = if c.probe.is_empty() { "not measured" } else { c.probe.as_str() };
    let mut out = format!(
        "\nreclaim {}  ({} on {targets}, bs {}, qd {}; used space: {probe})\n",
        c.name,
        size(c.region_bytes),
        format_size(c.bs),
        c.queue_depth
    );
    for (word, p) in [("write", &c.write), ("trim", &c.trim), ("read", &c.read)] {
        if p.ops == 0 && word != "write" {
            continue;
        }
        let mut line = format!(
            "  {word:<6} {} in {:.2} s  {} IOPS  {}  mean {}  p99 {}",
            size(p.bytes),
            p.seconds,
            format::iops(p.iops),
            format::mbps(p.mbps),
            format::latency(p.lat_us.mean),
            format::latency(p.lat_us.p99)
        );
        if word == "read" {
            line.push_str(&format!(
                "  (the trimmed ranges: {} of {} blocks read back as zeros)",
                format::group(c.zero_blocks),
                format::group(p.ops)
            ));
        }
        out.push_str(&line);
        out.push('\n');
    }
    if let Some(u) = &c.used {
        out.push_str(&format!(
            "  used   {} before, {} after the writes, {} right after the trims, {} at the end\n",
            size(u.before),
            size(u.after_write),
            size(u.after_trim),
            size(u.last)
        ));
    }
    out.push_str(&format!("  {}\n", c.verdict()));
    out
}

/// The final verification pass of a run: verdict, counts, map and the first examples.
pub fn final_verification(v: &iocurve_analysis::FinalVerification) -> String {
    let verdict = v.counts.verdict();
    // Examples are of problems and unreadable blocks alike.
    let n = v.counts.problems() + v.counts.unreadable;
    let mut out = format!(
        "\nfinal verification: {verdict}: {} (map {}, blocks of {})\n",
        v.counts.describe(),
        v.map,
        format_size(v.bs)
    );
    for e in &v.counts.examples {
        out.push_str(&format!("  ! {e}\n"));
    }
    if n > v.counts.examples.len() as u64 {
        out.push_str(&format!("  … {} more", n - v.counts.examples.len() as u64));
        if v.unlisted > 0 {
            out.push_str(&format!(" ({} beyond the first 1000000 only counted)", v.unlisted));
        }
        out.push('\n');
    }
    out
}

/// An agent of a multi-host run: where, what host, and the back-end it used.
pub fn agent_line(a: &iocurve_analysis::AgentHost) -> String {
    if let Some(why) = &a.lost {
        return format!("{}: lost before the first step ({why})", a.address);
    }
    let lost = a.lost_mid_run.as_ref().map(|l| format!("; lost {}", l.describe())).unwrap_or_default();
    format!(
        "{}: {} ({}, {} cores, kernel {}), back-end {}{lost}",
        a.address, a.facts.hostname, a.facts.cpu_model, a.facts.cores, a.facts.kernel, a.backend
    )
}

/// The warning about an agent lost while the run went on, where the run's notes go.
pub fn lost_mid_run(a: &iocurve_analysis::AgentHost) -> Option<String> {
    a.lost_mid_run.as_ref().map(|l| {
        format!(
            "agent {} was lost {}: the steps after it ran on fewer hosts than planned and enter no speed, optimum or maximum",
            a.address,
            l.describe()
        )
    })
}

/// The back-end notes and SLA bounds of a run, one line each.
fn run_notes(r: &RunResult) -> String {
    let mut out = String::new();
    if let Some(note) = &r.host.backend_note {
        out.push_str(&format!("! {note}\n"));
    }
    for a in &r.host.agents {
        if let Some(note) = &a.backend_note {
            out.push_str(&format!("! agent {}: {note}\n", a.address));
        }
        if let Some(why) = &a.lost {
            out.push_str(&format!("! agent {} was lost before the first step and took no part ({why})\n", a.address));
        }
        if let Some(line) = lost_mid_run(a) {
            out.push_str(&format!("! {line}\n"));
        }
    }
    if let Some(sla) = &r.sla {
        out.push_str(&format!("SLA: {}\n", sla.describe()));
    }
    let pre: Vec<String> =
        r.targets.iter().filter_map(|t| t.preconditioned_at.as_ref().map(|at| format!("{} at {at}", t.path))).collect();
    if !pre.is_empty() {
        out.push_str(&format!("preconditioned: {}\n", pre.join(", ")));
    }
    out
}

/// A run that stopped before its plan's end says how (its status) above its figures.
fn interrupted_note(r: &RunResult) -> String {
    if !r.interrupted {
        return String::new();
    }
    let how = if r.status.is_empty() { "interrupted" } else { r.status.as_str() };
    format!("\n! {how}: the figures cover the intervals finished before the stop\n")
}

/// The closing summary of a run: speed, optimum, maximum (and SLA maximum) per workload.
pub fn run_summary(r: &RunResult) -> String {
    let mut out = format!("\nSummary ({} on {}, back-end {})\n", r.started_at, r.host.facts.hostname, r.host.backend);
    out.push_str(&run_notes(r));
    for w in &r.workloads {
        out.push_str(&format!("{}\n", w.name));
        for l in summary_lines(w) {
            out.push_str(&l);
            out.push('\n');
        }
    }
    for c in &r.reclaims {
        out.push_str(&reclaim_report(c));
    }
    let kinds = warning_kinds(&r.workloads);
    if !kinds.is_empty() {
        out.push_str("Warnings (one line per kind; each step's own is under its table):\n");
        for k in kinds {
            out.push_str(&format!("  ! {k}\n"));
        }
    }
    out.push_str(&interrupted_note(r));
    out
}

/// What to do about a kind of step flag: the action that removes it, or what it means for the
/// figures when nothing in iocurve can.
fn flag_action(code: &str) -> &'static str {
    match code {
        "cpu_saturated" => {
            "the load host's CPU limited these steps, not the storage: spread the workers over more hosts (--hosts) or stop the ramp lower"
        }
        "io_thread_saturated" => {
            "an I/O thread of iocurve hardly waited for the storage: the figures may be iocurve's pace; give more I/O threads (--threads) as each step's message says"
        }
        "transient" => "the first interval was off the others: lengthen the warm-up (--warmup-s)",
        "unsteady" => "throughput varied between intervals: use longer or more intervals (--interval-s, --intervals)",
        "not_steady" => {
            "not steady by the SNIA rule: precondition first (iocurve precondition --until-steady) or let steps run to steady state (--steady-state snia)"
        }
        "littles_law" => {
            "time was lost outside the measured I/Os (a busy host, a blocked thread): fewer workers per core, or more hosts"
        }
        "unsustained" => {
            "the target rate was not kept: these steps are past what the storage (or the host) sustains and enter no optimum or maximum"
        }
        "errors" | "unmeasured_errors" => {
            "the storage returned I/O errors: see each step's errors (--json, export) and the target's health"
        }
        "verify" => "data read back was not what was written: see the verification lines and `iocurve verify`",
        "stuck" | "stall" => "the storage stopped answering for a while: see its logs; the figures include the wait",
        "interrupted" | "aborted" | "output_closed" => {
            "stopped before all its intervals: run again for the full figures"
        }
        "no_io" => "nothing completed: check the target and the errors",
        "split" => {
            "the kernel split iocurve's I/Os into smaller requests: raise the device's max_sectors_kb (up to max_hw_sectors_kb) or test the block size the device takes"
        }

        "not_stored" => {
            "the results database refused the step's later intervals (full or read-only): free space or give another --db, and run again"
        }
        "host_lost" | "threads_abandoned" => {
            "a host or I/O thread stopped answering: its part is missing from the figures"
        }
        "fewer_hosts" => {
            "these steps ran on fewer hosts than planned (a host was lost before them) and enter no speed, optimum or maximum: run again on every host for the full figures"
        }
        "start_spread" | "clock_moved" => {
            "the hosts' starts or clocks were apart: keep their clocks synchronised (chrony) and use longer intervals"
        }
        _ => "see each step's message under its table",
    }
}

/// The run's step flags, one line per kind: how many steps, where, and the action that fixes
/// it, in order of first appearance.
pub fn warning_kinds(workloads: &[WorkloadResult]) -> Vec<String> {
    // Per kind: its code, and per workload with such steps the workload and those steps.
    type Places<'a> = Vec<(&'a WorkloadResult, Vec<&'a StepResult>)>;
    let mut kinds: Vec<(&str, Places)> = Vec::new();
    for w in workloads {
        for s in &w.steps {
            let mut codes: Vec<&str> = Vec::new();
            for f in &s.flags {
                if !codes.contains(&f.code.as_str()) {
                    codes.push(&f.code);
                }
            }
            for code in codes {
                let i = kinds.iter().position(|k| k.0 == code).unwrap_or_else(|| {
                    kinds.push((code, Vec::new()));
                    kinds.len() - 1
                });
                let places = &mut kinds[i].1;
                match places.last_mut().filter(|(pw, _)| std::ptr::eq(*pw, w)) {
                    Some((_, steps)) => steps.push(s),
                    None => places.push((w, vec![s])),
                }
            }
        }
    }
    let total: usize = workloads.iter().map(|w| w.steps.len()).sum();
    kinds
        .into_iter()
        .map(|(code, places)| {
            const SHOWN: usize = 3;
            let n: usize = places.iter().map(|p| p.1.len()).sum();
            let mut at: Vec<String> =
                places.iter().take(SHOWN).map(|(w, steps)| format!("{} {}", w.name, step_list(w, steps))).collect();
            if places.len() > SHOWN {
                at.push(format!("{} more workloads", places.len() - SHOWN));
            }
            format!("{code} on {n} of {total} steps ({}): {}", at.join("; "), flag_action(code))
        })
        .collect()
}

/// Steps of a workload in few words: `1, 2, 4 workers`, each rate step's label, or `all N
/// steps`.
fn step_list(w: &WorkloadResult, steps: &[&StepResult]) -> String {
    if steps.len() > 1 && steps.len() == w.steps.len() {
        return format!("all {} steps", steps.len());
    }
    if steps.iter().any(|s| s.rate.is_some()) || w.ramps_queue_depth() || w.host_sweep.is_some() {
        return steps.iter().map(|s| step_label(w, s)).collect::<Vec<_>>().join(", ");
    }
    let counts: Vec<String> = steps.iter().map(|s| s.workers.to_string()).collect();
    let unit = if steps.len() == 1 && steps[0].workers == 1 { "worker" } else { "workers" };
    format!("{} {unit}", counts.join(", "))
}

/// The stored runs, one row each under a header (`iocurve runs`): id, start, label, plan,
/// host, back-end, targets, status, and the maximum of every workload, one a line.
pub fn runs_table(rows: &[[String; 9]]) -> String {
    let cells: Vec<Vec<String>> = rows.iter().map(|r| r.to_vec()).collect();
    let header = ["id", "started", "label", "plan", "host", "back-end", "targets", "status", "maximum"];
    format!("{}\n", grid(&header, &cells, |i| i == 0))
}

/// What an array makes of the written data, one row a line beside the promise
/// (`compress zstd -1 per 4k   1.66:1   1.64:1`); rows off by more than their tolerance (5 %,
/// or the sampling error of a small dedupe sample) are flagged.
pub fn data_check(rows: &[DataCheckRow], unit: u64) -> String {
    let mut out = format!("{:<36} expected   achieved\n", "");
    for r in rows {
        let [what, expected, achieved, flag] = data_check_cells(r, unit);
        let flag = if flag.is_empty() { flag } else { format!("   ! {flag}") };
        out.push_str(&format!("{what:<36} {expected:>9}   {achieved:>8}{flag}\n"));
    }
    out
}

/// A data-check row's cells: what is measured, the promise (`≤` for a bound), what was found,
/// and a note when the promise is broken. `unit` is the pattern's dedupe unit.
pub fn data_check_cells(r: &DataCheckRow, unit: u64) -> [String; 4] {
    let kind = if r.kind == "compression" { "compress" } else { "dedupe" };
    let what = match r.unit {
        Some(u) if r.kind == "deduplication" && u == unit => format!("dedupe per {} (its unit)", format_size(u)),
        Some(u) if r.kind == "deduplication" => format!("dedupe per {}", format_size(u)),
        Some(u) => format!("{kind} {} per {}", r.method, format_size(u)),
        None => format!("{kind} {}, whole stream", r.method),
    };
    let bound = if r.at_most { "≤ " } else { "" };
    let flag = if r.holds() { String::new() } else { format!("more than {:.0} % off", r.tolerance * 100.0) };
    [what, format!("{bound}{:.2}:1", r.expected), format!("{:.2}:1", r.achieved), flag]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 37, finding 7: piped tables kept box characters. Plain ones: a header line, a line
    /// per row, columns aligned and parted by two spaces, no run of spaces inside a cell, `-`
    /// for an empty one.
    #[test]
    fn regression_plain_tables_have_no_boxes_and_split_on_two_spaces() {
        let rows = vec![
            vec!["1".to_string(), "3 of 4  controllers".to_string(), "12'345 IOPS @ 175 µs".to_string()],
            vec!["12".to_string(), String::new(), "two\nlines".to_string()],
        ];
        let t = plain_grid(&["id", "label", "maximum"], &rows, |i| i == 0);
        assert_eq!(
            t,
            "id  label               maximum\n 1  3 of 4 controllers  12'345 IOPS @ 175 µs\n12  -                   two; lines"
        );
        for line in t.lines() {
            assert_eq!(line.split("  ").map(str::trim).filter(|c| !c.is_empty()).count(), 3, "{line}");
        }
    }
    use iocurve_analysis::{Point, Thresholds, analyze_step};
    use iocurve_stats::{CpuUsage, IntervalStats, StepRecord};

    fn step(workers: u32, lat_ns: u64, ops: u64) -> StepResult {
        let mut stats = IntervalStats::with_samples(1);
        for _ in 0..ops {
            stats.read.record(lat_ns, 4096);
        }
        let mut rec = StepRecord::new(workers, 1, 1, 1.0, 1.0);
        rec.push_interval(stats, CpuUsage::default(), 1.0);
        analyze_step(&rec, false, &Thresholds::default())
    }

    fn workload(name: &str, steps: Vec<StepResult>) -> WorkloadResult {
        WorkloadResult {
            name: name.into(),
            settings: Default::default(),
            kind: "random".into(),
            working_set: "backend".into(),
            read_pct: 100.0,
            trim_pct: 0.0,
            bs: "4k".into(),
            queue_depth: 1,
            shape: String::new(),
            backend: "io_uring".into(),
            speed: None,
            optimum: None,
            maximum: None,
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
            steps,
        }
    }

    /// Issue 16: the quick suite flagged 33 of 60 steps, a line each, without a word on what
    /// to do. The summary has one line per kind: how many steps, which, and the fix.
    #[test]
    fn warnings_are_summarised_one_line_per_kind_with_the_action() {
        let flagged = |workers: u32, codes: &[&str]| {
            let mut s = step(workers, 100_000, 1_000);
            s.flags = codes
                .iter()
                .map(|c| iocurve_analysis::Flag { code: c.to_string(), message: format!("{c} here") })
                .collect();
            s
        };
        let a = workload("a", vec![flagged(1, &["transient", "cpu_saturated"]), flagged(2, &["cpu_saturated"])]);
        let b = workload("b", vec![flagged(1, &[]), flagged(2, &[]), flagged(4, &["cpu_saturated", "cpu_saturated"])]);
        let kinds = warning_kinds(&[a, b]);
        assert_eq!(kinds.len(), 2, "{kinds:#?}");
        assert!(kinds[0].starts_with("transient on 1 of 5 steps (a 1 worker): "), "{}", kinds[0]);
        assert!(kinds[0].contains("--warmup-s"), "the action: {}", kinds[0]);
        assert!(kinds[1].starts_with("cpu_saturated on 3 of 5 steps (a all 2 steps; b 4 workers): "), "{}", kinds[1]);
        assert!(kinds[1].contains("--hosts"), "the action: {}", kinds[1]);
        let many: Vec<WorkloadResult> =
            (0..5).map(|i| workload(&format!("w{i}"), vec![flagged(1, &["odd_one"])])).collect();
        let kinds = warning_kinds(&many);
        assert_eq!(
            kinds,
            [
                "odd_one on 5 of 5 steps (w0 1 worker; w1 1 worker; w2 1 worker; 2 more workloads): see each step's message under its table"
            ]
        );
        assert!(warning_kinds(&[workload("c", vec![flagged(1, &[])])]).is_empty());
    }

    #[test]
    fn report_has_table_headline_and_warnings() {
        let steps = vec![step(1, 100_000, 10_000), step(2, 100_000, 20_000)];
        let p = |i: usize, s: &StepResult| Point {
            step: i,
            workers: s.workers,
            queue_depth: s.queue_depth,
            iops: s.iops,
            mbps: s.mbps,
            lat_us: s.lat_us.mean,
            target_iops: None,
        };
        let w = WorkloadResult {
            name: "backend-random-read-4k".into(),
            settings: Default::default(),
            kind: "random".into(),
            working_set: "backend".into(),
            read_pct: 100.0,
            trim_pct: 0.0,
            bs: "4k".into(),
            queue_depth: 1,
            shape: String::new(),
            backend: "io_uring".into(),
            speed: Some(p(0, &steps[0])),
            optimum: Some(p(1, &steps[1])),
            maximum: Some(p(1, &steps[1])),
            sla_maximum: Some(p(0, &steps[0])),
            maximum_undecided: None,
            sla_maximum_undecided: None,
            sla_answer: None,
            min_lat_us: Some(100.0),
            data: Default::default(),
            data_check: Vec::new(),
            notes: Vec::new(),
            stop_at: Default::default(),
            links: Some(iocurve_analysis::sizing::LinkUse {
                links: "2 × 32G FC".into(),
                capacity_mbps: 6400.0,
                read_pct: 82.0,
                write_pct: 0.0,
            }),
            grid: None,
            host_sweep: None,
            transfer_floor: None,
            claim: None,
            members: Vec::new(),
            steps,
        };
        let text = workload_report(&w);
        assert!(text.contains("backend-random-read-4k"), "{text}");
        assert!(text.contains("20'000"), "{text}");
        assert!(text.contains("maximum  20'000 IOPS @ 100 µs  (2 workers)"), "{text}");
        assert!(text.contains("speed    10'000 IOPS @ 100 µs  (1 worker)"), "{text}");
        assert!(text.contains("SLA max  10'000 IOPS @ 100 µs  (1 worker)"), "{text}");
        assert!(
            text.contains(
                "links    the maximum is 82 % of the host's links (2 × 32G FC: 6.40 GB/s a direction), reads"
            ),
            "{text}"
        );
        // A ramp that starts at 2 workers has no speed (issue 43): its lowest step, the other
        // figures lined up under that longer label.
        let mut w = w;
        w.steps.remove(0);
        w.speed = Some(p(0, &w.steps[0]));
        w.optimum = w.speed;
        let text = summary_lines(&w).join("\n");
        assert!(text.contains("  lowest step 20'000 IOPS @ 100 µs  (2 workers)"), "{text}");
        assert!(text.contains("  optimum     20'000 IOPS @ 100 µs  (2 workers)"), "{text}");
        assert!(!text.contains("speed"), "{text}");
    }

    /// Issue 16: tables fit the terminal's width by columns, not by breaking cells.
    #[test]
    fn a_table_wider_than_the_terminal_is_cut_by_columns_repeating_the_first() {
        let header = ["workers", "IOPS", "MB/s", "mean µs", "p99 µs", "flags"];
        let rows: Vec<Vec<String>> = [
            ["1", "123'456", "482.3", "15.2", "40.1", "unsteady littles_law"],
            ["64", "1'234'567", "4'822.5", "51.9", "1'203.7", ""],
        ]
        .iter()
        .map(|r| r.iter().map(|c| c.to_string()).collect())
        .collect();
        let width = |t: &str| t.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        let whole = grid_within(0, &header, &rows, |i| i < 5);
        assert!(width(&whole) > 40, "{whole}");
        assert_eq!(grid_within(width(&whole), &header, &rows, |i| i < 5), whole, "a table that fits is left whole");
        let cut = grid_within(40, &header, &rows, |i| i < 5);
        assert!(width(&cut) <= 40, "{cut}");
        let tables = cut.matches("workers").count();
        assert!(tables >= 2, "{cut}");
        // Every header and cell once (the first column once per table), none broken.
        for h in &header[1..] {
            assert_eq!(cut.matches(h).count(), 1, "{h} in\n{cut}");
        }
        for c in rows.iter().flat_map(|r| r[1..].iter()).filter(|c| !c.is_empty()) {
            assert!(cut.lines().any(|l| l.contains(c.as_str())), "{c} whole on a line in\n{cut}");
        }
        assert_eq!(cut.matches("      64 ┆").count(), tables, "each table names its rows");
        // A column wider than the terminal alone still gets a table of its own.
        let narrow = grid_within(12, &header, &rows, |i| i < 5);
        assert!(narrow.contains("unsteady littles_law"), "{narrow}");
    }
}
