//! What a local run needs before its first step: the back-end, the targets (scratch files sized
//! to the disk), their facts.

use std::path::Path;

use iocurve_analysis::TargetInfo;
use iocurve_engine::backend::probe_io_uring;
use iocurve_engine::target::{DEFAULT_SCRATCH_SIZE, MIN_SCRATCH_SIZE, free_space};
use iocurve_engine::{OpenOptions, TargetSet};
use iocurve_plan::{Backend, Plan};
use iocurve_store::Store;

use crate::{Cancel, Error, Observer, RunOptions, precondition};

/// io_uring where asked and available; psync otherwise, said loudly and recorded.
pub(crate) fn choose_backend(mut plan: Plan, obs: &mut dyn Observer) -> (Plan, Option<String>) {
    if !plan.workloads.iter().any(|w| w.backend == Backend::IoUring) {
        return (plan, None);
    }
    match probe_io_uring() {
        Ok(()) => (plan, None),
        Err(e) => {
            let note =
                format!("io_uring is not available here ({e}): falling back to psync, one thread per outstanding I/O");
            obs.warning(&note);
            for w in plan.workloads.iter_mut().filter(|w| w.backend == Backend::IoUring) {
                w.backend = Backend::Psync;
            }
            (plan, Some(note))
        }
    }
}

/// Scratch size: --size, else 1 GiB or half the free space when that is less.
fn scratch_size(options: &RunOptions, plan: &Plan) -> Result<u64, Error> {
    if let Some(s) = options.size {
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
        return Err(Error::Usage(format!(
            "not enough free space in {} for a scratch file ({} MiB free, at least {} MiB needed): free some space, give --size, or name a --target",
            dir.display(),
            free >> 20,
            (2 * MIN_SCRATCH_SIZE) >> 20
        )));
    }
    Ok(fit.min(DEFAULT_SCRATCH_SIZE))
}

/// Opens (and creates) the plan's targets. A cancel stops a scratch file's preparation within
/// one 8 MiB write; the half-prepared files are removed.
pub(crate) fn open_targets(
    plan: &Plan,
    options: &RunOptions,
    cancel: &Cancel,
    obs: &mut dyn Observer,
) -> Result<TargetSet, Error> {
    let scratch_size = scratch_size(options, plan)?;
    let creating = plan
        .groups
        .iter()
        .flat_map(|g| &g.targets)
        .filter(|t| !Path::new(t.as_str()).exists() && !t.contains(['*', '?', '[']))
        .count();
    if creating > 0 && !plan.precondition {
        obs.note(&format!(
            "preparing {creating} scratch file(s) of {} (written fully once, so reads hit allocated blocks)",
            iocurve_plan::format_size(scratch_size)
        ));
    }
    let opts = OpenOptions {
        write: plan.writes(),
        scratch_size,
        keep: options.keep,
        allow_write: options.allow_write.clone(),
        // Preconditioning writes every block anyway: no need to fill the file twice.
        scratch_unfilled: plan.precondition,
        cancel: Some(cancel.shared()),
        ..Default::default()
    };
    let opened = TargetSet::open(&plan.groups, &opts);
    if cancel.is_cancelled() {
        // The half-prepared scratch files were removed with the set.
        drop(opened);
        return Err(Error::Interrupted("interrupted while preparing the targets: nothing ran".into()));
    }
    let targets = opened?;
    targets.notes.iter().for_each(|n| obs.note(n));
    Ok(targets)
}

pub(crate) fn target_infos(targets: &TargetSet, store: &Store) -> Vec<TargetInfo> {
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
