//! `iocurve array`: the array's own figures (a CSV its GUI or CLI exported) stored beside a run,
//! on the run's clock, for the report's timeline and the host-against-array check.

use std::path::Path;
use std::process::ExitCode;

use iocurve_run::open_existing_store;
use iocurve_stats::array::{ARRAY_FILE_BYTES, read_array_csv};

use crate::CliError;
use crate::mark::{Clock, read_file, refused_lines, span, within};

/// Points this long before a run's start or after its end are kept (a CSV of the array's day
/// needs no cutting first); the rest is left out and counted.
const MARGIN_NS: i64 = 60_000_000_000;

/// What names the columns iocurve compares with its steps.
pub struct Columns<'a> {
    pub time: Option<&'a str>,
    pub iops: Option<&'a str>,
    pub mbps: Option<&'a str>,
}

pub fn import(db: &Path, run: i64, file: &Path, cols: &Columns, clock: &Clock) -> Result<ExitCode, CliError> {
    let text = read_file(file, "array", ARRAY_FILE_BYTES)?;
    let mut store = open_existing_store(db)?;
    let span = span(&store, run)?;
    let mut csv =
        read_array_csv(&text, span.0, clock.offset_s, cols.time).map_err(|refused| refused_lines(file, &refused))?;
    for (kind, col) in [("iops", cols.iops), ("mbps", cols.mbps)] {
        let Some(col) = col else { continue };
        let names: Vec<String> = csv.series.iter().map(|s| s.name.clone()).collect();
        let s = csv.series.iter_mut().find(|s| s.name == col).ok_or_else(|| {
            CliError::Usage(format!("--{kind} {col}: no such column in {} ({})", file.display(), names.join(", ")))
        })?;
        s.kind = kind.into();
    }
    let mut outside = 0;
    for s in &mut csv.series {
        let before = s.points.len();
        s.points = s
            .points
            .iter()
            .map(|&(at, v)| (at.saturating_add(clock.shift_ns), v))
            .filter(|&(at, _)| at >= span.0 - MARGIN_NS && at <= span.1 + MARGIN_NS)
            .collect();
        outside += before - s.points.len();
    }
    let kept: Vec<_> = csv.series.into_iter().filter(|s| !s.points.is_empty()).collect();
    if kept.is_empty() {
        return Err(CliError::Usage(format!(
            "no figure of {} falls within {} (a minute either side): a time zone off? (--utc-offset, --shift-s)",
            file.display(),
            within(run, span)
        )));
    }
    store.set_array(run, &kept)?;
    let points: usize = kept.iter().map(|s| s.points.len()).sum();
    let names: Vec<&str> = kept.iter().map(|s| s.name.as_str()).collect();
    let mut said = format!(
        "added {} series ({points} points) to run {run} from {}: {}",
        kept.len(),
        file.display(),
        names.join(", ")
    );
    if outside > 0 {
        said += &format!("; {outside} points outside {} left out", within(run, span));
    }
    if csv.skipped_cells > 0 {
        said += &format!("; {} cells that are not numbers left out", csv.skipped_cells);
    }
    crate::outln!("{said}");
    if cols.iops.is_some() || cols.mbps.is_some() {
        crate::outln!("`iocurve show {run}` and the report set each step against the array's figure");
    }
    Ok(ExitCode::SUCCESS)
}
