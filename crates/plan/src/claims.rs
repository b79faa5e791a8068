//! A vendor's claims beside the measurement (issue 42): `[claims.NAME]` in a plan gives the
//! figures the vendor states for workload NAME — `iops`, `mbps`, `latency_ms`, any of them —
//! and the results say how much of each claim was measured.

use serde::{Deserialize, Serialize};

/// `[claims.NAME]` as written.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimKeys {
    /// The throughput claimed, IOPS.
    pub iops: Option<f64>,
    /// The throughput claimed, MB/s (decimal).
    pub mbps: Option<f64>,
    /// The mean latency claimed, ms: with a throughput, the latency it is claimed at.
    pub latency_ms: Option<f64>,
}

/// A claim, resolved: the workload it belongs to (its label, which follows the command line's
/// options as the results name it) and its figures, each positive and finite.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct Claim {
    pub workload: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<f64>,
}

impl ClaimKeys {
    /// The figures given, by key.
    pub fn figures(&self) -> [(&'static str, Option<f64>); 3] {
        [("iops", self.iops), ("mbps", self.mbps), ("latency_ms", self.latency_ms)]
    }
}
