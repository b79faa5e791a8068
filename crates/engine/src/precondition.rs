//! Preconditioning: every block of a target written once, sequentially, in large blocks with
//! many writes in flight, with the workload's data pattern — as the published benchmarks
//! "write all of the capacity before measuring", so that backend figures come from allocated,
//! steady-state storage rather than from thin-provisioned holes.
//!
//! The target is cut into chunks of the write size. Writer threads (one per write in flight,
//! blocking `pwrite` on the O_DIRECT descriptor: a few large sequential writes need no ring)
//! claim chunks in order. What is written is a [`PreState`]: every chunk below a watermark plus
//! the few finished above it. The caller saves it as it goes; resuming from it writes exactly
//! the chunks that are missing.

use std::collections::BTreeSet;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iocurve_plan::DataPattern;

use crate::buffer::BufferPool;
use crate::data::{DataGen, Pool};
use crate::rng::Rng;
use crate::{EngineError, Target};

/// Which chunks of a target are written: all below `watermark`, and those in `above`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PreState {
    pub watermark: u64,
    pub above: Vec<u64>,
}

impl PreState {
    pub fn written_chunks(&self) -> u64 {
        self.watermark + self.above.len() as u64
    }

    /// As saved (in the results database, and between an agent and its coordinator).
    pub fn to_json(&self) -> String {
        serde_json::json!({"watermark": self.watermark, "above": self.above}).to_string()
    }

    /// The saved state of a pass over a target of `chunks` chunks. A state that cannot be one
    /// of its passes (a chunk beyond the target, chunks unsorted or repeated) is none: the pass
    /// starts over. (Fuzzing, issue 13: a chunk beyond the target left every resumed pass
    /// unfinished.)
    pub fn parse(json: &str, chunks: u64) -> Option<PreState> {
        let v: serde_json::Value = serde_json::from_str(json).ok()?;
        let above = v["above"].as_array()?.iter().map(|x| x.as_u64()).collect::<Option<Vec<_>>>()?;
        let state = PreState { watermark: v["watermark"].as_u64()?, above };
        let fits = state.watermark <= chunks
            && state.above.iter().all(|&c| c > state.watermark && c < chunks)
            && state.above.is_sorted_by(|a, b| a < b);
        fits.then_some(state)
    }
}

/// The write size of a pass over a target of `size` bytes in `logical_block` blocks: `bs`, but
/// no more than the target and a multiple of its logical block.
pub fn write_size(size: u64, logical_block: u64, bs: u64) -> u64 {
    let lb = logical_block.max(1);
    bs.min(size / lb * lb).max(lb)
}

/// Syncs what a pass wrote. On storage that stopped answering the sync blocks in the kernel: it
/// runs on its own thread, and once `stop` is set it is waited for one more second. Ok(false):
/// given up (the last writes may not be durable; a resume may have to redo them). A sync that
/// has not returned after `deadline` is an error; `tick` is called every `every` meanwhile.
pub fn sync(
    t: &Target,
    stop: &AtomicBool,
    deadline: Option<Duration>,
    every: Duration,
    tick: &mut dyn FnMut(),
) -> Result<bool, EngineError> {
    let fail = |e| EngineError::io(format!("cannot sync {}", t.path.display()), e);
    let file = t.file.try_clone().map_err(fail)?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("iocurve-sync".into())
        .spawn(move || {
            let _ = tx.send(file.sync_all());
        })
        .map_err(fail)?;
    let mut stop_seen: Option<Instant> = None;
    let (started, mut ticked) = (Instant::now(), Instant::now());
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(r) => return r.map(|()| true).map_err(fail),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(fail(std::io::Error::other("the sync thread ended")));
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
        }
        if stop.load(Ordering::Relaxed) && stop_seen.get_or_insert_with(Instant::now).elapsed() >= STOP_WAIT {
            return Ok(false);
        }
        if let Some(d) = deadline
            && stop_seen.is_none()
            && started.elapsed() >= d
        {
            return Err(fail(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer for {:.0} s (the storage stopped answering)", d.as_secs_f64()),
            )));
        }
        if ticked.elapsed() >= every {
            ticked = Instant::now();
            tick();
        }
    }
}

/// How a pass over one target ended.
#[derive(Debug, Clone)]
pub struct TargetPass {
    pub state: PreState,
    /// Every chunk written and synced (the scratch file's stamp says so now).
    pub complete: bool,
    /// What the user should know: O_DIRECT unavailable.
    pub notes: Vec<String>,
    /// What the user must know: a sync given up after the stop.
    pub warnings: Vec<String>,
}

/// One target's pass, the same for `iocurve precondition` and a run's pass on every host:
/// O_DIRECT where the target takes it, the writes ([`precondition`]), the sync, and the scratch
/// file's stamp once complete. Complete means every chunk written and synced. No write
/// returning for `stuck_after` is an error, and so is a sync that outlasts it when the writes
/// went around the page cache (through it, the sync writes back what the pass left dirty, and
/// how long that takes is the storage's pace, not a sign of a stop). `progress` about every
/// `every`, also while the sync waits (the last one again: a sign of life).
pub fn target_pass(
    t: &Target,
    cfg: &PreConfig,
    resume: &PreState,
    stop: &AtomicBool,
    every: Duration,
    stuck_after: Duration,
    progress: &mut dyn FnMut(&PreProgress),
) -> Result<TargetPass, EngineError> {
    let mut notes = Vec::new();
    let mut warnings = Vec::new();
    let direct = match crate::target::set_direct(t.fd(), true) {
        Ok(()) => true,
        Err(e) => {
            notes.push(format!(
                "O_DIRECT is not available on {} ({e}): writing through the page cache, synced at the end",
                t.path.display()
            ));
            false
        }
    };
    let mut last: Option<PreProgress> = None;
    let state = precondition(t, cfg, resume, stop, every, stuck_after, &mut |p| {
        last = Some(p.clone());
        progress(p);
    })?;
    let durable = sync(t, stop, direct.then_some(stuck_after), every, &mut || {
        if let Some(p) = &last {
            progress(p);
        }
    })?;
    if !durable {
        warnings.push(format!(
            "{} did not finish syncing within a second of the stop (the storage does not answer): the last writes may not be durable",
            t.path.display()
        ));
    }
    let complete = durable && state.written_chunks() == chunks(t.size, cfg.bs);
    if complete {
        t.mark_prepared()?;
    }
    Ok(TargetPass { state, complete, notes, warnings })
}

#[derive(Debug, Clone, Copy)]
pub struct PreConfig {
    /// Write size in bytes.
    pub bs: u64,
    /// Writes in flight.
    pub qd: u32,
    pub pattern: DataPattern,
    pub dedupe_unit: u64,
}

/// Progress, handed to the caller about every `every`.
#[derive(Debug, Clone)]
pub struct PreProgress {
    pub state: PreState,
    /// Bytes of the target written so far, this session and before.
    pub done_bytes: u64,
    pub total_bytes: u64,
    /// Bytes written by this session.
    pub session_bytes: u64,
    pub elapsed: Duration,
}

/// The written chunks, updated by the writers.
struct Done {
    watermark: u64,
    above: BTreeSet<u64>,
}

impl Done {
    fn mark(&mut self, chunk: u64) {
        self.above.insert(chunk);
        while self.above.remove(&self.watermark) {
            self.watermark += 1;
        }
    }

    fn state(&self) -> PreState {
        PreState { watermark: self.watermark, above: self.above.iter().copied().collect() }
    }
}

/// Chunk count of a target.
pub fn chunks(size: u64, bs: u64) -> u64 {
    size.div_ceil(bs)
}

/// Writes the chunks of `t` that `resume` does not have, until done or `stop` is set. Calls
/// `progress` about every `every` and once at the end; returns the state reached. A write error
/// stops the writers and is returned after they finished; so is no write returning for
/// `stuck_after` (the storage stopped answering: the writers it holds are left behind).
pub fn precondition(
    t: &Target,
    cfg: &PreConfig,
    resume: &PreState,
    stop: &AtomicBool,
    every: Duration,
    stuck_after: Duration,
    progress: &mut dyn FnMut(&PreProgress),
) -> Result<PreState, EngineError> {
    let n = chunks(t.size, cfg.bs);
    let have: BTreeSet<u64> = resume.above.iter().copied().collect();
    let todo: Vec<u64> = (resume.watermark..n).filter(|c| !have.contains(c)).collect();
    let writers = (cfg.qd as usize).clamp(1, todo.len().max(1));
    // The writers are not scoped: one blocked in pwrite on storage that stopped answering is
    // left behind after a stop (its chunk stays unwritten in the state), so they share what
    // they use.
    let sh = Arc::new(Shared {
        todo,
        done: Mutex::new(Done { watermark: resume.watermark, above: have }),
        next: AtomicUsize::new(0),
        session: AtomicU64::new(0),
        failed: Mutex::new(None),
        halt: AtomicBool::new(false),
        running: AtomicUsize::new(writers),
    });
    let started = Instant::now();
    // The writers' own descriptor: a writer left behind keeps the file open, not a number
    // that the caller's close may hand to another file.
    let file = Arc::new(t.file.try_clone().map_err(|e| EngineError::io(format!("{}", t.path.display()), e))?);
    let report = |progress: &mut dyn FnMut(&PreProgress)| {
        let state = sh.done.lock().unwrap_or_else(|e| e.into_inner()).state();
        let done_bytes = (state.written_chunks() * cfg.bs).min(t.size);
        progress(&PreProgress {
            state,
            done_bytes,
            total_bytes: t.size,
            session_bytes: sh.session.load(Ordering::Relaxed),
            elapsed: started.elapsed(),
        });
    };
    for wi in 0..writers {
        let (w, file, cfg) = (sh.clone(), file.clone(), *cfg);
        let (size, path) = (t.size, t.path.clone());
        let spawned = std::thread::Builder::new().name(format!("iocurve-pre{wi}")).spawn(move || {
            let mut rng = Rng::seed_from(wi as u64 + 0x5052_4543);
            let mut pool = BufferPool::new(1, cfg.bs as usize);
            let mut data = DataGen::new(&cfg.pattern, cfg.dedupe_unit as usize, Pool::shared(), &mut rng);
            data.prepare(pool.slice_mut(0), &mut rng);
            while !w.halt.load(Ordering::Relaxed) {
                let i = w.next.fetch_add(1, Ordering::Relaxed);
                let Some(&chunk) = w.todo.get(i) else { break };
                let off = chunk * cfg.bs;
                let len = cfg.bs.min(size - off) as usize;
                let buf = &mut pool.slice_mut(0)[..len];
                data.fill(buf, off, &mut rng);
                if let Err(e) = crate::fullio::write_all_at(file.as_raw_fd(), buf, off) {
                    let msg =
                        format!("precondition: write of {len} bytes at offset {off} of {} failed", path.display());
                    w.failed.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(EngineError::io(msg, e));
                    w.halt.store(true, Ordering::Relaxed);
                    break;
                }
                w.session.fetch_add(len as u64, Ordering::Relaxed);
                w.done.lock().unwrap_or_else(|p| p.into_inner()).mark(chunk);
            }
            w.running.fetch_sub(1, Ordering::Release);
        });
        if let Err(e) = spawned {
            sh.halt.store(true, Ordering::Relaxed);
            // The writers that did start stop at their next chunk.
            sh.running.fetch_sub(writers - wi, Ordering::Release);
            return Err(EngineError::io(format!("precondition: cannot start writer {wi} of {writers}"), e));
        }
    }
    let mut last = Instant::now();
    let mut stopped_at: Option<Instant> = None;
    let mut left_behind = 0;
    let (mut last_session, mut moved_at) = (0u64, Instant::now());
    while sh.running.load(Ordering::Acquire) > 0 {
        std::thread::sleep(Duration::from_millis(20));
        let session = sh.session.load(Ordering::Relaxed);
        if session != last_session {
            (last_session, moved_at) = (session, Instant::now());
        }
        if stopped_at.is_none() && moved_at.elapsed() >= stuck_after {
            // No write returned for that long: the storage stopped answering. The writers
            // blocked in the kernel are left behind; what did complete is in the state.
            sh.halt.store(true, Ordering::Relaxed);
            report(progress);
            return Err(EngineError::io(
                format!(
                    "precondition: no write to {} returned for {:.0} s",
                    t.path.display(),
                    stuck_after.as_secs_f64()
                ),
                std::io::Error::new(std::io::ErrorKind::TimedOut, "the storage stopped answering"),
            ));
        }
        if stop.load(Ordering::Relaxed) && stopped_at.is_none() {
            sh.halt.store(true, Ordering::Relaxed);
            stopped_at = Some(Instant::now());
        }
        if stopped_at.is_some_and(|at| at.elapsed() >= STOP_WAIT) {
            // Writers still in pwrite a second after the stop are blocked in the kernel: their
            // chunks are not in the state, and the stop does not wait for them.
            left_behind = sh.running.load(Ordering::Acquire);
            break;
        }
        if last.elapsed() >= every {
            last = Instant::now();
            report(progress);
        }
    }
    report(progress);
    if let Some(e) = sh.failed.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    if left_behind > 0 {
        tracing::warn!("precondition: {left_behind} writes to {} did not return after the stop", t.path.display());
    }
    Ok(sh.done.lock().unwrap_or_else(|p| p.into_inner()).state())
}

/// How long a stop waits for writes in flight before it leaves them to the kernel.
const STOP_WAIT: Duration = Duration::from_secs(1);

/// What the writers share.
struct Shared {
    todo: Vec<u64>,
    done: Mutex<Done>,
    next: AtomicUsize,
    session: AtomicU64,
    failed: Mutex<Option<EngineError>>,
    halt: AtomicBool,
    running: AtomicUsize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_watermark_follows_the_written_prefix() {
        let mut d = Done { watermark: 0, above: BTreeSet::new() };
        d.mark(1);
        d.mark(3);
        assert_eq!(d.state(), PreState { watermark: 0, above: vec![1, 3] });
        d.mark(0);
        assert_eq!(d.state(), PreState { watermark: 2, above: vec![3] });
        d.mark(2);
        assert_eq!(d.state(), PreState { watermark: 4, above: vec![] });
        assert_eq!(chunks(10 << 20, 1 << 20), 10);
        assert_eq!(chunks((10 << 20) + 4096, 1 << 20), 11);
    }
}
