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
//! after iocurve or the host restarts — a controller failover, a reboot. The file ends with a
//! checksum of everything before it: a damaged map is refused, never read as lost writes. One
//! run or `iocurve verify` at a time uses a map: [`MapLock`] holds it.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU16, Ordering};

use iocurve_stats::VerifyCounts;

use iocurve_target::TargetError;

pub const MAGIC: u32 = 0x5643_4f49; // "IOCV"
pub const HEADER_LEN: usize = 32;
/// Generations count 1..=GEN_MAX and wrap; 0 means "never written (or unknown)".
pub const GEN_MAX: u16 = 0x7fff;
const BUSY: u16 = 0x8000;
/// Maps whose unknown blocks may keep the newest generation they may hold (`UNKNOWN` set on
/// it: a trimmed block, a failed write; issue 40), with identities and a trailing checksum.
const FILE_MAGIC: &[u8; 8] = b"IOCVMAP4";
/// In a saved map (v4): the block's content is unknown, and this is the newest generation it may
/// hold — its next write goes on from there.
const UNKNOWN: u16 = 0x8000;
/// Maps with each target's identity and a trailing checksum.
const FILE_MAGIC_V3: &[u8; 8] = b"IOCVMAP3";
/// Maps with a trailing checksum, without identities: loaded, matched by path.
const FILE_MAGIC_V2: &[u8; 8] = b"IOCVMAP2";
/// Maps written before the checksum: still loaded (the same layout, nothing to check).
const FILE_MAGIC_V1: &[u8; 8] = b"IOCVMAP1";

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

/// The map file's checksum. Every step is a bijection of the state for a given word and of the
/// word for a given state, so any one changed 8-byte word (a flipped byte or bit) always
/// changes the sum; more changes are missed with a chance of 2^-64.
fn file_sum(data: &[u8]) -> u64 {
    let mut h: u64 = 0x243f_6a88_85a3_08d3 ^ data.len() as u64;
    let mut step = |w: u64| h = (h ^ w).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(31);
    let mut words = data.chunks_exact(8);
    for c in &mut words {
        step(u64::from_le_bytes(c.try_into().expect("8 bytes")));
    }
    step(word(words.remainder()));
    h ^ (h >> 29)
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

/// The (target, block, generation) of a header this map's writes carry, or None when `block`
/// starts with no header of ours (the journal reads what a write is about to change).
pub fn header_of(block: &[u8]) -> Option<(u32, u64, u16)> {
    let r32 = |i: usize| u32::from_le_bytes(block[i..i + 4].try_into().expect("4 bytes"));
    if block.len() < HEADER_LEN || r32(0) != MAGIC {
        return None;
    }
    Some((r32(4), u64::from_le_bytes(block[8..16].try_into().expect("8 bytes")), r32(16) as u16 & GEN_MAX))
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
    /// A final pass could not read the block (`errno`): neither proven nor lost; the map still
    /// expects its write for a later pass.
    Unreadable { errno: i32 },
    /// The journal names the block as being written when the run stopped, and it holds the
    /// saved generation, a later one, or a torn mix: explained, not lost.
    InFlight,
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
    if let Found::Unreadable { errno } = found {
        // Not checked: nothing was read.
        v.unreadable += 1;
        v.example(|| format!("{} block {block}: unreadable ({})", name(target), errno_name(errno)));
        return;
    }
    v.checked += 1;
    match found {
        Found::Unreadable { .. } => {}
        Found::Ok => {}
        Found::InFlight => v.in_flight += 1,
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
    /// Loaded from a map written before maps had a checksum (it gets one at its next save).
    pub unchecked: bool,
    /// The writes the map's journal names as in flight when its run stopped ([`GenMap::explain_with`]).
    in_flight: std::sync::RwLock<Option<crate::intents::Intents>>,
}

pub struct TargetMap {
    pub path: String,
    pub size: u64,
    /// What the target is, whatever it is called ([`iocurve_target::target::Target::identity_key`]):
    /// `iocurve verify` finds it by this under another path (issue 36, finding 7). None in maps
    /// written before identities were kept (they are matched by path and get one when saved).
    pub identity: Option<String>,
    gens: Vec<AtomicU16>,
    /// Per block, the newest generation that may be on the device of a block whose state
    /// became unknown (trimmed, or a failed write): its next write goes on from there, so that
    /// stale data left by a trim the device ignored can never pass for a newer write (issue
    /// 40). Made at the first such block; saved with the map (v4).
    kept: std::sync::OnceLock<Box<[AtomicU16]>>,
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
                identity: None,
                gens: (0..size / bs).map(|_| AtomicU16::new(0)).collect(),
                kept: Default::default(),
            })
            .collect();
        let id = iocurve_data::rng::Rng::seed_from(bs).next_u64() as u32;
        GenMap { id, bs, targets, unchecked: false, in_flight: Default::default() }
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

    /// Releases a claimed block whose content is no longer known (trimmed, or written with
    /// `newest` and failed): nothing is checked on it until its next write, which continues
    /// from `newest` ([`GenMap::next_for`]).
    pub fn release_unknown(&self, target: u32, block: u64, newest: u16) {
        let t = &self.targets[target as usize];
        if newest != 0 {
            let kept = t.kept.get_or_init(|| (0..t.gens.len()).map(|_| AtomicU16::new(0)).collect());
            kept[block as usize].store(newest & GEN_MAX, Ordering::Relaxed);
        }
        t.gens[block as usize].store(0, Ordering::Release);
    }

    /// The generation of the next write of a block claimed with generation `had`: one past it,
    /// or, for a block whose state became unknown in this run, one past the newest that may be
    /// on the device.
    #[inline]
    pub fn next_for(&self, target: u32, block: u64, had: u16) -> u16 {
        if had != 0 {
            return next_gen(had);
        }
        let kept = self.targets[target as usize].kept.get().map_or(0, |k| k[block as usize].load(Ordering::Relaxed));
        next_gen(kept)
    }

    /// Every block still claimed becomes unknown: called when I/O threads were given up with
    /// I/Os stuck in the kernel, whose writes may land or not.
    pub fn forget_claimed(&self) {
        for (ti, t) in self.targets.iter().enumerate() {
            for (b, g) in t.gens.iter().enumerate() {
                let cur = g.load(Ordering::Relaxed);
                if cur & BUSY != 0 {
                    // A stuck write holds at most the next generation.
                    self.release_unknown(ti as u32, b as u64, next_gen(cur & GEN_MAX));
                }
            }
        }
    }

    /// The recorded generation of a block (busy bit cleared).
    pub fn get(&self, target: u32, block: u64) -> u16 {
        self.targets[target as usize].gens[block as usize].load(Ordering::Relaxed) & GEN_MAX
    }

    /// Saves the map to `path` (via a temporary file: a reader never sees half a map). Blocks
    /// being written are saved with their previous generation. (A run saves through
    /// [`crate::keeper::MapKeeper`]: the targets flushed between the snapshot and the write.)
    pub fn save(&self, path: &Path) -> Result<(), TargetError> {
        self.snapshot().write(path)
    }

    /// The map as its file holds it, now: every acknowledged generation (blocks being written
    /// with their previous one).
    pub fn snapshot(&self) -> Snapshot {
        let mut out = Vec::new();
        out.extend_from_slice(FILE_MAGIC);
        out.extend_from_slice(&u64::from(self.id).to_le_bytes());
        out.extend_from_slice(&self.bs.to_le_bytes());
        out.extend_from_slice(&(self.targets.len() as u64).to_le_bytes());
        let mut gens_at = Vec::with_capacity(self.targets.len());
        for t in &self.targets {
            out.extend_from_slice(&(t.path.len() as u64).to_le_bytes());
            out.extend_from_slice(t.path.as_bytes());
            out.extend_from_slice(&t.size.to_le_bytes());
            // 0: none (an identity is never empty).
            let id = t.identity.as_deref().unwrap_or("");
            out.extend_from_slice(&(id.len() as u64).to_le_bytes());
            out.extend_from_slice(id.as_bytes());
            gens_at.push((out.len(), t.gens.len() as u64));
            let kept = t.kept.get();
            for (b, g) in t.gens.iter().enumerate() {
                let g = g.load(Ordering::Relaxed) & GEN_MAX;
                // An unknown block keeps the newest generation it may hold.
                let k = if g == 0 { kept.map_or(0, |k| k[b].load(Ordering::Relaxed)) } else { 0 };
                let saved = if k != 0 { k | UNKNOWN } else { g };
                out.extend_from_slice(&saved.to_le_bytes());
            }
        }
        let sum = file_sum(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        Snapshot { bytes: out, gens_at }
    }

    /// A pass after a crash: the blocks `intents` names as being written are checked as in
    /// flight ([`Found::InFlight`]) instead of against their saved generation alone.
    pub fn explain_with(&self, intents: crate::intents::Intents) {
        *self.in_flight.write().unwrap_or_else(|e| e.into_inner()) = Some(intents);
    }

    /// Once a run continues the map (the journal's blocks forgotten): nothing to explain.
    pub fn clear_explanation(&self) {
        *self.in_flight.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The generation the journal says block `block` was being written with after the map's
    /// save (None: not in flight).
    fn in_flight_gen(&self, intents: Option<&crate::intents::Intents>, target: u32, block: u64) -> Option<u16> {
        let x = intents?.get(target, block)?;
        crate::intents::uncovered(x, self.get(target, block)).then_some(x)
    }

    /// Whether a pass reads the block: written (known), or in flight at a crash.
    fn wanted(&self, intents: Option<&crate::intents::Intents>, target: u32, block: u64) -> bool {
        self.get(target, block) != 0 || self.in_flight_gen(intents, target, block).is_some()
    }

    /// The blocks `intents` names as being written after this map's save: those whose
    /// journaled generation the map does not cover.
    pub fn in_flight(&self, intents: &crate::intents::Intents) -> u64 {
        intents
            .iter()
            .filter(|&(t, b, g)| {
                self.targets.get(t as usize).is_some_and(|tm| b < tm.blocks())
                    && crate::intents::uncovered(g, self.get(t, b))
            })
            .count() as u64
    }

    /// Whether a block is claimed by an I/O now (false for a block beyond the map).
    pub fn busy_checked(&self, target: u32, block: u64) -> bool {
        self.targets
            .get(target as usize)
            .and_then(|t| t.gens.get(block as usize))
            .is_some_and(|g| g.load(Ordering::Relaxed) & BUSY != 0)
    }

    /// Forgets every block of the target at `path` (a pass overwrote them with data of no map's):
    /// how many the map knew.
    pub fn forget_target(&self, path: &str) -> u64 {
        let mut n = 0;
        for tm in self.targets.iter().filter(|t| t.path == path) {
            for cell in &tm.gens {
                if cell.swap(0, Ordering::Relaxed) & GEN_MAX != 0 {
                    n += 1;
                }
            }
        }
        n
    }

    /// Forgets the blocks a journal names as being written when the map was last saved
    /// ([`crate::intents::Intents`]): whether their writes landed is unknown. Returns how many.
    pub fn forget_in_flight(&self, intents: &crate::intents::Intents) -> u64 {
        let mut n = 0;
        for (t, b, g) in intents.iter() {
            let Some(tm) = self.targets.get(t as usize) else { continue };
            let Some(cell) = tm.gens.get(b as usize) else { continue };
            let m = cell.load(Ordering::Relaxed) & GEN_MAX;
            // Unknown already (0): nothing to forget.
            if m != 0 && crate::intents::uncovered(g, m) {
                cell.store(0, Ordering::Relaxed);
                n += 1;
            }
        }
        n
    }

    /// Loads a saved map. A file that is not a map, or one whose checksum does not match
    /// (damaged, cut short), is bad input: nothing is checked against it.
    pub fn load(path: &Path) -> Result<GenMap, TargetError> {
        let bad = |what: &str| {
            TargetError::Input(format!(
                "verification map {} is {what}: it cannot be trusted to tell lost writes; give the map the run wrote, or remove it (or give another --verify-map) to start a new map",
                path.display()
            ))
        };
        let mut data = Vec::new();
        // Not blocking on a FIFO (its open waits for a writer forever) and nothing but a
        // regular file read: a directory, FIFO or device given as map is the user's input
        // (exit 2), not the tool failing (issue 36, finding 7).
        use std::os::unix::fs::OpenOptionsExt;
        let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path);
        if let Ok(kind) = opened.as_ref().map(|f| f.metadata().map(|m| m.file_type())) {
            match kind {
                Ok(t) if t.is_file() => {}
                Ok(t) => {
                    let what = if t.is_dir() { "a directory" } else { "not a regular file (a FIFO, socket or device)" };
                    return Err(TargetError::Input(format!(
                        "verification map {} is {what}: give the path of a map file (--verify-map FILE, --map FILE)",
                        path.display()
                    )));
                }
                Err(e) => {
                    return Err(TargetError::io(format!("cannot read the verification map {}", path.display()), e));
                }
            }
        }
        opened.and_then(|mut f| f.read_to_end(&mut data)).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                // A missing map is the user's input, not a finding (exit 4 means lost writes).
                TargetError::Input(format!(
                    "verification map {} does not exist: give the map a verifying run wrote (--map)",
                    path.display()
                ))
            } else {
                TargetError::io(format!("cannot read the verification map {}", path.display()), e)
            }
        })?;
        let (unchecked, identities) = match data.get(..8) {
            Some(m) if m == FILE_MAGIC || m == FILE_MAGIC_V3 => (false, true),
            Some(m) if m == FILE_MAGIC_V2 => (false, false),
            Some(m) if m == FILE_MAGIC_V1 => (true, false),
            _ if data.len() < 8
                && [FILE_MAGIC, FILE_MAGIC_V3, FILE_MAGIC_V2, FILE_MAGIC_V1].iter().any(|m| m.starts_with(&data)) =>
            {
                return Err(bad("damaged (cut short)"));
            }
            _ => return Err(bad("not a verification map")),
        };
        if !unchecked {
            // The checksum first: damaged lengths must not steer the parsing.
            if data.len() < 16 {
                return Err(bad("damaged (cut short)"));
            }
            let (body, sum) = data.split_at(data.len() - 8);
            if file_sum(body) != u64::from_le_bytes(sum.try_into().expect("8 bytes")) {
                return Err(bad("damaged (its checksum does not match: bytes changed or the file was cut short)"));
            }
            data.truncate(data.len() - 8);
        }
        let end = data.len();
        let mut at = 0usize;
        let mut take = |n: usize| -> Result<&[u8], TargetError> {
            let s = data
                .get(at..at.checked_add(n).ok_or_else(|| bad("damaged"))?)
                .ok_or_else(|| bad("damaged (cut short)"))?;
            at += n;
            Ok(s)
        };
        take(8)?;
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
            if len > 1 << 16 {
                return Err(bad("damaged"));
            }
            let path = String::from_utf8(take(len)?.to_vec()).map_err(|_| bad("damaged"))?;
            let size = u(take(8)?);
            let identity = if identities {
                let len = u(take(8)?) as usize;
                if len > 1 << 12 {
                    return Err(bad("damaged"));
                }
                let id = String::from_utf8(take(len)?.to_vec()).map_err(|_| bad("damaged"))?;
                (!id.is_empty()).then_some(id)
            } else {
                None
            };
            let blocks = (size / bs) as usize;
            let raw = take(blocks.checked_mul(2).ok_or_else(|| bad("damaged"))?)?;
            let saved: Vec<u16> = raw.chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
            // v4: an unknown block with the newest generation it may hold (older maps have no
            // such bit set: their generations are below it).
            let gens = saved.iter().map(|&g| AtomicU16::new(if g & UNKNOWN != 0 { 0 } else { g & GEN_MAX })).collect();
            let kept = std::sync::OnceLock::new();
            if saved.iter().any(|&g| g & UNKNOWN != 0) {
                let _ = kept.set(
                    saved.iter().map(|&g| AtomicU16::new(if g & UNKNOWN != 0 { g & GEN_MAX } else { 0 })).collect(),
                );
            }
            targets.push(TargetMap { path, size, identity, gens, kept });
        }
        if at != end {
            return Err(bad("damaged (bytes after its end)"));
        }
        Ok(GenMap { id, bs, targets, unchecked, in_flight: Default::default() })
    }

    /// Forgets every generation of a target (e.g. a scratch file created anew, which holds none
    /// of the earlier writes); returns how many blocks were known.
    pub fn forget(&self, target: u32) -> u64 {
        let mut known = 0;
        for g in &self.targets[target as usize].gens {
            if g.swap(0, Ordering::Relaxed) & GEN_MAX != 0 {
                known += 1;
            }
        }
        known
    }

    /// Records what each target is (in the map's order), so that a later `iocurve verify`
    /// finds it under another path.
    pub fn set_identities(&mut self, ids: impl IntoIterator<Item = Option<String>>) {
        for (t, id) in self.targets.iter_mut().zip(ids) {
            if id.is_some() {
                t.identity = id;
            }
        }
    }

    /// For each of the map's targets, the index of the given target (path, size, identity)
    /// that is it: by identity where both have one, else by path; sizes must agree. Err names
    /// the first of the map's targets none of the given ones is.
    pub fn order_of(&self, given: &[(String, u64, Option<String>)]) -> Result<Vec<usize>, String> {
        let mut used = vec![false; given.len()];
        let mut order = Vec::with_capacity(self.targets.len());
        for t in &self.targets {
            // A device known only by its number and size may be numbered otherwise after a
            // reboot: then its path decides.
            let same = |(p, _, id): &(String, u64, Option<String>)| match (&t.identity, id) {
                (Some(a), Some(b)) if a == b => true,
                (Some(a), Some(_)) => a.starts_with("device ") && *p == t.path,
                _ => *p == t.path,
            };
            let found = given.iter().enumerate().find(|(j, g)| !used[*j] && same(g) && g.1 == t.size);
            match found {
                Some((j, _)) => {
                    used[j] = true;
                    order.push(j);
                }
                None => {
                    let what = t.identity.as_deref().map_or(String::new(), |id| format!(", {id}"));
                    return Err(format!("{} ({} bytes{what})", t.path, t.size));
                }
            }
        }
        if let Some(j) = used.iter().position(|u| !u) {
            return Err(format!("{} is not in the map", given[j].0));
        }
        Ok(order)
    }

    /// Whether this map was made for these targets (path, size) and block size.
    pub fn matches(&self, bs: u64, targets: &[(String, u64)]) -> bool {
        self.bs == bs
            && self.targets.len() == targets.len()
            && self.targets.iter().zip(targets).all(|(t, (p, s))| &t.path == p && t.size == *s)
    }
}

/// A map as saved at one moment ([`GenMap::snapshot`]).
pub struct Snapshot {
    bytes: Vec<u8>,
    /// Per target: where its generations start in `bytes`, and how many blocks it has.
    gens_at: Vec<(usize, u64)>,
}

impl Snapshot {
    /// The generation of a block in this snapshot (0: unknown, or beyond the map).
    pub fn gen_of(&self, target: u32, block: u64) -> u16 {
        match self.gens_at.get(target as usize) {
            Some(&(at, n)) if block < n => {
                let i = at + block as usize * 2;
                let g = u16::from_le_bytes([self.bytes[i], self.bytes[i + 1]]);
                // An unknown block (v4) has no generation to check.
                if g & UNKNOWN != 0 { 0 } else { g }
            }
            _ => 0,
        }
    }

    /// Writes the snapshot to `path`, via a temporary file renamed over it.
    pub fn write(&self, path: &Path) -> Result<(), TargetError> {
        let fail = |e| TargetError::io(format!("cannot save the verification map {}", path.display()), e);
        // Saved by renaming a temporary file over it: a device or a symlink there would be
        // replaced (`--verify-map /dev/null` would have made /dev/null a file).
        if std::fs::symlink_metadata(path).is_ok_and(|m| !m.file_type().is_file()) {
            return Err(TargetError::Input(format!(
                "verification map {}: not a regular file; name a file for the map",
                path.display()
            )));
        }
        // A name of this save's own: a save given up at a step's end (a flush the storage held)
        // may still finish beside the next one; each renames a whole map over the path.
        static SAVES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = SAVES.fetch_add(1, Ordering::Relaxed);
        let tmp = path.with_extension(format!("tmp.{}.{n}", std::process::id()));
        let written = std::fs::File::create(&tmp)
            .and_then(|mut f| f.write_all(&self.bytes).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(fail(e));
        }
        // The rename on stable media too: after a crash the map is this one, not the one before
        // (whose journal this save's restart replaces).
        iocurve_target::fullio::sync_parent(path);
        Ok(())
    }
}

/// The exclusive hold of one process on a verification map, for as long as a run or
/// `iocurve verify` uses it: two runs writing one map would each record only their own writes
/// and lose the other's. The lock is an `flock` on a file beside the map (`MAP.lock`, holding
/// the holder's process id), not on the map itself, which every save replaces. The lock file
/// goes when the hold ends; the lock ends with the process, however it ends.
#[derive(Debug)]
pub struct MapLock {
    path: PathBuf,
    _file: std::fs::File,
}

impl MapLock {
    /// The lock file of the map at `map`: `MAP.lock`.
    pub fn path_for(map: &Path) -> PathBuf {
        let mut name = map.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".lock");
        map.with_file_name(name)
    }

    /// Takes the hold at once, or fails (bad input, exit code 2) naming the map and the process
    /// holding it.
    pub fn acquire(map: &Path) -> Result<MapLock, TargetError> {
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let path = Self::path_for(map);
        loop {
            let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path);
            let mut file = file.map_err(|e| {
                TargetError::Input(format!(
                    "cannot create {} to lock the verification map {} ({e}): the lock file goes beside the map, so its directory must be writable",
                    path.display(),
                    map.display()
                ))
            })?;
            // SAFETY: flock on an open descriptor.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = std::io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EWOULDBLOCK) => {
                        let mut text = String::new();
                        let _ = file.read_to_string(&mut text);
                        return Err(TargetError::Input(format!(
                            "verification map {} is in use by {} (lock {}): one run or `iocurve verify` at a time per map; wait for it to end, or use another map (--verify-map)",
                            map.display(),
                            holder(text.trim()),
                            path.display()
                        )));
                    }
                    _ => {
                        return Err(TargetError::io(
                            format!("cannot lock the verification map {} ({})", map.display(), path.display()),
                            e,
                        ));
                    }
                }
            }
            // The previous holder removes the file when it lets go: if it did so between our
            // open and our lock, we hold a file nobody else will see. Start over.
            let same = match (file.metadata(), std::fs::metadata(&path)) {
                (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
                _ => false,
            };
            if !same {
                continue;
            }
            let _ = file.set_len(0).and_then(|()| writeln!(file, "{}", std::process::id()));
            return Ok(MapLock { path, _file: file });
        }
    }
}

impl Drop for MapLock {
    fn drop(&mut self) {
        // Removed while still locked (the file closes after this): a process waiting on the
        // old file sees it is gone and starts over.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// `process 4711 (iocurve run plan.toml --verify)`, from the process id in a lock file.
fn holder(pid: &str) -> String {
    let Ok(pid) = pid.parse::<u32>() else { return "another process".into() };
    match iocurve_target::process::command_line(pid) {
        Some(line) => format!("process {pid} ({line})"),
        None => format!("process {pid}"),
    }
}

/// One problem a verification pass found: the block, the generation the map expected, what
/// was there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Problem {
    pub target: u32,
    pub block: u64,
    pub expected: u16,
    pub found: Found,
}

impl Problem {
    /// `lost`, `corrupt` or `misplaced`.
    pub fn kind(&self) -> &'static str {
        match self.found {
            Found::Lost { .. } | Found::Ok => "lost",
            Found::InFlight => "in flight",
            Found::Corrupt => "corrupt",
            Found::Misplaced { .. } => "misplaced",
            Found::Unreadable { .. } => "unreadable",
        }
    }

    /// The older generation found, for a lost write that has one.
    pub fn found_generation(&self) -> Option<u16> {
        match self.found {
            Found::Lost { found, .. } => found,
            _ => None,
        }
    }

    /// What the block holds: `generation 3`, `no write of this map`, `checksum mismatch`, `the
    /// write for f.dat block 7` (`name` gives a target's path).
    pub fn describe_found(&self, name: impl Fn(u32) -> String) -> String {
        match self.found {
            Found::Lost { found: Some(g), .. } => format!("generation {g}"),
            Found::Lost { found: None, .. } | Found::Ok => "no write of this map".into(),
            Found::InFlight => "a write in flight when the run stopped".into(),
            Found::Corrupt => "checksum mismatch".into(),
            Found::Misplaced { target, block } => format!("the write for {} block {block}", name(target)),
            Found::Unreadable { errno } => format!("read error: {}", errno_name(errno)),
        }
    }
}

/// What a verification pass found: the counts and first examples, and every problem up to the
/// cap it was given (the rest only counted).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PassResult {
    pub counts: VerifyCounts,
    pub problems: Vec<Problem>,
    /// Problems beyond the cap: counted, not listed.
    pub unlisted: u64,
    /// `stop` ended the pass before every block was read: the counts cover only part.
    pub interrupted: bool,
}

/// Problems a pass lists one by one at most (about 24 MB); beyond, they are counted.
pub const PROBLEM_LIST_CAP: usize = 1_000_000;

/// Reads every block the map has a generation for and checks it: the final pass of a run and
/// `iocurve verify`. Reads go in runs of up to 1 MiB; `progress` gets (bytes read, bytes to
/// read) now and then. Lists up to `list_cap` problems.
pub fn verify_pass(
    targets: &iocurve_target::TargetSet,
    map: &GenMap,
    list_cap: usize,
    stop: &std::sync::atomic::AtomicBool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<PassResult, TargetError> {
    use std::os::fd::AsRawFd;
    let explained = map.in_flight.read().unwrap_or_else(|e| e.into_inner());
    let intents = explained.as_ref();
    let mut pass = PassResult::default();
    let v = &mut pass.counts;
    let bs = map.bs as usize;
    let per_read = (1usize << 20).div_ceil(bs).max(1);
    let mut pool = iocurve_data::buffer::BufferPool::new(1, per_read * bs);
    let total: u64 = (0..map.targets.len() as u32)
        .map(|t| (0..map.targets[t as usize].blocks()).filter(|&b| map.wanted(intents, t, b)).count() as u64 * map.bs)
        .sum();
    progress(0, total);
    let mut done = 0u64;
    for (ti, (t, tm)) in targets.targets.iter().zip(&map.targets).enumerate() {
        let fd = t.file.as_raw_fd();
        let t_path = t.path.display().to_string();
        let blocks = tm.blocks();
        let mut b = 0u64;
        // Since when the reads have failed without a break, and the error that ended reading
        // this target.
        let (mut failing, mut dead) = (None::<std::time::Instant>, None::<i32>);
        while b < blocks {
            if stop.load(Ordering::Relaxed) {
                pass.interrupted = true;
                return Ok(pass);
            }
            // Skip blocks never written; read the next run of written ones.
            if !map.wanted(intents, ti as u32, b) {
                b += 1;
                continue;
            }
            let n = (per_read as u64).min(blocks - b);
            let len = n as usize * bs;
            let buf = &mut pool.slice_mut(0)[..len];
            // A read error does not end the pass (issue 36, finding 3: after a path loss it
            // stopped with nothing counted): the run's blocks are read one by one, and those
            // that still fail are unreadable, a class of their own. Errors that say the storage
            // could not deliver are that; any other (a misaligned read, no memory) is the
            // tool's, and ends the pass. When the reads have failed without a break for GIVE_UP
            // the rest of the target is counted unreadable unread: on a dead path each read may
            // take a SCSI timeout, and the pass would take blocks × that (quick failures, bad
            // sectors among good ones, are read through).
            let (got, failed) = match dead {
                Some(errno) => (len, Some(errno)),
                None => match iocurve_target::fullio::read_full_at(fd, buf, b * map.bs) {
                    Ok(got) => (got, None),
                    Err(e) if storage_errno(&e).is_some() => (len, storage_errno(&e)),
                    Err(e) => {
                        return Err(TargetError::io(
                            format!("verify: cannot read {} at block {b}", t.path.display()),
                            e,
                        ));
                    }
                },
            };
            failing = if failed.is_some() { failing.or_else(|| Some(std::time::Instant::now())) } else { None };
            if dead.is_none() && failing.is_some_and(|since| since.elapsed() >= GIVE_UP) {
                dead = failed;
            }
            for k in 0..(got / bs) as u64 {
                let no = b + k;
                let expected = map.get(ti as u32, no);
                let in_flight = map.in_flight_gen(intents, ti as u32, no);
                if expected == 0 && in_flight.is_none() {
                    continue;
                }
                if stop.load(Ordering::Relaxed) {
                    pass.interrupted = true;
                    return Ok(pass);
                }
                let block = &mut buf[k as usize * bs..(k as usize + 1) * bs];
                let unreadable = match (failed, dead) {
                    (_, Some(errno)) => Some(errno),
                    (Some(_), None) => match iocurve_target::fullio::read_full_at(fd, block, no * map.bs) {
                        Ok(n) if n == bs => None,
                        // Short: the device ended or gave less than a block.
                        Ok(_) => Some(libc::EIO),
                        Err(e) => match storage_errno(&e) {
                            Some(errno) => Some(errno),
                            None => {
                                return Err(TargetError::io(
                                    format!("verify: cannot read {} at block {no}", t.path.display()),
                                    e,
                                ));
                            }
                        },
                    },
                    (None, None) => None,
                };
                if let Some(errno) = unreadable {
                    done += map.bs;
                    let found = Found::Unreadable { errno };
                    record(v, found, ti as u32, no, |t| {
                        map.targets.get(t as usize).map_or_else(|| t_path.clone(), |m| m.path.clone())
                    });
                    if pass.problems.len() < list_cap {
                        pass.problems.push(Problem { target: ti as u32, block: no, expected, found });
                    } else {
                        pass.unlisted += 1;
                    }
                    continue;
                }
                let block = &*block;
                done += map.bs;
                let name = |t: u32| {
                    if t as usize == ti {
                        t_path.clone()
                    } else {
                        map.targets.get(t as usize).map_or_else(|| format!("target {t}"), |m| m.path.clone())
                    }
                };
                let found = match (in_flight, check(block, map.id, ti as u32, no, expected)) {
                    (None, found) => found,
                    // A write of another block is no torn write.
                    (Some(_), found @ Found::Misplaced { .. }) => found,
                    // Older than the saved write, which the flush before the save made
                    // durable: lost, in flight or not.
                    (Some(_), found @ Found::Lost { .. }) if expected != 0 => found,
                    // The saved write, a later one, or a mix of both (torn).
                    (Some(_), _) => Found::InFlight,
                };
                record(v, found, ti as u32, no, name);
                if !matches!(found, Found::Ok | Found::InFlight) {
                    if pass.problems.len() < list_cap {
                        pass.problems.push(Problem { target: ti as u32, block: no, expected, found });
                    } else {
                        pass.unlisted += 1;
                    }
                }
            }
            progress(done, total);
            b += n;
        }
    }
    Ok(pass)
}

/// How a watched pass ended without a result: nothing it read counts as verified.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unfinished {
    /// No read returned for `after_s` seconds: the storage stopped answering.
    Stuck { after_s: f64, done: u64, total: u64 },
    /// A read had not returned a second after the stop (Ctrl-C, or a coordinator gone).
    StopIgnored { done: u64, total: u64 },
}

impl Unfinished {
    pub fn describe(&self) -> String {
        let size = iocurve_plan::format_size;
        match *self {
            Unfinished::Stuck { after_s, done, total } => format!(
                "no read returned for {after_s:.0} s after {} of {} (the storage stopped answering); nothing is recorded as verified",
                size(done),
                size(total)
            ),
            Unfinished::StopIgnored { done, total } => format!(
                "interrupted after {} of {}: a read did not return within a second of Ctrl-C (the storage stopped answering); nothing is recorded as verified",
                size(done),
                size(total)
            ),
        }
    }
}

/// [`verify_pass`] on a thread of its own, watched, for the final pass of a run on any host and
/// `iocurve verify`. It reads through O_DIRECT where the targets take it (a page cache could hide
/// a write the storage lost). A read blocked in the kernel on storage that stopped answering holds up
/// neither a stop (given up a second after `stop` is set) nor anyone for longer than
/// `stuck_after` without a read returning. `tick(done, total)` every `every` while it runs.
/// The reading thread is left behind if its read never returns.
pub fn watched_pass(
    targets: std::sync::Arc<iocurve_target::TargetSet>,
    map: std::sync::Arc<GenMap>,
    list_cap: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    stuck_after: std::time::Duration,
    every: std::time::Duration,
    tick: &mut dyn FnMut(u64, u64),
) -> Result<Result<PassResult, Unfinished>, TargetError> {
    use std::sync::atomic::AtomicU64;
    use std::sync::mpsc::RecvTimeoutError;
    use std::time::{Duration, Instant};
    targets.set_direct(true).or_else(|_| targets.set_direct(false))?;
    let (done, total) = (std::sync::Arc::new(AtomicU64::new(0)), std::sync::Arc::new(AtomicU64::new(0)));
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let (done, total, stop) = (done.clone(), total.clone(), stop.clone());
        std::thread::Builder::new()
            .name("iocurve-verify".into())
            .spawn(move || {
                let r = verify_pass(&targets, &map, list_cap, &stop, &mut |d, t| {
                    done.store(d, Ordering::Relaxed);
                    total.store(t, Ordering::Relaxed);
                });
                let _ = tx.send(r);
            })
            .map_err(|e| TargetError::io("verify: cannot start the verification thread".to_string(), e))?;
    }
    let now = || (done.load(Ordering::Relaxed), total.load(Ordering::Relaxed));
    let mut last_tick = Instant::now();
    let (mut last_done, mut moved_at) = (0u64, Instant::now());
    let mut stop_seen: Option<Instant> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(50).min(every)) {
            Ok(r) => return r.map(Ok),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                return Err(TargetError::io(
                    "verify",
                    std::io::Error::other("the verification thread ended without a result"),
                ));
            }
        }
        let (d, t) = now();
        if d != last_done {
            (last_done, moved_at) = (d, Instant::now());
        }
        if stop.load(Ordering::Relaxed)
            && stop_seen.get_or_insert_with(Instant::now).elapsed() >= Duration::from_secs(1)
        {
            return Ok(Err(Unfinished::StopIgnored { done: d, total: t }));
        }
        // After a stop only the stop's second counts.
        if stop_seen.is_none() && moved_at.elapsed() >= stuck_after {
            return Ok(Err(Unfinished::Stuck { after_s: stuck_after.as_secs_f64(), done: d, total: t }));
        }
        if last_tick.elapsed() >= every {
            last_tick = Instant::now();
            tick(d, t);
        }
    }
}

/// How long reads may fail without a break before a pass counts the rest of a target
/// unreadable unread.
const GIVE_UP: std::time::Duration = std::time::Duration::from_secs(30);

/// The errno of a read error that says the storage could not deliver the data (a bad sector,
/// a lost path, a device gone): an unreadable block. None for any other error.
fn storage_errno(e: &std::io::Error) -> Option<i32> {
    let errno = e.raw_os_error().unwrap_or(libc::EIO);
    [libc::EIO, libc::ENXIO, libc::ENODEV, libc::ENOLINK, libc::ETIMEDOUT, libc::EBADE, libc::ENODATA, libc::EREMOTEIO]
        .contains(&errno)
        .then_some(errno)
}

/// `EIO (Input/output error)`: an errno as people look it up.
fn errno_name(errno: i32) -> String {
    let name = match errno {
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::ENODEV => "ENODEV",
        libc::ENOLINK => "ENOLINK",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::EBADE => "EBADE",
        _ => "",
    };
    let text = std::io::Error::from_raw_os_error(errno).to_string();
    if name.is_empty() { text } else { format!("{name}: {text}") }
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

    /// Issue 40 (found in review): the newest generation an unknown block may hold was not
    /// saved, so the next run's first write of a trimmed block began at 1 again and stale data
    /// read as newer. The map file (v4) keeps it; v3 maps still load.
    #[test]
    fn regression_an_unknown_block_keeps_its_newest_generation_across_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.map");
        let map = GenMap::new(4096, &[("t".into(), 1 << 20)]);
        let had = map.claim(0, 3).unwrap();
        map.release(0, 3, 8734);
        assert_eq!(had, 0);
        let had = map.claim(0, 3).unwrap();
        map.release_unknown(0, 3, had);
        map.claim(0, 4).unwrap();
        map.release(0, 4, 12);
        map.save(&path).unwrap();
        let again = GenMap::load(&path).unwrap();
        assert_eq!((again.get(0, 3), again.get(0, 4)), (0, 12), "unknown, and known as before");
        assert_eq!(again.next_for(0, 3, again.claim(0, 3).unwrap()), 8735, "goes on after the stale 8734");
        assert_eq!(again.snapshot().gen_of(0, 3), 0, "a saved unknown block has nothing to check");
        // The same map as v3: its generations load as they were.
        let fresh = GenMap::new(4096, &[("t".into(), 1 << 20)]);
        fresh.claim(0, 4).unwrap();
        fresh.release(0, 4, 12);
        fresh.save(&path).unwrap();
        let mut v3 = std::fs::read(&path).unwrap();
        v3[..8].copy_from_slice(FILE_MAGIC_V3);
        let body = v3.len() - 8;
        let sum = file_sum(&v3[..body]);
        v3[body..].copy_from_slice(&sum.to_le_bytes());
        std::fs::write(&path, &v3).unwrap();
        let old = GenMap::load(&path).unwrap();
        assert_eq!((old.get(0, 3), old.get(0, 4), old.next_for(0, 3, 0)), (0, 12, 1));
    }

    /// Issue 40 (found by an outside attack): a trimmed block's next write began again at
    /// generation 1, so stale data a device left behind a discard (generation 8734) read as
    /// newer than it and a dropped write after the trim went unseen. Its next write now goes on
    /// from the newest generation the block may hold; so does a block whose write failed.
    #[test]
    fn regression_a_block_trimmed_or_failed_goes_on_from_its_newest_generation() {
        let map = GenMap::new(4096, &[("t".into(), 1 << 20)]);
        let had = map.claim(0, 5).unwrap();
        assert_eq!(had, 0);
        map.release(0, 5, 8734);
        let had = map.claim(0, 5).unwrap();
        map.release_unknown(0, 5, had);
        assert_eq!(map.get(0, 5), 0, "a trimmed block is not checked");
        let had = map.claim(0, 5).unwrap();
        let new = map.next_for(0, 5, had);
        assert_eq!(new, 8735);
        map.release(0, 5, new);
        // The write was dropped: the device still holds the stale 8734.
        assert_eq!(check(&block(0, 5, 8734), 0, 5, map.get(0, 5)), Found::Lost { expected: 8735, found: Some(8734) });
        // A failed write of generation 9 on a block never trimmed: the next is 10.
        let had = map.claim(0, 6).unwrap();
        map.release_unknown(0, 6, next_gen(next_gen(had)) + 7);
        assert_eq!(map.next_for(0, 6, map.claim(0, 6).unwrap()), 10);
        // A block that never became unknown starts at 1.
        assert_eq!(map.next_for(0, 7, map.claim(0, 7).unwrap()), 1);
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

    /// Issue 13, finding 6: the map had no checksum, and one flipped byte made a false "lost
    /// write". Every single changed byte of a saved map, a cut and an addition are now refused
    /// as a damaged map (bad input), never loaded.
    #[test]
    fn regression_one_flipped_byte_of_the_map_is_damage_not_a_lost_write() {
        let m = GenMap::new(4096, &[("a.dat".into(), 64 << 10), ("b.dat".into(), 32 << 10)]);
        for b in 0..16 {
            m.release(0, b, 3);
        }
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.map");
        m.save(&p).unwrap();
        let good = std::fs::read(&p).unwrap();
        assert!(!GenMap::load(&p).unwrap().unchecked);
        for i in 0..good.len() {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[i] ^= flip;
                std::fs::write(&p, &bad).unwrap();
                let e = GenMap::load(&p).err().unwrap_or_else(|| panic!("byte {i} ^ {flip:#x} went unnoticed"));
                assert!(e.is_input_error(), "bad input, not a system failure: {e}");
                let text = e.to_string();
                assert!(
                    text.contains("damaged") || (i < 8 && text.contains("not a verification map")),
                    "byte {i}: {text}"
                );
                assert!(text.contains("m.map"), "names the file: {text}");
            }
        }
        for cut in [1, 2, 9, good.len() - 8] {
            std::fs::write(&p, &good[..good.len() - cut]).unwrap();
            let e = GenMap::load(&p).err().expect("a cut map is refused");
            assert!(e.to_string().contains("damaged"), "{e}");
        }
        let mut longer = good.clone();
        longer.push(0);
        std::fs::write(&p, &longer).unwrap();
        assert!(GenMap::load(&p).err().expect("an extended map is refused").to_string().contains("damaged"));
    }

    /// Issue 36, finding 7: `iocurve verify` matched a map's targets by the text of their
    /// paths. A map keeps each target's identity now; targets are found by it under any name
    /// and in any order, by path where the map has none (a map saved before, `IOCVMAP2`, which
    /// still loads).
    #[test]
    fn targets_are_found_by_identity_and_old_maps_by_path() {
        let mut m = GenMap::new(4096, &[("/dev/sdb".into(), 64 << 10), ("/dev/sdc".into(), 64 << 10)]);
        m.set_identities([Some("wwid naa.1".to_string()), Some("wwid naa.2".to_string())]);
        m.release(1, 3, 9);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.map");
        m.save(&p).unwrap();
        let l = GenMap::load(&p).unwrap();
        assert_eq!(l.targets[0].identity.as_deref(), Some("wwid naa.1"));
        let given = |a: &str, b: &str| {
            vec![
                (a.to_string(), 64 << 10, Some("wwid naa.2".to_string())),
                (b.to_string(), 64 << 10, Some("wwid naa.1".to_string())),
            ]
        };
        // Renamed and swapped (sdb became sdc and the other way round): found by what they are.
        assert_eq!(l.order_of(&given("/dev/sdb", "/dev/sdc")), Ok(vec![1, 0]));
        let other = vec![(String::from("/dev/sdb"), 64 << 10, Some("wwid naa.9".to_string()))];
        let e = l.order_of(&other).unwrap_err();
        assert!(e.contains("/dev/sdb") && e.contains("wwid naa.1"), "{e}");
        // A size that changed is another target.
        let mut resized = given("x", "y");
        resized[0].1 = 32 << 10;
        assert!(l.order_of(&resized).is_err());
        // The same map as IOCVMAP2 (no identities): loads, matched by path.
        let mut v2 = std::fs::read(&p).unwrap();
        v2.truncate(v2.len() - 8);
        // After the header (4 × 8 bytes) each target has its path length, path (8 bytes here)
        // and size, then the identity (length, 10 bytes) to drop, then 16 generations.
        let first = 8 * 4 + 8 + 8 + 8;
        v2.drain(first..first + 8 + 10);
        let second = first + 16 * 2 + 8 + 8 + 8;
        v2.drain(second..second + 8 + 10);
        v2[..8].copy_from_slice(FILE_MAGIC_V2);
        let sum = file_sum(&v2);
        v2.extend_from_slice(&sum.to_le_bytes());
        std::fs::write(&p, &v2).unwrap();
        let old = GenMap::load(&p).unwrap();
        assert_eq!((old.targets[0].identity.as_ref(), old.get(1, 3)), (None, 9));
        assert_eq!(old.order_of(&given("/dev/sdc", "/dev/sdb")), Ok(vec![1, 0]), "by path");
    }

    /// Maps saved before the checksum (`IOCVMAP1`, no trailer) still load, marked unchecked, and
    /// get a checksum at their next save.
    #[test]
    fn a_map_from_before_the_checksum_still_loads() {
        let m = GenMap::new(4096, &[("a.dat".into(), 64 << 10)]);
        m.release(0, 2, 7);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("old.map");
        m.save(&p).unwrap();
        let mut v1 = std::fs::read(&p).unwrap();
        v1.truncate(v1.len() - 8);
        // No identity either: its length (after magic, id, bs, count, path length, path, size).
        v1.drain(53..61);
        v1[..8].copy_from_slice(FILE_MAGIC_V1);
        std::fs::write(&p, &v1).unwrap();
        let l = GenMap::load(&p).unwrap();
        assert!(l.unchecked);
        assert_eq!((l.id, l.get(0, 2)), (m.id, 7));
        l.save(&p).unwrap();
        assert!(!GenMap::load(&p).unwrap().unchecked);
    }

    /// Issue 13, finding 6: two verifying runs in one directory shared the default map without
    /// a lock. A map is held by one user at a time; the second is refused at once, naming the
    /// map and the holding process; the hold ends with its holder and leaves no file behind.
    #[test]
    fn regression_a_map_is_held_by_one_run_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v.map");
        let first = MapLock::acquire(&p).unwrap();
        let lock_file = MapLock::path_for(&p);
        assert_eq!(lock_file, dir.path().join("v.map.lock"));
        let e = MapLock::acquire(&p).expect_err("a held map is refused");
        assert!(e.is_input_error(), "{e}");
        let text = e.to_string();
        assert!(text.contains("v.map") && text.contains("in use"), "{text}");
        assert!(text.contains(&format!("process {}", std::process::id())), "names the holder: {text}");
        // Saving the map (a rename over it) does not end the hold.
        GenMap::new(4096, &[("a".into(), 1 << 20)]).save(&p).unwrap();
        assert!(MapLock::acquire(&p).is_err());
        drop(first);
        assert!(!lock_file.exists(), "no lock file left behind");
        let again = MapLock::acquire(&p).expect("free again");
        drop(again);
        // Many takers at once: exactly one holds it at any time.
        let held = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..200 {
                        if let Ok(l) = MapLock::acquire(&p) {
                            assert_eq!(held.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                            std::thread::yield_now();
                            held.fetch_sub(1, Ordering::SeqCst);
                            drop(l);
                        }
                    }
                });
            }
        });
    }

    /// Issue 13, finding 5: only five examples were printed, with no way to get the full list. A
    /// pass lists every problem (up to its cap, counting the rest) with its block, the
    /// generation expected and what was found.
    #[test]
    fn regression_a_pass_lists_every_problem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.dat");
        let bs = 4096usize;
        let mut data = vec![0u8; 16 * bs];
        for (no, b) in data.chunks_mut(bs).enumerate() {
            b[100..].fill(no as u8);
            write_header(b, ID, 0, no as u64, 2);
        }
        // Block 3 holds an older write, block 5 a torn one, block 7 the write for block 8; block
        // 9 nothing of ours.
        write_header(&mut data[3 * bs..4 * bs], ID, 0, 3, 1);
        data[5 * bs + 2000] ^= 1;
        let eight = data[8 * bs..9 * bs].to_vec();
        data[7 * bs..8 * bs].copy_from_slice(&eight);
        data[9 * bs..10 * bs].fill(0);
        std::fs::write(&path, &data).unwrap();
        let name = path.display().to_string();
        let mut map = GenMap::new(bs as u64, &[(name.clone(), data.len() as u64)]);
        map.id = ID;
        for b in 0..16 {
            map.release(0, b, 2);
        }
        let groups = vec![iocurve_plan::TargetGroup { name: "t".into(), weight: 1, targets: vec![name.clone()] }];
        let targets = iocurve_target::TargetSet::open(&groups, &iocurve_target::OpenOptions::default()).unwrap();
        let pass =
            verify_pass(&targets, &map, 100, &std::sync::atomic::AtomicBool::new(false), &mut |_, _| {}).unwrap();
        let c = &pass.counts;
        assert_eq!((c.checked, c.lost, c.corrupt, c.misplaced), (16, 2, 1, 1));
        let rows: Vec<(u64, &str, u16, Option<u16>, String)> = pass
            .problems
            .iter()
            .map(|p| (p.block, p.kind(), p.expected, p.found_generation(), p.describe_found(|_| "t".into())))
            .collect();
        assert_eq!(
            rows,
            vec![
                (3, "lost", 2, Some(1), "generation 1".into()),
                (5, "corrupt", 2, None, "checksum mismatch".into()),
                (7, "misplaced", 2, None, "the write for t block 8".into()),
                (9, "lost", 2, None, "no write of this map".into()),
            ]
        );
        assert_eq!(pass.unlisted, 0);
        let capped =
            verify_pass(&targets, &map, 3, &std::sync::atomic::AtomicBool::new(false), &mut |_, _| {}).unwrap();
        assert_eq!((capped.problems.len(), capped.unlisted), (3, 1), "beyond the cap: counted, not listed");
        assert_eq!(capped.counts, pass.counts);

        // Watched, on its own thread: the same findings, and its progress ends at the whole.
        let (targets, map) = (std::sync::Arc::new(targets), std::sync::Arc::new(map));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut last = (0, 0);
        let every = std::time::Duration::from_millis(1);
        let long = std::time::Duration::from_secs(60);
        let watched =
            watched_pass(targets.clone(), map.clone(), 100, stop.clone(), long, every, &mut |d, t| last = (d, t));
        let watched = watched.unwrap().expect("finished");
        assert_eq!(watched.counts, pass.counts);
        assert_eq!(watched.problems.len(), 4);
        assert!(last.1 == 0 || last.1 == 16 * bs as u64, "{last:?}");
        // Stopped before it began: it says it was interrupted, and reads nothing.
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let watched = watched_pass(targets, map, 100, stop, long, every, &mut |_, _| {}).unwrap().expect("ended");
        assert!(watched.interrupted && watched.counts.checked == 0);
    }

    #[test]
    fn an_unfinished_pass_says_how_far_it_got_and_that_nothing_counts() {
        let stuck = Unfinished::Stuck { after_s: 1.0, done: 4 << 20, total: 16 << 20 };
        assert_eq!(
            stuck.describe(),
            "no read returned for 1 s after 4m of 16m (the storage stopped answering); nothing is recorded as verified"
        );
        let stop = Unfinished::StopIgnored { done: 0, total: 1 << 30 };
        assert!(
            stop.describe().starts_with("interrupted after 0 of 1g: a read did not return within a second of Ctrl-C")
        );
    }
}
