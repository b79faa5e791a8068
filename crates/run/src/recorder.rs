//! The results database as a step's first observer: every interval is stored as it comes, before
//! the observers hear of it and before the next one starts, so that a killed run keeps what it
//! measured. (The verification map is saved at every interval end by the step itself, on the
//! agent that runs it, after a flush of the targets: `iocurve_engine::keeper`.)

use iocurve_engine::{StepObserver, StepProgress};
use iocurve_stats::{CpuUsage, IntervalStats, StepRecord};
use iocurve_store::{Store, StoreError};

use crate::Observers;

pub(crate) struct Recorder<'a, 'o> {
    /// Marks from `iocurve mark`, stored already: the observers hear of them at each tick.
    pub marks: Option<&'a crate::marks::MarkEndpoint>,
    pub observers: &'a mut Observers<'o>,
    pub store: &'a mut Store,
    pub workload_id: i64,
    pub step_idx: usize,
    pub step_id: Option<i64>,
    /// A concurrent step's members: each a step of its own workload in the store, its
    /// intervals those the step's carry (`IntervalStats::members`).
    pub members: Vec<MemberStep>,
    /// The first store error; the run stops after the step.
    pub error: Option<StoreError>,
}

/// A member of a concurrent step as its step is stored: its workload's row, its step's row once
/// begun, its record (the stored intervals' totals, as the step's own).
pub(crate) struct MemberStep {
    pub workload_id: i64,
    pub step_id: Option<i64>,
    pub rec: StepRecord,
}

impl Recorder<'_, '_> {
    /// Whether what the step measured so far is in the store: the observers hear of an interval
    /// only then (a database that filled up mid-step stops the run after the step; live
    /// metrics must not count what it does not hold).
    fn stored(&self) -> bool {
        self.step_id.is_some() && self.error.is_none()
    }
}

impl StepObserver for Recorder<'_, '_> {
    fn started(&mut self, rec: &StepRecord) {
        match self.store.begin_step(self.workload_id, self.step_idx, rec) {
            Ok(id) => self.step_id = Some(id),
            Err(e) => self.error = self.error.take().or(Some(e)),
        }
        for m in &mut self.members {
            // Its own workers and depth; the step's threads, hosts, timing and start.
            let mut own = StepRecord::new(m.rec.workers, m.rec.queue_depth, rec.threads, rec.interval_s, rec.sample_s);
            (own.hosts, own.planned_hosts, own.measured_from_unix_ns) =
                (rec.hosts, rec.planned_hosts, rec.measured_from_unix_ns);
            // Its hosts' shares together, where uneven.
            own.outstanding = m.rec.outstanding;
            m.rec = own;
            if self.error.is_none() {
                match self.store.begin_step(m.workload_id, self.step_idx, &m.rec) {
                    Ok(id) => m.step_id = Some(id),
                    Err(e) => self.error = Some(e),
                }
            }
        }
        self.observers.started(rec);
    }

    fn progress(&mut self, p: &StepProgress) {
        for (mark, after_start_s) in self.marks.map(|m| m.drain()).unwrap_or_default() {
            crate::Observer::event(self.observers, &crate::RunEvent::Mark { mark, after_start_s });
        }
        self.observers.progress(p);
    }

    fn warning(&mut self, message: &str) {
        self.observers.warning(message);
    }

    fn host_started(
        &mut self,
        host: u32,
        address: &str,
        hostname: &str,
        started_unix_ns: i64,
        threads: usize,
        workers: u32,
    ) {
        if let (Some(step), None) = (self.step_id, &self.error)
            && let Err(e) = self.store.add_step_host(step, host, address, hostname, started_unix_ns, (threads, workers))
        {
            self.error = Some(e);
        }
        if self.stored() {
            self.observers.host_started(host, address, hostname, started_unix_ns, threads, workers);
        }
    }

    fn host_interval(&mut self, host: u32, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        if let (Some(step), None) = (self.step_id, &self.error)
            && let Err(e) = self.store.add_interval(step, Some(host), index, stats, cpu, duration_s)
        {
            self.error = Some(e);
        }
        if self.stored() {
            self.observers.host_interval(host, index, stats, cpu, duration_s);
        }
    }

    /// A host's row of a step through relays: its row in `step_hosts` and its one interval, the
    /// step summed up (none for a host that measured nothing).
    fn host_summary(&mut self, host: u32, row: &iocurve_stats::HostRecord) {
        let r = &row.record;
        let threads_workers = (r.threads, r.workers);
        if let (Some(step), None) = (self.step_id, &self.error) {
            let stored = self
                .store
                .add_step_host(step, host, &row.address, &row.hostname, row.started_unix_ns, threads_workers)
                .and_then(|()| match r.intervals.first() {
                    Some(i) => self.store.add_interval(step, Some(host), 0, &r.total, &i.cpu, i.duration_s),
                    None => Ok(()),
                });
            if let Err(e) = stored {
                self.error = Some(e);
            }
        }
        if self.stored() {
            self.observers.host_summary(host, row);
        }
    }

    fn interval(&mut self, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        if let (Some(step), None) = (self.step_id, &self.error)
            && let Err(e) = self.store.add_interval(step, None, index, stats, cpu, duration_s)
        {
            self.error = Some(e);
        }
        // Each member's part, stored as its own step's interval (before the next one starts).
        for (m, part) in self.members.iter_mut().zip(&stats.members) {
            if let (Some(step), None) = (m.step_id, &self.error)
                && let Err(e) = self.store.add_interval(step, None, index, part, cpu, duration_s)
            {
                self.error = Some(e);
            }
            if self.error.is_none() {
                m.rec.count_interval(part.clone(), *cpu, duration_s);
            }
        }
        if self.stored() {
            self.observers.interval(index, stats, cpu, duration_s);
        }
    }
}
