//! Cost of recording one latency into a histogram, and of merging two (interval hand-over).

use criterion::{BatchSize, Criterion, black_box, criterion_group, criterion_main};
use iocurve_stats::{IntervalStats, LatencyHistogram};

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

criterion_group!(benches, record);
criterion_main!(benches);
