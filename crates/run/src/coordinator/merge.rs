//! Merging the hosts' intervals of a multi-host step: pure, no network. Interval k is handed
//! on once every host still in the step reported it, in order; a lost host's missing intervals
//! are not waited for, and what it reported before it was lost is kept. Histograms merge
//! exactly (sums of buckets), counters add up, host CPU is the mean of the reporting hosts.
//!
//! A part may stand for a group of hosts (`Part::hosts`: a relay's merge of its agents, issue
//! 46): its CPU weighs as many hosts, so that merging groups and then their merges gives what
//! merging every host at once gives — the histograms bucket for bucket, the CPU to rounding.

use std::collections::BTreeMap;

use iocurve_stats::{CpuUsage, IntervalStats};

/// One host's interval as it reported it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Part {
    pub stats: IntervalStats,
    pub cpu: CpuUsage,
    pub duration_s: f64,
    /// How many hosts' intervals it holds (0 and 1: one host's).
    pub hosts: u32,
}

impl Part {
    fn weight(&self) -> f64 {
        f64::from(self.hosts.max(1))
    }
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

impl Merged {
    /// The merge as one part of a merge above it (a relay's group, for its coordinator): as many
    /// hosts as its parts held.
    pub fn into_part(self, duration_s: f64) -> Part {
        let hosts = self.parts.iter().map(|(_, p)| p.hosts.max(1)).sum();
        Part { stats: self.all, cpu: self.cpu, duration_s, hosts }
    }
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
            let reporting: f64 = parts.iter().map(|(_, p)| p.weight()).sum::<f64>().max(1.0);
            let mut all = IntervalStats::empty();
            let mut cpu = CpuUsage::default();
            for (_, p) in &parts {
                all.merge(&p.stats);
                // Weight first, then divide: a one-host part's share is `x / n` to the bit, as
                // before parts could stand for groups.
                let w = p.weight();
                cpu.user += p.cpu.user * w / reporting;
                cpu.system += p.cpu.system * w / reporting;
                cpu.iowait += p.cpu.iowait * w / reporting;
                // The most any host lost to its hypervisor: one shared host among several is
                // what the flag is for, and a mean would hide it.
                cpu.steal = cpu.steal.max(p.cpu.steal);
            }
            // iocurve's own share: the hosts' mean where every one of them read it.
            cpu.own = parts
                .iter()
                .map(|(_, p)| p.cpu.own.map(|o| o * p.weight()))
                .sum::<Option<f64>>()
                .map(|s| s / reporting);
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
        Part { stats, cpu: CpuUsage { user, ..Default::default() }, duration_s: 1.0, hosts: 1 }
    }

    /// One host's interval as an agent would send it: reads and writes of the given latencies
    /// in two samples and their seconds, a target of its own (`host`), a stall, faults, a
    /// verification problem named, and CPU.
    fn host_part(host: usize, lats: &[(u64, bool)], cpu: (f64, f64, f64, Option<f64>), gap: Option<u64>) -> Part {
        let mut stats = IntervalStats::with_samples(2);
        let mut target = iocurve_stats::TargetStats { target: host as u32, ..Default::default() };
        target.samples = vec![Default::default(); 2];
        for (k, &(l, write)) in lats.iter().enumerate() {
            let (d, bytes) = if write { (&mut stats.write, 8192) } else { (&mut stats.read, 4096) };
            d.record(l, bytes);
            stats.samples[k % 2].record(l, bytes);
            stats.seconds.record(k % 2, l);
            target.hist.record(l);
            target.samples[k % 2].record(l, bytes);
            if write {
                (target.write_ops, target.write_bytes) = (target.write_ops + 1, target.write_bytes + bytes);
            } else {
                (target.read_ops, target.read_bytes) = (target.read_ops + 1, target.read_bytes + bytes);
            }
        }
        stats.targets = vec![target];
        stats.max_gap_ns = gap;
        stats.faults_injected = lats.len() as u64 % 3;
        if lats.len() % 4 == 1 {
            stats.verify.lost = 1;
            stats.verify.examples.push(format!("host {host}: block 7 lost"));
        }
        let (user, system, iowait, own) = cpu;
        let cpu = CpuUsage { user, system, iowait, steal: user / 10.0, own };
        Part { stats, cpu, duration_s: 1.0, hosts: 1 }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// Issue 46: a relay merges its agents' intervals and its coordinator merges the relays':
        /// that must give what one coordinator merging every agent gives — every histogram
        /// bucket for bucket, every counter, sample, second, target and example the same, the
        /// CPU means to rounding — whatever the groups.
        #[test]
        fn groups_merged_and_then_merged_again_give_the_flat_merge(
            hosts in proptest::collection::vec(
                (
                    proptest::collection::vec((1u64..50_000_000, proptest::bool::ANY), 0..40),
                    (0.0f64..100.0, 0.0f64..100.0, 0.0f64..100.0, proptest::option::weighted(0.9, 0.0f64..100.0)),
                    proptest::option::of(1u64..1_000_000_000),
                ),
                1..24,
            ),
            cuts in proptest::collection::vec(1usize..8, 1..24),
        ) {
            let parts: Vec<Part> =
                hosts.iter().enumerate().map(|(h, (lats, cpu, gap))| host_part(h, lats, *cpu, *gap)).collect();
            let n = parts.len();
            let mut flat = IntervalMerger::new(1, n);
            for (h, p) in parts.iter().enumerate() {
                flat.add(h, 0, p.clone());
            }
            let flat = flat.ready(&vec![false; n]).remove(0);
            // Contiguous groups of the sizes `cuts` says, as relays take hosts in order.
            let mut groups: Vec<std::ops::Range<usize>> = Vec::new();
            let mut at = 0;
            for c in cuts.iter().cycle() {
                if at == n {
                    break;
                }
                groups.push(at..(at + c).min(n));
                at = (at + c).min(n);
            }
            let mut top = IntervalMerger::new(1, groups.len());
            for (g, range) in groups.iter().enumerate() {
                let mut relay = IntervalMerger::new(1, range.len());
                for (k, h) in range.clone().enumerate() {
                    relay.add(k, 0, parts[h].clone());
                }
                top.add(g, 0, relay.ready(&vec![false; range.len()]).remove(0).into_part(1.0));
            }
            let tree = top.ready(&vec![false; groups.len()]).remove(0);
            proptest::prop_assert_eq!(&tree.all, &flat.all);
            proptest::prop_assert_eq!(
                tree.all.read.hist.buckets().collect::<Vec<_>>(),
                flat.all.read.hist.buckets().collect::<Vec<_>>()
            );
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(1.0);
            let (t, f) = (&tree.cpu, &flat.cpu);
            proptest::prop_assert!(close(t.user, f.user) && close(t.system, f.system) && close(t.iowait, f.iowait), "{t:?} {f:?}");
            proptest::prop_assert_eq!(t.steal, f.steal);
            proptest::prop_assert_eq!(t.own.is_some(), f.own.is_some());
            if let (Some(a), Some(b)) = (t.own, f.own) {
                proptest::prop_assert!(close(a, b), "{a} {b}");
            }
            proptest::prop_assert_eq!(tree.parts.iter().map(|(_, p)| p.hosts).sum::<u32>(), n as u32);
            // One host per part: the mean of before groups, to the bit.
            let before = parts.iter().fold(0.0, |acc, p| acc + p.cpu.user / n as f64);
            proptest::prop_assert_eq!(flat.cpu.user.to_bits(), before.to_bits());
        }
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
