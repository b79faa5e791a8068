//! Verification: proof that no acknowledged write was lost.
//!
//! Every block written by a verifying workload starts with a 32-byte header — magic, target id,
//! block number, write generation, the map's id, and a checksum of the whole block — and the
//! engine keeps the
//! generation of the last acknowledged write of every block in a [`GenMap`] (two bytes per
//! block). Reads compare what they find with the map: an older generation (or no header of
//! ours) is a lost write, a checksum that does not match is a corrupted (e.g. torn) block, a
//! header of another block or target is a misplaced write. A block is never read or written
//! by two I/Os at once: the map's busy bit claims it.
//!
//! The map is saved to a file (at every interval end while running), so verification goes on
//! after iocurve or the host restarts — a controller failover, a reboot.

use std::io::{Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};

use iocurve_stats::VerifyCounts;

use crate::EngineError;

pub const MAGIC: u32 = 0x5643_4f49; // "IOCV"
pub const HEADER_LEN: usize = 32;
/// Generations count 1..=GEN_MAX and wrap; 0 means "never written (or unknown)".
pub const GEN_MAX: u16 = 0x7fff;
const BUSY: u16 = 0x8000;
const FILE_MAGIC: &[u8; 8] = b"IOCVMAP1";

/// A fast 64-bit checksum of the block, the header's checksum field (bytes 24..32) left out.
pub fn checksum(block: &[u8]) -> u64 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15 ^ block.len() as u64;
    let mut mix = |w: u64| {
        h = (h ^ w).wrapping_mul(0x1000_0000_01b3).rotate_left(29) ^ (h >> 17);
    };
    let (head, rest) = block.split_at(HEADER_LEN.min(block.len()));
    for (i, c) in head.chunks(8).enumerate() {
        if i != 3 {
            mix(word(c));
        }
    }
    let mut words = rest.chunks_exact(8);
    for c in &mut words {
        mix(u64::from_le_bytes(c.try_into().expect("8 bytes")));
    }
    mix(word(words.remainder()));
    h ^ (h >> 31)
}

fn word(c: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    b[..c.len()].copy_from_slice(c);
    u64::from_le_bytes(b)
}

/// Writes the header into the first 32 bytes of `block` (after its data is in place). `map_id`
/// tells this map's writes from those of earlier maps on the same target.
pub fn write_header(block: &mut [u8], map_id: u32, target: u32, block_no: u64, gen_: u16) {
    block[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    block[4..8].copy_from_slice(&target.to_le_bytes());
    block[8..16].copy_from_slice(&block_no.to_le_bytes());
    block[16..20].copy_from_slice(&u32::from(gen_).to_le_bytes());
    block[20..24].copy_from_slice(&map_id.to_le_bytes());
    let sum = checksum(block);
    block[24..32].copy_from_slice(&sum.to_le_bytes());
}

/// What a read of a block found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The last acknowledged write (or a later one, acknowledged after the map was saved).
    Ok,
    /// An older write than the last acknowledged one, or no write of ours at all.
    Lost { expected: u16, found: Option<u16> },
    /// Our header, but the checksum does not match: torn or corrupted.
    Corrupt,
    /// A write meant for another block (or target).
    Misplaced { target: u32, block: u64 },
}

/// Checks a block read at (`target`, `block_no`) against the generation the map expects.
pub fn check(block: &[u8], map_id: u32, target: u32, block_no: u64, expected: u16) -> Found {
    let r32 = |i: usize| u32::from_le_bytes(block[i..i + 4].try_into().expect("4 bytes"));
    // No header of ours, or one of another map (an earlier verification of this target): the
    // acknowledged write is not there.
    if block.len() < HEADER_LEN || r32(0) != MAGIC || r32(20) != map_id {
        return Found::Lost { expected, found: None };
    }
    let sum = u64::from_le_bytes(block[24..32].try_into().expect("8 bytes"));
    if sum != checksum(block) {
        return Found::Corrupt;
    }
    let (t, b) = (r32(4), u64::from_le_bytes(block[8..16].try_into().expect("8 bytes")));
    if t != target || b != block_no {
        return Found::Misplaced { target: t, block: b };
    }
    let found = r32(16) as u16;
    // Generations wrap: `found` is older when it lies in the half-range behind `expected`.
    let behind = expected.wrapping_sub(found) & GEN_MAX;
    if behind != 0 && behind < GEN_MAX / 2 { Found::Lost { expected, found: Some(found) } } else { Found::Ok }
}

/// Counts a checked block in `v`, describing a problem with the targets' names from `name`
/// (one description for the in-run checks and the final pass).
pub fn record(v: &mut VerifyCounts, found: Found, target: u32, block: u64, name: impl Fn(u32) -> String) {
    v.checked += 1;
    match found {
        Found::Ok => {}
        Found::Lost { expected, found } => {
            v.lost += 1;
            v.example(|| match found {
                Some(f) => format!(
                    "{} block {block}: lost write (generation {f} found, {expected} acknowledged)",
                    name(target)
                ),
                None => format!(
                    "{} block {block}: lost write (no write of ours found, generation {expected} acknowledged)",
                    name(target)
                ),
            });
        }
        Found::Corrupt => {
            v.corrupt += 1;
            v.example(|| format!("{} block {block}: corrupted (checksum mismatch: torn or damaged)", name(target)));
        }
        Found::Misplaced { target: t, block: b } => {
            v.misplaced += 1;
            v.example(|| format!("{} block {block}: holds the write meant for {} block {b}", name(target), name(t)));
        }
    }
}

/// The generation after `g` (1..=GEN_MAX, wrapping, never 0).
pub fn next_gen(g: u16) -> u16 {
    if g >= GEN_MAX { 1 } else { g + 1 }
}

/// Generations of the last acknowledged write of every block of every target, with a busy bit
/// per block. Two bytes per block: 512 MiB per TiB of 4 KiB blocks, 32 MiB per TiB of 64 KiB.
pub struct GenMap {
    /// Random at creation; every header this map's writes carry has it.
    pub id: u32,
    pub bs: u64,
    pub targets: Vec<TargetMap>,
}

pub struct TargetMap {
    pub path: String,
    pub size: u64,
    gens: Vec<AtomicU16>,
}

impl TargetMap {
    pub fn blocks(&self) -> u64 {
        self.gens.len() as u64
    }
}

impl GenMap {
    /// An empty map (nothing written yet) for targets (path, size) and block size `bs`.
    pub fn new(bs: u64, targets: &[(String, u64)]) -> GenMap {
        let targets = targets
            .iter()
            .map(|(path, size)| TargetMap {
                path: path.clone(),
                size: *size,
                gens: (0..size / bs).map(|_| AtomicU16::new(0)).collect(),
            })
            .collect();
        let id = crate::rng::Rng::seed_from(bs).next_u64() as u32;
        GenMap { id, bs, targets }
    }

    /// Claims a block for one I/O; returns its generation, or None when another I/O has it.
    #[inline]
    pub fn claim(&self, target: u32, block: u64) -> Option<u16> {
        let g = &self.targets[target as usize].gens[block as usize];
        let cur = g.load(Ordering::Relaxed);
        if cur & BUSY != 0 {
            return None;
        }
        g.compare_exchange(cur, cur | BUSY, Ordering::Acquire, Ordering::Relaxed).ok()
    }

    /// Releases a claimed block, recording `gen_` (0: its state is unknown, e.g. a failed write).
    #[inline]
    pub fn release(&self, target: u32, block: u64, gen_: u16) {
        self.targets[target as usize].gens[block as usize].store(gen_, Ordering::Release);
    }

    /// The recorded generation of a block (busy bit cleared).
    pub fn get(&self, target: u32, block: u64) -> u16 {
        self.targets[target as usize].gens[block as usize].load(Ordering::Relaxed) & GEN_MAX
    }

    /// Saves the map to `path` (via a temporary file: a reader never sees half a map). Blocks
    /// being written are saved with their previous generation.
    pub fn save(&self, path: &Path) -> Result<(), EngineError> {
        let fail = |e| EngineError::io(format!("cannot save the verification map {}", path.display()), e);
        let tmp = path.with_extension("tmp");
        let mut out = Vec::new();
        out.extend_from_slice(FILE_MAGIC);
        out.extend_from_slice(&u64::from(self.id).to_le_bytes());
        out.extend_from_slice(&self.bs.to_le_bytes());
        out.extend_from_slice(&(self.targets.len() as u64).to_le_bytes());
        for t in &self.targets {
            out.extend_from_slice(&(t.path.len() as u64).to_le_bytes());
            out.extend_from_slice(t.path.as_bytes());
            out.extend_from_slice(&t.size.to_le_bytes());
            for g in &t.gens {
                out.extend_from_slice(&(g.load(Ordering::Relaxed) & GEN_MAX).to_le_bytes());
            }
        }
        let mut f = std::fs::File::create(&tmp).map_err(fail)?;
        f.write_all(&out).and_then(|()| f.sync_all()).map_err(fail)?;
        std::fs::rename(&tmp, path).map_err(fail)
    }

    pub fn load(path: &Path) -> Result<GenMap, EngineError> {
        let bad = |what: &str| {
            EngineError::Input(format!(
                "verification map {} is {what}: give the map this run wrote (or another --verify-map to start over)",
                path.display()
            ))
        };
        let mut data = Vec::new();
        std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut data)).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                // A missing map is the user's input, not a finding (exit 4 means lost writes).
                EngineError::Input(format!(
                    "verification map {} does not exist: give the map a verifying run wrote (--map)",
                    path.display()
                ))
            } else {
                EngineError::io(format!("cannot read the verification map {}", path.display()), e)
            }
        })?;
        let mut at = 0usize;
        let mut take = |n: usize| -> Result<&[u8], EngineError> {
            let s = data.get(at..at + n).ok_or_else(|| bad("cut short"))?;
            at += n;
            Ok(s)
        };
        if take(8)? != FILE_MAGIC {
            return Err(bad("not a verification map"));
        }
        let u = |s: &[u8]| u64::from_le_bytes(s.try_into().expect("8 bytes"));
        let id = u(take(8)?) as u32;
        let bs = u(take(8)?);
        let n = u(take(8)?);
        if bs == 0 || n > 1 << 20 {
            return Err(bad("damaged"));
        }
        let mut targets = Vec::new();
        for _ in 0..n {
            let len = u(take(8)?) as usize;
            let path = String::from_utf8(take(len.min(1 << 16))?.to_vec()).map_err(|_| bad("damaged"))?;
            let size = u(take(8)?);
            let blocks = (size / bs) as usize;
            let raw = take(blocks.checked_mul(2).ok_or_else(|| bad("damaged"))?)?;
            let gens = raw.chunks(2).map(|c| AtomicU16::new(u16::from_le_bytes([c[0], c[1]]) & GEN_MAX)).collect();
            targets.push(TargetMap { path, size, gens });
        }
        Ok(GenMap { id, bs, targets })
    }

    /// Whether this map was made for these targets (path, size) and block size.
    pub fn matches(&self, bs: u64, targets: &[(String, u64)]) -> bool {
        self.bs == bs
            && self.targets.len() == targets.len()
            && self.targets.iter().zip(targets).all(|(t, (p, s))| &t.path == p && t.size == *s)
    }
}

/// Reads every block the map has a generation for and checks it: the final pass of a run and
/// `iocurve verify`. Reads go in runs of up to 1 MiB; `progress` gets (bytes read, bytes to
/// read) now and then.
pub fn verify_pass(
    targets: &crate::TargetSet,
    map: &GenMap,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyCounts, EngineError> {
    use std::os::fd::AsRawFd;
    let mut v = VerifyCounts::default();
    let bs = map.bs as usize;
    let per_read = (1usize << 20).div_ceil(bs).max(1);
    let mut pool = crate::buffer::BufferPool::new(1, per_read * bs);
    let total: u64 = map
        .targets
        .iter()
        .map(|t| t.gens.iter().filter(|g| g.load(Ordering::Relaxed) & GEN_MAX != 0).count() as u64 * map.bs)
        .sum();
    let mut done = 0u64;
    for (ti, (t, tm)) in targets.targets.iter().zip(&map.targets).enumerate() {
        let fd = t.file.as_raw_fd();
        let t_path = t.path.display().to_string();
        let blocks = tm.blocks();
        let mut b = 0u64;
        while b < blocks {
            // Skip blocks never written; read the next run of written ones.
            if map.get(ti as u32, b) == 0 {
                b += 1;
                continue;
            }
            let n = (per_read as u64).min(blocks - b);
            let len = n as usize * bs;
            let buf = &mut pool.slice_mut(0)[..len];
            let mut got = 0usize;
            while got < len {
                // SAFETY: the buffer is valid for `len` bytes; fd is open.
                let r = unsafe {
                    libc::pread(fd, buf[got..].as_mut_ptr().cast(), len - got, (b * map.bs + got as u64) as libc::off_t)
                };
                if r < 0 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() == std::io::ErrorKind::Interrupted {
                        continue;
                    }
                    return Err(EngineError::io(format!("verify: cannot read {} at block {b}", t.path.display()), e));
                }
                if r == 0 {
                    break;
                }
                got += r as usize;
            }
            for k in 0..(got / bs) as u64 {
                let no = b + k;
                let expected = map.get(ti as u32, no);
                if expected == 0 {
                    continue;
                }
                let block = &buf[k as usize * bs..(k as usize + 1) * bs];
                done += map.bs;
                let name = |t: u32| {
                    if t as usize == ti {
                        t_path.clone()
                    } else {
                        map.targets.get(t as usize).map_or_else(|| format!("target {t}"), |m| m.path.clone())
                    }
                };
                record(&mut v, check(block, map.id, ti as u32, no, expected), ti as u32, no, name);
            }
            progress(done, total);
            b += n;
        }
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: u32 = 77;

    fn block(target: u32, no: u64, g: u16) -> Vec<u8> {
        let mut b = vec![0x5au8; 4096];
        b[100] = no as u8;
        write_header(&mut b, ID, target, no, g);
        b
    }

    fn check(block: &[u8], target: u32, no: u64, expected: u16) -> Found {
        super::check(block, ID, target, no, expected)
    }

    #[test]
    fn a_block_checks_against_its_generation() {
        let b = block(1, 7, 3);
        assert_eq!(check(&b, 1, 7, 3), Found::Ok);
        assert_eq!(check(&b, 1, 7, 2), Found::Ok, "newer than the saved map: acknowledged after the save");
        assert_eq!(check(&b, 1, 7, 4), Found::Lost { expected: 4, found: Some(3) });
        assert_eq!(check(&b, 1, 8, 3), Found::Misplaced { target: 1, block: 7 });
        assert_eq!(check(&b, 0, 7, 3), Found::Misplaced { target: 1, block: 7 });
        assert_eq!(check(&vec![0u8; 4096], 1, 7, 3), Found::Lost { expected: 3, found: None });
        assert_eq!(super::check(&b, ID + 1, 1, 7, 3), Found::Lost { expected: 3, found: None }, "another map's write");
        let mut torn = b.clone();
        torn[2048..].fill(0);
        assert_eq!(check(&torn, 1, 7, 3), Found::Corrupt);
        let mut flipped = b.clone();
        flipped[4000] ^= 1;
        assert_eq!(check(&flipped, 1, 7, 3), Found::Corrupt, "a single flipped bit");
    }

    #[test]
    fn generations_wrap_without_false_alarms() {
        assert_eq!(next_gen(GEN_MAX), 1);
        let b = block(0, 0, GEN_MAX);
        assert_eq!(check(&b, 0, 0, 1), Found::Lost { expected: 1, found: Some(GEN_MAX) });
        let b = block(0, 0, 1);
        assert_eq!(check(&b, 0, 0, GEN_MAX), Found::Ok);
    }

    #[test]
    fn claims_exclude_each_other_and_the_map_saves_and_loads() {
        let m = GenMap::new(4096, &[("a".into(), 1 << 20), ("b".into(), 1 << 16)]);
        assert_eq!(m.claim(0, 5), Some(0));
        assert_eq!(m.claim(0, 5), None, "one I/O per block");
        m.release(0, 5, 9);
        assert_eq!(m.claim(0, 5), Some(9));
        m.release(0, 5, 9);
        m.release(1, 15, 2);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.map");
        assert!(m.claim(1, 3).is_some(), "a busy block is saved without its busy bit");
        m.save(&p).unwrap();
        let l = GenMap::load(&p).unwrap();
        assert!(l.matches(4096, &[("a".into(), 1 << 20), ("b".into(), 1 << 16)]));
        assert!(!l.matches(8192, &[("a".into(), 1 << 20), ("b".into(), 1 << 16)]));
        assert_eq!((l.get(0, 5), l.get(1, 15), l.get(1, 3)), (9, 2, 0));
        assert_eq!(l.id, m.id, "the map keeps its id");
        assert_eq!(l.claim(1, 3), Some(0));
        std::fs::write(&p, b"IOCVMAP1\x00").unwrap();
        let e = GenMap::load(&p).err().expect("a short map is refused");
        assert!(e.to_string().contains("cut short"), "{e}");
    }
}
