//! Intervals on the wire: every figure the engine measured, histograms in HdrHistogram's own
//! serialization, so that the coordinator merges them exactly (aggregate percentiles come from
//! merged histograms, never from averaged percentiles).

use iocurve_stats::{
    CpuUsage, DirStats, ErrorCounts, HostFacts, IntervalStats, IoCpu, LatencyHistogram, RateStats, Sample, VerifyCounts,
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
    let Some(d) = d else { return Ok(DirStats::default()) };
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

pub fn interval_to(index: u32, s: &IntervalStats, cpu: &CpuUsage, duration_s: f64) -> pb::Interval {
    pb::Interval {
        index,
        read: Some(dir_to(&s.read)),
        write: Some(dir_to(&s.write)),
        trim: (s.trim != DirStats::default()).then(|| dir_to(&s.trim)),
        samples: s
            .samples
            .iter()
            .map(|x| pb::Sample {
                ops: x.ops,
                bytes: x.bytes,
                lat_sum_ns: x.lat_sum_ns,
                lat_max_ns: x.lat_max_ns,
                errors: x.errors,
            })
            .collect(),
        cpu_user: cpu.user,
        cpu_system: cpu.system,
        cpu_iowait: cpu.iowait,
        duration_s,
        max_gap_ns: s.max_gap_ns,
        faults_injected: s.faults_injected,
        verify: Some(verify_to(&s.verify)),
        rate: s.rate.as_deref().map(rate_to),
        members: s.members.iter().map(|m| interval_to(index, m, cpu, duration_s)).collect(),
    }
}

/// An interval as the agent measured it: (index, stats, host CPU, duration).
pub fn interval_from(i: &pb::Interval) -> Result<(u32, IntervalStats, CpuUsage, f64), String> {
    let stats = IntervalStats {
        read: dir_from(i.read.as_ref())?,
        write: dir_from(i.write.as_ref())?,
        trim: dir_from(i.trim.as_ref())?,
        samples: i
            .samples
            .iter()
            .map(|x| Sample {
                ops: x.ops,
                bytes: x.bytes,
                lat_sum_ns: x.lat_sum_ns,
                lat_max_ns: x.lat_max_ns,
                errors: x.errors,
            })
            .collect(),
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
    };
    let cpu = CpuUsage { user: i.cpu_user, system: i.cpu_system, iowait: i.cpu_iowait };
    Ok((i.index, stats, cpu, i.duration_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_crosses_the_wire_unchanged() {
        let mut s = IntervalStats::with_samples(2);
        for i in 0..1000 {
            s.read.record(1000 + i * 37, 4096);
            s.samples[(i % 2) as usize].record(1000 + i * 37, 4096);
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
        let cpu = CpuUsage { user: 1.5, system: 2.5, iowait: 0.5 };
        let (idx, back, cpu2, d) = interval_from(&interval_to(4, &s, &cpu, 0.5)).unwrap();
        assert_eq!((idx, d), (4, 0.5));
        assert_eq!(back, s);
        assert_eq!(cpu2, cpu);
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
