//! What a local run needs before its first step: the back-end, the targets (scratch files sized
//! to the disk by the engine's rule, the one agents use), their facts.

use std::path::Path;

use iocurve_analysis::TargetInfo;
use iocurve_engine::target::{AUTO_SCRATCH_SIZE, MIN_SCRATCH_SIZE, auto_scratch_size_for, scratch_to_create};
use iocurve_engine::{OpenOptions, TargetSet};
use iocurve_plan::Plan;
use iocurve_store::Store;

use crate::events::RunEvent;
use crate::options::RunOptions;
use crate::{Cancel, Error, Observer, precondition};

/// Each workload's back-end where this host has it; its fallback otherwise, said loudly and
/// recorded.
pub(crate) fn choose_backend(mut plan: Plan, obs: &mut dyn Observer) -> (Plan, Option<String>) {
    let here = iocurve_engine::backend::available();
    let notes = here.notes_at(plan.workloads.iter().map(|w| w.backend), "here");
    for w in &mut plan.workloads {
        w.backend = here.resolve(w.backend).0;
    }
    for note in &notes {
        obs.warning(note);
    }
    (plan, (!notes.is_empty()).then(|| notes.join("; ")))
}

/// Opens (and creates) the plan's targets. A cancel stops a scratch file's preparation within
/// one 8 MiB write; the half-prepared files are removed.
pub(crate) fn open_targets(
    plan: &Plan,
    options: &RunOptions,
    cancel: &Cancel,
    obs: &mut dyn Observer,
) -> Result<TargetSet, Error> {
    // Without a size, scratch files get the engine's one rule, as on agents: 1 GiB, or their
    // share of half the free space when that is less.
    let scratch_size = options.size.unwrap_or(AUTO_SCRATCH_SIZE);
    let creating = scratch_to_create(&plan.groups);
    if let Some(first) = creating.first()
        && !plan.precondition
    {
        let size = match options.size {
            Some(s) => s,
            None => {
                let dir = Path::new(first).parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
                auto_scratch_size_for(creating.len(), dir)
            }
        };
        // Too little room: the engine refuses, saying why; no note of a file never made.
        if size >= MIN_SCRATCH_SIZE || options.size.is_some() {
            obs.event(&RunEvent::PreparingScratch {
                count: creating.len(),
                size,
                filled: !plan.scratch_unfilled(),
                reclaim_only: plan.workloads.is_empty(),
            });
        }
    }
    let opts = OpenOptions {
        write: plan.writes(),
        scratch_size,
        keep: options.keep,
        allow_write: options.allow_write.clone(),
        scratch_unfilled: plan.scratch_unfilled(),
        cancel: Some(cancel.shared()),
        stuck_after: options.stuck_after_s.map(std::time::Duration::from_secs_f64),
        size_given: options.size.is_some(),
        ..Default::default()
    };
    let opened = TargetSet::open(&plan.groups, &opts);
    if cancel.is_cancelled() {
        // The half-prepared scratch files were removed with the set.
        drop(opened);
        return Err(Error::Interrupted("interrupted while preparing the targets: nothing ran".into()));
    }
    let targets = opened?;
    targets.notes.iter().for_each(|n| obs.event(&RunEvent::TargetNote(n.clone())));
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
            lun: t.identity_key(),
            device: t.device_queue(),
        })
        .collect()
}
