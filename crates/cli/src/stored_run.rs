//! A stored run as the size commands read it: rebuilt as `show` does, one workload picked by
//! name, its compared steps (the curve a figure is read off) and their labels.

use iocurve_analysis::{RunResult, WorkloadResult};
use iocurve_report::format;

use crate::CliError;

/// A stored run as `show` rebuilds it.
pub(crate) fn stored(db: &std::path::Path, id: i64) -> Result<RunResult, CliError> {
    stored_with(db, id, &Default::default())
}

/// A stored run as `show` rebuilds it, with SLA bounds given as options (they win over the
/// stored plan's).
pub(crate) fn stored_with(db: &std::path::Path, id: i64, sla: &crate::cli::SlaArgs) -> Result<RunResult, CliError> {
    let store = iocurve_run::open_read_store(db)?;
    crate::show::rebuild(&store.load(id)?, sla)
}

/// The one workload of `result` that is `what` (`fits`) and whose name contains `name`.
pub(crate) fn pick<'a>(
    result: &'a RunResult,
    id: i64,
    name: Option<&str>,
    fits: impl Fn(&WorkloadResult) -> bool,
    what: &str,
) -> Result<&'a WorkloadResult, CliError> {
    let all: Vec<&str> = result.workloads.iter().filter(|w| fits(w)).map(|w| w.name.as_str()).collect();
    // An exact name wins: `backend-random-read-4k` beside its `-curve` is not ambiguous.
    if let Some(w) = name.and_then(|n| result.workloads.iter().find(|w| fits(w) && w.name == n)) {
        return Ok(w);
    }
    let picked: Vec<&WorkloadResult> =
        result.workloads.iter().filter(|w| fits(w) && name.is_none_or(|n| w.name.contains(n))).collect();
    match picked.as_slice() {
        [w] => Ok(*w),
        [] => Err(CliError::Usage(format!(
            "run {id} has no {what}{}: {}",
            name.map(|n| format!(" named like `{n}`")).unwrap_or_default(),
            if all.is_empty() { "none at all".to_string() } else { all.join(", ") }
        ))),
        _ => Err(CliError::Usage(format!(
            "run {id} has several: name one with --workload ({})",
            picked.iter().map(|w| w.name.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// Every step of `w` in words, by index: `4 workers: 63'333 IOPS @ 1.2 ms` (`in_mbps`:
/// `… 812 MB/s @ 1.2 ms`).
pub(crate) fn step_labels(w: &WorkloadResult, in_mbps: bool) -> Vec<String> {
    w.steps
        .iter()
        .map(|s| {
            let who = match &s.rate {
                Some(r) => format!("the step at {} IOPS", format::iops(r.target_iops)),
                None if s.workers == 1 => "1 worker".to_string(),
                None => format!("{} workers", s.workers),
            };
            format!("{who}: {}", format::headline(s.iops, s.mbps, s.lat_us.mean, in_mbps))
        })
        .collect()
}

/// The steps the analysis compares (measured, on the full host count, sustained), in ramp (or
/// rate) order: the curve a figure is read off.
pub(crate) fn curve(w: &WorkloadResult) -> Vec<usize> {
    iocurve_analysis::compared(&w.steps).steps
}
