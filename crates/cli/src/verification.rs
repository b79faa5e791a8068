//! Verification around a run and `iocurve verify`: the map of acknowledged generations is
//! locked before any I/O, loaded (or started) before the workloads, saved at every interval end,
//! and every block it knows can be read back and checked — at the end of a run
//! (`--verify-final`, stored with the run) or later, even after iocurve or the host restarted.
//! Every problem a pass finds can be written as CSV (`verify --problems`, `export --format
//! problems`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use iocurve_analysis::{FinalVerification, VerifyProblem};
use iocurve_engine::verify::{GenMap, MapLock, PROBLEM_LIST_CAP, PassResult, Problem, verify_pass};
use iocurve_engine::{OpenOptions, TargetSet};
use iocurve_plan::{Plan, TargetGroup, format_size};
use iocurve_report::export::{problem_csv_row, problems_csv_header};
use iocurve_store::{Store, StoredProblem};

use crate::CliError;
use crate::cli::VerifyArgs;

pub struct Verification {
    pub map: Arc<GenMap>,
    pub path: PathBuf,
    /// Held for as long as the run uses the map.
    _lock: MapLock,
}

fn target_list(targets: &TargetSet) -> Vec<(String, u64)> {
    targets.targets.iter().map(|t| (t.path.display().to_string(), t.size)).collect()
}

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

/// A map locked and, when it exists, loaded: before any I/O, so that a map another run or
/// `iocurve verify` holds, or a damaged one, stops the run at once as bad input (exit code 2)
/// instead of part-way through.
pub struct Prepared {
    path: PathBuf,
    lock: MapLock,
    map: Option<GenMap>,
}

/// Locks (and loads) the map of a plan with verifying workloads; None without any.
pub fn prepare(plan: &Plan, path: &Path) -> Result<Option<Prepared>, CliError> {
    if !plan.workloads.iter().any(|w| w.verify) {
        return Ok(None);
    }
    let lock = MapLock::acquire(path)?;
    let map = if path.exists() { Some(load(path)?) } else { None };
    Ok(Some(Prepared { path: path.to_path_buf(), lock, map }))
}

fn load(path: &Path) -> Result<GenMap, CliError> {
    let map = GenMap::load(path)?;
    if map.unchecked {
        crate::errln!(
            "note: verification map {} was written by an earlier iocurve, without a checksum: used as it is (a damaged byte in it would show as a lost write); it gets a checksum when saved",
            path.display()
        );
    }
    Ok(map)
}

/// The map for a run with verifying workloads: continued when the file existed and was made
/// for these targets and block size, new when it did not exist.
pub fn open(plan: &Plan, targets: &TargetSet, prepared: Option<Prepared>) -> Result<Option<Verification>, CliError> {
    let (Some(w), Some(Prepared { path, lock, map })) = (plan.workloads.iter().find(|w| w.verify), prepared) else {
        return Ok(None);
    };
    let bs = w.bs[0].bytes;
    let list = target_list(targets);
    let map = match map {
        Some(map) => {
            if !map.matches(bs, &list) {
                return Err(CliError::Usage(format!(
                    "verification map {} was made for other targets or another block size ({} blocks of {}): give another --verify-map, or remove it to start over",
                    path.display(),
                    map.targets.iter().map(|t| t.path.as_str()).collect::<Vec<_>>().join(", "),
                    format_size(map.bs)
                )));
            }
            // A scratch file this run created holds none of the earlier writes: they went with
            // the file it replaces, and are no finding.
            for (i, t) in targets.targets.iter().enumerate().filter(|(_, t)| t.fresh) {
                let n = map.forget(i as u32);
                if n > 0 {
                    crate::outln!(
                        "verification: {} is a new scratch file: the {n} blocks written to the earlier one are forgotten (keep scratch files with --keep)",
                        t.path.display()
                    );
                }
            }
            let known: u64 = (0..map.targets.len() as u32)
                .map(|t| (0..map.targets[t as usize].blocks()).filter(|&b| map.get(t, b) != 0).count() as u64)
                .sum();
            crate::outln!("verification: continuing with {} ({known} blocks written before)", path.display());
            map
        }
        None => {
            crate::outln!("verification: map {} (blocks of {})", path.display(), format_size(bs));
            GenMap::new(bs, &list)
        }
    };
    Ok(Some(Verification { map: Arc::new(map), path, _lock: lock }))
}

/// Reads every written block back and checks it; prints the findings.
pub fn final_pass(
    targets: &Arc<TargetSet>,
    map: &Arc<GenMap>,
    path: &Path,
    stuck_after: Duration,
) -> Result<(FinalVerification, PassResult), CliError> {
    targets.set_direct(true).or_else(|_| targets.set_direct(false))?;
    let started_at = crate::time::now_rfc3339();
    // The pass reads on its own thread: a read on storage that stopped answering blocks in the
    // kernel, and neither Ctrl-C nor the deadline may wait for it.
    let (done, total) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (tx, rx) = mpsc::channel();
    {
        let (targets, map, done, total) = (targets.clone(), map.clone(), done.clone(), total.clone());
        std::thread::Builder::new()
            .name("iocurve-verify".into())
            .spawn(move || {
                let r = verify_pass(&targets, &map, PROBLEM_LIST_CAP, &crate::signals::STOP, &mut |d, t| {
                    done.store(d, Ordering::Relaxed);
                    total.store(t, Ordering::Relaxed);
                });
                let _ = tx.send(r);
            })
            .map_err(|e| CliError::Runtime(format!("verify: cannot start the verification thread: {e}")))?;
    }
    let progress =
        || format!("{} of {}", format_size(done.load(Ordering::Relaxed)), format_size(total.load(Ordering::Relaxed)));
    let mut last_print = Instant::now();
    let (mut last_done, mut moved_at) = (0u64, Instant::now());
    let mut stop_seen: Option<Instant> = None;
    let pass = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => break r?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(CliError::Runtime("verify: the verification thread ended without a result".into()));
            }
        }
        let d = done.load(Ordering::Relaxed);
        if d != last_done {
            (last_done, moved_at) = (d, Instant::now());
        }
        if crate::signals::STOP.load(Ordering::Relaxed) {
            let seen = *stop_seen.get_or_insert_with(Instant::now);
            if seen.elapsed() >= Duration::from_secs(1) {
                return Err(CliError::Interrupted(format!(
                    "verification interrupted after {}: a read did not return within a second of Ctrl-C (the storage stopped answering); nothing is recorded as verified",
                    progress()
                )));
            }
        }
        if moved_at.elapsed() >= stuck_after {
            return Err(CliError::Runtime(format!(
                "verification: no read returned for {:.0} s after {} (the storage stopped answering); nothing is recorded as verified",
                stuck_after.as_secs_f64(),
                progress()
            )));
        }
        if last_print.elapsed() >= Duration::from_secs(1) {
            last_print = Instant::now();
            crate::outln!("  verify: {}", progress());
        }
    };
    if pass.interrupted {
        return Err(CliError::Interrupted(format!(
            "verification interrupted by Ctrl-C after {}; nothing is recorded as verified",
            progress()
        )));
    }
    let v = &pass.counts;
    crate::outln!("verification: {}", v.describe());
    for e in &v.examples {
        crate::outln!("  ! {e}");
    }
    let more = v.problems().saturating_sub(v.examples.len() as u64);
    if more > 0 {
        crate::outln!("  … {more} more problems");
    }
    if pass.unlisted > 0 {
        crate::outln!("  ({} problems beyond the first {PROBLEM_LIST_CAP} are counted, not listed)", pass.unlisted);
    }
    let fv = FinalVerification {
        map: path.display().to_string(),
        bs: map.bs,
        started_at,
        finished_at: crate::time::now_rfc3339(),
        counts: v.clone(),
        unlisted: pass.unlisted,
    };
    Ok((fv, pass))
}

fn target_name(map: &GenMap, t: u32) -> String {
    map.targets.get(t as usize).map_or_else(|| format!("target {t}"), |m| m.path.clone())
}

fn csv_row(map: &GenMap, p: &Problem) -> VerifyProblem {
    VerifyProblem {
        target: target_name(map, p.target),
        block: p.block,
        offset: p.block * map.bs,
        kind: p.kind().into(),
        expected_generation: p.expected,
        found_generation: p.found_generation(),
        found: p.describe_found(|t| target_name(map, t)),
    }
}

/// A pass's listed problems as the store keeps them.
pub fn stored_problems<'a>(pass: &'a PassResult, map: &'a GenMap) -> impl Iterator<Item = StoredProblem> + 'a {
    pass.problems.iter().map(|p| {
        let r = csv_row(map, p);
        StoredProblem {
            target: r.target,
            block: r.block,
            kind: r.kind,
            expected: r.expected_generation,
            found_generation: r.found_generation,
            found: r.found,
        }
    })
}

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
    crate::signals::install();
    let csv = args.problems.as_deref().map(ProblemsCsv::create).transpose()?;
    let r = verify(&args, csv);
    if r.is_err()
        && let Some(p) = &args.problems
    {
        // Nothing (or not everything) was checked: no list that looks like a clean result.
        let _ = std::fs::remove_file(p);
    }
    r
}

fn verify(args: &VerifyArgs, mut csv: Option<ProblemsCsv>) -> Result<ExitCode, CliError> {
    // A run still writing the map (or another pass) holds it: reading now would report the
    // blocks in flight as lost.
    let _lock = MapLock::acquire(&args.map)?;
    let map = load(&args.map)?;
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
    let (targets, map) = (Arc::new(targets), Arc::new(map));
    let (v, pass) = final_pass(&targets, &map, &args.map, Duration::from_secs_f64(args.stuck_after_s))?;
    if let (Some(mut csv), Some(path)) = (csv.take(), &args.problems) {
        for p in &pass.problems {
            csv.row(&csv_row(&map, p));
        }
        let n = csv.finish()?;
        crate::outln!("wrote {n} problems to {}", path.display());
    }
    Ok(if v.counts.problems() > 0 { ExitCode::from(4) } else { ExitCode::SUCCESS })
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
