//! An agent's intervals as the coordinator takes them (issue 44): any bytes decoded as a
//! protobuf `Interval` (prost), then `wire::interval_from` — which checks each second's latency
//! histogram (its encoding, bucket indices, counts against the sample's I/Os, at most 120
//! seconds) before anything is allocated for it — and the merge the coordinator does. A
//! hostile or broken agent gets an error, never a panic, abort or huge allocation.
#![no_main]

use iocurve_net::{pb, wire};
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Ok(msg) = pb::Interval::decode(data) else { return };
    if let Ok((_, stats, _, _)) = wire::interval_from(&msg) {
        let mut all = iocurve_stats::IntervalStats::default();
        all.merge(&stats);
        all.merge(&stats);
        for k in 0..all.samples.len() {
            let h = all.seconds.get(k);
            let _ = h.percentile_ns(99.0, all.samples[k].lat_max_ns);
        }
    }
});
