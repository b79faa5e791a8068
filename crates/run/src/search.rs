//! `sla_search`: the highest rate a workload sustains within the SLA, found by bisection on
//! open-loop steps between nothing and the maximum its worker ramp measured. The answer is an
//! interval — the highest rate that passed and the lowest that failed above it — never a
//! figure finer than the probes could tell.

/// Probes at most; with the precision below a search ends after about 7.
pub const MAX_PROBES: u32 = iocurve_plan::SLA_SEARCH_MAX_PROBES;
/// The search ends when the rates that passed and failed are this share of the maximum apart.
pub const PRECISION: f64 = 0.02;

/// A bisection in progress (rates in the workload's unit: IOPS, or MB/s for sequential ones).
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    pub maximum: f64,
    /// The highest rate that passed (0: none yet).
    pub passed: f64,
    /// The lowest rate that failed (None: none yet).
    pub failed: Option<f64>,
    pub probes: u32,
}

impl Search {
    /// A search up to `maximum` (a measured throughput: finite and positive; anything else
    /// gives a search of one probe that cannot pass).
    pub fn new(maximum: f64) -> Search {
        let maximum = if maximum.is_finite() && maximum > 0.0 { maximum } else { 0.0 };
        Search { maximum, passed: 0.0, failed: None, probes: 0 }
    }

    /// The first probe: the maximum itself (often the answer for storage with headroom).
    pub fn first(&self) -> f64 {
        self.maximum
    }

    /// Records a probe at `rate`; returns the next rate to probe, or None when the search is
    /// done.
    pub fn next(&mut self, rate: f64, pass: bool) -> Option<f64> {
        self.probes += 1;
        if pass {
            self.passed = self.passed.max(rate);
        } else {
            self.failed = Some(self.failed.map_or(rate, |f| f.min(rate)));
        }
        let failed = self.failed?;
        if self.probes >= MAX_PROBES || failed - self.passed <= PRECISION * self.maximum {
            return None;
        }
        Some((self.passed + failed) / 2.0)
    }

    /// The outcome in words, with its interval (`unit`: IOPS or MB/s); `interrupted`: the search
    /// stopped before it was done (Ctrl-C, a failed step), so it states what it had.
    pub fn describe(&self, sla: &str, unit: &str, interrupted: bool) -> String {
        // What the answer is, as under every SLA answer (issue 37, finding 3).
        let says = iocurve_analysis::SlaAnswer::of(true, None).says;
        if interrupted {
            return format!(
                "SLA search ({sla}): interrupted after {} probes — the highest rate sustained within it so far is {:.0} {unit}{}; {says}",
                self.probes,
                self.passed,
                self.failed.map_or_else(String::new, |f| format!(", the lowest that failed {f:.0}"))
            );
        }
        match self.failed {
            None => format!(
                "SLA search ({sla}): the highest throughput the worker ramp measured, {:.0} {unit}, is sustained within it ({} probe); {says}",
                self.maximum, self.probes
            ),
            Some(f) if self.passed == 0.0 => format!(
                "SLA search ({sla}): no rate probed was sustained within it — the lowest tried, {f:.0} {unit}, failed ({} probes); {says}",
                self.probes
            ),
            Some(f) => format!(
                "SLA search ({sla}): the highest rate sustained within it is {:.0} {unit} — it lies between {:.0} (passed) and {f:.0} (failed), {} probes; {says}",
                self.passed, self.passed, self.probes
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Storage that keeps the SLA up to `limit`: the search brackets it within the precision.
    fn run(maximum: f64, limit: f64) -> Search {
        let mut s = Search::new(maximum);
        let mut rate = s.first();
        while let Some(next) = s.next(rate, rate <= limit) {
            rate = next;
        }
        s
    }

    #[test]
    fn the_maximum_itself_passing_ends_the_search_at_once() {
        let s = run(100_000.0, 200_000.0);
        assert_eq!((s.probes, s.passed, s.failed), (1, 100_000.0, None));
        assert!(
            s.describe("p99 ≤ 5 ms", "IOPS", false).contains("the worker ramp measured, 100000 IOPS, is sustained")
        );
    }

    #[test]
    fn a_limit_inside_is_bracketed_to_two_percent() {
        let s = run(100_000.0, 61_234.0);
        let f = s.failed.unwrap();
        assert!(s.passed <= 61_234.0 && f > 61_234.0 && f - s.passed <= 2_000.0, "{s:?}");
        assert!(s.probes <= 8, "{s:?}");
        let said = s.describe("mean ≤ 1 ms", "IOPS", false);
        assert!(said.contains("between") && said.ends_with("probes; open loop: I/Os arrive on a schedule whatever the storage does, so its stalls count against the SLA — quote this one for how much load stays within the SLA"), "{said}");
    }

    #[test]
    fn an_interrupted_search_says_so_and_a_bad_maximum_cannot_pass() {
        let mut s = Search::new(100_000.0);
        assert_eq!(s.next(100_000.0, false), Some(50_000.0));
        assert!(s.describe("p99 ≤ 5 ms", "IOPS", true).contains("interrupted after 1 probes"));
        let nan = Search::new(f64::NAN);
        assert_eq!(nan.first(), 0.0);
    }

    #[test]
    fn nothing_passing_says_so() {
        let s = run(100_000.0, 0.0);
        assert_eq!(s.passed, 0.0);
        assert!(
            s.describe("p99 ≤ 1 ms", "IOPS", false).contains("no rate probed")
                && s.describe("p99 ≤ 1 ms", "IOPS", false)
                    .ends_with("quote this one for how much load stays within the SLA"),
            "{}",
            s.describe("x", "IOPS", false)
        );
    }

    proptest! {
        #[test]
        fn the_answer_always_brackets_the_limit(max in 1.0f64..1e7, share in 0.0f64..1.5) {
            let limit = max * share;
            let s = run(max, limit);
            prop_assert!(s.probes <= MAX_PROBES);
            prop_assert!(s.passed <= limit);
            if let Some(f) = s.failed {
                prop_assert!(f > limit);
            }
        }
    }
}
