//! A latency histogram's encoding (issue 46: read into the sparse form without hdrhistogram's
//! reader): any bytes through `LatencyHistogram::from_bytes`, as an agent's interval or a store
//! row brings them, compared with hdrhistogram's own reader wherever that one can safely run (a
//! plain encoding whose stated payload is there: it allocates what a header states). Never
//! panics; reads what hdrhistogram reads, to the same counts, mean, deviation, extremes, counts
//! at or below a value and percentiles, and refuses what it refuses, but for counts adding up
//! beyond 2^63 - 1, more than 3 significant digits and headers iocurve does not write (another
//! lowest value, an offset, a conversion ratio), which only we refuse; what reads encodes
//! (plain and compressed) to bytes that read back to the same histogram.
#![no_main]

use hdrhistogram::Histogram;
use hdrhistogram::serialization::Deserializer;
use iocurve_stats::LatencyHistogram;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let ours = LatencyHistogram::from_bytes(data);
    let plain_and_whole = data.len() >= 40
        && data[..4] == [0x1c, 0x84, 0x93, 0x13]
        && u32::from_be_bytes(data[4..8].try_into().unwrap()) as usize <= data.len() - 40;
    if plain_and_whole {
        // hdrhistogram's reader panics on a run of 2^63 empty buckets (an unchecked negation):
        // ours must refuse what it cannot read. (libFuzzer's panic hook aborts: set aside.)
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let theirs = std::panic::catch_unwind(|| Deserializer::new().deserialize::<u64, _>(&mut &data[..]));
        std::panic::set_hook(hook);
        let Ok(theirs) = theirs else {
            assert!(ours.is_err(), "hdrhistogram's reader panicked, ours read it");
            return;
        };
        // What we refuse and hdrhistogram reads: counts adding up beyond 2^63 - 1 (it saturates
        // the total, then overflows walking them for a percentile) and more than 3 significant
        // digits (iocurve writes 2 or 3; 5 would allocate millions of buckets for 41 bytes), and
        // headers iocurve does not write (its reader allocates every bucket they state).
        let only_ours = [
            "its counts add up beyond 2^63 - 1",
            "significant digits",
            "lowest discernible value",
            "a header iocurve does not write",
        ];
        if let (Err(e), Ok(_)) = (&ours, &theirs)
            && only_ours.iter().any(|m| e.contains(m))
        {
            return;
        }
        assert_eq!(ours.is_ok(), theirs.is_ok(), "ours {:?}, theirs {:?}", ours.as_ref().err(), theirs.as_ref().err());
        if let (Ok(ours), Ok(theirs)) = (&ours, &theirs) {
            same(ours, theirs);
        }
    }
    if let Ok(h) = ours {
        for bytes in [h.to_bytes(), h.to_compressed_bytes()] {
            let back = LatencyHistogram::from_bytes(&bytes).expect("our own encoding reads back");
            assert_eq!(back, h);
            assert_eq!(back.mean_ns().to_bits(), h.mean_ns().to_bits());
        }
    }
});

fn same(ours: &LatencyHistogram, theirs: &Histogram<u64>) {
    assert_eq!(ours.count(), theirs.len());
    if theirs.is_empty() {
        return;
    }
    assert_eq!((ours.min_ns(), ours.max_ns()), (theirs.min(), theirs.max()));
    assert_eq!(ours.mean_ns().to_bits(), theirs.mean().to_bits());
    assert_eq!(ours.stddev_ns().to_bits(), theirs.stdev().to_bits());
    for v in [0, 1, 1_000, theirs.min(), theirs.max() / 2, theirs.max(), u64::MAX] {
        assert_eq!(ours.count_at_or_below(v), theirs.count_between(0, v), "at or below {v}");
    }
    for p in [0.0, 50.0, 99.0, 99.99, 100.0] {
        assert_eq!(ours.percentile_ns(p), theirs.value_at_percentile(p), "p{p}");
    }
    let buckets: Vec<(u64, u64)> =
        theirs.iter_recorded().map(|v| (v.value_iterated_to(), v.count_at_value())).collect();
    assert!(ours.buckets().eq(buckets));
}
