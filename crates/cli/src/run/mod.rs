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

mod execute;
mod setup;

use execute::{Outcome, execute};
use setup::{choose_backend, load_plan, open_targets, precondition_targets, target_infos};

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
    let unreachable: Vec<&str> =
        r.host.agents.iter().filter(|a| a.lost.is_some()).map(|a| a.address.as_str()).collect();
    if !unreachable.is_empty() {
        why.push(format!("agents {} were lost before the first step", unreachable.join(", ")));
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

fn store_error(e: StoreError) -> CliError {
    CliError::Runtime(format!("{e}: the run stops so that no measurement goes unrecorded"))
}
