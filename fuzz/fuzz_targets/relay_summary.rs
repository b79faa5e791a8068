//! A relay's summaries of its hosts as the coordinator takes them (issue 46): any bytes decoded
//! as a protobuf `Done` (prost), each of its `HostSummary`s read with
//! `wire::host_summary_from` — its interval checked as an agent's is, names escaped, nonsense
//! bounded — and made the host's one-interval record, analysed as a step's host row is. A
//! hostile or broken relay gets an error, never a panic, abort or huge allocation.
#![no_main]

use iocurve_fuzz::write_seeds;
use iocurve_net::{pb, wire};
use iocurve_stats::{HostClock, HostRecord, IntervalStats, StepRecord};
use libfuzzer_sys::fuzz_target;
use prost::Message;

/// A relay's `Done` for two hosts as a relay writes it: one that measured three intervals of
/// reads and writes, one lost before it measured any.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut rec = StepRecord::new(4, 8, 2, 1.0, 1.0);
    for k in 0..3u64 {
        let mut s = IntervalStats::default();
        for i in 0..50 {
            s.read.record(100_000 + i * 997 + k, 4096);
            s.write.record(250_000 + i * 1013, 8192);
        }
        rec.push_interval(s, Default::default(), 1.0);
    }
    let host = |address: &str, record: StepRecord, lost_at_s| HostRecord {
        address: address.into(),
        hostname: "node1".into(),
        started_unix_ns: 1_700_000_000_000_000_000,
        lost_at_s,
        clock: HostClock { offset_ns: 12_000, rtt_ns: 150_000, offset_after_ns: Some(13_000), rtt_after_ns: 140_000 },
        record,
    };
    let done = pb::Done {
        hosts: 2,
        summaries: vec![
            wire::host_summary_to(&host("10.0.0.5:7420", rec, None), 1.0),
            wire::host_summary_to(&host("10.0.0.6:7420", StepRecord::new(4, 8, 2, 1.0, 1.0), Some(0.0)), 1.0),
        ],
        ..Default::default()
    };
    vec![("two-hosts".into(), done.encode_to_vec())]
}

fuzz_target!(init: write_seeds("relay_summary", seeds), |data: &[u8]| {
    let Ok(done) = pb::Done::decode(data) else { return };
    for s in done.summaries.iter().take(64) {
        let Ok(read) = wire::host_summary_from(s) else { continue };
        assert!(!read.address.chars().any(char::is_control), "{:?}", read.address);
        assert!(read.lost_at_s.is_none_or(|t| t.is_finite() && t >= 0.0));
        let mut rec = StepRecord::new(1, 1, read.threads, 1.0, 1.0);
        if let Some((stats, cpu, duration_s)) = read.total {
            rec.push_interval(stats, cpu, duration_s);
        }
        let _ = iocurve_analysis::analyze_step(&rec, false, &Default::default());
    }
});
