//! Who hears of a run: the terminal, live metrics (`crate::live`). Every event goes to every
//! observer in the order they were added ([`Observers`]); the results database is not one of
//! them but the runner's own recorder, which sees each event first and passes an interval on
//! only once it is stored, so that an observer never reports what was not stored.

use iocurve_analysis::{RunResult, StepResult, WorkloadResult};

use crate::events::RunEvent;
use iocurve_engine::{StepObserver, StepProgress};
use iocurve_stats::{CpuUsage, IntervalStats, StepRecord};

/// Where a step sits in the run: workload `workload_index` of `workloads` (from 1), step
/// `step_index` of `steps` (from 1).
#[derive(Clone, Copy, Debug)]
pub struct StepAt<'a> {
    pub workload: &'a str,
    pub workload_index: usize,
    pub workloads: usize,
    pub step_index: usize,
    pub steps: usize,
    pub workers: u32,
    /// Outstanding I/Os per worker, when the workload ramps them (`qd_ramp`); None: its one
    /// queue depth, told with the workload.
    pub queue_depth: Option<u32>,
    /// A host-count sweep's step: the hosts it runs on (None: all the run's).
    pub hosts: Option<u32>,
    /// A concurrent step's members, by name (empty: a workload alone).
    pub members: &'a [String],
    /// A rate step: its target rate (IOPS, or MB/s for `sequential` workloads).
    pub rate: Option<f64>,
    pub sequential: bool,
    /// A replay's step: its speed over the trace's timing (`rate` is then the trace's mean at
    /// that speed, in IOPS).
    pub replay_speed: Option<f64>,
    /// Seconds of rest taken before this step (`pause_s`; 0 for a workload's first step).
    pub rested_s: f64,
    /// The workload's block sizes and what shapes its load, in words (`4k r, 64k w`;
    /// `distribution zipf:1.2, think 1ms`).
    pub bs: &'a str,
    pub shape: &'a str,
}

/// A run's events beyond a step's own ([`StepObserver`]: started, progress, intervals,
/// warnings). Every method has a default that ignores the event.
pub trait Observer: StepObserver {
    /// What the run is doing beside its steps (preparing, preconditioning, verification,
    /// agents), as a typed value the terminal words.
    fn event(&mut self, _event: &RunEvent) {}
    /// The run is in the store as `run_id`, with its label and plan name; its steps follow.
    fn run_started(&mut self, _run_id: i64, _label: &str, _plan: &str) {}
    /// A step is about to start.
    fn step_starting(&mut self, _at: &StepAt) {}
    /// A step ended and was analysed; `planned_s` is its planned duration.
    fn step_finished(&mut self, _planned_s: f64, _step: &StepResult) {}
    /// A workload's steps are done, its speed, optimum and maximum found.
    fn workload_finished(&mut self, _workload: &WorkloadResult) {}
    /// The run's result, as stored and as `--json` writes it (before a final verification pass).
    fn run_finished(&mut self, _result: &RunResult) {}
    /// Why this observer could not deliver what it was given (a closed standard output), once
    /// known: the runner notes it in the step that was running.
    fn lost(&self) -> Option<String> {
        None
    }
}

/// Every observer of a run, in order: each event goes to all.
#[derive(Default)]
pub struct Observers<'a>(Vec<&'a mut dyn Observer>);

impl<'a> Observers<'a> {
    pub fn push(&mut self, o: &'a mut dyn Observer) {
        self.0.push(o);
    }
}

impl StepObserver for Observers<'_> {
    fn started(&mut self, rec: &StepRecord) {
        self.0.iter_mut().for_each(|o| o.started(rec));
    }
    fn progress(&mut self, p: &StepProgress) {
        self.0.iter_mut().for_each(|o| o.progress(p));
    }
    fn warning(&mut self, message: &str) {
        self.0.iter_mut().for_each(|o| o.warning(message));
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
        self.0.iter_mut().for_each(|o| o.host_started(host, address, hostname, started_unix_ns, threads, workers));
    }
    fn host_interval(&mut self, host: u32, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        self.0.iter_mut().for_each(|o| o.host_interval(host, index, stats, cpu, duration_s));
    }
    fn host_summary(&mut self, host: u32, row: &iocurve_stats::HostRecord) {
        self.0.iter_mut().for_each(|o| o.host_summary(host, row));
    }
    fn interval(&mut self, index: u32, stats: &IntervalStats, cpu: &CpuUsage, duration_s: f64) {
        self.0.iter_mut().for_each(|o| o.interval(index, stats, cpu, duration_s));
    }
}

impl Observer for Observers<'_> {
    fn event(&mut self, event: &RunEvent) {
        self.0.iter_mut().for_each(|o| o.event(event));
    }
    fn run_started(&mut self, run_id: i64, label: &str, plan: &str) {
        self.0.iter_mut().for_each(|o| o.run_started(run_id, label, plan));
    }
    fn step_starting(&mut self, at: &StepAt) {
        self.0.iter_mut().for_each(|o| o.step_starting(at));
    }
    fn step_finished(&mut self, planned_s: f64, step: &StepResult) {
        self.0.iter_mut().for_each(|o| o.step_finished(planned_s, step));
    }
    fn workload_finished(&mut self, workload: &WorkloadResult) {
        self.0.iter_mut().for_each(|o| o.workload_finished(workload));
    }
    fn run_finished(&mut self, result: &RunResult) {
        self.0.iter_mut().for_each(|o| o.run_finished(result));
    }
    fn lost(&self) -> Option<String> {
        self.0.iter().find_map(|o| o.lost())
    }
}
