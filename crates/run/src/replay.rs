//! Replays as the coordinator prepares them (issue 45): each replaying workload's trace read
//! once, before anything is opened (a bad trace is bad input: nothing runs), its devices put on
//! the plan's targets, and the workload's read and trim shares and block sizes set from it (so
//! that the write-safety rules, labels and reports say what the trace does); at every step,
//! each host's share packed for its request and the step timed to the trace at its speed.

use std::sync::Arc;

use iocurve_engine::ops::{Dir, IoOp};
use iocurve_engine::replay::{MAX_SHARE_IOS, ReplayIo, ReplayShare};
use iocurve_plan::{BlockSize, Plan, Split, Workload};
use iocurve_trace::{Trace, TraceDir};

use crate::Error;

/// A workload's trace, read and placed.
#[derive(Debug)]
pub struct Loaded {
    /// As the plan names it.
    pub path: String,
    pub trace: Trace,
    /// Per device of the trace: the target (index in the order listed) it replays on.
    pub targets: Vec<u32>,
    /// Per target: the end of the trace's highest I/O on it (what `scale` maps onto its size).
    pub spans: Vec<u64>,
}

/// The most bins of a replay step's intended I/Os (see [`Loaded::intended_bins`]).
pub const INTENDED_BINS: usize = 20_000;

/// A replay step's trace and speed.
pub type ReplayAt<'a> = Option<(&'a Loaded, f64)>;

/// Every replaying workload's trace, by workload name.
#[derive(Debug, Default, Clone)]
pub struct Replays(Vec<(String, Arc<Loaded>)>);

impl Replays {
    /// Whether some workload replays a trace.
    pub fn any(&self) -> bool {
        !self.0.is_empty()
    }

    pub fn get(&self, workload: &str) -> Option<&Arc<Loaded>> {
        self.0.iter().find(|(n, _)| n == workload).map(|(_, l)| l)
    }
}

/// The longest a replay step may last (its trace at its speed): a week. Longer is a trace's
/// time gone wrong (a clock jump in a capture, a unit mix-up in a CSV), or a speed that makes
/// one.
pub const MAX_STEP_S: f64 = 7.0 * 86_400.0;

/// Refused: a trace whose step at its slowest speed would outlast [`MAX_STEP_S`], and an I/O
/// larger than a replay issues (the reader takes up to 4 GiB).
fn check(w: &Workload, path: &str, trace: &Trace) -> Result<(), Error> {
    let slowest = w.replay_speed.first().copied().unwrap_or(1.0);
    let d = trace.duration_ns() as f64 / 1e9;
    if d / slowest > MAX_STEP_S {
        return Err(Error::Usage(format!(
            "workload {}: {path} spans {d:.0} s from its first I/O to its last, {:.0} s at speed {slowest}: a replay step lasts at most a week ({MAX_STEP_S:.0} s); check the trace's times (a clock jump, seconds read as another unit) or replay a part of it",
            w.name,
            d / slowest
        )));
    }
    // The shortest step an interval can measure: a faster speed would be measured over more
    // time than it ran, its throughput diluted.
    let fastest = w.replay_speed.last().copied().unwrap_or(1.0);
    let n = trace.ios.len() as f64;
    let span = d + if n > 1.0 { d / (n - 1.0) } else { 0.001 };
    if span / fastest < 0.1 {
        return Err(Error::Usage(format!(
            "workload {}: {path} lasts {:.4} s, {:.5} s at speed {fastest}: a replay step lasts at least 0.1 s (one interval); give speeds up to {}",
            w.name,
            span,
            span / fastest,
            (span / 0.1 * 1000.0).floor() / 1000.0
        )));
    }
    let max = iocurve_engine::replay::MAX_IO_BYTES;
    if let Some((k, io)) = trace.ios.iter().enumerate().find(|(_, io)| io.len > max) {
        return Err(Error::Usage(format!(
            "workload {}: {path}: I/O {} (at {:.6} s, a {} at offset {}) is {} bytes: a replay issues I/Os of up to 64 MiB; split it in the trace or leave it out",
            w.name,
            k + 1,
            io.t_ns as f64 / 1e9,
            io.dir.name(),
            io.offset,
            io.len
        )));
    }
    Ok(())
}

impl Replays {
    /// `replay_remap = "refuse"` on this host's targets, before any is opened or a scratch file
    /// written (found by an outside test: a gigabyte of scratch was prepared for a replay that
    /// was then refused). `scratch`: the size of scratch files made for targets not there yet.
    /// Targets whose size cannot be told here are left to the step's own check.
    pub fn check_sizes(&self, plan: &Plan, scratch: Option<u64>) -> Result<(), Error> {
        let targets: Vec<&String> = plan.groups.iter().flat_map(|g| g.targets.iter()).collect();
        let new_files = targets.iter().filter(|t| !std::path::Path::new(t.as_str()).exists()).count();
        for (name, l) in &self.0 {
            let Some(w) = plan.workloads.iter().find(|w| &w.name == name) else { continue };
            if w.replay_remap != iocurve_plan::Remap::Refuse {
                continue;
            }
            for (t, &span) in l.spans.iter().enumerate() {
                let Some(path) = targets.get(t) else { continue };
                let Some(size) =
                    iocurve_engine::target::size_before_open(std::path::Path::new(path.as_str()), scratch, new_files)
                else {
                    continue;
                };
                if span > size {
                    return Err(Error::Usage(format!(
                        "workload {name} replays {} with replay_remap = \"refuse\", and its I/Os reach {span} bytes into target {path} of {size} bytes: replay it on a target as large as the traced device, or with replay_remap = \"modulo\" or \"scale\"",
                        l.path
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Reads every replaying workload's trace and sets the workload's shares and sizes from it.
pub fn load(plan: &mut Plan) -> Result<Replays, Error> {
    let targets: Vec<String> = plan.groups.iter().flat_map(|g| g.targets.iter().cloned()).collect();
    let mut out = Replays::default();
    for w in plan.workloads.iter_mut() {
        let Some(path) = w.replay.clone() else { continue };
        let trace = iocurve_trace::read_trace(std::path::Path::new(&path), &iocurve_trace::Limits::default())
            .map_err(|e| Error::Usage(format!("workload {}: {e}", w.name)))?;
        check(w, &path, &trace)?;
        let map = w.replay_map.as_deref().map(iocurve_plan::replay::parse_map).transpose().map_err(Error::Usage)?;
        let placed = iocurve_plan::replay::assign(&trace.devices, &targets, map.as_deref())
            .map_err(|e| Error::Usage(format!("workload {} replays {path}: {e}", w.name)))?;
        let mut spans = vec![0u64; targets.len()];
        for io in &trace.ios {
            let t = placed[io.device as usize] as usize;
            spans[t] = spans[t].max(io.offset + io.len as u64);
        }
        describe(w, &trace);
        out.0.push((w.name.clone(), Arc::new(Loaded { path, trace, targets: placed, spans })));
    }
    Ok(out)
}

/// The workload's read and trim shares and its block sizes as the trace has them: its safety
/// rules (a trace that writes needs targets that may be written), its label and its reports
/// follow what it does, not the defaults it was written with.
fn describe(w: &mut Workload, trace: &Trace) {
    let n = trace.ios.len().max(1) as f64;
    let count = |d: TraceDir| trace.ios.iter().filter(|io| io.dir == d).count() as f64;
    w.read_pct = round2(count(TraceDir::Read) * 100.0 / n);
    w.trim_pct = round2(count(TraceDir::Trim) * 100.0 / n);
    if w.read_pct + w.trim_pct > 100.0 {
        w.trim_pct = 100.0 - w.read_pct;
    }
    // A write share rounded away is still a write: the targets must be writable.
    if count(TraceDir::Write) > 0.0 && w.read_pct + w.trim_pct >= 100.0 {
        w.read_pct = (w.read_pct - 0.01).max(0.0);
    }
    // The most frequent sizes (512-byte multiples, as the replay issues them) with their counts
    // as weights: 16 at most.
    let mut sizes: std::collections::BTreeMap<u64, u64> = Default::default();
    for io in &trace.ios {
        *sizes.entry((io.len as u64).div_ceil(512) * 512).or_default() += 1;
    }
    let mut by_count: Vec<(u64, u64)> = sizes.into_iter().collect();
    by_count.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    by_count.truncate(16);
    let top = by_count.first().map_or(1, |x| x.1);
    w.bs = by_count
        .into_iter()
        .map(|(bytes, c)| BlockSize { bytes, weight: ((c as f64 / top as f64 * 1000.0).round() as u32).max(1) })
        .collect();
    w.write_bs.clear();
    w.trim_bs.clear();
    // A dedupe unit the suite or plan gave for its own sizes must divide the trace's.
    if w.data.dedupe_unit != 0 && w.bs.iter().any(|b| b.bytes % w.data.dedupe_unit != 0) {
        w.data.dedupe_unit = 0;
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

impl Loaded {
    /// The whole trace at `speed`: the step's length (the last I/O's time and one mean gap, so
    /// that it has its slot as every other has) in ns.
    pub fn span_ns(&self, speed: f64) -> u64 {
        let d = self.trace.duration_ns();
        let n = self.trace.ios.len() as u64;
        let gap = if n > 1 { d / (n - 1) } else { 1_000_000 };
        (d.saturating_add(gap.max(1_000)) as f64 / speed) as u64
    }

    /// The mean rate the trace is due at, at `speed` (IOPS, every host together).
    pub fn mean_iops(&self, speed: f64) -> f64 {
        self.trace.ios.len() as f64 * 1e9 / self.span_ns(speed).max(1) as f64
    }

    /// The step's workload timed to the trace at `speed`: no warm-up (the trace's first seconds
    /// are part of it), and intervals of about `interval_s` that cover it exactly.
    pub fn timed(&self, w: &Workload, speed: f64) -> Workload {
        let span_s = self.span_ns(speed) as f64 / 1e9;
        let k = (span_s / w.interval_s).round().clamp(1.0, 100_000.0);
        Workload { warmup_s: 0.0, intervals: k as u32, interval_s: (span_s / k).max(0.1), ..w.clone() }
    }

    /// Every host's share of the trace among `hosts` by `split`, packed for its request, in
    /// one pass over the trace (a thousand hosts behind relays would make a pass per host a
    /// pass too many).
    pub fn shares(&self, w: &Workload, speed: f64, hosts: usize) -> Result<Vec<Vec<u8>>, Error> {
        let hosts = hosts.max(1);
        // Devices and processes dealt out in the order they first appear (a map: a trace of
        // many processes is no list to search per I/O).
        let on: Vec<u32> = {
            let mut first: std::collections::HashMap<u32, usize> = std::collections::HashMap::new();
            let mut place = |key: u32| -> u32 {
                let next = first.len();
                (*first.entry(key).or_insert(next) % hosts) as u32
            };
            self.trace
                .ios
                .iter()
                .enumerate()
                .map(|(k, io)| match w.replay_split {
                    Split::RoundRobin => (k % hosts) as u32,
                    Split::Device => place(io.device),
                    Split::Process => place(io.pid),
                })
                .collect()
        };
        // Each host's count first: a share beyond what a host replays is refused before any
        // share is built.
        let mut counts = vec![0u64; hosts];
        for &h in &on {
            counts[h as usize] += 1;
        }
        if let Some((host, &n)) = counts.iter().enumerate().find(|&(_, &n)| n > MAX_SHARE_IOS) {
            return Err(Error::Usage(format!(
                "workload {}: host {} of {hosts} would replay {n} I/Os of {}: at most {MAX_SHARE_IOS} a host; replay on more hosts or a part of the trace",
                w.name,
                host + 1,
                self.path
            )));
        }
        let mut each: Vec<Vec<ReplayIo>> = counts.iter().map(|&n| Vec::with_capacity(n as usize)).collect();
        for (io, &h) in self.trace.ios.iter().zip(&on) {
            let dir = match io.dir {
                TraceDir::Read => Dir::Read,
                TraceDir::Write => Dir::Write,
                TraceDir::Trim => Dir::Trim,
            };
            let target = self.targets[io.device as usize];
            each[h as usize].push(ReplayIo { t_ns: io.t_ns, op: IoOp { target, offset: io.offset, len: io.len, dir } });
        }
        // Packed host by host, each host's I/Os let go once packed.
        Ok(each
            .into_iter()
            .map(|ios| {
                iocurve_engine::replay::encode(&ReplayShare {
                    ios,
                    speed,
                    remap: w.replay_remap,
                    spans: self.spans.clone(),
                })
            })
            .collect())
    }

    /// What a run of it should know: the trace's events that are not I/Os (counted, not
    /// replayed), and hosts its split gives nothing to.
    pub fn notes(&self, w: &Workload, hosts: usize) -> Vec<String> {
        let mut out = Vec::new();
        if !self.trace.left_out.is_empty() {
            let each: Vec<String> = self.trace.left_out.iter().map(|(why, n)| format!("{n} {why}")).collect();
            out.push(format!("{}: events that are no I/O were left out of the replay: {}", self.path, each.join(", ")));
        }
        let groups = match w.replay_split {
            Split::RoundRobin => self.trace.ios.len(),
            Split::Device => self.trace.devices.len(),
            Split::Process => {
                let mut pids: Vec<u32> = self.trace.ios.iter().map(|io| io.pid).collect();
                pids.sort_unstable();
                pids.dedup();
                pids.len()
            }
        };
        if hosts > 1 && groups < hosts {
            out.push(format!(
                "replay_split = \"{}\" shares {} {} out over {hosts} hosts: {} no I/O of the trace",
                w.replay_split.name(),
                groups,
                match w.replay_split {
                    Split::Device => "device(s)",
                    Split::Process => "process(es)",
                    Split::RoundRobin => "I/O(s)",
                },
                if hosts - groups == 1 { "1 host gets".to_string() } else { format!("{} hosts get", hosts - groups) }
            ));
        }
        out
    }

    /// The whole trace's intended I/Os at `speed` in bins from the step's start: tenths of a
    /// second, or [`INTENDED_BINS`] over a longer step (a two-I/O trace of a week must not make
    /// six million bins); the bin's length in seconds first.
    pub fn intended_bins(&self, speed: f64) -> (f64, Vec<u64>) {
        let span_s = self.span_ns(speed) as f64 / 1e9;
        let bin_s = (span_s / INTENDED_BINS as f64).max(0.1);
        let n = ((span_s / bin_s).ceil() as usize).clamp(1, INTENDED_BINS);
        let mut out = vec![0u64; n];
        for io in &self.trace.ios {
            let k = (io.t_ns as f64 / speed / 1e9 / bin_s) as usize;
            out[k.min(n - 1)] += 1;
        }
        (bin_s, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iocurve_trace::TraceIo;

    fn loaded(ios: Vec<TraceIo>, devices: usize) -> Loaded {
        let trace = Trace { devices: (0..devices).map(|d| format!("d{d}")).collect(), ios, ..Default::default() };
        Loaded { path: "t.csv".into(), trace, targets: (0..devices as u32).collect(), spans: vec![1 << 30; devices] }
    }

    fn io(t_ns: u64, device: u32, pid: u32, dir: TraceDir) -> TraceIo {
        TraceIo { t_ns, device, offset: 4096 * t_ns, len: 4096, dir, pid }
    }

    #[test]
    fn hosts_share_the_trace_as_split_says() {
        let l = loaded((0..12).map(|k| io(k, (k % 3) as u32, (k / 6) as u32, TraceDir::Read)).collect(), 3);
        let mut w = Workload { replay: Some("t.csv".into()), ..Default::default() };
        let times = |w: &Workload, h: usize| -> Vec<u64> {
            let s = iocurve_engine::replay::decode(&l.shares(w, 1.0, 2).unwrap()[h]).unwrap();
            s.ios.iter().map(|i| i.t_ns).collect()
        };
        assert_eq!(times(&w, 0), vec![0, 2, 4, 6, 8, 10]);
        w.replay_split = Split::Device;
        // Devices 0 and 2 on host 1, device 1 on host 2.
        assert_eq!(times(&w, 1), vec![1, 4, 7, 10]);
        w.replay_split = Split::Process;
        assert_eq!(times(&w, 0), vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(times(&w, 1), vec![6, 7, 8, 9, 10, 11]);
    }

    #[test]
    fn a_step_covers_the_trace_at_its_speed() {
        // 1000 I/Os 1 ms apart: 1 s of trace.
        let l = loaded((0..1000).map(|k| io(k * 1_000_000, 0, 0, TraceDir::Read)).collect(), 1);
        assert_eq!(l.span_ns(1.0), 1_000_000_000);
        assert_eq!(l.span_ns(2.0), 500_000_000);
        let w = Workload { interval_s: 0.3, warmup_s: 5.0, ..Default::default() };
        let t = l.timed(&w, 1.0);
        assert_eq!((t.warmup_s, t.intervals), (0.0, 3));
        assert!((t.interval_s * 3.0 - 1.0).abs() < 1e-9);
        let (bin, tenths) = l.intended_bins(0.5);
        assert_eq!((bin, tenths.len(), tenths[0], tenths.iter().sum::<u64>()), (0.1, 20, 50, 1000));
        // A long step in 20'000 bins at most.
        let sparse = loaded(vec![io(0, 0, 0, TraceDir::Read), io(86_400_000_000_000, 0, 0, TraceDir::Read)], 1);
        let (bin, bins) = sparse.intended_bins(1.0);
        assert_eq!((bins.len(), bins.iter().sum::<u64>()), (INTENDED_BINS, 2));
        // (The day between its two I/Os and one such gap after the last: 172'800 s.)
        assert!((bin - 172_800.0 / INTENDED_BINS as f64).abs() < 1e-6, "{bin}");
        assert!((l.mean_iops(2.0) - 2000.0).abs() < 1e-6);
    }

    #[test]
    fn the_workload_says_what_the_trace_does() {
        let mut ios: Vec<TraceIo> = (0..7).map(|k| io(k, 0, 0, TraceDir::Read)).collect();
        ios.push(io(8, 0, 0, TraceDir::Write));
        ios.push(TraceIo { len: 1000, ..io(9, 0, 0, TraceDir::Write) });
        ios.push(io(10, 0, 0, TraceDir::Trim));
        let mut w = Workload::default();
        describe(&mut w, &Trace { ios, ..Default::default() });
        assert_eq!((w.read_pct, w.trim_pct), (70.0, 10.0));
        assert_eq!(w.bs.iter().map(|b| b.bytes).collect::<Vec<_>>(), vec![4096, 1024]);
    }
}
