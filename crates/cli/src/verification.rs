//! `iocurve verify` and the problems CSV: every block a verifying run's map knows, read back
//! and checked later (even after iocurve or the host restarted); every problem a pass finds
//! written as CSV (`verify --problems`, `export --format problems`). The pass itself is the
//! runner's (`iocurve_run::verification`), the one a run's `--verify-final` uses.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use iocurve_analysis::VerifyProblem;
use iocurve_engine::journal;
use iocurve_engine::verify::MapLock;
use iocurve_engine::{OpenOptions, TargetSet};
use iocurve_plan::{TargetGroup, format_size};
use iocurve_report::export::{problem_csv_row, problems_csv_header};
use iocurve_run::verification::{csv_row, final_pass, load};
use iocurve_store::Store;

use crate::CliError;
use crate::cli::VerifyArgs;
use crate::terminal::Terminal;

/// A problems CSV being written: created (and its header written) before any I/O, so that a
/// path that cannot be written is bad input found first.
pub struct ProblemsCsv {
    path: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    rows: u64,
    error: Option<std::io::Error>,
}

impl ProblemsCsv {
    pub fn create(path: &Path) -> Result<ProblemsCsv, CliError> {
        if path.is_dir() {
            return Err(CliError::Usage(format!("--problems {}: that is a directory; name a file", path.display())));
        }
        let f = std::fs::File::create(path).map_err(|e| {
            CliError::Usage(format!(
                "--problems {}: cannot write there ({e}); choose a path in a writable directory",
                path.display()
            ))
        })?;
        let mut csv = ProblemsCsv { path: path.to_path_buf(), out: std::io::BufWriter::new(f), rows: 0, error: None };
        csv.write(&problems_csv_header());
        Ok(csv)
    }

    fn write(&mut self, line: &str) {
        if self.error.is_none()
            && let Err(e) = self.out.write_all(line.as_bytes())
        {
            self.error = Some(e);
        }
    }

    pub fn row(&mut self, p: &VerifyProblem) {
        self.write(&problem_csv_row(p));
        self.rows += 1;
    }

    /// Flushes the file; returns the rows written.
    pub fn finish(mut self) -> Result<u64, CliError> {
        let flushed = self.out.flush().and_then(|()| self.out.get_ref().sync_all());
        match self.error.take().map_or(flushed, Err) {
            Ok(()) => Ok(self.rows),
            Err(e) => Err(CliError::Runtime(format!("cannot write {}: {e}", self.path.display()))),
        }
    }
}

/// `iocurve verify TARGET... --map FILE [--problems FILE.csv]`.
pub fn command(args: VerifyArgs) -> Result<ExitCode, CliError> {
    // Ctrl-C ends the pass within about a second, with a message and exit code 130.
    let cancel = crate::signals::install();
    let csv = args.problems.as_deref().map(ProblemsCsv::create).transpose()?;
    let r = verify(&args, csv, &cancel);
    if r.is_err()
        && let Some(p) = &args.problems
    {
        // Nothing (or not everything) was checked: no list that looks like a clean result. Only
        // a file is removed: `--problems /dev/null` names a device that must stay.
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file()) {
            let _ = std::fs::remove_file(p);
        }
    }
    r
}

fn verify(args: &VerifyArgs, mut csv: Option<ProblemsCsv>, cancel: &iocurve_run::Cancel) -> Result<ExitCode, CliError> {
    let mut terminal = Terminal::new();
    // A run still writing the map (or another pass) holds it: reading now would report the
    // blocks in flight as lost.
    let _lock = MapLock::acquire(&args.map)?;
    let map = load(&args.map, &mut terminal)?;
    // After a crash of the host that ran the map's last run: its journal names the blocks being
    // written then, which may hold the saved write, a later one or a torn mix (issue 36, part 8).
    match journal::load(&args.map, &map)? {
        journal::Found::Intents(i) => {
            let n = map.in_flight(&i);
            terminal.line(&format!(
                "verification journal {}: {n} blocks were being written when the run that kept the map stopped (checked as in flight: the saved write, a later one or a torn mix is explained, older is lost){}",
                journal::Journal::path_for(&args.map).display(),
                if i.ignored_bytes > 0 {
                    format!("; its last {} bytes were a batch cut short (never submitted)", i.ignored_bytes)
                } else {
                    String::new()
                }
            ));
            map.explain_with(i);
        }
        journal::Found::OtherMap => terminal.line(&format!(
            "verification journal {} belongs to another map: ignored",
            journal::Journal::path_for(&args.map).display()
        )),
        journal::Found::None => {}
    }
    let groups = vec![TargetGroup { name: "targets".into(), weight: 1, targets: args.targets.clone() }];
    for t in &args.targets {
        if !Path::new(t).exists() {
            return Err(CliError::Usage(format!("target {t} does not exist: name the targets the map was made for")));
        }
    }
    let mut targets = TargetSet::open(&groups, &OpenOptions { write: false, ..Default::default() })?;
    // The map's targets by what they are, not by the text of their paths (issue 36, finding
    // 7): a LUN renamed by a reboot or named by another path is still found, in any order.
    let given: Vec<(String, u64, Option<String>)> =
        targets.targets.iter().map(|t| (t.path.display().to_string(), t.size, t.identity_key())).collect();
    let order = map.order_of(&given).map_err(|missing| {
        CliError::Usage(format!(
            "verification map {} was made for {}; not among the targets given: {missing}; name the targets the map was made for",
            args.map.display(),
            map.targets.iter().map(|t| format!("{} ({})", t.path, format_size(t.size))).collect::<Vec<_>>().join(", ")
        ))
    })?;
    for (t, &j) in map.targets.iter().zip(&order) {
        if t.path != given[j].0 {
            terminal.line(&format!("{} is the map's {} (the same target under another name)", given[j].0, t.path));
        }
    }
    targets.reorder(&order);
    let (targets, map) = (Arc::new(targets), Arc::new(map));
    let (v, pass) =
        final_pass(&targets, &map, &args.map, Duration::from_secs_f64(args.stuck_after_s), cancel, &mut terminal)?;
    if let (Some(mut csv), Some(path)) = (csv.take(), &args.problems) {
        for p in &pass.problems {
            csv.row(&csv_row(&map, p));
        }
        let n = csv.finish()?;
        crate::outln!("wrote {n} problems to {}", path.display());
    }
    // 4 wins over 3: lost blocks found, whatever could not be read.
    Ok(if v.counts.problems() > 0 {
        ExitCode::from(4)
    } else if v.counts.unreadable > 0 {
        ExitCode::from(3)
    } else {
        ExitCode::SUCCESS
    })
}

/// `iocurve export RUN --format problems -o FILE.csv`: the problems a run's final verification
/// stored, as `verify --problems` writes them.
pub fn export_problems(store: &Store, run_id: i64, output: &Path) -> Result<ExitCode, CliError> {
    let Some(v) = store.verification(run_id)? else {
        return Err(CliError::Usage(format!(
            "run {run_id} has no final verification pass: only runs with --verify-final (and verifying workloads) have one"
        )));
    };
    let mut csv = ProblemsCsv::create(output)?;
    store.verify_problems(run_id, |p| {
        csv.row(&VerifyProblem {
            offset: p.block * v.bs,
            target: p.target,
            block: p.block,
            kind: p.kind,
            expected_generation: p.expected,
            found_generation: p.found_generation,
            found: p.found,
        })
    })?;
    let n = csv.finish()?;
    let unlisted =
        if v.unlisted > 0 { format!(" ({} more were counted, not listed)", v.unlisted) } else { String::new() };
    crate::outln!("wrote {n} problems to {}{unlisted}", output.display());
    Ok(ExitCode::SUCCESS)
}
