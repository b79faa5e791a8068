//! `iocurve precondition`: every block of the named targets written once, with progress and
//! ETA, resumable; the pass is the runner's (`iocurve_run::precondition`), the one a run's
//! precondition phase uses.

use std::process::ExitCode;

use iocurve_engine::StepObserver;
use iocurve_engine::precondition::PreConfig;
use iocurve_engine::{OpenOptions, TargetSet};
use iocurve_plan::{BlockSizeSpec, TargetGroup, WorkloadKeys};
use iocurve_run::open_store;
use iocurve_run::precondition::{DEFAULT_BS, DEFAULT_QD, SteadyOutcome, SteadyRounds, target, until_steady};

use crate::CliError;
use crate::cli::PreconditionArgs;
use crate::terminal::Terminal;

/// The data pattern and write size as a run would resolve them: same checks and messages.
fn config(args: &PreconditionArgs) -> Result<PreConfig, CliError> {
    let keys = WorkloadKeys {
        bs: Some(BlockSizeSpec::One(args.bs.unwrap_or(DEFAULT_BS))),
        queue_depth: Some(args.qd.unwrap_or(DEFAULT_QD)),
        ..args.data.keys()?
    };
    let w = iocurve_plan::writing_workload("precondition", keys)?;
    Ok(PreConfig { bs: w.max_bs(), qd: w.queue_depth, pattern: w.data, dedupe_unit: w.dedupe_unit() })
}

/// The verification map of the runs here (`--verify-map`): the blocks of `path` it knew hold
/// preconditioning's data now, no header of a verifying write: unknown, not lost (the next
/// verifying run called them lost, exit 4, though nothing was lost; found while closing issue
/// 38). Nothing to do without a map.
fn forget_in_map(map: &std::path::Path, path: &str, terminal: &mut Terminal) -> Result<(), CliError> {
    if !map.exists() {
        return Ok(());
    }
    // A verifying run using it holds its lock (and its targets' locks kept this pass out).
    let _lock = iocurve_engine::verify::MapLock::acquire(map)?;
    let m = iocurve_engine::verify::GenMap::load(map)?;
    let n = m.forget_target(path);
    if n > 0 {
        m.save(map)?;
        terminal.line(&format!(
            "verification: preconditioning wrote over {path}: the {n} blocks {} knew are forgotten (unknown, not lost)",
            map.display()
        ));
    }
    Ok(())
}

pub fn command(args: PreconditionArgs) -> Result<ExitCode, CliError> {
    let cfg = config(&args)?;
    let rounds = args.until_steady.then_some(SteadyRounds {
        round_s: args.round_s,
        max_rounds: args.max_rounds,
        pattern: cfg.pattern,
        dedupe_unit: cfg.dedupe_unit,
    });
    // Before the fill, which can take hours.
    if let Some(r) = &rounds {
        r.check()?;
    }
    let cancel = crate::signals::install();
    let mut terminal = Terminal::new();
    let groups = vec![TargetGroup { name: "targets".into(), weight: 1, targets: args.targets.clone() }];
    let size = args.size.unwrap_or(1 << 30);
    let opts = OpenOptions {
        write: true,
        scratch_size: size,
        keep: true,
        allow_write: args.allow_write.clone(),
        scratch_unfilled: true,
        // A device that never answers the signature probe ends the command at the deadline
        // or at Ctrl-C, as a pass does (issue 36, finding 2).
        cancel: Some(cancel.shared()),
        stuck_after: Some(std::time::Duration::from_secs_f64(args.stuck_after_s)),
        size_given: args.size.is_some(),
        ..Default::default()
    };
    let opened = TargetSet::open(&groups, &opts);
    if cancel.is_cancelled() {
        drop(opened);
        terminal.line("precondition: interrupted while opening the targets; nothing was written");
        return Ok(crate::signals::interrupted_code());
    }
    let targets = opened?;
    targets.notes.iter().for_each(|n| terminal.line(n));
    let store = open_store(&args.db.db)?;
    for t in &targets.targets {
        let stuck_after = std::time::Duration::from_secs_f64(args.stuck_after_s);
        let pass = target(t, &cfg, &store, &cancel, stuck_after, &mut terminal);
        // Even a pass that failed or was cut short may have written over blocks the map knew.
        // A map that cannot be updated (in use, unreadable) does not undo the pass: said.
        if !matches!(pass, Ok(p) if !p.wrote)
            && let Err(e) = forget_in_map(&args.verify_map, &t.path.display().to_string(), &mut terminal)
        {
            terminal.warning(&format!(
                "{} not updated ({e}): a verifying run continuing it will call the blocks of {} this pass wrote over lost",
                args.verify_map.display(),
                t.path.display()
            ));
        }
        if !pass?.complete {
            return Ok(crate::signals::interrupted_code());
        }
    }
    if let Some(rounds) = rounds {
        let out = until_steady(&targets, &rounds, &cancel, &mut terminal)?;
        if out.interrupted {
            terminal.line(&format!(
                "precondition: interrupted after {} rounds, steady state not established",
                out.rounds.len()
            ));
            return Ok(crate::signals::interrupted_code());
        }
        terminal.line(&steady_line(&out));
        if out.errors > 0 || out.stuck > 0 {
            // The storage failed writes: the rounds' IOPS are no steady state of a working target.
            terminal.warning(&format!(
                "precondition: {} writes failed and {} were stuck during the rounds: the storage is not healthy",
                out.errors, out.stuck
            ));
            return Ok(ExitCode::from(3));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The steady-state phase's verdict, with the window and both criteria against what is allowed.
fn steady_line(out: &SteadyOutcome) -> String {
    let n = out.rounds.len();
    match &out.check {
        None => format!("precondition: {n} rounds, too few to judge steady state (5 needed)"),
        Some(c) => format!(
            "precondition: {} after {n} rounds — rounds {}–{}: mean {} IOPS, range {:.1} % (allowed 20 %), best-fit excursion {:.1} % (allowed 10 %), slope {:+.0} IOPS per round",
            if c.steady { "in steady state (SNIA)" } else { "NOT in steady state (SNIA)" },
            c.first_round + 1,
            c.first_round + c.values.len(),
            iocurve_report::format::iops(c.mean),
            c.range_pct,
            c.excursion_pct,
            c.slope
        ),
    }
}
