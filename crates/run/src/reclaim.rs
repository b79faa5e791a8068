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
        if let Probe::Command(c) = Probe::of(r, targets) {
            run_probe(&c, &AtomicBool::new(false)).map_err(|m| Error::Usage(format!("reclaim {}: {m}", r.name)))?;
        }
        for t in &targets.targets {
            t.can_punch_holes().map_err(|why| Error::Usage(format!("reclaim {} trims, but {why}", r.name)))?;
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
            if let Some(d) = t.discard() {
                let (gran, _) = d.map_err(|why| Error::Usage(format!("reclaim {} trims, but {why}", r.name)))?;
                if r.bs % gran != 0 || r.offset % gran != 0 {
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
    let want = |trimmed: u64| (r.back_pct / 100.0 * trimmed as f64).ceil() as u64;
    let mut trims_ended = Instant::now();
    for (dir, word) in [(Dir::Write, "write"), (Dir::Trim, "trim"), (Dir::Read, "read")] {
        if stopped() {
            res.interrupted = true;
            return Ok(());
        }
        let (name, total) = (format!("reclaim {} {word}", r.name), res.region_bytes);
        let mut tell = |done: u64, t: Duration| {
            obs.event(&RunEvent::PreconditionProgress {
                who: name.clone(),
                done,
                total,
                session: done,
                elapsed_s: t.as_secs_f64(),
            })
        };
        let f: PassFigures = pass(&regions, r.bs, r.queue_depth, dir, cancel, stuck_after, PROGRESS, &mut tell)?;
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
        obs.event(&RunEvent::ReclaimPass {
            name: r.name.clone(),
            pass: word.into(),
            bytes: p.bytes,
            seconds: p.seconds,
            mean_us: p.lat_us.mean,
        });
        match dir {
            Dir::Write => {
                res.write = p;
                if let (Some(b), Some(a)) = (before, used()?) {
                    res.used = Some(UsedSpace { before: b, after_write: a, after_trim: a, last: a });
                }
            }
            Dir::Trim => {
                res.trim = p;
                // At once after the trims: storage that frees as it trims is back already.
                if res.used.is_some()
                    && let Some(now) = used()?
                    && let Some(u) = &mut res.used
                {
                    let t = trims_ended.elapsed().as_secs_f64();
                    (u.after_trim, u.last) = (now, now);
                    res.timeline.push((t, now));
                    if u.after_write.saturating_sub(now) >= want(res.trim.bytes) {
                        res.back_after_s = Some(t);
                    }
                }
            }
            Dir::Read => {
                res.read = p;
                res.zero_blocks = f.zero_blocks;
            }
        }
        if f.stopped {
            res.interrupted = true;
            return Ok(());
        }
    }
    if res.used.is_none() || res.back_after_s.is_some() {
        res.interrupted = stopped();
        return Ok(());
    }
    // Otherwise watched until back_pct % of the trimmed bytes are free again (against the used
    // space after the writes), from the end of the trims.
    let want = want(res.trim.bytes);
    let t0 = trims_ended;
    obs.event(&RunEvent::ReclaimWaiting { name: r.name.clone(), want, timeout_s: r.timeout_s });
    loop {
        let t = t0.elapsed().as_secs_f64();
        let Some(now) = used()? else { break };
        res.timeline.push((t, now));
        if let Some(u) = &mut res.used {
            u.last = now;
            if u.after_write.saturating_sub(now) >= want {
                res.back_after_s = Some(t);
                break;
            }
        }
        if t >= r.timeout_s || stopped() {
            break;
        }
        let wait = Duration::from_secs_f64(r.poll_s.min((r.timeout_s - t).max(0.0)));
        let until = Instant::now() + wait;
        while Instant::now() < until && !stopped() {
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
        }
    }
    res.interrupted = stopped() && res.back_after_s.is_none();
    Ok(())
}
