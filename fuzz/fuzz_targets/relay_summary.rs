//! A relay's summary of one of its hosts as the coordinator takes it (issue 46): any bytes
//! decoded as a protobuf `HostSummary` (prost), read with `wire::host_summary_from` through
//! relays of ordinary and extreme clocks and target places — its interval checked as an
//! agent's is, no part of a target not the relay's, names escaped, nonsense bounded, clocks
//! composed without overflow — and made the host's one-interval record, analysed as a step's
//! host row is. A hostile or broken relay gets an error, never a panic, abort or huge
//! allocation.
#![no_main]

use iocurve_fuzz::write_seeds;
use iocurve_net::{pb, wire};
use iocurve_stats::{HostClock, HostRecord, IntervalStats, StepRecord};
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// Summaries as a relay writes them: a host that measured three intervals of reads and writes
/// with errors on its target, one lost before it measured any.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut rec = StepRecord::new(4, 8, 2, 1.0, 1.0);
    for k in 0..3u64 {
        let mut s = IntervalStats::default();
        for i in 0..50 {
            s.read.record(100_000 + i * 997 + k, 4096);
            s.write.record(250_000 + i * 1013, 8192);
        }
        s.read.errors.add(0, 5, 2);
        rec.push_interval(s, Default::default(), 1.0);
    }
    let host = |record: StepRecord, lost_at_s| HostRecord {
        address: "10.0.0.5:7420".into(),
        hostname: "node1".into(),
        started_unix_ns: 1_700_000_000_000_000_000,
        lost_at_s,
        clock: HostClock { offset_ns: 12_000, rtt_ns: 150_000, offset_after_ns: Some(13_000), rtt_after_ns: 140_000 },
        record,
    };
    let cpu = iocurve_stats::CpuUsage { user: 0.3, own: Some(0.1), ..Default::default() };
    let lost = StepRecord::new(4, 8, 2, 1.0, 1.0);
    vec![
        ("measured".into(), wire::host_summary_to(&host(rec, None), 1.0, &cpu).encode_to_vec()),
        ("lost".into(), wire::host_summary_to(&host(lost, Some(0.0)), 1.0, &cpu).encode_to_vec()),
    ]
}

fuzz_target!(init: write_seeds("relay_summary", seeds), |data: &[u8]| {
    let Ok(s) = pb::HostSummary::decode(data) else { return };
    let relays = [
        wire::Through { offset_ns: 12_000, rtt_ns: 200_000, after: Some((13_000, 190_000)), target_offset: 3, target_count: 4 },
        wire::Through { offset_ns: i64::MIN, rtt_ns: i64::MAX, after: Some((i64::MAX, i64::MIN)), target_offset: u32::MAX - 1, target_count: 1 },
    ];
    for via in &relays {
        let Ok(read) = wire::host_summary_from(&s, via) else { continue };
        assert!(!read.address.chars().any(char::is_control), "{:?}", read.address);
        assert!(read.lost_at_s.is_none_or(|t| t.is_finite() && t >= 0.0));
        assert!(read.clock.rtt_ns >= 0 && read.started_unix_ns >= 0);
        // Every target part and error on one of the relay's targets, in the run's places.
        let (from, to) = (via.target_offset, via.target_offset.saturating_add(via.target_count));
        if let Some((stats, _, _)) = &read.total {
            assert!(stats.targets.iter().all(|t| (from..to).contains(&t.target)));
            for d in [&stats.read, &stats.write, &stats.trim] {
                assert!(d.errors.0.iter().all(|e| e.0 == iocurve_stats::UNKNOWN_TARGET || (from..to).contains(&e.0)));
            }
        }
        let mut rec = StepRecord::new(1, 1, read.threads, 1.0, 1.0);
        if let Some((stats, cpu, duration_s)) = read.total {
            rec.push_interval(stats, cpu, duration_s);
        }
        let _ = iocurve_analysis::analyze_step(&rec, false, &Default::default());
    }
});
