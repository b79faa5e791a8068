//! A workload's steps as it runs them, and what follows it. [`Ramp`] yields the next step from
//! what the last one measured: the worker or rate ramp as planned (a rate ramp ends early by
//! its stop rules), or an SLA search's bisection, each probe chosen from the one before.
//! [`follow_ups`] is what a finished workload adds to the run: its response-time curve and its
//! SLA search, each a workload of its own right after it.

use iocurve_analysis::{StepResult, WorkloadResult};
use iocurve_plan::{Pattern, RampStep, Workload};

use crate::search::Search;

/// The steps of one workload, chosen as it runs.
#[derive(Debug, Clone)]
pub(crate) struct Ramp {
    steps: Vec<RampStep>,
    next: usize,
    search: Option<Search>,
}

impl Ramp {
    /// `w`'s ramp as planned, or, for a search, its first probe (the maximum it searches under).
    pub fn new(w: &Workload, search: Option<Search>) -> Ramp {
        let steps = match &search {
            Some(sr) => {
                vec![RampStep {
                    workers: w.max_outstanding,
                    queue_depth: 1,
                    hosts: None,
                    rate: Some(sr.first()),
                    speed: None,
                }]
            }
            None => w.steps(),
        };
        Ramp { steps, next: 0, search }
    }

    /// The next step to run, with its index (from 0); None when the ramp is done.
    pub fn next_step(&mut self) -> Option<(usize, RampStep)> {
        let step = *self.steps.get(self.next)?;
        self.next += 1;
        Some((self.next - 1, step))
    }

    /// The steps known so far (a search adds its probes as it goes).
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    pub fn search(&self) -> Option<&Search> {
        self.search.as_ref()
    }

    /// `step` measured `s`; `passed`: it kept its schedule within the SLA (for a search's
    /// probe). A search takes its next probe from it; a rate ramp may end here by its stop
    /// rules: then the steps left are dropped, and why is returned when any were.
    pub fn measured(&mut self, w: &Workload, step: RampStep, s: &StepResult, passed: bool) -> Option<String> {
        if let Some(sr) = self.search.as_mut() {
            if let Some(rate) = step.rate
                && let Some(next) = sr.next(rate, passed)
            {
                self.steps.push(RampStep { rate: Some(next), ..step });
            }
            return None;
        }
        let why = rate_ramp_ends(w, s)?;
        // Of a host-count sweep, only this count's higher rates: the next count starts afresh.
        let end = self.steps[self.next..]
            .iter()
            .position(|r| r.hosts != step.hosts)
            .map_or(self.steps.len(), |k| self.next + k);
        let left = end - self.next;
        self.next = end;
        (left > 0).then(|| format!("{why}: the {left} higher rate(s) did not run"))
    }
}

/// Why a rate ramp ends after this step: a `stop_at_*` bound passed, or an overload ended it
/// (higher rates would only overload it sooner).
pub(crate) fn rate_ramp_ends(w: &Workload, s: &StepResult) -> Option<String> {
    let r = s.rate.as_ref()?;
    if s.flags.iter().any(|f| f.code == "overloaded") {
        return Some(format!("overload = abort-step ended the step at {:.0} IOPS", r.target_iops));
    }
    // Nothing completed although I/Os were due, or some never came back: a storage that
    // stopped answering passes any bound; higher rates would only wait it out again.
    let bounded = w.stop_at_mean_ms.is_some() || w.stop_at_p99_ms.is_some();
    if bounded && ((s.ops() == 0 && r.due > 0) || s.stuck_ios > 0) {
        return Some(format!(
            "at {:.0} IOPS the storage stopped answering (no completion or stuck I/Os)",
            r.target_iops
        ));
    }
    if s.ops() == 0 {
        return None;
    }
    w.stop_at(s.lat_us.mean / 1000.0, s.lat_us.p99 / 1000.0)
        .map(|why| format!("at {:.0} IOPS the {why}", r.target_iops))
}

/// What a finished workload adds to the run.
#[derive(Debug, Default)]
pub(crate) struct FollowUps {
    /// Workloads to run right after it, in order, with the search each one is.
    pub next: Vec<(Workload, Option<Search>)>,
    /// Lines for the terminal (the follow-up is coming).
    pub told: Vec<String>,
    /// Notes kept with the workload (a follow-up that could not run).
    pub kept: Vec<String>,
}

/// `w`'s response-time curve and SLA search, from its result `r`; `going_on`: the run goes on
/// (not stopped, not failed). An undecided maximum (its top step too noisy) still bounds the
/// search and scales the curve: the top step's throughput.
pub(crate) fn follow_ups(w: &Workload, r: &WorkloadResult, going_on: bool) -> FollowUps {
    let seq = w.pattern == Pattern::Sequential;
    // A host-count sweep's follow-ups run on its largest count (`Workload::derived`), from
    // that count's maximum.
    let top = r.host_sweep.as_ref().and_then(|h| h.by_hosts.last()).map_or(r.maximum, |a| a.maximum);
    let maximum = top
        .map(|p| if seq { p.mbps } else { p.iops })
        .or_else(|| r.maximum_undecided.as_ref().and_then(|u| r.steps.get(u.step)).map(|s| s.throughput(seq)));
    let mut f = FollowUps::default();
    match maximum.and_then(|m| w.curve_workload(m)) {
        Some(curve) if going_on => {
            f.told.push(format!(
                "{}: the response-time curve follows as {}, at {} % of its maximum",
                w.name,
                curve.name,
                w.curve.iter().map(|p| format!("{p}")).collect::<Vec<_>>().join(", ")
            ));
            f.next.push((curve, None));
        }
        None if !w.curve.is_empty() => {
            f.kept.push("no maximum was measured: the response-time curve did not run".into())
        }
        _ => {}
    }
    match (maximum, w.sla_search_workload()) {
        (Some(m), Some(s)) if going_on && m > 0.0 => {
            f.told.push(format!(
                "{}: the SLA search follows as {}, between 0 and the highest throughput its worker ramp measured",
                w.name, s.name
            ));
            f.next.push((s, Some(Search::new(m))));
        }
        (None, Some(_)) => f.kept.push("no maximum was measured: the SLA search did not run".into()),
        _ => {}
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use iocurve_analysis::{Sla, Thresholds};
    use iocurve_stats::{CpuUsage, IntervalStats, StepRecord};

    fn workload(keys: &str) -> Workload {
        let text = format!("[[workloads]]\nname = \"w\"\n{keys}");
        iocurve_plan::parse_str(&text, "plan.toml", &Default::default()).unwrap().workloads.remove(0)
    }

    /// A step through the real analysis, with the given IOPS and mean latency (µs).
    fn step(workers: u32, iops: f64, mean_us: f64) -> StepResult {
        let mut st = IntervalStats::with_samples(1);
        st.read.record(1000, 4096);
        let mut rec = StepRecord::new(workers, 1, 1, 1.0, 1.0);
        rec.push_interval(st, CpuUsage::default(), 1.0);
        let mut s = iocurve_analysis::analyze_step(&rec, false, &Thresholds::default());
        (s.iops, s.lat_us.mean, s.lat_us.p99) = (iops, mean_us, mean_us * 2.0);
        s
    }

    #[test]
    fn a_worker_ramp_runs_as_planned() {
        let w = workload("ramp = [1, 2, 4]\n");
        let mut r = Ramp::new(&w, None);
        let mut seen = Vec::new();
        while let Some((i, s)) = r.next_step() {
            assert_eq!(r.measured(&w, s, &step(s.workers, 1000.0, 100.0), true), None);
            seen.push((i, s.workers));
        }
        assert_eq!(seen, [(0, 1), (1, 2), (2, 4)]);
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn a_search_takes_each_probe_from_the_one_before() {
        let w = workload("sla_search = true\n");
        let mut r = Ramp::new(&w, Some(Search::new(1000.0)));
        let (i, first) = r.next_step().unwrap();
        assert_eq!((i, first.rate), (0, Some(1000.0)));
        assert!(r.next_step().is_none(), "the next probe is not known before the first measured");
        r.measured(&w, first, &step(1, 400.0, 100.0), false);
        let (i, second) = r.next_step().unwrap();
        assert_eq!((i, second.rate), (1, Some(500.0)), "halfway between nothing passed and the failure");
        r.measured(&w, second, &step(1, 500.0, 100.0), true);
        assert_eq!(r.next_step().unwrap().1.rate, Some(750.0));
        assert_eq!(r.search().unwrap().passed, 500.0);
    }

    #[test]
    fn a_rate_ramp_ends_at_its_stop_rule_and_says_what_did_not_run() {
        let w = workload("rate = [100, 200, 300, 400]\nstop_at_mean_ms = 1\n");
        let mut r = Ramp::new(&w, None);
        let (_, s) = r.next_step().unwrap();
        let mut m = step(1, 100.0, 5000.0);
        m.rate = Some(
            serde_json::from_value(serde_json::json!({
                "target_iops": 100.0, "due": 100, "achieved_pct": 100.0, "dropped": 0, "backlog": 0,
                "service_us": m.lat_us, "lag_us": m.lat_us, "sustained": true
            }))
            .unwrap_or_else(|e| panic!("a rate result: {e}")),
        );
        let why = r.measured(&w, s, &m, true).expect("the mean passed its bound");
        assert!(why.starts_with("at 100 IOPS the ") && why.ends_with(": the 3 higher rate(s) did not run"), "{why}");
        assert!(r.next_step().is_none());
    }

    #[test]
    fn follow_ups_come_from_the_maximum_and_say_when_they_cannot() {
        let w = workload("ramp = [1, 2]\ncurve = [50, 90]\nsla_search = true\n");
        let r = iocurve_analysis::analyze_workload(
            &w,
            vec![step(1, 1000.0, 100.0), step(2, 1800.0, 110.0)],
            &Sla::default(),
        );
        let f = follow_ups(&w, &r, true);
        let next: Vec<(&str, Option<f64>)> =
            f.next.iter().map(|(w, s)| (w.name.as_str(), s.as_ref().map(|s| s.maximum))).collect();
        assert_eq!(next.len(), 2, "{next:?}");
        assert_eq!(next[1].1, Some(1800.0), "the search searches under the maximum");
        assert!(
            f.told[0].contains("the response-time curve follows as")
                && f.told[0].contains("at 50, 90 % of its maximum"),
            "{:?}",
            f.told
        );
        assert!(f.kept.is_empty());
        // Stopped: nothing follows, nothing is said.
        let f = follow_ups(&w, &r, false);
        assert!(f.next.is_empty() && f.told.is_empty() && f.kept.is_empty());
        // No step measured: no maximum, and both follow-ups say they did not run.
        let none = iocurve_analysis::analyze_workload(&w, Vec::new(), &Sla::default());
        let f = follow_ups(&w, &none, true);
        assert!(f.next.is_empty());
        assert_eq!(
            f.kept,
            [
                "no maximum was measured: the response-time curve did not run",
                "no maximum was measured: the SLA search did not run"
            ]
        );
    }
}
