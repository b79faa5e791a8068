//! The host against the array (issue 44): each step's throughput as iocurve measured it beside
//! the array's own front-end figure over the same seconds, and the difference named — as the
//! seeds compared IOgen's figures with the array's statistics.

pub use crate::result::ArrayCheck;
use crate::result::{RunResult, WorkloadResult};

/// Seconds left out at each end of a step's measurement when the array's figures are averaged
/// over it: the array's clock may be off the run's by up to this (after `--shift-s`), and its
/// samples may cover a second partly.
pub const EDGE_S: f64 = 1.0;

/// The workloads whose steps are the whole load on the array then: a concurrent step's total,
/// not its members.
fn whole(r: &RunResult) -> impl Iterator<Item = &WorkloadResult> {
    let members: Vec<&str> = r.workloads.iter().flat_map(|w| w.members.iter().map(String::as_str)).collect();
    r.workloads.iter().filter(move |w| !members.contains(&w.name.as_str()))
}

/// Every step against every series of the array that counts throughput.
pub fn array_checks(r: &RunResult) -> Vec<ArrayCheck> {
    let mut out = Vec::new();
    for s in r.array.iter().filter(|s| s.kind == "iops" || s.kind == "mbps") {
        for w in whole(r) {
            for (i, st) in w.steps.iter().enumerate() {
                let Some(from) = st.measured_from_unix_ns else { continue };
                let (a, b) = (from as f64 / 1e9 + EDGE_S, from as f64 / 1e9 + st.duration_s - EDGE_S);
                let within: Vec<f64> =
                    s.points.iter().filter(|p| (a..=b).contains(&(p.0 as f64 / 1e9))).map(|p| p.1).collect();
                // iocurve's seconds within the same window (a step's throughput may not be flat).
                let ours: Vec<(f64, f64)> = st
                    .samples
                    .iter()
                    .filter(|x| {
                        x.t_s + from as f64 / 1e9 >= a - 1e-6 && x.t_s + x.dur_s + from as f64 / 1e9 <= b + 1e-6
                    })
                    .map(|x| (x.dur_s, if s.kind == "mbps" { x.mbps } else { x.iops }))
                    .collect();
                let secs: f64 = ours.iter().map(|x| x.0).sum();
                let host = if secs > 0.0 { ours.iter().map(|x| x.0 * x.1).sum::<f64>() / secs } else { 0.0 };
                if within.is_empty() || host <= 0.0 {
                    continue;
                }
                let array = within.iter().sum::<f64>() / within.len() as f64;
                out.push(ArrayCheck {
                    workload: w.name.clone(),
                    step: i,
                    series: s.name.clone(),
                    host,
                    array,
                    points: within.len(),
                    diff_pct: (array - host) / host * 100.0,
                });
            }
        }
    }
    out
}
