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

/// Runs `members` at once, each as `base` says but for its workload, workers and back-end, and
/// hands their intervals on to `out` as one step's. The first member to fail stops the others
/// (through `base.abort`) and is the step's error.
pub fn run_members(
    base: &StepConfig,
    members: &[Member],
    out: &mut (dyn StepObserver + Send),
) -> Result<StepRecord, EngineError> {
    if members.is_empty() {
        return Err(EngineError::Input("a concurrent step needs its members".into()));
    }
    let shared = Mutex::new(Combiner::new(members, out));
    let results: Vec<Result<StepRecord, EngineError>> = std::thread::scope(|s| {
        let handles: Vec<_> = members
            .iter()
            .enumerate()
            .map(|(m, member)| {
                let cfg = StepConfig {
                    workload: member.workload,
                    workers: member.workers,
                    backend: member.backend,
                    // One map and steady-state end per step, and a rate is a workload's alone:
                    // members have none (the plan refuses them).
                    verify: None,
                    journal: None,
                    rate: None,
                    end: None,
                    abort: base.abort.clone(),
                    targets: base.targets,
                    threads: base.threads,
                    stop: base.stop,
                    faults: base.faults,
                    start_at: base.start_at,
                    synchronized: base.synchronized,
                    host: base.host,
                };
                let shared = &shared;
                std::thread::Builder::new().name(format!("iocurve-member{m}")).spawn_scoped(s, move || {
                    let mut obs = MemberObserver { m, shared };
                    let r = run_step(&cfg, &mut obs);
                    if r.is_err()
                        && let Some(abort) = &base.abort
                    {
                        // The others stop at once: a concurrent step is all its members.
                        abort.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h.join().unwrap_or_else(|_| Err(EngineError::Input("a member's step panicked".into()))),
                Err(e) => Err(EngineError::io("cannot start a member of the concurrent step", e)),
            })
            .collect()
    });
    let combiner = shared.into_inner().unwrap_or_else(|p| p.into_inner());
    let handed = combiner.next;
    let mut records = Vec::new();
    for r in results {
        records.push(r?);
    }
    Ok(combine(members, records, handed))
}

/// The step's record from its members': what the agent reports of the step's end (intervals are
/// the observer's).
fn combine(members: &[Member], records: Vec<StepRecord>, handed: u32) -> StepRecord {
    let first = &records[0];
    let mut rec = StepRecord::new(
        records.iter().map(|r| r.workers).sum(),
        first.queue_depth,
        records.iter().map(|r| r.threads).sum(),
        first.interval_s,
        first.sample_s,
    );
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
    rec.measured_from_unix_ns = records.iter().filter_map(|r| r.measured_from_unix_ns).min();
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
            let mut all = StepRecord::new(
                recs.iter().map(|r| r.workers).sum(),
                recs[0].queue_depth,
                recs.iter().map(|r| r.threads).sum(),
                recs[0].interval_s,
                recs[0].sample_s,
            );
            all.measured_from_unix_ns = recs.iter().filter_map(|r| r.measured_from_unix_ns).min();
            self.out.started(&all);
        }
    }

    fn progress(&mut self, m: usize, p: &StepProgress) {
        self.progress[m] = *p;
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
