//! One workload resolved from its layers: each key's row (options.rs) checks its own value;
//! here are the checks rows name (name, ramp, rate, curve), the values several keys resolve to
//! together (block sizes, working set, data pattern) with their way back, the rules between
//! keys in one function, and the faults. Every error names the key and the layer it came from.

use super::Resolver;
use crate::declare::{KeyError, ensure, missing};
use crate::error::PlanError;
use crate::keys::{BlockSizeSpec, FaultKeys, WorkingSetSpec, WorkloadKeys};
use crate::locate::Seg;
use crate::model::{BlockSize, DataPattern, Fault, FaultKind, STEADY_WINDOW, SteadyState, WorkingSet, Workload};
use crate::size::format_size;

impl Resolver<'_> {
    /// Workload `i` of keys layered down to the built-in defaults: each key's check, then the
    /// rules between keys.
    pub(super) fn workload(&self, i: usize, k: &WorkloadKeys) -> Result<Workload, PlanError> {
        let w = k.resolve_each().map_err(|(key, m)| self.key_err(i, key, m))?;
        cross_checks(&w).map_err(|(key, m)| self.key_err(i, key, m))?;
        Ok(w)
    }

    /// The workload's name as the plan gives it (its row checks the characters).
    pub(super) fn workload_name(&self, i: usize, k: &WorkloadKeys) -> Result<String, PlanError> {
        k.name.clone().ok_or_else(|| {
            self.err(
                &[Seg::Key("workloads"), Seg::Index(i)],
                format!("workloads[{i}]"),
                "every workload needs a `name`, e.g. name = \"backend-random-read-8k\"",
            )
        })
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

/// `name`: usable as a key and in file names.
pub(crate) fn name(name: &str) -> Result<(), String> {
    ensure(!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)), || {
        format!("workload name `{name}` must be non-empty and use only letters, digits, '-', '_' and '.'")
    })
}

/// `ramp`: worker counts, usable and increasing.
pub(crate) fn ramp(ramp: &[u32]) -> Result<(), String> {
    ensure(!ramp.is_empty(), || {
        "the ramp is empty: give the worker counts of the steps, e.g. ramp = [1, 2, 4, 8]".into()
    })?;
    ensure(ramp.iter().all(|&n| (1..=65536).contains(&n)), || {
        format!("ramp {ramp:?}: every step needs 1 to 65536 workers")
    })?;
    ensure(ramp.windows(2).all(|p| p[0] < p[1]), || {
        format!(
            "ramp {ramp:?} must increase strictly (e.g. 1, 2, 4, 8): the analysis compares each step with the one before"
        )
    })
}

/// `rate`: target rates of a rate ramp, usable and increasing.
pub(crate) fn rate(rate: &[f64]) -> Result<(), String> {
    ensure(!rate.is_empty(), || {
        "the rate ramp is empty: give the target rates of the steps, e.g. rate = [10000, 50000]".into()
    })?;
    ensure(rate.iter().all(|&r| r > 0.0 && r <= 1e9), || {
        format!(
            "rate {rate:?}: every step needs a target above 0 and up to 1e9 (IOPS, or MB/s for sequential workloads)"
        )
    })?;
    ensure(rate.windows(2).all(|p| p[0] < p[1]), || {
        format!(
            "rate {rate:?} must increase strictly (e.g. 10000, 50000, 100000): the analysis compares each step with the one before"
        )
    })
}

/// `curve`: shares of the maximum, increasing.
pub(crate) fn curve(curve: &[f64]) -> Result<(), String> {
    ensure(!curve.is_empty() && curve.iter().all(|&p| p > 0.0 && p <= 100.0), || {
        format!(
            "curve {curve:?}: give shares of the maximum in percent, above 0 up to 100 (e.g. [10, 50, 70, 80, 90, 100])"
        )
    })?;
    ensure(curve.windows(2).all(|p| p[0] < p[1]), || format!("curve {curve:?} must increase strictly"))
}

/// `bs`: the block size or mix, each size once, each usable.
pub(crate) fn block_sizes(k: &WorkloadKeys) -> Result<Vec<BlockSize>, KeyError> {
    let err = |m: String| ("bs", m);
    let bs = match k.bs.clone().ok_or_else(|| missing("bs"))? {
        BlockSizeSpec::One(b) => vec![BlockSize { bytes: b, weight: 1 }],
        BlockSizeSpec::Mix(m) => {
            // One entry per size: `{ "4k" = 70, "4096" = 30 }` is 4k with weight 100 (a plan
            // printed back names each size once).
            let mut mix: Vec<BlockSize> = Vec::new();
            for (bytes, weight) in m {
                match mix.iter_mut().find(|b| b.bytes == bytes) {
                    Some(b) => {
                        b.weight = b.weight.checked_add(weight).ok_or_else(|| {
                            err(format!(
                                "the weights given to block size {} add up to more than 4294967295",
                                format_size(bytes)
                            ))
                        })?
                    }
                    None => mix.push(BlockSize { bytes, weight }),
                }
            }
            mix
        }
    };
    if bs.is_empty() || bs.iter().all(|b| b.weight == 0) {
        return Err(err("the block size mix is empty or all weights are 0".into()));
    }
    for b in &bs {
        if b.bytes == 0 || b.bytes % 512 != 0 || b.bytes > 64 << 20 {
            return Err(err(format!(
                "block size {} is not usable: it must be a multiple of 512 bytes, from 512 to 64m",
                if b.bytes == 0 { "0".to_string() } else { format_size(b.bytes) }
            )));
        }
    }
    Ok(bs)
}

pub(crate) fn block_sizes_back(bs: &[BlockSize], k: &mut WorkloadKeys) {
    k.bs = Some(BlockSizeSpec::Mix(bs.iter().map(|b| (b.bytes, b.weight)).collect()));
}

/// `working_set` (and `frontend_blocks`): a frontend of at least one block, the backend, or a
/// 512-aligned range.
pub(crate) fn working_set(k: &WorkloadKeys) -> Result<WorkingSet, KeyError> {
    Ok(match k.working_set.clone().ok_or_else(|| missing("working_set"))? {
        WorkingSetSpec::Frontend => {
            let blocks = k.frontend_blocks.ok_or_else(|| missing("frontend_blocks"))?;
            if blocks == 0 {
                return Err(("frontend_blocks", "frontend_blocks must be at least 1".into()));
            }
            WorkingSet::Frontend { blocks }
        }
        WorkingSetSpec::Backend => WorkingSet::Backend,
        WorkingSetSpec::Range { start, end } => {
            if start >= end || start % 512 != 0 || end % 512 != 0 {
                return Err((
                    "working_set",
                    format!("working set range {start}..{end} must have start < end, both multiples of 512 bytes"),
                ));
            }
            WorkingSet::Range { start, end }
        }
    })
}

pub(crate) fn working_set_back(ws: &WorkingSet, k: &mut WorkloadKeys) {
    (k.working_set, k.frontend_blocks) = match *ws {
        WorkingSet::Frontend { blocks } => (Some(WorkingSetSpec::Frontend), Some(blocks)),
        WorkingSet::Backend => (Some(WorkingSetSpec::Backend), None),
        WorkingSet::Range { start, end } => (Some(WorkingSetSpec::Range { start, end }), None),
    };
}

/// `compress`, `dedupe`, `dedupe_unit` and `constant`: what written blocks contain.
pub(crate) fn data_pattern(k: &WorkloadKeys) -> Result<DataPattern, KeyError> {
    let compress = k.compress.ok_or_else(|| missing("compress"))?;
    if !(0.0..=0.99).contains(&compress) {
        return Err((
            "compress",
            format!(
                "compress is {compress}; it is the constant share of each block, 0 (incompressible) to 0.99 (0.4 = 60 % random, 40 % constant; every 512-byte sector keeps 16 random bytes, so ratios top out at 32:1)"
            ),
        ));
    }
    let dedupe = k.dedupe.ok_or_else(|| missing("dedupe"))?;
    if !(1.0..=1000.0).contains(&dedupe) {
        return Err((
            "dedupe",
            format!(
                "dedupe is {dedupe}; it is written units per unique unit, 1 (all unique) to 1000 (2 = every unit twice)"
            ),
        ));
    }
    let bs = block_sizes(k)?;
    let min_bs = bs.iter().map(|b| b.bytes).min().unwrap_or(512);
    let unit = k.dedupe_unit.unwrap_or(min_bs);
    if unit == 0 || !unit.is_multiple_of(512) {
        return Err(("dedupe_unit", format!("dedupe_unit is {unit}; it must be a multiple of 512 bytes")));
    }
    if let Some(b) = bs.iter().find(|b| !b.bytes.is_multiple_of(unit)) {
        return Err((
            "dedupe_unit",
            format!(
                "block size {} is not a multiple of the dedupe unit {}: set dedupe_unit to a size every block size is a multiple of",
                format_size(b.bytes),
                format_size(unit)
            ),
        ));
    }
    Ok(DataPattern { compress, dedupe, dedupe_unit: unit, constant: k.constant.unwrap_or(0) })
}

pub(crate) fn data_pattern_back(d: &DataPattern, k: &mut WorkloadKeys) {
    k.compress = Some(d.compress);
    k.dedupe = Some(d.dedupe);
    // 0: the smallest block size, as in results stored before the key existed.
    k.dedupe_unit = (d.dedupe_unit != 0).then_some(d.dedupe_unit);
    k.constant = Some(d.constant);
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
    if !w.rate.is_empty() {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::model::{Fault, FaultKind, WorkingSet, Workload};
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
        let rated = "[[workloads]]\nname = \"r\"\nrate = [10, 20]\nverify = true\nworking_set = { start = \"1m\", end = \"2m\" }\n";
        all.extend(parse_str(rated, "t", &Overrides::default()).unwrap().workloads);
        assert!(all.len() > 10);
        for w in all {
            let file = crate::PlanFile { workloads: vec![w.keys()], ..Default::default() };
            let again = super::super::resolve_file(&file, "t").unwrap().workloads.remove(0);
            assert_eq!(again, w);
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
