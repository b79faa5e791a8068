//! `iocurve mark`: a mark sent to the run running now on this host, or added to a stored run
//! (`--at`, `--events`). The words of a mark and the reading of times are `iocurve_stats::marks`;
//! the endpoint of a running run is `iocurve_run::marks`.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use iocurve_run::open_existing_store;
use iocurve_stats::Mark;
use iocurve_stats::date::parse_timestamp;
use iocurve_stats::marks::{EVENTS_FILE_BYTES, mark_text, parse_when, read_events};

use crate::CliError;

/// How the times read are put on the run's clock: the offset of times written without one, and
/// a shift for a source whose clock is off the coordinator's.
pub struct Clock {
    pub(crate) offset_s: Option<i64>,
    pub(crate) shift_ns: i64,
}

impl Clock {
    pub fn new(utc_offset: Option<&str>, shift_s: f64) -> Result<Clock, CliError> {
        let offset_s = utc_offset.map(iocurve_stats::date::parse_utc_offset).transpose().map_err(CliError::Usage)?;
        if !shift_s.is_finite() || shift_s.abs() > 86_400.0 {
            return Err(CliError::Usage(format!("--shift-s {shift_s}: give seconds within a day (±86400)")));
        }
        Ok(Clock { offset_s, shift_ns: (shift_s * 1e9).round() as i64 })
    }
}

/// A mark to the run running now on this host (`--run`: which, of several).
pub fn send(db: &Path, run: Option<i64>, text: &str) -> Result<ExitCode, CliError> {
    mark_text(text).map_err(CliError::Usage)?;
    let running = iocurve_run::marks::running().map_err(CliError::Runtime)?;
    let at = iocurve_run::marks::pick(&running, run, db).map_err(CliError::Usage)?;
    let m = iocurve_run::marks::send(at, text).map_err(CliError::Runtime)?;
    crate::outln!("marked run {} at {} ({:.1} s into the run): {}", m.run, m.mark.at, m.after_start_s, m.mark.text);
    Ok(ExitCode::SUCCESS)
}

/// The stored run's span on its clock: its start, and its end (now while it runs).
pub(crate) fn span(store: &iocurve_store::Store, run: i64) -> Result<(i64, i64), CliError> {
    let row = store.run(run)?;
    let t = |s: &str| parse_timestamp(s, Some(0)).map_err(|e| CliError::Runtime(format!("run {run}: {e}")));
    let start = t(&row.started_at)?;
    let end = match row.finished_at.as_deref() {
        Some(f) if !f.is_empty() => t(f)?,
        _ => iocurve_stats::date::unix_ns(),
    };
    Ok((start, end))
}

pub(crate) fn within(run: i64, (start, end): (i64, i64)) -> String {
    let r = iocurve_stats::date::rfc3339_ns;
    format!("run {run} ({} to {})", r(start), r(end))
}

/// One mark at a given time, added to a stored run.
pub fn add(db: &Path, run: i64, at: &str, text: &str, clock: &Clock) -> Result<ExitCode, CliError> {
    let mut store = open_existing_store(db)?;
    let span = span(&store, run)?;
    let at_ns = parse_when(at, span.0, clock.offset_s).map_err(|e| CliError::Usage(format!("--at: {e}")))?;
    let mark = Mark::new(at_ns.saturating_add(clock.shift_ns), text, "given").map_err(CliError::Usage)?;
    if mark.at_unix_ns < span.0 || mark.at_unix_ns > span.1 {
        return Err(CliError::Usage(format!(
            "{} is outside {}: no timeline of it would show the mark (a time zone off? --utc-offset, --shift-s)",
            mark.at,
            within(run, span)
        )));
    }
    let after = (mark.at_unix_ns - span.0) as f64 / 1e9;
    if store.marks(run)?.iter().any(|m| m.at_unix_ns == mark.at_unix_ns && m.text == mark.text) {
        crate::outln!("run {run} has that mark already: {} ({after:.1} s into the run): {}", mark.at, mark.text);
        return Ok(ExitCode::SUCCESS);
    }
    store.add_marks(run, std::slice::from_ref(&mark))?;
    crate::outln!("marked run {run} at {} ({after:.1} s into the run): {}", mark.at, mark.text);
    Ok(ExitCode::SUCCESS)
}

/// The events of a file, added to a stored run: all or, when a line cannot be read, none.
pub fn import(db: &Path, run: i64, file: &Path, clock: &Clock) -> Result<ExitCode, CliError> {
    let text = read_file(file, "--events", EVENTS_FILE_BYTES)?;
    let mut store = open_existing_store(db)?;
    let span = span(&store, run)?;
    let name = file.file_name().map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into_owned());
    let mut events = read_events(&text, &name, span.0, clock.offset_s);
    if !events.refused.is_empty() {
        return Err(refused_lines(file, &events.refused));
    }
    for m in &mut events.marks {
        *m = Mark::new(m.at_unix_ns.saturating_add(clock.shift_ns), &m.text, &m.source).map_err(CliError::Usage)?;
    }
    let stored = store.marks(run)?;
    let (inside, outside): (Vec<Mark>, Vec<Mark>) =
        events.marks.into_iter().partition(|m| (span.0..=span.1).contains(&m.at_unix_ns));
    // Kept once: a mark stored before, or given twice in the file.
    let mut new: Vec<Mark> = Vec::new();
    let mut already: Vec<Mark> = Vec::new();
    for m in inside {
        let same = |s: &Mark| s.at_unix_ns == m.at_unix_ns && s.text == m.text;
        if stored.iter().any(same) || new.iter().any(same) { already.push(m) } else { new.push(m) }
    }
    if new.is_empty() && already.is_empty() && !outside.is_empty() {
        return Err(CliError::Usage(format!(
            "no event of {} falls within {}: the first is {} ({}); a time zone off? (--utc-offset, --shift-s)",
            file.display(),
            within(run, span),
            outside[0].at,
            outside[0].source
        )));
    }
    store.add_marks(run, &new)?;
    let mut said = format!("added {} mark(s) to run {run} from {}", new.len(), file.display());
    if !outside.is_empty() {
        said += &format!(
            "; {} outside {} left out (the first: {}, {})",
            outside.len(),
            within(run, span),
            outside[0].source,
            outside[0].at
        );
    }
    if !already.is_empty() {
        said += &format!("; {} there already (or twice in the file)", already.len());
    }
    crate::outln!("{said}");
    Ok(ExitCode::SUCCESS)
}

/// A file some of whose lines cannot be read: each named `FILE:LINE: why` (the first 10), and
/// nothing added from it.
pub(crate) fn refused_lines(file: &Path, refused: &[(usize, String)]) -> CliError {
    let n = refused.len();
    let lines: Vec<String> = refused.iter().take(10).map(|(l, why)| format!("{}:{l}: {why}", file.display())).collect();
    let more = if n > 10 { format!("\n({} more)", n - 10) } else { String::new() };
    CliError::Usage(format!(
        "{n} line(s) of {} cannot be read; nothing was added:\n{}{more}",
        file.display(),
        lines.join("\n")
    ))
}

/// The file's text: a regular file (or a pipe) of UTF-8, at most `limit` bytes (`flag` names
/// it in errors).
pub(crate) fn read_file(file: &Path, flag: &str, limit: u64) -> Result<String, CliError> {
    let bad = |why: String| CliError::Usage(format!("{flag} {}: {why}", file.display()));
    let f = std::fs::File::open(file).map_err(|e| bad(e.to_string()))?;
    if f.metadata().map_err(|e| bad(e.to_string()))?.is_dir() {
        return Err(bad("a directory, not a file".into()));
    }
    let mut bytes = Vec::new();
    f.take(limit + 1).read_to_end(&mut bytes).map_err(|e| bad(e.to_string()))?;
    if bytes.len() as u64 > limit {
        return Err(bad(format!("larger than {} MiB: give the run's time only", limit >> 20)));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        bad(format!("not UTF-8 text (byte {at}); convert it, e.g. iconv -t UTF-8"))
    })
}
