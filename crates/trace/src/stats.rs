//! A trace's figures (issue 45, part 4): rates, the mix of directions and sizes, sequential
//! shares, skew and inter-arrival times: what a plan that mimics the trace needs. Pure; exact on
//! hand-made traces (the tests say which figure each definition gives).

use std::collections::HashMap;

use crate::{Trace, TraceDir};

/// The sizes named one by one in a direction's mix; the rest are "other".
pub const SIZE_MIX_TOP: usize = 8;
/// The unit of the skew figures.
pub const SKEW_BLOCK: u64 = 4096;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TraceStats {
    pub ios: u64,
    /// From the first I/O to the last.
    pub duration_s: f64,
    /// I/Os per second between the first and the last: (ios − 1) / duration (0 for a trace
    /// without duration), so I/Os evenly spaced by d give exactly 1/d.
    pub mean_iops: f64,
    /// The most I/Os in one second of the trace (seconds counted from the first I/O: [0 s, 1 s),
    /// [1 s, 2 s), …).
    pub peak_iops: u64,
    /// Read, write, trim: those with I/Os, in that order.
    pub dirs: Vec<DirStats>,
    pub skew: Skew,
    /// None for fewer than 2 I/Os.
    pub inter_arrival: Option<InterArrival>,
    /// In the order of [`Trace::devices`].
    pub devices: Vec<DeviceStats>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DirStats {
    pub dir: TraceDir,
    pub ios: u64,
    /// Of all I/Os, in percent.
    pub share_pct: f64,
    pub bytes: u64,
    pub mean_size: f64,
    /// The most frequent sizes (at most [`SIZE_MIX_TOP`]), most frequent first (equal counts:
    /// smaller size first), each with its share of this direction's I/Os.
    pub sizes: Vec<SizeShare>,
    /// The share of the sizes not named in `sizes`, in percent.
    pub other_sizes_pct: f64,
    /// The share of this direction's I/Os that start where the previous I/O of the same device
    /// and direction ended, in percent (the first of each device and direction is not).
    pub sequential_pct: f64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SizeShare {
    pub size: u32,
    pub ios: u64,
    pub share_pct: f64,
}

/// How concentrated the I/Os are. Each I/O counts on the 4 KiB block where it starts (its device
/// and offset / 4096); the busiest n % of the touched blocks are the ceil(n % × touched) blocks
/// with the most I/Os.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Skew {
    /// Distinct 4 KiB blocks I/Os start in, all devices.
    pub blocks_touched: u64,
    /// The share of all I/Os (percent) on the busiest 1 %, 10 % and 20 % of the touched blocks.
    pub busiest_1pct: f64,
    pub busiest_10pct: f64,
    pub busiest_20pct: f64,
}

/// The gaps between consecutive I/Os (all devices), in nanoseconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct InterArrival {
    pub mean_ns: f64,
    /// Nearest-rank percentiles of the gaps.
    pub p50_ns: u64,
    pub p99_ns: u64,
    /// Standard deviation / mean (population): about 1 for Poisson arrivals, 0 for evenly spaced
    /// ones, over 1 for bursts; 0 when the mean is 0.
    pub cv: f64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DeviceStats {
    pub name: String,
    pub ios: u64,
    pub reads: u64,
    pub writes: u64,
    pub trims: u64,
    pub bytes: u64,
    /// The lowest offset and the highest end (offset + length) of its I/Os, in bytes.
    pub lowest_offset: u64,
    pub highest_end: u64,
    /// highest_end − lowest_offset.
    pub span_bytes: u64,
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 { 0.0 } else { part as f64 * 100.0 / whole as f64 }
}

pub(crate) fn compute(t: &Trace) -> TraceStats {
    let ios = t.ios.len() as u64;
    let duration_ns = t.duration_ns();
    let duration_s = duration_ns as f64 / 1e9;
    let mean_iops = if duration_ns == 0 { 0.0 } else { (ios - 1) as f64 / duration_s };
    TraceStats {
        ios,
        duration_s,
        mean_iops,
        peak_iops: peak_per_second(t),
        dirs: TraceDir::ALL.iter().filter_map(|&d| dir_stats(t, d)).collect(),
        skew: skew(t),
        inter_arrival: inter_arrival(t),
        devices: devices(t),
    }
}

fn peak_per_second(t: &Trace) -> u64 {
    let mut peak = 0;
    let mut second = None;
    let mut count = 0;
    for io in &t.ios {
        let s = io.t_ns / 1_000_000_000;
        if second != Some(s) {
            second = Some(s);
            count = 0;
        }
        count += 1;
        peak = peak.max(count);
    }
    peak
}

fn dir_stats(t: &Trace, dir: TraceDir) -> Option<DirStats> {
    let mut n = 0u64;
    let mut bytes = 0u64;
    let mut sizes: HashMap<u32, u64> = HashMap::new();
    let mut ends: HashMap<u32, u64> = HashMap::new();
    let mut sequential = 0u64;
    for io in t.ios.iter().filter(|io| io.dir == dir) {
        n += 1;
        bytes = bytes.saturating_add(u64::from(io.len));
        *sizes.entry(io.len).or_insert(0) += 1;
        let end = io.offset.saturating_add(u64::from(io.len));
        if ends.insert(io.device, end) == Some(io.offset) {
            sequential += 1;
        }
    }
    if n == 0 {
        return None;
    }
    let mut mix: Vec<(u32, u64)> = sizes.into_iter().collect();
    mix.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let named: Vec<SizeShare> =
        mix.iter().take(SIZE_MIX_TOP).map(|&(size, ios)| SizeShare { size, ios, share_pct: pct(ios, n) }).collect();
    let other: u64 = mix.iter().skip(SIZE_MIX_TOP).map(|s| s.1).sum();
    Some(DirStats {
        dir,
        ios: n,
        share_pct: pct(n, t.ios.len() as u64),
        bytes,
        mean_size: bytes as f64 / n as f64,
        sizes: named,
        other_sizes_pct: pct(other, n),
        sequential_pct: pct(sequential, n),
    })
}

fn skew(t: &Trace) -> Skew {
    let mut blocks: Vec<(u32, u64)> = t.ios.iter().map(|io| (io.device, io.offset / SKEW_BLOCK)).collect();
    blocks.sort_unstable();
    let mut counts: Vec<u64> = Vec::new();
    let mut last = None;
    for b in blocks {
        if last == Some(b) {
            if let Some(c) = counts.last_mut() {
                *c += 1;
            }
        } else {
            counts.push(1);
            last = Some(b);
        }
    }
    counts.sort_unstable_by(|a, b| b.cmp(a));
    let ios = t.ios.len() as u64;
    let busiest = |share: u64| {
        let k = (counts.len() as u64 * share).div_ceil(100) as usize;
        pct(counts.iter().take(k).sum(), ios)
    };
    Skew {
        blocks_touched: counts.len() as u64,
        busiest_1pct: busiest(1),
        busiest_10pct: busiest(10),
        busiest_20pct: busiest(20),
    }
}

fn inter_arrival(t: &Trace) -> Option<InterArrival> {
    if t.ios.len() < 2 {
        return None;
    }
    let mut gaps: Vec<u64> = t.ios.windows(2).map(|w| w[1].t_ns.saturating_sub(w[0].t_ns)).collect();
    let n = gaps.len() as f64;
    let mean = gaps.iter().map(|&g| g as f64).sum::<f64>() / n;
    let var = gaps.iter().map(|&g| (g as f64 - mean).powi(2)).sum::<f64>() / n;
    gaps.sort_unstable();
    let rank = |p: f64| gaps[((p / 100.0 * n).ceil() as usize).clamp(1, gaps.len()) - 1];
    Some(InterArrival {
        mean_ns: mean,
        p50_ns: rank(50.0),
        p99_ns: rank(99.0),
        cv: if mean > 0.0 { var.sqrt() / mean } else { 0.0 },
    })
}

fn devices(t: &Trace) -> Vec<DeviceStats> {
    let mut out: Vec<DeviceStats> = t
        .devices
        .iter()
        .map(|name| DeviceStats {
            name: name.clone(),
            ios: 0,
            reads: 0,
            writes: 0,
            trims: 0,
            bytes: 0,
            lowest_offset: u64::MAX,
            highest_end: 0,
            span_bytes: 0,
        })
        .collect();
    for io in &t.ios {
        let Some(d) = out.get_mut(io.device as usize) else { continue };
        d.ios += 1;
        match io.dir {
            TraceDir::Read => d.reads += 1,
            TraceDir::Write => d.writes += 1,
            TraceDir::Trim => d.trims += 1,
        }
        d.bytes = d.bytes.saturating_add(u64::from(io.len));
        d.lowest_offset = d.lowest_offset.min(io.offset);
        d.highest_end = d.highest_end.max(io.offset.saturating_add(u64::from(io.len)));
    }
    for d in &mut out {
        if d.ios == 0 {
            d.lowest_offset = 0;
        }
        d.span_bytes = d.highest_end - d.lowest_offset;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TraceIo;

    fn trace(ios: &[(u64, u64, u32, TraceDir)]) -> Trace {
        Trace {
            format: None,
            devices: vec!["d".into()],
            ios: ios
                .iter()
                .map(|&(t_ns, offset, len, dir)| TraceIo { t_ns, device: 0, offset, len, dir, pid: 0 })
                .collect(),
            left_out: vec![],
            wall_start_ns: None,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn a_small_trace_has_the_figures_worked_out_by_hand() {
        use TraceDir::{Read, Write};
        let t = trace(&[
            (0, 0, 4096, Read),
            (100, 4096, 4096, Read),           // sequential: the last read ended at 4096
            (300, 0, 8192, Write),             // the first write
            (600, 8192, 4096, Read),           // sequential
            (1_000_000_000, 8192, 512, Write), // sequential: the last write ended at 8192
        ]);
        let s = t.stats();
        assert_eq!(s.ios, 5);
        assert_eq!(s.duration_s, 1.0);
        assert_eq!(s.mean_iops, 4.0, "4 gaps in 1 s");
        assert_eq!(s.peak_iops, 4, "4 I/Os in [0 s, 1 s), 1 in [1 s, 2 s)");
        let r = &s.dirs[0];
        assert_eq!((r.dir, r.ios, r.share_pct, r.bytes, r.mean_size), (Read, 3, 60.0, 12288, 4096.0));
        assert_eq!(r.sizes, [SizeShare { size: 4096, ios: 3, share_pct: 100.0 }]);
        assert!(close(r.sequential_pct, 200.0 / 3.0));
        let w = &s.dirs[1];
        assert_eq!((w.dir, w.ios, w.share_pct, w.bytes, w.mean_size), (Write, 2, 40.0, 8704, 4352.0));
        // Equal counts: the smaller size first.
        assert_eq!(
            w.sizes,
            [SizeShare { size: 512, ios: 1, share_pct: 50.0 }, SizeShare { size: 8192, ios: 1, share_pct: 50.0 }]
        );
        assert_eq!((w.other_sizes_pct, w.sequential_pct), (0.0, 50.0));
        assert_eq!(s.dirs.len(), 2, "no trims: no trim figures");
        // Start blocks 0, 1, 0, 2, 2: three touched, the busiest (one block) holds 2 of 5.
        assert_eq!(s.skew, Skew { blocks_touched: 3, busiest_1pct: 40.0, busiest_10pct: 40.0, busiest_20pct: 40.0 });
        let ia = s.inter_arrival.unwrap();
        // Gaps 100, 200, 300, 999 999 400.
        assert_eq!((ia.mean_ns, ia.p50_ns, ia.p99_ns), (250_000_000.0, 200, 999_999_400));
        assert_eq!(
            s.devices,
            [DeviceStats {
                name: "d".into(),
                ios: 5,
                reads: 3,
                writes: 2,
                trims: 0,
                bytes: 20992,
                lowest_offset: 0,
                highest_end: 12288,
                span_bytes: 12288
            }]
        );
    }

    #[test]
    fn coefficient_of_variation_is_0_for_even_spacing_and_sd_over_mean_otherwise() {
        let even = trace(&[(0, 0, 1, TraceDir::Read), (10, 0, 1, TraceDir::Read), (20, 0, 1, TraceDir::Read)]);
        assert_eq!(even.stats().inter_arrival.unwrap().cv, 0.0);
        // Gaps 1 and 3: mean 2, standard deviation 1.
        let uneven = trace(&[(0, 0, 1, TraceDir::Trim), (1, 0, 1, TraceDir::Trim), (4, 0, 1, TraceDir::Trim)]);
        let ia = uneven.stats().inter_arrival.unwrap();
        assert_eq!((ia.mean_ns, ia.cv, ia.p50_ns, ia.p99_ns), (2.0, 0.5, 1, 3));
    }

    #[test]
    fn sizes_past_the_top_8_are_other() {
        let mut ios: Vec<(u64, u64, u32, TraceDir)> =
            (1..=10).map(|k| (k, k << 20, 512 * k as u32, TraceDir::Read)).collect();
        ios.push((11, 0, 512, TraceDir::Read));
        ios.push((12, 0, 512, TraceDir::Read));
        let s = trace(&ios).stats();
        let r = &s.dirs[0];
        assert_eq!(r.sizes.len(), SIZE_MIX_TOP);
        assert_eq!((r.sizes[0].size, r.sizes[0].ios, r.sizes[0].share_pct), (512, 3, 25.0));
        assert_eq!(
            r.sizes.iter().skip(1).map(|s| s.size).collect::<Vec<_>>(),
            [1024, 1536, 2048, 2560, 3072, 3584, 4096]
        );
        assert!(close(r.other_sizes_pct, 200.0 / 12.0), "4608 and 5120: 2 of 12");
    }

    #[test]
    fn skew_takes_the_busiest_1_10_and_20_percent_of_touched_blocks() {
        // Block 0: 50 I/Os; blocks 1..=99: one each. 149 I/Os over 100 blocks.
        let mut ios: Vec<(u64, u64, u32, TraceDir)> = (0..50).map(|i| (i, 100, 4096, TraceDir::Read)).collect();
        ios.extend((1..100).map(|b| (100 + b, b * SKEW_BLOCK + 7, 512, TraceDir::Write)));
        let s = trace(&ios).stats();
        assert_eq!(s.skew.blocks_touched, 100);
        assert!(close(s.skew.busiest_1pct, 5000.0 / 149.0));
        assert!(close(s.skew.busiest_10pct, 5900.0 / 149.0));
        assert!(close(s.skew.busiest_20pct, 6900.0 / 149.0));
    }

    #[test]
    fn empty_and_single_traces_give_zeros_not_panics() {
        let s = Trace::default().stats();
        assert_eq!((s.ios, s.duration_s, s.mean_iops, s.peak_iops), (0, 0.0, 0.0, 0));
        assert!(s.dirs.is_empty() && s.inter_arrival.is_none());
        assert_eq!(s.skew.blocks_touched, 0);
        let one = trace(&[(0, u64::MAX - 1, u32::MAX, TraceDir::Write)]).stats();
        assert_eq!((one.ios, one.mean_iops, one.peak_iops), (1, 0.0, 1));
        assert!(one.inter_arrival.is_none());
        assert_eq!(one.devices[0].highest_end, u64::MAX, "saturated, not overflowed");
    }
}
