//! Merging the hosts' intervals of a multi-host step: pure, no network. Interval k is handed
//! on once every host still in the step reported it, in order; a lost host's missing intervals
//! are not waited for, and what it reported before it was lost is kept. Histograms merge
//! exactly (sums of buckets), counters add up, host CPU is the mean of the reporting hosts.

use std::collections::BTreeMap;

use iocurve_stats::{CpuUsage, IntervalStats};

/// One host's interval as it reported it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Part {
    pub stats: IntervalStats,
    pub cpu: CpuUsage,
    pub duration_s: f64,
}

/// An interval merged over the hosts that reported it.
#[derive(Debug, Clone)]
pub struct Merged {
    pub index: usize,
    /// Each reporting host's own part, by host number.
    pub parts: Vec<(usize, Part)>,
    pub all: IntervalStats,
    pub cpu: CpuUsage,
}

pub struct IntervalMerger {
    /// Per interval some host reported and not handed on yet, per host: only those, so that
    /// memory follows the intervals in flight, not the step's length (a day-long step of 1 s
    /// intervals held a slot per interval from its start, issue 21).
    pending: BTreeMap<usize, Vec<Option<Part>>>,
    intervals: usize,
    hosts: usize,
    next: usize,
}

impl IntervalMerger {
    pub fn new(intervals: usize, hosts: usize) -> IntervalMerger {
        IntervalMerger { pending: BTreeMap::new(), intervals, hosts, next: 0 }
    }

    /// Host `host`'s interval `index`; one beyond the step, from a host beyond the step's, or
    /// one already handed on, is dropped (a confused agent cannot grow the coordinator's
    /// memory).
    pub fn add(&mut self, host: usize, index: usize, part: Part) {
        if index < self.next || index >= self.intervals || host >= self.hosts {
            return;
        }
        self.pending.entry(index).or_insert_with(|| vec![None; self.hosts])[host] = Some(part);
    }

    /// The intervals that can be handed on now, in order, given which hosts are lost.
    pub fn ready(&mut self, lost: &[bool]) -> Vec<Merged> {
        let mut out = Vec::new();
        let hosts = self.hosts;
        // Every host reported the interval or is lost.
        let complete = |parts: Option<&Vec<Option<Part>>>| {
            (0..hosts).all(|h| parts.and_then(|p| p.get(h)).is_some_and(Option::is_some) || lost.get(h) == Some(&true))
        };
        while self.next < self.intervals && lost.iter().any(|&l| !l) && complete(self.pending.get(&self.next)) {
            let parts: Vec<(usize, Part)> = self
                .pending
                .remove(&self.next)
                .unwrap_or_default()
                .into_iter()
                .enumerate()
                .filter_map(|(h, p)| p.map(|p| (h, p)))
                .collect();
            let reporting = parts.len().max(1) as f64;
            let mut all = IntervalStats::default();
            let mut cpu = CpuUsage::default();
            for (_, p) in &parts {
                all.merge(&p.stats);
                cpu.user += p.cpu.user / reporting;
                cpu.system += p.cpu.system / reporting;
                cpu.iowait += p.cpu.iowait / reporting;
                // The most any host lost to its hypervisor: one shared host among several is
                // what the flag is for, and a mean would hide it.
                cpu.steal = cpu.steal.max(p.cpu.steal);
            }
            // iocurve's own share: the hosts' mean where every one of them read it.
            cpu.own = parts.iter().map(|(_, p)| p.cpu.own).sum::<Option<f64>>().map(|s| s / reporting);
            out.push(Merged { index: self.next, parts, all, cpu });
            self.next += 1;
        }
        out
    }

    /// Intervals handed on so far.
    pub fn merged(&self) -> usize {
        self.next
    }

    /// The parts of intervals never handed on (some host did not report them), as (host,
    /// interval, part): taken out.
    pub fn left_over(&mut self) -> Vec<(usize, usize, Part)> {
        let mut out = Vec::new();
        for (index, hosts) in std::mem::take(&mut self.pending) {
            for (h, p) in hosts.into_iter().enumerate() {
                if let Some(p) = p {
                    out.push((h, index, p));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(lats: &[u64], user: f64) -> Part {
        let mut stats = IntervalStats::default();
        for &l in lats {
            stats.read.record(l, 4096);
        }
        Part { stats, cpu: CpuUsage { user, ..Default::default() }, duration_s: 1.0 }
    }

    #[test]
    fn intervals_go_out_in_order_once_every_host_reported_and_add_up_exactly() {
        let mut m = IntervalMerger::new(2, 2);
        let live = [false, false];
        m.add(1, 0, part(&[1000, 1500], 40.0));
        m.add(1, 1, part(&[5000], 40.0));
        assert!(m.ready(&live).is_empty(), "host 0 has not reported interval 0");
        m.add(0, 0, part(&[2000], 20.0));
        let out = m.ready(&live);
        assert_eq!(out.len(), 1, "interval 1 still waits for host 0");
        let first = &out[0];
        assert_eq!((first.index, first.all.read.ops, first.all.read.bytes), (0, 3, 3 * 4096));
        assert_eq!(first.all.read.hist.count(), 3);
        assert_eq!((first.all.read.hist.min_ns(), first.all.read.hist.max_ns()), (1000, 2000));
        assert!((first.cpu.user - 30.0).abs() < 1e-9, "mean of the hosts' CPU");
        assert_eq!(first.parts.iter().map(|(h, _)| *h).collect::<Vec<_>>(), vec![0, 1]);
        m.add(0, 1, part(&[], 10.0));
        assert_eq!(m.ready(&live)[0].all.read.ops, 1);
        assert_eq!(m.merged(), 2);
        assert!(m.ready(&live).is_empty());
    }

    #[test]
    fn intervals_only_some_hosts_ran_are_left_over_with_their_faults() {
        let mut m = IntervalMerger::new(4, 2);
        for h in 0..2 {
            m.add(h, 0, part(&[1000], 10.0));
        }
        // Host 1 ended one interval later than host 0 (a steady end it heard late).
        let mut late = part(&[1000], 10.0);
        late.stats.faults_injected = 3;
        m.add(1, 1, late);
        assert_eq!(m.ready(&[false, false]).len(), 1);
        let left = m.left_over();
        assert_eq!(left.len(), 1);
        let (h, index, p) = &left[0];
        assert_eq!((*h, *index, p.stats.faults_injected), (1, 1, 3));
        assert!(m.left_over().is_empty(), "taken out once");
    }

    #[test]
    fn a_lost_host_is_not_waited_for_and_what_it_sent_is_kept() {
        let mut m = IntervalMerger::new(3, 2);
        m.add(0, 0, part(&[1000], 10.0));
        m.add(1, 0, part(&[1000], 10.0));
        m.add(0, 1, part(&[1000], 10.0));
        m.add(1, 1, part(&[1000, 1000], 10.0));
        m.add(0, 2, part(&[1000], 10.0));
        // Host 1 is lost before its interval 2.
        let out = m.ready(&[false, true]);
        assert_eq!(out.iter().map(|o| o.all.read.ops).collect::<Vec<_>>(), vec![2, 3, 1]);
        assert_eq!(out[2].parts.len(), 1, "only host 0 reported interval 2");
    }

    /// Issue 21: the merger held a slot per planned interval from the step's start (a 2-hour
    /// step of 1 s intervals: 7,200 of them). It holds only the intervals in flight.
    #[test]
    fn regression_the_merger_holds_only_the_intervals_in_flight() {
        let mut m = IntervalMerger::new(7200, 2);
        assert!(m.pending.is_empty());
        for i in 0..7200 {
            m.add(0, i, part(&[1000], 10.0));
            m.add(1, i, part(&[1000], 10.0));
            assert_eq!(m.ready(&[false, false]).len(), 1);
            assert!(m.pending.is_empty(), "interval {i} handed on and let go");
        }
        m.add(0, 7199, part(&[1], 0.0));
        assert!(m.pending.is_empty(), "an interval handed on already is dropped");
    }

    #[test]
    fn nothing_goes_out_once_every_host_is_lost_and_strays_are_dropped() {
        let mut m = IntervalMerger::new(1, 1);
        m.add(0, 5, part(&[1], 0.0));
        m.add(3, 0, part(&[1], 0.0));
        assert!(m.ready(&[false]).is_empty(), "strays did not fill interval 0");
        m.add(0, 0, part(&[1], 0.0));
        assert!(m.ready(&[true]).is_empty(), "no host left: the step fails instead");
    }
}
