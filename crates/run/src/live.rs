//! Live metrics as a run's observer: every finished interval goes to the exporter under its
//! workload and host (each agent's own, or this host's for a local run), the progress events
//! to the live gauges, every finished step's figures beside them. The exporter serves them on
//! `/metrics` (`iocurve_metrics::serve`); nothing here waits for a scraper.

use iocurve_analysis::{RunResult, StepResult};
use iocurve_engine::{StepObserver, StepProgress};
use iocurve_metrics::{Exporter, Live, LiveGauges, RateFigures, StepFigures, Target};
use iocurve_stats::{CpuUsage, IntervalStats};

use crate::{Observer, StepAt};

pub struct LiveMetrics {
    exporter: Exporter,
    /// The host label of a local run's figures.
    hostname: String,
    gauges: LiveGauges,
    /// Host labels of the running step's hosts, by host number (empty: a local step).
    hosts: Vec<String>,
    /// A concurrent step's members: each one's part of an interval counts under its name too.
    members: Vec<String>,
    /// The run's targets, by their place in its list: each one's part counts under its path.
    targets: Vec<String>,
    /// A run through relays (issue 46): its hosts' figures come summed up at each step's end
    /// (`host_summary`), and count then under each host; its merged intervals count under none.
    relayed: bool,
}

impl LiveMetrics {
    pub fn new(exporter: Exporter) -> LiveMetrics {
        LiveMetrics {
            exporter,
            hostname: iocurve_engine::host::facts().hostname,
            gauges: LiveGauges::default(),
            hosts: Vec::new(),
            members: Vec::new(),
            targets: Vec::new(),
            relayed: false,
        }
    }

    /// An interval on `host`: the step's, and each member's part under its own name.
    fn count(&self, host: &str, stats: &IntervalStats, cpu: &CpuUsage) {
        self.exporter.interval(&self.gauges.live.workload, host, stats, cpu);
        for (name, part) in self.members.iter().zip(&stats.members) {
            self.exporter.interval(name, host, part, cpu);
        }
    }
}

impl StepObserver for LiveMetrics {
    fn progress(&mut self, p: &StepProgress) {
        self.gauges.progress(p, &self.exporter);
    }

    fn host_started(
        &mut self,
        host: u32,
        address: &str,
        _hostname: &str,
        _started_unix_ns: i64,
        _threads: usize,
        _workers: u32,
    ) {
        let h = host as usize;
        if self.hosts.len() <= h {
            self.hosts.resize(h + 1, String::new());
        }
        // The address the coordinator reached it at: unique, where host names may repeat.
        self.hosts[h] = address.to_string();
    }

    fn host_summary(&mut self, _host: u32, row: &iocurve_stats::HostRecord) {
        if let Some(i) = row.record.intervals.first() {
            self.count(&row.address, &row.record.total, &i.cpu);
        }
    }

    fn host_interval(&mut self, host: u32, _index: u32, stats: &IntervalStats, cpu: &CpuUsage, _duration_s: f64) {
        let name = self.hosts.get(host as usize).cloned().unwrap_or_else(|| format!("host {host}"));
        self.count(&name, stats, cpu);
    }

    fn interval(&mut self, _index: u32, stats: &IntervalStats, cpu: &CpuUsage, _duration_s: f64) {
        // A multi-host step's merged interval is the sum of the hosts' own, counted already;
        // its longest gap is the worst host's.
        if self.hosts.is_empty() && !self.relayed {
            self.count(&self.hostname, stats, cpu);
        }
        self.exporter.targets(&self.gauges.live.workload, &self.targets, stats);
        self.exporter.stall(stats);
    }
}

impl Observer for LiveMetrics {
    fn event(&mut self, e: &crate::RunEvent) {
        match e {
            crate::RunEvent::Header { targets, .. } => self.targets = targets.iter().map(|t| t.path.clone()).collect(),
            crate::RunEvent::Mark { mark, .. } => self.exporter.mark(mark.at_unix_ns as f64 / 1e9, &mark.text),
            crate::RunEvent::AgentClock { relay_of, .. } if *relay_of > 0 => self.relayed = true,
            _ => {}
        }
    }

    fn run_started(&mut self, run_id: i64, label: &str, plan: &str) {
        self.exporter.run(&run_id.to_string(), label, plan);
    }

    fn step_starting(&mut self, at: &StepAt) {
        self.gauges = LiveGauges::new(Live {
            workload: at.workload.to_string(),
            step: at.step_index as u32,
            steps: at.steps as u32,
            workers: at.workers,
            queue_depth: at.queue_depth,
            hosts: at.hosts,
            bs: at.bs.to_string(),
            shape: at.shape.to_string(),
            target: at.rate.map(|r| if at.sequential { Target::BytesPerSecond(r * 1e6) } else { Target::Iops(r) }),
            replay_speed: at.replay_speed,
            ..Live::default()
        });
        self.hosts.clear();
        self.members = at.members.to_vec();
        self.exporter.live(Some(self.gauges.live.clone()));
    }

    fn step_finished(&mut self, _planned_s: f64, s: &StepResult) {
        let f = StepFigures {
            iops: s.iops,
            bytes_per_second: s.mbps * 1e6,
            latency_mean_s: s.lat_us.mean / 1e6,
            latency_p99_s: s.lat_us.p99 / 1e6,
            rate: s.rate.as_ref().zip(self.gauges.live.target).map(|(r, target)| RateFigures {
                target,
                achieved_ratio: r.achieved_pct / 100.0,
                lag_p99_s: r.lag_us.p99 / 1e6,
                sustained: r.sustained,
            }),
        };
        let at = iocurve_metrics::Live { workers: s.workers, ..self.gauges.live.clone() };
        self.exporter.step(&self.gauges.live.workload, &at, f);
        self.exporter.live(None);
    }

    fn run_finished(&mut self, _result: &RunResult) {
        self.exporter.live(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iocurve_stats::{HostClock, HostRecord, StepRecord};

    fn reads(n: u64) -> IntervalStats {
        let mut s = IntervalStats::default();
        for i in 0..n {
            s.read.record(100_000 + i, 4096);
        }
        s
    }

    /// Through relays (issue 46) the hosts' counters are their rows summed up at the step's
    /// end, each under its own address; the merged intervals count under no host (not the
    /// coordinator's, whose CPU they are not), which would count every I/O twice.
    #[test]
    fn through_relays_each_host_counts_its_step_at_its_end() {
        let mut live = LiveMetrics::new(Exporter::new());
        live.hostname = "coordinator-host".into();
        live.event(&crate::RunEvent::AgentClock {
            addr: "10.0.0.4:7421".into(),
            hostname: "n4".into(),
            cores: 2,
            offset_ms: 0.0,
            rtt_ms: 0.1,
            relay_of: 2,
            through: None,
        });
        let cpu = CpuUsage { user: 0.5, ..CpuUsage::default() };
        live.interval(0, &reads(500), &cpu, 1.0);
        let text = live.exporter.encode();
        assert!(!text.contains("coordinator-host"), "{text}");
        for (address, n) in [("10.0.0.5:7420", 300), ("10.0.0.6:7420", 200)] {
            let mut record = StepRecord::new(1, 1, 1, 1.0, 1.0);
            record.push_interval(reads(n), cpu, 2.0);
            let row = HostRecord {
                address: address.into(),
                hostname: "n".into(),
                started_unix_ns: 1,
                lost_at_s: None,
                clock: HostClock::default(),
                record,
            };
            live.host_summary(0, &row);
        }
        let text = live.exporter.encode();
        assert!(!text.contains("coordinator-host"), "{text}");
        for (address, n) in [("10.0.0.5:7420", 300), ("10.0.0.6:7420", 200)] {
            let line = text
                .lines()
                .find(|l| {
                    l.contains(&format!("host=\"{address}\"")) && l.contains("direction=\"read\"") && l.contains("_ops")
                })
                .unwrap_or_else(|| panic!("{address}: {text}"));
            assert!(line.ends_with(&format!(" {n}.0")), "{line}");
        }
    }
}
