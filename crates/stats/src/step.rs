//! What one step measured, as the engine hands it to the analysis: pure data.
//!
//! Interval histograms are merged into the step's total as intervals finish, and each interval
//! keeps only its figures and samples: a step's memory does not grow with its interval count.

use crate::{CpuUsage, ErrorCounts, IntervalStats, Sample};

/// One finished interval: its figures and per-second samples, without histograms.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRecord {
    pub ops: u64,
    pub bytes: u64,
    /// Mean latency of the interval's I/Os, in ns.
    pub lat_mean_ns: f64,
    pub samples: Vec<Sample>,
    /// Each sample's latency histogram (issue 44), sparse: as many as `samples`, or none where
    /// not known (steps stored before v28, an older agent's).
    pub seconds: Vec<crate::SecondHist>,
    /// Host CPU over the interval.
    pub cpu: CpuUsage,
    pub duration_s: f64,
    /// Longest time without a completion, in ns (see [`IntervalStats::max_gap_ns`]).
    pub max_gap_ns: u64,
    pub faults_injected: u64,
    /// Each target's figures (issue 42), sorted by target; empty where not known.
    pub targets: Vec<TargetFigures>,
    /// A rate step's p99 lag (submission − intended time) in ns: when a replay fell behind its
    /// trace (issue 45). None: a closed-loop step.
    pub lag_p99_ns: Option<u64>,
}

/// One target's figures of a finished interval (without its histogram).
#[derive(Debug, Clone, PartialEq)]
pub struct TargetFigures {
    pub target: u32,
    pub ops: u64,
    pub bytes: u64,
    pub lat_mean_ns: f64,
    pub errors: u64,
    pub samples: Vec<Sample>,
    pub device: Option<crate::DeviceIo>,
}

impl TargetFigures {
    pub fn of(t: &crate::TargetStats) -> TargetFigures {
        TargetFigures {
            target: t.target,
            ops: t.ops(),
            bytes: t.bytes(),
            lat_mean_ns: t.hist.mean_ns(),
            errors: t.errors,
            samples: t.samples.clone(),
            device: t.device,
        }
    }
}

impl IntervalRecord {
    /// The figures of a finished interval (its histograms are not kept).
    pub fn of(stats: IntervalStats, cpu: CpuUsage, duration_s: f64) -> Self {
        IntervalRecord {
            ops: stats.ops(),
            bytes: stats.bytes(),
            lat_mean_ns: stats.lat_mean_ns(),
            max_gap_ns: stats.max_gap_ns.unwrap_or(0),
            faults_injected: stats.faults_injected,
            targets: stats.targets.iter().map(TargetFigures::of).collect(),
            seconds: if stats.seconds.seconds() == 0 { Vec::new() } else { stats.seconds.to_sparse() },
            lag_p99_ns: stats.rate.as_ref().map(|r| r.lag.percentile_ns(99.0)),
            samples: stats.samples,
            cpu,
            duration_s,
        }
    }

    /// Its throughput: I/Os per second, or bytes per second for a sequential workload (the
    /// value the SNIA steady-state rule tracks per round).
    pub fn throughput(&self, sequential: bool) -> f64 {
        (if sequential { self.bytes } else { self.ops }) as f64 / self.duration_s.max(1e-9)
    }
}

#[derive(Debug, Clone)]
pub struct StepRecord {
    /// Workers per host.
    pub workers: u32,
    /// Hosts that ran the step together (1 for a local run).
    pub hosts: u32,
    /// Hosts the step was planned on: every host the run started its steps with. More than
    /// `hosts` when a host was lost earlier in the run (or before this step started): such a
    /// step is not comparable with the steps on all of them.
    pub planned_hosts: u32,
    pub queue_depth: u32,
    /// I/O threads that ran the step.
    pub threads: usize,
    pub interval_s: f64,
    /// Length of one sample (1 s, or the interval when shorter).
    pub sample_s: f64,
    /// Complete intervals only, in order: all of them, or for a live step that stores its
    /// intervals as they come ([`StepRecord::count_interval`]) only the last
    /// [`crate::steady::WINDOW`], until the store gives the list back at the step's end.
    pub intervals: Vec<IntervalRecord>,
    /// How many complete intervals the step measured, held in `intervals` or not.
    pub measured: usize,
    /// All complete intervals merged: histograms, counters and errors (no samples).
    pub total: IntervalStats,
    /// Stopped before all planned intervals ran.
    pub interrupted: bool,
    /// The step's error policy ended it (`on_error = abort`): why. The run ends after it.
    pub aborted: Option<String>,
    /// What happened around the measurement that the figures cannot tell, as (code, message):
    /// e.g. an agent lost mid-step. The analysis shows them as flags.
    pub notes: Vec<(String, String)>,
    /// A multi-host step: what each host measured on its own (its intervals are the parts the
    /// step's own intervals were merged from). Empty for a local run.
    pub per_host: Vec<HostRecord>,
    /// What became of the I/Os still outstanding when the step stopped issuing.
    pub drain: Drain,
    /// Errors of I/Os that completed outside the measured intervals (the warm-up, or after the
    /// step stopped issuing): in no interval's figures, counted here.
    pub unmeasured_errors: ErrorCounts,
    /// A rate step: the IOPS the whole run (every host) was driven at. None: closed loop.
    pub rate_iops: Option<f64>,
    /// A replay step: the speed its trace was played at (1 = its own timing); `rate_iops` is
    /// then the trace's mean rate at that speed.
    pub replay_speed: Option<f64>,
    /// A replay step: the I/Os its trace had due in each bin of `replay_bin_s` seconds from the
    /// measurement's start (every host together), for the timeline of intended against
    /// completed I/Os.
    pub replay_intended: Vec<u64>,
    pub replay_bin_s: f64,
    /// When the measured intervals began (the end of the warm-up), in ns since the Unix epoch
    /// on the coordinator's clock: samples and intervals are timed from it. None for steps
    /// stored before iocurve kept it.
    pub measured_from_unix_ns: Option<i64>,
    /// When this host's latest I/O thread woke to begin the step, Unix ns on its own clock: a
    /// multi-host step's start spread is measured from it. None: not a step the engine ran
    /// (a merged record, one read back).
    pub started_unix_ns: Option<i64>,
    /// The step's start moment on this host (Unix ns, its own clock): its schedule's zero, from
    /// which the warm-up, the intervals and the I/O log's times count. None as above.
    pub moment_unix_ns: Option<i64>,
    /// CPU the I/O threads used over the measured intervals. None: not measured (steps stored
    /// before iocurve measured it, a step with no measured interval).
    pub io_cpu: Option<crate::IoCpu>,
    /// The I/Os kept in flight on all hosts together where not `workers` × `queue_depth` on
    /// each (a concurrent step's member on uneven hosts: each host its share). None: that.
    pub outstanding: Option<u64>,
}

/// The I/Os a step still had outstanding when it stopped issuing (at its end, on Ctrl-C or on
/// an abort). Those that complete within the wait are `late`; the others are `stuck`: given up
/// (cancelled, or their thread abandoned) after the wait. A step that ran to its end adds the
/// latency of every late I/O, and the age of every stuck one, to its last interval's latency
/// figures — a stall across the step's end can never make latency look better.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Drain {
    /// Completed within the wait.
    pub late: u64,
    /// Still outstanding when the wait ended.
    pub stuck: u64,
    /// Age of the oldest stuck I/O when it was given up, in ns.
    pub stuck_age_ns: u64,
    /// How long outstanding I/Os were waited for at most, in ns.
    pub wait_ns: u64,
    /// I/Os a fault changed that completed in no measured interval (after the step stopped
    /// issuing, or in an interval a stop dropped): the step's count includes them, so a
    /// dropped write the verification finds is always an injected one.
    pub faults_injected: u64,
}

impl Drain {
    /// Threads or hosts of one step: counts add up, the oldest age and the wait are the largest.
    pub fn merge(&mut self, o: &Drain) {
        self.late = self.late.saturating_add(o.late);
        self.stuck = self.stuck.saturating_add(o.stuck);
        self.stuck_age_ns = self.stuck_age_ns.max(o.stuck_age_ns);
        self.wait_ns = self.wait_ns.max(o.wait_ns);
        self.faults_injected = self.faults_injected.saturating_add(o.faults_injected);
    }
}

/// One host's part of a multi-host step.
#[derive(Debug, Clone)]
pub struct HostRecord {
    /// The agent's address as given (`host:port`).
    pub address: String,
    pub hostname: String,
    /// When its I/O started, on the coordinator's clock (Unix ns).
    pub started_unix_ns: i64,
    /// Seconds into the step when the coordinator lost it; None when it finished the step.
    pub lost_at_s: Option<f64>,
    /// Its clock, measured just before the step and again after it.
    pub clock: HostClock,
    pub record: StepRecord,
}

/// An agent's clock as the coordinator measured it around a step: its offset (agent minus
/// coordinator) right before the step, the round trip of that measurement (the offset is
/// sure to within half of it), and the offset measured again after the step — the two differ
/// when the agent's clock moved meanwhile (a step, or a drift), which no start time the agent
/// reports can show by itself.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostClock {
    pub offset_ns: i64,
    pub rtt_ns: i64,
    pub offset_after_ns: Option<i64>,
    /// The round trip of the measurement after the step.
    pub rtt_after_ns: i64,
}

impl HostClock {
    /// How far the agent's clock moved against the coordinator's during the step, beyond what
    /// the two measurements are sure of (each to half its round trip; ns; 0 within that or when
    /// not measured).
    pub fn moved_ns(&self) -> i64 {
        self.offset_after_ns.map_or(0, |after| {
            let d = after.saturating_sub(self.offset_ns);
            let unsure = self.rtt_ns.max(0) / 2 + self.rtt_after_ns.max(0) / 2;
            let sure = d.saturating_abs().saturating_sub(unsure).max(0);
            sure * d.signum()
        })
    }
}

impl StepRecord {
    pub fn new(workers: u32, queue_depth: u32, threads: usize, interval_s: f64, sample_s: f64) -> Self {
        Self {
            workers,
            hosts: 1,
            planned_hosts: 1,
            queue_depth,
            threads,
            interval_s,
            sample_s,
            intervals: Vec::new(),
            measured: 0,
            total: IntervalStats::empty(),
            interrupted: false,
            aborted: None,
            notes: Vec::new(),
            per_host: Vec::new(),
            drain: Drain::default(),
            unmeasured_errors: ErrorCounts::default(),
            rate_iops: None,
            replay_speed: None,
            replay_intended: Vec::new(),
            replay_bin_s: 0.1,
            measured_from_unix_ns: None,
            started_unix_ns: None,
            moment_unix_ns: None,
            io_cpu: None,
            outstanding: None,
        }
    }

    /// Whether the intervals so far end in steady state by the SNIA rule, on throughput (IOPS,
    /// or bytes per second for a sequential workload).
    pub fn is_steady(&self, sequential: bool) -> bool {
        let series: Vec<f64> = self.intervals.iter().map(|i| i.throughput(sequential)).collect();
        crate::steady::check(&series).is_some_and(|c| c.steady)
    }

    /// Adds a finished interval: its histograms go into the total, its figures into the list.
    pub fn push_interval(&mut self, stats: IntervalStats, cpu: CpuUsage, duration_s: f64) {
        self.total.read.merge(&stats.read);
        self.total.write.merge(&stats.write);
        self.total.trim.merge(&stats.trim);
        // Intervals follow one another: the step's longest stall is the longest of theirs.
        self.total.max_gap_ns = self.total.max_gap_ns.max(stats.max_gap_ns);
        self.total.faults_injected = self.total.faults_injected.saturating_add(stats.faults_injected);
        self.total.verify.merge(&stats.verify);
        if let Some(r) = &stats.rate {
            self.total.rate.get_or_insert_with(|| Box::new(crate::RateStats::empty())).merge(r);
        }
        crate::target::merge_targets(&mut self.total.targets, &stats.targets);
        self.intervals.push(IntervalRecord::of(stats, cpu, duration_s));
        self.measured += 1;
    }

    /// All its measured intervals as one: `total`, without the per-second samples its targets'
    /// parts carry from their first interval (the whole has none of its own).
    pub fn total_as_one(&self) -> IntervalStats {
        let mut one = self.total.clone();
        for t in &mut one.targets {
            t.samples.clear();
        }
        one
    }

    /// Adds a finished interval as [`StepRecord::push_interval`] does, but keeps the figures of
    /// only the last [`crate::steady::WINDOW`] intervals (what the steady-state check reads):
    /// for a step whose intervals are stored as they come, so that its memory does not grow
    /// with its length (issue 21). The store gives the whole list back at its end.
    pub fn count_interval(&mut self, stats: IntervalStats, cpu: CpuUsage, duration_s: f64) {
        self.push_interval(stats, cpu, duration_s);
        if self.intervals.len() > crate::steady::WINDOW {
            self.intervals.remove(0);
        }
    }
}

/// Live view of a running step, for progress lines.
#[derive(Debug, Clone, Copy, Default)]
pub struct StepProgress {
    pub elapsed_s: f64,
    pub planned_s: f64,
    pub warmup: bool,
    /// Totals since the step started (warm-up included).
    pub ops: u64,
    pub bytes: u64,
    pub lat_sum_ns: u64,
    pub intervals_done: u32,
    /// I/Os outstanding now.
    pub inflight: u64,
}

/// What a step did between two progress events.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    pub iops: f64,
    pub bytes_per_second: f64,
    /// Mean latency of the I/Os completed meanwhile, ns (0 without any).
    pub latency_ns: f64,
}

impl StepProgress {
    /// The rates since `last` (an earlier event of the same step); None when no time passed.
    pub fn rates_since(&self, last: &StepProgress) -> Option<Rates> {
        let dt = self.elapsed_s - last.elapsed_s;
        if dt <= 0.0 {
            return None;
        }
        let ops = self.ops.saturating_sub(last.ops);
        let latency_ns =
            if ops > 0 { self.lat_sum_ns.saturating_sub(last.lat_sum_ns) as f64 / ops as f64 } else { 0.0 };
        Some(Rates {
            iops: ops as f64 / dt,
            bytes_per_second: self.bytes.saturating_sub(last.bytes) as f64 / dt,
            latency_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_fold_into_the_total() {
        let mut rec = StepRecord::new(1, 1, 1, 1.0, 1.0);
        for lat in [100, 300] {
            let mut s = IntervalStats::with_samples(1);
            s.read.record(lat, 4096);
            s.write.record(lat * 3, 4096);
            s.samples[0].record(lat, 4096);
            rec.push_interval(s, CpuUsage::default(), 1.0);
        }
        assert_eq!(rec.total.ops(), 4);
        assert_eq!(rec.total.combined_hist().count(), 4);
        assert!(rec.total.samples.is_empty());
        assert_eq!(rec.intervals[1].ops, 2);
        assert!((rec.intervals[0].lat_mean_ns - 200.0).abs() < 1.0);
        assert_eq!(rec.intervals[1].samples[0].ops, 1);
    }

    #[test]
    fn a_counted_step_keeps_its_total_and_count_but_only_the_last_window() {
        let (mut held, mut counted) = (StepRecord::new(1, 1, 1, 1.0, 1.0), StepRecord::new(1, 1, 1, 1.0, 1.0));
        for k in 1..=20u64 {
            let mut s = IntervalStats::with_samples(1);
            for _ in 0..k {
                s.read.record(100 * k, 4096);
            }
            held.push_interval(s.clone(), CpuUsage::default(), 1.0);
            counted.count_interval(s, CpuUsage::default(), 1.0);
        }
        assert_eq!((held.measured, counted.measured), (20, 20));
        assert_eq!(counted.total.ops(), held.total.ops());
        assert_eq!(counted.total.combined_hist().max_ns(), held.total.combined_hist().max_ns());
        assert_eq!(counted.intervals.len(), crate::steady::WINDOW);
        assert_eq!(counted.intervals[..], held.intervals[20 - crate::steady::WINDOW..]);
        assert_eq!(counted.is_steady(false), held.is_steady(false));
    }
}
