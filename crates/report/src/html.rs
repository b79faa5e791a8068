//! The HTML report: one self-contained file (data as JSON, uPlot and our drawing code inlined,
//! no network access of any kind) that opens offline and can be mailed or published.
//!
//! The tables are rendered here with the terminal's number formats; the charts are drawn in
//! the browser by `assets/report.js` from the embedded data. Neither computes a figure: the
//! analysis did. Several runs make a comparison report: one series per run in every chart and
//! an impact table per run against the first (the baseline).

use iocurve_analysis::{At, Impact, LatencyBucket, Point, RunResult, StepResult, WorkloadResult, compare};
use minijinja::Environment;
use serde::Serialize;
use serde_json::{Value, json};

use crate::format::{self, headline};
use crate::terminal::{self, pct};

const TEMPLATE: &str = include_str!("../assets/report.html");
const APP_JS: &str = include_str!("../assets/report.js");
const APP_CSS: &str = include_str!("../assets/report.css");
const UPLOT_JS: &str = include_str!("../assets/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("../assets/uplot/uPlot.min.css");
const UPLOT_LICENSE: &str = include_str!("../assets/uplot/LICENSE");

/// Series colours: one per run (and per further workload of the same pattern within a run).
const PALETTE: [&str; 10] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"];

/// A stored run as the report shows it.
pub struct ReportRun {
    pub id: i64,
    pub label: String,
    pub plan: String,
    /// `complete`, `incomplete` (killed) or `interrupted` (Ctrl-C).
    pub status: String,
    pub result: RunResult,
}

impl ReportRun {
    /// `run 3 "L1C3S4"`, or `run 3` without a label.
    pub fn title(&self) -> String {
        if self.label.is_empty() { format!("run {}", self.id) } else { format!("run {} \"{}\"", self.id, self.label) }
    }

    /// What series are called in a comparison: the label, else `run 3`.
    fn short(&self) -> String {
        if self.label.is_empty() { format!("run {}", self.id) } else { self.label.clone() }
    }
}

#[derive(Serialize)]
struct RunHead {
    title: String,
    color: &'static str,
    plan: String,
    status: String,
    started: String,
    finished: String,
    measured: String,
    host: String,
    targets: Vec<String>,
    backend: String,
    /// A multi-host run: each agent's host and back-end (`host` is then the coordinator).
    agents: Vec<String>,
    sla: Option<String>,
    warnings: Vec<String>,
    /// Why the run is not clean (a failure, or what its exit code 3 or 4 stands for).
    status_reason: Option<String>,
    verification: Option<VerificationView>,
}

/// The final verification pass of a run.
#[derive(Serialize)]
struct VerificationView {
    /// `no problems` or `14 problems`.
    verdict: String,
    problems: bool,
    counts: String,
    map: String,
    when: String,
    examples: Vec<String>,
    more: Option<String>,
}

fn verification_view(v: &iocurve_analysis::FinalVerification) -> VerificationView {
    let n = v.counts.problems();
    let shown = v.counts.examples.len() as u64;
    VerificationView {
        verdict: if n == 0 { "no problems".into() } else { format!("{n} problems") },
        problems: n > 0,
        counts: v.counts.describe(),
        map: format!("{} (blocks of {})", v.map, format::size(v.bs)),
        when: format!("{} – {}", v.started_at, v.finished_at),
        examples: v.counts.examples.clone(),
        more: (n > shown).then(|| {
            format!("… and {} more: every problem with `iocurve export RUN --format problems -o FILE.csv`", n - shown)
        }),
    }
}

/// Workloads of one access pattern (kind, read share, block size, queue depth) from every run:
/// frontend and backend of the same pattern share their charts.
struct Group<'a> {
    title: String,
    members: Vec<(usize, &'a WorkloadResult)>,
}

#[derive(Serialize)]
struct GroupView {
    id: String,
    title: String,
    summary: Vec<SummaryRow>,
    steps: Vec<StepTable>,
    /// Per-host tables of the series that ran on several hosts.
    hosts: Vec<StepTable>,
    /// What an array makes of each writing series' data (empty for reads).
    data: Vec<DataTable>,
}

#[derive(Serialize)]
struct DataTable {
    series: String,
    pattern: String,
    rows: Vec<[String; 4]>,
}

#[derive(Serialize)]
struct SummaryRow {
    series: String,
    workload: String,
    color: &'static str,
    dashed: bool,
    speed: String,
    optimum: String,
    maximum: String,
    sla_maximum: String,
    min_lat: String,
    flagged: String,
}

#[derive(Serialize)]
struct StepTable {
    series: String,
    rows: Vec<Vec<String>>,
}

#[derive(Serialize)]
struct ImpactView {
    title: String,
    rows: Vec<ImpactRow>,
}

#[derive(Serialize)]
struct ImpactRow {
    workload: String,
    baseline: String,
    run: String,
    throughput: String,
    latency: String,
    /// `worse`, `better` or empty: throughput down or latency up is worse.
    throughput_class: &'static str,
    latency_class: &'static str,
}

/// Renders the report of one run, or the comparison of several (the first is the baseline).
pub fn html(runs: &[ReportRun]) -> Result<String, minijinja::Error> {
    let groups = group(runs);
    let series = series_of(runs, &groups);
    let data = json!({
        "runs": runs.iter().enumerate().map(|(i, r)| json!({
            "title": r.title(),
            "color": PALETTE[i % PALETTE.len()],
            "sla_mean_us": r.result.sla.and_then(|s| s.mean_ms).map(|v| v * 1000.0),
            "sla_p99_us": r.result.sla.and_then(|s| s.p99_ms).map(|v| v * 1000.0),
        })).collect::<Vec<_>>(),
        "buckets": bucket_labels(runs),
        "groups": groups.iter().enumerate().map(|(gi, g)| json!({
            "id": format!("g{gi}"),
            "title": g.title,
            "sequential": g.members[0].1.kind == "sequential",
            "unit": if g.members[0].1.kind == "sequential" { "MB/s" } else { "IOPS" },
            "series": series[gi].iter().map(|s| s.data.clone()).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    });
    let views: Vec<GroupView> = groups
        .iter()
        .enumerate()
        .map(|(gi, g)| GroupView {
            id: format!("g{gi}"),
            title: g.title.clone(),
            summary: series[gi].iter().map(|s| summary_row(s)).collect(),
            steps: series[gi].iter().map(|s| StepTable { series: s.label.clone(), rows: step_rows(s.w) }).collect(),
            hosts: series[gi]
                .iter()
                .filter(|s| s.w.steps.iter().any(|st| !st.host_results.is_empty()))
                .map(|s| StepTable { series: s.label.clone(), rows: host_rows(s.w) })
                .collect(),
            data: series[gi]
                .iter()
                .filter(|s| !s.w.data_check.is_empty())
                .map(|s| DataTable {
                    series: s.label.clone(),
                    pattern: s.w.data.describe(),
                    rows: s.w.data_check.iter().map(|r| terminal::data_check_cells(r, s.w.data.dedupe_unit)).collect(),
                })
                .collect(),
        })
        .collect();
    let heads: Vec<RunHead> = runs.iter().enumerate().map(|(i, r)| run_head(i, r)).collect();
    let title = match runs {
        [one] => format!("iocurve report: {}", one.title()),
        _ => format!("iocurve comparison: {}", runs.iter().map(ReportRun::title).collect::<Vec<_>>().join(" vs ")),
    };
    let mut env = Environment::new();
    env.add_template("report.html", TEMPLATE)?;
    env.get_template("report.html")?.render(minijinja::context! {
        title,
        tool_version => runs.first().map(|r| r.result.tool_version.clone()).unwrap_or_default(),
        runs => heads,
        groups => views,
        host_headers => terminal::HOST_HEADERS,
        impacts => impacts(runs),
        css => APP_CSS,
        uplot_css => UPLOT_CSS,
        uplot_js => UPLOT_JS,
        uplot_license => UPLOT_LICENSE,
        app_js => APP_JS,
        data => script_json(&data),
    })
}

/// JSON that is safe inside a `<script>` element: `<` never appears literally, so neither
/// `</script>` nor `<!--` in a label can end or confuse the element.
fn script_json(v: &Value) -> String {
    v.to_string().replace('<', "\\u003c")
}

fn pattern_key(w: &WorkloadResult) -> (String, u64, String, u32) {
    (w.kind.clone(), (w.read_pct * 1000.0).round() as u64, w.bs.clone(), w.queue_depth)
}

/// `random read, 4k, qd 1`; `sequential 70 % read, 8k, qd 4`.
fn pattern_title(w: &WorkloadResult) -> String {
    let rw = if w.read_pct >= 100.0 {
        "read".to_string()
    } else if w.read_pct <= 0.0 {
        "write".to_string()
    } else {
        format!("{} % read", w.read_pct)
    };
    format!("{} {rw}, {}, qd {}", w.kind, w.bs, w.queue_depth)
}

/// Groups in order of first appearance, over all runs.
fn group(runs: &[ReportRun]) -> Vec<Group<'_>> {
    let mut keys = Vec::new();
    let mut groups: Vec<Group> = Vec::new();
    for (ri, r) in runs.iter().enumerate() {
        for w in r.result.workloads.iter().filter(|w| !w.steps.is_empty()) {
            let key = pattern_key(w);
            match keys.iter().position(|k| *k == key) {
                Some(i) => groups[i].members.push((ri, w)),
                None => {
                    keys.push(key);
                    groups.push(Group { title: pattern_title(w), members: vec![(ri, w)] });
                }
            }
        }
    }
    groups
}

struct Series<'a> {
    label: String,
    color: &'static str,
    dashed: bool,
    w: &'a WorkloadResult,
    data: Value,
}

/// Line style of a working set: the published figures draw backend solid, frontend dashed.
fn dash(working_set: &str) -> Vec<u32> {
    match working_set {
        "frontend" => vec![8, 5],
        "range" => vec![2, 3],
        _ => vec![],
    }
}

fn series_of<'a>(runs: &[ReportRun], groups: &[Group<'a>]) -> Vec<Vec<Series<'a>>> {
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
                    let data = series_data(ri, &label, color, w);
                    Series { label, color, dashed: w.working_set != "backend", w, data }
                })
                .collect()
        })
        .collect()
}

/// `x` rounded to `digits` significant digits: the charts need no more, and the file stays
/// small (a run of 10 workloads × 10 steps × 600 samples must stay well under 5 MB).
fn sig(x: f64, digits: i32) -> Value {
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

fn column(steps: &[StepResult], f: impl Fn(&StepResult) -> f64) -> Vec<Value> {
    steps.iter().map(|s| sig(f(s), 5)).collect()
}

fn series_data(run: usize, label: &str, color: &str, w: &WorkloadResult) -> Value {
    let seq = w.kind == "sequential";
    let s = &w.steps;
    json!({
        "run": run,
        "name": w.name,
        "label": label,
        "ws": w.working_set,
        "color": color,
        "dash": dash(&w.working_set),
        "workers": s.iter().map(|s| s.workers).collect::<Vec<_>>(),
        "tput": column(s, |s| s.throughput(seq)),
        "mean": column(s, |s| s.lat_us.mean),
        "p50": column(s, |s| s.lat_us.p50),
        "p90": column(s, |s| s.lat_us.p90),
        "p99": column(s, |s| s.lat_us.p99),
        "p999": column(s, |s| s.lat_us.p99_9),
        "busy": column(s, |s| s.cpu.busy()),
        "iowait": column(s, |s| s.cpu.iowait),
        "hist": s.iter().map(|s| s.lat_histogram.iter().map(|b| sig(b.pct, 3)).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "flags": s.iter().map(|s| s.flags.iter().map(|f| f.message.clone()).collect::<Vec<_>>()).collect::<Vec<_>>(),
        "timeline": s.iter().map(|s| json!({
            "t": s.samples.iter().map(|x| sig(x.t_s, 6)).collect::<Vec<_>>(),
            "tput": s.samples.iter().map(|x| sig(if seq { x.mbps } else { x.iops }, 4)).collect::<Vec<_>>(),
            "lat": s.samples.iter().map(|x| sig(x.lat_mean_us, 4)).collect::<Vec<_>>(),
            // Errors per second only where there were any: the common case costs nothing.
            "errors": s.samples.iter().any(|x| x.errors > 0).then(|| s.samples.iter().map(|x| x.errors).collect::<Vec<_>>()),
        })).collect::<Vec<_>>(),
        // Multi-host steps: each host's own timeline (null for a local step).
        "hosts": s.iter().map(|s| (!s.host_results.is_empty()).then(|| s.host_results.iter().map(|h| json!({
            "host": h.host,
            "lost": h.lost_at_s,
            "t": h.samples.iter().map(|x| sig(x.t_s, 6)).collect::<Vec<_>>(),
            "tput": h.samples.iter().map(|x| sig(if seq { x.mbps } else { x.iops }, 4)).collect::<Vec<_>>(),
        })).collect::<Vec<_>>())).collect::<Vec<_>>(),
    })
}

/// `< 100 µs`, `100–250 µs`, `0.5–1 ms`, `≥ 256 ms`: the published bucket names.
fn bucket_label(b: &LatencyBucket) -> String {
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

fn bucket_labels(runs: &[ReportRun]) -> Vec<String> {
    let first = runs.iter().flat_map(|r| &r.result.workloads).flat_map(|w| &w.steps).next();
    first.map(|s| s.lat_histogram.iter().map(bucket_label).collect()).unwrap_or_default()
}

fn point(p: &Option<Point>, seq: bool) -> String {
    p.map_or_else(|| "—".to_string(), |p| format!("{} ({} w)", headline(p.iops, p.mbps, p.lat_us, seq), p.workers))
}

fn summary_row(s: &Series) -> SummaryRow {
    let w = s.w;
    let seq = w.kind == "sequential";
    let flagged = w.steps.iter().filter(|s| !s.flags.is_empty()).count();
    SummaryRow {
        series: s.label.clone(),
        workload: w.name.clone(),
        color: s.color,
        dashed: s.dashed,
        speed: point(&w.speed, seq),
        optimum: point(&w.optimum, seq),
        maximum: point(&w.maximum, seq),
        sla_maximum: point(&w.sla_maximum, seq),
        min_lat: w.min_lat_us.map_or_else(|| "—".into(), |v| format!("{} µs", format::lat_us(v))),
        flagged: if flagged == 0 { String::new() } else { format!("{flagged} of {}", w.steps.len()) },
    }
}

/// The step table: the terminal's columns, plus errors and the longest stall.
fn step_rows(w: &WorkloadResult) -> Vec<Vec<String>> {
    w.steps
        .iter()
        .map(|s| {
            let mut row = terminal::step_cells(s);
            row.extend([format::group(s.errors), format!("{:.2}", s.longest_stall_s), terminal::flag_codes(s)]);
            row
        })
        .collect()
}

/// The per-host table: every host of every step, as the terminal shows it.
fn host_rows(w: &WorkloadResult) -> Vec<Vec<String>> {
    w.steps.iter().flat_map(|s| s.host_results.iter().map(move |h| terminal::host_cells(s, h))).collect()
}

fn run_head(i: usize, r: &ReportRun) -> RunHead {
    let res = &r.result;
    let measured: f64 = res.workloads.iter().flat_map(|w| &w.steps).map(|s| s.duration_s).sum();
    let mut warnings = Vec::new();
    if r.status != "complete" {
        warnings.push(format!(
            "run {}: the figures cover the intervals finished before it stopped",
            if r.status == "incomplete" { "killed or still running" } else { "interrupted" }
        ));
    }
    if let Some(note) = &res.host.backend_note {
        warnings.push(note.clone());
    }
    for a in &res.host.agents {
        if let Some(note) = &a.backend_note {
            warnings.push(format!("agent {}: {note}", a.address));
        }
    }
    if let Some(v) = res.final_verification.as_ref().filter(|v| v.counts.problems() > 0) {
        warnings.push(format!("final verification: {}", v.counts.describe()));
    }
    for w in &res.workloads {
        for s in &w.steps {
            for f in &s.flags {
                warnings.push(format!("{}, {} workers: {}", w.name, s.workers, f.message));
            }
        }
    }
    RunHead {
        title: r.title(),
        color: PALETTE[i % PALETTE.len()],
        plan: r.plan.clone(),
        status: r.status.clone(),
        started: res.started_at.clone(),
        finished: if res.finished_at.is_empty() { "—".into() } else { res.finished_at.clone() },
        measured: format::duration(measured),
        host: format!(
            "{} ({}, {} cores, kernel {})",
            res.host.facts.hostname, res.host.facts.cpu_model, res.host.facts.cores, res.host.facts.kernel
        ),
        targets: res
            .targets
            .iter()
            .map(|t| {
                let pre = t.preconditioned_at.as_ref().map(|at| format!(", preconditioned {at}")).unwrap_or_default();
                format!(
                    "{} ({}, {}, {} B blocks, group {}{pre})",
                    t.path,
                    t.kind,
                    format::size(t.size),
                    t.logical_block,
                    t.group
                )
            })
            .collect(),
        backend: res.host.backend.clone(),
        agents: res.host.agents.iter().map(crate::terminal::agent_line).collect(),
        sla: res.sla.map(|s| s.describe()),
        warnings,
        status_reason: res.status_reason.clone(),
        verification: res.final_verification.as_ref().map(verification_view),
    }
}

fn impact_row(i: &Impact) -> ImpactRow {
    let class = |v: Option<f64>, worse_when_up: bool| match v {
        Some(v) if v.abs() >= 0.5 && (v > 0.0) == worse_when_up => "worse",
        Some(v) if v.abs() >= 0.5 => "better",
        _ => "",
    };
    ImpactRow {
        workload: i.workload.clone(),
        baseline: point(&i.baseline, i.sequential),
        run: point(&i.run, i.sequential),
        throughput: pct(i.throughput_pct),
        latency: pct(i.latency_pct),
        throughput_class: class(i.throughput_pct, false),
        latency_class: class(i.latency_pct, true),
    }
}

/// Per run after the first: its impact against the baseline at the maximum, the optimum and
/// (when either has SLA bounds) the SLA maximum.
fn impacts(runs: &[ReportRun]) -> Vec<ImpactView> {
    let Some((base, rest)) = runs.split_first() else { return Vec::new() };
    let mut out = Vec::new();
    for r in rest {
        let mut ats = vec![At::Maximum, At::Optimum];
        if base.result.sla.is_some() || r.result.sla.is_some() {
            ats.push(At::Sla);
        }
        for at in ats {
            out.push(ImpactView {
                title: format!("{} against {}, at the {}", r.title(), base.title(), at.name()),
                rows: compare(&base.result, &r.result, at).iter().map(impact_row).collect(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_digits() {
        assert_eq!(sig(123_456.0, 4), json!(123_500));
        assert_eq!(sig(0.012345, 3), json!(0.0123));
        assert_eq!(sig(99.95, 3), json!(100.0));
        assert_eq!(sig(-42.0, 2), json!(-42));
        assert_eq!(sig(0.0, 4), json!(0));
        assert_eq!(sig(f64::NAN, 4), Value::Null);
    }

    #[test]
    fn published_bucket_names() {
        let b = |from_us: f64, to_us: Option<f64>| LatencyBucket { from_us, to_us, count: 0, pct: 0.0 };
        assert_eq!(bucket_label(&b(0.0, Some(100.0))), "< 100 µs");
        assert_eq!(bucket_label(&b(100.0, Some(250.0))), "100–250 µs");
        assert_eq!(bucket_label(&b(500.0, Some(1000.0))), "0.5–1 ms");
        assert_eq!(bucket_label(&b(1000.0, Some(2000.0))), "1–2 ms");
        assert_eq!(bucket_label(&b(256_000.0, None)), "≥ 256 ms");
    }

    fn run(label: &str) -> ReportRun {
        ReportRun {
            id: 7,
            label: label.into(),
            plan: "quick".into(),
            status: "incomplete".into(),
            result: RunResult {
                schema_version: 1,
                tool_version: "0.1.0".into(),
                started_at: "2026-11-21T00:00:00.000Z".into(),
                finished_at: String::new(),
                interrupted: true,
                status: "interrupted".into(),
                status_reason: None,
                host: iocurve_analysis::HostInfo {
                    facts: iocurve_stats::HostFacts {
                        hostname: "h".into(),
                        kernel: "6".into(),
                        cpu_model: "c".into(),
                        cores: 2,
                    },
                    backend: "io_uring".into(),
                    backend_note: None,
                    agents: Vec::new(),
                },
                sla: None,
                targets: vec![],
                plan: Value::Null,
                workloads: vec![],
                final_verification: None,
            },
        }
    }

    #[test]
    fn labels_are_escaped_and_a_run_without_steps_renders() {
        let page = html(&[run("<b>3 of 4</b> & \"x\"")]).unwrap();
        assert!(!page.contains("<b>3 of 4</b>"), "a label is text, not markup");
        let at = page.find("3 of 4").unwrap();
        assert!(
            page.contains("&lt;b&gt;3 of 4&lt;&#x2f;b&gt; &amp;"),
            "escaped in the page: {}",
            &page[at - 20..at + 40]
        );
        assert!(page.contains("status-incomplete") && page.contains("killed or still running"));
        assert!(page.contains("\"groups\":[]"), "no finished step, no charts");
        assert!(!page.contains("src=\"http") && !page.contains("href=\"http"), "nothing loaded from the network");
    }

    /// Issue 13, finding 5: the report said nothing of the final verification pass.
    #[test]
    fn regression_the_final_verification_pass_is_in_the_report() {
        let mut r = run("v");
        r.status = "complete".into();
        r.result.status_reason = Some("verification found 14 problems".into());
        r.result.final_verification = Some(iocurve_analysis::FinalVerification {
            map: "v.map".into(),
            bs: 4096,
            started_at: "t0".into(),
            finished_at: "t1".into(),
            counts: iocurve_analysis::VerifyCounts {
                checked: 3000,
                lost: 14,
                examples: vec!["f.dat block 411: lost write".into()],
                ..Default::default()
            },
            unlisted: 0,
        });
        let page = html(&[r]).unwrap();
        assert!(page.contains("Final verification: 14 problems"), "the verdict");
        assert!(page.contains("14 lost, 0 corrupted, 0 misplaced of 3000 checked blocks"), "the counts");
        assert!(page.contains("f.dat block 411: lost write"), "the first examples");
        assert!(page.contains("and 13 more"), "the rest, with where to get them");
        assert!(page.contains("verification found 14 problems"), "the status reason");
        assert!(page.contains("verify-bad"));
    }

    #[test]
    fn script_data_cannot_close_the_script_element() {
        let v = json!({"label": "</script><script>alert(1)</script>"});
        let s = script_json(&v);
        assert!(!s.contains('<'));
        assert_eq!(serde_json::from_str::<Value>(&s).unwrap(), v);
    }
}
