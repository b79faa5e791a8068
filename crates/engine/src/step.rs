//! Runs one step — one workload at one parallelism — and returns what it measured.
//!
//! The coordinator here spawns the I/O threads, starts them together, reads host CPU at every
//! interval boundary, merges the threads' interval stats as they arrive (exact histogram
//! merges) and reports progress. A step stops early when `stop` is set (Ctrl-C): the threads
//! drop the interval they are in and drain.
//!
//! No I/O is waited for forever: when the threads stop issuing, outstanding I/Os get a bounded
//! wait (see `Schedule::stuck_wait_ns`); then each thread gives up what is still out (cancels
//! it, counts it as stuck with its age), and the coordinator gives up threads that do not come
//! back at all (psync blocked in the kernel) and ends the step without them.

use crate::StepEnd;
use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use iocurve_plan::{Backend, Fault, Workload, format_size};
use iocurve_stats::{CpuTimes, CpuUsage, DeviceIo, IntervalStats, IoCpu, StepProgress, StepRecord};

use crate::arrival::{Arrivals, RateMode, RateShare, SharedSchedule, Source};
use crate::backend::{ActiveFault, FaultBackend, Journaled, ThreadModel};
use crate::buffer::BufferPool;
use crate::data::{DataGen, Pool};
use crate::host::cpu_times;
use crate::ops::{OpGen, working_set};
use crate::rng::Rng;
use crate::verify::GenMap;
use crate::worker::{self, ErrorState, Live, Msg, Schedule, Slots};
use crate::{EngineError, TargetSet};

pub struct StepConfig<'a> {
    pub workload: &'a Workload,
    pub workers: u32,
    /// The back-end that actually runs (after any fallback).
    pub backend: Backend,
    /// I/O threads for io_uring and null (psync: one per outstanding I/O).
    pub threads: usize,
    pub targets: &'a TargetSet,
    /// Set by Ctrl-C: stop now (the unfinished interval is dropped), wait briefly for
    /// outstanding I/Os.
    pub stop: &'a AtomicBool,
    /// Faults to inject (tests and demonstrations); usually none.
    pub faults: &'a [Fault],
    /// The verification map, for workloads with `verify`.
    pub verify: Option<Arc<GenMap>>,
    /// Its journal (`run --verify-journal`): every verifying write recorded before it is issued.
    pub journal: Option<Arc<crate::journal::Journal>>,
    /// Stops issuing at once when set (unlike `stop`, which finishes the interval); the
    /// intervals finished before are kept.
    pub abort: Option<Arc<AtomicBool>>,
    /// Called once every I/O thread is ready (threads, buffers and their data, rings, opened
    /// targets): waits until shortly before the agreed start moment and returns it. Each I/O
    /// thread then sleeps until the moment itself, so that nothing else runs between its
    /// wake-up and its first I/O: many hosts woken at one moment on few cores start a thread
    /// each, not a chain of two. The function returning None calls the step off (nothing is
    /// measured); no function (None here): the step starts at once.
    pub start_at: Option<&'a (dyn Fn() -> Option<Instant> + Sync)>,
    /// Hosts start this step together at an agreed moment: the I/O threads wait for it at
    /// real-time priority and keep it until their first I/Os are submitted, the thread that
    /// opens the gate until it has ([`crate::host::StartPriority`]).
    pub synchronized: bool,
    /// A rate step: this host's share of the run's schedule. None: closed loop.
    pub rate: Option<RateShare>,
    /// A replay step (issue 45): this host's share of the trace, issued at its times (over its
    /// speed) through the open-loop scheduler. Exclusive with `rate`.
    pub replay: Option<&'a crate::replay::ReplayShare>,
    /// This host's place among the run's hosts (0 alone): with the plan's seed and the I/O
    /// thread, it seeds the offsets a thread draws, so that hosts draw apart and the same
    /// seed repeats a run.
    pub host: u32,
    /// An agent's step (every step of `iocurve run`, a local one through the in-process agent):
    /// the coordinator ends it once steady (`steady_state = "snia"`) through this handle,
    /// judging the hosts' merged intervals; the record it returns holds no intervals (the
    /// observer had them all). None: the step judges its own and keeps them (the engine alone).
    pub end: Option<&'a StepEnd>,
    /// `run --write-iolog`: where the step's threads note every I/O they issue.
    pub iolog: Option<Arc<crate::iolog::IoLog>>,
}

/// Sees a step as it runs: for progress lines and for writing intervals to the store while the
/// step goes on. Every method has a do-nothing default.
pub trait StepObserver {
    /// The step started; `rec` has its parameters (threads, sample length) and no intervals.
    fn started(&mut self, _rec: &StepRecord) {}
    /// About four times a second.
    fn progress(&mut self, _p: &StepProgress) {}
    /// Interval `index` finished: all threads' stats merged, with host CPU. Called before the
    /// histograms are folded into the step total.
    fn interval(&mut self, _index: u32, _stats: &IntervalStats, _cpu: &CpuUsage, _duration_s: f64) {}
    /// A multi-host step (the coordinator): host number `host` started its I/O at
    /// `started_unix_ns` on the coordinator's clock, with `threads` I/O threads.
    fn host_started(
        &mut self,
        _host: u32,
        _address: &str,
        _hostname: &str,
        _started_unix_ns: i64,
        _threads: usize,
        _workers: u32,
    ) {
    }
    /// A multi-host step: host `host`'s own interval `index`, handed on just before the merged
    /// interval of that index.
    fn host_interval(&mut self, _host: u32, _index: u32, _stats: &IntervalStats, _cpu: &CpuUsage, _duration_s: f64) {}
    /// A multi-host step through relays (issue 46), at its end: host number `host` summed up
    /// over the step, its record's one interval all its measured intervals merged (instead of
    /// `host_started` and `host_interval` as it runs; a host asked for in full, `run
    /// --host-intervals`, gets those instead, at the step's end).
    fn host_summary(&mut self, _host: u32, _row: &iocurve_stats::HostRecord) {}
    /// Something the user should know at once (a host lost mid-step): the libraries print
    /// nothing themselves, the observer decides where it goes.
    fn warning(&mut self, _message: &str) {}
}

/// Observes nothing.
pub struct NoObserver;
impl StepObserver for NoObserver {}

/// Holds the I/O threads until every one is set up (rings, buffers), then releases them with
/// one common start time — or tells them to give up when the step cannot start (a thread
/// could not be spawned). Unlike a barrier it never waits for threads that do not exist.
#[derive(Default)]
struct Gate {
    /// Threads arrived; None while closed, Some(Some(t0)) to start, Some(None) to give up.
    state: Mutex<(usize, Option<Option<Instant>>)>,
    cv: Condvar,
}

impl Gate {
    fn lock(&self) -> std::sync::MutexGuard<'_, (usize, Option<Option<Instant>>)> {
        // A poisoned gate only means a thread panicked; the state itself stays consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An I/O thread is ready; returns the start time, or None to give up.
    fn arrive(&self) -> Option<Instant> {
        let mut st = self.lock();
        st.0 += 1;
        self.cv.notify_all();
        while st.1.is_none() {
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.1.expect("checked above")
    }

    /// Waits for `n` threads, then for `start_at` (if any), then gives them all the start
    /// moment (now without `start_at`; each thread sleeps until it); None when `start_at`
    /// called the step off (the threads are sent home).
    fn open(
        &self,
        n: usize,
        start_at: Option<&(dyn Fn() -> Option<Instant> + Sync)>,
        synchronized: bool,
    ) -> Option<Instant> {
        let mut st = self.lock();
        while st.0 < n {
            st = self.cv.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        drop(st);
        // In a synchronized start this thread waits at real-time priority too, so that a busy
        // host does not open the gate late, and lets it go once the gate is open: at the
        // moment only the I/O threads are real-time.
        let priority = if synchronized { crate::host::StartPriority::raise() } else { None };
        let t0 = match start_at {
            None => Instant::now(),
            Some(wait) => match wait() {
                Some(t0) => t0,
                None => {
                    self.abort();
                    return None;
                }
            },
        };
        let mut st = self.lock();
        st.1 = Some(Some(t0));
        self.cv.notify_all();
        drop(st);
        drop(priority);
        Some(t0)
    }

    fn abort(&self) {
        self.lock().1 = Some(None);
        self.cv.notify_all();
    }
}

/// Where I/O thread `ti` of `n` takes its intended times from (None: a closed loop): the rate's
/// schedule or the replay's I/Os — its own, or the host's when its threads share them (psync)
/// — with a second copy that counts what came due (this thread's, or the host's on thread 0).
type ThreadReplay = (Arc<Replaying>, Option<Arc<[crate::replay::ReplayIo]>>);

fn pacing(
    w: &Workload,
    rate: Option<RateShare>,
    replay: Option<&ThreadReplay>,
    shared: Option<&Arc<std::sync::Mutex<SharedSchedule>>>,
    (ti, n): (usize, usize),
) -> Option<RateMode> {
    if let Some((r, own)) = replay {
        return Some(match shared {
            Some(m) => RateMode::new(Source::Shared(m.clone()), w.overload, (ti == 0).then(|| r.arrivals(None))),
            None => RateMode::new(Source::Own(r.arrivals(own.clone())), w.overload, Some(r.arrivals(own.clone()))),
        });
    }
    rate.map(|share| {
        let own = || Arrivals::for_thread(w.arrival, &share, ti, n, w.seed).with_bursts(w.bursts);
        let (source, counter) = match shared {
            Some(m) => (
                Source::Shared(m.clone()),
                (ti == 0).then(|| Arrivals::for_thread(w.arrival, &share, 0, 1, w.seed).with_bursts(w.bursts)),
            ),
            None => (Source::Own(own()), Some(own())),
        };
        RateMode::new(source, w.overload, counter)
    })
}

/// A replay's share as a step runs it: fitted to the host's targets, with the buffer size its
/// largest read or write needs.
struct Replaying {
    /// The host's I/Os, fitted, once in memory (up to 6 M of 24 bytes): the shared schedule,
    /// the due counter and the threads' own shares are made from them, not from copies.
    ios: Arc<[crate::replay::ReplayIo]>,
    speed: f64,
    max_len: usize,
    /// Per thread of many slots: its own I/Os (every n-th).
    threads: usize,
    /// What fitting it to the targets did, and to what alignment.
    fitted: crate::replay::Fitted,
    align: u64,
}

impl Replaying {
    /// What fitting the share moved, in words (None: nothing).
    fn note(&self, cfg: &StepConfig) -> Option<String> {
        let (f, n) = (self.fitted, self.ios.len());
        let mut parts = Vec::new();
        if f.remapped > 0 {
            parts.push(format!(
                "{} of its {n} I/Os reached beyond their target and were moved by replay_remap = {}",
                f.remapped,
                cfg.workload.replay_remap.name()
            ));
        }
        if f.aligned > 0 {
            parts
                .push(format!("{} were aligned to {} bytes for O_DIRECT (offset down, end up)", f.aligned, self.align));
        }
        (!parts.is_empty()).then(|| format!("this host's share of the trace: {}", parts.join("; ")))
    }

    /// The I/Os thread `thread` issues: its own (threads of many slots), or None: the host's.
    fn own(&self, thread: usize, own: bool) -> Option<Arc<[crate::replay::ReplayIo]>> {
        own.then(|| crate::replay::every_nth(&self.ios, thread, self.threads))
    }

    /// The intended times (and I/Os) of `ios`, or of the whole share.
    fn arrivals(&self, ios: Option<Arc<[crate::replay::ReplayIo]>>) -> Arrivals {
        Arrivals::replay(ios.unwrap_or_else(|| self.ios.clone()), self.speed)
    }
}

fn fitted_replay(cfg: &StepConfig, threads: usize) -> Result<Option<Arc<Replaying>>, EngineError> {
    let Some(r) = cfg.replay else { return Ok(None) };
    let sizes: Vec<u64> = cfg.targets.targets.iter().map(|t| t.size).collect();
    let align = if cfg.workload.direct { cfg.targets.logical_block() } else { 1 };
    // The one copy of the request's I/Os the step keeps, fitted where it lies.
    let mut ios: Arc<[crate::replay::ReplayIo]> = Arc::from(r.ios.as_slice());
    let fitted = match Arc::get_mut(&mut ios) {
        Some(own) => r.fit_ios(own, &sizes, align)?,
        None => unreachable!("an Arc just made has no other owner"),
    };
    let max_len = (crate::replay::max_data_len(&ios) as usize).div_ceil(4096) * 4096;
    Ok(Some(Arc::new(Replaying { ios, speed: r.speed, max_len, threads, fitted, align })))
}

/// Builds the op generator of a workload at a parallelism, checking the targets fit it.
fn op_gen(w: &Workload, workers: u32, targets: &TargetSet, replay: bool) -> Result<OpGen, EngineError> {
    let max_bs = w.max_bs();
    let mut geoms = Vec::new();
    for t in &targets.targets {
        // (A replay's I/Os are the trace's, aligned when fitted: its sizes are not drawn.)
        if w.direct
            && !replay
            && let Some(b) = w.bs.iter().chain(&w.write_bs).find(|b| b.bytes % t.logical_block != 0)
        {
            return Err(EngineError::Input(format!(
                "workload {}: block size {} is not a multiple of the logical block size {} of {}: O_DIRECT needs aligned I/O (use a multiple of {}{})",
                w.name,
                format_size(b.bytes),
                t.logical_block,
                t.path.display(),
                t.logical_block,
                // Buffered I/O is the other way out, where the back-end has it.
                if w.backend.facts().direct_only {
                    format!(", or buffered I/O on io_uring or psync: {} needs O_DIRECT", w.backend.name())
                } else {
                    ", or --buffered".to_string()
                }
            )));
        }
        let geom = working_set(&w.working_set, t.size, max_bs, &w.name, &t.path.display().to_string())?;
        // (A replay's trims are the trace's: one its device refuses is counted as an error.)
        if w.trims() && !replay {
            trim_fits(w, t, geom.start)?;
        }
        geoms.push(geom);
    }
    // A workload on some of the groups (`target_groups`, a concurrent step's member on targets
    // of its own): the others weigh nothing for it.
    let on = |name: &str| w.target_groups.is_empty() || w.target_groups.iter().any(|g| g == name);
    if !targets.groups.iter().any(|g| on(&g.name)) {
        let names: Vec<&str> = targets.groups.iter().map(|g| g.name.as_str()).collect();
        return Err(EngineError::Input(format!(
            "workload {}: target_groups {:?} names none of the target groups here ({})",
            w.name,
            w.target_groups,
            names.join(", ")
        )));
    }
    let groups = groups_of(w, targets);
    OpGen::new(w, workers, geoms, &groups).map_err(|(i, why)| {
        let path = targets.targets.get(i).map_or_else(String::new, |t| t.path.display().to_string());
        EngineError::Input(format!("workload {}: distribution {} on {path}: {why}", w.name, w.distribution))
    })
}

/// The target groups as workload `w` weighs them: (weight, member targets), 0 for a group it
/// does not use (`target_groups`).
fn groups_of(w: &Workload, targets: &TargetSet) -> Vec<(u32, Vec<usize>)> {
    let on = |name: &str| w.target_groups.is_empty() || w.target_groups.iter().any(|g| g == name);
    targets.groups.iter().map(|g| (if on(&g.name) { g.weight } else { 0 }, g.members.clone())).collect()
}

/// The targets workload `w` sends I/Os to, by their place in the host's list, in order.
fn used_targets(w: &Workload, targets: &TargetSet) -> Vec<u32> {
    let mut v: Vec<u32> = groups_of(w, targets)
        .into_iter()
        .filter(|(weight, _)| *weight > 0)
        .flat_map(|(_, m)| m.into_iter().map(|i| i as u32))
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// A trimming workload on a block device: the device discards, and every trim is a whole number
/// of its discard granules from a granule's start (a device ignores, or rejects, the parts of a
/// trim that cover a granule partly). Files punch holes of any size.
fn trim_fits(w: &Workload, t: &iocurve_target::Target, start: u64) -> Result<(), EngineError> {
    let refuse =
        |why: String| EngineError::Input(format!("workload {} trims (trim_pct = {}), but {why}", w.name, w.trim_pct));
    let Some(gran) = t.trim_granule().map_err(refuse)? else { return Ok(()) };
    let path = t.path.display();
    if let Some(b) = w.trim_sizes().iter().find(|b| !b.bytes.is_multiple_of(gran)) {
        return Err(EngineError::Input(format!(
            "workload {}: trims of {} on {path} are not a multiple of its discard granularity {}: give trim_bs (or bs) a multiple of {}",
            w.name,
            format_size(b.bytes),
            format_size(gran),
            format_size(gran)
        )));
    }
    // Offsets of a random workload are multiples of the I/O's own size (of the smallest size
    // under a skewed law), of a sequential one steps of every size: all need the granule.
    let align =
        if w.pattern == iocurve_plan::Pattern::Random && w.distribution.is_uniform() { gran } else { w.min_bs() };
    if !start.is_multiple_of(gran) || !align.is_multiple_of(gran) {
        return Err(EngineError::Input(format!(
            "workload {}: its trims on {path} would not start on its discard granules of {}: make the working set start and every block size (bs, write_bs, trim_bs) multiples of {}",
            w.name,
            format_size(gran),
            format_size(gran)
        )));
    }
    Ok(())
}

/// The seed of the offsets I/O thread `thread` of host `host` draws in a step of `cfg`: apart
/// for every thread, host, workload and step (its workers, or its rate: a ramp's steps differ in
/// one of them), so that no step re-reads the blocks of the one before in the same order (an
/// array's cache would flatter it); the same for the same plan seed.
fn stream_seed(cfg: &StepConfig, host: u32, thread: usize) -> u64 {
    let w = cfg.workload;
    let mut z = w.seed ^ (host as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (thread as u64 + 1).rotate_left(32);
    // FNV-1a over what tells the step apart.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let rate = cfg.rate.map_or(0, |r| r.iops.to_bits());
    for b in w.name.bytes().chain(cfg.workers.to_le_bytes()).chain(rate.to_le_bytes()) {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    z ^= h.rotate_left(17);
    // splitmix64's finalizer: neighbouring inputs give unrelated seeds.
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// What an I/O thread's slots are made of, besides the back-end.
struct Parts {
    opgen: OpGen,
    rng: Rng,
    data_rng: Rng,
    pool: BufferPool,
    data: DataGen,
    workers: Vec<u32>,
    errors: Arc<ErrorState>,
    faults: Arc<[ActiveFault]>,
    verify: Option<Arc<GenMap>>,
    journal: Option<Arc<crate::journal::Journal>>,
    abort: Option<Arc<AtomicBool>>,
    rate: Option<RateMode>,
    rounds: Option<Arc<AtomicU32>>,
    spares: Option<std::sync::mpsc::Receiver<Box<IntervalStats>>>,
    think: Option<iocurve_plan::Think>,
    iolog: Option<Arc<crate::iolog::IoLog>>,
}

impl Parts {
    /// The slots over back-end `b`, wrapped for fault injection (a pass-through without faults).
    fn slots<B: crate::backend::IoEngine>(self, b: B) -> Slots<FaultBackend<Journaled<B>>> {
        let n = self.workers.len();
        let injected = Arc::new(AtomicU64::new(0));
        // The journal next to the storage: what reaches it is what it records.
        let b = FaultBackend::new(Journaled::new(b, self.journal), self.faults, n, injected.clone());
        let think = self.think.map(|t| crate::think::Thinking::new(t, &self.workers));
        let mut s = Slots::new(b, self.opgen, self.rng, self.pool, self.data, self.workers);
        s.data_rng = self.data_rng;
        s.think = think;
        s.errors = self.errors;
        s.injected = injected;
        s.verify = self.verify;
        if let Some(a) = self.abort {
            s.abort = a;
        }
        s.rate = self.rate;
        s.rounds = self.rounds;
        s.spares = self.spares;
        s.iolog = self.iolog.map(crate::iolog::IoLogBuf::new);
        s
    }
}

/// The plan's faults for this step's targets.
fn active_faults(cfg: &StepConfig) -> Result<Arc<[ActiveFault]>, EngineError> {
    let mut out = Vec::new();
    for f in cfg.faults {
        let target = match &f.target {
            None => None,
            Some(p) => {
                let found = cfg.targets.targets.iter().position(|t| t.path == std::path::Path::new(p));
                let i = found.ok_or_else(|| {
                    EngineError::Input(format!("fault target {p} is not a target of this run: name one of its targets"))
                })?;
                Some(i as u32)
            }
        };
        out.push(ActiveFault::new(f, target));
    }
    Ok(out.into())
}

pub fn run_step(cfg: &StepConfig, obs: &mut dyn StepObserver) -> Result<StepRecord, EngineError> {
    let record = run_step_threads(cfg, obs);
    give_back_memory();
    record
}

/// Returns the memory the step's threads freed to the system. glibc keeps what a thread freed
/// in its arena for the next allocation: a 4,096-thread psync step left 1.2 GB of an agent's
/// RSS behind, for its whole life (issue 35, finding 8).
fn give_back_memory() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only releases free memory; it has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What a step must hold before anything is allocated. An agent gets the same checks as a
/// local run: memory and the threads and descriptors the step needs (issue 36, finding 7: an
/// agent found its thread limit only when a thread failed to start, and the run exited 1, not
/// 2), a verification map of the step's block size, a rate the schedule can keep.
fn check_config(cfg: &StepConfig) -> Result<(), EngineError> {
    let w = cfg.workload;
    crate::budget::check_step(w, cfg.workers, cfg.backend)?;
    crate::budget::check_limits(w, cfg.workers, cfg.backend)?;
    // A LUN mounted or claimed through another path since the run began is not written
    // (issue 42): checked before every step that writes.
    if w.writes() {
        for t in &cfg.targets.targets {
            let why = t.lun_in_use();
            if !why.is_empty() {
                return Err(EngineError::Input(format!(
                    "refusing to write to {}: its LUN is in use through another path since the run began ({}); nothing more is written",
                    t.path.display(),
                    why.join("; ")
                )));
            }
        }
    }
    if w.verify {
        match &cfg.verify {
            Some(m) if w.bs.len() == 1 && m.bs == w.bs[0].bytes => {}
            Some(m) => {
                return Err(EngineError::Input(format!(
                    "workload {}: verifying workloads of one run share one block size (the map tracks {} blocks)",
                    w.name,
                    format_size(m.bs)
                )));
            }
            None => {
                return Err(EngineError::Input(format!(
                    "workload {} verifies, but no verification map was given",
                    w.name
                )));
            }
        }
    }
    if cfg.replay.is_some() && (cfg.rate.is_some() || w.verify) {
        return Err(EngineError::Input(format!(
            "workload {}: a replay step is driven by its trace alone: no rate and no verification beside it",
            w.name
        )));
    }
    if let Some(r) = &cfg.rate
        && !(r.iops > 0.0 && r.iops <= crate::arrival::MAX_IOPS && r.host < r.hosts)
    {
        return Err(EngineError::Input(format!(
            "workload {}: a rate step needs a rate above 0 and up to 1e9 IOPS, and a host among the hosts (got {} IOPS, host {} of {})",
            w.name, r.iops, r.host, r.hosts
        )));
    }
    Ok(())
}

/// Slots (outstanding I/Os) per I/O thread, as worker ids: a thread per slot (psync), or the
/// workers' slots spread over `threads`.
fn slot_plan(cfg: &StepConfig) -> Vec<Vec<u32>> {
    let qd = cfg.workload.queue_depth;
    match cfg.backend.facts().threads {
        ThreadModel::PerIo => (0..cfg.workers).flat_map(|wk| (0..qd).map(move |_| vec![wk])).collect(),
        ThreadModel::Shared => {
            let n = cfg.threads.clamp(1, cfg.workers as usize);
            let mut p = vec![Vec::new(); n];
            for wk in 0..cfg.workers {
                p[wk as usize % n].extend(std::iter::repeat_n(wk, qd as usize));
            }
            p
        }
    }
}

fn run_step_threads(cfg: &StepConfig, obs: &mut dyn StepObserver) -> Result<StepRecord, EngineError> {
    let w = cfg.workload;
    check_config(cfg)?;
    cfg.targets.set_direct(w.direct)?;
    let opgen = op_gen(w, cfg.workers, cfg.targets, cfg.replay.is_some())?;
    let qd = w.queue_depth;
    let fds: Vec<RawFd> = cfg.targets.targets.iter().map(|t| t.fd()).collect();
    let plan = slot_plan(cfg);
    let nthreads = plan.len();
    tracing::debug!(workload = %w.name, workers = cfg.workers, qd, threads = nthreads, backend = cfg.backend.name(), "step starting");
    // The I/O threads are not scoped: one blocked in a system call on storage that stopped
    // answering (psync) is given up and left behind, and the step ends without it. So they
    // own (or share) everything they use.
    // A replay's share fitted to this host's targets, before any thread starts.
    let replay = fitted_replay(cfg, nthreads)?;
    let step_stop = Arc::new(AtomicBool::new(false));
    let lives: Arc<[Live]> = (0..nthreads).map(|_| Live::default()).collect();
    let gate = Arc::new(Gate::default());
    let (tx, rx) = mpsc::channel::<(usize, Msg)>();
    // Buffers for the data of reads and writes: a trim carries none.
    let max_bs = (w.max_data_bs() as usize).max(replay.as_ref().map_or(0, |r| r.max_len));
    let writes = w.writes();
    let faults = active_faults(cfg)?;
    let errors = Arc::new(ErrorState::new(
        w.on_error,
        cfg.targets.targets.iter().map(|t| t.path.display().to_string()).collect(),
    ));
    let shared_w = Arc::new(w.clone());

    // A step that ends once steady runs at most its planned intervals; the coordinator lowers
    // the count when the rule holds.
    let rounds = (w.steady_state == iocurve_plan::SteadyState::Snia).then(|| Arc::new(AtomicU32::new(w.intervals)));
    // On several hosts the coordinator lowers it, through `cfg.end`, for as long as this runs.
    let _attached =
        rounds.as_ref().zip(cfg.end).map(|(r, e)| crate::end::Attached::new(e, r.clone(), lives.clone(), w.intervals));
    // Threads of one slot each (psync) share the host's schedule: a free thread takes the next
    // due I/O, as a free slot of a ring does.
    let shared_schedule = match (cfg.rate, &replay, cfg.backend.facts().threads) {
        (_, Some(r), ThreadModel::PerIo) => Some(SharedSchedule::new(r.arrivals(None), nthreads)),
        (Some(share), None, ThreadModel::PerIo) => Some(SharedSchedule::new(
            Arrivals::for_thread(w.arrival, &share, 0, 1, w.seed).with_bursts(w.bursts),
            nthreads,
        )),
        _ => None,
    };
    // Per thread: where the coordinator hands back the interval stats it merged, emptied.
    // Only for threads that multiplex many I/Os (io_uring, null: a few per host): an emptied set
    // has every page of its histograms written (about 0.9 MB for a rate step), and a psync step
    // may have thousands of threads.
    let recycle = cfg.backend.facts().threads == ThreadModel::Shared;
    let mut spare_txs = Vec::with_capacity(nthreads);
    for (ti, workers) in plan.into_iter().enumerate() {
        let (spare_tx, spares) = mpsc::sync_channel::<Box<IntervalStats>>(1);
        spare_txs.push(recycle.then_some(spare_tx));
        let spares = recycle.then_some(spares);
        let (tx, thread_gate, step_stop, lives) = (tx.clone(), gate.clone(), step_stop.clone(), lives.clone());
        let w = shared_w.clone();
        let opgen = opgen.clone();
        let fds = fds.clone();
        let backend = cfg.backend;
        let (faults, errors) = (faults.clone(), errors.clone());
        let verify = if w.verify { cfg.verify.clone() } else { None };
        let journal = if w.verify { cfg.journal.clone() } else { None };
        let abort = cfg.abort.clone();
        let rate = cfg.rate;
        let shared_schedule = shared_schedule.clone();
        // A replay's I/Os for this thread: its own share (threads of many slots), or the host's.
        let replay = replay.as_ref().map(|r| (r.clone(), r.own(ti, shared_schedule.is_none())));
        let rounds = rounds.clone();
        let iolog = cfg.iolog.clone();
        let cfg_synchronized = cfg.synchronized;
        let offsets_seed = stream_seed(cfg, cfg.host, ti);
        let builder = std::thread::Builder::new().name(format!("iocurve-io{ti}")).stack_size(256 << 10);
        let spawned = builder.spawn(move || {
            let live = &lives[ti];
            let send = |m: Msg| {
                // An abandoned thread that comes back reports nothing: the step went on without it.
                if !live.abandoned.load(Ordering::Relaxed) {
                    let _ = tx.send((ti, m));
                }
            };
            let rng = Rng::new(offsets_seed);
            let mut data_rng = Rng::seed_from(ti as u64 + 1);
            let mut pool = if backend.facts().buffer_per_io {
                BufferPool::new(workers.len(), max_bs)
            } else {
                BufferPool::shared(workers.len(), max_bs)
            };
            let data = DataGen::new(&w.data, w.dedupe_unit() as usize, Pool::shared(), &mut data_rng);
            if writes {
                for i in 0..pool.distinct() {
                    data.prepare(pool.slice_mut(i), &mut data_rng);
                }
            }
            let synchronized = cfg_synchronized;
            let spp = worker::samples_per_interval(w.interval_s);
            let start = || {
                let priority = if synchronized { crate::host::StartPriority::raise() } else { None };
                thread_gate.arrive().map(|t0| {
                    // The moment may lie ahead: this thread wakes for it itself (at real-time
                    // priority in a synchronized start), and its first I/Os follow.
                    crate::host::sleep_until(t0);
                    live.began(Instant::now().saturating_duration_since(t0).as_nanos() as u64);
                    (Schedule::new(t0, &w), priority)
                })
            };
            let n = workers.len();
            let rate = pacing(&w, rate, replay.as_ref(), shared_schedule.as_ref(), (ti, nthreads));
            let pool_range = (pool.base(), pool.total_len());
            // Closed-loop steps only (a rate step's I/Os go out when due).
            let think = if rate.is_none() { w.think } else { None };
            let parts = Parts {
                opgen,
                rng,
                data_rng,
                pool,
                data,
                workers,
                errors,
                faults,
                verify,
                journal,
                abort,
                rate,
                rounds,
                spares,
                think,
                iolog,
            };
            let stop = &*step_stop;
            let go = Go { parts, spp, start, stop, live, send: &send };
            let result = match crate::backend::drive(backend, n, fds, pool_range, go) {
                Ok(r) => r,
                Err((go, e)) => {
                    // Through the gate all the same: the step ends for every thread together.
                    (go.start)();
                    Err(e)
                }
            };
            send(match result {
                Ok(()) => Msg::Done,
                Err(e) => Msg::Failed(e),
            });
        });
        if let Err(e) = spawned {
            // The threads already spawned wait at the gate: send them home.
            gate.abort();
            return Err(EngineError::io(format!("cannot start I/O thread {ti} of {nthreads}"), e));
        }
    }
    drop(tx);
    // Made before the start: its histograms are some hundred KiB to zero.
    let spp = worker::samples_per_interval(w.interval_s);
    let rec = StepRecord::new(cfg.workers, w.queue_depth, nthreads, w.interval_s, w.interval_s / spp as f64);
    let Some(t0) = gate.open(nthreads, cfg.start_at, cfg.synchronized) else {
        return Err(EngineError::Input("the step was called off before it started".into()));
    };
    let sched = Schedule::new(t0, w);
    let mut rec =
        coordinate(cfg, w, rec, &sched, &rx, &spare_txs, &step_stop, &lives, &errors, rounds.as_deref(), obs)?;
    if let Some(note) = replay.as_ref().and_then(|r| r.note(cfg)) {
        rec.notes.push((REPLAY_FITTED.into(), note));
    }
    Ok(rec)
}

/// How long after the start moment `t0` the latest I/O thread woke to begin the step (ns).
/// Each thread only sleeps until the moment and then says so, so this looks again after ever
/// longer pauses (it runs after the moment, beside the threads starting; nothing allocated),
/// for a second at most: a thread that has not begun by then counts as beginning now, which
/// never makes the start look earlier than it was.
fn latest_start(lives: &[Live], t0: Instant) -> u64 {
    let mut pause = Duration::from_micros(50);
    let waited = Instant::now();
    loop {
        // Lateness plus one per thread (0: not begun yet): the fewest and the most.
        let (first, last) = lives
            .iter()
            .map(|l| l.started_late.load(Ordering::Relaxed))
            .fold((u64::MAX, 0), |(lo, hi), l| (lo.min(l), hi.max(l)));
        let late = last.saturating_sub(1);
        if first > 0 {
            return late;
        }
        if waited.elapsed() > Duration::from_secs(1) {
            return late.max(Instant::now().saturating_duration_since(t0).as_nanos() as u64);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

/// The note of a replay whose I/Os were moved to fit its targets.
pub const REPLAY_FITTED: &str = "replay_fitted";

/// An I/O thread's run once its back-end is built ([`crate::backend::drive`]).
struct Go<'a, F> {
    parts: Parts,
    spp: u32,
    start: F,
    stop: &'a AtomicBool,
    live: &'a Live,
    send: &'a dyn Fn(Msg),
}

impl<F: FnOnce() -> Option<(Schedule, Option<crate::host::StartPriority>)>> crate::backend::Drive for Go<'_, F> {
    type Out = Result<(), String>;
    fn drive<E: crate::backend::IoEngine>(self, engine: E) -> Result<(), String> {
        let mut s = self.parts.slots(engine);
        run_slots(&mut s, self.spp, self.start, self.stop, self.live, self.send)
    }
}

/// Runs a thread's slots once the gate opens (`start` gives None: the step was called off). If I/O
/// is still in flight after an error, the buffers are leaked on purpose: the kernel may still
/// write into them.
fn run_slots<B: crate::backend::IoEngine>(
    s: &mut Slots<B>,
    samples_per_interval: u32,
    start: impl FnOnce() -> Option<(Schedule, Option<crate::host::StartPriority>)>,
    stop: &AtomicBool,
    live: &Live,
    send: &dyn Fn(Msg),
) -> Result<(), String> {
    match worker::run(s, samples_per_interval, start, stop, live, send) {
        Ok(0) => Ok(()),
        Ok(_) => {
            // Stuck I/Os the kernel did not give back may still write into their buffers.
            std::mem::forget(std::mem::replace(&mut s.pool, crate::buffer::BufferPool::new(1, 0)));
            Ok(())
        }
        Err((e, inflight)) => {
            if inflight > 0 {
                std::mem::forget(std::mem::replace(&mut s.pool, crate::buffer::BufferPool::new(1, 0)));
            }
            Err(format!("I/O thread failed: {e}"))
        }
    }
}

/// The note code of a step whose busiest I/O thread hardly waited for the storage.
pub const IO_THREAD_SATURATED: &str = "io_thread_saturated";
/// An I/O thread on a CPU this share of the measured time or more is saturated.
pub const SATURATED_SHARE: f64 = 0.9;

/// A step whose busiest I/O thread was on a CPU 90 % of the measured time or more may show
/// iocurve's pace rather than the storage's: said, with what would measure further. (Not for
/// the null back-end, which never waits: there iocurve's pace is what is measured.)
fn saturated_note(backend: Backend, workers: u32, cpu: Option<IoCpu>, nthreads: usize, cores: usize) -> Option<String> {
    let cpu = cpu.filter(|c| c.busiest >= SATURATED_SHARE && backend.touches_storage())?;
    let hint = match backend.facts().threads {
        ThreadModel::Shared if nthreads < cores.min(workers as usize) => {
            format!("threads = {} would measure further", nthreads + 1)
        }
        ThreadModel::Shared => format!(
            "its {nthreads} I/O threads already use every core or worker: more workers per thread, or more hosts, would measure further"
        ),
        // One I/O per thread: it completed on the CPU (a page-cache hit), not on the storage.
        ThreadModel::PerIo => "its I/Os complete on the CPU (the page cache), not on the storage".into(),
    };
    Some(format!(
        "iocurve's busiest I/O thread ran on a CPU {:.0} % of the measured time ({nthreads} I/O threads, {:.0} % of a core together): this step's pace may be iocurve's, not the storage's; {hint}",
        cpu.busiest * 100.0,
        cpu.total * 100.0
    ))
}

/// The note code of a rate step that `overload = abort-step` ended.
pub const OVERLOADED: &str = "overloaded";

/// A thread that has not reported within this long after its own deadline for outstanding
/// I/Os is blocked in a system call (psync on storage that stopped answering): it is given up.
const ABANDON_MARGIN_NS: u64 = worker::POLL_NS + worker::CANCEL_WAIT_NS + 200_000_000;

/// A step's coordination on its host: what the I/O threads reported so far, gathered into the
/// step's intervals and handed on in order. One handler per event: a thread's message
/// ([`Coordination::take`]), the clock (boundaries, threads stuck past their deadline), the
/// intervals ready to hand on, a progress tick; then the step's record concluded.
struct Coordination<'c, 'o> {
    cfg: &'c StepConfig<'c>,
    w: &'c Workload,
    sched: &'c Schedule,
    lives: &'c [Live],
    rounds: Option<&'c AtomicU32>,
    spares: &'c [Option<mpsc::SyncSender<Box<IntervalStats>>>],
    step_stop: &'c AtomicBool,
    obs: &'o mut dyn StepObserver,
    rec: StepRecord,
    nthreads: usize,
    /// CPU readings at the boundaries of the intervals not yet handed on (boundary k starts
    /// interval k): only those in flight are held, so that a day-long step's memory does not
    /// depend on its length (issue 21).
    cpu: BTreeMap<u32, Option<CpuTimes>>,
    /// `/proc/diskstats` at the same boundaries, where a target has a block device.
    disks: BTreeMap<u32, Option<String>>,
    /// Each target's block device (its kernel name), in the host's order; None: none known.
    devices: Vec<Option<String>>,
    next_cpu: u32,
    /// Per interval: which threads reported it, and their stats merged.
    pending: BTreeMap<u32, (Vec<bool>, IntervalStats)>,
    /// Intervals handed on to the observer so far (in `rec` too, unless this is an agent's step).
    handed: u32,
    /// Per thread: it said Done (or Failed), or it was given up; and whether it was given up.
    finished: Vec<bool>,
    given_up: Vec<bool>,
    failure: Option<String>,
    tail: worker::Tail,
    /// Some thread saw its last I/O complete without a stall past the step's end.
    completed_in_time: bool,
    /// When the threads stopped issuing (ns since t0) and whether that was a stop before the
    /// step's end.
    ended: Option<(u64, bool)>,
    /// When the coordinator first saw the step told to stop (Ctrl-C, an abort), in ns since t0.
    stop_seen: Option<u64>,
}

impl Coordination<'_, '_> {
    /// The intervals the step runs: all, or fewer once it is steady (`steady_state = "snia"`).
    fn planned(&self) -> u32 {
        self.rounds.map_or(self.w.intervals, |r| r.load(Ordering::Relaxed).min(self.w.intervals))
    }

    fn end_ns(&self) -> u64 {
        self.sched.boundary_ns(self.planned())
    }

    fn all_done(&self) -> bool {
        self.finished.iter().all(|&f| f)
    }

    /// When to wake next at the latest: the next interval boundary's CPU reading or the next
    /// progress tick.
    fn wake(&self, next_tick: Instant) -> Instant {
        let t0 = self.sched.t0;
        let cpu_at =
            (self.next_cpu <= self.planned()).then(|| t0 + Duration::from_nanos(self.sched.boundary_ns(self.next_cpu)));
        cpu_at.map_or(next_tick, |c| c.min(next_tick))
    }

    /// A message of I/O thread `ti`.
    fn take(&mut self, ti: usize, m: Msg) {
        match m {
            Msg::Interval { index, mut stats } => {
                let n = self.nthreads;
                let e = self.pending.entry(index).or_insert_with(|| (vec![false; n], IntervalStats::default()));
                e.0[ti] = true;
                e.1.merge(&stats);
                // Emptied here, not on the I/O thread, which takes it at a later boundary.
                if let Some(Some(tx)) = self.spares.get(ti) {
                    stats.reset();
                    let _ = tx.try_send(stats);
                }
            }
            Msg::Drained(t) => {
                let tail = &mut self.tail;
                tail.read.merge(&t.read);
                tail.write.merge(&t.write);
                tail.trim.merge(&t.trim);
                tail.drain.merge(&t.drain);
                tail.unmeasured_errors.merge(&t.unmeasured_errors);
                // Per thread, the stall it saw past the end; the host stalled only while no
                // thread saw a completion (as `IntervalStats::merge`): the shortest.
                tail.gap_ns = min_gap(tail.gap_ns, t.gap_ns);
                if let Some(r) = &t.rate {
                    tail.rate.get_or_insert_with(Default::default).merge(r);
                }
                self.completed_in_time |= t.gap_ns.is_none();
            }
            Msg::Done => self.finished[ti] = true,
            Msg::Failed(e) => {
                self.finished[ti] = true;
                self.failure.get_or_insert(format!("I/O thread {ti}: {e}"));
                self.step_stop.store(true, Ordering::Relaxed);
            }
        }
    }

    /// The clock moved on to `now`: the end or stop of the step, the CPU at the boundaries
    /// passed, and threads still out long after their deadline for outstanding I/Os (blocked
    /// in the kernel: their I/Os count as stuck and the step goes on without them).
    fn tick(&mut self, now: Instant) {
        if self.cfg.stop.load(Ordering::Relaxed) {
            self.step_stop.store(true, Ordering::Relaxed);
        }
        let t0 = self.sched.t0;
        let now_ns = now.duration_since(t0).as_nanos() as u64;
        let stopping = self.step_stop.load(Ordering::Relaxed);
        if self.ended.is_none() {
            if stopping && now_ns < self.end_ns() {
                self.ended = Some((now_ns, true));
            } else if now_ns >= self.end_ns() {
                self.ended = Some((self.end_ns(), false));
            }
        }
        while self.next_cpu <= self.planned() && now >= t0 + Duration::from_nanos(self.sched.boundary_ns(self.next_cpu))
        {
            self.cpu.insert(self.next_cpu, cpu_times());
            if self.devices.iter().any(Option::is_some) {
                self.disks.insert(self.next_cpu, crate::host::diskstats());
            }
            self.next_cpu += 1;
        }
        if self.stop_seen.is_none() && self.step_stop.load(Ordering::Relaxed) {
            self.stop_seen = Some(now_ns);
        }
        if let Some((at, stopped)) = self.ended
            && !self.all_done()
        {
            let max_lat = self.lives.iter().map(|l| l.max_lat_ns.load(Ordering::Relaxed)).max().unwrap_or(0);
            let wait = self.sched.stuck_wait_ns(stopped, max_lat);
            let mut give_up_at = at + wait + ABANDON_MARGIN_NS;
            // A Ctrl-C during the wait at the step's end cuts it short, as in the threads.
            if let Some(s) = self.stop_seen {
                give_up_at = give_up_at.min(s.max(at) + worker::STOP_WAIT_NS + ABANDON_MARGIN_NS);
            }
            if now_ns >= give_up_at {
                self.tail.drain.wait_ns = self.tail.drain.wait_ns.max(wait);
                let warmup_ns = self.sched.warmup_ns;
                abandon(self.lives, &mut self.finished, &mut self.given_up, now_ns, warmup_ns, &mut self.tail);
                if let Some(map) = &self.cfg.verify {
                    // Their claimed blocks may or may not receive the stuck writes.
                    map.forget_claimed();
                }
            }
        }
    }

    /// Hands on every interval that all threads reported, in order; the last one once every
    /// thread is done, with the latencies of the I/Os outstanding at the step's end.
    fn hand_on(&mut self) {
        let all_done = self.all_done();
        let abandoned = self.given_up.iter().filter(|&&g| g).count();
        while self.handed < self.planned() {
            let idx = self.handed;
            let last = self.planned() - 1;
            let complete = self
                .pending
                .get(&idx)
                .is_some_and(|(by, _)| by.iter().zip(&self.given_up).all(|(&reported, &gone)| reported || gone));
            // Given-up threads report no more: an interval that ended before the threads
            // stopped issuing is handed on with what the others measured (nothing at all when
            // every thread was given up: a stall from its start to its end).
            let without =
                abandoned > 0 && all_done && self.ended.is_some_and(|(at, _)| self.sched.boundary_ns(idx + 1) <= at);
            if !(complete || without) || (idx == last && !all_done) {
                break;
            }
            let mut stats = self.pending.remove(&idx).map(|p| p.1).unwrap_or_else(|| {
                let mut s = IntervalStats::with_samples(self.sched.samples_per_interval as usize);
                let since = self.lives.iter().map(|l| l.last_wake_ns.load(Ordering::Relaxed)).max().unwrap_or(0);
                s.max_gap_ns = Some(self.sched.boundary_ns(idx + 1).saturating_sub(since.max(self.sched.warmup_ns)));
                s
            });
            if idx == last {
                add_tail(&mut stats, &self.tail, !self.completed_in_time);
            }
            self.interval(idx, stats);
        }
    }

    /// What each target's block device counted over interval `idx` (from the readings at its
    /// boundaries; a reading missing at its end is taken now, as the CPU's).
    fn device_counts(&mut self, idx: u32, stats: &mut IntervalStats) {
        let Some(Some(from)) = self.disks.remove(&idx) else { return };
        let Some(to) = self.disks.get(&(idx + 1)).cloned().flatten().or_else(crate::host::diskstats) else { return };
        let (from, to) = (DeviceIo::table(&from), DeviceIo::table(&to));
        for t in &mut stats.targets {
            if let Some(Some(name)) = self.devices.get(t.target as usize)
                && let (Some(a), Some(b)) = (from.get(name), to.get(name))
            {
                t.device = Some(DeviceIo::between(a, b));
            }
        }
    }

    /// Interval `idx`, complete, to the observer (and the record).
    fn interval(&mut self, idx: u32, mut stats: IntervalStats) {
        let w = self.w;
        if let [only] = used_targets(self.w, self.cfg.targets)[..] {
            stats.fill_one_target(only);
        }
        self.device_counts(idx, &mut stats);
        let end = self.cpu.get(&(idx + 1)).copied().flatten().or_else(cpu_times);
        let usage = match (self.cpu.remove(&idx).flatten(), end) {
            (Some(a), Some(b)) => CpuUsage::between(&a, &b),
            _ => CpuUsage::default(),
        };
        self.obs.interval(idx, &stats, &usage, w.interval_s);
        self.handed += 1;
        // An agent's step keeps no record of the intervals it sent: the coordinator's store
        // keeps them, and a copy here would grow with the run for nothing (issue 21).
        if self.cfg.end.is_none() {
            self.rec.push_interval(stats, usage, w.interval_s);
        }
        if let Some(r) = self.rounds
            && self.cfg.end.is_none()
            && self.planned() == w.intervals
            && self.rec.is_steady(w.pattern == iocurve_plan::Pattern::Sequential)
        {
            // The interval running now completes, and every interval a thread has entered;
            // the step ends after them.
            crate::end::end_after(r, self.lives, idx + 2, w.intervals);
            tracing::info!(workload = %w.name, workers = self.cfg.workers, after = idx + 1, "steady state reached");
        }
    }

    fn progress(&mut self, now: Instant) {
        let elapsed = now.duration_since(self.sched.t0).as_secs_f64();
        let sum = |f: fn(&Live) -> &std::sync::atomic::AtomicU64| -> u64 {
            self.lives.iter().map(|l| f(l).load(Ordering::Relaxed)).sum()
        };
        let p = StepProgress {
            elapsed_s: elapsed,
            planned_s: self.w.step_seconds(),
            warmup: elapsed < self.w.warmup_s,
            ops: sum(|l| &l.ops),
            bytes: sum(|l| &l.bytes),
            lat_sum_ns: sum(|l| &l.lat_sum_ns),
            intervals_done: self.handed,
            inflight: sum(|l| &l.inflight),
        };
        self.obs.progress(&p);
    }
}

/// Gathers a step's intervals from its I/O threads' messages on `rx` until every thread is
/// done (or given up), and concludes its record.
#[allow(clippy::too_many_arguments)]
fn coordinate(
    cfg: &StepConfig,
    w: &Workload,
    mut rec: StepRecord,
    sched: &Schedule,
    rx: &mpsc::Receiver<(usize, Msg)>,
    spares: &[Option<mpsc::SyncSender<Box<IntervalStats>>>],
    step_stop: &AtomicBool,
    lives: &[Live],
    errors: &ErrorState,
    rounds: Option<&AtomicU32>,
    obs: &mut dyn StepObserver,
) -> Result<StepRecord, EngineError> {
    let t0 = sched.t0;
    let nthreads = rec.threads;
    rec.rate_iops = match (cfg.rate, cfg.replay) {
        (Some(r), _) => Some(r.iops),
        // A replay's mean intended rate on this host (the coordinator sets the run's).
        (None, Some(r)) => Some(r.mean_iops()),
        (None, None) => None,
    };
    // The I/O threads wake for the moment (at real-time priority in a synchronized start); this
    // thread follows a millisecond later, on a plain sleep, not to be one more woken at the
    // moment, and reports when the latest of them began.
    std::thread::sleep((t0 + Duration::from_millis(1)).saturating_duration_since(Instant::now()));
    let late_ns = latest_start(lives, t0);
    let (mono, unix) = (Instant::now(), iocurve_stats::date::unix_ns());
    let t0_unix_ns = unix - mono.saturating_duration_since(t0).as_nanos() as i64;
    rec.measured_from_unix_ns = Some(t0_unix_ns + sched.warmup_ns as i64);
    rec.started_unix_ns = Some(t0_unix_ns.saturating_add(late_ns as i64));
    rec.moment_unix_ns = Some(t0_unix_ns);
    obs.started(&rec);
    let mut c = Coordination {
        cfg,
        w,
        sched,
        lives,
        rounds,
        spares,
        step_stop,
        obs,
        rec,
        nthreads,
        cpu: BTreeMap::new(),
        disks: BTreeMap::new(),
        devices: cfg.targets.targets.iter().map(|t| t.device_queue().map(|q| q.device)).collect(),
        next_cpu: 0,
        pending: BTreeMap::new(),
        handed: 0,
        finished: vec![false; nthreads],
        given_up: vec![false; nthreads],
        failure: None,
        tail: worker::Tail::default(),
        completed_in_time: false,
        ended: None,
        stop_seen: None,
    };
    let tick = Duration::from_millis(250);
    let mut next_tick = t0 + tick;
    loop {
        let wake = c.wake(next_tick);
        match rx.recv_timeout(wake.saturating_duration_since(Instant::now())) {
            Ok((ti, m)) => c.take(ti, m),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => c.finished.iter_mut().for_each(|f| *f = true),
        }
        let now = Instant::now();
        c.tick(now);
        c.hand_on();
        if now >= next_tick || c.all_done() {
            next_tick = now + tick;
            c.progress(now);
        }
        if c.all_done() {
            break;
        }
    }
    conclude(c, errors)
}

/// The step's record once every thread is done: how it ended, its I/O threads' CPU, and the
/// notes of what happened to it (saturated threads, an abort, an overload, stopped targets,
/// threads left behind).
fn conclude(c: Coordination, errors: &ErrorState) -> Result<StepRecord, EngineError> {
    let (cfg, w, sched, lives, nthreads) = (c.cfg, c.w, c.sched, c.lives, c.nthreads);
    if let Some(f) = c.failure {
        return Err(EngineError::io(
            format!("step {} with {} workers failed", w.name, cfg.workers),
            std::io::Error::other(f),
        ));
    }
    let planned = c.planned();
    let (handed, tail, given_up) = (c.handed, c.tail, c.given_up);
    let mut rec = c.rec;
    rec.interrupted = handed < planned;
    // Each thread's share of the time between its readings at the measurement's start and at
    // the last boundary it crossed, both read when it noticed them (a thread that noticed both
    // in one wake-up, blocked in between, tells nothing).
    rec.io_cpu = IoCpu::from_shares(lives.iter().filter_map(|l| {
        let (cpu_ns, wall_ns) = l.cpu_used()?;
        (wall_ns >= sched.interval_ns / 2 && wall_ns > 0).then(|| cpu_ns as f64 / wall_ns as f64)
    }));
    // A worker that spins part of its think keeps its thread busy by design (think_spin).
    let spins = cfg.workload.think.is_some_and(|t| t.spin_ns > 0) && cfg.rate.is_none();
    if !spins && let Some(note) = saturated_note(cfg.backend, cfg.workers, rec.io_cpu, nthreads, crate::host::cores()) {
        rec.notes.push((IO_THREAD_SATURATED.into(), note));
    }
    if errors.aborted.load(Ordering::Relaxed) {
        let why = errors.abort_reason.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let why = why.unwrap_or_else(|| "on_error = abort ends the run".into());
        rec.notes.push(("aborted".into(), why.clone()));
        rec.aborted = Some(why);
    }
    rec.drain = tail.drain;
    rec.unmeasured_errors = tail.unmeasured_errors;
    if tail.rate.as_ref().is_some_and(|r| r.overloaded) {
        rec.notes.push((
            OVERLOADED.into(),
            format!(
                "overload = abort-step: an I/O was due while all {} I/Os the host may keep in flight (max_outstanding) were out; the step ended there, unsustained",
                cfg.workers
            ),
        ));
    }
    for (t, at_ns, errno) in errors.stops() {
        let when = at_ns as f64 / 1e9 - w.warmup_s;
        let when = if when < 0.0 {
            format!("in the warm-up ({:.1} s before the measurement)", -when)
        } else if when > planned as f64 * w.interval_s {
            "after the measurement, while outstanding I/Os were waited for".to_string()
        } else {
            format!("{when:.1} s into the measurement")
        };
        let why = if errno == 0 {
            "a short transfer".to_string()
        } else {
            std::io::Error::from_raw_os_error(errno).to_string()
        };
        rec.notes.push((
            "target_stopped".into(),
            format!(
                "on_error = stop-target: {} got no more I/O after {why} {when}",
                errors.paths.get(t).map_or("a target", String::as_str)
            ),
        ));
    }
    let abandoned = given_up.iter().filter(|&&g| g).count();
    if abandoned > 0 {
        // Their unfinished interval stays with them: say how much of the figures it held.
        let lost: u64 =
            lives.iter().zip(&given_up).filter(|(_, g)| **g).map(|(l, _)| l.unsent_ops.load(Ordering::Relaxed)).sum();
        rec.notes.push((
            "threads_abandoned".into(),
            format!(
                "{abandoned} of {nthreads} I/O threads were still blocked in the kernel {:.1} s after the step stopped issuing and were left behind; their I/Os count as stuck, and the {lost} I/Os they completed in the interval they were in are in no figure",
                tail.drain.wait_ns as f64 / 1e9
            ),
        ));
    }
    for (code, message) in &rec.notes {
        tracing::info!(workload = %w.name, workers = cfg.workers, code = %code, "{message}");
    }
    tracing::debug!(
        workload = %w.name,
        workers = cfg.workers,
        intervals = handed,
        late = rec.drain.late,
        stuck = rec.drain.stuck,
        "step done"
    );
    Ok(rec)
}

/// Gives up every thread that has not finished: its in-flight I/Os are stuck, as old as the
/// time since it last woke.
fn abandon(
    lives: &[Live],
    finished: &mut [bool],
    given_up: &mut [bool],
    now_ns: u64,
    warmup_ns: u64,
    tail: &mut worker::Tail,
) {
    for (i, live) in lives.iter().enumerate() {
        if finished[i] {
            continue;
        }
        live.abandoned.store(true, Ordering::Relaxed);
        finished[i] = true;
        given_up[i] = true;
        let inflight = live.inflight.load(Ordering::Relaxed);
        let writes = live.inflight_writes.load(Ordering::Relaxed).min(inflight);
        let trims = live.inflight_trims.load(Ordering::Relaxed).min(inflight - writes);
        let age = now_ns.saturating_sub(live.last_wake_ns.load(Ordering::Relaxed));
        tail.write.record_n(age, writes);
        tail.trim.record_n(age, trims);
        tail.read.record_n(age, inflight - writes - trims);
        tail.drain.stuck += inflight;
        tail.drain.stuck_age_ns = tail.drain.stuck_age_ns.max(age);
        // Nothing completed on it since it last woke.
        let since = live.last_wake_ns.load(Ordering::Relaxed).max(warmup_ns);
        tail.gap_ns = min_gap(tail.gap_ns, Some(now_ns.saturating_sub(since)));
    }
}

/// Gaps of threads of one host: it stalled only while none of them saw a completion.
fn min_gap(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The last interval of a step that ran to its end takes the latencies of the I/Os still
/// outstanding then (late: how long they took; stuck: how old they were when given up), so a
/// stall across the step's end shows in its latency figures. They are not counted as
/// operations: they did not complete in the interval.
fn add_tail(stats: &mut IntervalStats, tail: &worker::Tail, all_threads_stalled: bool) {
    stats.read.hist.merge(&tail.read);
    stats.write.hist.merge(&tail.write);
    stats.trim.hist.merge(&tail.trim);
    if all_threads_stalled && let Some(g) = tail.gap_ns {
        stats.max_gap_ns = Some(stats.max_gap_ns.unwrap_or(0).max(g));
    }
    if let Some(r) = &tail.rate {
        // The late I/Os' service time and lag, and what was due before the end but issued only
        // after it, or never.
        stats.rate.get_or_insert_with(Default::default).merge(r);
    }
    let worst = tail.read.max_ns().max(tail.write.max_ns()).max(tail.trim.max_ns());
    if let Some(s) = stats.samples.last_mut() {
        s.lat_max_ns = s.lat_max_ns.max(worst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saturated_thread_is_said_with_what_would_measure_further() {
        let busy = Some(IoCpu { busiest: 0.97, total: 0.97 });
        let note = saturated_note(Backend::IoUring, 8, busy, 1, 2).expect("flagged");
        assert!(note.contains("97 %") && note.contains("threads = 2 would measure further"), "{note}");
        let all = saturated_note(Backend::IoUring, 8, busy, 2, 2).unwrap();
        assert!(all.contains("already use every core"), "{all}");
        let cached = saturated_note(Backend::Psync, 8, busy, 8, 2).unwrap();
        assert!(cached.contains("page cache"), "{cached}");
        // The null back-end never waits; a thread that waits is no pace-setter; nothing measured.
        assert_eq!(saturated_note(Backend::Null, 8, busy, 1, 2), None);
        assert_eq!(saturated_note(Backend::IoUring, 8, Some(IoCpu { busiest: 0.89, total: 1.7 }), 2, 2), None);
        assert_eq!(saturated_note(Backend::IoUring, 8, None, 1, 2), None);
    }

    #[test]
    fn rates_between_two_progress_events() {
        let a =
            StepProgress { elapsed_s: 1.0, ops: 1000, bytes: 4_096_000, lat_sum_ns: 50_000_000, ..Default::default() };
        let b = StepProgress { elapsed_s: 1.25, ops: 1500, bytes: 6_144_000, lat_sum_ns: 80_000_000, ..a };
        let r = b.rates_since(&a).unwrap();
        assert_eq!((r.iops, r.bytes_per_second, r.latency_ns), (2000.0, 8_192_000.0, 60_000.0));
        assert_eq!(a.rates_since(&a), None, "no time passed");
        let idle = StepProgress { elapsed_s: 2.0, ..b };
        assert_eq!(idle.rates_since(&b).map(|r| (r.iops, r.latency_ns)), Some((0.0, 0.0)));
    }
}
