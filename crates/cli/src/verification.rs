//! Verification around a run and `iocurve verify`: the map of acknowledged generations is
//! loaded (or started) before the workloads, saved at every interval end, and every block it
//! knows can be read back and checked — at the end of a run (`--verify-final`) or later, even
//! after iocurve or the host restarted.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use iocurve_analysis::VerifyResult;
use iocurve_engine::verify::{GenMap, verify_pass};
use iocurve_engine::{OpenOptions, TargetSet};
use iocurve_plan::{Plan, TargetGroup, format_size};

use crate::CliError;
use crate::cli::VerifyArgs;

pub struct Verification {
    pub map: Arc<GenMap>,
    pub path: PathBuf,
}

fn target_list(targets: &TargetSet) -> Vec<(String, u64)> {
    targets.targets.iter().map(|t| (t.path.display().to_string(), t.size)).collect()
}

/// The map for a run with verifying workloads: continued from `path` when it was made for
/// these targets and block size, new otherwise (when the file does not exist).
/// Verifying workloads of one run share one map, so one block size: checked before any I/O (it
/// used to stop a run at its first verifying step, after the others had run).
pub fn check_plan(plan: &Plan) -> Result<(), CliError> {
    let mut verifying = plan.workloads.iter().filter(|w| w.verify);
    let Some(first) = verifying.next() else { return Ok(()) };
    if let Some(other) = verifying.find(|w| w.bs != first.bs) {
        return Err(CliError::Usage(format!(
            "verifying workloads of one run share one block size (one map tracks the blocks): {} uses {}, {} uses {}; give --bs SIZE, or verify only workloads of one size (--workload TEXT)",
            first.name,
            format_size(first.max_bs()),
            other.name,
            format_size(other.max_bs())
        )));
    }
    Ok(())
}

pub fn open(plan: &Plan, targets: &TargetSet, path: &Path) -> Result<Option<Verification>, CliError> {
    let Some(w) = plan.workloads.iter().find(|w| w.verify) else { return Ok(None) };
    let bs = w.bs[0].bytes;
    let list = target_list(targets);
    let map = if path.exists() {
        let map = GenMap::load(path)?;
        if !map.matches(bs, &list) {
            return Err(CliError::Usage(format!(
                "verification map {} was made for other targets or another block size ({} blocks of {}): give another --verify-map, or remove it to start over",
                path.display(),
                map.targets.iter().map(|t| t.path.as_str()).collect::<Vec<_>>().join(", "),
                format_size(map.bs)
            )));
        }
        let known: u64 = (0..map.targets.len() as u32)
            .map(|t| (0..map.targets[t as usize].blocks()).filter(|&b| map.get(t, b) != 0).count() as u64)
            .sum();
        crate::outln!("verification: continuing with {} ({known} blocks written before)", path.display());
        map
    } else {
        crate::outln!("verification: map {} (blocks of {})", path.display(), format_size(bs));
        GenMap::new(bs, &list)
    };
    Ok(Some(Verification { map: Arc::new(map), path: path.to_path_buf() }))
}

/// Reads every written block back and checks it; prints the findings.
pub fn final_pass(targets: &TargetSet, map: &GenMap) -> Result<VerifyResult, CliError> {
    targets.set_direct(true).or_else(|_| targets.set_direct(false))?;
    let mut last = std::time::Instant::now();
    let counts = verify_pass(targets, map, &mut |done, total| {
        if last.elapsed().as_secs_f64() >= 1.0 {
            last = std::time::Instant::now();
            crate::outln!("  verify: {} of {}", format_size(done), format_size(total));
        }
    })?;
    let v = VerifyResult::from_counts(&counts);
    crate::outln!("verification: {}", v.describe());
    for e in &v.examples {
        crate::outln!("  ! {e}");
    }
    Ok(v)
}

/// `iocurve verify TARGET... --map FILE`.
pub fn command(args: VerifyArgs) -> Result<ExitCode, CliError> {
    let map = GenMap::load(&args.map)?;
    let groups = vec![TargetGroup { name: "targets".into(), weight: 1, targets: args.targets.clone() }];
    for t in &args.targets {
        if !Path::new(t).exists() {
            return Err(CliError::Usage(format!("target {t} does not exist: name the targets the map was made for")));
        }
    }
    let targets = TargetSet::open(&groups, &OpenOptions { write: false, ..Default::default() })?;
    if !map.matches(map.bs, &target_list(&targets)) {
        return Err(CliError::Usage(format!(
            "verification map {} was made for {}: name those targets, in that order",
            args.map.display(),
            map.targets.iter().map(|t| format!("{} ({})", t.path, format_size(t.size))).collect::<Vec<_>>().join(", ")
        )));
    }
    let v = final_pass(&targets, &map)?;
    Ok(if v.problems() > 0 { ExitCode::from(4) } else { ExitCode::SUCCESS })
}
