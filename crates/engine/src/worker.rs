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

use iocurve_plan::{OnError, Overload};
use iocurve_stats::{Drain, ErrorCounts, IntervalStats, LatencyHistogram, RateStats};

use crate::arrival::RateMode;
use crate::backend::{Completion, IoEngine};
use crate::buffer::BufferPool;
use crate::data::DataGen;
use crate::ops::{Dir, IoOp, OpGen};
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
    /// How long I/Os outstanding at the step's end may take (None: longest latency + margin).
    pub stuck_after_ns: Option<u64>,
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
            stuck_after_ns: w.stuck_after_s.map(|s| (s * 1e9) as u64),
        }
    }

    pub fn boundary_ns(&self, k: u32) -> u64 {
        self.warmup_ns + k as u64 * self.interval_ns
    }

    /// How long I/Os still outstanding when the step stopped issuing are waited for: after a
    /// stop (Ctrl-C, an abort, a failed thread) briefly; at the step's end as the plan says, or
    /// the longest latency seen plus a margin — an I/O that takes longer than any before it
    /// plus seconds is not merely slow.
    pub fn stuck_wait_ns(&self, stopped: bool, max_lat_ns: u64) -> u64 {
        if stopped { STOP_WAIT_NS } else { self.stuck_after_ns.unwrap_or(max_lat_ns.saturating_add(STUCK_MARGIN_NS)) }
    }
}

/// How often a thread looks at the stop flags while it waits: Ctrl-C must end a step within
/// about a second whatever the storage does (an interval can last minutes).
pub(crate) const POLL_NS: u64 = 200_000_000;
/// A rate step with nothing in flight waits on the CPU, not asleep, for a due I/O this close
/// (the cost: its I/O thread stays busy between I/Os due less than this apart).
const SPIN_NS: u64 = 200_000;
/// The wait for outstanding I/Os after a stop.
pub(crate) const STOP_WAIT_NS: u64 = 500_000_000;
/// Added to the longest latency seen for the default wait at a step's end.
pub(crate) const STUCK_MARGIN_NS: u64 = 5_000_000_000;
/// How long a thread waits for the I/Os it cancelled before it leaves them to the kernel.
pub(crate) const CANCEL_WAIT_NS: u64 = 100_000_000;

/// Samples per interval: one per second (rounded up), one for sub-second intervals.
pub fn samples_per_interval(interval_s: f64) -> u32 {
    (interval_s.ceil() as u32).max(1)
}

/// Messages from I/O threads to the step coordinator.
pub(crate) enum Msg {
    Interval {
        index: u32,
        stats: Box<IntervalStats>,
    },
    /// What became of the I/Os outstanding when the thread stopped issuing; sent just before
    /// `Done`.
    Drained(Box<Tail>),
    Done,
    Failed(String),
}

/// The I/Os a thread had outstanding when it stopped issuing: counts, and the latencies of
/// the late ones and the ages of the stuck ones (see [`Drain`]).
#[derive(Default)]
pub(crate) struct Tail {
    pub read: LatencyHistogram,
    pub write: LatencyHistogram,
    pub trim: LatencyHistogram,
    pub drain: Drain,
    /// Errors of I/Os that completed outside the measured intervals (in the warm-up, or after
    /// the step stopped issuing): in no interval's figures, but never lost.
    pub unmeasured_errors: ErrorCounts,
    /// A stall that went on past the step's end: ns without a completion from the last one
    /// (or the measurement start) to the end of the wait. None when the thread's last I/O
    /// completed in time.
    pub gap_ns: Option<u64>,
    /// A rate step: the service times of the late I/Os, and the I/Os due in the measurement
    /// but never issued (`backlog`) or the overload that ended the step.
    pub rate: Option<RateStats>,
}

impl Tail {
    fn record(&mut self, dir: Dir, ns: u64) {
        self.hist(dir).record_n(ns, 1)
    }

    /// The histogram of direction `dir`.
    pub fn hist(&mut self, dir: Dir) -> &mut LatencyHistogram {
        match dir {
            Dir::Read => &mut self.read,
            Dir::Write => &mut self.write,
            Dir::Trim => &mut self.trim,
        }
    }
}

/// What the coordinator sees of one thread: running totals for the live progress line (warm-up
/// included), and what it needs to give up on a thread blocked in a system call (psync on
/// storage that stopped answering). Only the owning thread writes the figures, with plain
/// stores, once per wake-up; the coordinator reads them.
#[derive(Default)]
pub(crate) struct Live {
    pub ops: AtomicU64,
    pub bytes: AtomicU64,
    pub lat_sum_ns: AtomicU64,
    /// I/Os in flight, and how many of them are writes and trims.
    pub inflight: AtomicU64,
    pub inflight_writes: AtomicU64,
    pub inflight_trims: AtomicU64,
    /// When the thread last woke, in ns since the step start: a thread blocked since then has
    /// had its I/Os outstanding at least that long.
    pub last_wake_ns: AtomicU64,
    /// The longest latency the thread has seen in the step.
    pub max_lat_ns: AtomicU64,
    /// The interval the thread measures, plus one (0 in the warm-up): a step that ends once
    /// steady never cuts off an interval a thread has entered.
    pub entered: std::sync::atomic::AtomicU32,
    /// I/Os completed in the interval the thread is in (not yet handed over): what is lost
    /// with a thread that is given up.
    pub unsent_ops: AtomicU64,
    /// Set by the coordinator when it gave up on the thread: from then on the thread touches
    /// nothing shared (the verification map, the step's channel) and leaves its buffers to
    /// the kernel.
    pub abandoned: AtomicBool,
    /// The thread's own CPU time (ns, plus one: 0 is unset) when it crossed the measurement's
    /// first boundary and when it crossed the latest one, each with the step clock (ns since
    /// its start) it read then: what the step's `io_cpu` is made of.
    pub cpu_from: AtomicU64,
    pub cpu_from_at: AtomicU64,
    pub cpu_to: AtomicU64,
    pub cpu_to_at: AtomicU64,
    /// How long after the step's start moment the thread woke to begin it (ns, plus one: 0 is
    /// not yet): the step's start is reported as that of its latest thread.
    pub started_late: AtomicU64,
}

impl Live {
    /// The thread woke to begin the step `late_ns` after its start moment.
    pub(crate) fn began(&self, late_ns: u64) {
        self.started_late.store(late_ns.saturating_add(1), Ordering::Relaxed);
    }

    /// The writes and trims among the I/Os in flight, for the coordinator.
    #[inline]
    fn store_changing(&self, c: Changing) {
        self.inflight_writes.store(c.writes, Ordering::Relaxed);
        self.inflight_trims.store(c.trims, Ordering::Relaxed);
    }

    /// The thread crossed boundary `k` of the measurement (0: the warm-up's end), noticing it
    /// at `now_ns` on the step's clock.
    fn cpu_at_boundary(&self, k: u32, now_ns: u64) {
        let Some(ns) = crate::host::own_cpu_ns() else { return };
        if k == 0 {
            self.cpu_from.store(ns + 1, Ordering::Relaxed);
            self.cpu_from_at.store(now_ns, Ordering::Relaxed);
        } else {
            self.cpu_to.store(ns + 1, Ordering::Relaxed);
            self.cpu_to_at.store(now_ns, Ordering::Relaxed);
        }
    }

    /// The CPU time the thread used from the first boundary to the latest it crossed, and the
    /// time that passed between its readings, in ns (None: it crossed no second one).
    pub fn cpu_used(&self) -> Option<(u64, u64)> {
        let (from, to) = (self.cpu_from.load(Ordering::Relaxed), self.cpu_to.load(Ordering::Relaxed));
        let wall = self.cpu_to_at.load(Ordering::Relaxed).saturating_sub(self.cpu_from_at.load(Ordering::Relaxed));
        (from > 0 && to > 0).then(|| (to.saturating_sub(from), wall))
    }
}

/// What the I/O threads of a step share about I/O errors: the policy, which targets are
/// stopped (`stop-target`), and the targets' names for messages.
pub(crate) struct ErrorState {
    pub policy: OnError,
    pub stopped: Vec<AtomicBool>,
    /// Per target stopped: when (ns since the step start) and the errno that stopped it
    /// (0: a short transfer), packed as `ns << 16 | errno`; u64::MAX while it runs.
    pub stopped_by: Vec<AtomicU64>,
    pub paths: Vec<String>,
    /// `on_error = abort` ended the step.
    pub aborted: AtomicBool,
    /// Why: the first I/O error under `on_error = abort`.
    pub abort_reason: std::sync::Mutex<Option<String>>,
}

impl ErrorState {
    pub fn new(policy: OnError, paths: Vec<String>) -> Self {
        let stopped = paths.iter().map(|_| AtomicBool::new(false)).collect();
        let stopped_by = paths.iter().map(|_| AtomicU64::new(u64::MAX)).collect();
        ErrorState {
            policy,
            stopped,
            stopped_by,
            paths,
            aborted: AtomicBool::new(false),
            abort_reason: std::sync::Mutex::new(None),
        }
    }

    fn is_stopped(&self, target: u32) -> bool {
        self.stopped[target as usize].load(Ordering::Relaxed)
    }

    /// `stop-target`: no more I/O to `target`; the first error that stopped it is kept.
    fn stop(&self, target: u32, now_ns: u64, errno: i32) {
        let packed = (now_ns << 16) | (errno as u64 & 0xffff);
        let _ =
            self.stopped_by[target as usize].compare_exchange(u64::MAX, packed, Ordering::Relaxed, Ordering::Relaxed);
        self.stopped[target as usize].store(true, Ordering::Relaxed);
    }

    /// The targets `stop-target` stopped: (index, ns since the step start, errno).
    pub fn stops(&self) -> Vec<(usize, u64, i32)> {
        let by = self.stopped_by.iter().map(|a| a.load(Ordering::Relaxed));
        by.enumerate().filter(|&(_, p)| p != u64::MAX).map(|(i, p)| (i, p >> 16, (p & 0xffff) as i32)).collect()
    }
}

/// Of some I/Os in flight, the writes and the trims: what a thread given up with them had
/// outstanding in each direction (the rest are reads).
#[derive(Default, Clone, Copy)]
struct Changing {
    writes: u64,
    trims: u64,
}

impl Changing {
    #[inline]
    fn add(&mut self, op: &IoOp) {
        self.writes += op.is_write() as u64;
        self.trims += op.is_trim() as u64;
    }

    #[inline]
    fn sub(&mut self, op: &IoOp) {
        self.writes -= op.is_write() as u64;
        self.trims -= op.is_trim() as u64;
    }

    fn merge(&mut self, o: Changing) {
        self.writes += o.writes;
        self.trims += o.trims;
    }
}

/// What issuing the due I/Os of a rate step did.
#[derive(Default)]
struct Issued {
    ios: usize,
    changing: Changing,
    /// An I/O was due with every slot busy under `overload = abort-step`.
    overloaded: bool,
}

/// Where the buffers and I/O state of one thread's slots live.
pub(crate) struct Slots<B: IoEngine> {
    pub backend: B,
    pub opgen: OpGen,
    /// Offsets, sizes, directions and thinks: seeded from the plan's seed, the workload, the
    /// step, the host and the thread (`step::stream_seed`), so the same seed repeats a run's
    /// offsets.
    pub rng: Rng,
    /// The data written: seeded apart for every run, so that no run writes what the one before
    /// wrote (an array that deduplicates would find every block known).
    pub data_rng: Rng,
    /// Think time of closed-loop workers (None: none).
    pub think: Option<crate::think::Thinking>,
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
    /// A rate step (None: closed loop, every slot reissued as soon as its I/O completes).
    pub rate: Option<RateMode>,
    /// A step that ends once steady (`steady_state = "snia"`): how many intervals it runs, lowered
    /// by the coordinator while it runs. None: the schedule's.
    pub rounds: Option<Arc<std::sync::atomic::AtomicU32>>,
    /// Interval stats the coordinator emptied after merging them: taken at a boundary instead
    /// of allocating (issue 36, part 9: allocating and zeroing a fresh set — four histograms —
    /// held the issuing thread for up to 0.6 ms at every boundary).
    pub spares: Option<std::sync::mpsc::Receiver<Box<IntervalStats>>>,
    /// `run --write-iolog`: every I/O handed to the back-end, with its time.
    pub(crate) iolog: Option<crate::iolog::IoLogBuf>,
    /// Per slot: the claimed block and the generation it had / is being written with.
    claimed: Vec<(u64, u16, u16)>,
    ops: Vec<IoOp>,
    started: Vec<u64>,
    /// Per slot: when its I/O was meant to be issued — its submission in a closed loop, its
    /// place in the schedule in a rate step. Latency (response time) counts from here.
    intended: Vec<u64>,
    /// Per slot: an I/O is in flight.
    busy: Vec<bool>,
    /// Per slot: its I/O was given up as stuck; its completion, if it comes, is only noted.
    given_up: Vec<bool>,
}

impl<B: IoEngine> Slots<B> {
    pub fn new(backend: B, opgen: OpGen, rng: Rng, pool: BufferPool, data: DataGen, worker: Vec<u32>) -> Self {
        let n = worker.len();
        Self {
            backend,
            opgen,
            rng,
            data_rng: Rng::seed_from(0),
            think: None,
            pool,
            worker,
            data,
            errors: Arc::new(ErrorState::new(OnError::Continue, Vec::new())),
            injected: Arc::new(AtomicU64::new(0)),
            verify: None,
            abort: Arc::new(AtomicBool::new(false)),
            rate: None,
            rounds: None,
            spares: None,
            iolog: None,
            claimed: vec![(0, 0, 0); n],
            ops: vec![IoOp::default(); n],
            started: vec![0; n],
            intended: vec![0; n],
            busy: vec![false; n],
            given_up: vec![false; n],
        }
    }

    /// Issues the slot's next I/O. False when every target it could go to is stopped
    /// (`on_error = stop-target`): the slot rests for the rest of the step.
    #[inline]
    fn issue(&mut self, slot: usize, now: u64) -> std::io::Result<bool> {
        self.issue_at(slot, now, now, None)
    }

    /// A rate step: issues every I/O due by `now` that a free slot can take, in the order of
    /// the schedule; one due while every slot is busy waits (`queue`), is dropped (`drop`) or
    /// ends the step (`abort-step`). An I/O counts as dropped when no slot was free at the
    /// first wake-up at or after its intended time. Only I/Os due by `until` (≤ `now`) are
    /// issued; the lag and the drops of those due from `measured_from` on go to `stats` (what
    /// was due is counted apart, in the interval of its intended time: `RateMode::count_due`).
    fn issue_due(
        &mut self,
        now: u64,
        until: u64,
        measured_from: u64,
        stats: &mut RateStats,
    ) -> std::io::Result<Issued> {
        let mut out = Issued::default();
        let Some(mut rate) = self.rate.take() else { return Ok(out) };
        // Bounded work per call: a schedule far ahead of the storage (drop) is walked over the
        // next wake-ups, and the loop looks at its stop flags meanwhile.
        let mut budget = 1u32 << 16;
        let result = loop {
            // A thread of a shared schedule claims a time only while its one slot is free.
            if budget == 0 || (rate.shared() && rate.free.is_empty()) {
                break Ok(());
            }
            budget -= 1;
            let due = rate.next_due(now);
            if due > until {
                break Ok(());
            }
            if rate.overloaded() {
                match rate.overload {
                    // Its own schedule waits for a slot; a claimed time goes out now, late.
                    Overload::Queue if !rate.shared() => break Ok(()),
                    Overload::Queue => {}
                    Overload::Drop => {
                        rate.taken();
                        if due >= measured_from {
                            stats.dropped += 1;
                        }
                        continue;
                    }
                    Overload::AbortStep => {
                        out.overloaded = true;
                        break Ok(());
                    }
                }
            }
            let Some(slot) = rate.free.pop() else { break Ok(()) };
            // A replay's I/O is the trace's; a rate step's is drawn.
            let replayed = rate.due_op();
            rate.taken();
            match self.issue_at(slot as usize, now, due, replayed) {
                Ok(true) => {
                    rate.issued();
                    out.ios += 1;
                    out.changing.add(&self.ops[slot as usize]);
                    if due >= measured_from {
                        stats.lag.record(now - due);
                    }
                }
                Ok(false) => {
                    // Nowhere to go (every target stopped, or no free block to verify).
                    rate.free.push(slot);
                    if due >= measured_from {
                        stats.dropped += 1;
                    }
                }
                Err(e) => break Err(e),
            }
        };
        self.rate = Some(rate);
        result.map(|()| out)
    }

    /// Issues the slot's next I/O, meant to be issued at `intended` (≤ `now`): `replayed`, a
    /// replay's, or one drawn from the workload.
    #[inline]
    fn issue_at(&mut self, slot: usize, now: u64, intended: u64, replayed: Option<IoOp>) -> std::io::Result<bool> {
        let mut op = match replayed {
            Some(op) => op,
            None => self.opgen.next(self.worker[slot], &mut self.rng),
        };
        // A replayed I/O goes where the trace sent it, or nowhere (a replay does not verify).
        if replayed.is_some() && self.errors.is_stopped(op.target) {
            return Ok(false);
        }
        if self.errors.policy == OnError::StopTarget && replayed.is_none() {
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
            // A trimmed block's content is no longer promised: generation 0, unknown (its next
            // write goes on from the newest generation it may hold).
            let new = match op.dir {
                Dir::Write => map.next_for(op.target, block, had),
                Dir::Trim => 0,
                Dir::Read => had,
            };
            self.claimed[slot] = (block, had, new);
        }
        if op.is_write() {
            self.stamp(slot, &op);
            if self.verify.is_some() {
                let (block, _, new) = self.claimed[slot];
                let buf = &mut self.pool.slice_mut(slot)[..op.len as usize];
                let id = self.verify.as_ref().map_or(0, |m| m.id);
                crate::verify::write_header(buf, id, op.target, block, new);
            }
        }
        self.backend.queue(slot as u32, &op, self.pool.ptr(slot))?;
        if let Some(log) = &mut self.iolog {
            log.note(now, op);
        }
        self.ops[slot] = op;
        self.started[slot] = now;
        self.intended[slot] = intended;
        self.busy[slot] = true;
        Ok(true)
    }

    /// Gives up every I/O still in flight at `now` as stuck: counts it with its age (into the
    /// tail's latencies, so it weighs at least that much) and asks the back-end to cancel it.
    /// A stuck write may reach its block or not: the verification map forgets what the block
    /// holds. Returns the I/Os given up.
    fn give_up(&mut self, now: u64, tail: &mut Tail) -> u64 {
        let mut n = 0;
        for slot in 0..self.busy.len() {
            if !self.busy[slot] {
                continue;
            }
            let op = self.ops[slot];
            let age = now.saturating_sub(self.intended[slot]);
            tail.record(op.dir, age);
            tail.drain.stuck += 1;
            tail.drain.stuck_age_ns = tail.drain.stuck_age_ns.max(age);
            if let Some(map) = &self.verify {
                let (block, had, new) = self.claimed[slot];
                match op.dir {
                    Dir::Read => map.release(op.target, block, had),
                    Dir::Write => map.release_unknown(op.target, block, new),
                    Dir::Trim => map.release_unknown(op.target, block, had),
                }
            }
            self.busy[slot] = false;
            self.given_up[slot] = true;
            // A failed cancel leaves the I/O to the kernel: it is counted as stuck all the same.
            let _ = self.backend.cancel(slot as u32);
            n += 1;
        }
        n
    }

    #[inline]
    fn stamp(&mut self, slot: usize, op: &IoOp) {
        self.data.fill(&mut self.pool.slice_mut(slot)[..op.len as usize], op.offset, &mut self.data_rng);
    }
}

/// Records a completed I/O of a verifying workload in the map and checks what a read found.
/// Reads during the warm-up count with the first interval; those after the last boundary are
/// not counted.
fn verify_completion<B: IoEngine>(
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
    match op.dir {
        Dir::Write if ok => return map.release(op.target, block, new),
        // A failed write may have reached the block or not: its state is unknown from now on,
        // and it may hold `new`.
        Dir::Write => return map.release_unknown(op.target, block, new),
        // A trimmed block's content is not promised, whatever the trim did: it may still hold
        // what it had (a device may ignore a discard).
        Dir::Trim => return map.release_unknown(op.target, block, had),
        Dir::Read => {}
    }
    if ok && had != 0 && issuing {
        let buf = &s.pool.slice_mut(slot)[..op.len as usize];
        let found = crate::verify::check(buf, map.id, op.target, block, had);
        let name = |t: u32| s.errors.paths.get(t as usize).cloned().unwrap_or_else(|| format!("target {t}"));
        crate::verify::record(&mut cur.verify, found, op.target, block, name);
    }
    map.release(op.target, block, had);
}

/// Runs one thread's share of a step. Returns how many I/Os it left in flight (stuck I/Os the
/// kernel did not give back): their buffers must not be freed. On failure, the error and the
/// I/Os still in flight.
///
/// `start` waits for the step's start (None: called off, nothing to do); everything the thread
/// needs is allocated before it, so that the first I/O follows the start by microseconds (a
/// histogram is some hundred KiB to zero). `samples_per_interval` is the schedule's.
///
/// Each wake-up goes through the phases of [`Pass`]: the wait, a stop, the interval boundaries
/// crossed, the I/Os due (rate steps), the completions (each recorded and its slot reissued),
/// the rate schedule's issue, the live figures; once issuing ended, the drain.
pub(crate) fn run<B: IoEngine>(
    s: &mut Slots<B>,
    samples_per_interval: u32,
    start: impl FnOnce() -> Option<(Schedule, Option<crate::host::StartPriority>)>,
    stop: &AtomicBool,
    live: &Live,
    send: &dyn Fn(Msg),
) -> Result<usize, (std::io::Error, usize)> {
    let n = s.worker.len();
    let spp = samples_per_interval as u64;
    let rate_mode = s.rate.is_some();
    let used = s.opgen.used_targets();
    let cur = fresh(spp, rate_mode, &used);
    // The next interval's, made before the start: the first boundary allocates nothing either
    // (where the coordinator hands sets back).
    let spare = s.spares.is_some().then(|| fresh(spp, rate_mode, &used));
    let done: Vec<Completion> = Vec::with_capacity(n);
    let mut tail = Box::<Tail>::default();
    if let Some(rate) = &mut s.rate {
        tail.rate = Some(RateStats::default());
        rate.free = (0..n as u32).rev().collect();
    }
    if s.rate.is_some() || s.think.is_some() {
        // A rate step sleeps until its next I/O is due, a thinking worker until its think ends:
        // with the default timer slack of 50 µs every such sleep would add up to 50 µs of lag
        // (a 100 µs think measured 190 µs).
        // SAFETY: PR_SET_TIMERSLACK changes only this thread's timer slack.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    }

    let Some((sched, start_priority)) = start() else { return Ok(0) };
    debug_assert_eq!(sched.samples_per_interval, samples_per_interval);
    let mut p = Pass {
        sched: &sched,
        live,
        stop,
        send,
        n,
        spp,
        sample_ns: (sched.interval_ns / spp).max(1),
        rate_mode,
        cur,
        spare,
        used,
        done,
        tail,
        phase: -1,
        phase_start: 0,
        next_boundary: sched.warmup_ns,
        now: 0,
        issuing: true,
        stopped: false,
        end_due: false,
        resting: false,
        inflight: 0,
        changing: Changing::default(),
        l_ops: 0,
        l_bytes: 0,
        l_lat: 0,
        max_lat: 0,
        drain_until: None,
        cancel_until: None,
        last_done: 0,
    };
    p.now = p.clock();
    p.first_ios(s, start_priority).map_err(|e| (e, p.inflight))?;
    loop {
        p.wait(s).map_err(|e| (e, p.inflight))?;
        if live.abandoned.load(Ordering::Relaxed) {
            // The coordinator counted this thread's I/Os as stuck and went on without it.
            return Ok(p.inflight);
        }
        p.on_stop(s);
        p.cross_boundaries(s);
        p.count_due(s);
        p.complete_all(s).map_err(|e| (e, p.inflight))?;
        p.wake_thinkers(s).map_err(|e| (e, p.inflight))?;
        p.issue_rate(s).map_err(|e| (e, p.inflight))?;
        p.publish();
        if p.issuing {
            continue;
        }
        if let Some(left) = p.drain(s).map_err(|e| (e, p.inflight))? {
            return Ok(left);
        }
    }
}

/// One completed I/O in its target's part (a host with several targets).
#[inline]
fn record_target(t: &mut iocurve_stats::TargetStats, dir: Dir, whole: bool, lat: u64, len: u64, moved: u64, si: usize) {
    let sample = t.samples.get_mut(si);
    if !whole {
        t.errors += 1;
        if let Some(x) = sample {
            x.errors += 1;
        }
        return;
    }
    match dir {
        Dir::Read => (t.read_ops, t.read_bytes) = (t.read_ops + 1, t.read_bytes + len),
        Dir::Write => (t.write_ops, t.write_bytes) = (t.write_ops + 1, t.write_bytes + len),
        Dir::Trim => (t.trim_ops, t.trim_bytes) = (t.trim_ops + 1, t.trim_bytes + len),
    }
    t.hist.record(lat);
    if let Some(x) = sample {
        x.record(lat, moved);
    }
}

/// An empty interval's figures (with a rate part for rate steps).
fn fresh(spp: u64, rate_mode: bool, targets: &[u32]) -> Box<IntervalStats> {
    let mut c = Box::new(IntervalStats::with_samples(spp as usize));
    if rate_mode {
        c.rate = Some(Box::default());
    }
    per_target(&mut c, spp, targets);
    c
}

/// Each target's part, one per target the workload uses (`targets`, in order), where it uses
/// several; one target's are the interval's own, filled in once.
fn per_target(c: &mut IntervalStats, spp: u64, targets: &[u32]) {
    if targets.len() <= 1 {
        c.targets.clear();
    } else if !c.targets.iter().map(|t| t.target).eq(targets.iter().copied()) {
        c.targets = targets.iter().map(|&t| iocurve_stats::TargetStats::new(t, spp as usize)).collect();
    }
}

/// One thread's pass through a step: where it stands (phase, issuing or draining), what it has
/// measured of the interval running, and what it tells the coordinator live.
struct Pass<'p> {
    sched: &'p Schedule,
    live: &'p Live,
    stop: &'p AtomicBool,
    send: &'p dyn Fn(Msg),
    /// Slots of this thread.
    n: usize,
    spp: u64,
    sample_ns: u64,
    rate_mode: bool,
    cur: Box<IntervalStats>,
    spare: Option<Box<IntervalStats>>,
    /// The targets the workload uses, in order: each one's part is recorded where several.
    used: Vec<u32>,
    done: Vec<Completion>,
    tail: Box<Tail>,
    /// -1: the warm-up; then the interval running.
    phase: i64,
    phase_start: u64,
    next_boundary: u64,
    /// ns since the step's t0, read at each wake-up.
    now: u64,
    issuing: bool,
    /// Stopped before the last boundary (Ctrl-C, abort): the unfinished interval is dropped.
    stopped: bool,
    /// A rate step reached its end: the I/Os due before it are still to be issued.
    end_due: bool,
    /// Every slot of a closed-loop thread rests (`on_error = stop-target` stopped all its
    /// targets): nothing it waits for is the storage's, so it reports no stall (issue 36: such
    /// a step was flagged `stall` besides `target_stopped`). Other threads still tell.
    resting: bool,
    inflight: usize,
    /// Of the I/Os in flight, the writes and trims.
    changing: Changing,
    l_ops: u64,
    l_bytes: u64,
    l_lat: u64,
    max_lat: u64,
    /// Once issuing stopped: until when outstanding I/Os are waited for, and once they were
    /// given up, until when the cancelled ones are waited for.
    drain_until: Option<u64>,
    cancel_until: Option<u64>,
    /// The last time any I/O of this thread completed: gaps between completions are stalls.
    last_done: u64,
}

impl Pass<'_> {
    #[inline]
    fn clock(&self) -> u64 {
        self.sched.t0.elapsed().as_nanos() as u64
    }

    /// Every slot's first I/O (or the rate schedule's first due ones), at the start.
    fn first_ios<B: IoEngine>(
        &mut self,
        s: &mut Slots<B>,
        start_priority: Option<crate::host::StartPriority>,
    ) -> std::io::Result<()> {
        let (now, warmup_ns) = (self.now, self.sched.warmup_ns);
        s.backend.start(self.sched.t0 + Duration::from_nanos(warmup_ns));
        if let Some(r) = &mut self.cur.rate {
            let issued = s.issue_due(now, now, warmup_ns, r)?;
            self.inflight += issued.ios;
            self.changing.merge(issued.changing);
        } else {
            for slot in 0..self.n {
                // A thinking worker starts with its first `think_blocks` I/Os at most.
                if s.think.as_mut().is_some_and(|t| !t.take(slot)) {
                    continue;
                }
                if s.issue(slot, now)? {
                    self.inflight += 1;
                    self.changing.add(&s.ops[slot]);
                }
            }
        }
        // A synchronized start is over for this thread once its first I/Os are submitted (not
        // waited for: that may take as long as the storage does).
        if let Some(priority) = start_priority {
            s.backend.flush()?;
            drop(priority);
        }
        // Before the first wait: a thread whose first I/O never returns (psync on storage that
        // already stopped answering) is given up with it counted.
        self.live.inflight.store(self.inflight as u64, Ordering::Relaxed);
        self.live.store_changing(self.changing);
        self.live.last_wake_ns.store(now, Ordering::Relaxed);
        self.last_done = now;
        Ok(())
    }

    /// Waits for completions, the next boundary or (rate steps) the next due I/O.
    #[inline]
    fn wait<B: IoEngine>(&mut self, s: &mut Slots<B>) -> std::io::Result<()> {
        let mut until = self.cancel_until.or(self.drain_until).unwrap_or(self.next_boundary);
        let mut least = 100_000;
        // A rate step with a slot free wakes when its next I/O is due; a worker that thinks,
        // when its think ends.
        let mut due_wake = false;
        if let Some(t) = &s.think
            && self.issuing
            && let Some(end) = t.next_wake()
            && end < until
        {
            until = end;
            least = 1_000;
        }
        if let Some(rate) = &mut s.rate
            && self.issuing
            && !rate.free.is_empty()
            && let Some(due) = rate.waiting_for()
            && due < until
        {
            until = due;
            least = 1_000;
            due_wake = true;
        }
        let wait = Duration::from_nanos(until.saturating_sub(self.now).clamp(least, POLL_NS));
        let spin_until = s.think.as_ref().filter(|_| self.issuing).and_then(|t| t.spinning(self.now));
        if self.inflight == 0 && self.issuing {
            // Nothing in flight: every slot rests (all its targets stopped), a rate step
            // waits for its next I/O, or every worker thinks. Nothing can complete before
            // `wait` is over.
            self.resting |= !self.rate_mode && !s.think.as_ref().is_some_and(|t| t.any());
            if let Some(spin) = spin_until {
                // thinktime_spin: the think's first part on the CPU, in slices of at most
                // POLL_NS between which the run's loop looks at its stop flags.
                let end = spin.min(until).min(self.now + POLL_NS);
                while self.clock() < end {
                    std::hint::spin_loop();
                }
                self.now = self.clock();
                self.live.last_wake_ns.store(self.now, Ordering::Relaxed);
                return Ok(());
            }
            // (Not on a schedule psync threads share: several spinning for one due I/O would
            // take the CPU it needs.)
            if due_wake && wait.as_nanos() as u64 <= SPIN_NS && !s.rate.as_ref().is_some_and(|r| r.shared()) {
                // A core that goes idle for a few microseconds may come back milliseconds
                // later (a virtual CPU the hypervisor halted: 4 ms after a 9 µs sleep, the
                // response maximum of a 100'000 IOPS null step, issue 36, part 9). The next
                // due I/O is that close: stay on the CPU until it.
                while self.clock() < until {
                    std::hint::spin_loop();
                }
            } else {
                std::thread::sleep(wait);
            }
        } else if due_wake {
            s.backend.submit_and_wait_within(wait)?;
        } else {
            s.backend.submit_and_wait(wait)?;
        }
        self.now = self.clock();
        self.live.last_wake_ns.store(self.now, Ordering::Relaxed);
        Ok(())
    }

    /// Ctrl-C or an abort: issuing ends, or the wait for outstanding I/Os is cut short.
    #[inline]
    fn on_stop<B: IoEngine>(&mut self, s: &Slots<B>) {
        if (s.abort.load(Ordering::Relaxed) || self.stop.load(Ordering::Relaxed)) && !self.stopped {
            if self.issuing {
                self.issuing = false;
                self.stopped = true;
            } else if let Some(d) = self.drain_until {
                // Ctrl-C while outstanding I/Os are waited for at the step's end: wait no
                // longer than after any other stop.
                self.drain_until = Some(d.min(self.now + STOP_WAIT_NS));
                self.stopped = true;
            }
        }
    }

    /// Every interval boundary passed since the last wake-up: the interval ends and goes to
    /// the coordinator; after the last one, issuing ends.
    #[inline]
    fn cross_boundaries<B: IoEngine>(&mut self, s: &mut Slots<B>) {
        let (sched, now) = (self.sched, self.now);
        while self.issuing && now >= self.next_boundary {
            let injected = s.injected.swap(0, Ordering::Relaxed);
            if self.phase >= 0 {
                // A stall still going on at the boundary counts up to it here, and in full in
                // the interval where it ends.
                // (Nor while nothing is in flight because every worker of the thread thinks, or
                // a rate step's next I/O is not due yet — a burst's off phase: it waits for no
                // storage.)
                let idle = self.inflight == 0 && (self.rate_mode || s.think.as_ref().is_some_and(|t| t.any()));
                if !self.resting && !idle {
                    let gap = self.next_boundary.saturating_sub(self.last_done.max(sched.warmup_ns));
                    self.cur.max_gap_ns = Some(self.cur.max_gap_ns.unwrap_or(0).max(gap));
                }
                self.cur.faults_injected = injected;
                // Every I/O meant to go out in the interval is due in it, however late it went.
                if let (Some(rate), Some(r)) = (&mut s.rate, &mut self.cur.rate) {
                    r.due += rate.count_due(sched.warmup_ns, self.next_boundary);
                }
                let (spp, rate_mode, used) = (self.spp, self.rate_mode, &self.used);
                let mut next = self
                    .spare
                    .take()
                    .or_else(|| s.spares.as_ref().and_then(|r| r.try_recv().ok()))
                    .unwrap_or_else(|| fresh(spp, rate_mode, used));
                per_target(&mut next, spp, used);
                let full = std::mem::replace(&mut self.cur, next);
                (self.send)(Msg::Interval { index: self.phase as u32, stats: full });
            }
            self.phase += 1;
            self.live.cpu_at_boundary(self.phase as u32, now);
            self.phase_start = self.next_boundary;
            let planned = s.rounds.as_ref().map_or(sched.intervals, |r| r.load(Ordering::Relaxed).min(sched.intervals));
            if self.phase as u64 >= planned as u64 {
                self.issuing = false;
                // A rate step still issues what was due before its end, once this wake-up's
                // completions freed their slots.
                self.end_due = self.rate_mode;
            } else {
                self.next_boundary += sched.interval_ns;
                self.live.entered.store(self.phase as u32 + 1, Ordering::Relaxed);
            }
        }
    }

    /// A rate step's I/Os due by now, counted as time passes (not all at the boundary: a
    /// million at once would delay the I/Os due meanwhile), before the warm-up's end only
    /// skipped. (A thread blocked in a system call for long walks what it missed when it
    /// wakes. On a shared psync schedule thread 0 counts for the host: if it is given up, the
    /// intervals handed on without it have nothing due — the step is flagged
    /// threads_abandoned then.)
    #[inline]
    fn count_due<B: IoEngine>(&mut self, s: &mut Slots<B>) {
        if let (Some(rate), Some(r)) = (&mut s.rate, &mut self.cur.rate) {
            let n = rate.count_due(self.sched.warmup_ns, self.now.min(self.next_boundary));
            if self.issuing && self.phase >= 0 {
                r.due += n;
            }
        }
    }

    /// Every completion since the last wake-up, recorded, its slot reissued at once while
    /// other I/Os are still in the device: holding replacements back for one batched
    /// submission would leave it with fewer in flight than asked for. When everything in
    /// flight came back together (completed inline, e.g. page-cache reads), the device is idle
    /// and one batched submission is the fastest way to refill it.
    #[inline]
    fn complete_all<B: IoEngine>(&mut self, s: &mut Slots<B>) -> std::io::Result<()> {
        let mut done = std::mem::take(&mut self.done);
        done.clear();
        s.backend.reap(&mut done);
        let recording = self.issuing && self.phase >= 0;
        if !done.is_empty() {
            let gap = self.now.saturating_sub(self.last_done.max(self.sched.warmup_ns));
            if recording {
                self.cur.max_gap_ns = Some(self.cur.max_gap_ns.unwrap_or(0).max(gap));
            } else if !self.issuing && !self.stopped && self.phase >= 0 {
                // A stall that went on past the step's end counts in full.
                self.tail.gap_ns = Some(self.tail.gap_ns.unwrap_or(0).max(gap));
            }
            self.last_done = self.now;
        }
        let si = (((self.now - self.phase_start) / self.sample_ns).min(self.spp - 1)) as usize;
        let last = if self.issuing && done.len() < self.n { done.len().saturating_sub(1) } else { 0 };
        let mut result = Ok(());
        for (k, &(slot, res)) in done.iter().enumerate() {
            if let Err(e) = self.complete(s, slot as usize, res, recording, si, k < last) {
                result = Err(e);
                break;
            }
        }
        self.done = done;
        result
    }

    /// One completion: its latency and errors recorded (in the interval, or the step's tail),
    /// the error policy applied, its slot reissued (flushed at once unless `batch_last`).
    #[inline]
    fn complete<B: IoEngine>(
        &mut self,
        s: &mut Slots<B>,
        slot: usize,
        res: i32,
        recording: bool,
        si: usize,
        flush: bool,
    ) -> std::io::Result<()> {
        let now = self.now;
        let op = s.ops[slot];
        self.inflight -= 1;
        self.changing.sub(&op);
        if std::mem::take(&mut s.given_up[slot]) {
            // Already counted as stuck; the kernel gave it back (or cancelled it).
            return Ok(());
        }
        s.busy[slot] = false;
        // Response time: from when the I/O was meant to be issued (in a closed loop, its
        // submission). A rate step also keeps the service time, from its submission.
        let lat = now.saturating_sub(s.intended[slot]);
        self.max_lat = self.max_lat.max(lat);
        if let Some(rate) = &mut s.rate {
            rate.freed(slot as u32, now);
            let service = now.saturating_sub(s.started[slot]);
            if recording && let Some(r) = &mut self.cur.rate {
                r.service.record(service);
            } else if !self.issuing
                && self.phase >= 0
                && res >= 0
                && let Some(t) = &mut self.tail.rate
            {
                t.service.record(service);
            }
        }
        let whole = res >= 0 && res as u32 == op.len;
        // errno 0 stands for a short transfer (less than asked, no error code).
        let errno = if res < 0 { -res } else { 0 };
        if recording {
            let cur = &mut *self.cur;
            let dir = match op.dir {
                Dir::Read => &mut cur.read,
                Dir::Write => &mut cur.write,
                Dir::Trim => &mut cur.trim,
            };
            let sample = &mut cur.samples[si];
            // A trim moves no data: its bytes count in its own direction only (but for a
            // workload of trims alone, as `IntervalStats::bytes`).
            let moved = if op.is_trim() && !s.opgen.trims_only() { 0 } else { op.len as u64 };
            if whole {
                dir.record(lat, op.len as u64);
                sample.record(lat, moved);
                // The second's histogram: a bucket index and an increment in a block sized
                // before the step (issue 44).
                cur.seconds.record(si, lat);
            } else {
                dir.errors.add(op.target, errno, 1);
                sample.errors += 1;
            }
            if !cur.targets.is_empty()
                && let Ok(k) = cur.targets.binary_search_by_key(&op.target, |t| t.target)
            {
                record_target(&mut cur.targets[k], op.dir, whole, lat, op.len as u64, moved, si);
            }
        } else if !whole {
            self.tail.unmeasured_errors.add(op.target, errno, 1);
        } else if !self.issuing && self.phase >= 0 {
            // Outstanding when the step stopped issuing: its latency still counts.
            self.tail.record(op.dir, lat);
            self.tail.drain.late += 1;
        }
        if s.verify.is_some() {
            verify_completion(s, slot, &op, res, self.issuing, &mut self.cur);
        }
        if !whole && s.errors.policy != OnError::Continue {
            self.on_error(s, &op, errno);
        }
        if res >= 0 {
            self.l_ops += 1;
            if !op.is_trim() || s.opgen.trims_only() {
                self.l_bytes += res as u64;
            }
            self.l_lat += lat;
        }
        let thinks = match &mut s.think {
            Some(t) if self.issuing && !self.rate_mode => !t.completed(slot, now, &s.busy, &mut s.rng),
            _ => false,
        };
        if self.issuing && !self.rate_mode && !thinks && s.issue(slot, now)? {
            self.inflight += 1;
            self.changing.add(&s.ops[slot]);
            // The last one goes with the next submit-and-wait.
            if flush {
                s.backend.flush()?;
            }
        }
        Ok(())
    }

    /// The workers whose think ended: their slots issued again. A thread that had nothing in
    /// flight waited for no storage meanwhile: the gap to its next completion starts now.
    #[inline]
    fn wake_thinkers<B: IoEngine>(&mut self, s: &mut Slots<B>) -> std::io::Result<()> {
        let Some(mut think) = s.think.take() else { return Ok(()) };
        let (now, was_idle) = (self.now, self.inflight == 0);
        let (mut n, mut changing) = (0, Changing::default());
        let result = if self.issuing {
            think.wake(now, &mut |slot| {
                if s.issue(slot as usize, now)? {
                    n += 1;
                    changing.add(&s.ops[slot as usize]);
                }
                Ok(())
            })
        } else {
            Ok(())
        };
        s.think = Some(think);
        self.inflight += n;
        self.changing.merge(changing);
        if n > 0 {
            if was_idle {
                self.last_done = now;
            }
            s.backend.flush()?;
        }
        result
    }

    /// An I/O failed under `on_error = stop-target` (its target gets no more) or `abort` (every
    /// thread of the step stops at once, as on Ctrl-C, and hands in what it measured; the run
    /// ends after this step).
    #[cold]
    fn on_error<B: IoEngine>(&mut self, s: &mut Slots<B>, op: &IoOp, errno: i32) {
        let what = if errno == 0 {
            "a short transfer".to_string()
        } else {
            std::io::Error::from_raw_os_error(errno).to_string()
        };
        let path = s.errors.paths.get(op.target as usize).cloned().unwrap_or_default();
        match s.errors.policy {
            OnError::StopTarget => s.errors.stop(op.target, self.now, errno),
            _ => {
                let why = format!("I/O error on {path} ({what}); on_error = abort ends the run");
                s.errors.abort_reason.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(why);
                s.errors.aborted.store(true, Ordering::Relaxed);
                self.stop.store(true, Ordering::Relaxed);
                self.issuing = false;
                self.stopped = true;
            }
        }
    }

    /// A rate step's due I/Os issued into the slots free now; at its end, those due before it
    /// issued late, and those that find no slot even then weighed in with their age.
    #[inline]
    fn issue_rate<B: IoEngine>(&mut self, s: &mut Slots<B>) -> std::io::Result<()> {
        let (now, warmup_ns) = (self.now, self.sched.warmup_ns);
        if self.issuing
            && let Some(r) = &mut self.cur.rate
        {
            let idle = self.inflight == 0;
            let issued = s.issue_due(now, now, warmup_ns, r)?;
            self.inflight += issued.ios;
            self.changing.merge(issued.changing);
            // Nothing was in flight (a slow rate, a burst's off phase): the storage was not
            // waited for, and the gap to the next completion starts now.
            if idle && issued.ios > 0 {
                self.last_done = self.last_done.max(now);
            }
            if issued.overloaded {
                // overload = abort-step: this step ends now; the run goes on.
                if let Some(t) = &mut self.tail.rate {
                    t.overloaded = true;
                }
                self.stop.store(true, Ordering::Relaxed);
                self.issuing = false;
                self.stopped = true;
            }
        }
        if std::mem::take(&mut self.end_due)
            && let Some(t) = &mut self.tail.rate
        {
            // Issued late, they complete while the step waits for its outstanding I/Os, and
            // their response time goes to the last interval; what finds no slot even now was
            // left waiting: the schedule fell behind.
            let end = self.next_boundary;
            let issued = s.issue_due(now, end - 1, warmup_ns, t)?;
            self.inflight += issued.ios;
            self.changing.merge(issued.changing);
            // Never issued, they still weigh in the response time with their age at the end
            // (a lower bound): a stall across the end cannot hide the I/Os it held back.
            if let Some(rate) = &mut s.rate {
                let (opgen, rng) = (&s.opgen, &mut s.rng);
                let tail = &mut self.tail;
                let left = rate.skip_until(end, &mut |due, n| {
                    tail.hist(opgen.draw_dir(rng)).record_n(now.saturating_sub(due), n);
                });
                // Counted as due in their intervals already.
                if let Some(t) = &mut self.tail.rate {
                    t.backlog += left;
                }
            }
        }
        Ok(())
    }

    /// The live figures the coordinator reads (progress, stuck detection).
    #[inline]
    fn publish(&self) {
        let live = self.live;
        live.ops.store(self.l_ops, Ordering::Relaxed);
        live.bytes.store(self.l_bytes, Ordering::Relaxed);
        live.lat_sum_ns.store(self.l_lat, Ordering::Relaxed);
        live.inflight.store(self.inflight as u64, Ordering::Relaxed);
        live.store_changing(self.changing);
        live.max_lat_ns.store(self.max_lat, Ordering::Relaxed);
        live.unsent_ops.store(self.cur.ops(), Ordering::Relaxed);
    }

    /// Issuing has ended: the outstanding I/Os are waited for, then given up as stuck and
    /// cancelled. Some(I/Os left in flight) once the thread is done: its tail went to the
    /// coordinator.
    fn drain<B: IoEngine>(&mut self, s: &mut Slots<B>) -> std::io::Result<Option<usize>> {
        let now = self.now;
        if self.drain_until.is_none() {
            let wait = self.sched.stuck_wait_ns(self.stopped, self.max_lat);
            self.tail.drain.wait_ns = wait;
            self.drain_until = Some(now + wait);
            if self.stopped {
                // The unfinished interval is dropped; its errors are not.
                self.tail.unmeasured_errors.merge(&self.cur.read.errors);
                self.tail.unmeasured_errors.merge(&self.cur.write.errors);
                self.tail.unmeasured_errors.merge(&self.cur.trim.errors);
            }
        }
        let stuck_left = s.given_up.iter().filter(|&&g| g).count();
        if self.inflight == stuck_left && (stuck_left == 0 || self.cancel_until.is_some_and(|c| now >= c)) {
            // Nothing left but I/Os already given up (and their cancel had its chance).
            self.tail.drain.faults_injected = s.injected.swap(0, Ordering::Relaxed);
            (self.send)(Msg::Drained(std::mem::take(&mut self.tail)));
            return Ok(Some(self.inflight));
        }
        if self.cancel_until.is_none() && self.drain_until.is_some_and(|d| now >= d) {
            if !self.stopped && self.phase >= 0 {
                let gap = now.saturating_sub(self.last_done.max(self.sched.warmup_ns));
                self.tail.gap_ns = Some(self.tail.gap_ns.unwrap_or(0).max(gap));
            }
            s.give_up(now, &mut self.tail);
            s.backend.flush()?;
            self.cancel_until = Some(now + CANCEL_WAIT_NS);
        }
        Ok(None)
    }
}
