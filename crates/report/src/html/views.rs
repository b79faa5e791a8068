//! What the template shows of each run and pattern: the facts, warnings, tables and impact
//! rows, formatted as the terminal formats them.

use super::*;

#[derive(Serialize)]
pub(super) struct RunHead {
    pub(super) title: String,
    pub(super) color: &'static str,
    pub(super) plan: String,
    pub(super) status: String,
    pub(super) started: String,
    pub(super) finished: String,
    pub(super) measured: String,
    pub(super) host: String,
    pub(super) targets: Vec<String>,
    pub(super) backend: String,
    /// A multi-host run: each agent's host and back-end (`host` is then the coordinator).
    pub(super) agents: Vec<String>,
    pub(super) sla: Option<String>,
    pub(super) warnings: Vec<String>,
    /// Why the run is not clean (a failure, or what its exit code 3 or 4 stands for).
    pub(super) status_reason: Option<String>,
    pub(super) verification: Option<VerificationView>,
    pub(super) reclaims: Vec<ReclaimView>,
}

/// A reclaim step (`[[reclaim]]`): its passes, the used space over time, its verdict.
#[derive(Serialize)]
pub(super) struct ReclaimView {
    pub(super) name: String,
    pub(super) what: String,
    /// pass, bytes, seconds, IOPS, MB/s, mean, p99.
    pub(super) passes: Vec<Vec<String>>,
    pub(super) zeros: String,
    pub(super) used: Option<String>,
    /// (seconds after the trims, used) of the probes, at most 30 of them.
    pub(super) timeline: Vec<(String, String)>,
    pub(super) back: bool,
    /// The used space was measured (a probe): the verdict is good or bad news, else neither.
    pub(super) measured: bool,
    pub(super) verdict: String,
}

fn reclaim_view(c: &iocurve_analysis::ReclaimResult) -> ReclaimView {
    use iocurve_analysis::format::size;
    let passes = [("write", &c.write), ("trim", &c.trim), ("read the trimmed ranges", &c.read)]
        .into_iter()
        .map(|(w, p)| {
            vec![
                w.to_string(),
                size(p.bytes),
                format!("{:.2}", p.seconds),
                format::iops(p.iops),
                format::mbps_number(p.mbps),
                format::lat_us(p.lat_us.mean),
                format::lat_us(p.lat_us.p99),
            ]
        })
        .collect();
    let step = c.timeline.len().div_ceil(30).max(1);
    let mut timeline: Vec<(String, String)> =
        c.timeline.iter().step_by(step).map(|(t, u)| (format!("{t:.1}"), size(*u))).collect();
    if let Some((t, u)) = c.timeline.last().filter(|_| !(c.timeline.len() - 1).is_multiple_of(step)) {
        timeline.push((format!("{t:.1}"), size(*u)));
    }
    ReclaimView {
        name: c.name.clone(),
        what: format!(
            "{} on {} target{}, blocks of {}, {} in flight; used space: {}",
            size(c.region_bytes),
            c.targets.len(),
            if c.targets.len() == 1 { "" } else { "s" },
            iocurve_plan::format_size(c.bs),
            c.queue_depth,
            if c.probe.is_empty() { "not measured" } else { &c.probe }
        ),
        passes,
        zeros: format!(
            "{} of {} blocks of the trimmed ranges read back as zeros",
            format::group(c.zero_blocks),
            format::group(c.read.ops)
        ),
        used: c.used.map(|u| {
            format!(
                "{} before, {} after the writes, {} right after the trims, {} at the end",
                size(u.before),
                size(u.after_write),
                size(u.after_trim),
                size(u.last)
            )
        }),
        timeline,
        back: c.back_after_s.is_some(),
        measured: c.used.is_some() && c.error.is_none(),
        verdict: c.verdict(),
    }
}

/// The final verification pass of a run.
#[derive(Serialize)]
pub(super) struct VerificationView {
    /// `no problems` or `14 problems`.
    pub(super) verdict: String,
    pub(super) problems: bool,
    pub(super) counts: String,
    pub(super) map: String,
    pub(super) when: String,
    pub(super) examples: Vec<String>,
    pub(super) more: Option<String>,
}

pub(super) fn verification_view(v: &iocurve_analysis::FinalVerification) -> VerificationView {
    let n = v.counts.problems();
    let shown = v.counts.examples.len() as u64;
    VerificationView {
        verdict: v.counts.verdict(),
        problems: n > 0 || v.counts.unreadable > 0,
        counts: v.counts.describe(),
        map: format!("{} (blocks of {})", v.map, format::size(v.bs)),
        when: format!("{} – {}", v.started_at, v.finished_at),
        examples: v.counts.examples.clone(),
        more: (n > shown).then(|| {
            format!("… and {} more: every problem with `iocurve export RUN --format problems -o FILE.csv`", n - shown)
        }),
    }
}

#[derive(Serialize)]
pub(super) struct GroupView {
    pub(super) id: String,
    pub(super) title: String,
    /// A rate ramp: steps are target rates, not worker counts.
    pub(super) rate: bool,
    /// A queue-depth ramp's steps: its depths.
    pub(super) by_depth: bool,
    /// The column headers of its step tables.
    pub(super) step_headers: Vec<&'static str>,
    pub(super) summary: Vec<SummaryRow>,
    pub(super) steps: Vec<StepTable>,
    /// Per-host tables of the series that ran on several hosts.
    pub(super) hosts: Vec<StepTable>,
    /// Reads and writes apart, for the series that mix them (issue 39), and trims (issue 40).
    pub(super) directions: Vec<StepTable>,
    /// Their heading: "Reads and writes", or "Reads, writes and trims" where some trim.
    pub(super) directions_title: &'static str,
    /// Some step has the SNIA steady-state check (5 intervals or more): its window is drawn.
    pub(super) steady: bool,
    /// Some step kept its seconds' latency histograms: the chosen step's heat map is drawn
    /// (issue 44).
    pub(super) heat: bool,
    /// Some step has an exceedance curve: the workload's QoS plot is drawn (issue 44).
    pub(super) qos: bool,
    /// Some series is a frontend: its figures are cache-only, not for sizing (said under the
    /// title).
    pub(super) cache_only: bool,
    /// What an array makes of each writing series' data (empty for reads).
    pub(super) data: Vec<DataTable>,
}

#[derive(Serialize)]
pub(super) struct DataTable {
    pub(super) series: String,
    pub(super) pattern: String,
    pub(super) rows: Vec<[String; 4]>,
}

#[derive(Serialize)]
pub(super) struct SummaryRow {
    pub(super) series: String,
    pub(super) workload: String,
    pub(super) color: &'static str,
    pub(super) dashed: bool,
    pub(super) speed: String,
    pub(super) optimum: String,
    pub(super) maximum: String,
    pub(super) sla_maximum: String,
    pub(super) min_lat: String,
    pub(super) flagged: String,
    /// A frontend: cache-only, not for sizing.
    pub(super) cache_only: bool,
    /// Lines under the table: the vendor's claim against the measurement, the links' transfer
    /// floor (issue 42).
    pub(super) notes: Vec<String>,
}

#[derive(Serialize)]
pub(super) struct StepTable {
    pub(super) series: String,
    /// The table's own headers where they vary (the directions table); empty: the section's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) headers: Vec<String>,
    pub(super) rows: Vec<Vec<String>>,
    /// A backend's coverage at every step, a line under the table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) coverage: Option<String>,
}

#[derive(Serialize)]
pub(super) struct ImpactView {
    pub(super) title: String,
    pub(super) rows: Vec<ImpactRow>,
    /// How the runs differ in what they measured (empty: like with like).
    pub(super) differ: Vec<String>,
}

/// A run against the baseline at every target rate both drove a workload at (rate ramps).
#[derive(Serialize)]
pub(super) struct RateImpactView {
    pub(super) title: String,
    /// The terminal's columns (`terminal::rate_impact_cells`), and the p99 change's class.
    pub(super) rows: Vec<(Vec<String>, &'static str)>,
}

#[derive(Serialize)]
pub(super) struct ImpactRow {
    pub(super) workload: String,
    pub(super) baseline: String,
    pub(super) run: String,
    pub(super) throughput: String,
    pub(super) noise: String,
    pub(super) latency: String,
    /// `worse`, `better` or empty: throughput down or latency up is worse.
    pub(super) throughput_class: &'static str,
    pub(super) latency_class: &'static str,
}

pub(super) fn summary_row(s: &Series, r: &RunResult) -> SummaryRow {
    let w = s.w;
    let seq = w.kind == "sequential";
    let flagged = w.steps.iter().filter(|s| !s.flags.is_empty()).count();
    // "speed" only for a step of one worker (the column's header says what a rate ramp's is).
    let speed = match iocurve_analysis::overview::speed_name(w) {
        "lowest step" => format!("lowest step: {}", terminal::point_cell(&w.speed, seq)),
        _ => terminal::point_cell(&w.speed, seq),
    };
    let coverage =
        w.maximum.and_then(|p| w.steps.get(p.step)).and_then(|st| iocurve_analysis::overview::coverage(r, w, st));
    SummaryRow {
        series: s.label.clone(),
        workload: w.name.clone(),
        color: s.color,
        dashed: s.dashed,
        cache_only: iocurve_analysis::overview::cache_only(w),
        speed,
        optimum: terminal::point_cell(&w.optimum, seq),
        maximum: match (&w.maximum_undecided, &w.links) {
            (Some(u), _) => format!("undecided: {}", u.reason),
            (None, Some(l)) => format!("{} — {}", terminal::point_cell(&w.maximum, seq), l.describe(format::mbps)),
            (None, None) => terminal::point_cell(&w.maximum, seq),
        },
        sla_maximum: match &w.sla_maximum_undecided {
            Some(u) => format!("undecided: {}", u.reason),
            None => terminal::point_cell(&w.sla_maximum, seq),
        },
        min_lat: w.min_lat_us.map_or_else(|| "—".into(), |v| format!("{} µs", format::lat_us(v))),
        flagged: if flagged == 0 { String::new() } else { format!("{flagged} of {}", w.steps.len()) },
        notes: w
            .claim
            .iter()
            .map(|c| c.says.clone())
            .chain(w.transfer_floor.iter().map(|f| {
                format!("{}: one block's payload time on the link, under every latency through it", f.describe())
            }))
            .chain(coverage.map(|c| format!("the maximum's step {} (every step's in the step table)", c.describe())))
            .collect(),
    }
}

/// The step table: the terminal's columns, plus errors and the longest stall (a rate ramp: the
/// terminal's rate columns).
pub(super) fn step_rows(w: &WorkloadResult) -> Vec<Vec<String>> {
    if terminal::is_rate_ramp(w) {
        return w.steps.iter().map(|s| terminal::rate_cells(s, w.kind == "sequential")).collect();
    }
    w.steps
        .iter()
        .map(|s| {
            let mut row = terminal::step_cells(w, s);
            row.extend([format::group(s.errors), format!("{:.2}", s.longest_stall_s), terminal::flag_codes(s)]);
            row
        })
        .collect()
}

/// Each step's reads, writes and trims apart, for a workload that mixes directions (None: one
/// direction): the headers, then a row per step. Trims have columns only where they happen.
pub(super) fn direction_rows(w: &WorkloadResult) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    let mixes =
        |s: &iocurve_analysis::StepResult| [s.read.ops, s.write.ops, s.trim.ops].iter().filter(|&&n| n > 0).count() > 1;
    if !w.steps.iter().any(mixes) {
        return None;
    }
    let trims = w.steps.iter().any(|s| s.trim.ops > 0);
    let mut headers = vec!["step".to_string()];
    for d in ["read", "write", "trim"].iter().take(if trims { 3 } else { 2 }) {
        headers.extend(["IOPS", "MB/s", "mean µs", "p99 µs"].map(|h| format!("{d} {h}")));
    }
    let dir = |d: &iocurve_analysis::DirResult| {
        [format::iops(d.iops), format::mbps_number(d.mbps), format::lat_us(d.lat_us.mean), format::lat_us(d.lat_us.p99)]
    };
    let rows = w
        .steps
        .iter()
        .map(|s| {
            let mut row = vec![terminal::step_label(w, s)];
            row.extend(dir(&s.read));
            row.extend(dir(&s.write));
            if trims {
                row.extend(dir(&s.trim));
            }
            row
        })
        .collect();
    Some((headers, rows))
}

/// The per-host table: every host of every step, as the terminal shows it.
pub(super) fn host_rows(w: &WorkloadResult) -> Vec<Vec<String>> {
    w.steps.iter().flat_map(|s| s.host_results.iter().map(move |h| terminal::host_cells(w, s, h))).collect()
}

pub(super) fn run_head(i: usize, r: &ReportRun) -> RunHead {
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
        if let Some(why) = &a.lost {
            warnings.push(format!("agent {} was lost before the first step and took no part ({why})", a.address));
        }
        warnings.extend(crate::terminal::lost_mid_run(a));
    }
    if let Some(v) = res.final_verification.as_ref().filter(|v| v.counts.problems() > 0) {
        warnings.push(format!("final verification: {}", v.counts.describe()));
    }
    for w in &res.workloads {
        for n in &w.notes {
            warnings.push(format!("{}: {n}", w.name));
        }
        for s in &w.steps {
            for f in &s.flags {
                warnings.push(format!("{}, {}: {}", w.name, terminal::step_label(w, s), f.message));
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
        reclaims: res.reclaims.iter().map(reclaim_view).collect(),
    }
}

pub(super) fn impact_row(i: &Impact) -> ImpactRow {
    let class = |v: Option<f64>, worse_when_up: bool| match v {
        Some(v) if v.abs() >= 0.5 && (v > 0.0) == worse_when_up => "worse",
        Some(v) if v.abs() >= 0.5 => "better",
        _ => "",
    };
    ImpactRow {
        workload: terminal::impact_workload(i),
        baseline: terminal::impact_point(&i.baseline, i.in_mbps, i.baseline_undecided),
        run: terminal::impact_point(&i.run, i.in_mbps, i.run_undecided),
        throughput: terminal::impact_throughput(i),
        noise: terminal::noise(i.noise_pct),
        latency: terminal::impact_latency(i),
        // A change within the runs' noise is no finding: not coloured.
        throughput_class: if i.within_noise() { "" } else { class(i.throughput_pct, false) },
        latency_class: class(i.latency_pct, true),
    }
}

/// Per run after the first that shares target rates with the baseline: the response time at
/// each of them on both sides.
pub(super) fn rate_impacts(runs: &[ReportRun]) -> Vec<RateImpactView> {
    let Some((base, rest)) = runs.split_first() else { return Vec::new() };
    rest.iter()
        .filter_map(|r| {
            let rows = iocurve_analysis::compare::rate_impacts(&base.result, &r.result);
            (!rows.is_empty()).then(|| RateImpactView {
                title: format!("{} against {}, at the same target rate", r.title(), base.title()),
                rows: rows
                    .iter()
                    .map(|i| {
                        let class = match i.p99_pct {
                            Some(v) if v >= 0.5 => "worse",
                            Some(v) if v <= -0.5 => "better",
                            _ => "",
                        };
                        (terminal::rate_impact_cells(i), class)
                    })
                    .collect(),
            })
        })
        .collect()
}

/// Per run after the first: its impact against the baseline at the maximum, the optimum and
/// (when either has SLA bounds) the SLA maximum.
pub(super) fn impacts(runs: &[ReportRun]) -> Vec<ImpactView> {
    let Some((base, rest)) = runs.split_first() else { return Vec::new() };
    let mut out = Vec::new();
    for r in rest {
        let mut ats = vec![At::Maximum, At::Optimum];
        if base.result.sla.is_some() || r.result.sla.is_some() {
            ats.push(At::Sla);
        }
        // What the two runs measured differently, as `compare` says it (found by an outside
        // test: a zipf run against a uniform one showed its impact without a word).
        let differ = iocurve_analysis::compare::differences(&base.result, &r.result);
        for at in ats {
            out.push(ImpactView {
                title: format!("{} against {}, at the {}", r.title(), base.title(), at.name()),
                rows: compare(&base.result, &r.result, at).iter().map(impact_row).collect(),
                differ: differ.clone(),
            });
        }
    }
    out
}
