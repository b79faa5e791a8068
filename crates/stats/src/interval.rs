//! What one I/O thread (and, merged, a whole host) measured in one interval.

use crate::LatencyHistogram;
pub use crate::sample::Sample;

/// Target index of errors stored before errors were counted per target.
pub const UNKNOWN_TARGET: u32 = u32::MAX;

/// I/O errors by target and errno: (target index, errno, count), sorted. Errors are rare, so a
/// short list beats a map; it only grows when a new pair appears, which is off the hot path by
/// definition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts(pub Vec<(u32, i32, u64)>);

impl ErrorCounts {
    pub fn add(&mut self, target: u32, errno: i32, n: u64) {
        match self.0.iter_mut().find(|(t, e, _)| *t == target && *e == errno) {
            Some((_, _, c)) => *c = c.saturating_add(n),
            None => {
                self.0.push((target, errno, n));
                self.0.sort_unstable();
            }
        }
    }

    pub fn total(&self) -> u64 {
        self.0.iter().fold(0u64, |a, (_, _, n)| a.saturating_add(*n))
    }

    /// Counts per errno over all targets, sorted by errno.
    pub fn by_errno(&self) -> Vec<(i32, u64)> {
        let mut out: Vec<(i32, u64)> = Vec::new();
        for &(_, e, n) in &self.0 {
            match out.iter_mut().find(|(x, _)| *x == e) {
                Some((_, c)) => *c = c.saturating_add(n),
                None => out.push((e, n)),
            }
        }
        out.sort_unstable();
        out
    }

    pub fn merge(&mut self, other: &ErrorCounts) {
        for &(t, e, n) in &other.0 {
            self.add(t, e, n);
        }
    }
}

/// What reads of verified blocks found (workloads with `verify = true`, and the final pass):
/// the one type of these counts, from the worker loop to the result document and the store.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VerifyCounts {
    /// Reads whose block was checked against its last acknowledged write.
    pub checked: u64,
    /// The block holds an older write than the last acknowledged one (or none of ours).
    pub lost: u64,
    /// The block's checksum does not match: torn or corrupted.
    pub corrupt: u64,
    /// The block holds data meant for another block or target.
    pub misplaced: u64,
    /// A final pass could not read the block (a read error): neither proven nor lost. The map
    /// still expects its write, so a later pass (`iocurve verify`) checks it once the path is
    /// back. Not a problem of the data (exit code 3, not 4). Issue 36: the pass stopped at the
    /// first read error and counted nothing.
    #[serde(default)]
    pub unreadable: u64,
    /// Blocks the verification journal names as being written when the run that kept the map
    /// stopped (a crash): whatever they hold — the saved write, a journaled one, or a torn mix
    /// of both — is explained, not lost (`iocurve verify` after a crash; issue 36, part 8).
    /// Counted among `checked`.
    #[serde(default)]
    pub in_flight: u64,
    /// The first problems, described (at most [`VerifyCounts::EXAMPLES`]).
    pub examples: Vec<String>,
}

impl VerifyCounts {
    pub const EXAMPLES: usize = 5;

    pub fn problems(&self) -> u64 {
        self.lost + self.corrupt + self.misplaced
    }

    /// The verdict in a few words: `clean`, `14 problems`, `3 unreadable blocks`, or both.
    pub fn verdict(&self) -> String {
        match (self.problems(), self.unreadable) {
            (0, 0) => "no problems".into(),
            (n, 0) => format!("{n} problems"),
            (0, u) => format!("no problems in what could be read, {u} blocks unreadable"),
            (n, u) => format!("{n} problems, {u} blocks unreadable"),
        }
    }

    /// `3 lost, 1 corrupted, 0 misplaced of 81'920 checked blocks`, and `; 12 unreadable …`
    /// when a pass could not read some.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} lost, {} corrupted, {} misplaced of {} checked blocks",
            self.lost, self.corrupt, self.misplaced, self.checked
        );
        if self.unreadable > 0 {
            s.push_str(&format!(
                "; {} unreadable (read errors: neither proven nor lost, checked again by a later `iocurve verify`)",
                self.unreadable
            ));
        }
        if self.in_flight > 0 {
            s.push_str(&format!(
                "; {} of them were being written when the run stopped (named by the journal: what they hold, old, new or torn, is explained, not lost)",
                self.in_flight
            ));
        }
        s
    }

    pub fn example(&mut self, text: impl FnOnce() -> String) {
        if self.examples.len() < Self::EXAMPLES {
            self.examples.push(text());
        }
    }

    pub fn merge(&mut self, o: &VerifyCounts) {
        self.checked = self.checked.saturating_add(o.checked);
        self.lost = self.lost.saturating_add(o.lost);
        self.corrupt = self.corrupt.saturating_add(o.corrupt);
        self.misplaced = self.misplaced.saturating_add(o.misplaced);
        self.unreadable = self.unreadable.saturating_add(o.unreadable);
        self.in_flight = self.in_flight.saturating_add(o.in_flight);
        for e in &o.examples {
            if self.examples.len() < Self::EXAMPLES {
                self.examples.push(e.clone());
            }
        }
    }
}

/// The final verification pass of a run (`--verify-final`): every block the map knows read
/// back and checked after the workloads.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FinalVerification {
    /// The map file.
    pub map: String,
    /// The map's block size.
    pub bs: u64,
    /// RFC 3339, UTC.
    pub started_at: String,
    pub finished_at: String,
    /// `checked`, `lost`, `corrupt`, `misplaced`, `examples`.
    #[serde(flatten)]
    pub counts: VerifyCounts,
    /// Problems found beyond those listed one by one (in the database and the problems CSV):
    /// a pass lists up to 1'000'000.
    #[serde(default)]
    pub unlisted: u64,
}

/// Counters and latency histogram of one I/O direction.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DirStats {
    pub hist: LatencyHistogram,
    pub ops: u64,
    pub bytes: u64,
    pub errors: ErrorCounts,
}

impl DirStats {
    /// Nothing measured, and no memory for its histogram until something is merged in (the
    /// default allocates a full one to record into).
    pub fn empty() -> Self {
        DirStats { hist: LatencyHistogram::empty(), ops: 0, bytes: 0, errors: ErrorCounts::default() }
    }

    /// Nothing measured: no I/O, no error (what an interval leaves out of its encoding).
    pub fn is_empty(&self) -> bool {
        self.ops == 0 && self.bytes == 0 && self.hist.is_empty() && self.errors.0.is_empty()
    }

    #[inline]
    pub fn record(&mut self, lat_ns: u64, bytes: u64) {
        self.hist.record(lat_ns);
        self.ops += 1;
        self.bytes += bytes;
    }

    pub fn merge(&mut self, other: &DirStats) {
        self.hist.merge(&other.hist);
        self.ops = self.ops.saturating_add(other.ops);
        self.bytes = self.bytes.saturating_add(other.bytes);
        self.errors.merge(&other.errors);
    }
}

/// What a rate step measures beyond the response time (which its `read`/`write` histograms
/// hold: completion − intended issue time, the figure no stall can hide from).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RateStats {
    /// Service time: completion − submission, both directions.
    pub service: LatencyHistogram,
    /// Lag: submission − intended issue time, of the I/Os issued in the interval.
    pub lag: LatencyHistogram,
    /// I/Os whose intended issue time fell in the interval (issued, queued or dropped).
    pub due: u64,
    /// Due I/Os not issued (`overload = drop`, or every target they could go to stopped).
    pub dropped: u64,
    /// I/Os due in the measurement but not yet issued when it ended: the schedule fell behind
    /// (`overload = queue`).
    pub backlog: u64,
    /// The step was ended because an I/O was due while `max_outstanding` were in flight
    /// (`overload = abort-step`).
    pub overloaded: bool,
}

impl RateStats {
    /// Empty figures to merge into (see [`IntervalStats::empty`]).
    pub fn empty() -> Self {
        // Field by field: `..Default::default()` would allocate full histograms to drop them.
        Self {
            service: LatencyHistogram::empty(),
            lag: LatencyHistogram::empty(),
            due: 0,
            dropped: 0,
            backlog: 0,
            overloaded: false,
        }
    }

    pub fn merge(&mut self, o: &RateStats) {
        self.service.merge(&o.service);
        self.lag.merge(&o.lag);
        self.due = self.due.saturating_add(o.due);
        self.dropped = self.dropped.saturating_add(o.dropped);
        self.backlog = self.backlog.saturating_add(o.backlog);
        self.overloaded |= o.overloaded;
    }
}

/// Everything measured in one interval, by one thread or merged.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IntervalStats {
    pub read: DirStats,
    pub write: DirStats,
    /// Trims (discards, punched holes): apart from reads and writes in every figure.
    pub trim: DirStats,
    /// Consecutive samples covering the interval, equally long.
    pub samples: Vec<Sample>,
    /// Each sample's latency histogram, every direction together (issue 44): as many seconds
    /// as `samples` where recorded, empty where not known (an older agent).
    pub seconds: crate::SecondHists,
    /// Longest time without any completion that ended in (or reached the end of) this
    /// interval, counted from the measurement start at the earliest: a stall. None until a
    /// thread reported it.
    pub max_gap_ns: Option<u64>,
    /// I/Os the fault injection changed (failed, delayed, dropped, torn, misdirected).
    pub faults_injected: u64,
    pub verify: VerifyCounts,
    /// A rate step's service time, lag and schedule counts; None for a closed-loop step.
    pub rate: Option<Box<RateStats>>,
    /// A concurrent step's (issue 41): each member workload's own stats of the interval, in the
    /// order of its members; the figures above are their sum. Empty for any other step.
    pub members: Vec<IntervalStats>,
    /// Each target's part (issue 42), sorted by target: what its I/Os did and what its device
    /// counted. Empty where not known (intervals stored before iocurve kept them).
    pub targets: Vec<crate::TargetStats>,
}

impl IntervalStats {
    pub fn with_samples(n: usize) -> Self {
        // Intervals of more than MAX_SECONDS keep no second histograms (see `seconds`).
        let seconds = crate::SecondHists::with_seconds(if n <= crate::seconds::MAX_SECONDS { n } else { 0 });
        Self { samples: vec![Sample::default(); n], seconds, ..Default::default() }
    }

    /// Empty stats to merge into, whose histograms hold no memory until they do: a
    /// coordinator's merge of its hosts' intervals and each host's record of its step (issue
    /// 46: at thousands of hosts, full histograms per host were most of its memory).
    pub fn empty() -> Self {
        // Field by field: `..Default::default()` would allocate full histograms to drop them.
        Self {
            read: DirStats::empty(),
            write: DirStats::empty(),
            trim: DirStats::empty(),
            samples: Vec::new(),
            seconds: Default::default(),
            max_gap_ns: None,
            faults_injected: 0,
            verify: VerifyCounts::default(),
            rate: None,
            members: Vec::new(),
            targets: Vec::new(),
        }
    }

    /// Empties the stats for the next interval, keeping their memory: an I/O thread takes an
    /// emptied set at a boundary instead of allocating and zeroing one (issue 36, part 9).
    pub fn reset(&mut self) {
        for d in [&mut self.read, &mut self.write, &mut self.trim] {
            d.hist.reset();
            d.ops = 0;
            d.bytes = 0;
            d.errors.0.clear();
        }
        self.samples.iter_mut().for_each(|s| *s = Sample::default());
        self.seconds.reset();
        self.max_gap_ns = None;
        self.faults_injected = 0;
        self.verify = VerifyCounts::default();
        if let Some(r) = &mut self.rate {
            r.service.reset();
            r.lag.reset();
            (r.due, r.dropped, r.backlog, r.overloaded) = (0, 0, 0, false);
        }
        self.members.clear();
        self.targets.iter_mut().for_each(crate::TargetStats::reset);
    }

    pub fn merge(&mut self, other: &IntervalStats) {
        self.read.merge(&other.read);
        self.write.merge(&other.write);
        self.trim.merge(&other.trim);
        if self.samples.len() < other.samples.len() {
            self.samples.resize(other.samples.len(), Sample::default());
        }
        for (a, b) in self.samples.iter_mut().zip(&other.samples) {
            a.merge(b);
        }
        self.seconds.merge(&other.seconds);
        // Threads of one interval: the host stalled only while no thread saw a completion, so
        // its gap is at most the shortest of the threads' longest gaps (one slow I/O on one
        // psync thread is a slow I/O, not a stall of the host).
        self.max_gap_ns = match (self.max_gap_ns, other.max_gap_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.faults_injected = self.faults_injected.saturating_add(other.faults_injected);
        self.verify.merge(&other.verify);
        if let Some(o) = &other.rate {
            self.rate.get_or_insert_with(|| Box::new(RateStats::empty())).merge(o);
        }
        // A concurrent step's hosts: each member with itself.
        if self.members.len() < other.members.len() {
            self.members.resize_with(other.members.len(), IntervalStats::empty);
        }
        for (a, b) in self.members.iter_mut().zip(&other.members) {
            a.merge(b);
        }
        crate::target::merge_targets(&mut self.targets, &other.targets);
    }

    /// A host's one target: its figures are the interval's own, filled in once an interval
    /// rather than recorded I/O by I/O (a host with several targets records each's part).
    pub fn fill_one_target(&mut self, target: u32) {
        if !self.targets.is_empty() {
            return;
        }
        let mut t = crate::TargetStats {
            target,
            read_ops: self.read.ops,
            read_bytes: self.read.bytes,
            write_ops: self.write.ops,
            write_bytes: self.write.bytes,
            trim_ops: self.trim.ops,
            trim_bytes: self.trim.bytes,
            hist: self.combined_hist(),
            errors: self.errors().total(),
            samples: self.samples.clone(),
            device: None,
        };
        // A trim moves no data in a sample unless trims are all there is (as the samples count).
        t.samples.shrink_to_fit();
        self.targets.push(t);
    }

    /// A concurrent step's interval: its members' stats summed, each kept in `members`.
    pub fn of_members(members: Vec<IntervalStats>) -> IntervalStats {
        let mut total = IntervalStats::default();
        for m in &members {
            total.merge(m);
        }
        // A device's counters are the host's, not a member's: each member read the same ones.
        for t in &mut total.targets {
            t.device = members.iter().find_map(|m| m.targets.iter().find(|x| x.target == t.target)?.device);
        }
        total.members = members;
        total
    }

    pub fn ops(&self) -> u64 {
        self.read.ops.saturating_add(self.write.ops).saturating_add(self.trim.ops)
    }

    /// Bytes read and written: a trim moves none (its bytes trimmed are `trim.bytes`), but an
    /// interval of trims alone counts the bytes it trimmed (a workload that only trims — fio's
    /// `rw=trim` — has them as its MB/s).
    pub fn bytes(&self) -> u64 {
        if self.read.ops == 0 && self.write.ops == 0 && self.read.bytes == 0 && self.write.bytes == 0 {
            self.trim.bytes
        } else {
            self.read.bytes.saturating_add(self.write.bytes)
        }
    }

    /// Mean latency of the interval's I/Os in ns (every direction, from their histograms; 0
    /// without any).
    pub fn lat_mean_ns(&self) -> f64 {
        let (mut sum, mut n) = (0.0, 0u64);
        for d in [&self.read, &self.write, &self.trim] {
            sum += d.hist.mean_ns() * d.hist.count() as f64;
            n = n.saturating_add(d.hist.count());
        }
        if n == 0 { 0.0 } else { sum / n as f64 }
    }

    /// Every direction in one histogram.
    pub fn combined_hist(&self) -> LatencyHistogram {
        let mut h = self.read.hist.clone();
        h.merge(&self.write.hist);
        h.merge(&self.trim.hist);
        h
    }

    pub fn errors(&self) -> ErrorCounts {
        let mut e = self.read.errors.clone();
        e.merge(&self.write.errors);
        e.merge(&self.trim.errors);
        e
    }
}

#[cfg(test)]
mod tests {
    /// Issue 46: stats to merge into start without memory and merge as the full ones do.
    #[test]
    fn empty_stats_merge_as_default_ones() {
        let mut s = IntervalStats::with_samples(2);
        s.read.record(1_000, 4096);
        s.write.record(5_000_000, 8192);
        let mut rate = RateStats::default();
        rate.service.record(900);
        rate.lag.record(30_000);
        rate.due = 2;
        s.rate = Some(Box::new(rate));
        let (mut a, mut b) = (IntervalStats::default(), IntervalStats::empty());
        assert_eq!(a, b);
        a.merge(&s);
        b.merge(&s);
        a.merge(&s);
        b.merge(&s);
        assert_eq!(a, b);
        assert_eq!((b.ops(), b.rate.as_ref().map(|r| r.lag.count())), (4, Some(2)));
    }

    #[test]
    fn a_reset_set_is_a_fresh_one() {
        let mut s = IntervalStats::with_samples(4);
        s.rate = Some(Box::default());
        let fresh = s.clone();
        s.read.record(1_000, 4096);
        s.write.record(2_000_000, 4096);
        s.write.errors.add(0, 5, 1);
        s.trim.record(3_000, 1 << 20);
        s.trim.errors.add(0, 95, 1);
        s.samples[2].record(1_000, 4096);
        s.max_gap_ns = Some(7);
        s.faults_injected = 3;
        s.verify.lost = 1;
        let r = s.rate.as_mut().unwrap();
        r.lag.record(9);
        r.due = 5;
        r.overloaded = true;
        s.reset();
        assert_eq!(s, fresh);
    }

    use super::*;

    #[test]
    fn merge_adds_counters_and_aligns_samples() {
        let mut a = IntervalStats::with_samples(2);
        a.read.record(100, 4096);
        a.samples[0].record(100, 4096);
        let mut b = IntervalStats::with_samples(2);
        b.write.record(300, 8192);
        b.write.errors.add(0, 5, 1);
        b.samples[1].record(300, 8192);
        b.trim.record(500, 1 << 20);
        b.trim.errors.add(0, 95, 1);
        a.merge(&b);
        assert_eq!(a.ops(), 3);
        assert_eq!(a.bytes(), 12288, "a trim moves no bytes");
        assert_eq!(a.errors().total(), 2);
        assert_eq!(a.trim.ops, 1);
        assert_eq!(a.samples[0].ops, 1);
        assert_eq!(a.samples[1].lat_max_ns, 300);
        assert_eq!(a.combined_hist().count(), 3);
    }

    /// A trim moves no data; an interval of trims alone counts its bytes trimmed (issue 40).
    #[test]
    fn bytes_are_of_data_moved_or_of_trims_alone() {
        let mut s = IntervalStats::default();
        s.trim.record(10, 1 << 20);
        assert_eq!(s.bytes(), 1 << 20);
        s.read.record(10, 4096);
        assert_eq!(s.bytes(), 4096);
        assert_eq!(s.ops(), 2);
    }

    /// Counts from an agent are untrusted: a hostile one's near `u64::MAX` saturate where they
    /// are added up, never overflow (the fuzzer's `agent_interval` found a panic in the merge).
    #[test]
    fn counts_near_the_top_saturate() {
        let mut s = IntervalStats::with_samples(1);
        (s.read.ops, s.read.bytes, s.write.ops, s.write.bytes) = (u64::MAX - 1, u64::MAX, 2, 3);
        s.faults_injected = u64::MAX / 2 + 1;
        s.samples[0].ops = u64::MAX;
        s.write.errors.add(0, 5, u64::MAX);
        s.read.errors.add(1, 5, 1);
        s.verify.lost = u64::MAX;
        s.rate = Some(Box::new(RateStats { due: u64::MAX, ..RateStats::default() }));
        let mut all = IntervalStats::empty();
        all.merge(&s);
        all.merge(&s);
        assert_eq!((all.read.ops, all.write.ops, all.ops(), all.bytes()), (u64::MAX, 4, u64::MAX, u64::MAX));
        assert_eq!((all.faults_injected, all.samples[0].ops, all.verify.lost), (u64::MAX, u64::MAX, u64::MAX));
        assert_eq!(all.errors().total(), u64::MAX);
        assert_eq!(all.rate.map(|r| r.due), Some(u64::MAX));
    }

    #[test]
    fn error_counts_stay_sorted_and_summed() {
        let mut e = ErrorCounts::default();
        e.add(1, 5, 2);
        e.add(0, 28, 1);
        e.add(1, 5, 3);
        e.add(0, 5, 1);
        assert_eq!(e.0, vec![(0, 5, 1), (0, 28, 1), (1, 5, 5)]);
        assert_eq!(e.total(), 7);
        assert_eq!(e.by_errno(), vec![(5, 6), (28, 1)]);
    }
}
