//! Commands on stored runs: `runs`, `show`, `delete`. A stored run goes through the same
//! analysis and report as a fresh one, so `show` prints what the run printed.

use std::path::Path;
use std::process::ExitCode;

use iocurve_analysis::{
    At, Headline, HostInfo, RunFacts, RunResult, Sla, TargetInfo, Thresholds, analyze_step_on, analyze_workload,
};
use iocurve_plan::{Pattern, Workload};
use iocurve_report::html::{self, ReportRun};
use iocurve_report::{export, terminal, write_json};
use iocurve_store::StoredRun;

use crate::CliError;
use crate::cli::{AtArg, ExportFormat, SlaArgs};
use iocurve_run::{open_existing_store, open_read_store};

/// What the status column says: a run still marked running was killed (or is running now).
fn status(s: &str) -> &'static str {
    iocurve_analysis::Status::stored(s).as_str()
}

/// One SLA bound for runs compared, or their SLA maxima measure different things: the
/// options', else the first run's (the baseline's) that has one. Before, each run took its
/// own stored bound, and a baseline without one refused `--at sla` beside a run that had one.
fn one_sla<'a>(runs: impl Iterator<Item = &'a StoredRun>, options: &SlaArgs) -> SlaArgs {
    if options.mean_ms.is_some() || options.p99_ms.is_some() {
        return SlaArgs { mean_ms: options.mean_ms, p99_ms: options.p99_ms };
    }
    let stored = |s: &StoredRun| serde_json::from_str(&s.plan_json).ok().map(|p| plan_sla(&p)).filter(Sla::is_set);
    runs.filter_map(stored).next().map_or_else(SlaArgs::default, |s| SlaArgs { mean_ms: s.mean_ms, p99_ms: s.p99_ms })
}

/// The SLA bounds a stored plan carries (`sla_mean_ms`, `sla_p99_ms`).
fn plan_sla(plan: &serde_json::Value) -> Sla {
    Sla { mean_ms: plan["sla_mean_ms"].as_f64(), p99_ms: plan["sla_p99_ms"].as_f64() }
}

/// Rebuilds the result document of a stored run. SLA bounds given as options win over the
/// stored plan's.
pub fn rebuild(s: &StoredRun, sla_args: &SlaArgs) -> Result<RunResult, CliError> {
    let bad = |what: &str, e: serde_json::Error| {
        CliError::Runtime(format!("run {}: stored {what} is unreadable: {e}", s.run.id))
    };
    let host: HostInfo = serde_json::from_str(&s.host_json).map_err(|e| bad("host", e))?;
    let targets: Vec<TargetInfo> = serde_json::from_str(&s.targets_json).map_err(|e| bad("targets", e))?;
    let plan: serde_json::Value = serde_json::from_str(&s.plan_json).map_err(|e| bad("plan", e))?;
    let stored = plan_sla(&plan);
    let sla = Sla { mean_ms: sla_args.mean_ms.or(stored.mean_ms), p99_ms: sla_args.p99_ms.or(stored.p99_ms) };
    let th = Thresholds::default();
    let paths: Vec<String> = targets.iter().map(|t| t.path.clone()).collect();
    let mut workloads = Vec::new();
    for sw in &s.workloads {
        let w: Workload = serde_json::from_str(&sw.json).map_err(|e| bad("workload", e))?;
        let seq = w.pattern == Pattern::Sequential;
        let results: Vec<_> = sw.steps.iter().map(|r| analyze_step_on(r, seq, &th.for_workload(&w), &paths)).collect();
        if !results.is_empty() {
            let mut r = analyze_workload(&w, results, &sla);
            r.notes.extend(sw.notes.iter().cloned());
            // A concurrent step's total names its members (stored beside it).
            r.members = serde_json::from_str::<serde_json::Value>(&sw.json)
                .ok()
                .and_then(|v| serde_json::from_value(v["members"].clone()).ok())
                .unwrap_or_default();
            if !sw.data_check.is_empty() {
                r.data_check = serde_json::from_str(&sw.data_check).map_err(|e| bad("data check", e))?;
            }
            workloads.push(r);
        }
    }
    let facts = RunFacts {
        tool_version: s.run.tool_version.clone(),
        started_at: s.run.started_at.clone(),
        finished_at: s.run.finished_at.clone().unwrap_or_default(),
        status: iocurve_analysis::Status::stored(&s.run.status),
        status_reason: s.run.status_reason.clone(),
        host,
        sla,
        targets,
        plan,
        final_verification: s.verification.clone(),
        reclaims: s
            .reclaims
            .iter()
            .map(|j| serde_json::from_str(j).map_err(|e| bad("reclaim step", e)))
            .collect::<Result<_, _>>()?,
        marks: s.marks.clone(),
        array: s.array.clone(),
    };
    Ok(RunResult::assemble(facts, workloads))
}

pub fn runs(db: &Path, json: bool) -> Result<ExitCode, CliError> {
    let store = open_read_store(db)?;
    let rows = store.runs()?;
    let mut writer: Option<Option<iocurve_store::Store>> = None;
    let mut listed = Vec::new();
    if rows.is_empty() && !json {
        crate::outln!(
            "no runs in {} yet: `{}` stores every run there",
            db.display(),
            crate::invocation::suggest(&["run"], db)
        );
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Vec::new();
    for r in rows {
        let stored = r.headlines_json.as_deref().and_then(|j| serde_json::from_str::<Vec<Headline>>(j).ok());
        let heads = match stored {
            Some(h) => h,
            None => {
                let h = iocurve_analysis::headlines(&rebuild(&store.load(r.id)?, &SlaArgs::default())?.workloads);
                // Runs stored before schema v12 get theirs once; a run still marked running
                // may be going on (or was killed): its headlines are computed each time.
                // Kept where the database may be written (read on its own, it is opened read-only);
                // best effort: a read-only database is listed all the same.
                if r.status != "running"
                    && let Some(w) = writer.get_or_insert_with(|| iocurve_store::Store::open(db).ok())
                {
                    let _ = w.set_headlines(r.id, &serde_json::to_string(&h).unwrap_or_default());
                }
                h
            }
        };
        // Its reclaim steps' verdicts (issue 40): a plan of reclaim steps alone has no maximum.
        let reclaims: Vec<iocurve_analysis::ReclaimResult> =
            store.reclaims(r.id)?.iter().filter_map(|j| serde_json::from_str(j).ok()).collect();
        if json {
            let verification = store
                .verification(r.id)?
                .map(|v| {
                    serde_json::json!({ "checked": v.counts.checked, "problems": v.counts.problems(), "unreadable": v.counts.unreadable })
                });
            listed.push(serde_json::json!({
                "id": r.id,
                "started_at": r.started_at,
                "finished_at": r.finished_at,
                "label": r.label,
                "plan": r.plan_name,
                "host": r.hostname,
                "backend": r.backend,
                // As the table shows them (the full facts are in `export --format json`).
                "targets": r.targets,
                "status": status(&r.status),
                "status_reason": r.status_reason,
                "tool_version": r.tool_version,
                "verification": verification,
                "maxima": heads,
                "reclaims": reclaims
                    .iter()
                    .map(|c| serde_json::json!({ "name": c.name, "back_after_s": c.back_after_s, "verdict": c.verdict() }))
                    .collect::<Vec<_>>(),
            }));
            continue;
        }
        // One maximum a line: a run of ten workloads stays readable.
        let mut lines: Vec<String> = if heads.is_empty() && !reclaims.is_empty() {
            Vec::new()
        } else {
            vec![terminal::headlines(&heads).replace("; ", "\n")]
        };
        lines.extend(reclaims.iter().map(|c| format!("reclaim {}: {}", c.name, c.verdict())));
        let maxima = lines.join("\n");
        let label = if r.label.is_empty() { String::new() } else { format!("\"{}\"", r.label) };
        let verified = match store.verification(r.id)? {
            Some(v) => match (v.counts.problems(), v.counts.unreadable) {
                (0, 0) => format!("\nverify: clean ({} blocks)", v.counts.checked),
                _ => format!("\nverify: {}", v.counts.verdict()),
            },
            None => String::new(),
        };
        // A run that finished but not clean (exit code 3 or 4) says so beside its status.
        let unclean = if r.status == "complete" && r.status_reason.is_some() { " with failures" } else { "" };
        table.push([
            r.id.to_string(),
            r.started_at.replace('T', " ").chars().take(19).collect(),
            label,
            r.plan_name.clone(),
            r.hostname.clone(),
            r.backend.clone(),
            r.targets.replace(", ", "\n"),
            format!("{}{unclean}{verified}", status(&r.status)),
            maxima,
        ]);
    }
    if json {
        crate::outln!(
            "{}",
            serde_json::to_string_pretty(&listed).unwrap_or_else(|e| unreachable!("JSON values serialise: {e}"))
        );
        return Ok(ExitCode::SUCCESS);
    }
    crate::out!("{}", terminal::runs_table(&table));
    Ok(ExitCode::SUCCESS)
}

pub fn show(db: &Path, id: i64, sla: &SlaArgs) -> Result<ExitCode, CliError> {
    let store = open_read_store(db)?;
    let stored = store.load(id)?;
    let result = rebuild(&stored, sla)?;
    let label = if stored.run.label.is_empty() { String::new() } else { format!(" \"{}\"", stored.run.label) };
    let reason = stored.run.status_reason.as_ref().map(|r| format!(" ({r})")).unwrap_or_default();
    crate::outln!(
        "run {}{label}: plan {}, {}{reason}",
        stored.run.id,
        stored.run.plan_name,
        status(&stored.run.status)
    );
    // What a tender document opens with first: the summary, parameters, key figures and
    // matrices (issue 43); then every workload's steps.
    let title = titled(&stored.run);
    crate::out!("{}", iocurve_report::overview::overview_text(&title, &stored.run.plan_name, &result));
    crate::out!("{}", terminal::run_report(&result));
    // The summary the run ended with, as it printed it.
    crate::out!("{}", terminal::run_summary(&result));
    if let Some(v) = &result.final_verification
        && v.counts.problems() > 0
    {
        let words = ["export", &id.to_string(), "--format", "problems", "-o", "FILE.csv"];
        crate::outln!("  every problem: {}", crate::invocation::suggest(&words, db));
    }
    Ok(ExitCode::SUCCESS)
}

fn titled(r: &iocurve_store::RunRow) -> String {
    if r.label.is_empty() { format!("run {}", r.id) } else { format!("run {} \"{}\"", r.id, r.label) }
}

/// `iocurve compare`: `at` is the point and the expected loss of throughput (percent), if any.
pub fn compare(
    db: &Path,
    baseline: i64,
    runs: &[i64],
    (at, expected_loss): (AtArg, Option<f64>),
    sla: &SlaArgs,
) -> Result<ExitCode, CliError> {
    let at = match at {
        AtArg::Speed => At::Speed,
        AtArg::Maximum => At::Maximum,
        AtArg::Optimum => At::Optimum,
        AtArg::Sla => At::Sla,
    };
    let store = open_read_store(db)?;
    let base_stored = store.load(baseline)?;
    let mut stored_runs = Vec::new();
    for &id in runs {
        stored_runs.push(store.load(id)?);
    }
    let sla = &one_sla(std::iter::once(&base_stored).chain(&stored_runs), sla);
    let base = rebuild(&base_stored, sla)?;
    if at == At::Sla && base.sla.is_none() {
        return Err(CliError::Usage(
            "--at sla needs SLA bounds: give --sla-mean-ms and/or --sla-p99-ms (or set sla_mean_ms in the plan)".into(),
        ));
    }
    for stored in stored_runs {
        let run = rebuild(&stored, sla)?;
        crate::outln!("\n{} against baseline {}, at the {}", titled(&stored.run), titled(&base_stored.run), at.name());
        if let Some(s) = &run.sla.or(base.sla) {
            crate::outln!("SLA: {}", s.describe());
        }
        let differ = iocurve_analysis::compare::differences(&base, &run);
        if !differ.is_empty() {
            crate::outln!(
                "! not like with like — these runs differ in what they measured, so the impacts below mix setup and storage:"
            );
            for d in differ {
                crate::outln!("!   {d}");
            }
        }
        // Workloads pair by their settings; say where labels differ or one side has none.
        for note in iocurve_analysis::pairing::notes(&iocurve_analysis::pairing::pairs(&base, &run)) {
            crate::outln!("· {note}");
        }
        let mut impacts = iocurve_analysis::compare(&base, &run, at);
        if let Some(loss) = expected_loss {
            impacts = iocurve_analysis::compare::expecting(impacts, loss);
        }
        crate::outln!("{}", terminal::impact_table(&impacts));
        for line in terminal::impact_latency_lines(&impacts) {
            crate::outln!("{line}");
        }
        if let Some(note) = terminal::sla_loop_note(&impacts) {
            crate::outln!("{note}");
        }
        let rates = iocurve_analysis::compare::rate_impacts(&base, &run);
        if !rates.is_empty() {
            crate::outln!("response time at the same target rate:");
            crate::outln!("{}", terminal::rate_impact_table(&rates));
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn export(db: &Path, id: i64, format: ExportFormat, output: &Path, sla: &SlaArgs) -> Result<ExitCode, CliError> {
    let store = open_read_store(db)?;
    let stored = store.load(id)?;
    let result = rebuild(&stored, sla)?;
    let write = |path: &Path, text: &str| {
        std::fs::write(path, text).map_err(|e| CliError::Runtime(format!("cannot write {}: {e}", path.display())))
    };
    match format {
        ExportFormat::Json => write_json(&result, output)
            .map_err(|e| CliError::Runtime(format!("cannot write {}: {e}", output.display())))?,
        ExportFormat::FioJson | ExportFormat::FioDir => {
            let records = records_in_step_order(&stored);
            let src = iocurve_report::fio::FioSource { run: &result, records: &records };
            if matches!(format, ExportFormat::FioJson) {
                write(output, &iocurve_report::fio::fio_json(&src))?;
                // Issue 37, finding 6: fio-plot adds a file's jobs up into one bar.
                said(
                    output,
                    format_args!(
                        "wrote {} (one document, a job per step: for scripts that walk the jobs; fio-plot adds a file's jobs up into one bar, so for fio-plot export --format fio-dir)",
                        output.display()
                    ),
                );
                return Ok(ExitCode::SUCCESS);
            } else {
                let files = iocurve_report::fio::fio_dir(&src);
                write_tree(output, &files)?;
                crate::outln!(
                    "wrote {} files under {} (fio-plot: -i {}/WORKLOAD/BS; its timeline, -g, reads the fio logs of the read-only and write-only workloads)",
                    files.len(),
                    output.display(),
                    output.display()
                );
                return Ok(ExitCode::SUCCESS);
            }
        }
        ExportFormat::Problems => return crate::verification::export_problems(&store, id, output),
        ExportFormat::Overview => {
            write(output, &iocurve_report::overview::overview_csv(id, &stored.run.label, &result))?
        }
        ExportFormat::Histograms => {
            let named = named_steps(&stored);
            write(output, &export::histograms_csv(id, &named))?
        }
        ExportFormat::Seconds => write(output, &export::seconds_csv(id, &result))?,
        ExportFormat::Flatfile => {
            // The records of the workloads the result has (those with a finished step).
            let records: Vec<Vec<_>> =
                records_in_step_order(&stored).into_iter().filter(|steps| !steps.is_empty()).collect();
            write(output, &iocurve_report::flatfile::flatfile(&result, &records))?
        }
        ExportFormat::Targets => {
            let named = named_steps(&stored);
            write(output, &export::targets_csv(id, &named, &result.targets))?
        }
        ExportFormat::Csv => {
            if is_stream(output) {
                return Err(CliError::Usage(format!(
                    "--format csv writes two files, the steps and the samples beside them (NAME-samples.csv): give a file path, not {}",
                    output.display()
                )));
            }
            write(output, &export::steps_csv(id, &stored.run.label, &result))?;
            let samples = samples_path(output);
            write(&samples, &export::samples_csv(id, &result))?;
            crate::outln!("wrote {} (steps) and {} (samples)", output.display(), samples.display());
            return Ok(ExitCode::SUCCESS);
        }
    }
    said(output, format_args!("wrote {}", output.display()));
    Ok(ExitCode::SUCCESS)
}

/// Each stored workload's step records in the order of the result's steps: the analysis orders a
/// workload of rate steps by host count and rate (an SLA search probes them out of order, and the
/// store keeps the order they ran in), so the records follow, or an export would put one probe's
/// intervals under another's figures (found in review of issue 43).
fn records_in_step_order(stored: &iocurve_store::StoredRun) -> Vec<Vec<iocurve_stats::StepRecord>> {
    stored
        .workloads
        .iter()
        .map(|w| {
            let mut steps = w.steps.clone();
            if steps.iter().all(|s| s.rate_iops.is_some()) {
                let key = |s: &iocurve_stats::StepRecord| (s.planned_hosts, s.rate_iops.unwrap_or(0.0));
                steps.sort_by(|a, b| iocurve_analysis::workload::rate_order(key(a), key(b)));
            }
            steps
        })
        .collect()
}

/// Each stored workload's name and steps, as the CSV exports of records take them.
fn named_steps(stored: &iocurve_store::StoredRun) -> Vec<(String, Vec<iocurve_stats::StepRecord>)> {
    stored
        .workloads
        .iter()
        .map(|sw| {
            let name = serde_json::from_str::<Workload>(&sw.json).map(|w| w.name).unwrap_or_default();
            (name, sw.steps.clone())
        })
        .collect()
}

/// A device, pipe or socket given as `-o` (`/dev/stdout`): written in place, never beside.
fn is_stream(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

/// What an export or report wrote: on stderr when the output itself is a stream, so that
/// `-o /dev/stdout` gives the document alone (found by an outside attack: "wrote /dev/stdout"
/// followed the JSON).
fn said(output: &Path, msg: std::fmt::Arguments) {
    if is_stream(output) {
        crate::errln!("{msg}");
    } else {
        crate::outln!("{msg}");
    }
}

/// Writes `files` (relative paths) under `dir`, which must be new or empty: an export never
/// mixes its files with another run's or overwrites what is there.
fn write_tree(dir: &Path, files: &[(std::path::PathBuf, String)]) -> Result<(), CliError> {
    let err = |p: &Path, e: std::io::Error| CliError::Runtime(format!("cannot write {}: {e}", p.display()));
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(CliError::Usage(format!(
                    "{} is not empty: give a new or empty directory for the export",
                    dir.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir_all(dir).map_err(|e| err(dir, e))?,
        // Bad input, not a failure of the tool.
        Err(_) if dir.exists() && !dir.is_dir() => {
            return Err(CliError::Usage(format!(
                "{} is a file: give a new or empty directory for the export",
                dir.display()
            )));
        }
        Err(e) => return Err(err(dir, e)),
    }
    for (rel, text) in files {
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| err(parent, e))?;
        }
        std::fs::write(&path, text).map_err(|e| err(&path, e))?;
    }
    Ok(())
}

pub fn report(db: &Path, ids: &[i64], output: &Path, sla: &SlaArgs) -> Result<ExitCode, CliError> {
    let store = open_read_store(db)?;
    let mut loaded = Vec::new();
    for &id in ids {
        loaded.push((id, store.load(id)?));
    }
    let sla = &one_sla(loaded.iter().map(|(_, s)| s), sla);
    let mut runs = Vec::new();
    for (id, stored) in loaded {
        runs.push(ReportRun {
            id,
            label: stored.run.label.clone(),
            plan: stored.run.plan_name.clone(),
            status: status(&stored.run.status).to_string(),
            result: rebuild(&stored, sla)?,
        });
    }
    let page = html::html(&runs).map_err(|e| CliError::Runtime(format!("cannot render the report: {e:#}")))?;
    // Whole, so that a browser reloading the report never sees half of it.
    iocurve_report::write_output(output, page.as_bytes(), "html.tmp")
        .map_err(|e| CliError::Runtime(format!("cannot write {}: {e}", output.display())))?;
    said(output, format_args!("wrote {}", output.display()));
    Ok(ExitCode::SUCCESS)
}

/// `run3.csv` → `run3-samples.csv`.
fn samples_path(steps: &Path) -> std::path::PathBuf {
    let stem = steps.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = steps.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    steps.with_file_name(format!("{stem}-samples{ext}"))
}

pub fn delete(db: &Path, id: i64) -> Result<ExitCode, CliError> {
    let store = open_existing_store(db)?;
    store.delete(id)?;
    crate::outln!("deleted run {id}");
    Ok(ExitCode::SUCCESS)
}
