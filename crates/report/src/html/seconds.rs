//! What the latency heat map and the exceedance (QoS) plot draw (issue 44, part 4): each step's
//! seconds as rows of shaded cells, and each step's latency at the nines.

use super::*;

/// Heat map rows per power of two: a quarter of an octave (19 % apart). The seconds' histograms
/// have 16 buckets an octave; four of them make a row, finer than the eye reads a shade and a
/// quarter of the bytes in the page.
const ROWS_PER_OCTAVE: f64 = 4.0;
/// A cell's shade: 61 levels (a character each) over the share of its second's I/Os on a log
/// scale from 10^-5 to all of them — a tail of 0.01 % stays visible beside the bulk.
const LEVELS: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const DECADES: f64 = 5.0;

/// The heat map row of a latency in ns: ⌊4 · log2 ns⌋ (0 for 0 and 1 ns).
fn row(ns: u64) -> i64 {
    (ROWS_PER_OCTAVE * (ns.max(1) as f64).log2()).floor() as i64
}

fn level(share: f64) -> u8 {
    let top = (LEVELS.len() - 2) as f64;
    let l = 1.0 + ((share.log10() + DECADES) / DECADES * top).round();
    LEVELS[l.clamp(1.0, top + 1.0) as usize]
}

/// A step's heat map: `r0`, its lowest row, and for every second `[first row − r0, "shades"]`
/// (a shade per row up from its first, `0` for none) or null where the second kept no
/// histogram. A row's latencies run from 2^(r/4) ns to 2^((r+1)/4) ns. Null for a step without
/// any.
fn heat(s: &StepResult) -> Value {
    let r0 = s.samples.iter().filter_map(|x| x.lat_hist.first()).map(|b| row(b[0])).min();
    let Some(r0) = r0 else { return Value::Null };
    let cells: Vec<Value> = s
        .samples
        .iter()
        .map(|x| {
            let total: u64 = x.lat_hist.iter().map(|b| b[2]).sum();
            let (Some(first), Some(last)) = (x.lat_hist.first(), x.lat_hist.last()) else { return Value::Null };
            let (lo, hi) = (row(first[0]), row(last[0]));
            let mut counts = vec![0u64; (hi - lo + 1) as usize];
            for b in &x.lat_hist {
                counts[(row(b[0]) - lo) as usize] += b[2];
            }
            let shades: String = counts
                .iter()
                .map(|&c| if c == 0 { '0' } else { level(c as f64 / total.max(1) as f64) as char })
                .collect();
            json!([lo - r0, shades])
        })
        .collect();
    json!({ "r0": r0, "cells": cells })
}

/// Each step's per-second figures the heat map needs beside the timeline's: the p99 of each
/// second (null where not known).
fn p99s(s: &StepResult) -> Value {
    if s.samples.iter().all(|x| x.p99_us.is_none()) {
        return Value::Null;
    }
    s.samples.iter().map(|x| x.p99_us.map_or(Value::Null, |v| sig(v, 3))).collect()
}

/// Adds a series' heat maps, per-second p99s and exceedance curves to its chart data.
pub(super) fn add(data: &mut Value, w: &WorkloadResult) {
    data["heat"] = w.steps.iter().map(heat).collect();
    data["p99s"] = w.steps.iter().map(p99s).collect();
    data["qos"] = w
        .steps
        .iter()
        .map(|s| {
            // x on the nines axis: −log10(1 − p): 90 % is 1, 99.9999 % is 6.
            let nines = |p: f64| if p >= 100.0 { 6.0 } else { -(1.0 - p / 100.0).log10() };
            json!({
                "x": s.exceedance.iter().map(|q| sig(nines(q.pct), 4)).collect::<Vec<_>>(),
                "lat": s.exceedance.iter().map(|q| sig(q.lat_us, 4)).collect::<Vec<_>>(),
            })
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_quarter_octaves_and_shades_follow_the_share() {
        assert_eq!(row(0), 0);
        assert_eq!(row(1024), 40);
        assert_eq!(row(1217), 40, "2^10.25 = 1217.5");
        assert_eq!(row(1218), 41);
        assert_eq!(level(1.0), b'z');
        assert_eq!(level(1e-5), b'1');
        assert_eq!(level(1e-9), b'1', "a lone I/O in a huge second still shows");
        assert!(level(0.01) < level(0.5));
    }
}
