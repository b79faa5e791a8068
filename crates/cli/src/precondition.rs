//! `iocurve precondition` and the `precondition` phase of a run: every block of every target
//! written once before measuring, with progress and ETA, its state saved in the results
//! database every second so that an interrupted pass resumes where it stopped.

use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use iocurve_engine::precondition::{PreConfig, PreProgress, PreState, chunks, precondition};
use iocurve_engine::{OpenOptions, Target, TargetSet};
use iocurve_plan::{BlockSizeSpec, DataPattern, TargetGroup, WorkloadKeys, format_size};
use iocurve_report::format;
use iocurve_store::{Precondition, Store};

use crate::cli::PreconditionArgs;
use crate::run::open_store;
use crate::{CliError, signals, time};

pub const DEFAULT_BS: u64 = 1 << 20;
pub const DEFAULT_QD: u32 = 32;

/// The key of a target's record: its canonical path.
pub fn record_key(t: &Target) -> String {
    t.path.canonicalize().unwrap_or_else(|_| t.path.clone()).display().to_string()
}

fn state_json(s: &PreState) -> String {
    serde_json::json!({"watermark": s.watermark, "above": s.above}).to_string()
}

/// The saved state of a pass over a target of `chunks` chunks. A state that cannot be one of
/// its passes (a chunk beyond the target, chunks unsorted or repeated) is none: the pass starts
/// over. (Fuzzing, issue 13: a chunk beyond the target left every resumed pass unfinished.)
pub fn parse_state(json: &str, chunks: u64) -> Option<PreState> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    let above = v["above"].as_array()?.iter().map(|x| x.as_u64()).collect::<Option<Vec<_>>>()?;
    let state = PreState { watermark: v["watermark"].as_u64()?, above };
    let fits = state.watermark <= chunks
        && state.above.iter().all(|&c| c > state.watermark && c < chunks)
        && state.above.is_sorted_by(|a, b| a < b);
    fits.then_some(state)
}

/// Preconditions one target; returns false when interrupted (Ctrl-C) before it was complete.
pub fn target(t: &Target, cfg: &PreConfig, store: &Store) -> Result<bool, CliError> {
    let key = record_key(t);
    let data_json = serde_json::to_string(&cfg.pattern).unwrap_or_default();
    let bs = cfg.bs.min(t.size / t.logical_block * t.logical_block).max(t.logical_block);
    let cfg = PreConfig { bs, ..*cfg };
    // A scratch file this run created is new, whatever an earlier file of that name had. (A
    // half-prepared one resumes an unfinished pass; a finished record starts over below.)
    let old = if t.created { None } else { store.precondition(&key, t.size)? };
    // Resume only a pass of the same write size and data; anything else starts over.
    let (resume, mut record) = match old {
        Some(r) if r.finished_at.is_none() && r.bs == bs && r.data_json == data_json => {
            let state = parse_state(&r.state_json, chunks(t.size, bs)).unwrap_or_default();
            crate::outln!(
                "precondition {}: resuming at {} of {} ({} written before)",
                t.path.display(),
                format_size((state.written_chunks() * bs).min(t.size)),
                format_size(t.size),
                format_size(r.bytes_written)
            );
            (state, r)
        }
        _ => {
            let r = Precondition {
                target: key,
                size: t.size,
                bs,
                data_json,
                state_json: state_json(&PreState::default()),
                bytes_written: 0,
                started_at: time::now_rfc3339(),
                finished_at: None,
            };
            store.save_precondition(&r)?;
            (PreState::default(), r)
        }
    };
    crate::outln!(
        "precondition {}: writing {} in {} blocks, {} in flight, data {}",
        t.path.display(),
        format_size(t.size),
        format_size(bs),
        cfg.qd,
        cfg.pattern.describe()
    );
    if let Err(e) = iocurve_engine::target::set_direct(t.fd(), true) {
        crate::outln!(
            "  O_DIRECT is not available on {} ({e}): writing through the page cache, synced at the end",
            t.path.display()
        );
    }
    let before = record.bytes_written;
    let mut save_error = None;
    let mut on_progress = |p: &PreProgress| {
        let secs = p.elapsed.as_secs_f64().max(1e-3);
        let rate = p.session_bytes as f64 / secs;
        let eta = if rate > 0.0 { (p.total_bytes - p.done_bytes) as f64 / rate } else { f64::INFINITY };
        crate::outln!(
            "  {} of {} ({:.0} %), {}, ETA {}",
            format_size(p.done_bytes),
            format_size(p.total_bytes),
            100.0 * p.done_bytes as f64 / p.total_bytes.max(1) as f64,
            format::mbps(rate / 1e6),
            if eta.is_finite() { format::duration(eta) } else { "—".into() }
        );
        record.state_json = state_json(&p.state);
        record.bytes_written = before + p.session_bytes;
        if let Err(e) = store.save_precondition(&record) {
            save_error.get_or_insert(e);
        }
    };
    let result = precondition(t, &cfg, &resume, &signals::STOP, Duration::from_secs(1), &mut on_progress);
    if let Some(e) = save_error {
        return Err(e.into());
    }
    let state = result?;
    sync(t)?;
    let complete = state.written_chunks() == chunks(t.size, bs);
    if complete {
        record.finished_at = Some(time::now_rfc3339());
        store.save_precondition(&record)?;
        t.mark_prepared()?;
        crate::outln!("precondition {}: complete", t.path.display());
    } else {
        crate::outln!("precondition {}: interrupted; the same command resumes where it stopped", t.path.display());
    }
    Ok(complete && !signals::STOP.load(Ordering::Relaxed))
}

/// Syncs what was written. On storage that stopped answering the sync blocks in the kernel: it
/// runs on its own thread, and a Ctrl-C stops waiting for it a second later (the writes it
/// covers may then not be durable: said, and a resume may have to be redone from scratch).
fn sync(t: &Target) -> Result<(), CliError> {
    let file = t.file.try_clone().map_err(|e| CliError::Runtime(format!("cannot sync {}: {e}", t.path.display())))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("iocurve-sync".into())
        .spawn(move || {
            let _ = tx.send(file.sync_all());
        })
        .map_err(|e| CliError::Runtime(format!("cannot sync {}: {e}", t.path.display())))?;
    let mut stop_seen: Option<std::time::Instant> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => return r.map_err(|e| CliError::Runtime(format!("cannot sync {}: {e}", t.path.display()))),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(CliError::Runtime(format!("cannot sync {}: the sync thread ended", t.path.display())));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if signals::STOP.load(Ordering::Relaxed)
            && stop_seen.get_or_insert_with(std::time::Instant::now).elapsed() >= Duration::from_secs(1)
        {
            crate::errln!(
                "WARNING: {} did not finish syncing within a second of Ctrl-C (the storage does not answer): the last writes may not be durable",
                t.path.display()
            );
            return Ok(());
        }
    }
}

/// The data pattern and write size as a run would resolve them: same checks and messages.
fn config(args: &PreconditionArgs) -> Result<PreConfig, CliError> {
    let keys = WorkloadKeys {
        bs: Some(BlockSizeSpec::One(args.bs.unwrap_or(DEFAULT_BS))),
        queue_depth: Some(args.qd.unwrap_or(DEFAULT_QD)),
        compress: args.data.compress,
        dedupe: args.data.dedupe,
        dedupe_unit: args.data.dedupe_unit,
        constant: args.data.constant,
        ..Default::default()
    };
    let w = iocurve_plan::writing_workload("precondition", keys)?;
    Ok(PreConfig { bs: w.max_bs(), qd: w.queue_depth, pattern: w.data, dedupe_unit: w.dedupe_unit() })
}

/// The configuration of a run's precondition phase: 1 MiB writes, 32 in flight, the data
/// pattern of the plan's first writing workload.
pub fn run_config(pattern: DataPattern, dedupe_unit: u64) -> PreConfig {
    PreConfig { bs: DEFAULT_BS, qd: DEFAULT_QD, pattern, dedupe_unit }
}

pub fn command(args: PreconditionArgs) -> Result<ExitCode, CliError> {
    let cfg = config(&args)?;
    signals::install();
    let groups = vec![TargetGroup { name: "targets".into(), weight: 1, targets: args.targets.clone() }];
    let size = args.size.unwrap_or(1 << 30);
    let opts = OpenOptions {
        write: true,
        scratch_size: size,
        keep: true,
        allow_write: args.allow_write.clone(),
        scratch_unfilled: true,
        ..Default::default()
    };
    let targets = TargetSet::open(&groups, &opts)?;
    targets.notes.iter().for_each(|n| crate::outln!("{n}"));
    let store = open_store(&args.db.db)?;
    for t in &targets.targets {
        if !target(t, &cfg, &store)? {
            return Ok(ExitCode::from(130));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// When each target was preconditioned at its present size, if it was.
pub fn preconditioned_at(store: &Store, t: &Target) -> Option<String> {
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
        assert_eq!(parse_state(&state_json(&s), 16), Some(s));
        assert_eq!(parse_state(&state_json(&PreState::default()), 16), Some(PreState::default()));
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
