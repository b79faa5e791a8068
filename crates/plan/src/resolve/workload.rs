//! One workload resolved from its layers and checked, with the faults and the data pattern:
//! every error names the key and the layer it came from.

use super::Resolver;
use crate::error::PlanError;
use crate::keys::{BlockSizeSpec, WorkingSetSpec, WorkloadKeys};
use crate::locate::Seg;
use crate::model::{BlockSize, DataPattern, Fault, FaultKind, WorkingSet, Workload};
use crate::size::format_size;

impl Resolver<'_> {
    pub(super) fn workload(&self, i: usize, k: &WorkloadKeys) -> Result<Workload, PlanError> {
        // Every value is present: the built-in defaults set all keys but `name`, `dedupe_unit`, `stuck_after_s` and `rate`.
        let name = self.workload_name(i, k)?;
        let read_pct = k.read_pct.unwrap();
        if !(0.0..=100.0).contains(&read_pct) {
            return Err(self.key_err(
                i,
                "read_pct",
                format!(
                    "read_pct is {read_pct}; it is a share of reads in percent, 0 to 100 (70 = 70 % reads, 30 % writes)"
                ),
            ));
        }
        let bs = self.block_sizes(i, k)?;
        let working_set = self.working_set(i, k)?;
        let queue_depth = k.queue_depth.unwrap();
        if !(1..=4096).contains(&queue_depth) {
            return Err(self.key_err(
                i,
                "queue_depth",
                format!("queue_depth is {queue_depth}; it must be 1 to 4096 outstanding I/Os per worker"),
            ));
        }
        let ramp = k.ramp.clone().unwrap();
        if ramp.is_empty() {
            return Err(self.key_err(
                i,
                "ramp",
                "the ramp is empty: give the worker counts of the steps, e.g. ramp = [1, 2, 4, 8]".into(),
            ));
        }
        if ramp.iter().any(|&n| n == 0 || n > 65536) {
            return Err(self.key_err(i, "ramp", format!("ramp {ramp:?}: every step needs 1 to 65536 workers")));
        }
        if ramp.windows(2).any(|p| p[0] >= p[1]) {
            return Err(self.key_err(i, "ramp", format!("ramp {ramp:?} must increase strictly (e.g. 1, 2, 4, 8): the analysis compares each step with the one before")));
        }
        let warmup_s = k.warmup_s.unwrap();
        if !(0.0..=86_400.0).contains(&warmup_s) {
            return Err(self.key_err(i, "warmup_s", format!("warmup_s is {warmup_s}; it must be 0 to 86400 seconds")));
        }
        let intervals = k.intervals.unwrap();
        if !(1..=100_000).contains(&intervals) {
            return Err(self.key_err(
                i,
                "intervals",
                format!("intervals is {intervals}; a step needs 1 to 100000 measurement intervals"),
            ));
        }
        let interval_s = k.interval_s.unwrap();
        if !(0.1..=86_400.0).contains(&interval_s) {
            return Err(self.key_err(
                i,
                "interval_s",
                format!("interval_s is {interval_s}; an interval lasts 0.1 to 86400 seconds"),
            ));
        }
        let pause_s = k.pause_s.unwrap();
        if !(0.0..=86_400.0).contains(&pause_s) {
            return Err(self.key_err(
                i,
                "pause_s",
                format!("pause_s is {pause_s}; rest between steps 0 (none) to 86400 seconds"),
            ));
        }
        let threads = k.threads.unwrap();
        if threads > 1024 {
            return Err(self.key_err(
                i,
                "threads",
                format!("threads is {threads}; use 0 (chosen by measurement) to 1024"),
            ));
        }
        let data = self.data_pattern(i, k, &bs)?;
        if let Some(s) = k.stuck_after_s
            && !(0.1..=86_400.0).contains(&s)
        {
            return Err(self.key_err(
                i,
                "stuck_after_s",
                format!("stuck_after_s is {s}; give 0.1 to 86400 seconds (how long outstanding I/Os may take after a step ends)"),
            ));
        }
        let verify = k.verify.unwrap();
        self.cross_checks(i, k, &bs, &data)?;
        let max_outstanding = k.max_outstanding.unwrap();
        if !(1..=65_536).contains(&max_outstanding) {
            return Err(self.key_err(
                i,
                "max_outstanding",
                format!("max_outstanding is {max_outstanding}; a rate step keeps 1 to 65536 I/Os in flight per host"),
            ));
        }
        let (rate, curve) = self.rate_and_curve(i, k, queue_depth)?;
        let (sla_search, steady_state) = self.step_ends(i, k, intervals)?;
        let w = Workload {
            name,
            read_pct,
            bs,
            pattern: k.pattern.unwrap(),
            working_set,
            queue_depth,
            ramp,
            warmup_s,
            intervals,
            interval_s,
            pause_s,
            direct: k.direct.unwrap(),
            backend: k.backend.unwrap(),
            threads,
            data,
            on_error: k.on_error.unwrap(),
            stuck_after_s: k.stuck_after_s,
            verify,
            rate,
            arrival: k.arrival.unwrap(),
            max_outstanding,
            overload: k.overload.unwrap(),
            seed: k.seed.unwrap(),
            curve,
            stop_at_mean_ms: k.stop_at_mean_ms,
            stop_at_p99_ms: k.stop_at_p99_ms,
            steady_state,
            sla_search,
        };
        if let Some(r) = w.rate.iter().find(|&&r| w.rate_iops(r) > 1e9) {
            return Err(self.key_err(
                i,
                "rate",
                format!("rate {r} MB/s is above 1e9 IOPS at this block size: give at most 1e9 IOPS' worth"),
            ));
        }
        Ok(w)
    }

    /// The workload's name: given, and usable as a key and in file names.
    fn workload_name(&self, i: usize, k: &WorkloadKeys) -> Result<String, PlanError> {
        let name = k.name.clone().ok_or_else(|| {
            self.err(
                &[Seg::Key("workloads"), Seg::Index(i)],
                format!("workloads[{i}]"),
                "every workload needs a `name`, e.g. name = \"backend-random-read-8k\"",
            )
        })?;
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(self.key_err(
                i,
                "name",
                format!("workload name `{name}` must be non-empty and use only letters, digits, '-', '_' and '.'"),
            ));
        }
        Ok(name)
    }

    /// The block size or mix, each size once, each usable.
    fn block_sizes(&self, i: usize, k: &WorkloadKeys) -> Result<Vec<BlockSize>, PlanError> {
        let bs = match k.bs.clone().unwrap() {
            BlockSizeSpec::One(b) => vec![BlockSize { bytes: b, weight: 1 }],
            BlockSizeSpec::Mix(m) => {
                // One entry per size: `{ "4k" = 70, "4096" = 30 }` is 4k with weight 100 (a
                // plan printed back names each size once).
                let mut mix: Vec<BlockSize> = Vec::new();
                for (bytes, weight) in m {
                    match mix.iter_mut().find(|b| b.bytes == bytes) {
                        Some(b) => {
                            b.weight = b.weight.checked_add(weight).ok_or_else(|| {
                                self.key_err(
                                    i,
                                    "bs",
                                    format!(
                                        "the weights given to block size {} add up to more than 4294967295",
                                        format_size(bytes)
                                    ),
                                )
                            })?
                        }
                        None => mix.push(BlockSize { bytes, weight }),
                    }
                }
                mix
            }
        };
        if bs.is_empty() || bs.iter().all(|b| b.weight == 0) {
            return Err(self.key_err(i, "bs", "the block size mix is empty or all weights are 0".into()));
        }
        for b in &bs {
            if b.bytes == 0 || b.bytes % 512 != 0 || b.bytes > 64 << 20 {
                return Err(self.key_err(
                    i,
                    "bs",
                    format!(
                        "block size {} is not usable: it must be a multiple of 512 bytes, from 512 to 64m",
                        if b.bytes == 0 { "0".to_string() } else { format_size(b.bytes) }
                    ),
                ));
            }
        }
        Ok(bs)
    }

    /// The working set: a frontend of at least one block, the backend, or a 512-aligned range.
    fn working_set(&self, i: usize, k: &WorkloadKeys) -> Result<WorkingSet, PlanError> {
        Ok(match k.working_set.clone().unwrap() {
            WorkingSetSpec::Frontend => {
                let blocks = k.frontend_blocks.unwrap();
                if blocks == 0 {
                    return Err(self.key_err(i, "frontend_blocks", "frontend_blocks must be at least 1".into()));
                }
                WorkingSet::Frontend { blocks }
            }
            WorkingSetSpec::Backend => WorkingSet::Backend,
            WorkingSetSpec::Range { start, end } => {
                if start >= end || start % 512 != 0 || end % 512 != 0 {
                    return Err(self.key_err(
                        i,
                        "working_set",
                        format!("working set range {start}..{end} must have start < end, both multiples of 512 bytes"),
                    ));
                }
                WorkingSet::Range { start, end }
            }
        })
    }

    /// The rules between keys: what verification needs (one block size, no dedupe, a back-end
    /// that touches storage) and what a back-end needs (O_DIRECT for one asynchronous only
    /// with it).
    fn cross_checks(&self, i: usize, k: &WorkloadKeys, bs: &[BlockSize], data: &DataPattern) -> Result<(), PlanError> {
        let verify = k.verify.unwrap();
        if verify && bs.len() > 1 {
            return Err(self.key_err(
                i,
                "verify",
                "a verifying workload needs one block size (the unit its map tracks), not a mix".into(),
            ));
        }
        if verify && data.dedupe > 1.0 {
            return Err(self.key_err(
                i,
                "verify",
                format!(
                    "a verifying workload cannot deduplicate: every block carries its own header (block number, generation, checksum), so no unit repeats; drop dedupe = {} or verify",
                    data.dedupe
                ),
            ));
        }
        // A back-end that touches no storage fills no read buffer: every read would look like
        // a lost write.
        if verify && let Some(b) = k.backend.filter(|b| !b.touches_storage()) {
            return Err(self.key_err(
                i,
                "verify",
                format!(
                    "the {} back-end reads and writes nothing, so there is nothing to verify: use io_uring, libaio or psync, or drop verify",
                    b.name()
                ),
            ));
        }
        if k.direct == Some(false)
            && let Some(b) = k.backend.filter(|b| b.facts().direct_only)
        {
            return Err(self.key_err(
                i,
                "direct",
                format!(
                    "{} is asynchronous only with O_DIRECT: buffered, each I/O is done inside its submission, one after the other, and its latency would include the others queued with it; use io_uring or psync for buffered I/O, or drop direct = false (--buffered)",
                    b.name()
                ),
            ));
        }
        Ok(())
    }

    /// A rate ramp (increasing, each rate usable, queue depth 1) and a response-time curve
    /// (shares of the maximum, increasing, not beside a rate ramp).
    fn rate_and_curve(&self, i: usize, k: &WorkloadKeys, queue_depth: u32) -> Result<(Vec<f64>, Vec<f64>), PlanError> {
        let rate = k.rate.clone().unwrap_or_default();
        if k.rate.is_some() {
            if rate.is_empty() {
                return Err(self.key_err(
                    i,
                    "rate",
                    "the rate ramp is empty: give the target rates of the steps, e.g. rate = [10000, 50000]".into(),
                ));
            }
            if rate.iter().any(|&r| !(r > 0.0 && r <= 1e9)) {
                return Err(self.key_err(
                    i,
                    "rate",
                    format!("rate {rate:?}: every step needs a target above 0 and up to 1e9 (IOPS, or MB/s for sequential workloads)"),
                ));
            }
            if rate.windows(2).any(|p| p[0] >= p[1]) {
                return Err(self.key_err(i, "rate", format!("rate {rate:?} must increase strictly (e.g. 10000, 50000, 100000): the analysis compares each step with the one before")));
            }
            if queue_depth != 1 {
                return Err(self.key_err(
                    i,
                    "queue_depth",
                    format!("queue_depth is {queue_depth}, but a rate step issues each I/O when it is due, not per worker: leave queue_depth at 1 and bound the I/Os in flight with max_outstanding"),
                ));
            }
        }
        let curve = k.curve.clone().unwrap_or_default();
        if k.curve.is_some() {
            if curve.is_empty() || curve.iter().any(|&p| !(p > 0.0 && p <= 100.0)) {
                return Err(self.key_err(
                    i,
                    "curve",
                    format!("curve {curve:?}: give shares of the maximum in percent, above 0 up to 100 (e.g. [10, 50, 70, 80, 90, 100])"),
                ));
            }
            if curve.windows(2).any(|p| p[0] >= p[1]) {
                return Err(self.key_err(i, "curve", format!("curve {curve:?} must increase strictly")));
            }
            if k.rate.is_some() {
                return Err(self.key_err(
                    i,
                    "curve",
                    "curve follows a worker ramp and derives its rates from its maximum; a workload with rate = [...] sets its rates itself: use one of them".into(),
                ));
            }
        }
        Ok((rate, curve))
    }

    /// How a step or ramp may end early: `stop_at_*` bounds, an SLA search (not beside a rate
    /// ramp), a steady state judged over enough intervals.
    fn step_ends(
        &self,
        i: usize,
        k: &WorkloadKeys,
        intervals: u32,
    ) -> Result<(bool, crate::model::SteadyState), PlanError> {
        for (key, v) in [("stop_at_mean_ms", k.stop_at_mean_ms), ("stop_at_p99_ms", k.stop_at_p99_ms)] {
            if let Some(ms) = v
                && !(ms > 0.0 && ms <= 3_600_000.0)
            {
                return Err(self.key_err(i, key, format!("{key} is {ms}; give a bound above 0 up to 3600000 ms")));
            }
        }
        let sla_search = k.sla_search.unwrap();
        if sla_search && k.rate.is_some() {
            return Err(self.key_err(
                i,
                "sla_search",
                "sla_search follows a worker ramp and probes rates up to its maximum; a workload with rate = [...] sets its rates itself: use one of them".into(),
            ));
        }
        let steady_state = k.steady_state.unwrap();
        if steady_state == crate::model::SteadyState::Snia && intervals < crate::model::STEADY_WINDOW {
            return Err(self.key_err(
                i,
                "intervals",
                format!("intervals is {intervals}, but steady_state = \"snia\" judges the last 5 intervals of a step: give the limit of rounds, at least 5 (e.g. intervals = 25)"),
            ));
        }
        Ok((sla_search, steady_state))
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

    fn data_pattern(&self, i: usize, k: &WorkloadKeys, bs: &[BlockSize]) -> Result<DataPattern, PlanError> {
        let compress = k.compress.unwrap();
        if !(0.0..=0.99).contains(&compress) {
            return Err(self.key_err(
                i,
                "compress",
                format!("compress is {compress}; it is the constant share of each block, 0 (incompressible) to 0.99 (0.4 = 60 % random, 40 % constant; every 512-byte sector keeps 16 random bytes, so ratios top out at 32:1)"),
            ));
        }
        let dedupe = k.dedupe.unwrap();
        if !(1.0..=1000.0).contains(&dedupe) {
            return Err(self.key_err(
                i,
                "dedupe",
                format!("dedupe is {dedupe}; it is written units per unique unit, 1 (all unique) to 1000 (2 = every unit twice)"),
            ));
        }
        let min_bs = bs.iter().map(|b| b.bytes).min().unwrap_or(512);
        let unit = k.dedupe_unit.unwrap_or(min_bs);
        if unit == 0 || !unit.is_multiple_of(512) {
            return Err(self.key_err(
                i,
                "dedupe_unit",
                format!("dedupe_unit is {unit}; it must be a multiple of 512 bytes"),
            ));
        }
        if let Some(b) = bs.iter().find(|b| !b.bytes.is_multiple_of(unit)) {
            return Err(self.key_err(
                i,
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
}
