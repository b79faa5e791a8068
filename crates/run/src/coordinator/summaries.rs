//! The per-host rows of a step through relays (issue 46; docs/relays.md, "Per-host figures and
//! the store"): one row per host and step, its measured intervals merged exactly, instead of
//! one per host and interval. A host behind a relay gets its row from its relay's summary of it
//! (`pb::HostSummary`), on this host's clock; a relay that sent none (lost
//! mid-step) keeps its group's row, and an agent of its own in such a step is summed up alike.
//! (Each summary is an event of its own, sent before the relay's `Done`.)
//! The merged intervals of the step are kept as in every run. A host asked for in full
//! (`run --host-intervals`) gets its intervals as its relay sent them instead, once they are
//! seen to add up to its summary exactly.

use std::collections::HashMap;

use iocurve_net::{pb, wire};
use iocurve_stats::{CpuUsage, HostRecord, IntervalStats, StepRecord};

/// One interval of a host behind a relay, as its relay sent it (`run --host-intervals`): read
/// as an agent's, its targets the run's.
#[derive(Debug, Clone)]
pub struct InFull {
    pub index: u32,
    pub stats: IntervalStats,
    pub cpu: CpuUsage,
    pub duration_s: f64,
}

/// The step's per-host rows (see [`rows`]).
pub(super) struct Rows {
    pub rows: Vec<HostRecord>,
    /// Per row, its intervals in full where they were asked for and add up to its summary;
    /// None: its row is its step summed up.
    pub in_full: Vec<Option<Vec<InFull>>>,
    /// What to note of relays whose summaries, or hosts whose intervals, were not taken.
    pub notes: Vec<String>,
}

/// What the summaries from agent `h` (a relay) are read against.
pub(super) struct Via {
    /// Its clock and its targets' places, as this host knows them.
    pub through: wire::Through,
    /// Its agents' summaries (empty: none sent, or not a relay), at most one more than the
    /// hosts it stands for (so that one too many is seen).
    pub summaries: Vec<pb::HostSummary>,
    /// The hosts it stands for: its summaries are of them all, each once, or not taken.
    pub hosts: u32,
    /// The workers it was asked for, per host at `workers_scale` 1.
    pub workers: u32,
    /// Its hosts still with the run, in its order, and the workers each runs (its share): what
    /// its summaries must say; empty: not known (taken as the relay says, bounded).
    pub expected: Vec<(String, u32)>,
    /// The intervals it sent of the hosts asked for in full, by address (every host asked for),
    /// as they came, or why they cannot be taken.
    pub in_full: HashMap<String, Result<Vec<InFull>, String>>,
}

/// The step's per-host rows, in the order of the agents, each relay's hosts in place of its own
/// row; and what to note of relays whose summaries were not taken. `rows`: each agent's own
/// record (a relay's: its group's, made of the intervals the step merged), `measured`: the
/// intervals the step merged, `steady_end`: the step ended once steady (fewer intervals than
/// planned, not interrupted).
pub(super) fn rows(
    rows: Vec<HostRecord>,
    via: Vec<Via>,
    w: &iocurve_plan::Workload,
    measured: usize,
    steady_end: bool,
) -> Rows {
    let mut out = Rows { rows: Vec::with_capacity(rows.len()), in_full: Vec::new(), notes: Vec::new() };
    for (own, mut v) in rows.into_iter().zip(via) {
        // The hosts asked for in full, before their rows take them: all said if the rows go.
        let asked: Vec<String> = v.in_full.keys().cloned().collect();
        // A group's row: its hosts' workers together (uneven hosts: each its share).
        let group_workers = (!v.expected.is_empty()).then(|| v.expected.iter().map(|e| e.1).sum::<u32>());
        if v.summaries.is_empty() {
            // None sent (a relay lost mid-step, an agent of its own): its row, summed up.
            dropped(asked, &own.address, "sent no rows of its hosts", &mut out.notes);
            out.rows.push(summed_up(own, w.interval_s, group_workers));
            out.in_full.push(None);
            continue;
        }
        match hosts_of(&mut v, &own.record, w, measured, steady_end) {
            Ok(list) => {
                for (row, full) in list {
                    let full = full.and_then(|f| {
                        f.map_err(|why| {
                            out.notes.push(format!(
                                "{}'s intervals in full were not taken ({why}): its row is its step summed up",
                                row.address
                            ))
                        })
                        .ok()
                    });
                    out.rows.push(row);
                    out.in_full.push(full);
                }
            }
            Err(why) => {
                out.notes.push(format!(
                    "relay {}'s rows of its hosts were not taken ({why}): its row is its group's",
                    own.address
                ));
                dropped(asked, &own.address, "'s rows were not taken", &mut out.notes);
                out.rows.push(summed_up(own, w.interval_s, group_workers));
                out.in_full.push(None);
            }
        }
    }
    out
}

/// The hosts of relay `relay` asked for in full whose intervals go with its rows: said.
fn dropped(mut hosts: Vec<String>, relay: &str, why: &str, notes: &mut Vec<String>) {
    if hosts.is_empty() {
        return;
    }
    hosts.sort_unstable();
    let sep = if why.starts_with('\'') { "" } else { " " };
    notes.push(format!("the intervals in full of {} were not taken: relay {relay}{sep}{why}", hosts.join(", ")));
}

/// A host's intervals in full, taken only as its whole step: each interval it measured once, in
/// order, and together exactly its summary (counts, bytes, errors and latency histograms of
/// every direction); its row then holds them, as a host's without relays does.
fn in_full(mut list: Vec<InFull>, measured: usize, row: &mut HostRecord) -> Result<Vec<InFull>, String> {
    list.sort_by_key(|i| i.index);
    let r = &row.record;
    if list.is_empty() && measured > 0 {
        return Err(format!("none came of the {measured} it measured"));
    }
    if list.len() != measured || list.iter().enumerate().any(|(k, i)| i.index as usize != k) {
        let got: Vec<u32> = list.iter().map(|i| i.index).take(8).collect();
        let more = if list.len() > 8 { "…" } else { "" };
        return Err(format!("intervals {got:?}{more} for the {measured} it measured"));
    }
    let mut sum = StepRecord::new(r.workers, r.queue_depth, r.threads, r.interval_s, r.sample_s);
    // Counted as a host's without relays is: the observers store each interval.
    for i in &list {
        sum.count_interval(i.stats.clone(), i.cpu, i.duration_s);
    }
    let dirs = |t: &IntervalStats| [t.read.clone(), t.write.clone(), t.trim.clone()];
    let same = dirs(&sum.total).iter().zip(dirs(&r.total).iter()).all(|(a, b)| {
        (a.ops, a.bytes) == (b.ops, b.bytes) && a.errors == b.errors && a.hist.buckets().eq(b.hist.buckets())
    });
    if !same {
        let ios = |t: &IntervalStats| t.read.ops.saturating_add(t.write.ops).saturating_add(t.trim.ops);
        return Err(format!(
            "they do not add up to its summary: {} I/Os in them, {} in it, or other latencies or errors",
            ios(&sum.total),
            ios(&r.total)
        ));
    }
    (sum.interrupted, sum.rate_iops, sum.replay_speed) = (r.interrupted, r.rate_iops, r.replay_speed);
    sum.hosts = r.hosts;
    row.record = sum;
    Ok(list)
}

/// A host's intervals in full, taken, or why not.
type Taken = Result<Vec<InFull>, String>;

/// Relay `v`'s hosts, each from its summary: one per host it stands for, none twice, none with
/// an interval the step did not merge (a relay an interval ahead of the others when the step
/// stopped: its group's row holds the merged intervals only).
fn hosts_of(
    v: &mut Via,
    group: &StepRecord,
    w: &iocurve_plan::Workload,
    measured: usize,
    steady_end: bool,
) -> Result<Vec<(HostRecord, Option<Taken>)>, String> {
    let hosts = if v.expected.is_empty() { v.hosts as usize } else { v.expected.len() };
    if v.summaries.len() != hosts {
        return Err(format!("{} for its {hosts} hosts", v.summaries.len()));
    }
    let mut list: Vec<(HostRecord, Option<Taken>)> = Vec::with_capacity(v.summaries.len());
    for (k, s) in v.summaries.iter().enumerate() {
        let read = wire::host_summary_from(s, &v.through)?;
        // Its own hosts, in its order, each at its share (a relay that dropped the scales
        // would have run every host alike).
        if let Some((address, workers)) = v.expected.get(k) {
            if &read.address != address {
                return Err(format!("its host {} named {}", address, read.address));
            }
            if read.workers != *workers {
                return Err(format!("{address} ran {} workers, its share is {workers}", read.workers));
            }
        }
        if read.measured as usize > measured {
            return Err(format!("{} measured {} intervals, the step {measured}", read.address, read.measured));
        }
        if list.iter().any(|h| h.0.address == read.address) {
            return Err(format!("{} twice", read.address));
        }
        let (full, intervals) = (v.in_full.remove(&read.address), read.measured as usize);
        let mut row = behind(read, v.workers, group, w, steady_end);
        let full = full.map(|f| f.and_then(|f| in_full(f, intervals, &mut row)));
        list.push((row, full));
    }
    Ok(list)
}

/// A record of one interval: all of `rec`'s measured intervals merged (its CPU the mean of the
/// intervals it holds: a live step holds its last few, `count_interval`). A relay's group row runs its hosts' workers
/// together: `group_workers`, or each host the row's.
fn summed_up(mut own: HostRecord, interval_s: f64, group_workers: Option<u32>) -> HostRecord {
    let r = &own.record;
    let workers = group_workers.unwrap_or_else(|| r.workers.saturating_mul(r.hosts.max(1)));
    let mut one = StepRecord::new(workers, r.queue_depth, r.threads, r.interval_s, r.sample_s);
    if r.measured > 0 {
        one.push_interval(
            r.total_as_one(),
            CpuUsage::mean(r.intervals.iter().map(|i| &i.cpu)),
            r.measured as f64 * interval_s,
        );
    }
    (one.hosts, one.interrupted, one.aborted) = (r.hosts, r.interrupted, r.aborted.clone());
    (one.rate_iops, one.replay_speed, one.io_cpu) = (r.rate_iops, r.replay_speed, r.io_cpu);
    one.drain = r.drain;
    one.notes = std::mem::take(&mut own.record.notes);
    one.unmeasured_errors = std::mem::take(&mut own.record.unmeasured_errors);
    own.record = one;
    own
}

/// One host behind a relay as its relay summed it up, read (`wire::host_summary_from`).
fn behind(
    read: wire::HostSummaryRead,
    workers: u32,
    group: &StepRecord,
    w: &iocurve_plan::Workload,
    steady_end: bool,
) -> HostRecord {
    // Its own share (uneven hosts), as its relay says: within what a `workers_scale` can give.
    let most = iocurve_plan::scaled_workers(workers, iocurve_plan::MAX_WORKERS_SCALE);
    let workers = if read.workers == 0 { workers } else { read.workers.min(most) };
    let mut record = StepRecord::new(workers, group.queue_depth, read.threads, w.interval_s, group.sample_s);
    if let Some((stats, cpu, duration_s)) = read.total {
        record.push_interval(stats, cpu, duration_s);
    }
    record.interrupted = read.lost_at_s.is_some() || (read.measured < w.intervals && !steady_end) || group.interrupted;
    (record.rate_iops, record.replay_speed) = (group.rate_iops, group.replay_speed);
    HostRecord {
        address: read.address,
        hostname: read.hostname,
        started_unix_ns: read.started_unix_ns,
        lost_at_s: read.lost_at_s,
        clock: read.clock,
        record,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iocurve_stats::{CpuUsage, HostClock, IntervalStats, TargetStats};

    fn workload() -> iocurve_plan::Workload {
        let text = "[[workloads]]\nname = \"w\"\nintervals = 3\ninterval_s = 1\nwarmup_s = 0\n";
        iocurve_plan::parse_str(text, "plan.toml", &Default::default()).unwrap().workloads.remove(0)
    }

    /// Interval `k` of a host: 100 reads (1 ms and more, 4 KiB) on its target `target`.
    fn interval(k: usize, target: u32) -> IntervalStats {
        let mut s = IntervalStats::default();
        let mut t = TargetStats::empty();
        t.target = target;
        for i in 0..100 {
            s.read.record(1_000_000 + (k * 100 + i) as u64 * 1000, 4096);
            t.hist.record(1_000_000);
        }
        t.read_ops = 100;
        t.samples = vec![Default::default()];
        s.targets = vec![t];
        s
    }

    /// A host's record of `n` such intervals on its target 1.
    fn record(n: usize) -> StepRecord {
        let mut r = StepRecord::new(4, 1, 2, 1.0, 1.0);
        for k in 0..n {
            r.push_interval(interval(k, 1), CpuUsage::default(), 1.0);
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
        let through = wire::Through {
            offset_ns: 2_000,
            rtt_ns: 300,
            after: Some((2_500, 400)),
            target_offset: 10,
            target_count: 2,
        };
        Via {
            through,
            hosts: summaries.len().max(1) as u32,
            summaries,
            workers: 4,
            expected: Vec::new(),
            in_full: HashMap::new(),
        }
    }

    fn summary(address: &str, n: usize) -> pb::HostSummary {
        let cpu = CpuUsage { user: 0.2, ..CpuUsage::default() };
        wire::host_summary_to(&host(address, record(n)), 1.0, &cpu)
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
        let s = wire::host_summary_to(&child, w.interval_s, &CpuUsage { user: 0.2, ..CpuUsage::default() });
        let Rows { rows, notes, .. } =
            super::rows(vec![host("10.0.0.4:7421", record(3))], vec![via(vec![s])], &w, 3, false);
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
        let buckets = |h: &iocurve_stats::LatencyHistogram| h.buckets().collect::<Vec<_>>();
        assert_eq!(buckets(&r.total.read.hist), buckets(&child.record.total.read.hist));
        assert!((r.intervals[0].cpu.user - 0.2).abs() < 1e-9, "{:?}", r.intervals[0].cpu);
        assert_eq!(r.total.targets.iter().map(|t| (t.target, t.read_ops)).collect::<Vec<_>>(), [(11, 300)]);
        assert!(!r.interrupted);
    }

    /// Summaries not to be taken leave the relay's group row (summed up) and a note: one that
    /// does not read, too few or too many for its hosts, a host twice, a host that measured an
    /// interval the step did not merge, a part of a target not the relay's.
    #[test]
    fn summaries_not_to_be_taken_leave_the_groups_row_and_say_so() {
        let w = workload();
        let broken = pb::HostSummary { address: "10.0.0.5:7420".into(), total: None, ..Default::default() };
        let mut far = summary("10.0.0.5:7420", 1);
        far.total.as_mut().unwrap().targets[0].target = 2;
        let cases = [
            (via(vec![broken]), 3, "(no figures)"),
            (Via { hosts: 3, ..via(vec![summary("10.0.0.5:7420", 3)]) }, 3, "(1 for its 3 hosts)"),
            (via(vec![summary("10.0.0.5:7420", 3), summary("10.0.0.5:7420", 3)]), 3, "(10.0.0.5:7420 twice)"),
            (via(vec![summary("10.0.0.5:7420", 3)]), 2, "(10.0.0.5:7420 measured 3 intervals, the step 2)"),
            (via(vec![far]), 3, "(a part of target 2 of the relay's 2)"),
            (
                Via { expected: vec![("10.0.0.6:7420".into(), 4)], ..via(vec![summary("10.0.0.5:7420", 3)]) },
                3,
                "(its host 10.0.0.6:7420 named 10.0.0.5:7420)",
            ),
            (
                Via { expected: vec![("10.0.0.5:7420".into(), 8)], ..via(vec![summary("10.0.0.5:7420", 3)]) },
                3,
                "(10.0.0.5:7420 ran 4 workers, its share is 8)",
            ),
        ];
        for (v, measured, why) in cases {
            let Rows { rows, notes, .. } =
                super::rows(vec![host("10.0.0.4:7421", record(3))], vec![v], &w, measured, false);
            assert_eq!(rows.len(), 1);
            assert_eq!((rows[0].address.as_str(), rows[0].record.measured), ("10.0.0.4:7421", 1));
            assert_eq!(rows[0].record.total.read.ops, 300);
            assert!(notes[0].starts_with("relay 10.0.0.4:7421's rows of its hosts were not taken"), "{notes:?}");
            assert!(notes[0].contains(why), "{why}: {notes:?}");
        }
        // Nonsense bounded, names escaped.
        let mut odd = summary("10.0.0.5:7420", 2);
        (odd.address, odd.lost_at_s, odd.threads) = ("evil\u{1b}[2J:1".into(), Some(f64::NAN), u32::MAX);
        let Rows { rows, notes, .. } =
            super::rows(vec![host("10.0.0.4:7421", record(3))], vec![via(vec![odd])], &w, 3, false);
        assert!(notes.is_empty(), "{notes:?}");
        assert!(!rows[0].address.contains('\u{1b}'), "{}", rows[0].address);
        assert_eq!((rows[0].lost_at_s, rows[0].record.threads), (None, 1 << 16));
        assert!(rows[0].record.interrupted, "2 of 3 intervals");
    }

    /// A relay's group row (its summaries not taken, or none) runs its hosts' workers together:
    /// each host's share where the coordinator knows them (uneven hosts), else the row's each.
    #[test]
    fn a_groups_row_counts_its_hosts_workers() {
        let w = workload();
        let mut group = host("10.0.0.4:7421", record(3));
        group.record.hosts = 3;
        let expected = vec![("a:1".into(), 4), ("b:1".into(), 16), ("c:1".into(), 4)];
        let v = Via { expected, hosts: 3, ..via(Vec::new()) };
        let Rows { rows, .. } = super::rows(vec![group.clone()], vec![v], &w, 3, false);
        assert_eq!((rows[0].record.workers, rows[0].record.hosts), (24, 3));
        let Rows { rows, .. } = super::rows(vec![group], vec![Via { hosts: 3, ..via(Vec::new()) }], &w, 3, false);
        assert_eq!(rows[0].record.workers, 12, "4 each");
    }

    /// An agent of its own in a step through relays, and a relay lost mid-step (no summaries):
    /// each summed up into one interval, its figures whole.
    #[test]
    fn a_row_without_summaries_is_its_own_record_summed_up() {
        let w = workload();
        let Rows { rows, notes, .. } =
            super::rows(vec![host("10.0.0.9:7420", record(3))], vec![via(Vec::new())], &w, 3, false);
        assert!(notes.is_empty());
        let r = &rows[0].record;
        assert_eq!((r.measured, r.intervals.len(), r.total.read.ops), (1, 1, 300));
        assert_eq!(r.intervals[0].duration_s, 3.0);
        assert!(r.total.targets.iter().all(|t| t.samples.is_empty()), "no per-second samples in a whole step");
    }

    /// `record(n)`'s intervals as the coordinator keeps them from its relay: its target in the
    /// run's place (the relay's target 1 is the run's 11 through `via`).
    fn sent(n: usize) -> Vec<InFull> {
        let full =
            |k: usize| InFull { index: k as u32, stats: interval(k, 11), cpu: CpuUsage::default(), duration_s: 1.0 };
        (0..n).map(full).collect()
    }

    /// A host asked for in full: its row holds its intervals as its relay sent them, once they
    /// are each of its measured intervals and add up to its summary exactly; else its row is
    /// its summary, and a note says why.
    #[test]
    fn intervals_in_full_are_taken_only_as_the_hosts_whole_step() {
        let w = workload();
        let with = |list: Vec<InFull>| {
            let mut v = via(vec![summary("10.0.0.5:7420", 3)]);
            v.in_full.insert("10.0.0.5:7420".into(), Ok(list));
            super::rows(vec![host("10.0.0.4:7421", record(3))], vec![v], &w, 3, false)
        };
        let mut shuffled = sent(3);
        shuffled.swap(0, 2);
        let out = with(shuffled);
        assert!(out.notes.is_empty(), "{:?}", out.notes);
        let full = out.in_full[0].as_ref().expect("taken");
        assert_eq!(full.iter().map(|i| i.index).collect::<Vec<_>>(), [0, 1, 2], "in order");
        let r = &out.rows[0].record;
        assert_eq!((r.measured, r.intervals.len(), r.total.read.ops), (3, 3, 300));
        assert!(r.intervals.iter().all(|i| i.duration_s == 1.0), "{:?}", r.intervals);
        assert_eq!(r.total.targets.iter().map(|t| (t.target, t.read_ops)).collect::<Vec<_>>(), [(11, 300)]);

        let mut twice = sent(3);
        twice[2].index = 1;
        let mut changed = sent(3);
        changed[1].stats.read.record(5_000_000, 4096);
        let cases = [
            (sent(2), "intervals [0, 1] for the 3 it measured"),
            (twice, "intervals [0, 1, 1] for the 3 it measured"),
            ([sent(3), sent(1)].concat(), "intervals [0, 0, 1, 2] for the 3 it measured"),
            (changed, "they do not add up to its summary: 301 I/Os in them, 300 in it, or other latencies or errors"),
            (Vec::new(), "none came of the 3 it measured"),
        ];
        for (list, why) in cases {
            let out = with(list);
            assert!(out.in_full[0].is_none());
            assert_eq!(out.rows[0].record.measured, 1, "its summary");
            assert_eq!(
                out.notes,
                [format!("10.0.0.5:7420's intervals in full were not taken ({why}): its row is its step summed up")]
            );
        }
    }

    /// Intervals in full not taken with their relay's rows, or one that did not read: said,
    /// naming the hosts.
    #[test]
    fn intervals_in_full_dropped_with_their_relays_rows_are_said() {
        let w = workload();
        let asked = |mut v: Via, list: Result<Vec<InFull>, String>| {
            v.in_full.insert("10.0.0.5:7420".into(), list);
            super::rows(vec![host("10.0.0.4:7421", record(3))], vec![v], &w, 3, false)
        };
        let out =
            asked(via(vec![summary("10.0.0.5:7420", 3)]), Err("an interval that does not read: no figures".into()));
        assert!(out.in_full[0].is_none());
        assert_eq!(
            out.notes,
            [
                "10.0.0.5:7420's intervals in full were not taken (an interval that does not read: no figures): its row is its step summed up"
            ]
        );
        let out = asked(via(Vec::new()), Ok(sent(3)));
        assert!(out.rows.len() == 1 && out.in_full[0].is_none());
        assert_eq!(
            out.notes,
            ["the intervals in full of 10.0.0.5:7420 were not taken: relay 10.0.0.4:7421 sent no rows of its hosts"]
        );
        let out = asked(Via { hosts: 2, ..via(vec![summary("10.0.0.5:7420", 3)]) }, Ok(sent(3)));
        assert_eq!(out.notes.len(), 2, "{:?}", out.notes);
        assert_eq!(
            out.notes[1],
            "the intervals in full of 10.0.0.5:7420 were not taken: relay 10.0.0.4:7421's rows were not taken"
        );
        // The first host's taken before the second's row fails: still said.
        let expected = vec![("10.0.0.5:7420".into(), 4), ("10.0.0.6:7420".into(), 4)];
        let two = Via { expected, hosts: 2, ..via(vec![summary("10.0.0.5:7420", 3), summary("10.0.0.7:7420", 3)]) };
        let out = asked(two, Ok(sent(3)));
        assert!(out.notes[0].contains("its host 10.0.0.6:7420 named 10.0.0.7:7420"), "{:?}", out.notes);
        assert_eq!(
            out.notes[1],
            "the intervals in full of 10.0.0.5:7420 were not taken: relay 10.0.0.4:7421's rows were not taken"
        );
    }
}
