//! The I/O thread loop: keeps every slot (one outstanding I/O of a worker) busy, timestamps
//! completions and records them into the thread's own interval stats.
//!
//! Clock reads are a measured cost: the loop reads the clock once per wake-up. That timestamp
//! is the completion time of every I/O reaped in the batch and the start time of every I/O
//! issued in reply, so a latency covers submission to completion as seen from user space.
//! Nothing allocates or locks per I/O; intervals are handed over at their boundaries.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use iocurve_plan::OnError;
use iocurve_stats::IntervalStats;

use crate::backend::{Backend, Completion};
use crate::buffer::BufferPool;
use crate::data::DataGen;
use crate::ops::{IoOp, OpGen};
use crate::rng::Rng;
use crate::verify::GenMap;

/// When each phase of the step ends, relative to its start `t0`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Schedule {
    pub t0: Instant,
    pub warmup_ns: u64,
    pub interval_ns: u64,
    pub intervals: u32,
    pub samples_per_interval: u32,
}

impl Schedule {
    /// The schedule of a step of `w` starting at `t0`.
    pub fn new(t0: Instant, w: &iocurve_plan::Workload) -> Self {
        Schedule {
            t0,
            warmup_ns: (w.warmup_s * 1e9) as u64,
            interval_ns: (w.interval_s * 1e9) as u64,
            intervals: w.intervals,
            samples_per_interval: samples_per_interval(w.interval_s),
        }
    }

    pub fn boundary_ns(&self, k: u32) -> u64 {
        self.warmup_ns + k as u64 * self.interval_ns
    }
}

/// Samples per interval: one per second (rounded up), one for sub-second intervals.
pub fn samples_per_interval(interval_s: f64) -> u32 {
    (interval_s.ceil() as u32).max(1)
}

/// Messages from I/O threads to the step coordinator.
pub(crate) enum Msg {
    Interval { index: u32, stats: Box<IntervalStats> },
    Done,
    Failed(String),
}

/// Running totals of one thread for the live progress line (warm-up included). Only the owning
/// thread writes them, with plain stores; the coordinator reads them.
#[derive(Default)]
pub(crate) struct Live {
    pub ops: AtomicU64,
    pub bytes: AtomicU64,
    pub lat_sum_ns: AtomicU64,
}

/// What the I/O threads of a step share about I/O errors: the policy, which targets are
/// stopped (`stop-target`), and the targets' names for messages.
pub(crate) struct ErrorState {
    pub policy: OnError,
    pub stopped: Vec<AtomicBool>,
    pub paths: Vec<String>,
}

impl ErrorState {
    pub fn new(policy: OnError, paths: Vec<String>) -> Self {
        let stopped = paths.iter().map(|_| AtomicBool::new(false)).collect();
        ErrorState { policy, stopped, paths }
    }

    fn is_stopped(&self, target: u32) -> bool {
        self.stopped[target as usize].load(Ordering::Relaxed)
    }
}

/// Where the buffers and I/O state of one thread's slots live.
pub(crate) struct Slots<B: Backend> {
    pub backend: B,
    pub opgen: OpGen,
    pub rng: Rng,
    pub pool: BufferPool,
    /// Worker id of each slot.
    pub worker: Vec<u32>,
    pub data: DataGen,
    pub errors: Arc<ErrorState>,
    /// I/Os the fault injection changed, counted by the back-end wrapper.
    pub injected: Arc<AtomicU64>,
    /// The verification map (verifying workloads only).
    pub verify: Option<Arc<GenMap>>,
    /// Set to stop issuing at once (an agent that lost its coordinator), not at the next
    /// interval boundary: the unfinished interval is dropped.
    pub abort: Arc<AtomicBool>,
    /// Per slot: the claimed block and the generation it had / is being written with.
    claimed: Vec<(u64, u16, u16)>,
    ops: Vec<IoOp>,
    started: Vec<u64>,
}

impl<B: Backend> Slots<B> {
    pub fn new(backend: B, opgen: OpGen, rng: Rng, pool: BufferPool, data: DataGen, worker: Vec<u32>) -> Self {
        let n = worker.len();
        Self {
            backend,
            opgen,
            rng,
            pool,
            worker,
            data,
            errors: Arc::new(ErrorState::new(OnError::Continue, Vec::new())),
            injected: Arc::new(AtomicU64::new(0)),
            verify: None,
            abort: Arc::new(AtomicBool::new(false)),
            claimed: vec![(0, 0, 0); n],
            ops: vec![IoOp::default(); n],
            started: vec![0; n],
        }
    }

    /// Issues the slot's next I/O. False when every target it could go to is stopped
    /// (`on_error = stop-target`): the slot rests for the rest of the step.
    #[inline]
    fn issue(&mut self, slot: usize, now: u64) -> std::io::Result<bool> {
        let mut op = self.opgen.next(self.worker[slot], &mut self.rng);
        if self.errors.policy == OnError::StopTarget {
            let mut tries = 0;
            while self.errors.is_stopped(op.target) {
                tries += 1;
                if tries > 256 {
                    return Ok(false);
                }
                op = self.opgen.next(self.worker[slot], &mut self.rng);
            }
        }
        if let Some(map) = &self.verify {
            // One I/O per block: another op when this block is taken.
            let mut tries = 0;
            let (block, had) = loop {
                let b = op.offset / map.bs;
                if let Some(g) = map.claim(op.target, b) {
                    break (b, g);
                }
                tries += 1;
                if tries > 256 {
                    return Ok(false);
                }
                op = self.opgen.next(self.worker[slot], &mut self.rng);
            };
            let new = if op.write { crate::verify::next_gen(had) } else { had };
            self.claimed[slot] = (block, had, new);
        }
        if op.write {
            self.stamp(slot, &op);
            if self.verify.is_some() {
                let (block, _, new) = self.claimed[slot];
                let buf = &mut self.pool.slice_mut(slot)[..op.len as usize];
                let id = self.verify.as_ref().map_or(0, |m| m.id);
                crate::verify::write_header(buf, id, op.target, block, new);
            }
        }
        self.backend.queue(slot as u32, &op, self.pool.ptr(slot))?;
        self.ops[slot] = op;
        self.started[slot] = now;
        Ok(true)
    }

    #[inline]
    fn stamp(&mut self, slot: usize, op: &IoOp) {
        self.data.fill(&mut self.pool.slice_mut(slot)[..op.len as usize], op.offset, &mut self.rng);
    }
}

/// Records a completed I/O of a verifying workload in the map and checks what a read found.
/// Reads during the warm-up count with the first interval; those after the last boundary are
/// not counted.
fn verify_completion<B: Backend>(
    s: &mut Slots<B>,
    slot: usize,
    op: &IoOp,
    res: i32,
    issuing: bool,
    cur: &mut IntervalStats,
) {
    let Some(map) = s.verify.clone() else { return };
    let (block, had, new) = s.claimed[slot];
    let ok = res >= 0 && res as u32 == op.len;
    if op.write {
        // A failed write may have reached the block or not: its state is unknown from now on.
        map.release(op.target, block, if ok { new } else { 0 });
        return;
    }
    if ok && had != 0 && issuing {
        let buf = &s.pool.slice_mut(slot)[..op.len as usize];
        let found = crate::verify::check(buf, map.id, op.target, block, had);
        let name = |t: u32| s.errors.paths.get(t as usize).cloned().unwrap_or_else(|| format!("target {t}"));
        crate::verify::record(&mut cur.verify, found, op.target, block, name);
    }
    map.release(op.target, block, had);
}

/// Runs one thread's share of a step. Returns the number of I/Os still in flight if it fails,
/// so the caller knows whether the buffers may be freed.
pub(crate) fn run<B: Backend>(
    s: &mut Slots<B>,
    sched: &Schedule,
    stop: &AtomicBool,
    live: &Live,
    send: &dyn Fn(Msg),
) -> Result<(), (std::io::Error, usize)> {
    let n = s.worker.len();
    let spp = sched.samples_per_interval as u64;
    let sample_ns = (sched.interval_ns / spp).max(1);
    let clock = || sched.t0.elapsed().as_nanos() as u64;
    let mut done: Vec<Completion> = Vec::with_capacity(n);
    let mut cur = Box::new(IntervalStats::with_samples(spp as usize));
    let mut phase: i64 = -1; // -1 = warm-up
    let mut phase_start = 0u64;
    let mut next_boundary = sched.warmup_ns;
    let mut issuing = true;
    let mut inflight = 0usize;
    let (mut l_ops, mut l_bytes, mut l_lat) = (0u64, 0u64, 0u64);

    let mut now = clock();
    s.backend.start(sched.t0 + Duration::from_nanos(sched.warmup_ns));
    for slot in 0..n {
        if s.issue(slot, now).map_err(|e| (e, inflight))? {
            inflight += 1;
        }
    }
    // The last time any I/O of this thread completed: gaps between completions are stalls.
    let mut last_done = now;
    loop {
        let wait = if issuing {
            Duration::from_nanos(next_boundary.saturating_sub(now)).max(Duration::from_micros(100))
        } else {
            Duration::from_millis(100)
        };
        if inflight == 0 && issuing {
            // Every slot rests (all its targets stopped): nothing can complete before the boundary.
            std::thread::sleep(wait);
        } else {
            s.backend.submit_and_wait(wait).map_err(|e| (e, inflight))?;
        }
        now = clock();
        if issuing && s.abort.load(Ordering::Relaxed) {
            issuing = false;
        }
        while issuing && now >= next_boundary {
            let injected = s.injected.swap(0, Ordering::Relaxed);
            if phase >= 0 {
                // A stall still going on at the boundary counts up to it here, and in full in
                // the interval where it ends.
                let gap = next_boundary.saturating_sub(last_done.max(sched.warmup_ns));
                cur.max_gap_ns = Some(cur.max_gap_ns.unwrap_or(0).max(gap));
                cur.faults_injected = injected;
                let full = std::mem::replace(&mut cur, Box::new(IntervalStats::with_samples(spp as usize)));
                send(Msg::Interval { index: phase as u32, stats: full });
            }
            phase += 1;
            phase_start = next_boundary;
            if phase as u64 >= sched.intervals as u64 || stop.load(Ordering::Relaxed) {
                issuing = false;
            } else {
                next_boundary += sched.interval_ns;
            }
        }
        done.clear();
        s.backend.reap(&mut done);
        let recording = issuing && phase >= 0;
        if !done.is_empty() {
            if recording {
                let gap = now.saturating_sub(last_done.max(sched.warmup_ns));
                cur.max_gap_ns = Some(cur.max_gap_ns.unwrap_or(0).max(gap));
            }
            last_done = now;
        }
        let si = (((now - phase_start) / sample_ns).min(spp - 1)) as usize;
        // Reissue at once while other I/Os are still in the device: holding replacements back
        // for one batched submission would leave it with fewer in flight than asked for. When
        // everything in flight came back together (completed inline, e.g. page-cache reads),
        // the device is idle and one batched submission is the fastest way to refill it.
        let last = if issuing && done.len() < n { done.len().saturating_sub(1) } else { 0 };
        for (k, &(slot, res)) in done.iter().enumerate() {
            let slot = slot as usize;
            let op = s.ops[slot];
            let lat = now.saturating_sub(s.started[slot]);
            if recording {
                let dir = if op.write { &mut cur.write } else { &mut cur.read };
                let sample = &mut cur.samples[si];
                if res >= 0 && res as u32 == op.len {
                    dir.record(lat, op.len as u64);
                    sample.record(lat, op.len as u64);
                } else {
                    // errno 0 stands for a short transfer (less than asked, no error code).
                    dir.errors.add(op.target, if res < 0 { -res } else { 0 }, 1);
                    sample.errors += 1;
                }
            }
            if s.verify.is_some() {
                verify_completion(s, slot, &op, res, issuing, &mut cur);
            }
            if (res < 0 || res as u32 != op.len) && s.errors.policy != OnError::Continue {
                let errno = if res < 0 { -res } else { 0 };
                let what = if errno == 0 {
                    "a short transfer".to_string()
                } else {
                    std::io::Error::from_raw_os_error(errno).to_string()
                };
                let path = s.errors.paths.get(op.target as usize).cloned().unwrap_or_default();
                match s.errors.policy {
                    OnError::StopTarget => s.errors.stopped[op.target as usize].store(true, Ordering::Relaxed),
                    _ => {
                        let e = std::io::Error::other(format!(
                            "I/O error on {path} ({what}); on_error = abort ends the run"
                        ));
                        return Err((e, inflight - 1));
                    }
                }
            }
            if res >= 0 {
                l_ops += 1;
                l_bytes += res as u64;
                l_lat += lat;
            }
            if issuing && s.issue(slot, now).map_err(|e| (e, inflight))? {
                // The last one goes with the next submit-and-wait.
                if k < last {
                    s.backend.flush().map_err(|e| (e, inflight))?;
                }
            } else {
                inflight -= 1;
            }
        }
        live.ops.store(l_ops, Ordering::Relaxed);
        live.bytes.store(l_bytes, Ordering::Relaxed);
        live.lat_sum_ns.store(l_lat, Ordering::Relaxed);
        if !issuing && inflight == 0 {
            return Ok(());
        }
    }
}
