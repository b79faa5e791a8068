//! Intervals on the wire: every figure the engine measured, histograms in HdrHistogram's own
//! serialization, so that the coordinator merges them exactly (aggregate percentiles come from
//! merged histograms, never from averaged percentiles).

use iocurve_stats::{
    CpuUsage, DeviceIo, DirStats, ErrorCounts, HostClock, HostFacts, HostRecord, IntervalStats, IoCpu,
    LatencyHistogram, RateStats, Sample, SecondHist, SecondHists, TargetStats, VerifyCounts,
};

use crate::pb;

fn dir_to(d: &DirStats) -> pb::Direction {
    pb::Direction {
        hist: d.hist.to_bytes(),
        ops: d.ops,
        bytes: d.bytes,
        errors: d.errors.0.iter().map(|&(target, errno, count)| pb::ErrorCount { target, errno, count }).collect(),
    }
}

fn dir_from(d: Option<&pb::Direction>) -> Result<DirStats, String> {
    // An interval without trims leaves them out: no full histogram for them (216 KiB per agent
    // interval at the coordinator, review of fef5a4d).
    let Some(d) = d else { return Ok(DirStats::empty()) };
    let mut errors = ErrorCounts::default();
    for e in &d.errors {
        errors.add(e.target, e.errno, e.count);
    }
    Ok(DirStats { hist: LatencyHistogram::from_bytes(&d.hist)?, ops: d.ops, bytes: d.bytes, errors })
}

fn rate_to(r: &RateStats) -> pb::Rate {
    pb::Rate {
        service: r.service.to_bytes(),
        lag: r.lag.to_bytes(),
        due: r.due,
        dropped: r.dropped,
        backlog: r.backlog,
        overloaded: r.overloaded,
    }
}

fn rate_from(r: &pb::Rate) -> Result<RateStats, String> {
    Ok(RateStats {
        service: LatencyHistogram::from_bytes(&r.service)?,
        lag: LatencyHistogram::from_bytes(&r.lag)?,
        due: r.due,
        dropped: r.dropped,
        backlog: r.backlog,
        overloaded: r.overloaded,
    })
}

/// Verification counts on the wire, and back (examples capped as the counts cap them).
pub fn verify_to(v: &VerifyCounts) -> pb::Verify {
    pb::Verify {
        checked: v.checked,
        lost: v.lost,
        corrupt: v.corrupt,
        misplaced: v.misplaced,
        unreadable: v.unreadable,
        in_flight: v.in_flight,
        examples: v.examples.clone(),
    }
}

pub fn verify_from(v: &pb::Verify) -> VerifyCounts {
    VerifyCounts {
        checked: v.checked,
        lost: v.lost,
        corrupt: v.corrupt,
        misplaced: v.misplaced,
        unreadable: v.unreadable,
        in_flight: v.in_flight,
        // Escaped: they come from an agent and are printed (issue 35, finding 8).
        examples: v.examples.iter().take(VerifyCounts::EXAMPLES).map(|e| crate::printable(e)).collect(),
    }
}

pub fn io_cpu_to(c: &IoCpu) -> pb::IoCpu {
    pb::IoCpu { busiest: c.busiest, total: c.total }
}

/// An agent's figure for the CPU of its I/O threads, if one a host can have: a thread runs at
/// most its wall time (twice that allows for when it read its clocks), and a host has at most
/// 4096 I/O threads (psync). Anything else is dropped, not believed.
pub fn io_cpu_from(c: &pb::IoCpu) -> Option<IoCpu> {
    let plausible = (0.0..=2.0).contains(&c.busiest) && (c.busiest..=c.busiest * 4096.0).contains(&c.total);
    plausible.then_some(IoCpu { busiest: c.busiest, total: c.total })
}

/// An agent's host facts from its Hello.
pub fn host_facts(h: &pb::HelloReply) -> HostFacts {
    HostFacts {
        hostname: h.hostname.clone(),
        kernel: h.kernel.clone(),
        cpu_model: h.cpu_model.clone(),
        cores: h.cores as usize,
        smt: h.smt,
        governor: Some(crate::printable(&h.governor)).filter(|g| !g.is_empty()),
    }
}

/// What an agent's host lacks, as its Hello says (a name this iocurve does not know is ignored:
/// the protocol check has already refused a different iocurve).
pub fn availability(h: &pb::HelloReply) -> iocurve_plan::Availability {
    iocurve_plan::Availability::lacking(
        h.unavailable.iter().filter_map(|u| iocurve_plan::Backend::parse(&u.backend).map(|b| (b, u.reason.clone()))),
    )
}

/// [`availability`]'s way out.
pub fn unavailable_to(a: &iocurve_plan::Availability) -> Vec<pb::Unavailable> {
    a.missing().iter().map(|(b, why)| pb::Unavailable { backend: b.name().into(), reason: why.clone() }).collect()
}

fn sample_to(x: &Sample) -> pb::Sample {
    pb::Sample {
        ops: x.ops,
        bytes: x.bytes,
        lat_sum_ns: x.lat_sum_ns,
        lat_max_ns: x.lat_max_ns,
        errors: x.errors,
        hist: Vec::new(),
    }
}

/// An interval's samples with each second's histogram.
fn samples_to(s: &IntervalStats) -> Vec<pb::Sample> {
    let keep = s.seconds.seconds() > 0;
    s.samples
        .iter()
        .enumerate()
        .map(|(k, x)| pb::Sample { hist: if keep { s.seconds.get(k).encode() } else { Vec::new() }, ..sample_to(x) })
        .collect()
}

/// An agent's second histograms, checked before anything is allocated for them: at most
/// [`iocurve_stats::seconds::MAX_SECONDS`] of them, each a valid encoding holding exactly its
/// sample's I/Os (untrusted input: a hostile or broken agent gets a clear error, the
/// coordinator no panic and no huge block).
fn seconds_from(list: &[pb::Sample], samples: &[Sample]) -> Result<SecondHists, String> {
    if list.iter().all(|x| x.hist.is_empty()) {
        return Ok(SecondHists::default());
    }
    if list.len() > iocurve_stats::seconds::MAX_SECONDS {
        return Err(format!(
            "second histograms for {} samples (at most {})",
            list.len(),
            iocurve_stats::seconds::MAX_SECONDS
        ));
    }
    let hists = list
        .iter()
        .enumerate()
        .map(|(k, x)| SecondHist::decode(&x.hist).map_err(|e| format!("sample {k}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    iocurve_stats::seconds::check(samples, &hists)?;
    Ok(SecondHists::from_sparse(&hists, samples.len()))
}

fn sample_from(x: &pb::Sample) -> Sample {
    Sample { ops: x.ops, bytes: x.bytes, lat_sum_ns: x.lat_sum_ns, lat_max_ns: x.lat_max_ns, errors: x.errors }
}

fn target_to(t: &TargetStats) -> pb::TargetPart {
    pb::TargetPart {
        target: t.target,
        read_ops: t.read_ops,
        read_bytes: t.read_bytes,
        write_ops: t.write_ops,
        write_bytes: t.write_bytes,
        trim_ops: t.trim_ops,
        trim_bytes: t.trim_bytes,
        hist: t.hist.to_bytes(),
        errors: t.errors,
        samples: t.samples.iter().map(sample_to).collect(),
        device: t.device.map(|d| pb::DeviceIo {
            reads: d.reads,
            read_sectors: d.read_sectors,
            writes: d.writes,
            write_sectors: d.write_sectors,
            discards: d.discards,
            discard_sectors: d.discard_sectors,
        }),
    }
}

/// Target parts an interval may carry: more than any host opens (a glob's budget is far less).
pub const MAX_TARGET_PARTS: usize = 65_536;

/// An agent's targets' parts, sorted by target (a target named twice is added up). Counted
/// before anything is decoded: a part per target at most, no more samples than the interval's.
fn targets_from(list: &[pb::TargetPart], samples: usize) -> Result<Vec<TargetStats>, String> {
    if list.len() > MAX_TARGET_PARTS {
        return Err(format!("{} targets' parts (at most {MAX_TARGET_PARTS})", list.len()));
    }
    if let Some(t) = list.iter().find(|t| t.samples.len() > samples) {
        return Err(format!("target {}: {} samples in an interval of {samples}", t.target, t.samples.len()));
    }
    let mut order: Vec<&pb::TargetPart> = list.iter().collect();
    order.sort_by_key(|t| t.target);
    let mut out: Vec<TargetStats> = Vec::with_capacity(order.len());
    for t in order {
        let one = TargetStats {
            target: t.target,
            read_ops: t.read_ops,
            read_bytes: t.read_bytes,
            write_ops: t.write_ops,
            write_bytes: t.write_bytes,
            trim_ops: t.trim_ops,
            trim_bytes: t.trim_bytes,
            hist: LatencyHistogram::from_bytes(&t.hist).map_err(|e| format!("target {}: {e}", t.target))?,
            errors: t.errors,
            samples: t.samples.iter().map(sample_from).collect(),
            device: t.device.as_ref().map(|d| DeviceIo {
                reads: d.reads,
                read_sectors: d.read_sectors,
                writes: d.writes,
                write_sectors: d.write_sectors,
                discards: d.discards,
                discard_sectors: d.discard_sectors,
            }),
        };
        match out.last_mut() {
            Some(last) if last.target == one.target => last.merge(&one),
            _ => out.push(one),
        }
    }
    Ok(out)
}

/// A step's live totals, as `Progress` carries them (an agent's, or a relay's group's).
pub fn progress_to(p: &iocurve_engine::StepProgress) -> pb::Progress {
    pb::Progress {
        elapsed_s: p.elapsed_s,
        warmup: p.warmup,
        ops: p.ops,
        bytes: p.bytes,
        lat_sum_ns: p.lat_sum_ns,
        inflight: p.inflight,
    }
}

/// How a step's record says it ended, as `Done` carries it: an agent's own step, or a relay's
/// group's merged one.
pub fn done_to(rec: &iocurve_stats::StepRecord) -> pb::Done {
    pb::Done {
        interrupted: rec.interrupted,
        // The step ended by its error policy: why, beside its figures (not a failure).
        aborted: rec.aborted.is_some(),
        abort_reason: rec.aborted.clone().unwrap_or_default(),
        late: rec.drain.late,
        stuck: rec.drain.stuck,
        stuck_age_ns: rec.drain.stuck_age_ns,
        wait_ns: rec.drain.wait_ns,
        late_faults: rec.drain.faults_injected,
        io_cpu: rec.io_cpu.as_ref().map(io_cpu_to),
        notes: rec
            .notes
            .iter()
            .map(|(code, message)| pb::Note { code: code.clone(), message: message.clone() })
            .collect(),
        unmeasured_errors: rec
            .unmeasured_errors
            .0
            .iter()
            .map(|&(target, errno, count)| pb::ErrorCount { target, errno, count })
            .collect(),
        ..Default::default()
    }
}

/// I/Os in one `IoLogPart`: about a megabyte packed, well under a gRPC message's limit.
const IOLOG_PART_IOS: usize = 100_000;

/// A step's I/O log (`ios` in time order of their host's step, `left_out` not kept) as the
/// events that carry it up: packed as a replay share is, at least one, the last saying how many
/// were left out. An agent's, or a relay's for its group.
pub fn iolog_parts(ios: &[iocurve_engine::replay::ReplayIo], left_out: u64) -> Vec<pb::IoLogPart> {
    let pack = |chunk: &[iocurve_engine::replay::ReplayIo]| {
        iocurve_engine::replay::encode(&iocurve_engine::replay::ReplayShare {
            ios: chunk.to_vec(),
            speed: 1.0,
            remap: iocurve_plan::Remap::Modulo,
            spans: Vec::new(),
        })
    };
    let mut parts: Vec<pb::IoLogPart> =
        ios.chunks(IOLOG_PART_IOS).map(|c| pb::IoLogPart { ios: pack(c), left_out: 0 }).collect();
    match parts.last_mut() {
        Some(last) => last.left_out = left_out,
        None => parts.push(pb::IoLogPart { ios: pack(&[]), left_out }),
    }
    parts
}

pub fn interval_to(index: u32, s: &IntervalStats, cpu: &CpuUsage, duration_s: f64) -> pb::Interval {
    pb::Interval {
        index,
        read: Some(dir_to(&s.read)),
        write: Some(dir_to(&s.write)),
        trim: (!s.trim.is_empty()).then(|| dir_to(&s.trim)),
        samples: samples_to(s),
        cpu_user: cpu.user,
        cpu_system: cpu.system,
        cpu_iowait: cpu.iowait,
        duration_s,
        max_gap_ns: s.max_gap_ns,
        faults_injected: s.faults_injected,
        verify: Some(verify_to(&s.verify)),
        rate: s.rate.as_deref().map(rate_to),
        members: s.members.iter().map(|m| interval_to(index, m, cpu, duration_s)).collect(),
        targets: s.targets.iter().map(target_to).collect(),
        cpu_steal: cpu.steal,
        cpu_own: cpu.own,
        hosts: 0,
    }
}

/// An interval of an agent (or a relay) whose targets start at `offset` in the run's list: its
/// errors and target parts name the run's places (a concurrent step's members' too).
pub fn shift_targets(s: &mut IntervalStats, offset: u32) {
    for d in [&mut s.read, &mut s.write, &mut s.trim] {
        for e in &mut d.errors.0 {
            // (An agent's own error names any target it likes: bounded, not wrapped.)
            if e.0 != iocurve_stats::UNKNOWN_TARGET {
                e.0 = e.0.saturating_add(offset);
            }
        }
    }
    for t in &mut s.targets {
        t.target += offset;
    }
    // A concurrent step's members' errors are on the same targets.
    for m in &mut s.members {
        shift_targets(m, offset);
    }
}

/// A host behind a relay over a step, for the relay's coordinator (issue 46): its measured
/// intervals merged exactly (its record's `total`), their count and length (`interval_s`
/// each, as the merged intervals count them), and `cpu`: the host CPU over them.
pub fn host_summary_to(h: &HostRecord, interval_s: f64, cpu: &CpuUsage) -> pb::HostSummary {
    let r = &h.record;
    pb::HostSummary {
        address: h.address.clone(),
        hostname: h.hostname.clone(),
        started_unix_ns: h.started_unix_ns,
        threads: r.threads as u32,
        workers: r.workers,
        lost_at_s: h.lost_at_s,
        offset_ns: h.clock.offset_ns,
        rtt_ns: h.clock.rtt_ns,
        offset_after_ns: h.clock.offset_after_ns,
        rtt_after_ns: h.clock.rtt_after_ns,
        total: Some(interval_to(r.measured as u32, &r.total_as_one(), cpu, r.measured as f64 * interval_s)),
    }
}

/// The relay a summary came through, as the coordinator knows it: its clock against the
/// coordinator's (before the step, and after it where measured), and its targets' places in
/// the run's list.
#[derive(Debug, Clone, Copy, Default)]
pub struct Through {
    pub offset_ns: i64,
    pub rtt_ns: i64,
    pub after: Option<(i64, i64)>,
    pub target_offset: u32,
    pub target_count: u32,
}

/// A relay's summary of one of its hosts as the coordinator reads it ([`host_summary_from`]),
/// on the coordinator's clock, its targets the run's.
#[derive(Debug)]
pub struct HostSummaryRead {
    pub address: String,
    pub hostname: String,
    /// On the coordinator's clock; 0: it never started.
    pub started_unix_ns: i64,
    pub threads: usize,
    /// The workers it ran, as the relay says (its share of the step's, uneven hosts).
    pub workers: u32,
    /// A finite time, not before the step's start.
    pub lost_at_s: Option<f64>,
    pub clock: HostClock,
    /// How many intervals it merges, and they together: None where it measured nothing (or
    /// says so with a length that is no length).
    pub measured: u32,
    pub total: Option<(IntervalStats, CpuUsage, f64)>,
}

/// Reads a relay's summary of one of its hosts (issue 46): its interval checked as an agent's
/// is ([`interval_from`]), no part of a target not the relay's, no member parts (a summary has
/// none), its names escaped, nonsense (a loss at NaN, four billion threads, a negative round
/// trip) dropped or bounded; then put on the coordinator's clock (the host's offset from the
/// relay plus the relay's from the coordinator, their round trips added: the uncertainty of
/// each measurement) and its targets in the run's places. An error where it does not read.
pub fn host_summary_from(s: &pb::HostSummary, via: &Through) -> Result<HostSummaryRead, String> {
    let (measured, mut stats, cpu, duration_s) = interval_from(s.total.as_ref().ok_or("no figures")?)?;
    if !stats.members.is_empty() {
        return Err("members' parts in a host's summary".into());
    }
    if let Some(t) = stats.targets.iter().find(|t| t.target >= via.target_count) {
        return Err(format!("a part of target {} of the relay's {}", t.target, via.target_count));
    }
    let errors = [&stats.read, &stats.write, &stats.trim].into_iter().flat_map(|d| d.errors.0.iter());
    if let Some(e) = errors.filter(|e| e.0 != iocurve_stats::UNKNOWN_TARGET).find(|e| e.0 >= via.target_count) {
        return Err(format!("errors on target {} of the relay's {}", e.0, via.target_count));
    }
    shift_targets(&mut stats, via.target_offset);
    let rtt = |v: i64| v.max(0);
    Ok(HostSummaryRead {
        address: crate::printable(&s.address),
        hostname: crate::printable(&s.hostname),
        started_unix_ns: if s.started_unix_ns > 0 { s.started_unix_ns.saturating_sub(via.offset_ns).max(0) } else { 0 },
        threads: (s.threads as usize).min(1 << 16),
        workers: s.workers,
        lost_at_s: s.lost_at_s.filter(|t| t.is_finite() && *t >= 0.0),
        clock: HostClock {
            offset_ns: s.offset_ns.saturating_add(via.offset_ns),
            rtt_ns: rtt(s.rtt_ns).saturating_add(rtt(via.rtt_ns)),
            offset_after_ns: s.offset_after_ns.zip(via.after).map(|(a, (b, _))| a.saturating_add(b)),
            rtt_after_ns: rtt(s.rtt_after_ns).saturating_add(via.after.map_or(0, |m| rtt(m.1))),
        },
        measured,
        total: (measured > 0 && duration_s.is_finite() && duration_s > 0.0).then_some((stats, cpu, duration_s)),
    })
}

/// An interval as the agent measured it: (index, stats, host CPU, duration).
pub fn interval_from(i: &pb::Interval) -> Result<(u32, IntervalStats, CpuUsage, f64), String> {
    let samples: Vec<Sample> = i.samples.iter().map(sample_from).collect();
    let stats = IntervalStats {
        read: dir_from(i.read.as_ref())?,
        write: dir_from(i.write.as_ref())?,
        trim: dir_from(i.trim.as_ref())?,
        seconds: seconds_from(&i.samples, &samples)?,
        samples,
        max_gap_ns: i.max_gap_ns,
        faults_injected: i.faults_injected,
        verify: i.verify.as_ref().map_or_else(VerifyCounts::default, verify_from),
        rate: i.rate.as_ref().map(rate_from).transpose()?.map(Box::new),
        // One level deep: a member has no members of its own (a hostile nesting is refused).
        members: i
            .members
            .iter()
            .map(|m| {
                if !m.members.is_empty() {
                    return Err("a member's interval has members of its own".to_string());
                }
                interval_from(m).map(|(_, s, _, _)| s)
            })
            .collect::<Result<_, _>>()?,
        targets: targets_from(&i.targets, i.samples.len())?,
    };
    // A share of a host is 0 to 100 % (anything else is dropped, not believed).
    let pct = |x: f64| if (0.0..=100.0).contains(&x) { x } else { 0.0 };
    let cpu = CpuUsage {
        user: i.cpu_user,
        system: i.cpu_system,
        iowait: i.cpu_iowait,
        steal: pct(i.cpu_steal),
        own: i.cpu_own.filter(|x| (0.0..=100.0).contains(x)),
    };
    Ok((i.index, stats, cpu, i.duration_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 44: an agent's second histograms are untrusted: a bad encoding, counts that are not
    /// the sample's I/Os, or more seconds than an interval keeps are clear errors, never a panic
    /// or a huge block; an agent that sends none sends no histograms.
    #[test]
    fn an_agent_s_second_histograms_are_checked() {
        let mut s = IntervalStats::with_samples(2);
        for i in 0..10u64 {
            s.samples[(i % 2) as usize].record(5_000 + i, 4096);
            s.seconds.record((i % 2) as usize, 5_000 + i);
        }
        let good = interval_to(0, &s, &CpuUsage::default(), 1.0);
        assert_eq!(interval_from(&good).unwrap().1.seconds, s.seconds);
        let mut none = good.clone();
        none.samples.iter_mut().for_each(|x| x.hist.clear());
        assert_eq!(interval_from(&none).unwrap().1.seconds, SecondHists::default());
        let mut bad = good.clone();
        bad.samples[1].hist = vec![9, 0, 1];
        assert!(interval_from(&bad).unwrap_err().contains("sample 1: a second's histogram in format 9"));
        let mut wrong = good.clone();
        wrong.samples[0].hist = SecondHist::of([1, 2, 3]).encode();
        assert!(interval_from(&wrong).unwrap_err().contains("a histogram of 3 I/Os for a sample of 5"));
        let mut long = good;
        long.samples = vec![long.samples[0].clone(); iocurve_stats::seconds::MAX_SECONDS + 1];
        assert!(interval_from(&long).unwrap_err().contains("at most 120"));
    }

    #[test]
    fn an_interval_crosses_the_wire_unchanged() {
        let mut s = IntervalStats::with_samples(2);
        for i in 0..1000 {
            s.read.record(1000 + i * 37, 4096);
            s.samples[(i % 2) as usize].record(1000 + i * 37, 4096);
            s.seconds.record((i % 2) as usize, 1000 + i * 37);
        }
        s.write.record(55_555, 8192);
        s.write.errors.add(1, 5, 3);
        s.trim.record(77_777, 1 << 20);
        s.trim.errors.add(0, 95, 1);
        s.max_gap_ns = Some(123);
        s.faults_injected = 3;
        s.verify = VerifyCounts {
            checked: 9,
            lost: 1,
            corrupt: 2,
            misplaced: 3,
            unreadable: 4,
            in_flight: 5,
            examples: vec!["block 7".into()],
        };
        let mut rate = RateStats { due: 1000, dropped: 3, backlog: 2, overloaded: true, ..Default::default() };
        rate.service.record(40_000);
        rate.lag.record(7_000);
        s.rate = Some(Box::new(rate));
        for k in [0u32, 2] {
            let mut t = TargetStats::new(k, 2);
            t.read_ops = 10 + u64::from(k);
            t.write_bytes = 8192;
            t.hist.record(1000 * u64::from(k + 1));
            t.samples[1].record(50, 4096);
            t.errors = 1;
            t.device = (k == 2).then_some(DeviceIo { writes: 3, write_sectors: 48, ..Default::default() });
            s.targets.push(t);
        }
        let cpu = CpuUsage { user: 1.5, system: 2.5, iowait: 0.5, steal: 7.0, own: Some(12.5) };
        let (idx, back, cpu2, d) = interval_from(&interval_to(4, &s, &cpu, 0.5)).unwrap();
        assert_eq!((idx, d), (4, 0.5));
        assert_eq!(back, s);
        assert_eq!(cpu2, cpu);
        // A host's share outside 0..100 % is not believed.
        let mut wild = interval_to(4, &s, &cpu, 0.5);
        (wild.cpu_steal, wild.cpu_own) = (f64::NAN, Some(1e9));
        let (_, _, cpu3, _) = interval_from(&wild).unwrap();
        assert_eq!((cpu3.steal, cpu3.own), (0.0, None));
        // A target named twice adds up; a histogram that does not decode is refused.
        let mut twice = interval_to(4, &s, &cpu, 0.5);
        twice.targets.push(twice.targets[0].clone());
        assert_eq!(interval_from(&twice).unwrap().1.targets[0].read_ops, 20);
        twice.targets[1].hist = vec![1, 2, 3];
        assert!(interval_from(&twice).unwrap_err().contains("target 2"));
        // More samples than the interval has: refused before anything is decoded.
        let mut long = interval_to(4, &s, &cpu, 0.5);
        long.targets[0].samples = vec![pb::Sample::default(); 3];
        assert!(interval_from(&long).unwrap_err().contains("3 samples in an interval of 2"));
    }

    #[test]
    fn an_agents_io_cpu_no_host_can_have_is_dropped() {
        let c = |busiest, total| io_cpu_from(&pb::IoCpu { busiest, total });
        assert_eq!(c(0.97, 1.9), Some(IoCpu { busiest: 0.97, total: 1.9 }));
        assert_eq!(c(0.0, 0.0), Some(IoCpu { busiest: 0.0, total: 0.0 }));
        for (b, t) in [(1e308, 1e308), (f64::NAN, 1.0), (0.5, f64::INFINITY), (-0.1, 0.0), (0.9, 0.5), (0.5, 5000.0)] {
            assert_eq!(c(b, t), None, "{b} {t}");
        }
        let c = IoCpu { busiest: 0.5, total: 0.75 };
        assert_eq!(io_cpu_from(&io_cpu_to(&c)), Some(c), "through the wire unchanged");
    }
}
