//! The HTML report: one self-contained file (data as JSON, uPlot and our drawing code inlined,
//! no network access of any kind) that opens offline and can be mailed or published.
//!
//! The tables are rendered here with the terminal's number formats; the charts are drawn in
//! the browser by `assets/report.js` from the embedded data. Neither computes a figure: the
//! analysis did. Several runs make a comparison report: one series per run in every chart and
//! an impact table per run against the first (the baseline).

use iocurve_analysis::{At, Impact, LatencyBucket, RunResult, StepResult, WorkloadResult, compare};
use minijinja::Environment;
use serde::Serialize;
use serde_json::{Value, json};

use crate::format;
use crate::terminal;

mod charts;
mod grid;
mod overview;
mod seconds;
mod timeline;
mod views;

use charts::*;
use views::*;

const TEMPLATE: &str = include_str!("../../assets/report.html");

const APP_JS: &str = include_str!("../../assets/report.js");

const APP_CSS: &str = include_str!("../../assets/report.css");

const UPLOT_JS: &str = include_str!("../../assets/uplot/uPlot.iife.min.js");

const UPLOT_CSS: &str = include_str!("../../assets/uplot/uPlot.min.css");

const UPLOT_LICENSE: &str = include_str!("../../assets/uplot/LICENSE");

/// Series colours: one per run (and per further workload of the same pattern within a run).
/// Series colours. Blue and orange are not among them: in the published charts they mark the
/// optimum and the maximum ([`OPTIMUM`], [`MAXIMUM`]).
const PALETTE: [&str; 8] = ["#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22", "#d62728"];
/// The optimum's mark.
pub const OPTIMUM: &str = "#1f77b4";
/// The maximum's mark.
pub const MAXIMUM: &str = "#ff7f0e";

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

/// Workloads of one access pattern (kind, read share, block size, queue depth) from every run:
/// frontend and backend of the same pattern share their charts.
struct Group<'a> {
    title: String,
    /// Rate ramps (steps are target rates) chart apart from worker ramps.
    rate: bool,
    /// Queue-depth ramps (steps are depths at one worker count) chart apart too.
    by_depth: bool,
    members: Vec<(usize, &'a WorkloadResult)>,
}

/// Renders the report of one run, or the comparison of several (the first is the baseline).
pub fn html(runs: &[ReportRun]) -> Result<String, minijinja::Error> {
    let grids = grid::heat_maps(runs);
    // A grid charts as a queue-depth ramp per worker count; its heat maps show it whole.
    let charted = grid::with_rows(runs);
    let groups = group(&charted);
    let series = series_of(&charted, &groups);
    let (matrices, matrix_data) = overview::matrices(&charted, &groups);
    let timelines: Vec<Value> = runs.iter().enumerate().filter_map(|(i, r)| timeline::timeline(i, r)).collect();
    let timeline_views: Vec<Value> =
        timelines.iter().map(|t| timeline::view(t, &runs[t["run"].as_u64().unwrap_or(0) as usize])).collect();
    let data = json!({
        "matrices": matrix_data,
        "runs": runs.iter().enumerate().map(|(i, r)| json!({
            "title": r.title(),
            "color": PALETTE[i % PALETTE.len()],
            "sla_mean_us": r.result.sla.and_then(|s| s.mean_ms).map(|v| v * 1000.0),
            "sla_p99_us": r.result.sla.and_then(|s| s.p99_ms).map(|v| v * 1000.0),
            // What a chart's PNG and SVG exports carry of their run (issue 43).
            "about": run_about(r),
            // Its marks, Unix seconds: lines on every timeline of the run (issue 44).
            "marks": r.result.marks.iter().map(|m| json!({ "t": m.at_unix_ns as f64 / 1e9, "text": m.text })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
        "timelines": timelines,
        // The iocurve that wrote the report: the `Software` of its exported charts.
        "version": env!("CARGO_PKG_VERSION"),
        "buckets": bucket_labels(runs),
        "bucket_tops": bucket_tops(runs),
        "groups": groups.iter().enumerate().map(|(gi, g)| json!({
            "id": format!("g{gi}"),
            "title": g.title,
            "sequential": g.members[0].1.kind == "sequential",
            "unit": if g.members[0].1.kind == "sequential" { "MB/s" } else { "IOPS" },
            // A rate ramp's steps are its target rates (in the unit), not worker counts.
            "rate": g.rate,
            // What the x axis counts: workers, or a queue-depth ramp's depths.
            "by_depth": g.by_depth,
            "series": series[gi].iter().map(|s| s.data.clone()).collect::<Vec<_>>(),
            // The other loop of the same pattern (a rate ramp beside a worker ramp): drawn
            // over this group's response-time curve, closed and open loop together.
            "overlay": overlays(&groups, gi),
        })).collect::<Vec<_>>(),
    });
    let views: Vec<GroupView> = groups
        .iter()
        .enumerate()
        .map(|(gi, g)| GroupView {
            id: format!("g{gi}"),
            title: g.title.clone(),
            rate: g.rate,
            by_depth: g.by_depth,
            step_headers: if g.rate {
                terminal::RATE_HEADERS.to_vec()
            } else {
                // `views::step_rows`: the terminal's columns, then errors, the longest stall, flags.
                terminal::STEP_HEADERS.iter().chain(&["errors", "longest stall s", "flags"]).copied().collect()
            },
            summary: series[gi]
                .iter()
                .zip(&g.members)
                .map(|(s, &(ri, _))| summary_row(s, &charted[ri].result))
                .collect(),
            steps: series[gi]
                .iter()
                .zip(&g.members)
                .map(|(s, &(ri, _))| StepTable {
                    series: s.label.clone(),
                    headers: Vec::new(),
                    rows: step_rows(s.w),
                    // A backend's coverage per step, on a line under the table (a column made
                    // the printed table wider than the page).
                    coverage: crate::terminal::coverage_line(&charted[ri].result, s.w).map(|l| l.trim().to_string()),
                })
                .collect(),
            cache_only: g.members.iter().any(|(_, w)| iocurve_analysis::overview::cache_only(w)),
            hosts: series[gi]
                .iter()
                .filter(|s| s.w.steps.iter().any(|st| !st.host_results.is_empty()))
                .map(|s| StepTable {
                    series: s.label.clone(),
                    headers: Vec::new(),
                    rows: host_rows(s.w),
                    coverage: None,
                })
                .collect(),
            directions: series[gi]
                .iter()
                .filter_map(|s| {
                    views::direction_rows(s.w).map(|(headers, rows)| StepTable {
                        series: s.label.clone(),
                        headers,
                        rows,
                        coverage: None,
                    })
                })
                .collect(),
            directions_title: if series[gi].iter().any(|s| s.w.steps.iter().any(|st| st.trim.ops > 0)) {
                "Reads, writes and trims"
            } else {
                "Reads and writes"
            },
            steady: series[gi].iter().any(|s| s.w.steps.iter().any(|st| st.steady_state.is_some())),
            heat: series[gi]
                .iter()
                .any(|s| s.w.steps.iter().any(|st| st.samples.iter().any(|x| !x.lat_hist.is_empty()))),
            qos: series[gi].iter().any(|s| s.w.steps.iter().any(|st| !st.exceedance.is_empty())),
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
        overviews => overview::overviews(runs),
        matrices,
        glance => overview::glance(runs),
        timelines => timeline_views,
        tool_version => runs.first().map(|r| r.result.tool_version.clone()).unwrap_or_default(),
        runs => heads,
        groups => views,
        host_headers => terminal::HOST_HEADERS,
        impacts => impacts(runs),
        grids,
        rate_impacts => views::rate_impacts(runs),
        rate_impact_headers => terminal::RATE_IMPACT_HEADERS,
        css => APP_CSS,
        uplot_css => UPLOT_CSS,
        uplot_js => UPLOT_JS,
        uplot_license => UPLOT_LICENSE,
        app_js => APP_JS,
        data => script_json(&data),
    })
}

/// The groups of the same pattern driven the other way (closed loop against open loop), by id.
fn overlays(groups: &[Group], gi: usize) -> Vec<String> {
    let key = |g: &Group| {
        let mut k = pattern_key(g.members[0].1);
        k.4 = (false, false);
        k
    };
    groups
        .iter()
        .enumerate()
        .filter(|&(k, g)| k != gi && g.rate != groups[gi].rate && !g.by_depth && !groups[gi].by_depth)
        .filter(|(_, g)| key(g) == key(&groups[gi]))
        .map(|(k, _)| format!("g{k}"))
        .collect()
}

/// A run as a chart's exports name it in their metadata (issue 43): its id, label, start, host,
/// back-end, plan and the iocurve that measured it.
fn run_about(r: &ReportRun) -> Value {
    json!({
        "id": r.id,
        "label": r.label,
        "started": r.result.started_at,
        "host": r.result.host.facts.hostname,
        "hosts": r.result.host.agents.iter().map(|a| a.address.clone()).collect::<Vec<_>>(),
        "backend": r.result.host.backend,
        "version": r.result.tool_version,
        "plan": r.plan,
    })
}

/// JSON that is safe inside a `<script>` element: `<` never appears literally, so neither
/// `</script>` nor `<!--` in a label can end or confuse the element.
fn script_json(v: &Value) -> String {
    v.to_string().replace('<', "\\u003c")
}

/// Rate ramps, worker ramps and queue-depth ramps of one pattern chart apart: their x axes
/// differ.
fn pattern_key(w: &WorkloadResult) -> (String, u64, String, u32, (bool, bool), String) {
    (
        w.kind.clone(),
        (w.read_pct * 1000.0).round() as u64,
        w.bs.clone(),
        // A queue-depth ramp's series share a chart whatever depth they start at.
        if w.ramps_queue_depth() { 0 } else { w.queue_depth },
        (terminal::is_rate_ramp(w), w.ramps_queue_depth()),
        w.shape.clone(),
    )
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
    let shape = if w.shape.is_empty() { String::new() } else { format!(", {}", w.shape) };
    // A concurrent step's total: its members at one time (each charted on its own too).
    if !w.members.is_empty() {
        return format!("concurrent step {}: {} at one time", w.name, w.bs);
    }
    if terminal::is_rate_ramp(w) {
        return format!("{} {rw}, {}, rate ramp{shape}", w.kind, w.bs);
    }
    if w.ramps_queue_depth() {
        return format!("{} {rw}, {}, queue-depth ramp{shape}", w.kind, w.bs);
    }
    format!("{} {rw}, {}, qd {}{shape}", w.kind, w.bs, w.queue_depth)
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
                    let (rate, by_depth) = key.4;
                    keys.push(key);
                    groups.push(Group { title: pattern_title(w), rate, by_depth, members: vec![(ri, w)] });
                }
            }
        }
    }
    groups
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
    fn cumulative_shares_reach_100_only_with_the_last_io() {
        let b = |to_us: Option<f64>, count: u64| LatencyBucket { from_us: 0.0, to_us, count, pct: 0.0 };
        let h = [b(Some(100.0), 3), b(Some(250.0), 0), b(Some(500.0), 199_996), b(Some(1000.0), 1), b(None, 0)];
        assert_eq!(cumulative_pct(&h), vec![json!(0.0015), json!(0.0015), json!(99.99), json!(100), json!(100)]);
        assert_eq!(bucket_top(&h[2]).as_deref(), Some("500 µs"));
        assert_eq!(bucket_top(&h[3]).as_deref(), Some("1 ms"));
        assert_eq!(bucket_top(&h[4]), None);
        assert_eq!(cumulative_pct(&[b(None, 0)]), vec![json!(0)]);
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
                        ..Default::default()
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
                reclaims: Vec::new(),
                marks: Vec::new(),
                array: Vec::new(),
                array_checks: Vec::new(),
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
