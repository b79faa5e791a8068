//! A vendor's claim against the measurement (issue 42): "claimed 500'000 IOPS at 1 ms; measured
//! 412'300 IOPS at 1 ms: 82 % of the claim". What is measured against what:
//!
//! - a throughput at a latency: the throughput the curve carries at that mean latency
//!   ([`crate::sizing::throughput_at`]) against the claimed one. A curve that never reached the
//!   latency carried at least its maximum there (the run did not push further); one whose
//!   lightest step already took longer carried nothing known at it;
//! - a throughput alone: the maximum against it;
//! - a latency alone: the mean latency at speed (the lightest step: a lone request, the
//!   latency vendors quote) against it.
//!
//! Throughput is IOPS or MB/s as the claim gives it; a claim of both is read in the workload's
//! headline unit (IOPS for random, MB/s for sequential workloads).

use crate::format;
use crate::result::{RunResult, WorkloadResult};

pub use iocurve_plan::Claim;

pub use crate::result::ClaimResult;

impl RunResult {
    /// Sets every workload's claim result from the stored plan's `claims`.
    pub fn with_claims(mut self) -> Self {
        let claims: Vec<Claim> = serde_json::from_value(self.plan["claims"].clone()).unwrap_or_default();
        for w in &mut self.workloads {
            w.claim = claims.iter().find(|c| c.workload == w.name).map(|c| judge(w, c));
        }
        self
    }
}

/// A claim against the workload's measurement.
pub fn judge(w: &WorkloadResult, c: &Claim) -> ClaimResult {
    let seq = w.kind == "sequential";
    let (claimed_tput, in_mbps) = match (c.iops, c.mbps) {
        (Some(i), Some(m)) => {
            if seq {
                (Some(m), true)
            } else {
                (Some(i), false)
            }
        }
        (Some(i), None) => (Some(i), false),
        (None, Some(m)) => (Some(m), true),
        (None, None) => (None, seq),
    };
    let tput = |iops: f64, mbps: f64| if in_mbps { mbps } else { iops };
    let words = |v: f64| if in_mbps { format::mbps(v) } else { format!("{} IOPS", format::iops(v)) };
    let ms = |v: f64| format!("{v} ms");
    let base = ClaimResult {
        claimed: c.clone(),
        in_mbps,
        against: String::new(),
        measured: None,
        measured_lat_us: None,
        pct: None,
        holds: false,
        says: String::new(),
    };
    match (claimed_tput, c.latency_ms) {
        (Some(t), Some(lat)) => at_latency(w, base, t, lat, (&tput, &words)),
        (Some(t), None) => {
            let claimed = format!("claimed {}", words(t));
            let Some(p) = w.maximum else {
                return ClaimResult { says: format!("{claimed}; no maximum was measured"), ..base };
            };
            let m = tput(p.iops, p.mbps);
            ClaimResult {
                against: "maximum".into(),
                measured: Some(m),
                measured_lat_us: Some(p.lat_us),
                pct: Some(m / t * 100.0),
                holds: m >= t,
                says: format!(
                    "{claimed}; measured {} at its maximum (@ {}): {:.0} % of the claim",
                    words(m),
                    format::latency(p.lat_us),
                    m / t * 100.0
                ),
                ..base
            }
        }
        (None, Some(lat)) => {
            let claimed = format!("claimed {} latency", ms(lat));
            let Some(p) = w.speed else {
                return ClaimResult { says: format!("{claimed}; no speed (lightest step) was measured"), ..base };
            };
            let pct = p.lat_us / (lat * 1000.0) * 100.0;
            ClaimResult {
                against: "speed".into(),
                measured_lat_us: Some(p.lat_us),
                pct: Some(pct),
                holds: pct <= 100.0,
                says: format!(
                    "{claimed}; measured {} mean at speed: {}",
                    format::latency(p.lat_us),
                    if pct <= 100.0 {
                        "within the claim".to_string()
                    } else {
                        format!("{:.0} % above the claim", pct - 100.0)
                    }
                ),
                ..base
            }
        }
        (None, None) => ClaimResult { says: "the claim gives no figure".into(), ..base },
    }
}

type Words<'a> = (&'a dyn Fn(f64, f64) -> f64, &'a dyn Fn(f64) -> String);

/// A throughput claimed at a latency: the curve's throughput there against it.
fn at_latency(w: &WorkloadResult, base: ClaimResult, t: f64, lat_ms: f64, (tput, words): Words) -> ClaimResult {
    let claimed = format!("claimed {} at {lat_ms} ms", words(t));
    let points: Vec<(f64, f64, &str)> = crate::compared(&w.steps)
        .steps
        .into_iter()
        .map(|i| (tput(w.steps[i].iops, w.steps[i].mbps), w.steps[i].lat_us.mean, ""))
        .collect();
    let lat_us = lat_ms * 1000.0;
    let Some(first) = points.first() else {
        return ClaimResult { says: format!("{claimed}; no step was measured"), ..base };
    };
    if lat_us < first.1 {
        return ClaimResult {
            against: "at_latency".into(),
            measured_lat_us: Some(first.1),
            says: format!(
                "{claimed}; measured nothing at {lat_ms} ms: even the lightest step took {}",
                format::latency(first.1)
            ),
            ..base
        };
    }
    match crate::sizing::throughput_at(&points, lat_us) {
        Ok((m, _)) => ClaimResult {
            against: "at_latency".into(),
            measured: Some(m),
            measured_lat_us: Some(lat_us),
            pct: Some(m / t * 100.0),
            holds: m >= t,
            says: format!("{claimed}; measured {} at {lat_ms} ms: {:.0} % of the claim", words(m), m / t * 100.0),
            ..base
        },
        // Never reached: at the claimed latency the storage carries at least its maximum.
        Err(_) => {
            let Some(p) = w.maximum else {
                return ClaimResult { says: format!("{claimed}; no maximum was measured"), ..base };
            };
            let m = tput(p.iops, p.mbps);
            ClaimResult {
                against: "maximum".into(),
                measured: Some(m),
                measured_lat_us: Some(p.lat_us),
                pct: Some(m / t * 100.0),
                holds: m >= t,
                says: format!(
                    "{claimed}; measured at least {} (its maximum, @ {}: the curve never reached {lat_ms} ms): {:.0} % of the claim",
                    words(m),
                    format::latency(p.lat_us),
                    m / t * 100.0
                ),
                ..base
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::tests::workload;
    use crate::result::Point;

    /// A workload whose steps did these (IOPS, mean µs), in ramp order.
    fn measured(points: &[(f64, f64)]) -> WorkloadResult {
        let mut w = workload("rr", "random", (0.0, 0.0, 0.0));
        w.steps = points
            .iter()
            .enumerate()
            .map(|(i, &(iops, lat))| {
                let mut st = iocurve_stats::IntervalStats::with_samples(1);
                st.read.record(1000, 4096);
                let mut rec = iocurve_stats::StepRecord::new(1 << i, 1, 1, 1.0, 1.0);
                rec.push_interval(st, iocurve_stats::CpuUsage::default(), 1.0);
                let mut s = crate::analyze_step(&rec, false, &crate::Thresholds::default());
                (s.iops, s.mbps, s.lat_us.mean) = (iops, iops * 4096.0 / 1e6, lat);
                s
            })
            .collect();
        let point = |i: usize| Point {
            step: i,
            workers: 1 << i,
            queue_depth: 1,
            iops: points[i].0,
            mbps: points[i].0 * 4096.0 / 1e6,
            lat_us: points[i].1,
            target_iops: None,
        };
        (w.speed, w.maximum) = (Some(point(0)), Some(point(points.len() - 1)));
        w
    }

    fn claim(iops: Option<f64>, mbps: Option<f64>, latency_ms: Option<f64>) -> Claim {
        Claim { workload: "rr".into(), iops, mbps, latency_ms }
    }

    #[test]
    fn a_throughput_at_a_latency_is_read_off_the_curve() {
        let w = measured(&[(100_000.0, 300.0), (400_000.0, 900.0), (424_600.0, 1100.0)]);
        let r = judge(&w, &claim(Some(500_000.0), None, Some(1.0)));
        assert_eq!(r.says, "claimed 500'000 IOPS at 1 ms; measured 412'300 IOPS at 1 ms: 82 % of the claim");
        assert_eq!((r.against.as_str(), r.measured, r.holds), ("at_latency", Some(412_300.0), false));
        assert!((r.pct.unwrap() - 82.46).abs() < 1e-9, "{r:?}");
        // The Unity curve: ≈ 64,000 IOPS at 1 ms against a claim of 60,000: it holds.
        let unity = measured(&[(40_000.0, 600.0), (60_000.0, 900.0), (70_000.0, 1200.0)]);
        let r = judge(&unity, &claim(Some(60_000.0), None, Some(1.0)));
        assert!(r.holds && r.says.ends_with("measured 63'333 IOPS at 1 ms: 106 % of the claim"), "{r:?}");
        // Never reached 5 ms: at least the maximum.
        let r = judge(&unity, &claim(Some(60_000.0), None, Some(5.0)));
        assert_eq!(r.against, "maximum");
        assert!(
            r.says.contains("measured at least 70'000 IOPS (its maximum, @ 1'200 µs: the curve never reached 5 ms)"),
            "{r:?}"
        );
        // Its lightest step already above 0.5 ms: nothing known there, no percentage.
        let r = judge(&unity, &claim(Some(60_000.0), None, Some(0.5)));
        assert_eq!((r.pct, r.holds), (None, false));
        assert!(r.says.ends_with("measured nothing at 0.5 ms: even the lightest step took 600 µs"), "{r:?}");
    }

    #[test]
    fn a_throughput_alone_against_the_maximum_a_latency_alone_against_speed() {
        let w = measured(&[(40_000.0, 600.0), (60_000.0, 900.0), (70_000.0, 1200.0)]);
        let r = judge(&w, &claim(Some(100_000.0), None, None));
        assert_eq!(r.says, "claimed 100'000 IOPS; measured 70'000 IOPS at its maximum (@ 1'200 µs): 70 % of the claim");
        let r = judge(&w, &claim(None, None, Some(0.5)));
        assert_eq!(r.says, "claimed 0.5 ms latency; measured 600 µs mean at speed: 20 % above the claim");
        assert_eq!((r.pct, r.holds), (Some(120.0), false));
        assert!(judge(&w, &claim(None, None, Some(1.0))).says.ends_with("within the claim"));
        // MB/s where the claim gives them: 70,000 × 4096 B = 286.72 MB/s.
        let r = judge(&w, &claim(None, Some(250.0), None));
        assert!(r.in_mbps && r.holds && r.says.contains("measured 287 MB/s"), "{r:?}");
    }
}
