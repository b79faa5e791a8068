//! The results database as a step's first observer: every interval is stored as it comes, before
//! the observers hear of it and before the next one starts, so that a killed run keeps what it
//! measured. (The verification map is saved at every interval end by the step itself, on the
//! agent that runs it, after a flush of the targets: `iocurve_engine::keeper`.)

use iocurve_engine::{StepObserver, StepProgress};
use iocurve_stats::{CpuUsage, IntervalStats, StepRecord};
use iocurve_store::{Store, StoreError};

use crate::Observers;

pub(crate) struct Recorder<'a, 'o> {
    pub observers: &'a mut Observers<'o>,
    pub store: &'a mut Store,
    pub workload_id: i64,
    pub step_idx: usize,
    pub step_id: Option<i64>,
    /// The first store error; the run stops after the step.
    pub error: Option<StoreError>,
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
        self.observers.started(rec);
    }

    fn progress(&mut self, p: &StepProgress) {
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

    fn interval(&mut self, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        if let (Some(step), None) = (self.step_id, &self.error)
            && let Err(e) = self.store.add_interval(step, None, index, stats, cpu, duration_s)
        {
            self.error = Some(e);
        }
        if self.stored() {
            self.observers.interval(index, stats, cpu, duration_s);
        }
    }
}
