//! A concurrent step (issue 41): several workloads at one time on one host, each a step of its
//! own (its I/O threads, its workers, its targets) started at the same moment, their intervals
//! handed on as one — each member's stats inside the interval (`IntervalStats::members`), their
//! sum as the step's. Members share the step's timing (the plan checks it), so interval `i` of
//! every member covers the same seconds; an interval is handed on once every member finished
//! it, in order.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;

use iocurve_plan::{Backend, Workload};
use iocurve_stats::{CpuUsage, IntervalStats, IoCpu, StepProgress, StepRecord};

use crate::EngineError;
use crate::step::{StepConfig, StepObserver, run_step};

/// One member of a concurrent step: its workload, its workers on this host, its back-end (after
/// any fallback).
pub struct Member<'a> {
    pub workload: &'a Workload,
    pub workers: u32,
    pub backend: Backend,
}

/// Runs `members` at once, each as `base` says but for its workload, workers, threads and
/// back-end, and hands their intervals on to `out` as one step's. The members meet before they
/// start (every one's threads set up), then wait for the step's start moment together. The
/// first member to fail, or whose error policy ends it, stops the others (through
/// `base.abort`), and its error is the step's.
pub fn run_members(
    base: &StepConfig,
    members: &[Member],
    out: &mut (dyn StepObserver + Send),
) -> Result<StepRecord, EngineError> {
    if members.is_empty() {
        return Err(EngineError::Input("a concurrent step needs its members".into()));
    }
    let all: Vec<(&Workload, u32, Backend)> = members.iter().map(|m| (m.workload, m.workers, m.backend)).collect();
    crate::budget::check_members(&all)?;
    let shared = Mutex::new(Combiner::new(members, out));
    let gate = Meeting::new(members.len());
    let stop_others = || {
        if let Some(abort) = &base.abort {
            abort.store(true, Ordering::Relaxed);
        }
    };
    let results: Vec<Result<StepRecord, EngineError>> = std::thread::scope(|s| {
        let handles: Vec<_> = members
            .iter()
            .enumerate()
            .map(|(m, member)| {
                let (shared, gate, stop_others) = (&shared, &gate, &stop_others);
                std::thread::Builder::new()
                    .name(format!("iocurve-member{m}"))
                    .spawn_scoped(s, move || run_member(base, member, m, shared, gate, stop_others))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|_| {
                    Err(EngineError::io(
                        "a member of the concurrent step",
                        std::io::Error::other("its thread panicked"),
                    ))
                }),
                Err(e) => {
                    // The others would wait at the meeting for it.
                    gate.leave();
                    stop_others();
                    Err(EngineError::io("cannot start a member of the concurrent step", e))
                }
            })
            .collect()
    });
    let handed = shared.into_inner().unwrap_or_else(|p| p.into_inner()).next;
    if results.iter().any(Result::is_err) {
        // The step's error: a member's own, not another's calling off that followed it.
        let mut errs: Vec<EngineError> = results.into_iter().filter_map(Result::err).collect();
        let own = errs.iter().position(|e| !e.to_string().contains(CALLED_OFF)).unwrap_or(0);
        return Err(errs.swap_remove(own));
    }
    let records: Vec<StepRecord> = results.into_iter().filter_map(Result::ok).collect();
    Ok(combine(members, records, handed))
}

/// One member's step, on its own thread.
fn run_member(
    base: &StepConfig,
    member: &Member,
    m: usize,
    shared: &Mutex<Combiner>,
    gate: &Meeting,
    stop_others: &(dyn Fn() + Sync),
) -> Result<StepRecord, EngineError> {
    let start = || {
        if !gate.arrive() {
            return None;
        }
        base.start_at.map_or_else(|| Some(std::time::Instant::now()), |f| f())
    };
    let cfg = StepConfig {
        workload: member.workload,
        workers: member.workers,
        backend: member.backend,
        // Its own threads where it names them (0: the host's choice).
        threads: if member.workload.threads == 0 { base.threads } else { member.workload.threads as usize },
        start_at: Some(&start),
        // One map and steady-state end per step, and a rate is a workload's alone: members
        // have none (the plan refuses them).
        verify: None,
        journal: None,
        rate: None,
        replay: None,
        end: None,
        // Every member's I/Os in the step's one log (the same targets, the same start).
        iolog: base.iolog.clone(),
        abort: base.abort.clone(),
        targets: base.targets,
        stop: base.stop,
        faults: base.faults,
        synchronized: base.synchronized,
        host: base.host,
    };
    let mut obs = MemberObserver { m, shared };
    let r = run_step(&cfg, &mut obs);
    // One that never came to the meeting (it failed setting up) calls it off.
    gate.leave();
    // The others stop at once when one fails or its error policy ends it: a concurrent step
    // is all its members.
    if r.as_ref().map_or(true, |rec| rec.aborted.is_some()) {
        stop_others();
    }
    r
}

/// What the engine says of a step called off before it started (`step.rs`).
const CALLED_OFF: &str = "called off before it started";

/// Where the members meet before they start: each arrives once its threads are set up; all go
/// when every one has arrived, none when one left without arriving (it failed setting up).
struct Meeting {
    /// Members arrived, and whether one went without arriving.
    state: std::sync::Mutex<(usize, bool)>,
    all: std::sync::Condvar,
    n: usize,
}

impl Meeting {
    fn new(n: usize) -> Self {
        Meeting { state: std::sync::Mutex::new((0, false)), all: std::sync::Condvar::new(), n }
    }

    /// Waits for every member; false: one will never come.
    fn arrive(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.0 += 1;
        self.all.notify_all();
        while s.0 < self.n && !s.1 {
            s = self.all.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.0 >= self.n
    }

    /// A member's step is over: one that never arrived calls the meeting off for those still
    /// waiting.
    fn leave(&self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.0 < self.n {
            s.1 = true;
            self.all.notify_all();
        }
    }
}

/// The step's record from its members': what the agent reports of the step's end (intervals are
/// the observer's).
fn combine(members: &[Member], records: Vec<StepRecord>, handed: u32) -> StepRecord {
    let mut rec = together(&records.iter().collect::<Vec<_>>());
    rec.measured = handed as usize;
    // Cut short when a member was, or when a member measured intervals another did not.
    rec.interrupted = records.iter().any(|r| r.interrupted || r.measured > handed as usize);
    for (m, r) in members.iter().zip(&records) {
        rec.drain.merge(&r.drain);
        rec.unmeasured_errors.merge(&r.unmeasured_errors);
        if rec.aborted.is_none() {
            rec.aborted.clone_from(&r.aborted);
        }
        for (code, message) in &r.notes {
            rec.notes.push((code.clone(), format!("{}: {message}", m.workload.name)));
        }
    }
    rec.io_cpu = records
        .iter()
        .filter_map(|r| r.io_cpu)
        .reduce(|a, b| IoCpu { busiest: a.busiest.max(b.busiest), total: a.total + b.total });
    rec
}

/// The members' records as one step's, with no interval yet: their workers and threads
/// together, the first's depth and timing (which they share), measured from the earliest.
fn together(recs: &[&StepRecord]) -> StepRecord {
    let first = recs[0];
    let mut rec = StepRecord::new(
        recs.iter().map(|r| r.workers).sum(),
        first.queue_depth,
        recs.iter().map(|r| r.threads).sum(),
        first.interval_s,
        first.sample_s,
    );
    rec.measured_from_unix_ns = recs.iter().filter_map(|r| r.measured_from_unix_ns).min();
    // The step began on this host once its last member's threads had.
    rec.started_unix_ns = recs.iter().filter_map(|r| r.started_unix_ns).max();
    rec.moment_unix_ns = recs.iter().filter_map(|r| r.moment_unix_ns).min();
    rec
}

/// A member's interval: its stats, the host's CPU, its duration.
type Part = (IntervalStats, CpuUsage, f64);

/// What the members' steps told so far, and what was handed on.
struct Combiner<'o> {
    out: &'o mut (dyn StepObserver + Send),
    names: Vec<String>,
    started: Vec<Option<StepRecord>>,
    progress: Vec<StepProgress>,
    /// Intervals some members finished and others not yet: by index, per member.
    pending: BTreeMap<u32, Vec<Option<Part>>>,
    /// The next interval to hand on.
    next: u32,
}

impl<'o> Combiner<'o> {
    fn new(members: &[Member], out: &'o mut (dyn StepObserver + Send)) -> Self {
        let n = members.len();
        Combiner {
            out,
            names: members.iter().map(|m| m.workload.name.clone()).collect(),
            started: vec![None; n],
            progress: vec![StepProgress::default(); n],
            pending: BTreeMap::new(),
            next: 0,
        }
    }

    fn started(&mut self, m: usize, rec: &StepRecord) {
        self.started[m] = Some(rec.clone());
        if self.started.iter().all(Option::is_some) {
            let recs: Vec<&StepRecord> = self.started.iter().flatten().collect();
            self.out.started(&together(&recs));
        }
    }

    fn progress(&mut self, m: usize, p: &StepProgress) {
        self.progress[m] = *p;
        // Said once the step has started (every member): an observer hears of a step's start
        // before its progress.
        if !self.started.iter().all(Option::is_some) {
            return;
        }
        let mut all = StepProgress { intervals_done: u32::MAX, ..Default::default() };
        for q in &self.progress {
            all.elapsed_s = all.elapsed_s.max(q.elapsed_s);
            all.planned_s = all.planned_s.max(q.planned_s);
            all.warmup |= q.warmup;
            all.ops += q.ops;
            all.bytes += q.bytes;
            all.lat_sum_ns += q.lat_sum_ns;
            all.inflight += q.inflight;
            all.intervals_done = all.intervals_done.min(q.intervals_done);
        }
        self.out.progress(&all);
    }

    fn interval(&mut self, m: usize, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        if index < self.next {
            return;
        }
        let n = self.names.len();
        self.pending.entry(index).or_insert_with(|| vec![None; n])[m] = Some((stats.clone(), *cpu, duration_s));
        // In order, each once every member has it.
        while let Some(parts) = self.pending.get(&self.next)
            && parts.iter().all(Option::is_some)
        {
            let parts = self.pending.remove(&self.next).unwrap_or_default();
            let (mut cpu, mut duration_s) = (CpuUsage::default(), 0.0);
            let mut members = Vec::with_capacity(n);
            for (stats, c, d) in parts.into_iter().flatten() {
                // One host's CPU, read by each member at the same boundary: the first's.
                if members.is_empty() {
                    cpu = c;
                }
                duration_s = f64::max(duration_s, d);
                members.push(stats);
            }
            let total = IntervalStats::of_members(members);
            self.out.interval(self.next, &total, &cpu, duration_s);
            self.next += 1;
        }
    }
}

/// A member's step, telling the combiner.
struct MemberObserver<'s, 'o> {
    m: usize,
    shared: &'s Mutex<Combiner<'o>>,
}

impl MemberObserver<'_, '_> {
    fn with(&self, f: impl FnOnce(&mut Combiner)) {
        f(&mut self.shared.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

impl StepObserver for MemberObserver<'_, '_> {
    fn started(&mut self, rec: &StepRecord) {
        self.with(|c| c.started(self.m, rec));
    }
    fn progress(&mut self, p: &StepProgress) {
        self.with(|c| c.progress(self.m, p));
    }
    fn interval(&mut self, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        self.with(|c| c.interval(self.m, index, stats, cpu, duration_s));
    }
    fn warning(&mut self, message: &str) {
        self.with(|c| {
            let message = format!("{}: {message}", c.names[self.m]);
            c.out.warning(&message);
        });
    }
}
