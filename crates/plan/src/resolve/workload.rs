//! One workload resolved from its layers: each key's row (`options`) checks its own value; here
//! are the rules between keys in one function, and the faults. Every error names the key and
//! the layer it came from.

use super::Resolver;
use crate::declare::KeyError;
use crate::error::PlanError;
use crate::keys::FaultKeys;
use crate::locate::Seg;
use crate::model::{Fault, FaultKind, Pattern, STEADY_WINDOW, SteadyState};
use crate::options::{Workload, WorkloadKeys};

impl Resolver<'_> {
    /// Workload `i` of keys layered down to the built-in defaults: each key's check, then the
    /// rules between keys.
    pub(super) fn workload(&self, i: usize, k: &WorkloadKeys) -> Result<Workload, PlanError> {
        let w = k.resolve_each().map_err(|(key, m)| self.key_err(i, key, m))?;
        cross_checks(&w).map_err(|(key, m)| self.key_err(i, key, m))?;
        Ok(w)
    }

    /// The workload's name as the plan gives it, present and usable, whether `--workload`
    /// chooses the workload or not: names are the plan's.
    pub(super) fn workload_name(&self, i: usize, k: &WorkloadKeys) -> Result<String, PlanError> {
        let name = k.name.clone().ok_or_else(|| {
            self.err(
                &[Seg::Key("workloads"), Seg::Index(i)],
                format!("workloads[{i}]"),
                "every workload needs a `name`, e.g. name = \"backend-random-read-8k\"",
            )
        })?;
        crate::options::checks::name(&name).map_err(|m| self.key_err(i, "name", m))?;
        Ok(name)
    }

    /// `queue_depth` and `qd_ramp` of workload `i`, layered: the nearer layer wins (a `--qd`
    /// runs a plan's queue-depth ramp at that one depth; a workload's `qd_ramp` replaces the
    /// `[defaults]`' depth), both in one layer are refused. A ramp that wins sets
    /// `queue_depth` to its first depth, and runs at 1 worker unless `ramp` is given in its
    /// layer or a nearer one: a grid only when asked for (`--qd-ramp` on a suite ramps the
    /// depth at 1 worker, `--qd-ramp … --ramp 4` at 4, `--qd-ramp … --ramp 1,2,4` is a grid).
    pub(super) fn queue_depth_layers(&self, i: usize, keys: &mut WorkloadKeys) -> Result<(), PlanError> {
        let Some(qds) = keys.qd_ramp.clone() else { return Ok(()) };
        // Its own check first: its first depth becomes `queue_depth`, whose error would name the
        // wrong key.
        crate::options::checks::qd_ramp(&qds).map_err(|m| self.key_err(i, "qd_ramp", m))?;
        let (ramp_at, depth_at) = (self.origin(i, "qd_ramp"), self.origin(i, "queue_depth"));
        if depth_at == ramp_at {
            return Err(self.key_err(
                i,
                "qd_ramp",
                format!(
                    "queue_depth = {} and qd_ramp = {qds:?} are both given: qd_ramp sets each step's queue depth, so drop queue_depth (or drop qd_ramp for one depth)",
                    keys.queue_depth.unwrap_or(1)
                ),
            ));
        }
        if depth_at < ramp_at {
            keys.qd_ramp = None;
            return Ok(());
        }
        keys.queue_depth = qds.first().copied().or(keys.queue_depth);
        // A worker ramp from a farther layer (or none) is not asked for with it: 1 worker.
        if self.origin(i, "ramp") > ramp_at {
            keys.ramp = Some(vec![1]);
        }
        Ok(())
    }

    /// `[[reclaim]]`: each step resolved, names unique.
    pub(super) fn reclaim(&self) -> Result<Vec<crate::Reclaim>, PlanError> {
        let mut out: Vec<crate::Reclaim> = Vec::new();
        for (i, k) in self.file.reclaim.iter().flatten().enumerate() {
            let err = |key: &'static str, msg: String| {
                self.err(&[Seg::Key("reclaim"), Seg::Index(i), Seg::Key(key)], format!("reclaim[{i}].{key}"), msg)
            };
            let r = k.resolve(i).map_err(|(key, msg)| err(key, msg))?;
            if out.iter().any(|o| o.name == r.name) {
                return Err(err("name", format!("reclaim name `{}` is used twice: names must be unique", r.name)));
            }
            out.push(r);
        }
        Ok(out)
    }

    pub(super) fn faults(&self) -> Result<Vec<Fault>, PlanError> {
        let mut out = Vec::new();
        for (i, f) in self.file.faults.iter().flatten().enumerate() {
            let err = |key: &'static str, msg: String| {
                self.err(&[Seg::Key("faults"), Seg::Index(i), Seg::Key(key)], format!("faults[{i}].{key}"), msg)
            };
            let share = f.share.unwrap_or(1.0);
            if !(share > 0.0 && share <= 1.0) {
                return Err(err(
                    "share",
                    format!("share is {share}; it is the share of I/Os that get the fault, above 0 up to 1"),
                ));
            }
            let from_s = f.from_s.unwrap_or(0.0);
            let to_s = f.to_s.unwrap_or(f64::INFINITY);
            if !(from_s >= 0.0 && to_s > from_s) {
                return Err(err(
                    "to_s",
                    format!("the window {from_s} s to {to_s} s is empty: from_s ≥ 0 and to_s > from_s"),
                ));
            }
            let latency_ms = f.latency_ms.unwrap_or(0.0);
            if f.kind == FaultKind::Latency && !(latency_ms > 0.0 && latency_ms <= 600_000.0) {
                return Err(err("latency_ms", "a latency fault needs latency_ms, above 0 up to 600000".into()));
            }
            if f.kind == FaultKind::Stall && !to_s.is_finite() {
                return Err(err("to_s", "a stall needs its end: to_s (completions resume then)".into()));
            }
            out.push(Fault { kind: f.kind, share, from_s, to_s: f.to_s, target: f.target.clone(), latency_ms });
        }
        Ok(out)
    }
}

impl Fault {
    /// The keys that resolve to this fault: what an agent resolves again to check a request.
    pub fn keys(&self) -> FaultKeys {
        FaultKeys {
            kind: self.kind,
            share: Some(self.share),
            from_s: Some(self.from_s),
            to_s: self.to_s,
            target: self.target.clone(),
            latency_ms: Some(self.latency_ms),
        }
    }
}

/// The rules between keys, each error naming the key to change: what verification needs (one
/// block size, no dedupe, a back-end that touches storage), what a back-end needs (O_DIRECT for
/// one asynchronous only with it), what a rate ramp excludes (a queue depth, a curve, an SLA
/// search), the intervals a steady state is judged over, and a rate's IOPS at its block size.
pub(crate) fn cross_checks(w: &Workload) -> Result<(), KeyError> {
    if w.verify && w.bs.len() > 1 {
        return Err((
            "verify",
            "a verifying workload needs one block size (the unit its map tracks), not a mix".into(),
        ));
    }
    if w.verify && w.data.dedupe > 1.0 {
        return Err((
            "verify",
            format!(
                "a verifying workload cannot deduplicate: every block carries its own header (block number, generation, checksum), so no unit repeats; drop dedupe = {} or verify",
                w.data.dedupe
            ),
        ));
    }
    // A back-end that touches no storage fills no read buffer: every read would look like a
    // lost write.
    if w.verify && !w.backend.touches_storage() {
        return Err((
            "verify",
            format!(
                "the {} back-end reads and writes nothing, so there is nothing to verify: use io_uring, libaio or psync, or drop verify",
                w.backend.name()
            ),
        ));
    }
    if !w.direct && w.backend.facts().direct_only {
        return Err((
            "direct",
            format!(
                "{} is asynchronous only with O_DIRECT: buffered, each I/O is done inside its submission, one after the other, and its latency would include the others queued with it; use io_uring or psync for buffered I/O, or drop direct = false (--buffered)",
                w.backend.name()
            ),
        ));
    }
    // Counted, not made: a grid of every worker count by every depth would be 268 million
    // steps, gigabytes before the first I/O.
    let per_count = if w.replay.is_some() {
        w.replay_speed.len().max(1)
    } else if w.rate.is_empty() {
        w.ramp.len() * w.qd_ramp.len().max(1)
    } else {
        w.rate.len()
    };
    let steps = per_count * w.host_ramp.len().max(1);
    if steps > MAX_STEPS {
        return Err((
            if w.qd_ramp.is_empty() { "ramp" } else { "qd_ramp" },
            format!(
                "the workload would run {steps} steps ({} worker counts{}{}): at most {MAX_STEPS}; ramp fewer points (1, 2, 4, 8 … doubles)",
                w.ramp.len(),
                if w.qd_ramp.is_empty() { String::new() } else { format!(" × {} queue depths", w.qd_ramp.len()) },
                if w.host_ramp.is_empty() { String::new() } else { format!(" × {} host counts", w.host_ramp.len()) },
            ),
        ));
    }
    if !w.host_ramp.is_empty() && w.is_grid() {
        return Err((
            "host_ramp",
            "a host-count sweep of a workers × queue-depth grid would be a cube of steps: sweep the hosts over a worker ramp or a queue-depth ramp (one worker count), not both".into(),
        ));
    }
    replay_checks(w)?;
    if !w.rate.is_empty() {
        if !w.qd_ramp.is_empty() {
            return Err((
                "qd_ramp",
                "a rate step issues each I/O when it is due, not per worker, so it has no queue depth to ramp: drop qd_ramp, or drop rate for a closed-loop ramp".into(),
            ));
        }
        if w.queue_depth != 1 {
            return Err((
                "queue_depth",
                format!(
                    "queue_depth is {}, but a rate step issues each I/O when it is due, not per worker: leave queue_depth at 1 and bound the I/Os in flight with max_outstanding",
                    w.queue_depth
                ),
            ));
        }
        if !w.curve.is_empty() {
            return Err((
                "curve",
                "curve follows a worker ramp and derives its rates from its maximum; a workload with rate = [...] sets its rates itself: use one of them".into(),
            ));
        }
        if w.sla_search {
            return Err((
                "sla_search",
                "sla_search follows a worker ramp and probes rates up to its maximum; a workload with rate = [...] sets its rates itself: use one of them".into(),
            ));
        }
    }
    if w.steady_state == SteadyState::Snia && w.intervals < STEADY_WINDOW {
        return Err((
            "intervals",
            format!(
                "intervals is {}, but steady_state = \"snia\" judges the last 5 intervals of a step: give the limit of rounds, at least 5 (e.g. intervals = 25)",
                w.intervals
            ),
        ));
    }
    if let Some(r) = w.rate.iter().find(|&&r| w.rate_iops(r) > 1e9) {
        return Err((
            "rate",
            format!("rate {r} MB/s is above 1e9 IOPS at this block size: give at most 1e9 IOPS' worth"),
        ));
    }
    shape_checks(w)
}

/// A replay (issue 45) takes its I/Os, their times and sizes from the trace: the keys that make
/// them otherwise have nothing to do.
fn replay_checks(w: &Workload) -> Result<(), KeyError> {
    if w.replay.is_none() {
        for (key, set) in [
            ("replay_speed", !w.replay_speed.is_empty()),
            ("replay_map", w.replay_map.is_some()),
            ("replay_remap", w.replay_remap != crate::Remap::default()),
            ("replay_split", w.replay_split != crate::Split::default()),
        ] {
            if set {
                return Err((
                    key,
                    format!(
                        "{key} shapes a replay, but workload {} replays no trace: give replay = \"FILE\" (--replay FILE) or drop {key}",
                        w.name
                    ),
                ));
            }
        }
        return Ok(());
    }
    let other = [
        ("rate", !w.rate.is_empty()),
        ("curve", !w.curve.is_empty()),
        ("sla_search", w.sla_search),
        ("verify", w.verify),
        ("qd_ramp", !w.qd_ramp.is_empty()),
        ("think_time", w.think.is_some()),
        ("bursts", w.bursts.is_some()),
        ("together", w.together.is_some()),
        ("steady_state", w.steady_state != SteadyState::None),
    ];
    if let Some((key, _)) = other.iter().find(|(_, set)| *set) {
        return Err((
            key,
            format!(
                "workload {} replays a trace, which sets every I/O's time, place, size and direction; {key} makes them otherwise: drop {key} or replay",
                w.name
            ),
        ));
    }
    if w.queue_depth != 1 {
        return Err((
            "queue_depth",
            format!(
                "queue_depth is {}, but a replay issues each I/O at its trace time, not per worker: leave queue_depth at 1 and bound the I/Os in flight with max_outstanding",
                w.queue_depth
            ),
        ));
    }
    Ok(())
}

/// The most steps a workload may have (its ramp × depths × host counts).
pub const MAX_STEPS: usize = 100_000;

/// Trims (issue 40): their share fits beside the reads', their sizes are used and one size
/// serves a verifying workload's map.
fn trim_checks(w: &Workload) -> Result<(), KeyError> {
    if w.read_pct + w.trim_pct > 100.0 {
        return Err((
            "trim_pct",
            format!(
                "workload {} has read_pct = {} and trim_pct = {}: together more than 100; trims take their share from the writes (read_pct reads, trim_pct trims, the rest writes), so lower read_pct to at most {} (the default is 100)",
                w.name,
                w.read_pct,
                w.trim_pct,
                100.0 - w.trim_pct,
            ),
        ));
    }
    if !w.trim_bs.is_empty() {
        if !w.trims() {
            return Err((
                "trim_bs",
                format!(
                    "trim_bs is the block size of trims, but workload {} has trim_pct = 0: give it a trim_pct or drop trim_bs",
                    w.name
                ),
            ));
        }
        if w.verify {
            return Err((
                "verify",
                "a verifying workload needs one block size (the unit its map tracks), not one per direction: drop trim_bs or verify".into(),
            ));
        }
    }
    Ok(())
}

/// What skew, per-direction block sizes, think time and bursts exclude (issue 39).
fn shape_checks(w: &Workload) -> Result<(), KeyError> {
    if !w.distribution.is_uniform() && w.pattern == Pattern::Sequential {
        return Err((
            "distribution",
            format!(
                "distribution = \"{}\" picks random blocks, but workload {} is sequential: give it pattern = \"random\" or drop distribution",
                w.distribution, w.name
            ),
        ));
    }
    trim_checks(w)?;
    if !w.write_bs.is_empty() {
        if w.write_pct() <= 0.0 && w.trims() {
            return Err((
                "write_bs",
                format!(
                    "write_bs is the block size of writes, but workload {} has read_pct + trim_pct = 100: it never writes; drop write_bs (trims take trim_bs)",
                    w.name
                ),
            ));
        }
        if !w.writes() {
            return Err((
                "write_bs",
                format!(
                    "write_bs is the block size of writes, but workload {} has read_pct = 100: it never writes; drop write_bs or lower read_pct",
                    w.name
                ),
            ));
        }
        if w.read_pct <= 0.0 && !w.trims() {
            return Err((
                "write_bs",
                format!(
                    "write_bs sets writes apart from reads, but workload {} has read_pct = 0: every I/O is a write; give its size as bs",
                    w.name
                ),
            ));
        }
        if w.verify {
            return Err((
                "verify",
                "a verifying workload needs one block size (the unit its map tracks), not one per direction: drop write_bs or verify".into(),
            ));
        }
    }
    let rate_steps = w.has_rate_steps();
    if let Some(t) = &w.think
        && rate_steps
    {
        let which = if !w.rate.is_empty() {
            "rate"
        } else if !w.curve.is_empty() {
            "curve"
        } else {
            "sla_search"
        };
        return Err((
            "think_time",
            format!(
                "think_time ({}) paces a closed-loop worker, but {which} drives workload {} by a schedule (its I/Os go out when due, not after a think): drop think_time or {which}",
                t.time, w.name
            ),
        ));
    }
    if let Some(b) = &w.bursts {
        if !rate_steps {
            return Err((
                "bursts",
                format!(
                    "bursts = \"{b}\" shape the arrivals of rate steps, but workload {} has none (no rate, curve or sla_search): give it rate = [...] (think_time paces a closed loop)",
                    w.name
                ),
            ));
        }
        // Every interval must hold as many on phases as the next: else intervals differ by
        // design and the step's spread (CV, steady state) measures the bursts, not the storage.
        let period_ns = (b.on_ns + b.off_ns) as f64;
        let periods = w.interval_s * 1e9 / period_ns;
        if (periods - periods.round()).abs() > 1e-6 || periods.round() < 1.0 {
            return Err((
                "bursts",
                format!(
                    "bursts = \"{b}\" repeat every {} s, but interval_s = {} is no whole number of them: every interval must hold the same on and off phases (give interval_s = {} or another multiple)",
                    period_ns / 1e9,
                    w.interval_s,
                    (periods.round().max(1.0) * period_ns / 1e9)
                ),
            ));
        }
        if let Some(r) = w.rate.iter().find(|&&r| w.rate_iops(r) * b.peak_factor() > 1e9) {
            return Err((
                "bursts",
                format!(
                    "at rate {r} the on phases of bursts = \"{b}\" would issue {:.3e} IOPS, above 1e9: lengthen the on phase or lower the rate",
                    w.rate_iops(*r) * b.peak_factor()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::model::{Fault, FaultKind, WorkingSet};
    use crate::options::Workload;
    use crate::{Overrides, check_workload, parse_str};

    /// The way back from a resolved workload to its keys is whole: every workload of every
    /// suite, and one that sets every key, resolves from its own keys to itself.
    #[test]
    fn a_workloads_keys_resolve_to_itself() {
        let mut all: Vec<Workload> = crate::suites::SUITES
            .iter()
            .flat_map(|s| crate::suites::load(s.name, &Overrides::default()).unwrap().workloads)
            .collect();
        let every = "[[workloads]]\nname = \"w\"\nread_pct = 70\nbs = { \"4k\" = 3, \"8k\" = 1 }\npattern = \"sequential\"\nworking_set = \"frontend\"\nfrontend_blocks = 7\nramp = [2, 3]\nwarmup_s = 1.5\nintervals = 6\ninterval_s = 0.5\npause_s = 2\ndirect = false\nbackend = \"psync\"\nthreads = 3\ncompress = 0.4\ndedupe = 2\ndedupe_unit = \"4k\"\nconstant = 0xa5\non_error = \"abort\"\nstuck_after_s = 9\ncurve = [50, 100]\narrival = \"poisson\"\nmax_outstanding = 9\noverload = \"drop\"\nseed = 7\nstop_at_mean_ms = 3\nstop_at_p99_ms = 4\nsteady_state = \"snia\"\nsla_search = true\n";
        all.extend(parse_str(every, "t", &Overrides::default()).unwrap().workloads);
        let rated = "[[workloads]]\nname = \"r\"\nrate = [10, 20]\nverify = true\nworking_set = { start = \"1m\", end = \"2m\" }\nbursts = \"100ms/900ms\"\n";
        all.extend(parse_str(rated, "t", &Overrides::default()).unwrap().workloads);
        let trimmed = "[[workloads]]\nname = \"t\"\nread_pct = 30\ntrim_pct = 20\nbs = \"4k\"\nwrite_bs = \"8k\"\ntrim_bs = { \"64k\" = 1, \"1m\" = 1 }\n";
        all.extend(parse_str(trimmed, "t", &Overrides::default()).unwrap().workloads);
        let shaped = "[[workloads]]\nname = \"s\"\nread_pct = 70\nbs = \"4k\"\nwrite_bs = { \"64k\" = 1, \"128k\" = 1 }\ndistribution = \"zipf:1.2:0.25\"\nhot_layout = \"scattered\"\nthink_time = \"100us-900us\"\nthink_blocks = 4\nthink_spin = \"50us\"\n\n[[workloads]]\nname = \"z\"\ndistribution = \"zoned:60/10:30/20:10/70\"\nthink_time = \"exp:2ms\"\n";
        all.extend(parse_str(shaped, "t", &Overrides::default()).unwrap().workloads);
        let depths = "[[workloads]]\nname = \"q\"\nqd_ramp = [2, 8]\n\n[[workloads]]\nname = \"g\"\nramp = [1, 4]\nqd_ramp = [1, 16]\n";
        all.extend(parse_str(depths, "t", &Overrides::default()).unwrap().workloads);
        assert!(all.len() > 10);
        for w in all {
            let file = crate::PlanFile { workloads: vec![w.keys()], ..Default::default() };
            let again = super::super::resolve_file(&file, "t").unwrap().workloads.remove(0);
            assert_eq!(again, w);
        }
    }

    /// Issue 41: of `queue_depth` and `qd_ramp` the nearer layer wins; a depth ramp without a
    /// worker ramp beside it (or nearer) runs at 1 worker; a grid only when both are given.
    #[test]
    fn queue_depth_and_its_ramp_layer_nearer_wins() {
        let plan = |text: &str, cli: crate::WorkloadKeys| {
            let o = Overrides { keys: cli, ..Default::default() };
            parse_str(text, "p.toml", &o).map(|p| p.workloads.into_iter().next().unwrap())
        };
        let none = crate::WorkloadKeys::default;
        let steps = |w: &Workload| w.steps().iter().map(|s| (s.workers, s.queue_depth)).collect::<Vec<_>>();
        // The workload's ramp of depths over the defaults' depth and ramp: at 1 worker.
        let w =
            plan("[defaults]\nqueue_depth = 8\nramp = [1, 2]\n[[workloads]]\nname = \"w\"\nqd_ramp = [2, 4]\n", none())
                .unwrap();
        assert_eq!(steps(&w), [(1, 2), (1, 4)]);
        assert_eq!(w.queue_depth, 2);
        assert!(w.ramps_queue_depth() && !w.is_grid());
        // Both in the workload: a grid, row after row.
        let w = plan("[[workloads]]\nname = \"w\"\nramp = [1, 2]\nqd_ramp = [2, 4]\n", none()).unwrap();
        assert_eq!(steps(&w), [(1, 2), (1, 4), (2, 2), (2, 4)]);
        assert!(w.is_grid());
        // The command line's depth is nearer than the plan's ramp of depths.
        let cli = crate::WorkloadKeys { queue_depth: Some(8), ..none() };
        let w = plan("[[workloads]]\nname = \"w\"\nramp = [1, 2]\nqd_ramp = [2, 4]\n", cli).unwrap();
        assert_eq!(steps(&w), [(1, 8), (2, 8)]);
        assert!(w.qd_ramp.is_empty());
        // Both in one table: refused, naming both.
        let e = plan("[[workloads]]\nname = \"w\"\nqueue_depth = 4\nqd_ramp = [2, 4]\n", none()).unwrap_err();
        assert!(e.to_string().contains("queue_depth = 4 and qd_ramp = [2, 4] are both given"), "{e}");
        // A step runs at its depth, with no ramp left for the agents to resolve.
        let w = plan("[[workloads]]\nname = \"w\"\nqd_ramp = [2, 4]\n", none()).unwrap();
        let at = w.at_step(&w.steps()[1]);
        assert_eq!((at.queue_depth, at.qd_ramp.len()), (4, 0));
        check_workload(&at, &[], "coordinator").unwrap();
        check_workload(&w, &[], "coordinator").unwrap();
    }

    /// Issue 41: a concurrent step's workers shared out by share, adding up to the step's, one
    /// at the least each (found by an outside attack: "one each, then the rest" gave 3 : 1 of 5
    /// as 3 and 2).
    #[test]
    fn members_share_out_the_step_s_workers() {
        let m = |share: f64| Workload { share, ..Workload::default() };
        let (three_one, thirds) = ([m(3.0), m(1.0)], [m(1.0), m(1.0), m(1.0)]);
        for (workers, want) in [(1, vec![1, 1]), (2, vec![1, 1]), (4, vec![3, 1]), (5, vec![4, 1]), (32, vec![24, 8])] {
            assert_eq!(Workload::member_workers(&three_one, workers), want, "3 : 1 of {workers}");
        }
        assert_eq!(Workload::member_workers(&thirds, 2), [1, 1, 1]);
        assert_eq!(Workload::member_workers(&thirds, 10), [4, 3, 3]);
        let tiny = [m(1000.0), m(1.0)];
        assert_eq!(Workload::member_workers(&tiny, 8), [7, 1], "the smallest share still runs one");
    }

    /// Issue 41, found in review: a grid of every worker count by every depth was hundreds of
    /// millions of steps (an abort allocating them); `target_groups` on hosts with targets of
    /// their own failed only when the agent was asked to run the step.
    #[test]
    fn a_huge_grid_and_groups_on_hosts_own_targets_are_refused() {
        let ramp: Vec<String> = (1..=400).map(|n| n.to_string()).collect();
        let qd: Vec<String> = (1..=300).map(|n| n.to_string()).collect();
        let text =
            format!("[[workloads]]\nname = \"w\"\nramp = [{}]\nqd_ramp = [{}]\n", ramp.join(", "), qd.join(", "));
        let e = parse_str(&text, "p", &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("would run 120000 steps"), "{e}");
        let text = "[[groups]]\nname = \"a\"\ntargets = [\"x\"]\n[[hosts]]\naddress = \"h:1\"\ntargets = [\"/y\"]\n[[workloads]]\nname = \"w\"\ntarget_groups = [\"a\"]\n";
        let e = parse_str(text, "p", &Overrides::default()).unwrap_err();
        assert!(e.to_string().contains("hosts[0].targets") && e.to_string().contains("targets of its own"), "{e}");
    }

    /// Issue 41: a host-count sweep runs the whole ramp at each count, the fewest hosts first;
    /// over a grid it is refused; a step's workload carries no ramp of hosts or depths.
    #[test]
    fn a_host_sweep_runs_the_ramp_at_each_count() {
        let w = parse_str(
            "[[workloads]]\nname = \"w\"\nramp = [1, 4]\nhost_ramp = [1, 2, 4]\n",
            "p",
            &Overrides::default(),
        )
        .unwrap()
        .workloads
        .remove(0);
        let steps: Vec<(Option<u32>, u32)> = w.steps().iter().map(|s| (s.hosts, s.workers)).collect();
        assert_eq!(steps, [(Some(1), 1), (Some(1), 4), (Some(2), 1), (Some(2), 4), (Some(4), 1), (Some(4), 4)]);
        assert_eq!(w.planned_steps(), 6);
        let at = w.at_step(&w.steps()[3]);
        assert!(at.host_ramp.is_empty());
        check_workload(&at, &[], "coordinator").unwrap();
        let e = parse_str(
            "[[workloads]]\nname = \"w\"\nramp = [1, 4]\nqd_ramp = [1, 4]\nhost_ramp = [1, 2]\n",
            "p",
            &Overrides::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("would be a cube of steps"), "{e}");
        for (bad, says) in
            [("[2, 1]", "must increase strictly"), ("[0, 1]", "1 to 4096 hosts"), ("[]", "host_ramp is empty")]
        {
            let e = parse_str(&format!("[[workloads]]\nname = \"w\"\nhost_ramp = {bad}\n"), "p", &Overrides::default())
                .unwrap_err();
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    /// Issue 39: what skew, sizes per direction, think time and bursts exclude is refused with
    /// the key to change and why.
    #[test]
    fn shapes_without_meaning_are_refused_with_the_reason() {
        let cases = [
            (
                "pattern = \"sequential\"\ndistribution = \"zipf:1.2\"",
                "workloads[0].distribution",
                "but workload w is sequential",
            ),
            ("write_bs = \"64k\"", "workloads[0].write_bs", "workload w has read_pct = 100: it never writes"),
            ("read_pct = 0\nwrite_bs = \"64k\"", "workloads[0].write_bs", "every I/O is a write; give its size as bs"),
            ("read_pct = 50\nwrite_bs = \"64k\"\nverify = true", "workloads[0].verify", "not one per direction"),
            (
                "think_time = \"1ms\"\nrate = [100]",
                "workloads[0].think_time",
                "but rate drives workload w by a schedule",
            ),
            ("think_time = \"1ms\"\ncurve = [50, 100]", "workloads[0].think_time", "but curve drives"),
            ("bursts = \"100ms/900ms\"", "workloads[0].bursts", "workload w has none (no rate, curve or sla_search)"),
            ("think_spin = \"5us\"", "workloads[0].think_spin", "give think_time too"),
            (
                "think_time = \"1ms-2ms\"\nthink_spin = \"1500us\"",
                "workloads[0].think_spin",
                "longer than the shortest think (1ms)",
            ),
            ("think_time = \"1ms\"\nthink_blocks = 0", "workloads[0].think_blocks", "give 1 to 1000000"),
            ("think_time = \"2h\"", "workloads[0].think_time", "unknown unit"),
            ("think_time = \"exp:1ms\"\nthink_spin = \"10us\"", "workloads[0].think_spin", "can be as short as 0"),
            ("distribution = \"zipf:0\"", "workloads[0].distribution", "zipf"),
            ("distribution = \"gamma:1\"", "workloads[0].distribution", "gamma"),
            ("hot_layout = \"spread\"", "workloads[0].hot_layout", "use contiguous or scattered"),
            ("rate = [100]\nbursts = \"100us/1ms\"", "workloads[0].bursts", "at least 1ms"),
            ("rate = [100]\nbursts = \"300ms/400ms\"", "workloads[0].bursts", "no whole number of them"),
            ("rate = [9e8]\nbursts = \"1ms/9ms\"", "workloads[0].bursts", "above 1e9"),
            ("write_bs = \"1000\"\nread_pct = 50", "workloads[0].write_bs", "multiple of 512"),
            // Trims (issue 40).
            ("trim_pct = 10", "workloads[0].trim_pct", "read_pct = 100 and trim_pct = 10: together more than 100"),
            ("trim_pct = 101\nread_pct = 0", "workloads[0].trim_pct", "0 to 100"),
            ("trim_bs = \"64k\"\nread_pct = 50", "workloads[0].trim_bs", "has trim_pct = 0"),
            ("trim_bs = \"1000\"\nread_pct = 50\ntrim_pct = 10", "workloads[0].trim_bs", "multiple of 512"),
            (
                "read_pct = 50\ntrim_pct = 10\ntrim_bs = \"64k\"\nverify = true",
                "workloads[0].verify",
                "drop trim_bs or verify",
            ),
            (
                "read_pct = 50\ntrim_pct = 50\nwrite_bs = \"64k\"",
                "workloads[0].write_bs",
                "it never writes; drop write_bs",
            ),
            (
                "bs = \"8k\"\ndedupe_unit = \"8k\"\nread_pct = 50\nwrite_bs = \"4k\"",
                "workloads[0].dedupe_unit",
                "block size 4k is not a multiple",
            ),
            (
                "bs = \"8k\"\ndedupe_unit = \"8k\"\nread_pct = 50\nwrite_bs = \"4k\"",
                "workloads[0].dedupe_unit",
                "block size 4k is not a multiple",
            ),
        ];
        for (keys, key, says) in cases {
            let text = format!("[[workloads]]\nname = \"w\"\n{keys}\n");
            let e = parse_str(&text, "t.toml", &Overrides::default()).unwrap_err().to_string();
            // Values refused as they are read name the key alone (`t.toml:3: think_time: …`).
            let named = e.contains(key) || e.contains(&format!(": {}: ", key.rsplit('.').next().unwrap()));
            assert!(named && e.contains(says), "{keys}: {e}");
        }
    }

    /// `--workload` chooses before anything is resolved (found in the review of issue 38): a
    /// workload not chosen, whose keys are refused, no longer refuses the run.
    #[test]
    fn a_workload_not_chosen_cannot_refuse_the_run() {
        let text = "[[workloads]]\nname = \"good\"\n\n[[workloads]]\nname = \"bad\"\nverify = true\nbs = { \"4k\" = 1, \"8k\" = 1 }\n";
        let chosen = Overrides { workload_filter: Some("good".into()), ..Default::default() };
        let plan = parse_str(text, "t", &chosen).unwrap();
        assert_eq!(plan.workloads.len(), 1);
        assert_eq!(plan.workloads[0].name, "good");
        let e = parse_str(text, "t", &Overrides::default()).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("workloads[1].verify"), "{e}");
        // Names are the plan's: checked whether chosen or not (an outside comparison with the
        // binary before found an empty name let through).
        let text = "[[workloads]]\nname = \"good\"\n\n[[workloads]]\nname = \"\"\n";
        let e = parse_str(text, "t", &chosen).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("workloads[1].name"), "{e}");
        // Errors come in the plan's order: a bad key of the first workload before the second's
        // repeated name, as before the rows.
        let text = "[[workloads]]\nname = \"a\"\nqueue_depth = 0\n\n[[workloads]]\nname = \"a\"\n";
        let e = parse_str(text, "t", &Overrides::default()).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("workloads[0].queue_depth"), "{e}");
    }

    #[test]
    fn a_resolved_workload_passes_and_a_damaged_one_names_its_key() {
        let text = "[[workloads]]\nname = \"w\"\nread_pct = 70\nbs = { \"4k\" = 1, \"4096\" = 2 }\n";
        let ok = parse_str(text, "t", &Overrides::default()).unwrap().workloads.remove(0);
        check_workload(&ok, &[], "coordinator").unwrap();
        type Damage = (&'static str, fn(&mut Workload));
        let bad: [Damage; 8] = [
            ("bs", |w| w.bs.clear()),
            ("bs", |w| w.bs.iter_mut().for_each(|b| b.weight = 0)),
            ("bs", |w| w.bs[0].bytes = 1000),
            ("queue_depth", |w| w.queue_depth = 0),
            ("intervals", |w| w.intervals = u32::MAX),
            ("interval_s", |w| w.interval_s = f64::NAN),
            ("working_set", |w| w.working_set = WorkingSet::Range { start: 4096, end: 0 }),
            ("ramp", |w| w.ramp = vec![0]),
        ];
        for (key, damage) in bad {
            let mut w = ok.clone();
            damage(&mut w);
            let e = check_workload(&w, &[], "coordinator").unwrap_err();
            assert_eq!(e.key, Some(format!("workloads[0].{key}")), "{e}");
            assert_eq!(e.source, "coordinator");
        }
        let stall =
            Fault { kind: FaultKind::Stall, share: 1.0, from_s: 0.0, to_s: None, target: None, latency_ms: 0.0 };
        let e = check_workload(&ok, &[stall], "coordinator").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("faults[0].to_s"), "{e}");
    }
}
