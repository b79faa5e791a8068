//! How many I/O threads a step runs when the plan leaves it to iocurve (`threads = 0`, on the
//! back-ends whose threads share the I/Os: io_uring and null).
//!
//! Fewer threads cost less CPU per I/O: one thread collects more completions per system call
//! than two each collecting half (issue 21: 512 workers at queue depth 1 on a file cost 5.4–6.0
//! CPU-µs per I/O with a thread per core, 3.6–3.9 with one, at the same IOPS). But a thread
//! that never waits for the storage sets the pace itself. So a workload starts with one thread,
//! and each later step gets as many as keep every thread below saturation if the CPU time the
//! threads of the step before used grew with the load (outstanding I/Os, or the rate against the
//! IOPS achieved) — but by at most twice, the step of a doubling ramp: past the storage's knee
//! the I/Os, and so the CPU, stop growing with the outstanding I/Os, and a straight-line
//! prediction from one worker to 512 would run a thread per core for a device one thread keeps
//! up with (measured: 5.0 CPU-µs per I/O at 512 workers against 3.3 with one thread). A step
//! whose busiest thread was saturated anyway gets one more than it had. Never more than the
//! cores (of the smallest host) nor the workers.
//!
//! A workload of one step runs the starting thread; a step it saturates is flagged
//! (`io_thread_saturated`), and `threads = N` sets the count. A host that does not measure its
//! threads' CPU (an agent older than this rule) gets one thread per core after the first step,
//! as before the rule.

use iocurve_engine::step::SATURATED_SHARE;
use iocurve_stats::IoCpu;

/// The most the threads' work is assumed to grow from one step to the next.
const MAX_GROWTH: f64 = 2.0;

/// The load a step puts on the threads: what they keep in flight (a closed-loop step), or
/// the I/Os per second they are asked for (a rate step).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    pub outstanding: u64,
    /// Asking for a step: a rate step's target. Told what a step measured: the IOPS it
    /// achieved (the CPU went into those, whatever the target was). 0: unknown.
    pub iops: f64,
    pub rate: bool,
}

/// The most I/O threads a step may ask an agent for.
pub const MAX_THREADS: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seen {
    threads: usize,
    load: Load,
    cpu: IoCpu,
}

/// The threads of one workload's steps (and of the rate steps that follow it).
#[derive(Clone, Debug)]
pub struct AutoThreads {
    cores: usize,
    last: Option<Seen>,
    /// A step ran intervals but its threads' CPU was not measured: one per core from then on.
    unmeasured: bool,
}

impl AutoThreads {
    pub fn new(cores: usize) -> Self {
        AutoThreads { cores: cores.max(1), last: None, unmeasured: false }
    }

    /// Starts from what an earlier workload's steps measured (a curve or SLA search after
    /// its workload: the same I/O at other rates).
    pub fn following(cores: usize, last: Option<Seen>) -> Self {
        AutoThreads { cores: cores.max(1), last, unmeasured: false }
    }

    pub fn last(&self) -> Option<Seen> {
        self.last
    }

    /// The threads for a step of `workers` workers (per host) putting `load` on them.
    pub fn next(&self, workers: u32, load: Load) -> usize {
        let cap = self.cores.min(workers.max(1) as usize).min(MAX_THREADS);
        if self.unmeasured {
            return cap;
        }
        let Some(s) = self.last else { return 1 };
        // How much more the threads will have to do than the last time.
        let scale = match (load.rate, s.load.iops > 0.0) {
            (true, true) => load.iops / s.load.iops,
            _ if s.load.outstanding > 0 => load.outstanding as f64 / s.load.outstanding as f64,
            _ => 1.0,
        };
        let need = (s.cpu.total * scale.clamp(0.0, MAX_GROWTH) / SATURATED_SHARE).ceil();
        let mut threads = if need.is_finite() { (need as usize).max(1) } else { cap };
        if s.cpu.busiest >= SATURATED_SHARE && scale >= 1.0 {
            threads = threads.max(s.threads + 1);
        }
        threads.min(cap)
    }

    /// What a step measured: the threads it ran, its load (with the IOPS it achieved), the
    /// CPU they used, and whether it completed any interval. A step without intervals leaves
    /// the last measurement standing; one with intervals but no CPU figure came from a host
    /// that does not measure it.
    pub fn seen(&mut self, threads: usize, load: Load, cpu: Option<IoCpu>, measured_intervals: bool) {
        match cpu {
            Some(cpu) if threads > 0 => self.last = Some(Seen { threads, load, cpu }),
            None if measured_intervals => self.unmeasured = true,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn closed(outstanding: u64) -> Load {
        Load { outstanding, iops: 0.0, rate: false }
    }

    fn cpu(busiest: f64, total: f64) -> Option<IoCpu> {
        Some(IoCpu { busiest, total })
    }

    #[test]
    fn a_workload_starts_with_one_thread() {
        assert_eq!(AutoThreads::new(8).next(512, closed(512)), 1);
    }

    #[test]
    fn threads_that_wait_for_the_storage_stay_one() {
        // 512 workers on a file: the thread is on a CPU a third of the time.
        let mut a = AutoThreads::new(2);
        a.seen(1, closed(256), cpu(0.3, 0.3), true);
        assert_eq!(a.next(512, closed(512)), 1);
    }

    #[test]
    fn regression_a_ramp_past_the_knee_stays_on_one_thread() {
        // Measured on a virtio disk (4k random reads, O_DIRECT): the I/Os stop growing with
        // the workers, and one thread kept up at every step (27k IOPS at 1 worker, 28 % busy;
        // 67k at 8, 27 %; 84k at 64 and 512, 31 %). A straight line from 1 to 8 workers ran
        // two threads from the second step on, at 1.5x the CPU per I/O.
        let mut a = AutoThreads::new(2);
        for (workers, iops, busy) in [(1u32, 27_000.0, 0.28), (8, 67_000.0, 0.27), (64, 84_000.0, 0.31)] {
            a.seen(1, Load { outstanding: workers as u64, iops, rate: false }, cpu(busy, busy), true);
            let next = workers * 8;
            assert_eq!(a.next(next, closed(next as u64)), 1, "after {workers} workers");
        }
    }

    #[test]
    fn a_saturated_thread_gets_help_up_to_the_cores_and_workers() {
        let mut a = AutoThreads::new(4);
        a.seen(1, closed(1), cpu(0.99, 0.99), true);
        // Twice the load needs two threads' worth and more, but two workers no more than two
        // threads; more than twice the load is taken as twice.
        assert_eq!(a.next(2, closed(2)), 2);
        assert_eq!(a.next(8, closed(2)), 3);
        assert_eq!(a.next(64, closed(64)), 3);
        // The same load again: one more than before.
        a.seen(2, closed(2), cpu(0.95, 1.9), true);
        assert_eq!(a.next(2, closed(2)), 2, "never more threads than workers");
        assert_eq!(a.next(4, closed(2)), 3);
    }

    #[test]
    fn a_rate_step_scales_by_the_rate() {
        let mut a = AutoThreads::new(8);
        a.seen(1, Load { outstanding: 64, iops: 100_000.0, rate: false }, cpu(0.5, 0.5), true);
        assert_eq!(a.next(64, Load { outstanding: 64, iops: 50_000.0, rate: true }), 1);
        assert_eq!(a.next(64, Load { outstanding: 64, iops: 180_000.0, rate: true }), 1);
        assert_eq!(a.next(64, Load { outstanding: 64, iops: 400_000.0, rate: true }), 2);
    }

    #[test]
    fn a_step_that_measured_nothing_leaves_the_last_measurement() {
        let mut a = AutoThreads::new(8);
        a.seen(2, closed(8), cpu(0.6, 1.2), true);
        a.seen(2, closed(16), None, false);
        assert_eq!(a.next(16, closed(8)), 2);
    }

    #[test]
    fn a_rate_step_scales_from_the_iops_achieved_not_the_target() {
        // Asked for 1M, achieved 300k with its one thread saturated: 1.1M is more than twice
        // the work (against 1M itself, which would be one thread's worth more).
        let mut a = AutoThreads::new(8);
        a.seen(1, Load { outstanding: 256, iops: 300_000.0, rate: true }, cpu(1.0, 1.0), true);
        assert_eq!(a.next(256, Load { outstanding: 256, iops: 1_100_000.0, rate: true }), 3);
        assert_eq!(a.next(256, Load { outstanding: 256, iops: 330_000.0, rate: true }), 2);
    }

    #[test]
    fn a_host_that_does_not_measure_gets_one_thread_per_core_after_the_first_step() {
        let mut a = AutoThreads::new(4);
        assert_eq!(a.next(64, closed(64)), 1);
        a.seen(1, closed(64), None, true);
        assert_eq!(a.next(64, closed(64)), 4);
        assert_eq!(a.next(2, closed(2)), 2);
    }

    #[test]
    fn never_more_than_an_agent_accepts() {
        let mut a = AutoThreads::new(4096);
        a.seen(1000, closed(1000), cpu(1.0, 1000.0), true);
        assert_eq!(a.next(65536, closed(65536)), MAX_THREADS);
    }

    #[test]
    fn nonsense_never_gives_zero_or_more_than_the_cap() {
        let mut a = AutoThreads::new(2);
        a.seen(1, closed(0), cpu(f64::MAX, f64::MAX), true);
        assert_eq!(a.next(8, closed(8)), 2);
        a.seen(1, closed(8), cpu(0.0, 0.0), true);
        assert_eq!(a.next(8, closed(0)), 1);
    }
}
