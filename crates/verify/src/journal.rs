//! The verification journal (`run --verify-journal`): each block a verifying write is about to
//! change, recorded durably before the write goes to the storage, so that after a crash of the
//! load host (a power cut, a kernel panic, `kill -9` of iocurve and the array together) every
//! block is proven or explained (issue 36, part 8).
//!
//! The map is saved at every interval end after a flush of the targets
//! ([`crate::keeper::MapKeeper`]), so what it says reached the storage's stable media. What
//! was written after its last save is what a crash can leave old, new or half-written (torn):
//! the journal names exactly those blocks, with the generation each was being written with. A
//! block the journal names is *in flight* — explained, not lost — when it holds the saved
//! generation, a journaled one, or a torn mix; everything else must hold at least the saved
//! generation, as without a crash.
//!
//! Writes are journaled per submission batch (group commit): the I/O thread appends one record
//! per write of the batch and waits for `fdatasync` before it hands the batch to the kernel.
//! Every map save starts the journal anew with only the records the saved map does not cover
//! yet (writes still in flight at the save).
//!
//! The file (`MAP.journal`, beside the map): a 32-byte header (`IOCVJRN1`, the map's id, its
//! block size), then batches: `IOCB`, the count, 16-byte records (target, generation, block)
//! and a checksum of the batch. A batch cut short by the crash is ignored: its writes had not
//! been submitted.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use crate::intents::{Intent, Intents, uncovered};
use crate::verify::{GEN_MAX, GenMap, Snapshot};
use iocurve_target::TargetError;

const MAGIC: &[u8; 8] = b"IOCVJRN1";
const BATCH: &[u8; 4] = b"IOCB";
const HEADER_LEN: u64 = 32;
const RECORD_LEN: usize = 16;
/// Records per batch at most (a batch bigger than any ring; a damaged count is refused).
const MAX_BATCH: u32 = 1 << 20;

/// The journal of a running map.
pub struct Journal {
    path: PathBuf,
    map_id: u32,
    bs: u64,
    inner: Mutex<Inner>,
}

struct Inner {
    file: Arc<File>,
    len: u64,
    /// The first failure to write or flush the journal: every later commit fails with it (a
    /// failed `fdatasync` may drop the pages it could not write, and a later one then succeeds
    /// without them).
    failed: Option<String>,
    /// The last journaled generation of every block written since the last save (and of those
    /// carried over): what the next start-over keeps of them.
    recent: HashMap<(u32, u64), u16>,
}

impl Journal {
    /// The journal of the map at `map`: `MAP.journal`.
    pub fn path_for(map: &Path) -> PathBuf {
        let mut name = map.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(".journal");
        map.with_file_name(name)
    }

    /// Starts the journal of `map` (saved at `map_path`) empty. The map must be saved (and any
    /// earlier journal resolved, [`GenMap::forget_in_flight`]) first.
    pub fn create(map_path: &Path, map: &GenMap) -> Result<Journal, TargetError> {
        let path = Self::path_for(map_path);
        // Written by renaming a file over it: a directory or device there is the user's to move.
        if std::fs::symlink_metadata(&path).is_ok_and(|m| !m.file_type().is_file()) {
            return Err(TargetError::Input(format!(
                "verification journal {}: not a regular file; move it, or give another --verify-map",
                path.display()
            )));
        }
        let (file, len) = start(&path, map.id, map.bs, &[])
            .map_err(|e| TargetError::io(format!("cannot write the verification journal {}", path.display()), e))?;
        Ok(Journal {
            path,
            map_id: map.id,
            bs: map.bs,
            inner: Mutex::new(Inner { file: Arc::new(file), len, failed: None, recent: HashMap::new() }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records a batch of writes durably; returns once they are on stable media (`fdatasync`).
    /// The I/O thread submits the batch only after.
    pub fn commit(&self, batch: &[Intent]) -> std::io::Result<()> {
        if batch.is_empty() {
            return Ok(());
        }
        let bytes = encode_batch(batch);
        let file = {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(why) = &inner.failed {
                return Err(std::io::Error::other(why.clone()));
            }
            if let Err(e) = inner.file.write_all_at(&bytes, inner.len) {
                return Err(self.fail(&mut inner, e));
            }
            inner.len += bytes.len() as u64;
            for i in batch {
                inner.recent.insert((i.target, i.block), i.gen_);
            }
            inner.file.clone()
        };
        // Outside the lock: other threads append meanwhile, and one flush covers them all.
        file.sync_data().map_err(|e| {
            let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            self.fail(&mut inner, e)
        })
    }

    fn fail(&self, inner: &mut Inner, e: std::io::Error) -> std::io::Error {
        let why = format!("cannot write the verification journal {}: {e}", self.path.display());
        inner.failed.get_or_insert_with(|| why.clone());
        std::io::Error::new(e.kind(), why)
    }

    /// Starts the journal anew after the map was saved as `saved`: only the writes the saved map
    /// does not cover (still in flight at the snapshot, or issued since) stay. Appends wait
    /// meanwhile; one that went into the old file before is carried over (its block is newer
    /// than the snapshot) and flushed in the new one before this returns.
    ///
    /// The journal's lock is held meanwhile (two flushes): a journaled run's verifying writes
    /// wait that long at every interval end.
    pub fn restart(&self, saved: &Snapshot, map: &GenMap) -> std::io::Result<()> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = &inner.failed {
            return Err(std::io::Error::other(why.clone()));
        }
        // A block the snapshot leaves unknown (0) and no I/O holds now had its write fail: it
        // is not checked, so nothing needs explaining (and it must not keep the journal alive).
        let carried: HashMap<(u32, u64), u16> = inner
            .recent
            .iter()
            .filter(|&(&(t, b), &g)| {
                let s = saved.gen_of(t, b);
                uncovered(g, s) && (s != 0 || map.busy_checked(t, b))
            })
            .map(|(&k, &g)| (k, g))
            .collect();
        let records: Vec<Intent> =
            carried.iter().map(|(&(target, block), &gen_)| Intent { target, block, gen_ }).collect();
        let (file, len) = match start(&self.path, self.map_id, self.bs, &records) {
            Ok(f) => f,
            Err(e) => return Err(self.fail(&mut inner, e)),
        };
        inner.file = Arc::new(file);
        inner.len = len;
        inner.recent = carried;
        Ok(())
    }

    /// After the run's last save: removes the file when it names no write in flight (the map
    /// says everything); keeps it otherwise.
    pub fn close(&self) {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if inner.len == HEADER_LEN {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Writes a journal holding `records` (one batch) via a temporary file renamed over `path`;
/// returns it open for appending, and its length.
fn start(path: &Path, map_id: u32, bs: u64, records: &[Intent]) -> std::io::Result<(File, u64)> {
    let mut bytes = Vec::with_capacity(HEADER_LEN as usize + records.len() * RECORD_LEN + 16);
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&map_id.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&bs.to_le_bytes());
    bytes.extend_from_slice(&0u64.to_le_bytes());
    if !records.is_empty() {
        bytes.extend_from_slice(&encode_batch(records));
    }
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let mut f = File::options().read(true).write(true).create(true).truncate(true).open(&tmp)?;
    f.write_all(&bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)?;
    // The rename itself on stable media: a crash must not bring back an older journal that
    // misses the carried writes. (An older one would only name more blocks, never fewer.)
    iocurve_target::fullio::sync_parent(path);
    Ok((f, bytes.len() as u64))
}

fn encode_batch(batch: &[Intent]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + batch.len() * RECORD_LEN + 8);
    out.extend_from_slice(BATCH);
    out.extend_from_slice(&(batch.len() as u32).to_le_bytes());
    for i in batch {
        out.extend_from_slice(&i.target.to_le_bytes());
        out.extend_from_slice(&u32::from(i.gen_).to_le_bytes());
        out.extend_from_slice(&i.block.to_le_bytes());
    }
    let sum = batch_sum(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn batch_sum(data: &[u8]) -> u64 {
    let mut h: u64 = 0x6a09_e667_f3bc_c908 ^ data.len() as u64;
    for c in data.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(27);
    }
    h ^ (h >> 31)
}

/// What was found beside a map.
#[derive(Debug)]
pub enum Found {
    /// No journal: the run that kept the map did not journal (or ended cleanly).
    None,
    /// A journal of another map (the map was started over): it says nothing about this one.
    OtherMap,
    Intents(Intents),
}

/// Reads the journal beside the map at `map_path` (made for `map`).
pub fn load(map_path: &Path, map: &GenMap) -> Result<Found, TargetError> {
    let path = Journal::path_for(map_path);
    let bad = |what: &str| {
        TargetError::Input(format!(
            "verification journal {} is {what}: it cannot tell which blocks were being written; remove it to verify without it (blocks written when the run stopped may then show as corrupted)",
            path.display()
        ))
    };
    let mut f = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::None),
        Err(e) => return Err(TargetError::io(format!("cannot read the verification journal {}", path.display()), e)),
    };
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return Err(bad("not a regular file"));
    }
    let mut head = [0u8; HEADER_LEN as usize];
    if f.read_exact(&mut head).is_err() {
        // Cut short before its header was written: it names nothing.
        return Ok(Found::None);
    }
    if &head[..8] != MAGIC {
        return Err(bad("not a verification journal"));
    }
    let id = u32::from_le_bytes(head[8..12].try_into().expect("4 bytes"));
    let bs = u64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
    if id != map.id || bs != map.bs {
        return Ok(Found::OtherMap);
    }
    let mut rest = Vec::new();
    f.read_to_end(&mut rest).map_err(|e| TargetError::io(format!("cannot read {}", path.display()), e))?;
    let mut intents = Intents::default();
    let mut at = 0usize;
    while rest.len() - at >= 8 {
        let count = u32::from_le_bytes(rest[at + 4..at + 8].try_into().expect("4 bytes"));
        if &rest[at..at + 4] != BATCH || count == 0 || count > MAX_BATCH {
            break;
        }
        let end = at + 8 + count as usize * RECORD_LEN;
        if rest.len() < end + 8 {
            break;
        }
        let sum = u64::from_le_bytes(rest[end..end + 8].try_into().expect("8 bytes"));
        if batch_sum(&rest[at..end]) != sum {
            break;
        }
        for r in rest[at + 8..end].chunks_exact(RECORD_LEN) {
            let target = u32::from_le_bytes(r[0..4].try_into().expect("4 bytes"));
            let gen_ = u32::from_le_bytes(r[4..8].try_into().expect("4 bytes")) as u16 & GEN_MAX;
            let block = u64::from_le_bytes(r[8..16].try_into().expect("8 bytes"));
            intents.record(target, block, gen_);
        }
        at = end + 8;
    }
    intents.ignored_bytes = (rest.len() - at) as u64;
    Ok(Found::Intents(intents))
}

/// Before a run continues a map (kept by a run that may have crashed): the blocks its journal
/// names as in flight are forgotten (their state is unknown until written again), the map saved
/// so, and the journal removed. Returns what to tell the user, if anything.
pub fn resolve(map_path: &Path, map: &GenMap) -> Result<Option<String>, TargetError> {
    match load(map_path, map)? {
        Found::None => Ok(None),
        Found::OtherMap => {
            remove(map_path);
            Ok(None)
        }
        Found::Intents(i) => {
            let n = map.forget_in_flight(&i);
            map.save(map_path)?;
            remove(map_path);
            Ok((n > 0).then(|| {
                format!(
                    "verification journal: {n} blocks were being written when the run that kept {} stopped without saving it: whether those writes landed is unknown, so they are checked again once written again (`iocurve verify` before a new run tells what they hold)",
                    map_path.display()
                )
            }))
        }
    }
}

/// Removes a journal beside `map_path` (once what it said was applied, or of another map).
pub fn remove(map_path: &Path) {
    let _ = std::fs::remove_file(Journal::path_for(map_path));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> GenMap {
        GenMap::new(4096, &[("a".into(), 4096 * 64), ("b".into(), 4096 * 64)])
    }

    #[test]
    fn a_write_is_uncovered_unless_the_map_has_its_generation() {
        assert!(uncovered(1, 0) && uncovered(5, 4) && uncovered(1, GEN_MAX));
        // The rewrite of a block whose write failed starts again at 1.
        assert!(uncovered(1, 5000));
        assert!(!uncovered(4, 4) && !uncovered(0, 0) && !uncovered(0, 3));
    }

    #[test]
    fn a_journal_names_what_was_committed_and_ignores_a_batch_cut_short() {
        let dir = tempfile::tempdir().unwrap();
        let mp = dir.path().join("m.map");
        let m = map();
        let j = Journal::create(&mp, &m).unwrap();
        j.commit(&[Intent { target: 0, block: 3, gen_: 1 }, Intent { target: 1, block: 9, gen_: 2 }]).unwrap();
        j.commit(&[Intent { target: 0, block: 3, gen_: 2 }]).unwrap();
        // A batch the crash cut short.
        let jp = Journal::path_for(&mp);
        let mut f = File::options().append(true).open(&jp).unwrap();
        f.write_all(&encode_batch(&[Intent { target: 0, block: 5, gen_: 1 }])[..20]).unwrap();
        let Found::Intents(i) = load(&mp, &m).unwrap() else { panic!("intents expected") };
        assert_eq!((i.get(0, 3), i.get(1, 9), i.get(0, 5)), (Some(2), Some(2), None));
        assert_eq!(i.ignored_bytes, 20);
        assert_eq!(m.in_flight(&i), 2);
    }

    #[test]
    fn a_restart_keeps_only_what_the_saved_map_does_not_cover() {
        let dir = tempfile::tempdir().unwrap();
        let mp = dir.path().join("m.map");
        let m = map();
        let j = Journal::create(&mp, &m).unwrap();
        // Block 1 written (acknowledged, in the map); block 2 written once and in flight again
        // at the save; block 3's write failed (unknown, not checked); block 4 rewritten after a
        // failed write, which starts again at generation 1 (the map had 5000 before).
        m.release(0, 2, 1);
        m.release(0, 4, 5000);
        j.commit(&[
            Intent { target: 0, block: 1, gen_: 1 },
            Intent { target: 0, block: 2, gen_: 2 },
            Intent { target: 0, block: 3, gen_: 1 },
            Intent { target: 0, block: 4, gen_: 5001 },
        ])
        .unwrap();
        let g = m.claim(0, 1).unwrap();
        m.release(0, 1, crate::verify::next_gen(g));
        m.claim(0, 2).unwrap();
        m.claim(0, 3).unwrap();
        m.release(0, 3, 0);
        m.claim(0, 4).unwrap();
        m.release(0, 4, 0);
        m.claim(0, 4).unwrap();
        j.commit(&[Intent { target: 0, block: 4, gen_: 1 }]).unwrap();
        j.restart(&m.snapshot(), &m).unwrap();
        let Found::Intents(i) = load(&mp, &m).unwrap() else { panic!("intents expected") };
        assert_eq!((i.get(0, 1), i.get(0, 2), i.get(0, 3), i.get(0, 4)), (None, Some(2), None, Some(1)));
        // Forgotten as unknown when a run continues the map (block 4 is unknown already).
        assert_eq!(m.forget_in_flight(&i), 1);
        j.close();
        assert!(jp_exists(&mp), "a journal naming a write in flight stays");
        m.release(0, 2, 2);
        m.release(0, 4, 1);
        j.restart(&m.snapshot(), &m).unwrap();
        j.close();
        assert!(!jp_exists(&mp), "an empty journal goes at the end");
    }

    fn jp_exists(mp: &Path) -> bool {
        Journal::path_for(mp).exists()
    }

    #[test]
    fn a_journal_of_another_map_or_damaged_is_told() {
        let dir = tempfile::tempdir().unwrap();
        let mp = dir.path().join("m.map");
        let (m, other) = (map(), GenMap::new(512, &[("a".into(), 4096)]));
        Journal::create(&mp, &other).unwrap();
        assert!(matches!(load(&mp, &m).unwrap(), Found::OtherMap));
        std::fs::write(Journal::path_for(&mp), b"not a journal at all, no, not at all").unwrap();
        assert!(load(&mp, &m).unwrap_err().to_string().contains("not a verification journal"));
        remove(&mp);
        assert!(matches!(load(&mp, &m).unwrap(), Found::None));
        // A directory where the journal goes is the user's input (exit code 2), not a failure.
        std::fs::create_dir(Journal::path_for(&mp)).unwrap();
        let e = Journal::create(&mp, &m).err().expect("refused");
        assert!(e.is_input_error() && e.to_string().contains("not a regular file"), "{e}");
    }
}
