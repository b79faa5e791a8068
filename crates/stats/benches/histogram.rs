//! Cost of recording one latency into a histogram, and of merging two (interval hand-over).

use criterion::{BatchSize, Criterion, black_box, criterion_group, criterion_main};
use iocurve_stats::{IntervalStats, LatencyHistogram, SecondHist, SecondHists};

fn record(c: &mut Criterion) {
    // Latencies spread like a real run: 20 µs to 2 ms.
    let values: Vec<u64> = (0..4096u64).map(|i| 20_000 + (i * 2_654_435_761) % 2_000_000).collect();
    c.bench_function("histogram record", |b| {
        let mut h = LatencyHistogram::new();
        let mut i = 0;
        b.iter(|| {
            h.record(black_box(values[i & 4095]));
            i += 1;
        })
    });
    c.bench_function("interval record (histogram + counters + sample)", |b| {
        let mut s = IntervalStats::with_samples(1);
        let mut i = 0;
        b.iter(|| {
            let v = black_box(values[i & 4095]);
            s.read.record(v, 4096);
            s.samples[0].record(v, 4096);
            i += 1;
        })
    });
    let mut full = LatencyHistogram::new();
    for v in &values {
        full.record(*v);
    }
    c.bench_function("histogram merge", |b| {
        b.iter_batched(LatencyHistogram::new, |mut h| h.merge(black_box(&full)), BatchSize::SmallInput)
    });
}

/// Issue 44: one agent's interval of second histograms as the coordinator takes it: each
/// second's bytes decoded (checked), made dense, and merged into the interval of all hosts.
/// `bench/seconds-cost` quotes it against the scale-out budget of issue 46 (≤ 0.3 ms of
/// coordinator CPU per agent and interval).
fn seconds(c: &mut Criterion) {
    c.bench_function("seconds record", |b| {
        let mut s = SecondHists::with_seconds(20);
        let mut i = 0usize;
        b.iter(|| {
            s.record(black_box(i % 20), black_box(20_000 + (i as u64 * 2_654_435_761) % 2_000_000));
            i += 1;
        })
    });
    for (secs, spread) in [(20usize, 4u32), (20, 10), (60, 4)] {
        // A second's I/Os spread over `spread` octaves from 50 µs (a busy host: 100'000 I/Os a
        // second), a tail of single I/Os above: what a real second fills (16 buckets an octave).
        let mut agent = SecondHists::with_seconds(secs);
        let mut x: u64 = 0x9e37_79b9;
        for si in 0..secs {
            for _ in 0..2_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let octave = (x % 1000) as f64 / 1000.0 * spread as f64;
                agent.record_n(si, (50_000.0 * 2f64.powf(octave)) as u64, 50);
            }
        }
        let wire: Vec<Vec<u8>> = agent.to_sparse().iter().map(SecondHist::encode).collect();
        let bytes: usize = wire.iter().map(Vec::len).sum();
        let name =
            format!("seconds decode+merge, {secs} s interval, {spread} octaves ({} B/s on the wire)", bytes / secs);
        let mut all = SecondHists::with_seconds(secs);
        c.bench_function(&name, |b| {
            b.iter(|| {
                let hists: Vec<SecondHist> = wire.iter().map(|w| SecondHist::decode(black_box(w)).unwrap()).collect();
                all.merge(&SecondHists::from_sparse(&hists, secs));
            })
        });
    }
}

criterion_group!(benches, record, seconds);
criterion_main!(benches);
