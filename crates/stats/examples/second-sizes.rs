//! Bytes per second of the per-second histogram formats considered for issue 44, on real
//! seconds: reads `iocurve export RUN --format seconds` (CSV on stdin), rebuilds each second's
//! latencies (each bucket's count at its midpoint) and prints the mean bytes per second of our
//! sparse encoding against HdrHistogram at 1 and 2 significant digits, V2 plain and V2 +
//! deflate. `cargo run --release -p iocurve-stats --example second-sizes < seconds.csv`
use std::collections::BTreeMap;
use std::io::Read;

use hdrhistogram::Histogram;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer, V2Serializer};
use iocurve_stats::SecondHist;

fn main() {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).expect("CSV on stdin");
    let mut seconds: BTreeMap<(String, String, String), Vec<(u64, u64)>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        let (from, to, n): (u64, u64, u64) = (f[6].parse().unwrap(), f[7].parse().unwrap(), f[8].parse().unwrap());
        seconds.entry((f[1].into(), f[2].into(), f[4].into())).or_default().push(((from + to) / 2, n));
    }
    let mut sums = [0usize; 5];
    for buckets in seconds.values() {
        let ours = SecondHist::of(buckets.iter().flat_map(|&(v, n)| std::iter::repeat_n(v, n as usize)));
        sums[0] += ours.encode().len();
        for (k, digits) in [(1, 1u8), (3, 2)] {
            let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, digits).unwrap();
            h.auto(true);
            for &(v, n) in buckets {
                h.record_n(v.max(1), n).unwrap();
            }
            let (mut plain, mut packed) = (Vec::new(), Vec::new());
            V2Serializer::new().serialize(&h, &mut plain).unwrap();
            V2DeflateSerializer::new().serialize(&h, &mut packed).unwrap();
            sums[k] += plain.len();
            sums[k + 1] += packed.len();
        }
    }
    let n = seconds.len().max(1);
    println!("{} seconds; mean bytes per second:", seconds.len());
    for (name, s) in [
        ("ours (16 per octave, sparse varints)", sums[0]),
        ("HdrHistogram 1 digit, V2", sums[1]),
        ("HdrHistogram 1 digit, V2 + deflate", sums[2]),
        ("HdrHistogram 2 digits, V2", sums[3]),
        ("HdrHistogram 2 digits, V2 + deflate", sums[4]),
    ] {
        println!("  {name}: {}", s / n);
    }
}
