//! Reclaim steps (`[[reclaim]]`, issue 40), after the workloads: on every target a region is
//! written, trimmed and read back (each pass timed), and the storage's used space is watched
//! until the trimmed bytes are free again — how a thin-provisioned LUN gives back what a file
//! system deletes. The used space comes from a probe: the user's command, or on their own the
//! allocated size of a loop device's backing file or of a file target.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use iocurve_analysis::{PassResult, ReclaimResult, UsedSpace};
use iocurve_engine::ops::Dir;
use iocurve_engine::reclaim::{PassFigures, Region, pass};
use iocurve_engine::{TargetKind, TargetSet};
use iocurve_plan::{Plan, Reclaim, format_size, parse_size};

use crate::events::RunEvent;
use crate::{Error, Observer};

/// How often a long pass says how far it got.
const PROGRESS: Duration = Duration::from_secs(5);

/// How long a probe command may take before the step fails.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// What measures the used space.
enum Probe {
    Command(String),
    /// The allocated bytes of these files (loop devices' backing files, file targets).
    Allocated(Vec<PathBuf>),
    None,
}

impl Probe {
    fn of(r: &Reclaim, targets: &TargetSet) -> Probe {
        if let Some(c) = &r.probe {
            return Probe::Command(c.clone());
        }
        let files: Option<Vec<PathBuf>> = targets
            .targets
            .iter()
            .map(|t| match t.kind {
                TargetKind::File => Some(t.path.clone()),
                TargetKind::BlockDevice => t.loop_backing_file(),
            })
            .collect();
        files.map_or(Probe::None, Probe::Allocated)
    }

    fn describe(&self) -> String {
        match self {
            Probe::Command(c) => format!("command: {c}"),
            Probe::Allocated(f) => format!(
                "allocated size of {}",
                f.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ),
            Probe::None => String::new(),
        }
    }

    /// The used bytes now; None without a probe (or when a Ctrl-C stopped the probe command).
    fn used(&self, cancel: &AtomicBool) -> Result<Option<u64>, String> {
        match self {
            Probe::None => Ok(None),
            Probe::Allocated(files) => {
                use std::os::unix::fs::MetadataExt;
                let mut sum = 0;
                for f in files {
                    sum +=
                        std::fs::metadata(f).map_err(|e| format!("cannot stat {}: {e}", f.display()))?.blocks() * 512;
                }
                Ok(Some(sum))
            }
            Probe::Command(c) => run_probe(c, cancel),
        }
    }
}

/// Runs the probe command with `sh -c`, in a process group of its own, and reads the used bytes
/// it printed (the first word: a size such as `12g` or a number of bytes). A probe that does not
/// finish in time, or a Ctrl-C meanwhile (`Ok(None)`), ends its whole group: a hung `ssh` and
/// what it started are not left behind.
fn run_probe(cmd: &str, cancel: &AtomicBool) -> Result<Option<u64>, String> {
    use std::os::unix::process::CommandExt;
    let mut child = Command::new("sh")
        .args(["-c", cmd])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("reclaim probe `{cmd}`: cannot start it: {e}"))?;
    let kill = |child: &mut std::process::Child| {
        // SAFETY: a signal to the probe's own process group (its id is the child's pid).
        unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
        let _ = child.wait();
    };
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if cancel.load(std::sync::atomic::Ordering::Relaxed) => {
                kill(&mut child);
                return Ok(None);
            }
            Ok(None) if started.elapsed() < PROBE_TIMEOUT => std::thread::sleep(Duration::from_millis(10)),
            Ok(None) => {
                kill(&mut child);
                return Err(format!(
                    "reclaim probe `{cmd}` did not finish in {} s: it must print the used bytes and exit",
                    PROBE_TIMEOUT.as_secs()
                ));
            }
            Err(e) => return Err(format!("reclaim probe `{cmd}`: {e}")),
        }
    };
    let out = child.wait_with_output().map_err(|e| format!("reclaim probe `{cmd}`: {e}"))?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let said = |s: &str| s.trim().chars().take(200).collect::<String>();
    if !status.success() {
        let what = if stderr.trim().is_empty() { said(&stdout) } else { said(&stderr) };
        return Err(format!(
            "reclaim probe `{cmd}` failed ({status}): {}",
            if what.is_empty() { "it said nothing" } else { &what }
        ));
    }
    let word = stdout.split_whitespace().next().unwrap_or("");
    parse_size(word).map(Some).map_err(|e| {
        format!(
            "reclaim probe `{cmd}` printed `{}`, not a size ({e}): it must print the used bytes first, e.g. 12884901888 or 12g",
            said(&stdout)
        )
    })
}

/// Before any I/O of the run: every target holds the step's region, a block device discards in
/// granules that divide its blocks, a file's file system punches holes, and the probe answers
/// (a broken probe found after an hour of workloads would cost the hour).
pub(crate) fn check(plan: &Plan, targets: &TargetSet) -> Result<(), Error> {
    for r in &plan.reclaim {
        // One buffer of bs per I/O in flight.
        let need = r.bs.saturating_mul(r.queue_depth as u64);
        if let Some((avail, why)) = iocurve_engine::budget::available()
            && need > avail / 10 * 8
        {
            return Err(Error::Usage(format!(
                "reclaim {}: {} I/Os in flight of {} need {} of buffers, more than 80 % of the {} this host has available ({why}): lower queue_depth or bs",
                r.name,
                r.queue_depth,
                format_size(r.bs),
                format_size(need),
                format_size(avail)
            )));
        }
        if let Probe::Command(c) = Probe::of(r, targets) {
            run_probe(&c, &AtomicBool::new(false)).map_err(|m| Error::Usage(format!("reclaim {}: {m}", r.name)))?;
        }
        for t in &targets.targets {
            let granule =
                t.trim_granule().map_err(|why| Error::Usage(format!("reclaim {} trims, but {why}", r.name)))?;
            r.region(t.size).map_err(|m| Error::Usage(format!("{m} ({})", t.path.display())))?;
            if r.bs % t.logical_block != 0 || r.offset % t.logical_block != 0 {
                return Err(Error::Usage(format!(
                    "reclaim {}: bs {} and offset {} must be multiples of the logical block size {} of {}",
                    r.name,
                    format_size(r.bs),
                    format_size(r.offset),
                    t.logical_block,
                    t.path.display()
                )));
            }
            if let Some(gran) = granule
                && (r.bs % gran != 0 || r.offset % gran != 0)
            {
                return Err(Error::Usage(format!(
                    "reclaim {}: bs {} and offset {} must be multiples of the discard granularity {} of {}",
                    r.name,
                    format_size(r.bs),
                    format_size(r.offset),
                    format_size(gran),
                    t.path.display()
                )));
            }
        }
    }
    Ok(())
}

/// Runs every reclaim step of the plan on `targets`, in order; stops at a Ctrl-C with what was
/// done. The error that ended one (a pass failed: an I/O error, storage that stopped answering;
/// the probe failed) comes with the results so far, that step's among them: what it measured
/// before is kept.
pub(crate) fn run_all(
    plan: &Plan,
    targets: &TargetSet,
    cancel: &AtomicBool,
    stuck_after: Duration,
    obs: &mut dyn Observer,
) -> (Vec<ReclaimResult>, Option<Error>) {
    let mut out = Vec::new();
    for r in &plan.reclaim {
        if cancel.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        let mut res = ReclaimResult {
            name: r.name.clone(),
            targets: targets.targets.iter().map(|t| t.path.display().to_string()).collect(),
            bs: r.bs,
            queue_depth: r.queue_depth,
            back_pct: r.back_pct,
            timeout_s: r.timeout_s,
            ..Default::default()
        };
        let ended = one(r, targets, cancel, stuck_after, obs, &mut res);
        if let Err(e) = &ended {
            res.error = Some(e.to_string());
        }
        out.push(res);
        if let Err(e) = ended {
            return (out, Some(e));
        }
    }
    (out, None)
}

fn one(
    r: &Reclaim,
    targets: &TargetSet,
    cancel: &AtomicBool,
    stuck_after: Duration,
    obs: &mut dyn Observer,
    res: &mut ReclaimResult,
) -> Result<(), Error> {
    let mut regions = Vec::new();
    for t in &targets.targets {
        let (start, len) = r.region(t.size).map_err(Error::Usage)?;
        regions.push(Region { target: t, start, len });
    }
    let probe = Probe::of(r, targets);
    let used = || probe.used(cancel).map_err(Error::Runtime);
    // A Ctrl-C stopped a probe command (or the wait): what was measured stays.
    let stopped = || cancel.load(std::sync::atomic::Ordering::Relaxed);
    // Direct I/O where the targets take it: the reads must reach the storage, not the page
    // cache. Buffered writes are synced before the trims.
    let direct = targets.set_direct(true).is_ok();
    res.region_bytes = regions.iter().map(|g| g.len).sum();
    res.probe = probe.describe();
    obs.event(&RunEvent::ReclaimStarting {
        name: r.name.clone(),
        bytes: res.region_bytes,
        targets: res.targets.len(),
        probe: res.probe.clone(),
    });
    let before = used()?;
    let mut trims_ended = Instant::now();
    for (dir, word) in [(Dir::Write, "write"), (Dir::Trim, "trim")] {
        if stopped() {
            res.interrupted = true;
            return Ok(());
        }
        let f = timed_pass(r, &regions, dir, word, res.region_bytes, cancel, stuck_after, obs)?;
        if dir == Dir::Trim {
            trims_ended = Instant::now();
        }
        if dir == Dir::Write && !direct {
            for t in &targets.targets {
                t.file.sync_data().map_err(|e| {
                    Error::Runtime(format!("reclaim {}: cannot sync {}: {e}", r.name, t.path.display()))
                })?;
            }
        }
        let p = PassResult::of(f.ops, f.bytes, f.elapsed.as_secs_f64(), &f.hist);
        if dir == Dir::Write {
            res.write = p;
            if let (Some(b), Some(a)) = (before, used()?) {
                res.used = Some(UsedSpace { before: b, after_write: a, after_trim: a, last: a });
            }
        } else {
            res.trim = p;
        }
        if f.stopped {
            res.interrupted = true;
            return Ok(());
        }
    }
    // The used space is watched from the end of the trims — at once (storage that frees as it
    // trims is back already), then every poll_s — while the trimmed ranges are read back, until
    // back_pct % of the trimmed bytes are free again (against the used space after the writes).
    let want = (r.back_pct / 100.0 * res.trim.bytes as f64).ceil() as u64;
    let halt = AtomicBool::new(false);
    let watched = res.used.map(|u| u.after_write);
    if watched.is_some() {
        obs.event(&RunEvent::ReclaimWaiting { name: r.name.clone(), want, timeout_s: r.timeout_s });
    }
    let (read, watch) = std::thread::scope(|scope| {
        let watcher = watched.map(|after_write| {
            let (probe, halt) = (&probe, &halt);
            scope.spawn(move || watch(probe, after_write, want, trims_ended, r, cancel, halt))
        });
        let read = timed_pass(r, &regions, Dir::Read, "read", res.region_bytes, cancel, stuck_after, obs);
        // The read pass failed: the wait ends with it.
        if read.is_err() {
            halt.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        (read, watcher.map(|w| w.join().unwrap_or_else(|_| Err("the watch of the used space panicked".into()))))
    });
    // The reads' figures first: a probe that failed meanwhile keeps them.
    if let Ok(f) = &read {
        res.read = PassResult::of(f.ops, f.bytes, f.elapsed.as_secs_f64(), &f.hist);
        res.zero_blocks = f.zero_blocks;
    }
    if let Some(w) = watch {
        let w = w.map_err(Error::Runtime);
        if let (Ok(w), Some(u)) = (&w, &mut res.used) {
            if let Some(&(_, first)) = w.timeline.first() {
                u.after_trim = first;
            }
            if let Some(&(_, last)) = w.timeline.last() {
                u.last = last;
            }
        }
        match w {
            Ok(w) => {
                res.timeline = w.timeline;
                res.back_after_s = w.back_after_s;
            }
            Err(e) => return Err(e),
        }
    }
    let f = read?;
    res.interrupted = stopped() && (res.back_after_s.is_none() || f.stopped);
    Ok(())
}

/// One pass, its progress and its end told.
#[allow(clippy::too_many_arguments)]
fn timed_pass(
    r: &Reclaim,
    regions: &[Region],
    dir: Dir,
    word: &str,
    total: u64,
    cancel: &AtomicBool,
    stuck_after: Duration,
    obs: &mut dyn Observer,
) -> Result<PassFigures, Error> {
    let name = format!("reclaim {} {word}", r.name);
    let mut tell = |done: u64, t: Duration| {
        obs.event(&RunEvent::PreconditionProgress {
            who: name.clone(),
            done,
            total,
            session: done,
            elapsed_s: t.as_secs_f64(),
        })
    };
    let f = pass(regions, r.bs, r.queue_depth, dir, cancel, stuck_after, PROGRESS, &mut tell)?;
    obs.event(&RunEvent::ReclaimPass {
        name: r.name.clone(),
        pass: word.into(),
        bytes: f.bytes,
        seconds: f.elapsed.as_secs_f64(),
        mean_us: f.hist.mean_ns() / 1000.0,
    });
    Ok(f)
}

/// What watching the used space found: every probe (seconds after the trims, used bytes) and
/// when `want` bytes were free again.
struct Watched {
    timeline: Vec<(f64, u64)>,
    back_after_s: Option<f64>,
}

/// Probes the used space at once and then every `poll_s` until `want` bytes are free again
/// against `after_write`, `timeout_s` passed, a Ctrl-C, or `halt`.
fn watch(
    probe: &Probe,
    after_write: u64,
    want: u64,
    t0: Instant,
    r: &Reclaim,
    cancel: &AtomicBool,
    halt: &AtomicBool,
) -> Result<Watched, String> {
    let ended = || cancel.load(std::sync::atomic::Ordering::Relaxed) || halt.load(std::sync::atomic::Ordering::Relaxed);
    let mut w = Watched { timeline: Vec::new(), back_after_s: None };
    loop {
        let t = t0.elapsed().as_secs_f64();
        let Some(now) = probe.used(cancel)? else { break };
        w.timeline.push((t, now));
        if after_write.saturating_sub(now) >= want {
            w.back_after_s = Some(t);
            break;
        }
        if t >= r.timeout_s || ended() {
            break;
        }
        let until = Instant::now() + Duration::from_secs_f64(r.poll_s.min((r.timeout_s - t).max(0.0)));
        while Instant::now() < until && !ended() {
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
        }
    }
    Ok(w)
}
