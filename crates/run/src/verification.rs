//! Verification around a run (and `iocurve verify`): the map of acknowledged generations is
//! locked before any I/O, loaded (or started) before the workloads, saved at every interval end,
//! and every block it knows can be read back and checked — at the end of a run
//! (`--verify-final`, stored with the run) or later, even after iocurve or the host restarted.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use iocurve_analysis::{FinalVerification, VerifyProblem};
use iocurve_engine::TargetSet;
use iocurve_engine::journal::Journal;
use iocurve_engine::keeper::KeptMap;
use iocurve_engine::verify::{GenMap, MapLock, PROBLEM_LIST_CAP, PassResult, Problem, Unfinished, watched_pass};
use iocurve_plan::{Plan, format_size};
use iocurve_stats::VerifyCounts;

use crate::events::RunEvent;
use crate::{Cancel, Error, Observer};

pub struct Verification {
    /// The map, its file and its journal (`--verify-journal`).
    pub kept: KeptMap,
    /// Held for as long as the run uses the map.
    _lock: MapLock,
}

impl Verification {
    /// After the run: every step saved the map at its end (flushed first), so its journal
    /// names nothing in flight and goes; one that still names writes (a step whose last save
    /// the storage held up) stays for `iocurve verify`.
    pub fn close_journal(&self) {
        if let Some(j) = &self.kept.journal {
            j.close();
        }
    }
}

/// Each target's path and size, as a map records them.
pub fn target_list(targets: &TargetSet) -> Vec<(String, u64)> {
    targets.targets.iter().map(|t| (t.path.display().to_string(), t.size)).collect()
}

/// Verifying workloads of one run share one map, so one block size: checked before any I/O (it
/// used to stop a run at its first verifying step, after the others had run).
pub fn check_plan(plan: &Plan) -> Result<(), Error> {
    let mut verifying = plan.workloads.iter().filter(|w| w.verify);
    let Some(first) = verifying.next() else { return Ok(()) };
    if let Some(other) = verifying.find(|w| w.bs != first.bs) {
        return Err(Error::Usage(format!(
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
pub fn prepare(plan: &Plan, path: &Path, obs: &mut dyn Observer) -> Result<Option<Prepared>, Error> {
    if !plan.workloads.iter().any(|w| w.verify) {
        return Ok(None);
    }
    let lock = MapLock::acquire(path)?;
    let map = if path.exists() { Some(load(path, obs)?) } else { None };
    Ok(Some(Prepared { path: path.to_path_buf(), lock, map }))
}

/// Loads a map (locked by the caller).
pub fn load(path: &Path, obs: &mut dyn Observer) -> Result<GenMap, Error> {
    let map = GenMap::load(path)?;
    if map.unchecked {
        obs.warning(&format!(
            "verification map {} was written by an earlier iocurve, without a checksum: used as it is (a damaged byte in it would show as a lost write); it gets a checksum when saved",
            path.display()
        ));
    }
    Ok(map)
}

/// The map for a run with verifying workloads: continued when the file existed and was made
/// for these targets and block size, new when it did not exist.
pub fn open(
    plan: &Plan,
    targets: &TargetSet,
    prepared: Option<Prepared>,
    journal: bool,
    obs: &mut dyn Observer,
) -> Result<Option<Verification>, Error> {
    let (Some(w), Some(Prepared { path, lock, map })) = (plan.workloads.iter().find(|w| w.verify), prepared) else {
        return Ok(None);
    };
    let bs = w.bs[0].bytes;
    // A block written through one path and read through another is the same block: a map per
    // path would call it lost or misplaced. Verification takes one path per LUN.
    targets.one_path_per_lun().map_err(|e| Error::Usage(format!("workload `{}` verifies, but {e}", w.name)))?;
    let list = target_list(targets);
    let map = match map {
        Some(map) => {
            if !map.matches(bs, &list) {
                return Err(Error::Usage(format!(
                    "verification map {} was made for other targets or another block size ({} blocks of {}): give another --verify-map, or remove it to start over",
                    path.display(),
                    map.targets.iter().map(|t| t.path.as_str()).collect::<Vec<_>>().join(", "),
                    format_size(map.bs)
                )));
            }
            // The run that kept the map may have stopped without saving it (killed, its host
            // crashed): the blocks its journal names are unknown until written again.
            if let Some(note) = iocurve_engine::journal::resolve(&path, &map)? {
                obs.warning(&note);
            }
            // A scratch file this run created holds none of the earlier writes: they went with
            // the file it replaces, and are no finding.
            for (i, t) in targets.targets.iter().enumerate().filter(|(_, t)| t.fresh) {
                let n = map.forget(i as u32);
                if n > 0 {
                    obs.event(&RunEvent::MapForgotten { target: t.path.display().to_string(), blocks: n });
                }
            }
            let known: u64 = (0..map.targets.len() as u32)
                .map(|t| (0..map.targets[t as usize].blocks()).filter(|&b| map.get(t, b) != 0).count() as u64)
                .sum();
            obs.event(&RunEvent::MapContinued { path: path.display().to_string(), known });
            map
        }
        None => {
            // A journal of an earlier map of this name says nothing about the new one.
            iocurve_engine::journal::remove(&path);
            obs.event(&RunEvent::MapNew { path: path.display().to_string(), bs });
            GenMap::new(bs, &list)
        }
    };
    let mut map = map;
    // What each target is, so that a later `iocurve verify` finds it under another name (a map
    // made before identities were kept gets them here).
    map.set_identities(targets.targets.iter().map(|t| t.identity_key()));
    let journal = if journal {
        // Saved first: the journal names only writes after the map's save.
        map.save(&path)?;
        let j = Journal::create(&path, &map)?;
        obs.event(&RunEvent::Journaling { path: j.path().display().to_string() });
        Some(Arc::new(j))
    } else {
        None
    };
    Ok(Some(Verification { kept: KeptMap { map: Arc::new(map), path, journal }, _lock: lock }))
}

/// Reads every written block back and checks it; tells the observer what it found
/// (`iocurve verify`; a run's final pass is the one its hosts run, [`crate::Cluster::verify_final`]).
pub fn final_pass(
    targets: &Arc<TargetSet>,
    map: &Arc<GenMap>,
    path: &Path,
    stuck_after: Duration,
    cancel: &Cancel,
    obs: &mut dyn Observer,
) -> Result<(FinalVerification, PassResult), Error> {
    let started_at = crate::time::now_rfc3339();
    let progress = |d: u64, t: u64| format!("{} of {}", format_size(d), format_size(t));
    let (mut done, mut total) = (0, 0);
    let mut shown = std::time::Instant::now();
    let watched = watched_pass(
        targets.clone(),
        map.clone(),
        PROBLEM_LIST_CAP,
        cancel.shared(),
        stuck_after,
        Duration::from_millis(100),
        &mut |d, t| {
            (done, total) = (d, t);
            if shown.elapsed() >= Duration::from_secs(1) {
                shown = std::time::Instant::now();
                obs.event(&RunEvent::VerifyProgress { who: String::new(), done: d, total: t });
            }
        },
    )?;
    let pass = match watched {
        Ok(pass) => pass,
        Err(u @ Unfinished::StopIgnored { .. }) => {
            return Err(Error::Interrupted(format!("verification {}", u.describe())));
        }
        Err(u) => return Err(Error::Runtime(format!("verification: {}", u.describe()))),
    };
    if pass.interrupted {
        return Err(Error::Interrupted(format!(
            "verification interrupted by Ctrl-C after {}; nothing is recorded as verified",
            progress(done, total)
        )));
    }
    let v = &pass.counts;
    tell_counts("verification", v, pass.unlisted, "", obs);
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

/// What a final pass found, as the terminal shows it: `heading: counts`, the first examples, how
/// many more, and how many were counted beyond the list's cap (`cap_scope`: " per host" when
/// the counts add up several hosts' passes).
pub(crate) fn tell_counts(heading: &str, v: &VerifyCounts, unlisted: u64, cap_scope: &str, obs: &mut dyn Observer) {
    obs.event(&RunEvent::VerifyFound {
        heading: heading.to_string(),
        counts: Box::new(v.clone()),
        unlisted,
        cap: PROBLEM_LIST_CAP,
        cap_scope: cap_scope.to_string(),
    });
}

fn target_name(map: &GenMap, t: u32) -> String {
    map.targets.get(t as usize).map_or_else(|| format!("target {t}"), |m| m.path.clone())
}

/// A problem as the CSV and the store name it.
pub fn csv_row(map: &GenMap, p: &Problem) -> VerifyProblem {
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
