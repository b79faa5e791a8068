//! The checks rows name (name, ramp, rate, curve) and the values several keys resolve to
//! together (block sizes; working set with `frontend_blocks`; the data pattern of `compress`,
//! `dedupe`, `dedupe_unit` and `constant`), each with its way back to keys.

use super::WorkloadKeys;
use crate::declare::{KeyError, ensure, missing};
use crate::model::{BlockSize, DataPattern, WorkingSet};
use crate::pace::Think;
use crate::size::format_size;
use crate::spec::{BlockSizeSpec, WorkingSetSpec};

/// `name`: usable as a key and in file names.
pub(crate) fn name(name: &str) -> Result<(), String> {
    ensure(!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)), || {
        format!("workload name `{name}` must be non-empty and use only letters, digits, '-', '_' and '.'")
    })
}

/// A ramp of counts (`key`): given (`empty` says what to give), each from 1 to `most` (`each`
/// says of what), increasing.
fn counts(key: &str, list: &[u32], most: u32, empty: &str, each: &str) -> Result<(), String> {
    ensure(!list.is_empty(), || empty.to_string())?;
    ensure(list.iter().all(|&n| (1..=most).contains(&n)), || format!("{key} {list:?}: {each}"))?;
    ensure(list.windows(2).all(|p| p[0] < p[1]), || {
        format!(
            "{key} {list:?} must increase strictly (e.g. 1, 2, 4, 8): the analysis compares each step with the one before"
        )
    })
}

/// `ramp`: worker counts, usable and increasing.
pub(super) fn ramp(ramp: &[u32]) -> Result<(), String> {
    let empty = "the ramp is empty: give the worker counts of the steps, e.g. ramp = [1, 2, 4, 8]";
    counts("ramp", ramp, 65536, empty, "every step needs 1 to 65536 workers")
}

/// `qd_ramp`: queue depths, usable and increasing.
pub(crate) fn qd_ramp(qds: &[u32]) -> Result<(), String> {
    let empty = "qd_ramp is empty: give the queue depths of the steps, e.g. qd_ramp = [1, 2, 4, 8, 16, 32], or drop it";
    counts("qd_ramp", qds, 4096, empty, "every step needs 1 to 4096 outstanding I/Os per worker")
}

/// `host_ramp`: host counts, usable and increasing.
pub(super) fn host_ramp(hosts: &[u32]) -> Result<(), String> {
    let empty = "host_ramp is empty: give the host counts of the sweep, e.g. host_ramp = [1, 2, 4, 8], or drop it";
    counts("host_ramp", hosts, 4096, empty, "every count is 1 to 4096 hosts")
}

/// `target_groups`: group names, given and each once.
pub(super) fn target_groups(names: &[String]) -> Result<(), String> {
    ensure(!names.is_empty(), || {
        "target_groups is empty: name the plan's [[groups]] the workload uses, or drop it".into()
    })?;
    ensure(names.iter().enumerate().all(|(i, n)| !names[..i].contains(n)), || {
        format!("target_groups {names:?} names a group twice")
    })
}

/// `rate`: target rates of a rate ramp, usable and increasing.
/// A replay's trace: a path (read and checked when the run starts, where its errors name the
/// file's line).
pub(super) fn replay(path: &str) -> Result<(), String> {
    ensure(!path.trim().is_empty() && !path.contains('\0'), || {
        "replay is empty: give the trace's path, e.g. replay = \"sdb.blktrace.0\" or --replay io.log".into()
    })
}

/// A replay's speeds: above 0 (up to 1000×), increasing.
pub(super) fn replay_speed(speeds: &[f64]) -> Result<(), String> {
    ensure(!speeds.is_empty(), || "replay_speed is empty: give the speeds of the steps, e.g. [1, 2, 4]".into())?;
    ensure(speeds.iter().all(|&s| (0.001..=1000.0).contains(&s)), || {
        format!(
            "replay_speed {speeds:?}: every speed is 0.001 to 1000 (1 = the trace's own timing, 2 = twice as fast, 0.5 = half)"
        )
    })?;
    ensure(speeds.windows(2).all(|p| p[0] < p[1]), || {
        format!(
            "replay_speed {speeds:?} must increase strictly (e.g. 1, 2, 4): each step is compared with the one before"
        )
    })
}

/// A replay's device map: `DEV=TARGET` pairs (the targets are checked against the plan's when
/// the run starts).
pub(super) fn replay_map(map: &str) -> Result<(), String> {
    crate::replay::parse_map(map).map(|_| ())
}

pub(super) fn rate(rate: &[f64]) -> Result<(), String> {
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
pub(super) fn curve(curve: &[f64]) -> Result<(), String> {
    ensure(!curve.is_empty() && curve.iter().all(|&p| p > 0.0 && p <= 100.0), || {
        format!(
            "curve {curve:?}: give shares of the maximum in percent, above 0 up to 100 (e.g. [10, 50, 70, 80, 90, 100])"
        )
    })?;
    ensure(curve.windows(2).all(|p| p[0] < p[1]), || format!("curve {curve:?} must increase strictly"))
}

/// `bs`: the block size or mix, each size once, each usable.
pub(super) fn block_sizes(k: &WorkloadKeys) -> Result<Vec<BlockSize>, KeyError> {
    sizes_of("bs", k.bs.clone().ok_or_else(|| missing("bs"))?)
}

/// `write_bs`: as `bs`; empty when not given (writes take `bs`).
pub(super) fn write_block_sizes(k: &WorkloadKeys) -> Result<Vec<BlockSize>, KeyError> {
    k.write_bs.clone().map_or(Ok(Vec::new()), |spec| sizes_of("write_bs", spec))
}

pub(super) fn write_block_sizes_back(bs: &[BlockSize], k: &mut WorkloadKeys) {
    k.write_bs = (!bs.is_empty()).then(|| BlockSizeSpec::Mix(bs.iter().map(|b| (b.bytes, b.weight)).collect()));
}

/// `trim_bs`: as `bs`; empty when not given (trims take `bs`).
pub(super) fn trim_block_sizes(k: &WorkloadKeys) -> Result<Vec<BlockSize>, KeyError> {
    k.trim_bs.clone().map_or(Ok(Vec::new()), |spec| sizes_of("trim_bs", spec))
}

pub(super) fn trim_block_sizes_back(bs: &[BlockSize], k: &mut WorkloadKeys) {
    k.trim_bs = (!bs.is_empty()).then(|| BlockSizeSpec::Mix(bs.iter().map(|b| (b.bytes, b.weight)).collect()));
}

/// `think_time`, `think_blocks` and `think_spin` together.
pub(super) fn think(k: &WorkloadKeys) -> Result<Option<Think>, KeyError> {
    let blocks = k.think_blocks.ok_or_else(|| missing("think_blocks"))?;
    if !(1..=1_000_000).contains(&blocks) {
        return Err(("think_blocks", format!("think_blocks is {blocks}; give 1 to 1000000 I/Os between thinks")));
    }
    let spin_ns = match &k.think_spin {
        Some(t) => crate::pace::parse_duration_ns(t).map_err(|m| ("think_spin", m))?,
        None => 0,
    };
    let Some(time) = k.think_time else {
        return match k.think_spin {
            Some(_) => Err(("think_spin", "think_spin is part of a think time: give think_time too".into())),
            None => Ok(None),
        };
    };
    if spin_ns > 0 && matches!(time, crate::ThinkTime::Exponential(_)) {
        return Err((
            "think_spin",
            format!(
                "think_time = \"{time}\" can be as short as 0, so no part of it can be spun: give think_spin with a fixed think (500us) or a range (100us-900us)"
            ),
        ));
    }
    if spin_ns > time.min_ns() {
        return Err((
            "think_spin",
            format!(
                "think_spin {} is longer than the shortest think ({}): the spin is part of each think",
                crate::pace::format_duration_ns(spin_ns),
                crate::pace::format_duration_ns(time.min_ns())
            ),
        ));
    }
    Ok(Some(Think { time, blocks, spin_ns }))
}

pub(super) fn think_back(t: &Option<Think>, k: &mut WorkloadKeys) {
    if let Some(t) = t {
        k.think_time = Some(t.time);
        k.think_blocks = Some(t.blocks);
        k.think_spin = (t.spin_ns > 0).then(|| crate::pace::format_duration_ns(t.spin_ns));
    }
}

/// A block size or mix given to `key`, each size once, each usable.
fn sizes_of(key: &'static str, spec: BlockSizeSpec) -> Result<Vec<BlockSize>, KeyError> {
    let err = |m: String| (key, m);
    let bs = match spec {
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

pub(super) fn block_sizes_back(bs: &[BlockSize], k: &mut WorkloadKeys) {
    k.bs = Some(BlockSizeSpec::Mix(bs.iter().map(|b| (b.bytes, b.weight)).collect()));
}

/// `working_set` (and `frontend_blocks`): a frontend of at least one block, the backend, or a
/// 512-aligned range.
pub(super) fn working_set(k: &WorkloadKeys) -> Result<WorkingSet, KeyError> {
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

pub(super) fn working_set_back(ws: &WorkingSet, k: &mut WorkloadKeys) {
    (k.working_set, k.frontend_blocks) = match *ws {
        WorkingSet::Frontend { blocks } => (Some(WorkingSetSpec::Frontend), Some(blocks)),
        WorkingSet::Backend => (Some(WorkingSetSpec::Backend), None),
        WorkingSet::Range { start, end } => (Some(WorkingSetSpec::Range { start, end }), None),
    };
}

/// `compress`, `dedupe`, `dedupe_unit` and `constant`: what written blocks contain.
pub(super) fn data_pattern(k: &WorkloadKeys) -> Result<DataPattern, KeyError> {
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
    // Both directions' sizes: writes of their own size are what the unit divides.
    let mut bs = block_sizes(k)?;
    bs.extend(write_block_sizes(k)?);
    // Default: the largest size every block size is a multiple of — the smallest one where it
    // divides the others (`4k` reads and `6k` writes: 2k).
    let gcd = |a: u64, b: u64| {
        let (mut a, mut b) = (a, b);
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    let common = bs.iter().map(|b| b.bytes).fold(0, gcd).max(512);
    let unit = k.dedupe_unit.unwrap_or(common);
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

pub(super) fn data_pattern_back(d: &DataPattern, k: &mut WorkloadKeys) {
    k.compress = Some(d.compress);
    k.dedupe = Some(d.dedupe);
    // 0: the smallest block size, as in results stored before the key existed.
    k.dedupe_unit = (d.dedupe_unit != 0).then_some(d.dedupe_unit);
    k.constant = Some(d.constant);
}
