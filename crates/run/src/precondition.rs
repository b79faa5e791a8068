//! Preconditioning (a run's `precondition` phase and `iocurve precondition`): every block of
//! every target written once before measuring, with progress and ETA, its state saved in the
//! results database every second so that an interrupted pass resumes where it stopped.

use std::time::Duration;

use iocurve_engine::precondition::{PreConfig, PreProgress, PreState, chunks, target_pass};
use iocurve_engine::{Target, TargetSet};
use iocurve_plan::DataPattern;
use iocurve_store::{Precondition, Store};

use crate::events::RunEvent;
use crate::{Cancel, Error, Observer, time};

pub const DEFAULT_BS: u64 = 1 << 20;
pub const DEFAULT_QD: u32 = 32;

/// The key of a target's record: its canonical path.
pub fn record_key(t: &Target) -> String {
    key_of(&t.path)
}

/// The key of the record of the target at `path` on this host: its canonical path.
pub fn key_of(path: &std::path::Path) -> String {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf()).display().to_string()
}

/// A run that trims (a workload's `trim_pct`, a reclaim step) gives blocks back: its targets are
/// no longer preconditioned. Their records are forgotten (and a scratch file is marked as being
/// prepared again) before the first trim, so that a later run preconditions them again instead
/// of reading deallocated blocks as if they were written (issue 40).
pub fn forget_if_trimmed(
    plan: &iocurve_plan::Plan,
    targets: &iocurve_engine::TargetSet,
    store: &Store,
    obs: &mut dyn Observer,
) {
    if !plan.trims() {
        return;
    }
    for t in &targets.targets {
        let name = t.path.display().to_string();
        forget(store, &record_key(t), &name, || t.mark_unprepared().map_err(|e| e.to_string()), obs);
    }
}

/// As [`forget_if_trimmed`] for a run on agents: the records kept here, under the names results
/// give their targets (the agents' scratch stamps are theirs).
pub fn forget_agents_if_trimmed(
    plan: &iocurve_plan::Plan,
    infos: &[iocurve_analysis::TargetInfo],
    store: &Store,
    obs: &mut dyn Observer,
) {
    if !plan.trims() {
        return;
    }
    for t in infos {
        forget(store, &t.path, &t.path, || Ok(()), obs);
    }
}

/// Forgets the record under `key`, then does `also`; a failure is a warning naming the target.
fn forget(store: &Store, key: &str, name: &str, also: impl FnOnce() -> Result<(), String>, obs: &mut dyn Observer) {
    if let Err(e) = store.forget_precondition(key).map_err(|e| e.to_string()).and_then(|()| also()) {
        obs.warning(&format!(
            "{name}: trims give blocks back, but its preconditioning could not be forgotten ({e}): precondition it again before trusting backend reads"
        ));
    }
}

/// The saved state of a pass over a target of `chunks` chunks (public for the fuzz target
/// `precondition_state`).
pub fn parse_state(json: &str, chunks: u64) -> Option<PreState> {
    PreState::parse(json, chunks)
}

/// A pass over a target: its record's key, its name in messages, its size, the write size and
/// the data written.
#[derive(Clone, Copy)]
pub struct Pass<'a> {
    pub key: &'a str,
    pub name: &'a str,
    pub size: u64,
    pub bs: u64,
    pub data_json: &'a str,
}

/// Where a pass over the target recorded as `key` starts: the state to resume from and the
/// record to keep it in (saved), or None when the target was preconditioned at this size
/// already and `skip_done`. `created`: a scratch file this run created, new whatever an earlier
/// file of that name had. Only a pass of the same write size and data resumes; anything else
/// starts over.
pub fn start_pass(
    store: &Store,
    pass: &Pass,
    created: bool,
    skip_done: bool,
    obs: &mut dyn Observer,
) -> Result<Option<(PreState, Precondition)>, Error> {
    let Pass { key, name, size, bs, data_json } = *pass;
    let old = if created { None } else { store.precondition(key, size)? };
    match old {
        Some(r) if skip_done && r.finished_at.is_some() => {
            obs.event(&RunEvent::PreconditionSkipped {
                target: name.to_string(),
                at: r.finished_at.clone().unwrap_or_default(),
            });
            Ok(None)
        }
        Some(r) if r.finished_at.is_none() && r.bs == bs && r.data_json == data_json => {
            let state = parse_state(&r.state_json, chunks(size, bs)).unwrap_or_default();
            // A pass that never wrote to it (stopped before its turn) is no resumption to speak of.
            if state.written_chunks() == 0 && r.bytes_written == 0 {
                return Ok(Some((state, r)));
            }
            obs.event(&RunEvent::PreconditionResuming {
                target: name.to_string(),
                at: (state.written_chunks() * bs).min(size),
                size,
                before: r.bytes_written,
            });
            Ok(Some((state, r)))
        }
        _ => {
            let r = Precondition {
                target: key.to_string(),
                size,
                bs,
                data_json: data_json.to_string(),
                state_json: PreState::default().to_json(),
                bytes_written: 0,
                started_at: time::now_rfc3339(),
                finished_at: None,
            };
            store.save_precondition(&r)?;
            Ok(Some((PreState::default(), r)))
        }
    }
}

/// What one target's pass of `iocurve precondition` came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetPass {
    /// Every block written (false: cancelled before).
    pub complete: bool,
    /// It wrote blocks now (false: preconditioned before, nothing written).
    pub wrote: bool,
}

/// Preconditions one target (`iocurve precondition`). No write returning for `stuck_after` is
/// an error (the storage stopped answering); the state so far is saved, so the same command
/// resumes once it answers.
pub fn target(
    t: &Target,
    cfg: &PreConfig,
    store: &Store,
    cancel: &Cancel,
    stuck_after: Duration,
    obs: &mut dyn Observer,
) -> Result<TargetPass, Error> {
    let key = record_key(t);
    let name = t.path.display().to_string();
    let data_json = serde_json::to_string(&cfg.pattern).unwrap_or_default();
    let bs = iocurve_engine::precondition::write_size(t.size, t.logical_block, cfg.bs);
    let cfg = PreConfig { bs, ..*cfg };
    // A half-prepared scratch file resumes an unfinished pass; a finished record starts over.
    let Some((resume, mut record)) = start_pass(
        store,
        &Pass { key: &key, name: &name, size: t.size, bs, data_json: &data_json },
        t.created,
        false,
        obs,
    )?
    else {
        return Ok(TargetPass { complete: true, wrote: false });
    };
    obs.event(&RunEvent::PreconditionWriting {
        target: t.path.display().to_string(),
        size: t.size,
        bs,
        in_flight: cfg.qd,
        data: cfg.pattern.describe(),
    });
    let before = record.bytes_written;
    let mut save_error = None;
    let mut shown = None;
    let mut wrote = false;
    let mut on_progress = |p: &PreProgress| {
        wrote |= p.session_bytes > 0;
        // The pass repeats its last progress while the sync waits: shown once.
        if shown.replace(p.done_bytes) != Some(p.done_bytes) {
            obs.event(&RunEvent::PreconditionProgress {
                who: String::new(),
                done: p.done_bytes,
                total: p.total_bytes,
                session: p.session_bytes,
                elapsed_s: p.elapsed.as_secs_f64(),
            });
        }
        record.state_json = p.state.to_json();
        record.bytes_written = before + p.session_bytes;
        if let Err(e) = store.save_precondition(&record) {
            save_error.get_or_insert(e);
        }
    };
    let result = target_pass(t, &cfg, &resume, cancel.flag(), Duration::from_secs(1), stuck_after, &mut on_progress);
    if let Some(e) = save_error {
        return Err(e.into());
    }
    let pass = result?;
    pass.notes.iter().for_each(|n| obs.event(&RunEvent::PassNote(n.clone())));
    pass.warnings.iter().for_each(|w| obs.warning(w));
    if pass.complete {
        record.finished_at = Some(time::now_rfc3339());
        store.save_precondition(&record)?;
        obs.event(&RunEvent::PreconditionComplete { target: t.path.display().to_string() });
    } else {
        obs.event(&RunEvent::PreconditionInterrupted { target: t.path.display().to_string() });
    }
    Ok(TargetPass { complete: pass.complete && !cancel.is_cancelled(), wrote })
}

/// The configuration of a run's precondition phase: 1 MiB writes, 32 in flight, the data
/// pattern of the plan's first writing workload.
pub fn run_config(pattern: DataPattern, dedupe_unit: u64) -> PreConfig {
    PreConfig { bs: DEFAULT_BS, qd: DEFAULT_QD, pattern, dedupe_unit }
}

/// When the target was preconditioned at its present size, if it was: never for a fresh scratch
/// file (created now, or not written through), whatever an earlier file of its name had.
pub fn preconditioned_at(store: &Store, t: &Target) -> Option<String> {
    if t.fresh {
        return None;
    }
    store.precondition(&record_key(t), t.size).ok().flatten().and_then(|r| r.finished_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzz target `precondition_state`: a stored state naming a chunk beyond the
    /// target (`{"watermark":10,"above":[11,24,13,14,15]}` for 16 chunks) resumed into a pass
    /// that never counted as complete; a watermark near u64::MAX overflowed the progress.
    #[test]
    fn a_state_that_does_not_fit_the_target_starts_over() {
        let s = PreState { watermark: 3, above: vec![5, 9] };
        assert_eq!(parse_state(&s.to_json(), 16), Some(s));
        assert_eq!(parse_state(&PreState::default().to_json(), 16), Some(PreState::default()));
        assert_eq!(parse_state(r#"{"watermark":16,"above":[]}"#, 16).map(|s| s.written_chunks()), Some(16));
        for bad in [
            r#"{"watermark":10,"above":[11,24,13,14,15]}"#,
            r#"{"watermark":17,"above":[]}"#,
            r#"{"watermark":18446744073709551615,"above":[1]}"#,
            r#"{"watermark":4,"above":[2]}"#,
            r#"{"watermark":4,"above":[4]}"#,
            r#"{"watermark":4,"above":[9,9]}"#,
            r#"{"watermark":4,"above":[9,6]}"#,
            r#"{"watermark":-1,"above":[]}"#,
            r#"{"above":[]}"#,
            "",
        ] {
            assert_eq!(parse_state(bad, 16), None, "{bad}");
        }
    }
}

/// The steady-state phase of `iocurve precondition --until-steady`: rounds of 4k random writes
/// (32 in flight) over every target, until the IOPS of the last 5 rounds meet the SNIA rule.
#[derive(Debug, Clone, Copy)]
pub struct SteadyRounds {
    pub round_s: f64,
    pub max_rounds: u32,
    pub pattern: DataPattern,
    pub dedupe_unit: u64,
}

/// What the steady-state phase found: every round's IOPS, the rule's check (the window that
/// met it, else the last 5), and what failed on the way.
#[derive(Debug, Clone)]
pub struct SteadyOutcome {
    pub rounds: Vec<f64>,
    pub check: Option<iocurve_stats::steady::SteadyCheck>,
    pub interrupted: bool,
    /// Writes that failed, and writes still outstanding at the end (stuck).
    pub errors: u64,
    pub stuck: u64,
}

impl SteadyRounds {
    /// The rounds' bounds, checked before anything is written: `--round-s` 0.1 to 86400 s,
    /// `--max-rounds` 5 (the rule's window) to 100000.
    pub fn check(&self) -> Result<(), Error> {
        if !(0.1..=86_400.0).contains(&self.round_s) {
            return Err(Error::Usage(format!("--round-s {}: a round lasts 0.1 to 86400 seconds", self.round_s)));
        }
        if !(iocurve_stats::steady::WINDOW as u32..=100_000).contains(&self.max_rounds) {
            return Err(Error::Usage(format!(
                "--max-rounds {}: give 5 (the rule judges the last 5 rounds) to 100000",
                self.max_rounds
            )));
        }
        Ok(())
    }
}

/// Runs the steady-state phase on `targets` (opened for writing), one line per round to `obs`.
pub fn until_steady(
    targets: &TargetSet,
    rounds: &SteadyRounds,
    cancel: &Cancel,
    obs: &mut dyn Observer,
) -> Result<SteadyOutcome, Error> {
    rounds.check()?;
    let backend = iocurve_engine::backend::available().resolve(iocurve_plan::Backend::IoUring).0;
    let w = iocurve_plan::Workload {
        name: "precondition-steady".into(),
        read_pct: 0.0,
        bs: vec![iocurve_plan::BlockSize { bytes: 4096, weight: 1 }],
        pattern: iocurve_plan::Pattern::Random,
        working_set: iocurve_plan::WorkingSet::Backend,
        queue_depth: 32,
        ramp: vec![1],
        warmup_s: 0.0,
        intervals: rounds.max_rounds,
        interval_s: rounds.round_s,
        backend,
        threads: 1,
        // The fill's dedupe unit is its write size; 4k writes dedupe per 4k unless a finer unit
        // was asked for.
        data: DataPattern {
            dedupe_unit: if rounds.dedupe_unit > 0 && 4096 % rounds.dedupe_unit == 0 {
                rounds.dedupe_unit
            } else {
                4096
            },
            ..rounds.pattern
        },
        steady_state: iocurve_plan::SteadyState::Snia,
        ..iocurve_plan::Workload::default()
    };
    // The plan's rules hold here too (a round of 0.1 s or more, 5 to 100000 rounds).
    iocurve_plan::check_workload(&w, &[], "precondition --until-steady")?;
    obs.event(&RunEvent::SteadyPrecondition { round_s: rounds.round_s, max_rounds: rounds.max_rounds });
    struct Rounds<'a> {
        obs: &'a mut dyn Observer,
        max: u32,
    }
    impl iocurve_engine::StepObserver for Rounds<'_> {
        fn interval(&mut self, index: u32, stats: &iocurve_stats::IntervalStats, _: &iocurve_stats::CpuUsage, d: f64) {
            let iops = stats.ops() as f64 / d.max(1e-9);
            self.obs.event(&RunEvent::SteadyRound { index: index + 1, max: self.max, iops });
        }
    }
    let cfg = iocurve_engine::StepConfig {
        workload: &w,
        workers: 1,
        backend,
        threads: 1,
        targets,
        stop: cancel.flag(),
        faults: &[],
        verify: None,
        journal: None,
        abort: None,
        start_at: None,
        synchronized: false,
        rate: None,
        replay: None,
        host: 0,
        end: None,
        iolog: None,
    };
    let rec = iocurve_engine::run_step(&cfg, &mut Rounds { obs, max: rounds.max_rounds })?;
    let series: Vec<f64> = rec.intervals.iter().map(|i| i.throughput(false)).collect();
    let check = iocurve_stats::steady::first_steady(&series);
    let errors = rec.total.errors().total() + rec.unmeasured_errors.total();
    Ok(SteadyOutcome { rounds: series, check, interrupted: cancel.is_cancelled(), errors, stuck: rec.drain.stuck })
}
