//! How many I/O threads a step runs when the plan leaves it to iocurve (`threads = 0`, on the
//! back-ends whose threads share the I/Os: io_uring and null).
//!
//! Fewer threads cost less CPU per I/O: one thread collects more completions per system call
//! than two each collecting half (issue 21: 512 workers at queue depth 1 on a file cost 5.4–6.0
//! CPU-µs per I/O with a thread per core, 3.6–3.9 with one, at the same IOPS). But a thread
//! that never waits for the storage sets the pace itself. So a workload starts with one thread,
//! and each later step gets as many as the threads of the step before needed, scaled to the new
//! load, with a quarter to spare; a step whose busiest thread was saturated gets one more than
//! it had. Never more than the cores (of the smallest host) nor the workers.

use iocurve_engine::step::SATURATED_SHARE;
use iocurve_stats::IoCpu;

/// Spare capacity the next step's threads get over what the last step's load needs.
const HEADROOM: f64 = 1.25;

/// The load a step puts on the threads: what they keep in flight (a closed-loop step), or
/// the I/Os per second they are asked for (a rate step).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Load {
    pub outstanding: u64,
    /// A rate step's target, or a closed-loop step's measured IOPS (0: unknown).
    pub iops: f64,
    pub rate: bool,
}

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
}

impl AutoThreads {
    pub fn new(cores: usize) -> Self {
        AutoThreads { cores: cores.max(1), last: None }
    }

    /// Starts from what an earlier workload's steps measured (a curve or SLA search after
    /// its workload: the same I/O at other rates).
    pub fn following(cores: usize, last: Option<Seen>) -> Self {
        AutoThreads { cores: cores.max(1), last }
    }

    pub fn last(&self) -> Option<Seen> {
        self.last
    }

    /// The threads for a step of `workers` workers (per host) putting `load` on them.
    pub fn next(&self, workers: u32, load: Load) -> usize {
        let cap = self.cores.min(workers.max(1) as usize);
        let Some(s) = self.last else { return 1 };
        // How much more the threads will have to do than the last time.
        let scale = match (load.rate, s.load.iops > 0.0) {
            (true, true) => load.iops / s.load.iops,
            _ if s.load.outstanding > 0 => load.outstanding as f64 / s.load.outstanding as f64,
            _ => 1.0,
        };
        let need = (s.cpu.total * scale.max(0.0) * HEADROOM).ceil();
        let mut threads = if need.is_finite() { (need as usize).max(1) } else { cap };
        if s.cpu.busiest >= SATURATED_SHARE && scale >= 1.0 {
            threads = threads.max(s.threads + 1);
        }
        threads.min(cap)
    }

    /// What a step measured: the threads it ran and the CPU they used (None: not measured,
    /// e.g. no interval completed; the last measurement stands).
    pub fn seen(&mut self, threads: usize, load: Load, cpu: Option<IoCpu>) {
        if let Some(cpu) = cpu
            && threads > 0
        {
            self.last = Some(Seen { threads, load, cpu });
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
        a.seen(1, closed(256), cpu(0.3, 0.3));
        assert_eq!(a.next(512, closed(512)), 1);
    }

    #[test]
    fn a_saturated_thread_gets_help_up_to_the_cores_and_workers() {
        let mut a = AutoThreads::new(4);
        a.seen(1, closed(1), cpu(0.99, 0.99));
        // Twice the load needs about two and a half threads' worth, but two workers no more
        // than two threads; eight times the load all four cores.
        assert_eq!(a.next(2, closed(2)), 2);
        assert_eq!(a.next(8, closed(2)), 3);
        assert_eq!(a.next(64, closed(64)), 4);
        // The same load again: one more than before.
        a.seen(2, closed(2), cpu(0.95, 1.9));
        assert_eq!(a.next(2, closed(2)), 2, "never more threads than workers");
        assert_eq!(a.next(4, closed(2)), 3);
    }

    #[test]
    fn a_rate_step_scales_by_the_rate() {
        let mut a = AutoThreads::new(8);
        a.seen(1, Load { outstanding: 64, iops: 100_000.0, rate: false }, cpu(0.5, 0.5));
        assert_eq!(a.next(64, Load { outstanding: 64, iops: 50_000.0, rate: true }), 1);
        assert_eq!(a.next(64, Load { outstanding: 64, iops: 400_000.0, rate: true }), 3);
    }

    #[test]
    fn a_step_that_measured_nothing_leaves_the_last_measurement() {
        let mut a = AutoThreads::new(8);
        a.seen(2, closed(8), cpu(0.6, 1.2));
        a.seen(2, closed(16), None);
        assert_eq!(a.next(16, closed(8)), 2);
    }

    #[test]
    fn nonsense_never_gives_zero_or_more_than_the_cap() {
        let mut a = AutoThreads::new(2);
        a.seen(1, closed(0), cpu(f64::MAX, f64::MAX));
        assert_eq!(a.next(8, closed(8)), 2);
        a.seen(1, closed(8), cpu(0.0, 0.0));
        assert_eq!(a.next(8, closed(0)), 1);
    }
}
