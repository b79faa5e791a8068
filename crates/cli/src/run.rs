//! `iocurve run`: plan → targets → steps (engine) → analysis → report.
//!
//! This is the local coordinator; a later multi-host coordinator drives agents through the
//! same steps. Every finished step is analysed and printed at once, and the JSON result is
//! written even when the run is interrupted or a step fails, so nothing finished is lost.

use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use iocurve_analysis::{HostInfo, RunResult, SCHEMA_VERSION, StepResult, TargetInfo, Thresholds, WorkloadResult};
use iocurve_engine::backend::probe_io_uring;
use iocurve_engine::target::free_space;
use iocurve_engine::{OpenOptions, StepConfig, TargetSet, host, run_step};
use iocurve_plan::{Backend, Overrides, Pattern, Plan, TargetGroup, WorkloadKeys, suites};
use iocurve_report::{terminal, write_json};

use crate::cli::RunArgs;
use crate::progress::Progress;
use crate::{CliError, signals, time};

/// The scratch file `iocurve run` uses when no target is given.
pub const DEFAULT_SCRATCH: &str = "iocurve-scratch.dat";
const DEFAULT_SCRATCH_SIZE: u64 = 1 << 30;
const MIN_SCRATCH_SIZE: u64 = 64 << 20;

pub fn run(args: RunArgs) -> Result<ExitCode, CliError> {
    let plan = load_plan(&args)?;
    let (plan, backend_note) = choose_backend(plan);
    // Before the targets: a Ctrl-C while a scratch file is prepared then ends the run cleanly,
    // removing the file, instead of killing the process halfway.
    signals::install();
    let targets = open_targets(&plan, &args)?;
    let outcome = execute(&plan, &targets, backend_note);
    let code = match &outcome.error {
        Some(e) => e.exit_code(),
        None if outcome.result.interrupted => ExitCode::from(130),
        None => ExitCode::SUCCESS,
    };
    if let Some(path) = &args.json {
        write_json(&outcome.result, path)
            .map_err(|e| CliError::Runtime(format!("cannot write the JSON result to {}: {e}", path.display())))?;
    }
    match outcome.error {
        Some(e) => Err(e),
        None => Ok(code),
    }
}

fn overrides(args: &RunArgs) -> Overrides {
    Overrides {
        targets: args.targets.clone(),
        keys: WorkloadKeys {
            ramp: args.ramp.clone(),
            queue_depth: args.qd,
            bs: args.bs.map(iocurve_plan::BlockSizeSpec::One),
            warmup_s: args.warmup_s,
            intervals: args.intervals,
            interval_s: args.interval_s,
            backend: args.backend,
            direct: args.buffered.then_some(false),
            threads: args.threads,
            ..Default::default()
        },
        workload_filter: args.workload.clone(),
    }
}

fn load_plan(args: &RunArgs) -> Result<Plan, CliError> {
    let o = overrides(args);
    let mut plan = match (&args.plan, &args.suite) {
        (Some(path), _) => iocurve_plan::load_file(path, &o)?,
        (None, Some(name)) => suites::load(name, &o)?,
        (None, None) => suites::load(suites::DEFAULT_SUITE, &o)?,
    };
    if plan.groups.is_empty() {
        plan.groups = vec![TargetGroup { name: "targets".into(), weight: 1, targets: vec![DEFAULT_SCRATCH.into()] }];
    }
    Ok(plan)
}

/// io_uring where asked and available; psync otherwise, said loudly and recorded.
fn choose_backend(mut plan: Plan) -> (Plan, Option<String>) {
    if !plan.workloads.iter().any(|w| w.backend == Backend::IoUring) {
        return (plan, None);
    }
    match probe_io_uring() {
        Ok(()) => (plan, None),
        Err(e) => {
            let note =
                format!("io_uring is not available here ({e}): falling back to psync, one thread per outstanding I/O");
            eprintln!("WARNING: {note}");
            for w in plan.workloads.iter_mut().filter(|w| w.backend == Backend::IoUring) {
                w.backend = Backend::Psync;
            }
            (plan, Some(note))
        }
    }
}

/// Scratch size: --size, else 1 GiB or half the free space when that is less.
fn scratch_size(args: &RunArgs, plan: &Plan) -> Result<u64, CliError> {
    if let Some(s) = args.size {
        return Ok(s);
    }
    let creates: Vec<&str> = plan
        .groups
        .iter()
        .flat_map(|g| g.targets.iter())
        .map(String::as_str)
        .filter(|t| !Path::new(t).exists())
        .collect();
    let Some(first) = creates.first() else {
        return Ok(DEFAULT_SCRATCH_SIZE);
    };
    let dir = Path::new(first).parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let free = free_space(dir).unwrap_or(u64::MAX);
    let fit = (free / 2 / creates.len() as u64) >> 20 << 20;
    if fit < MIN_SCRATCH_SIZE {
        return Err(CliError::Usage(format!(
            "not enough free space in {} for a scratch file ({} MiB free, at least {} MiB needed): free some space, give --size, or name a --target",
            dir.display(),
            free >> 20,
            (2 * MIN_SCRATCH_SIZE) >> 20
        )));
    }
    Ok(fit.min(DEFAULT_SCRATCH_SIZE))
}

fn open_targets(plan: &Plan, args: &RunArgs) -> Result<TargetSet, CliError> {
    let scratch_size = scratch_size(args, plan)?;
    let creating = plan
        .groups
        .iter()
        .flat_map(|g| &g.targets)
        .filter(|t| !Path::new(t.as_str()).exists() && !t.contains(['*', '?', '[']))
        .count();
    if creating > 0 {
        println!(
            "preparing {creating} scratch file(s) of {} (written fully once, so reads hit allocated blocks)",
            iocurve_plan::format_size(scratch_size)
        );
    }
    let opts =
        OpenOptions { write: plan.writes(), scratch_size, keep: args.keep, allow_write: args.allow_write.clone() };
    Ok(TargetSet::open(&plan.groups, &opts)?)
}

struct Outcome {
    result: RunResult,
    error: Option<CliError>,
}

fn execute(plan: &Plan, targets: &TargetSet, backend_note: Option<String>) -> Outcome {
    let facts = host::facts();
    let started_at = time::now_rfc3339();
    let mut progress = Progress::new(plan.total_seconds());
    let th = Thresholds::default();
    let mut workloads: Vec<WorkloadResult> = Vec::new();
    let mut error = None;
    let nw = plan.workloads.len();
    'plan: for (wi, w) in plan.workloads.iter().enumerate() {
        let seq = w.pattern == Pattern::Sequential;
        let threads = if w.threads == 0 { host::cores() } else { w.threads as usize };
        let mut steps: Vec<StepResult> = Vec::new();
        for (si, &workers) in w.ramp.iter().enumerate() {
            if signals::STOP.load(Ordering::Relaxed) {
                break;
            }
            progress.start_step(&w.name, wi + 1, nw, si + 1, w.ramp.len(), workers);
            let cfg = StepConfig { workload: w, workers, backend: w.backend, threads, targets, stop: &signals::STOP };
            match run_step(&cfg, &mut |p| progress.update(p)) {
                Ok(rec) => {
                    let s = iocurve_analysis::analyze_step(&rec, seq, &th);
                    progress.finish_step(w.step_seconds(), &s);
                    let empty = rec.intervals.is_empty();
                    if !empty {
                        steps.push(s);
                    }
                }
                Err(e) => {
                    error = Some(CliError::Engine(e));
                    if !steps.is_empty() {
                        workloads.push(iocurve_analysis::analyze_workload(w, steps));
                    }
                    break 'plan;
                }
            }
        }
        if !steps.is_empty() {
            let r = iocurve_analysis::analyze_workload(w, steps);
            progress.print(&terminal::workload_report(&r));
            workloads.push(r);
        }
        if signals::STOP.load(Ordering::Relaxed) {
            break;
        }
    }
    progress.finish();
    let backend = plan.workloads.first().map(|w| w.backend.name()).unwrap_or("none").to_string();
    let result = RunResult {
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        finished_at: time::now_rfc3339(),
        interrupted: signals::STOP.load(Ordering::Relaxed),
        host: HostInfo {
            hostname: facts.hostname,
            kernel: facts.kernel,
            cpu_model: facts.cpu_model,
            cores: facts.cores,
            backend,
            backend_note,
        },
        targets: targets
            .targets
            .iter()
            .map(|t| TargetInfo {
                path: t.path.display().to_string(),
                kind: t.kind.name().into(),
                size: t.size,
                logical_block: t.logical_block,
                group: targets.groups[t.group].name.clone(),
                scratch: t.created,
            })
            .collect(),
        plan: serde_json::to_value(plan).unwrap_or_default(),
        workloads,
    };
    print_summary(&result);
    Outcome { result, error }
}

fn print_summary(r: &RunResult) {
    println!("\nSummary ({} on {}, back-end {})", r.started_at, r.host.hostname, r.host.backend);
    if let Some(n) = &r.host.backend_note {
        println!("! {n}");
    }
    for w in &r.workloads {
        println!("{}", w.name);
        for l in terminal::summary_lines(w) {
            println!("{l}");
        }
        let flagged = w.steps.iter().filter(|s| !s.flags.is_empty()).count();
        if flagged > 0 {
            println!("  ! {flagged} of {} steps flagged (see the table above)", w.steps.len());
        }
    }
    if r.interrupted {
        println!("\n! interrupted: the figures cover the intervals finished before the stop");
    }
}
