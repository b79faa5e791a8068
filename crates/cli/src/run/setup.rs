//! What a run needs before its first step: the plan with the command line's keys, the back-end,
//! the targets (scratch files sized to the disk), preconditioning.

use super::*;

/// The precondition phase: every target not yet preconditioned at its size. False when
/// interrupted.
pub(super) fn precondition_targets(plan: &Plan, targets: &TargetSet, store: &Store) -> Result<bool, CliError> {
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

fn overrides(args: &RunArgs) -> Result<Overrides, CliError> {
    Ok(Overrides { targets: args.targets.clone(), keys: args.flags.keys()?, workload_filter: args.workload.clone() })
}

pub(super) fn load_plan(args: &RunArgs) -> Result<Plan, CliError> {
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
pub(super) fn choose_backend(mut plan: Plan) -> (Plan, Option<String>) {
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

pub(super) fn open_targets(plan: &Plan, args: &RunArgs) -> Result<TargetSet, CliError> {
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

pub(super) fn target_infos(targets: &TargetSet, store: &Store) -> Vec<TargetInfo> {
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
