//! `iocurve precondition`: every block of the named targets written once, with progress and
//! ETA, resumable; the pass is the runner's (`iocurve_run::precondition`), the one a run's
//! precondition phase uses.

use std::process::ExitCode;

use iocurve_engine::precondition::PreConfig;
use iocurve_engine::{OpenOptions, TargetSet};
use iocurve_plan::{BlockSizeSpec, TargetGroup, WorkloadKeys};
use iocurve_run::precondition::{DEFAULT_BS, DEFAULT_QD, target};
use iocurve_run::{Observer, open_store};

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

pub fn command(args: PreconditionArgs) -> Result<ExitCode, CliError> {
    let cfg = config(&args)?;
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
        ..Default::default()
    };
    let targets = TargetSet::open(&groups, &opts)?;
    targets.notes.iter().for_each(|n| terminal.note(n));
    let store = open_store(&args.db.db)?;
    for t in &targets.targets {
        if !target(t, &cfg, &store, &cancel, &mut terminal)? {
            return Ok(ExitCode::from(130));
        }
    }
    Ok(ExitCode::SUCCESS)
}
