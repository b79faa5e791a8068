//! A reclaim step's result (issue 40), worked out: each pass's figures, and the verdict on how
//! long the storage took to give the trimmed space back. The types are with the other results.

use crate::result::{PassResult, ReclaimResult};

impl PassResult {
    /// From what a pass counted: I/Os, bytes, seconds and the latency histogram.
    pub fn of(ops: u64, bytes: u64, seconds: f64, hist: &iocurve_stats::LatencyHistogram) -> PassResult {
        let rate = |x: f64| if seconds > 0.0 { x / seconds } else { 0.0 };
        PassResult {
            ops,
            bytes,
            seconds,
            iops: rate(ops as f64),
            mbps: rate(bytes as f64 / 1e6),
            lat_us: crate::step::latency_stats(hist),
        }
    }
}

impl ReclaimResult {
    /// The bytes freed since the write pass at the last probe.
    pub fn freed(&self) -> Option<u64> {
        self.used.map(|u| u.after_write.saturating_sub(u.last))
    }

    /// The verdict in one line: `space back after 3.2 s (97 % of the 256 MiB trimmed free
    /// again)`, `not back after 600 s: …`, or why it was not measured.
    pub fn verdict(&self) -> String {
        use crate::format::size as mib;
        if let Some(e) = &self.error {
            return format!("stopped: {e}");
        }
        let Some(freed) = self.freed() else {
            return "space not measured: no probe (give [[reclaim]] probe = \"a command that prints the used bytes\")"
                .into();
        };
        let pct = if self.trim.bytes == 0 { 0.0 } else { 100.0 * freed as f64 / self.trim.bytes as f64 };
        match self.back_after_s {
            Some(s) => format!(
                "space back after {s:.1} s ({pct:.0} % of the {} trimmed free again; {} was asked)",
                mib(self.trim.bytes),
                format_pct(self.back_pct)
            ),
            None if self.interrupted => format!("interrupted before the space was back ({pct:.0} % free again)"),
            None if self.timeline.is_empty() => "interrupted before the space was measured after the trims".into(),
            None => format!(
                "space not back after {:.0} s: {pct:.0} % of the {} trimmed free again ({} was asked)",
                self.timeout_s,
                mib(self.trim.bytes),
                format_pct(self.back_pct)
            ),
        }
    }
}

fn format_pct(p: f64) -> String {
    format!("{p} %")
}
