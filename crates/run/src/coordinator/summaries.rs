//! The per-host rows of a step through relays (issue 46; docs/relays.md, "Per-host figures and
//! the store"): one row per host and step, its measured intervals merged exactly, instead of
//! one per host and interval. A host behind a relay gets its row from its relay's summary of it
//! (`pb::HostSummary` in the relay's `Done`), on this host's clock; a relay that sent none (lost
//! mid-step) keeps its group's row, and an agent of its own in such a step is summed up alike.
//! The merged intervals of the step are kept as in every run.

use iocurve_net::{pb, wire};
use iocurve_stats::{HostClock, HostRecord, StepRecord};

/// What a summary from agent `h` (a relay) is read against: its clock, measured by this host
/// before and after the step, and where its targets start in the run's list.
pub(super) struct Via {
    pub offset_ns: i64,
    pub rtt_ns: i64,
    pub after: Option<(i64, i64)>,
    pub target_offset: u32,
    /// Its agents' summaries (empty: none sent, or not a relay), at most one per host it stands for.
    pub summaries: Vec<pb::HostSummary>,
    /// The workers each of its hosts ran.
    pub workers: u32,
}

/// The step's per-host rows, in the order of the agents, each relay's hosts in place of its own
/// row; and what to note of relays whose summaries did not read. `rows`: each agent's own
/// record (a relay's: its group's), `steady_end`: the step ended once steady (fewer intervals
/// than planned, not interrupted).
pub(super) fn rows(
    rows: Vec<HostRecord>,
    via: Vec<Via>,
    w: &iocurve_plan::Workload,
    steady_end: bool,
) -> (Vec<HostRecord>, Vec<String>) {
    let (mut out, mut notes) = (Vec::with_capacity(rows.len()), Vec::new());
    for (own, v) in rows.into_iter().zip(via) {
        let children: Result<Vec<HostRecord>, String> =
            v.summaries.iter().map(|s| behind(s, &v, &own.record, w, steady_end)).collect();
        match children {
            Ok(list) if !list.is_empty() => out.extend(list),
            // None sent (a relay lost mid-step): the relay's group row, summed up.
            Ok(_) => out.push(summed_up(own, w.interval_s)),
            Err(why) => {
                notes.push(format!(
                    "relay {}'s summaries of its hosts did not read ({why}): its row is its group's",
                    own.address
                ));
                out.push(summed_up(own, w.interval_s));
            }
        }
    }
    (out, notes)
}

/// A record of one interval: all of `rec`'s measured intervals merged.
fn summed_up(mut own: HostRecord, interval_s: f64) -> HostRecord {
    let r = &own.record;
    let mut one = StepRecord::new(r.workers, r.queue_depth, r.threads, r.interval_s, r.sample_s);
    if r.measured > 0 {
        one.push_interval(r.total_as_one(), r.held_cpu_mean(), r.measured as f64 * interval_s);
    }
    (one.hosts, one.interrupted, one.aborted) = (r.hosts, r.interrupted, r.aborted.clone());
    (one.rate_iops, one.replay_speed, one.io_cpu) = (r.rate_iops, r.replay_speed, r.io_cpu);
    one.drain = r.drain;
    one.notes = std::mem::take(&mut own.record.notes);
    one.unmeasured_errors = std::mem::take(&mut own.record.unmeasured_errors);
    own.record = one;
    own
}

/// One host behind relay `v`, as its relay summed it up: what the relay says is checked and
/// escaped as an agent's interval is (`wire::host_summary_from`), and put on this host's clock
/// (the host's offset from the relay plus the relay's from here; their uncertainties add).
fn behind(
    s: &pb::HostSummary,
    v: &Via,
    group: &StepRecord,
    w: &iocurve_plan::Workload,
    steady_end: bool,
) -> Result<HostRecord, String> {
    let read = wire::host_summary_from(s)?;
    let mut record = StepRecord::new(v.workers, group.queue_depth, read.threads, w.interval_s, group.sample_s);
    if let Some((mut stats, cpu, duration_s)) = read.total {
        super::coordinate::shift_targets(&mut stats, v.target_offset);
        record.push_interval(stats, cpu, duration_s);
    }
    record.interrupted = read.lost_at_s.is_some() || (read.measured < w.intervals && !steady_end) || group.interrupted;
    (record.rate_iops, record.replay_speed) = (group.rate_iops, group.replay_speed);
    let c = read.clock;
    Ok(HostRecord {
        address: read.address,
        hostname: read.hostname,
        started_unix_ns: if read.started_unix_ns > 0 { read.started_unix_ns.saturating_sub(v.offset_ns) } else { 0 },
        lost_at_s: read.lost_at_s,
        clock: HostClock {
            offset_ns: c.offset_ns.saturating_add(v.offset_ns),
            rtt_ns: c.rtt_ns.saturating_add(v.rtt_ns.max(0)),
            offset_after_ns: c.offset_after_ns.zip(v.after).map(|(a, (b, _))| a.saturating_add(b)),
            rtt_after_ns: c.rtt_after_ns.saturating_add(v.after.map_or(0, |m| m.1.max(0))),
        },
        record,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use iocurve_stats::{CpuUsage, IntervalStats, TargetStats};

    fn workload() -> iocurve_plan::Workload {
        let text = "[[workloads]]\nname = \"w\"\nintervals = 3\ninterval_s = 1\nwarmup_s = 0\n";
        iocurve_plan::parse_str(text, "plan.toml", &Default::default()).unwrap().workloads.remove(0)
    }

    /// A host's record of `n` intervals of 100 reads each (1 ms, 4 KiB) on its target 1.
    fn record(n: usize) -> StepRecord {
        let mut r = StepRecord::new(4, 1, 2, 1.0, 1.0);
        for k in 0..n {
            let mut s = IntervalStats::default();
            let mut t = TargetStats::empty();
            t.target = 1;
            for i in 0..100 {
                s.read.record(1_000_000 + (k * 100 + i) as u64 * 1000, 4096);
                t.hist.record(1_000_000);
            }
            t.read_ops = 100;
            t.samples = vec![Default::default()];
            s.targets = vec![t];
            let cpu = CpuUsage { user: 0.1 * (k + 1) as f64, ..CpuUsage::default() };
            r.push_interval(s, cpu, 1.0);
        }
        r
    }

    fn host(address: &str, record: StepRecord) -> HostRecord {
        HostRecord {
            address: address.into(),
            hostname: "h".into(),
            started_unix_ns: 5_000,
            lost_at_s: None,
            clock: HostClock::default(),
            record,
        }
    }

    fn via(summaries: Vec<pb::HostSummary>) -> Via {
        Via { offset_ns: 2_000, rtt_ns: 300, after: Some((2_500, 400)), target_offset: 10, summaries, workers: 4 }
    }

    /// A host behind a relay: its step exactly as its relay merged it, one interval of the
    /// step's length, on this host's clock (offsets add, round trips add), its targets in the
    /// run's places.
    #[test]
    fn a_summary_is_the_hosts_step_on_the_coordinators_clock() {
        let w = workload();
        let child = HostRecord {
            started_unix_ns: 1_000_000,
            clock: HostClock { offset_ns: 7_000, rtt_ns: 100, offset_after_ns: Some(7_100), rtt_after_ns: 120 },
            ..host("10.0.0.5:7420", record(3))
        };
        let s = wire::host_summary_to(&child, w.interval_s);
        let group = host("10.0.0.4:7421", record(3));
        let (rows, notes) = super::rows(vec![group], vec![via(vec![s])], &w, false);
        assert!(notes.is_empty(), "{notes:?}");
        let [row] = &rows[..] else { panic!("{rows:?}") };
        assert_eq!(row.address, "10.0.0.5:7420");
        assert_eq!(row.started_unix_ns, 1_000_000 - 2_000, "the relay's clock minus its offset");
        assert_eq!(
            row.clock,
            HostClock { offset_ns: 9_000, rtt_ns: 400, offset_after_ns: Some(9_600), rtt_after_ns: 520 }
        );
        let r = &row.record;
        assert_eq!((r.measured, r.intervals[0].duration_s, r.workers), (1, 3.0, 4));
        assert_eq!(r.total.read.ops, 300);
        assert_eq!(
            r.total.read.hist.buckets().collect::<Vec<_>>(),
            child.record.total.read.hist.buckets().collect::<Vec<_>>()
        );
        assert!((r.intervals[0].cpu.user - 0.2).abs() < 1e-9, "the intervals' mean CPU: {:?}", r.intervals[0].cpu);
        assert_eq!(r.total.targets.iter().map(|t| (t.target, t.read_ops)).collect::<Vec<_>>(), [(11, 300)]);
        assert!(!r.interrupted);
    }

    /// What a hostile or broken relay sends is checked: a summary that does not read leaves the
    /// relay's own group row (summed up) and a note; nonsense figures are dropped, names escaped.
    #[test]
    fn a_summary_that_does_not_read_leaves_the_groups_row_and_says_so() {
        let w = workload();
        let broken = pb::HostSummary { address: "10.0.0.5:7420".into(), total: None, ..Default::default() };
        let (rows, notes) = super::rows(vec![host("10.0.0.4:7421", record(3))], vec![via(vec![broken])], &w, false);
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].address.as_str(), rows[0].record.measured), ("10.0.0.4:7421", 1));
        assert_eq!(rows[0].record.total.read.ops, 300);
        assert!(
            notes[0].contains("relay 10.0.0.4:7421's summaries of its hosts did not read (no figures)"),
            "{notes:?}"
        );

        let mut odd = wire::host_summary_to(&host("10.0.0.5:7420", record(2)), 1.0);
        (odd.address, odd.lost_at_s, odd.threads) = ("evil\u{1b}[2J:1".into(), Some(f64::NAN), u32::MAX);
        let (rows, _) = super::rows(vec![host("10.0.0.4:7421", record(3))], vec![via(vec![odd])], &w, false);
        assert!(!rows[0].address.contains('\u{1b}'), "{}", rows[0].address);
        assert_eq!(rows[0].lost_at_s, None);
        assert_eq!(rows[0].record.threads, 1 << 16);
        assert!(rows[0].record.interrupted, "2 of 3 intervals");
    }

    /// An agent of its own in a step through relays, and a relay lost mid-step (no summaries):
    /// each summed up into one interval, its figures whole.
    #[test]
    fn a_row_without_summaries_is_its_own_record_summed_up() {
        let w = workload();
        let (rows, notes) = super::rows(vec![host("10.0.0.9:7420", record(3))], vec![via(Vec::new())], &w, false);
        assert!(notes.is_empty());
        let r = &rows[0].record;
        assert_eq!((r.measured, r.intervals.len(), r.total.read.ops), (1, 1, 300));
        assert_eq!(r.intervals[0].duration_s, 3.0);
        assert!(r.total.targets.iter().all(|t| t.samples.is_empty()), "no per-second samples in a whole step");
    }
}
