//! `iocurve run`: plan → targets → steps (engine) → analysis → report.
//!
//! Local and multi-host runs share everything from the steps on: a local run drives one
//! in-process agent on the targets it opened, a multi-host run drives remote agents, both
//! through the same coordinator (`remote::Cluster`). Every finished step is analysed and
//! printed at once, and the JSON result is written even when the run is interrupted or a step
//! fails, so nothing finished is lost.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use iocurve_analysis::{
    AgentHost, HostInfo, RunResult, SCHEMA_VERSION, Sla, StepResult, TargetInfo, Thresholds, WorkloadResult,
};
use iocurve_engine::backend::probe_io_uring;
use iocurve_engine::target::free_space;
use iocurve_engine::target::{DEFAULT_SCRATCH_SIZE, MIN_SCRATCH_SIZE};
use iocurve_engine::{OpenOptions, StepObserver, StepProgress, TargetSet, host};
use iocurve_plan::{Backend, Overrides, Pattern, Plan, TargetGroup, suites};
use iocurve_report::{terminal, write_json};
use iocurve_stats::{CpuUsage, IntervalStats, StepRecord};
use iocurve_store::{NewRun, Store, StoreError};

use crate::cli::RunArgs;
use crate::progress::Progress;
use crate::{CliError, precondition, remote, signals, time, verification};

/// The scratch file `iocurve run` uses when no target is given.
pub const DEFAULT_SCRATCH: &str = "iocurve-scratch.dat";

pub fn run(args: RunArgs) -> Result<ExitCode, CliError> {
    let plan = load_plan(&args)?;
    // A result that cannot be written is bad input, found before any I/O, not after the run.
    if let Some(path) = &args.json {
        check_output(path, "--json")?;
    }
    verification::check_plan(&plan)?;
    // Before the targets: a Ctrl-C while a scratch file is prepared then ends the run cleanly,
    // removing the file, instead of killing the process halfway.
    if !args.hosts.is_empty() || !plan.hosts.is_empty() {
        // Each agent chooses its back-end and checks every step against its own host.
        signals::install();
        return run_on_agents(plan, &args);
    }
    let (plan, backend_note) = choose_backend(plan);
    // Every step must fit this host before anything is opened or written.
    for w in &plan.workloads {
        let most = w.ramp.iter().copied().max().unwrap_or(1);
        iocurve_engine::budget::check_step(w, most, w.backend)?;
        iocurve_engine::budget::check_limits(w, most, w.backend)?;
    }
    signals::install();
    // Before any I/O: a map another run holds, or a damaged one, is bad input (exit code 2).
    let prepared = verification::prepare(&plan, &args.verify_map)?;
    let targets = open_targets(&plan, &args)?;
    // After the targets, so that bad input is reported first (exit code 2).
    let mut store = open_store(&args.db)?;
    let mut plan = plan;
    let sla = apply_sla(&mut plan, &args);
    if plan.precondition && !precondition_targets(&plan, &targets, &store)? {
        // Ctrl-C: the run still ends as every interrupted run does (summary, JSON, stored
        // status `interrupted`), with no workload run.
        crate::outln!("interrupted while preconditioning: no workload ran; the same command resumes it");
    }
    let verification = verification::open(&plan, &targets, prepared)?;
    let infos = target_infos(&targets, &store);
    let targets = Arc::new(targets);
    let mut cluster = remote::Cluster::local(targets.clone(), verification.as_ref().map(|v| v.map.clone()))?;
    let mut outcome =
        execute(&plan, infos, &mut cluster, verification.as_ref(), backend_note, &args.label, &sla, &mut store);
    // The in-process agent lets go of the targets (scratch files are removed with the last
    // holder) before the final verification pass reads them.
    drop(cluster);
    if let Some(v) = &verification {
        if let Err(e) = v.map.save(&v.path) {
            outcome.error.get_or_insert(e.into());
        }
        if args.verify_final && outcome.error.is_none() && !outcome.result.interrupted {
            // No read may be waited for longer than a step's outstanding I/O would be.
            let stuck_after =
                Duration::from_secs_f64(args.flags.keys()?.stuck_after_s.unwrap_or(FINAL_PASS_STUCK_AFTER_S));
            match verification::final_pass(&targets, &v.map, &v.path, stuck_after) {
                Ok((found, pass)) => {
                    let rows = verification::stored_problems(&pass, &v.map);
                    conclude_verification(&mut outcome, &mut store, found, rows);
                }
                Err(e) => outcome.error = Some(e),
            }
        }
    }
    settle_status(&mut outcome, &store);
    finish(outcome, &args)
}

/// Stores a final verification pass with its problems and lets it decide the outcome: exit
/// code 4 when it found problems.
fn conclude_verification(
    outcome: &mut Outcome,
    store: &mut Store,
    found: iocurve_analysis::FinalVerification,
    rows: impl IntoIterator<Item = iocurve_store::StoredProblem>,
) {
    let stored = match outcome.run_id {
        Some(id) => store.add_verification(id, &found, rows),
        None => Ok(()),
    };
    let problems = found.counts.problems();
    if problems > 0 {
        if let Err(e) = stored {
            crate::errln!("{}", store_error(e));
        }
        outcome.error = Some(CliError::Verification(format!(
            "verification found {problems} problems: {}",
            found.counts.describe()
        )));
    } else if let Err(e) = stored {
        outcome.error = Some(store_error(e));
    }
    outcome.result.final_verification = Some(found);
}

/// How long the final verification pass waits for a read that does not return, unless
/// `--stuck-after-s` says otherwise.
const FINAL_PASS_STUCK_AFTER_S: f64 = 30.0;

/// The status a finished run ends with, in its result and in the database, once everything
/// after the workloads (saving the map, the final verification) is done: `complete` with the
/// reason for exit code 3 or 4 (e.g. the problems verification found), `failed` with the error.
fn settle_status(outcome: &mut Outcome, store: &Store) {
    let r = &mut outcome.result;
    let reason = match &outcome.error {
        Some(CliError::Verification(why)) => Some(why.clone()),
        Some(CliError::Interrupted(why)) => {
            // Ctrl-C after the workloads (in the final verification pass).
            r.status = "interrupted".into();
            r.interrupted = true;
            Some(why.clone())
        }
        Some(e) => {
            if r.status == "complete" || r.status == "aborted" {
                // The policy's own abort keeps its status; any later failure is a failure.
                r.status = if matches!(e, CliError::Aborted(_)) { "aborted" } else { "failed" }.into();
            }
            Some(e.to_string())
        }
        None if r.interrupted => None,
        None => storage_verdict(r).map(|(_, why)| why),
    };
    if reason.is_none() {
        return;
    }
    r.status_reason = reason;
    if let Some(id) = outcome.run_id
        && let Err(e) = store.set_status(id, &r.status, r.status_reason.as_deref())
    {
        outcome.error.get_or_insert(store_error(e));
    }
}

/// A run on agents (`--hosts`): the same plan, recorder and analysis, with every step run on
/// all agents at once.
fn run_on_agents(plan: Plan, args: &RunArgs) -> Result<ExitCode, CliError> {
    // Without --size each agent sizes its scratch files to its own free space.
    let size = args.size.unwrap_or(iocurve_engine::target::AUTO_SCRATCH_SIZE);
    let (mut cluster, mut infos) = remote::Cluster::connect(&plan, args, size)?;
    let mut store = open_store(&args.db)?;
    if plan.precondition && !cluster.precondition(&plan, &store, &mut infos)? {
        crate::outln!("interrupted while preconditioning: no workload ran; the same command resumes it");
    }
    let mut plan = plan;
    let sla = apply_sla(&mut plan, args);
    let mut outcome = execute(&plan, infos.clone(), &mut cluster, None, None, &args.label, &sla, &mut store);
    if args.verify_final && outcome.error.is_none() && !outcome.result.interrupted {
        match cluster.verify_final(&plan, &infos) {
            Ok((found, rows)) => conclude_verification(&mut outcome, &mut store, found, rows),
            Err(e) => outcome.error = Some(e),
        }
    }
    settle_status(&mut outcome, &store);
    finish(outcome, args)
}

/// Options win over the plan; the bounds in force are part of the resolved plan that is
/// stored, so `show` reproduces what the run printed.
fn apply_sla(plan: &mut Plan, args: &RunArgs) -> Sla {
    plan.sla_mean_ms = args.sla.mean_ms.or(plan.sla_mean_ms);
    plan.sla_p99_ms = args.sla.p99_ms.or(plan.sla_p99_ms);
    Sla { mean_ms: plan.sla_mean_ms, p99_ms: plan.sla_p99_ms }
}

/// Checks that `path` can be written the way the result will be (a temporary file beside it,
/// renamed over it), leaving nothing behind.
fn check_output(path: &Path, option: &str) -> Result<(), CliError> {
    if path.is_dir() {
        return Err(CliError::Usage(format!("{option} {}: that is a directory; name a file", path.display())));
    }
    let tmp = path.with_extension("json.tmp");
    match std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(&tmp) {
        Ok(_) => {
            let _ = std::fs::remove_file(&tmp);
            Ok(())
        }
        Err(e) => Err(CliError::Usage(format!(
            "{option} {}: cannot write there ({e}); choose a path in a writable directory",
            path.display()
        ))),
    }
}

/// Why a finished run did not go clean: verification problems seen on reads (exit 4), or I/O
/// errors and steps that completed no I/O (exit 3). None when it did.
fn storage_verdict(r: &RunResult) -> Option<(u8, String)> {
    let steps = r.workloads.iter().flat_map(|w| w.steps.iter().map(move |s| (w, s)));
    let mut errors = 0u64;
    let mut no_io = Vec::new();
    let mut lost = Vec::new();
    let mut verify = 0u64;
    let mut stuck = 0u64;
    for (w, s) in steps {
        errors += s.errors + s.unmeasured_errors.iter().map(|e| e.count).sum::<u64>();
        stuck += s.stuck_ios;
        verify += s.verify.as_ref().map_or(0, |v| v.problems());
        if s.flags.iter().any(|f| f.code == "no_io") {
            no_io.push(format!("{} at {} workers", w.name, s.workers));
        }
        if s.flags.iter().any(|f| f.code == "host_lost") {
            lost.push(format!("{} at {} workers", w.name, s.workers));
        }
    }
    if verify > 0 {
        return Some((
            4,
            format!("verification found {verify} problems on reads during the run (see the steps' verify flags)"),
        ));
    }
    let mut why = Vec::new();
    if errors > 0 {
        why.push(format!("the storage failed {errors} I/Os"));
    }
    if stuck > 0 {
        why.push(format!("{stuck} I/Os never completed (stuck; see the steps' stuck flags)"));
    }
    if !no_io.is_empty() {
        why.push(format!("no I/O completed in {}", no_io.join(", ")));
    }
    if !lost.is_empty() {
        why.push(format!("hosts were lost in {}", lost.join(", ")));
    }
    (!why.is_empty()).then(|| (3, why.join("; ")))
}

fn finish(outcome: Outcome, args: &RunArgs) -> Result<ExitCode, CliError> {
    let verdict = storage_verdict(&outcome.result);
    let code = match &outcome.error {
        Some(e) => e.exit_code(),
        None if outcome.result.interrupted => ExitCode::from(130),
        None => match &verdict {
            Some((code, why)) => {
                crate::errln!("exit code {code}: the run finished, but {why}");
                ExitCode::from(*code)
            }
            None => ExitCode::SUCCESS,
        },
    };
    if let Some(path) = &args.json {
        write_json(&outcome.result, path)
            .map_err(|e| CliError::Runtime(format!("cannot write the JSON result to {}: {e}", path.display())))?;
    }
    if let Some(id) = outcome.run_id {
        crate::outln!("stored as run {id} in {} (`iocurve show {id}`)", args.db.display());
    }
    match outcome.error {
        Some(e) => Err(e),
        None => Ok(code),
    }
}

/// The precondition phase: every target not yet preconditioned at its size. False when
/// interrupted.
fn precondition_targets(plan: &Plan, targets: &TargetSet, store: &Store) -> Result<bool, CliError> {
    let (pattern, unit) = plan.precondition_pattern();
    let cfg = precondition::run_config(pattern, unit);
    for t in &targets.targets {
        // A scratch file this run created is new, whatever an earlier file of that name had.
        match precondition::preconditioned_at(store, t).filter(|_| !t.fresh) {
            Some(at) => crate::outln!("precondition {}: already done at {at}, skipped", t.path.display()),
            None => {
                if !precondition::target(t, &cfg, store)? {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// Opens the results database (`--db`, `IOCURVE_DB`, default ./iocurve.db).
pub fn open_store(path: &Path) -> Result<Store, CliError> {
    Store::open(path).map_err(|e| match e {
        // Not ours, or from a newer iocurve: the user named the wrong file.
        iocurve_store::StoreError::Invalid { .. } => CliError::Usage(e.to_string()),
        _ => CliError::Runtime(format!("{e} (choose another file with --db or IOCURVE_DB)")),
    })
}

/// Opens the results database for reading commands: it must exist (they never create one).
pub fn open_existing_store(path: &Path) -> Result<Store, CliError> {
    Store::open_existing(path).map_err(|e| CliError::Usage(e.to_string()))
}

fn overrides(args: &RunArgs) -> Result<Overrides, CliError> {
    Ok(Overrides { targets: args.targets.clone(), keys: args.flags.keys()?, workload_filter: args.workload.clone() })
}

fn load_plan(args: &RunArgs) -> Result<Plan, CliError> {
    let o = overrides(args)?;
    let mut plan = match (&args.plan, &args.suite) {
        (Some(path), _) => iocurve_plan::load_file(path, &o)?,
        (None, Some(name)) => suites::load(name, &o)?,
        (None, None) => suites::load(suites::DEFAULT_SUITE, &o)?,
    };
    if plan.groups.is_empty() {
        plan.groups = vec![TargetGroup { name: "targets".into(), weight: 1, targets: vec![DEFAULT_SCRATCH.into()] }];
    }
    plan.precondition |= args.precondition;
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
            crate::errln!("WARNING: {note}");
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
    if creating > 0 && !plan.precondition {
        crate::outln!(
            "preparing {creating} scratch file(s) of {} (written fully once, so reads hit allocated blocks)",
            iocurve_plan::format_size(scratch_size)
        );
    }
    // Ctrl-C stops a scratch file's preparation within one 8 MiB write: a watcher hands the
    // signal's flag to the engine (the handler itself may only touch its own atomics).
    let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let opts = OpenOptions {
        write: plan.writes(),
        scratch_size,
        keep: args.keep,
        allow_write: args.allow_write.clone(),
        // Preconditioning writes every block anyway: no need to fill the file twice.
        scratch_unfilled: plan.precondition,
        cancel: Some(cancel.clone()),
        ..Default::default()
    };
    let done = std::sync::atomic::AtomicBool::new(false);
    let opened = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if signals::STOP.load(Ordering::Relaxed) {
                    cancel.store(true, Ordering::Relaxed);
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        });
        let r = TargetSet::open(&plan.groups, &opts);
        done.store(true, Ordering::Relaxed);
        r
    });
    if signals::STOP.load(Ordering::Relaxed) {
        // The half-prepared scratch files were removed with the set.
        drop(opened);
        return Err(CliError::Interrupted("interrupted while preparing the targets: nothing ran".into()));
    }
    let targets = opened?;
    targets.notes.iter().for_each(|n| crate::outln!("{n}"));
    Ok(targets)
}

struct Outcome {
    result: RunResult,
    run_id: Option<i64>,
    error: Option<CliError>,
}

/// Feeds a running step to the progress line and the results database.
struct Recorder<'a> {
    progress: &'a mut Progress,
    store: &'a mut Store,
    workload_id: i64,
    step_idx: usize,
    step_id: Option<i64>,
    /// The first store error; the run stops after the step.
    error: Option<StoreError>,
    /// The verification map, saved at every interval end so that a killed run keeps it.
    verification: Option<&'a verification::Verification>,
    map_error: Option<iocurve_engine::EngineError>,
}

impl StepObserver for Recorder<'_> {
    fn started(&mut self, rec: &StepRecord) {
        match self.store.begin_step(self.workload_id, self.step_idx, rec) {
            Ok(id) => self.step_id = Some(id),
            Err(e) => self.error = self.error.take().or(Some(e)),
        }
    }

    fn progress(&mut self, p: &StepProgress) {
        self.progress.update(p);
    }

    fn warning(&mut self, message: &str) {
        self.progress.warn(message);
    }

    fn host_started(&mut self, host: u32, address: &str, hostname: &str, started_unix_ns: i64, threads: usize) {
        if let (Some(step), None) = (self.step_id, &self.error)
            && let Err(e) = self.store.add_step_host(step, host, address, hostname, started_unix_ns, threads)
        {
            self.error = Some(e);
        }
    }

    fn host_interval(&mut self, host: u32, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        if let (Some(step), None) = (self.step_id, &self.error)
            && let Err(e) = self.store.add_interval(step, Some(host), index, stats, cpu, duration_s)
        {
            self.error = Some(e);
        }
    }

    fn interval(&mut self, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        if let (Some(step), None) = (self.step_id, &self.error)
            && let Err(e) = self.store.add_interval(step, None, index, stats, cpu, duration_s)
        {
            self.error = Some(e);
        }
        if let Some(v) = self.verification
            && self.map_error.is_none()
            && let Err(e) = v.map.save(&v.path)
        {
            self.map_error = Some(e);
        }
    }
}

/// The back-ends a host runs the plan's workloads on: io_uring becomes psync where it is not
/// available.
fn backend_names(plan: &Plan, io_uring: bool) -> String {
    let mut backends: Vec<&str> = plan
        .workloads
        .iter()
        .map(|w| if w.backend == Backend::IoUring && !io_uring { Backend::Psync } else { w.backend })
        .map(Backend::name)
        .collect();
    backends.dedup();
    backends.join("+")
}

/// The coordinator's facts and, for a multi-host run, each agent's own.
fn host_info(facts: host::HostFacts, plan: &Plan, backend_note: Option<String>, cluster: &remote::Cluster) -> HostInfo {
    let agents = cluster
        .agents()
        .map(|(address, h)| {
            let unavailable = (!h.io_uring_unavailable.is_empty()).then(|| h.io_uring_unavailable.clone());
            AgentHost {
                address: address.to_string(),
                facts: iocurve_net::wire::host_facts(h),
                backend: backend_names(plan, unavailable.is_none()),
                backend_note: unavailable.filter(|_| plan.workloads.iter().any(|w| w.backend == Backend::IoUring)).map(
                    |why| {
                        format!(
                            "io_uring is not available on this agent ({why}): psync, one thread per outstanding I/O"
                        )
                    },
                ),
            }
        })
        .collect();
    HostInfo { facts, backend: backend_names(plan, true), backend_note, agents }
}

fn target_infos(targets: &TargetSet, store: &Store) -> Vec<TargetInfo> {
    targets
        .targets
        .iter()
        .map(|t| TargetInfo {
            path: t.path.display().to_string(),
            kind: t.kind.name().into(),
            size: t.size,
            logical_block: t.logical_block,
            group: targets.groups[t.group].name.clone(),
            scratch: t.created,
            preconditioned_at: precondition::preconditioned_at(store, t),
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn execute(
    plan: &Plan,
    target_infos: Vec<TargetInfo>,
    cluster: &mut remote::Cluster,
    verification: Option<&verification::Verification>,
    backend_note: Option<String>,
    label: &str,
    sla: &Sla,
    store: &mut Store,
) -> Outcome {
    let host = host_info(host::facts(), plan, backend_note, cluster);
    let plan_json = serde_json::to_value(plan).unwrap_or_default();
    let started_at = time::now_rfc3339();
    let new_run = NewRun {
        label: label.to_string(),
        plan_name: plan.name.clone(),
        started_at: started_at.clone(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname: host.facts.hostname.clone(),
        backend: host.backend.clone(),
        targets: target_infos.iter().map(|t| t.path.as_str()).collect::<Vec<_>>().join(", "),
        host_json: serde_json::to_string(&host).unwrap_or_default(),
        targets_json: serde_json::to_string(&target_infos).unwrap_or_default(),
        plan_json: plan_json.to_string(),
    };
    let mut progress = Progress::new(plan.total_seconds());
    let th = Thresholds::default();
    let target_paths: Vec<String> = target_infos.iter().map(|t| t.path.clone()).collect();
    let mut workloads: Vec<WorkloadResult> = Vec::new();
    let mut error: Option<CliError> = None;
    let run_id = match store.begin_run(&new_run) {
        Ok(id) => {
            tracing::info!(run = id, plan = %plan.source, targets = target_infos.len(), "run started");
            Some(id)
        }
        Err(e) => {
            error = Some(store_error(e));
            None
        }
    };
    let nw = plan.workloads.len();
    let mut output_cut_noted = false;
    let mut data_checks: Vec<((iocurve_plan::DataPattern, u64, u64), Vec<iocurve_analysis::DataCheckRow>)> = Vec::new();
    for (wi, w) in plan.workloads.iter().enumerate() {
        let Some(run_id) = run_id else { break };
        let seq = w.pattern == Pattern::Sequential;
        let workload_id = match store.begin_workload(run_id, wi, &w.name, &serde_json::to_string(w).unwrap_or_default())
        {
            Ok(id) => id,
            Err(e) => {
                error = Some(store_error(e));
                break;
            }
        };
        // Measured once per data pattern and block size: a suite's frontend and backend
        // variants write the same data.
        let key = (w.data, w.max_bs(), w.dedupe_unit());
        let data_check = match data_checks.iter().find(|(k, _)| *k == key) {
            _ if !w.writes() => Vec::new(),
            Some((_, rows)) => rows.clone(),
            None => match crate::datameter::sample(w) {
                Ok(rows) => {
                    data_checks.push((key, rows.clone()));
                    rows
                }
                Err(e) => {
                    error = Some(e);
                    break;
                }
            },
        };
        if !data_check.is_empty()
            && let Err(e) = store.set_data_check(workload_id, &serde_json::to_string(&data_check).unwrap_or_default())
        {
            error = Some(store_error(e));
            break;
        }
        let mut steps: Vec<StepResult> = Vec::new();
        let mut stop_run = false;
        for (si, &workers) in w.ramp.iter().enumerate() {
            if signals::STOP.load(Ordering::Relaxed) {
                break;
            }
            progress.start_step(&w.name, wi + 1, nw, si + 1, w.ramp.len(), workers);
            let mut rec = Recorder {
                progress: &mut progress,
                store,
                workload_id,
                step_idx: si,
                step_id: None,
                error: None,
                verification,
                map_error: None,
            };
            let outcome = cluster.run_step(w, workers, &plan.faults, &mut rec, &signals::STOP).map(|m| m.merged);
            let (step_id, store_err, map_err) = (rec.step_id, rec.error, rec.map_error);
            let outcome = outcome.and_then(|r| match (store_err, map_err) {
                (Some(e), _) => Err(store_error(e)),
                (None, Some(e)) => Err(CliError::Engine(e)),
                (None, None) => Ok(r),
            });
            match outcome {
                Ok(mut r) => {
                    if crate::out::out_closed() && !output_cut_noted {
                        output_cut_noted = true;
                        r.notes.push((
                            "output_closed".into(),
                            "standard output was closed during this step (a pipe's reader ended, or the disk is full): the run went on measuring and storing without printing".into(),
                        ));
                    }
                    if let Some(id) = step_id
                        && let Err(e) = store.end_step(id, &r)
                    {
                        error = Some(store_error(e));
                    }
                    if r.intervals.is_empty() && r.drain.stuck > 0 {
                        // No interval to flag: the step is not kept, so say it here.
                        crate::errln!(
                            "WARNING: {} at {workers} workers: {} I/Os were still outstanding {:.1} s after the stop (oldest {:.1} s) and were given up as stuck",
                            w.name,
                            r.drain.stuck,
                            r.drain.wait_ns as f64 / 1e9,
                            r.drain.stuck_age_ns as f64 / 1e9
                        );
                    }
                    let s = iocurve_analysis::analyze_step_on(&r, seq, &th, &target_paths);
                    progress.finish_step(w.step_seconds(), &s);
                    if !r.intervals.is_empty() {
                        steps.push(s);
                    }
                    if let Some(why) = &r.aborted {
                        // Kept like every step: the run ends after it, with status `aborted`.
                        error.get_or_insert(CliError::Aborted(why.clone()));
                    }
                    if error.is_some() {
                        stop_run = true;
                        break;
                    }
                }
                Err(e) => {
                    error = Some(e);
                    stop_run = true;
                    break;
                }
            }
        }
        if !steps.is_empty() {
            let mut r = iocurve_analysis::analyze_workload(w, steps, sla);
            r.data_check = data_check;
            progress.print(&terminal::workload_report(&r));
            workloads.push(r);
        }
        if stop_run || signals::STOP.load(Ordering::Relaxed) {
            break;
        }
    }
    progress.finish();
    let interrupted = signals::STOP.load(Ordering::Relaxed);
    let finished_at = time::now_rfc3339();
    let status = if matches!(error, Some(CliError::Aborted(_))) {
        "aborted"
    } else if error.is_some() {
        "failed"
    } else if interrupted {
        "interrupted"
    } else {
        "complete"
    };
    if let Some(id) = run_id
        && let Err(e) = store.finish_run(id, status, &finished_at, &terminal::headlines(&workloads))
    {
        error.get_or_insert(store_error(e));
    }
    // A store that failed while the run was finished makes it a failure whatever it was.
    let status = match &error {
        Some(CliError::Aborted(_)) => "aborted",
        Some(_) => "failed",
        None => status,
    };
    tracing::info!(run = ?run_id, status, reason = ?error.as_ref().map(|e| e.to_string()), "run finished");
    let result = RunResult {
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        started_at,
        finished_at,
        interrupted,
        status: status.into(),
        status_reason: error.as_ref().map(|e| e.to_string()),
        host,
        sla: sla.is_set().then_some(*sla),
        targets: target_infos,
        plan: plan_json,
        workloads,
        // Set after the run, when `--verify-final` read everything back.
        final_verification: None,
    };
    crate::out!("{}", terminal::run_summary(&result));
    Outcome { result, run_id, error }
}

fn store_error(e: StoreError) -> CliError {
    CliError::Runtime(format!("{e}: the run stops so that no measurement goes unrecorded"))
}
