//! Generates the I/Os of a workload: which target (group by weight, then a target in it),
//! which block size (weighted mix, per direction where writes have their own), read or write
//! (read share), and the offset — for random workloads uniform and aligned to the block size,
//! or drawn from the workload's distribution over positions of the smallest block size (the
//! same hot region on every host and stream, `iocurve-access`); a private streaming region per
//! worker for sequential ones.
//!
//! Pure apart from the random generator passed in: no clocks, no syscalls, no allocation after
//! construction.

use iocurve_access::Access;
use iocurve_plan::{Pattern, WorkingSet, Workload};

use crate::EngineError;
use crate::rng::Rng;

/// What an I/O does: read, write, or trim (discard on a block device, punch a hole in a file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dir {
    #[default]
    Read,
    Write,
    Trim,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoOp {
    pub target: u32,
    pub offset: u64,
    pub len: u32,
    pub dir: Dir,
}

impl IoOp {
    #[inline]
    pub fn is_write(&self) -> bool {
        self.dir == Dir::Write
    }

    #[inline]
    pub fn is_trim(&self) -> bool {
        self.dir == Dir::Trim
    }
}

/// Geometry of one target for this workload: its working set `[start, start + len)`.
#[derive(Debug, Clone, Copy)]
pub struct TargetGeom {
    pub start: u64,
    pub len: u64,
}

/// The working set of a workload on a target of `size` bytes.
pub fn working_set(ws: &WorkingSet, size: u64, max_bs: u64, name: &str, path: &str) -> Result<TargetGeom, EngineError> {
    let (start, end, _) = ws.extent(size, max_bs);
    if end > size {
        return Err(EngineError::Input(format!(
            "workload {name}: working set range ends at {end} bytes, beyond the end of {path} ({size} bytes)"
        )));
    }
    let len = (end - start) / 512 * 512;
    if len < max_bs {
        return Err(EngineError::Input(format!(
            "workload {name}: the working set on {path} ({len} bytes) is smaller than the block size {max_bs}"
        )));
    }
    Ok(TargetGeom { start, len })
}

#[derive(Debug, Clone, Copy)]
enum Direction {
    AllReads,
    AllWrites,
    AllTrims,
    /// Read when a random u64 is below this threshold, else write.
    Mixed(u64),
    /// Read below `read`, trim below `trim` (cumulative), else write.
    WithTrims {
        read: u64,
        trim: u64,
    },
}

#[derive(Debug, Clone)]
struct Cursor {
    region_start: u64,
    region_len: u64,
    pos: u64,
}

#[derive(Debug, Clone)]
pub struct OpGen {
    geoms: Vec<TargetGeom>,
    /// (cumulative weight, members) per group.
    groups: Vec<(u64, Vec<u32>)>,
    group_total: u64,
    /// (cumulative weight, bytes) per block size: of every I/O, or of reads when writes have
    /// their own.
    sizes: Vec<(u64, u64)>,
    size_total: u64,
    /// Writes' own sizes (`write_bs`): the direction is drawn first, then the size of it.
    write_sizes: Option<(Vec<(u64, u64)>, u64)>,
    /// Trims' own sizes (`trim_bs`), as writes'.
    trim_sizes: Option<(Vec<(u64, u64)>, u64)>,
    /// A skewed distribution: one sampler per target, over positions of `unit` bytes from the
    /// start of its working set (None: uniform, aligned to each I/O's own size).
    access: Option<Vec<Access>>,
    unit: u64,
    direction: Direction,
    pattern: Pattern,
    /// Sequential: one cursor per (worker, target), index `worker * targets + target`.
    cursors: Vec<Cursor>,
    placement: iocurve_plan::Placement,
    /// `placement = "paths"`: every target the workload uses, in order (worker k drives the
    /// k-th, round-robin).
    paths: Vec<u32>,
}

impl OpGen {
    /// `groups`: (weight, member target indices); `geoms`: per target. Refused (the target's
    /// index and the reason) only for a skewed distribution that does not fit its working set.
    pub fn new(
        w: &Workload,
        workers: u32,
        geoms: Vec<TargetGeom>,
        groups: &[(u32, Vec<usize>)],
    ) -> Result<OpGen, (usize, String)> {
        let mut acc = 0u64;
        let groups: Vec<(u64, Vec<u32>)> = groups
            .iter()
            .filter(|(w, m)| *w > 0 && !m.is_empty())
            .map(|(w, m)| {
                acc += *w as u64;
                (acc, m.iter().map(|i| *i as u32).collect())
            })
            .collect();
        let group_total = acc;
        let groups_for_paths = groups.clone();
        let (sizes, size_total) = cumulative(&w.bs);
        let write_sizes = (!w.write_bs.is_empty()).then(|| cumulative(&w.write_bs));
        let trim_sizes = (!w.trim_bs.is_empty()).then(|| cumulative(&w.trim_bs));
        // Positions of the smallest block size where the largest still fits: every I/O of the
        // law lies inside the working set.
        let unit = w.min_bs().max(512);
        let access = if w.pattern == Pattern::Random && !w.distribution.is_uniform() {
            let mut v = Vec::with_capacity(geoms.len());
            for (i, g) in geoms.iter().enumerate() {
                let positions = (g.len.saturating_sub(w.max_bs())) / unit + 1;
                let a = Access::new(&w.distribution.0, w.hot_layout.access(), positions, unit, w.seed);
                v.push(a.map_err(|why| (i, why))?);
            }
            Some(v)
        } else {
            None
        };
        let share = |pct: f64| (pct / 100.0 * u64::MAX as f64) as u64;
        let direction = if w.read_pct >= 100.0 {
            Direction::AllReads
        } else if w.trim_pct >= 100.0 {
            Direction::AllTrims
        } else if w.trims() {
            Direction::WithTrims { read: share(w.read_pct), trim: share(w.read_pct + w.trim_pct) }
        } else if w.read_pct <= 0.0 {
            Direction::AllWrites
        } else {
            Direction::Mixed(share(w.read_pct))
        };
        let mut cursors = Vec::new();
        if w.pattern == Pattern::Sequential {
            let align = w.min_bs();
            let max_bs = w.max_bs();
            for worker in 0..workers as u64 {
                for g in &geoms {
                    // Disjoint regions when the working set is large enough; otherwise every
                    // worker streams through the whole set from a staggered start.
                    let share = g.len / workers as u64 / align * align;
                    let c = if share >= max_bs {
                        let start = g.start + worker * share;
                        Cursor { region_start: start, region_len: share, pos: start }
                    } else {
                        let stagger = (g.len * worker / workers as u64) / align * align;
                        Cursor { region_start: g.start, region_len: g.len / align * align, pos: g.start + stagger }
                    };
                    cursors.push(c);
                }
            }
        }
        Ok(OpGen {
            geoms,
            groups,
            group_total,
            sizes,
            size_total,
            write_sizes,
            trim_sizes,
            access,
            unit,
            direction,
            pattern: w.pattern,
            cursors,
            placement: w.placement,
            paths: groups_for_paths.iter().flat_map(|g| g.1.iter().copied()).collect(),
        })
    }

    #[inline]
    fn pick<T: Copy>(table: &[(u64, T)], total: u64, rng: &mut Rng) -> T {
        if table.len() == 1 {
            return table[0].1;
        }
        let r = rng.below(total);
        table.iter().find(|(cum, _)| r < *cum).map(|(_, v)| *v).unwrap_or(table[table.len() - 1].1)
    }

    /// Whether every I/O is a trim: its bytes trimmed are what its MB/s count.
    pub fn trims_only(&self) -> bool {
        matches!(self.direction, Direction::AllTrims)
    }

    /// The direction of an I/O of this workload, drawn as `next` draws it: also for I/Os a
    /// rate step never issued, whose age still counts in the latency of their direction.
    #[inline]
    pub fn draw_dir(&self, rng: &mut Rng) -> Dir {
        match self.direction {
            Direction::AllReads => Dir::Read,
            Direction::AllWrites => Dir::Write,
            Direction::AllTrims => Dir::Trim,
            Direction::Mixed(t) => {
                if rng.next_u64() >= t {
                    Dir::Write
                } else {
                    Dir::Read
                }
            }
            Direction::WithTrims { read, trim } => {
                let r = rng.next_u64();
                if r < read {
                    Dir::Read
                } else if r < trim {
                    Dir::Trim
                } else {
                    Dir::Write
                }
            }
        }
    }

    /// The targets the I/Os go to (by their place in the host's list), in order: those of the
    /// groups the workload uses.
    pub fn used_targets(&self) -> Vec<u32> {
        let mut v = self.paths.clone();
        v.sort_unstable();
        v.dedup();
        v
    }

    #[inline]
    pub fn next(&mut self, worker: u32, rng: &mut Rng) -> IoOp {
        use iocurve_plan::Placement;
        let members = match self.placement {
            Placement::Paths => std::slice::from_ref(&self.paths[worker as usize % self.paths.len()]),
            Placement::Groups => &self.groups[worker as usize % self.groups.len()].1,
            Placement::Spread if self.groups.len() == 1 => &self.groups[0].1,
            Placement::Spread => {
                let r = rng.below(self.group_total);
                let i = self.groups.iter().position(|(cum, _)| r < *cum).unwrap_or(self.groups.len() - 1);
                &self.groups[i].1
            }
        };
        let target = if members.len() == 1 { members[0] } else { members[rng.below(members.len() as u64) as usize] };
        let (len, dir) = if self.write_sizes.is_none() && self.trim_sizes.is_none() {
            let len = Self::pick(&self.sizes, self.size_total, rng);
            (len, self.draw_dir(rng))
        } else {
            let dir = self.draw_dir(rng);
            let own = match dir {
                Dir::Write => self.write_sizes.as_ref(),
                Dir::Trim => self.trim_sizes.as_ref(),
                Dir::Read => None,
            };
            let len = match own {
                Some((t, total)) => Self::pick(t, *total, rng),
                None => Self::pick(&self.sizes, self.size_total, rng),
            };
            (len, dir)
        };
        let g = self.geoms[target as usize];
        let offset = match self.pattern {
            Pattern::Random => match &mut self.access {
                None => g.start + rng.below(g.len / len) * len,
                Some(a) => g.start + a[target as usize].next(&mut || rng.next_u64()) * self.unit,
            },
            Pattern::Sequential => {
                let c = &mut self.cursors[worker as usize * self.geoms.len() + target as usize];
                if c.pos + len > c.region_start + c.region_len {
                    c.pos = c.region_start;
                }
                let o = c.pos;
                c.pos += len;
                o
            }
        };
        IoOp { target, offset, len: len as u32, dir }
    }
}

/// (cumulative weight, bytes) per block size of weight above 0, and the total weight.
fn cumulative(bs: &[iocurve_plan::BlockSize]) -> (Vec<(u64, u64)>, u64) {
    let mut acc = 0u64;
    let v = bs
        .iter()
        .filter(|b| b.weight > 0)
        .map(|b| {
            acc += b.weight as u64;
            (acc, b.bytes)
        })
        .collect();
    (v, acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iocurve_plan::{Backend, BlockSize};

    fn workload(read_pct: f64, pattern: Pattern, bs: &[(u64, u32)]) -> Workload {
        Workload {
            name: "t".into(),
            read_pct,
            bs: bs.iter().map(|&(bytes, weight)| BlockSize { bytes, weight }).collect(),
            pattern,
            working_set: WorkingSet::Backend,
            queue_depth: 1,
            ramp: vec![1],
            warmup_s: 0.0,
            intervals: 1,
            interval_s: 1.0,
            direct: true,
            backend: Backend::Null,
            threads: 0,
            ..Workload::default()
        }
    }

    /// Issue 40: trims are a third direction with their own sizes, at their share; every trim
    /// is aligned to its own size, and the I/Os a rate step never issued draw the same shares.
    #[test]
    fn trims_come_at_their_share_with_their_own_sizes() {
        let mut w = workload(40.0, Pattern::Random, &[(4096, 1)]);
        w.trim_pct = 30.0;
        w.trim_bs = vec![BlockSize { bytes: 65536, weight: 1 }, BlockSize { bytes: 1 << 20, weight: 1 }];
        let geom = working_set(&WorkingSet::Backend, 1 << 30, w.max_bs(), "t", "f").unwrap();
        let mut g = OpGen::new(&w, 1, vec![geom], &[(1, vec![0])]).unwrap();
        let mut rng = Rng::new(11);
        let (mut n, mut big) = ([0u32; 3], 0);
        for _ in 0..100_000 {
            let op = g.next(0, &mut rng);
            n[op.dir as usize] += 1;
            match op.dir {
                Dir::Trim => {
                    assert!(op.len == 65536 || op.len == 1 << 20, "{op:?}");
                    assert_eq!(op.offset % op.len as u64, 0, "{op:?}");
                    big += u32::from(op.len == 1 << 20);
                }
                _ => assert_eq!(op.len, 4096, "{op:?}"),
            }
        }
        let share = |k: usize| n[k] as f64 / 1000.0;
        assert!(
            (share(0) - 40.0).abs() < 1.0 && (share(1) - 30.0).abs() < 1.0 && (share(2) - 30.0).abs() < 1.0,
            "{n:?}"
        );
        assert!((big as f64 / n[2] as f64 - 0.5).abs() < 0.02);
        let drawn = (0..100_000).filter(|_| g.draw_dir(&mut rng) == Dir::Trim).count();
        assert!((drawn as f64 / 1000.0 - 30.0).abs() < 1.0, "{drawn}");
        // Trims alone.
        w.read_pct = 0.0;
        w.trim_pct = 100.0;
        let mut g = OpGen::new(&w, 1, vec![geom], &[(1, vec![0])]).unwrap();
        assert!((0..1000).all(|_| g.next(0, &mut rng).is_trim()));
    }

    #[test]
    fn random_offsets_are_aligned_and_inside_the_frontend() {
        let w = workload(100.0, Pattern::Random, &[(4096, 1)]);
        let geom = working_set(&WorkingSet::Frontend { blocks: 1000 }, 1 << 30, 4096, "t", "f").unwrap();
        assert_eq!(geom.len, 1000 * 4096);
        let mut g = OpGen::new(&w, 1, vec![geom], &[(1, vec![0])]).unwrap();
        let mut rng = Rng::new(7);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..50_000 {
            let op = g.next(0, &mut rng);
            assert_eq!(op.offset % 4096, 0);
            assert!(op.offset + op.len as u64 <= 1000 * 4096);
            seen.insert(op.offset);
        }
        assert!(seen.len() > 990, "uniform over all 1000 blocks: saw {}", seen.len());
    }

    /// Issue 16: 1000 blocks of 1 MiB were 98 % of the default 1 GiB scratch file.
    #[test]
    fn regression_a_frontend_is_at_most_an_eighth_of_the_target() {
        let front = WorkingSet::Frontend { blocks: 1000 };
        let geom = working_set(&front, 1 << 30, 1 << 20, "t", "f").unwrap();
        assert_eq!((geom.start, geom.len), (0, 128 << 20), "1/8 of 1 GiB, in whole 1 MiB blocks");
        assert_eq!(front.extent(1 << 30, 1 << 20), (0, 128 << 20, true));
        // Where 1000 blocks are under 1/8, nothing changes.
        assert_eq!(front.extent(1 << 30, 4096), (0, 1000 * 4096, false));
        // A target under 8 blocks keeps one block: a frontend is never empty.
        assert_eq!(front.extent(3 << 20, 1 << 20), (0, 1 << 20, true));
        assert_eq!(working_set(&front, 3 << 20, 1 << 20, "t", "f").unwrap().len, 1 << 20);
        // An eighth that is not a whole number of blocks is cut to whole blocks.
        assert_eq!(front.extent(100 << 20, 1 << 20), (0, 12 << 20, true));
    }

    #[test]
    fn read_share_and_size_mix_follow_weights() {
        let w = workload(70.0, Pattern::Random, &[(4096, 3), (65536, 1)]);
        let geom = working_set(&WorkingSet::Backend, 1 << 30, 65536, "t", "f").unwrap();
        let mut g = OpGen::new(&w, 1, vec![geom], &[(1, vec![0])]).unwrap();
        let mut rng = Rng::new(9);
        let (mut reads, mut small) = (0, 0);
        let n = 100_000;
        for _ in 0..n {
            let op = g.next(0, &mut rng);
            reads += usize::from(op.dir == Dir::Read);
            small += usize::from(op.len == 4096);
            assert_eq!(op.offset % op.len as u64, 0);
        }
        assert!((69_000..71_000).contains(&reads), "{reads}");
        assert!((74_000..76_000).contains(&small), "{small}");
    }

    #[test]
    fn groups_are_picked_by_weight_then_uniformly() {
        let w = workload(100.0, Pattern::Random, &[(4096, 1)]);
        let geom = TargetGeom { start: 0, len: 1 << 20 };
        // Placed: worker k on the k-th path, or on the k-th group (a target in it per I/O).
        let mut rng = Rng::new(5);
        for (placement, want) in [
            (iocurve_plan::Placement::Paths, vec![vec![0], vec![1], vec![2], vec![0]]),
            (iocurve_plan::Placement::Groups, vec![vec![0], vec![1, 2], vec![0], vec![1, 2]]),
        ] {
            let mut placed =
                OpGen::new(&Workload { placement, ..w.clone() }, 4, vec![geom; 3], &[(1, vec![0]), (3, vec![1, 2])])
                    .unwrap();
            for (worker, targets) in want.iter().enumerate() {
                let mut seen: Vec<u32> = (0..200).map(|_| placed.next(worker as u32, &mut rng).target).collect();
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(&seen, targets, "{placement:?} worker {worker}");
            }
        }
        // Group A (weight 1): target 0; group B (weight 3): targets 1 and 2.
        let mut g = OpGen::new(&w, 1, vec![geom; 3], &[(1, vec![0]), (3, vec![1, 2])]).unwrap();
        let mut rng = Rng::new(3);
        let mut per = [0u32; 3];
        for _ in 0..80_000 {
            per[g.next(0, &mut rng).target as usize] += 1;
        }
        assert!((19_000..21_000).contains(&per[0]), "{per:?}");
        assert!((29_000..31_000).contains(&per[1]) && (29_000..31_000).contains(&per[2]), "{per:?}");
    }

    #[test]
    fn sequential_workers_stream_through_their_own_regions() {
        let w = workload(0.0, Pattern::Sequential, &[(1 << 20, 1)]);
        let geom = TargetGeom { start: 0, len: 64 << 20 };
        let mut g = OpGen::new(&w, 4, vec![geom], &[(1, vec![0])]).unwrap();
        let mut rng = Rng::new(1);
        for worker in 0..4u32 {
            let region = worker as u64 * (16 << 20);
            for i in 0..40u64 {
                let op = g.next(worker, &mut rng);
                // 16 blocks per region, then wrap to the region start.
                assert_eq!(op.offset, region + (i % 16) * (1 << 20), "worker {worker} op {i}");
                assert!(op.is_write());
            }
        }
    }

    #[test]
    fn more_workers_than_blocks_still_stay_inside() {
        let w = workload(100.0, Pattern::Sequential, &[(1 << 20, 1)]);
        let geom = TargetGeom { start: 0, len: 4 << 20 };
        let mut g = OpGen::new(&w, 32, vec![geom], &[(1, vec![0])]).unwrap();
        let mut rng = Rng::new(1);
        for worker in 0..32 {
            for _ in 0..10 {
                let op = g.next(worker, &mut rng);
                assert!(op.offset + op.len as u64 <= 4 << 20);
                assert_eq!(op.offset % (1 << 20), 0);
            }
        }
    }

    #[test]
    fn working_set_errors_are_clear() {
        let e = working_set(&WorkingSet::Range { start: 0, end: 2 << 20 }, 1 << 20, 4096, "w", "/dev/x").unwrap_err();
        assert!(e.to_string().contains("beyond the end"), "{e}");
        let e = working_set(&WorkingSet::Backend, 8192, 1 << 20, "w", "/dev/x").unwrap_err();
        assert!(e.to_string().contains("smaller than the block size"), "{e}");
    }
}
