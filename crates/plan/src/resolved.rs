//! The resolved plan (phase two): every value present and validated, ready for the engine; and
//! what a resolved workload says of itself (its steps, its follow-ups, its planned time).

use serde::{Deserialize, Serialize};

use crate::links::HostLinks;
use crate::model::{BlockSize, DataPattern, Fault, Pattern};
use crate::options::Workload;

/// One step of a workload's ramp: the workers each host runs, the I/Os each keeps outstanding
/// and, for a rate step, the rate the run is driven at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RampStep {
    pub workers: u32,
    /// Outstanding I/Os per worker: `queue_depth`, or this step's of `qd_ramp` (1 for a rate
    /// step: one I/O per slot).
    pub queue_depth: u32,
    /// A host-count sweep's step: on the first this many hosts (None: on all of them).
    pub hosts: Option<u32>,
    /// As planned: IOPS, or MB/s for a sequential workload (all hosts together).
    pub rate: Option<f64>,
    /// A replay's step: the speed its trace is played at (1 = its own timing).
    pub speed: Option<f64>,
}

impl Workload {
    /// The largest block size of any direction.
    pub fn max_bs(&self) -> u64 {
        self.bs.iter().chain(&self.write_bs).chain(&self.trim_bs).map(|b| b.bytes).max().unwrap_or(0)
    }

    /// The smallest block size of any direction: the alignment of random offsets.
    pub fn min_bs(&self) -> u64 {
        self.bs.iter().chain(&self.write_bs).chain(&self.trim_bs).map(|b| b.bytes).min().unwrap_or(0)
    }

    /// The largest I/O buffer it needs: of reads and writes (a trim carries no data).
    pub fn max_data_bs(&self) -> u64 {
        self.bs.iter().chain(&self.write_bs).map(|b| b.bytes).max().unwrap_or(0)
    }

    /// The block sizes of trims: `trim_bs` where given, else `bs`.
    pub fn trim_sizes(&self) -> &[BlockSize] {
        if self.trim_bs.is_empty() { &self.bs } else { &self.trim_bs }
    }

    /// Whether it trims (`trim_pct` above 0).
    pub fn trims(&self) -> bool {
        self.trim_pct > 0.0
    }

    /// The share of writes in percent: what reads and trims leave.
    pub fn write_pct(&self) -> f64 {
        (100.0 - self.read_pct - self.trim_pct).max(0.0)
    }

    /// Whether any of its steps is driven at a rate: a rate ramp, a curve or an SLA search.
    pub fn has_rate_steps(&self) -> bool {
        !self.rate.is_empty() || !self.curve.is_empty() || self.sla_search || self.replay.is_some()
    }

    /// The block sizes of writes: `write_bs` where given, else `bs`.
    pub fn write_sizes(&self) -> &[BlockSize] {
        if self.write_bs.is_empty() { &self.bs } else { &self.write_bs }
    }

    /// Whether it changes the target's content: writes or trims (a trim destroys data, so the
    /// safety rules of writes apply to it).
    pub fn writes(&self) -> bool {
        self.read_pct < 100.0
    }

    /// The dedupe unit in force: the stored one, or the smallest block size.
    pub fn dedupe_unit(&self) -> u64 {
        if self.data.dedupe_unit == 0 { self.min_bs() } else { self.data.dedupe_unit }
    }

    /// The steps of the ramp, in order: closed-loop steps over `ramp` (at each worker count
    /// every depth of `qd_ramp`: a queue-depth ramp, or a grid row after row), or rate steps
    /// (each with `max_outstanding` workers of one outstanding I/O).
    pub fn steps(&self) -> Vec<RampStep> {
        // A host-count sweep runs the whole ramp at each count, the fewest hosts first.
        let counts: Vec<Option<u32>> =
            if self.host_ramp.is_empty() { vec![None] } else { self.host_ramp.iter().map(|&n| Some(n)).collect() };
        let depths = self.queue_depths();
        let mut steps = Vec::new();
        for hosts in counts {
            if self.replay.is_some() {
                let speeds = if self.replay_speed.is_empty() { vec![1.0] } else { self.replay_speed.clone() };
                steps.extend(speeds.into_iter().map(|s| RampStep {
                    workers: self.max_outstanding,
                    queue_depth: 1,
                    hosts,
                    rate: None,
                    speed: Some(s),
                }));
            } else if self.rate.is_empty() {
                for &workers in &self.ramp {
                    steps.extend(depths.iter().map(|&queue_depth| RampStep {
                        workers,
                        queue_depth,
                        hosts,
                        rate: None,
                        speed: None,
                    }));
                }
            } else {
                steps.extend(self.rate.iter().map(|&r| RampStep {
                    workers: self.max_outstanding,
                    queue_depth: 1,
                    hosts,
                    rate: Some(r),
                    speed: None,
                }));
            }
        }
        steps
    }

    /// The queue depths its closed-loop steps run at: `qd_ramp`, or `queue_depth` alone.
    pub fn queue_depths(&self) -> Vec<u32> {
        if self.qd_ramp.is_empty() { vec![self.queue_depth] } else { self.qd_ramp.clone() }
    }

    /// Whether its steps ramp the queue depth (`qd_ramp`): at one worker count, or as a grid.
    pub fn ramps_queue_depth(&self) -> bool {
        self.rate.is_empty() && self.qd_ramp.len() > 1
    }

    /// Whether its steps are a workers × queue-depth grid: several of each.
    pub fn is_grid(&self) -> bool {
        self.ramps_queue_depth() && self.ramp.len() > 1
    }

    /// The keys that resolve to this workload (every key set but those a resolved value leaves
    /// out): what an agent resolves again to check a step request. A queue-depth ramp's first
    /// depth stands in `queue_depth`: it is given back as the ramp alone.
    pub fn keys(&self) -> crate::WorkloadKeys {
        let mut k = self.each_key();
        if !self.qd_ramp.is_empty() {
            k.queue_depth = None;
        }
        k
    }

    /// This workload as one step runs it: at the step's queue depth, with no depth ramp, host
    /// sweep or concurrent step left (what the engine and the agents get; a member keeps its
    /// `target_groups`).
    pub fn at_step(&self, step: &RampStep) -> Workload {
        Workload {
            queue_depth: step.queue_depth,
            qd_ramp: Vec::new(),
            host_ramp: Vec::new(),
            together: None,
            share: 1.0,
            ..self.clone()
        }
    }

    /// A concurrent step as the run steps and stores it: its first member's ramp and timing
    /// (which every member shares) under the step's name. Its members run; it does not.
    pub fn together_step(name: &str, members: &[Workload]) -> Workload {
        let first = members.first().cloned().unwrap_or_default();
        // Its own name in `together`: what tells a step's total from its members.
        Workload {
            name: name.to_string(),
            together: Some(name.to_string()),
            share: 1.0,
            target_groups: Vec::new(),
            ..first
        }
    }

    /// Whether this is a concurrent step's total ([`Workload::together_step`]), not a workload
    /// of its own or a member.
    pub fn is_together_step(&self) -> bool {
        self.together.as_deref() == Some(self.name.as_str())
    }

    /// The workers each member of a concurrent step runs at a step of `workers`: shared out by
    /// their `share` (the largest remainders rounding up) so that they add up to `workers`,
    /// then one at the least each, taken from the largest (a step of fewer workers than members
    /// runs one each: the step then counts the workers that ran).
    pub fn member_workers(members: &[Workload], workers: u32) -> Vec<u32> {
        let total: f64 = members.iter().map(|m| m.share).sum();
        let exact: Vec<f64> = members
            .iter()
            .map(|m| if total > 0.0 { workers as f64 * m.share / total } else { workers as f64 / members.len() as f64 })
            .collect();
        let mut parts: Vec<u32> = exact.iter().map(|x| x.floor() as u32).collect();
        let mut left = workers.saturating_sub(parts.iter().sum());
        let mut order: Vec<usize> = (0..members.len()).collect();
        order.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())).then(a.cmp(&b)));
        for &k in order.iter().cycle().take(members.len() * 2) {
            if left == 0 {
                break;
            }
            parts[k] += 1;
            left -= 1;
        }
        // One at the least each, from the largest part that can spare it.
        for k in 0..parts.len() {
            if parts[k] == 0 {
                parts[k] = 1;
                if let Some(big) = (0..parts.len()).filter(|&j| parts[j] > 1).max_by_key(|&j| parts[j]) {
                    parts[big] -= 1;
                }
            }
        }
        parts.iter().map(|&p| p.min(65_536)).collect()
    }

    /// A rate step drives the run at this many IOPS: its rate, or for a sequential workload its
    /// MB/s (10^6 bytes) over the mean block size.
    pub fn rate_iops(&self, rate: f64) -> f64 {
        if self.pattern == Pattern::Sequential { rate * 1e6 / self.mean_bs() } else { rate }
    }

    /// The rate ramp of the response-time curve after the worker ramp: this workload named
    /// `NAME-curve`, driven at the curve's shares of `maximum` (the ramp's maximum throughput:
    /// IOPS, or MB/s for sequential workloads). None without a curve or a maximum.
    pub fn curve_workload(&self, maximum: f64) -> Option<Workload> {
        if self.curve.is_empty() || maximum.is_nan() || maximum <= 0.0 {
            return None;
        }
        let mut w = self.derived("curve");
        w.rate = self.curve.iter().map(|pct| maximum * pct / 100.0).collect();
        // Shares a hair apart can round to one rate: a ramp increases strictly.
        w.rate.dedup_by(|later, earlier| *later <= *earlier);
        Some(w)
    }

    /// The rate steps of `sla_search` after the worker ramp: this workload named
    /// `NAME-sla-search`, its rates chosen as it runs (`rate` stays empty). None without it.
    pub fn sla_search_workload(&self) -> Option<Workload> {
        self.sla_search.then(|| self.derived("sla-search"))
    }

    /// The open-loop workload that follows this worker ramp and answers "how much load within
    /// the SLA": its SLA search, else its response-time curve (None without either).
    pub fn open_loop_follower(&self) -> Option<String> {
        let suffix = if self.sla_search {
            "sla-search"
        } else if !self.curve.is_empty() {
            "curve"
        } else {
            return None;
        };
        Some(self.derived_name(suffix))
    }

    fn derived_name(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.name)
    }

    /// A rate workload derived from this one, `NAME-suffix`: one I/O per slot (rate steps keep
    /// `max_outstanding` in flight), no follow-ups of its own.
    fn derived(&self, suffix: &str) -> Workload {
        let mut w = self.clone();
        w.name = self.derived_name(suffix);
        w.queue_depth = 1;
        w.qd_ramp = Vec::new();
        // A host-count sweep's: on its largest count, from that count's maximum.
        w.host_ramp = self.host_ramp.last().map(|&n| vec![n]).unwrap_or_default();
        w.rate = Vec::new();
        w.curve = Vec::new();
        w.sla_search = false;
        w
    }

    /// A rate step's response time passed a `stop_at_*` bound: the words why, for the note.
    pub fn stop_at(&self, mean_ms: f64, p99_ms: f64) -> Option<String> {
        if let Some(b) = self.stop_at_mean_ms.filter(|&b| mean_ms > b) {
            return Some(format!("mean response time {mean_ms:.3} ms passed stop_at_mean_ms = {b}"));
        }
        if let Some(b) = self.stop_at_p99_ms.filter(|&b| p99_ms > b) {
            return Some(format!("p99 response time {p99_ms:.3} ms passed stop_at_p99_ms = {b}"));
        }
        None
    }

    /// Whether it reads or writes data (a workload of trims alone moves none).
    pub fn moves_data(&self) -> bool {
        self.read_pct > 0.0 || self.write_pct() > 0.0
    }

    /// The mean bytes an I/O counts in MB/s, weighted by the mix of each direction and by the
    /// read share: the data it moves (a trim counts none), or for a workload of trims alone the
    /// bytes it trims.
    pub fn mean_bs(&self) -> f64 {
        let mean = |bs: &[BlockSize]| {
            let w: f64 = bs.iter().map(|b| b.weight as f64).sum();
            if w == 0.0 { 0.0 } else { bs.iter().map(|b| b.bytes as f64 * b.weight as f64).sum::<f64>() / w }
        };
        if !self.moves_data() {
            return mean(self.trim_sizes());
        }
        let r = self.read_pct / 100.0;
        if self.write_bs.is_empty() && !self.trims() {
            mean(&self.bs)
        } else {
            r * mean(&self.bs) + self.write_pct() / 100.0 * mean(self.write_sizes())
        }
    }

    /// Planned duration of one step in seconds.
    pub fn step_seconds(&self) -> f64 {
        self.warmup_s + self.intervals as f64 * self.interval_s
    }

    /// Steps the workload runs at most: its ramp, then a curve's steps and an SLA search's
    /// probes (either may end earlier).
    pub fn planned_steps(&self) -> usize {
        let probes = if self.sla_search { SLA_SEARCH_MAX_PROBES as usize } else { 0 };
        self.steps().len() + self.curve.len() + probes
    }

    /// Planned duration at most in seconds, the pauses between its steps included.
    pub fn planned_seconds(&self) -> f64 {
        self.seconds_of(self.planned_steps())
    }

    /// How long `steps` of its steps take, with the pauses between them.
    pub fn seconds_of(&self, steps: usize) -> f64 {
        (self.step_seconds() + self.pause_s) * steps as f64 - self.pause_s
    }
}

/// An SLA search's probes at most (with its precision of 2 % of the maximum it usually ends
/// after about 7).
pub const SLA_SEARCH_MAX_PROBES: u32 = 10;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetGroup {
    pub name: String,
    pub weight: u32,
    /// Paths or globs, as given.
    pub targets: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub name: String,
    pub description: String,
    /// Where the plan came from: a file path or `suite:NAME`.
    pub source: String,
    pub groups: Vec<TargetGroup>,
    pub workloads: Vec<Workload>,
    /// SLA bounds in ms (mean, p99), if the plan sets them.
    pub sla_mean_ms: Option<f64>,
    pub sla_p99_ms: Option<f64>,
    /// Precondition every target before the workloads.
    #[serde(default)]
    pub precondition: bool,
    /// Faults injected into every step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
    /// Agents of a multi-host run (empty: this host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<HostSpec>,
    /// Size of scratch files for targets that do not exist (`--size` wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_size: Option<u64>,
    /// Every host's links to the storage, unless its `HostSpec` names its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<HostLinks>,
    /// Reclaim steps, after the workloads (`[[reclaim]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reclaim: Vec<crate::Reclaim>,
    /// The vendor's figures of the workloads that run (`[claims.NAME]`), each under the
    /// workload's label.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<crate::Claim>,
}

/// An agent and the targets it uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostSpec {
    pub address: String,
    /// Paths on that host; empty: the plan's targets.
    pub targets: Vec<String>,
    /// Its links to the storage; None: the plan's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub links: Option<HostLinks>,
    /// Its share of a closed-loop step's workers against the step's count (1: all of them).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub workers_scale: f64,
}

fn one() -> f64 {
    1.0
}

fn is_one(v: &f64) -> bool {
    *v == 1.0
}

/// The largest `workers_scale`: a host with 64 times a step's workers.
pub const MAX_WORKERS_SCALE: f64 = 64.0;

/// The workers a host of `scale` runs in a closed-loop step of `workers`: scaled and rounded,
/// at least one (every host of a step takes part), at most the 65536 a step allows.
pub fn scaled_workers(workers: u32, scale: f64) -> u32 {
    ((workers as f64 * scale).round() as u32).clamp(1, 65_536)
}

/// A target name with `*`, `?` or `[` is a glob, expanded when the run opens its targets.
pub fn is_glob(target: &str) -> bool {
    target.contains(['*', '?', '['])
}

impl Plan {
    pub fn writes(&self) -> bool {
        self.precondition || !self.reclaim.is_empty() || self.workloads.iter().any(Workload::writes)
    }

    /// Whether it trims (a workload's `trim_pct`, a reclaim step): it gives blocks back.
    pub fn trims(&self) -> bool {
        !self.reclaim.is_empty() || self.workloads.iter().any(Workload::trims)
    }

    /// Scratch files are made allocated but not written first: preconditioning writes every
    /// block anyway, and a back-end that touches no storage (null) reads none (a fio `ioengine=null size=1t` job must
    /// not write a terabyte).
    pub fn scratch_unfilled(&self) -> bool {
        self.precondition || self.workloads.iter().all(|w| !w.backend.touches_storage())
    }

    /// The data pattern preconditioning writes: that of the first workload that writes.
    pub fn precondition_pattern(&self) -> (DataPattern, u64) {
        match self.workloads.iter().find(|w| w.writes()) {
            Some(w) => (w.data, w.dedupe_unit()),
            None => (DataPattern::default(), 4096),
        }
    }

    /// Planned duration of the whole plan in seconds, at most (a curve and an SLA search counted
    /// in full: either may stop early; a concurrent step once).
    pub fn total_seconds(&self) -> f64 {
        self.units().iter().map(|(w, _)| w.planned_seconds()).sum()
    }

    /// Whether every host-count sweep fits the `agents` the run has (0: this host alone):
    /// a sweep counts the agents listed, none beyond them; why not.
    pub fn check_sweeps(&self, agents: usize) -> Result<(), String> {
        let Some((w, &most)) =
            self.workloads.iter().filter_map(|w| w.host_ramp.last().map(|n| (w, n))).max_by_key(|(_, n)| **n)
        else {
            return Ok(());
        };
        if agents == 0 {
            return Err(format!(
                "workload {}: host_ramp {:?} sweeps the number of agents, but this run is on this host alone: give the agents (--hosts or [[hosts]]), or drop host_ramp",
                w.name, w.host_ramp
            ));
        }
        if most as usize > agents {
            return Err(format!(
                "workload {}: host_ramp {:?} goes up to {most} hosts, but the run has {agents} (--hosts or [[hosts]]): list more agents or lower the sweep",
                w.name, w.host_ramp
            ));
        }
        Ok(())
    }

    /// Through relays (issue 46) a relay's group runs a step whole: every count of a host-count
    /// sweep must take whole groups, the first ones in their order (`whole`: where each group
    /// ends among the hosts, group after group) — a count that falls inside a group is bad
    /// input, with the counts that would do.
    pub fn check_sweeps_in_groups(&self, whole: &[usize]) -> Result<(), String> {
        for w in &self.workloads {
            if let Some(n) = w.host_ramp.iter().find(|&&n| !whole.contains(&(n as usize))) {
                let shown: Vec<String> = whole.iter().take(12).map(usize::to_string).collect();
                let more = if whole.len() > 12 { ", …" } else { "" };
                return Err(format!(
                    "workload {}: host_ramp {:?} asks for {n} hosts, but through relays a step runs every host of a relay's group or none: give counts of whole groups ({}{more}), or run the sweep without relays",
                    w.name,
                    w.host_ramp,
                    shown.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// What the run runs, in order: each workload alone (no members), or a concurrent step at
    /// the place of its first member, as [`Workload::together_step`] with its members.
    pub fn units(&self) -> Vec<(Workload, Vec<Workload>)> {
        let mut out: Vec<(Workload, Vec<Workload>)> = Vec::new();
        for w in &self.workloads {
            match &w.together {
                None => out.push((w.clone(), Vec::new())),
                Some(name) if out.iter().any(|(u, m)| !m.is_empty() && u.name == *name) => {}
                Some(name) => {
                    let members = self.members_of(name);
                    out.push((Workload::together_step(name, &members), members));
                }
            }
        }
        out
    }

    /// The workloads of concurrent step `name`, in the plan's order.
    pub fn members_of(&self, name: &str) -> Vec<Workload> {
        self.workloads.iter().filter(|o| o.together.as_deref() == Some(name)).cloned().collect()
    }

    /// The workers `w` runs at a step of `workers`: its share where it is a member of a
    /// concurrent step ([`Workload::member_workers`]), else all of them.
    pub fn workers_of(&self, w: &Workload, workers: u32) -> u32 {
        let Some(name) = &w.together else { return workers };
        let members = self.members_of(name);
        let k = members.iter().position(|m| m.name == w.name).unwrap_or(0);
        Workload::member_workers(&members, workers).get(k).copied().unwrap_or(workers)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Overrides, parse_str};

    /// Issue 17: the ETA counted a curve in full but not an SLA search's probes: a run with
    /// one ended later than its ETA said.
    #[test]
    fn the_planned_time_counts_a_curve_and_an_sla_search_at_most() {
        let text = "[[workloads]]\nname = \"w\"\nramp = [1, 2]\nwarmup_s = 1\nintervals = 2\ninterval_s = 2\npause_s = 3\ncurve = [50, 100]\nsla_search = true\n";
        let p = parse_str(text, "p.toml", &Overrides::default()).unwrap();
        let w = &p.workloads[0];
        assert_eq!(w.planned_steps(), 2 + 2 + super::SLA_SEARCH_MAX_PROBES as usize);
        // 14 steps of 5 s, 13 pauses of 3 s between them.
        assert_eq!(w.planned_seconds(), 14.0 * 5.0 + 13.0 * 3.0);
        assert_eq!(p.total_seconds(), w.planned_seconds());
    }

    /// Issue 46: through relays a host-count sweep takes whole groups, the first in their order.
    #[test]
    fn a_sweep_through_relays_takes_whole_groups() {
        let plan = |ramp: &str| {
            let text = format!("[[workloads]]\nname = \"w\"\nhost_ramp = {ramp}\n[[workloads]]\nname = \"flat\"\n");
            parse_str(&text, "p.toml", &Overrides::default()).unwrap()
        };
        for ok in ["[32]", "[32, 64, 80]", "[80]"] {
            assert_eq!(plan(ok).check_sweeps_in_groups(&[32, 64, 80]), Ok(()), "{ok}");
        }
        let e = plan("[32, 48]").check_sweeps_in_groups(&[32, 64, 80]).unwrap_err();
        assert_eq!(
            e,
            "workload w: host_ramp [32, 48] asks for 48 hosts, but through relays a step runs every host of a relay's group or none: give counts of whole groups (32, 64, 80), or run the sweep without relays"
        );
        let ends: Vec<usize> = (1..=20).map(|g| 2 * g).collect();
        assert!(
            plan("[1]")
                .check_sweeps_in_groups(&ends)
                .unwrap_err()
                .contains("(2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, …)")
        );
    }
}
