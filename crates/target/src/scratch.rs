//! Scratch files: created by iocurve, recognised by identity and content, removed only as the
//! same inode.
//!
//! A scratch file is `size` bytes of data followed by one 4 KiB stamp block that I/O never
//! touches. The stamp holds iocurve's magic, the state (preparing or ready), the data size and
//! the file's device and inode, with a checksum. A later run treats the file as its own only
//! while all of that still holds: a copied, replaced, resized or truncated file is foreign, and
//! a reformatted one is caught by the signature probe the caller runs as well. A file whose
//! preparation was interrupted says so in its stamp and is prepared again, never used as is.
//!
//! The file is created with `openat(O_CREAT|O_EXCL|O_NOFOLLOW)` in a directory held open, kept
//! open for the whole run (all I/O goes through that descriptor), and removed with `unlinkat`
//! only while the name still refers to the same inode: renaming a symlink over the name while
//! iocurve works redirects nothing and deletes nothing.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::TargetError;
use iocurve_data::data::{DataGen, Pool};
use iocurve_data::rng::Rng;

/// Bytes after the data that hold the stamp.
pub const STAMP_LEN: u64 = 4096;
const MAGIC: &[u8; 16] = b"iocurve-scratch\n";
const VERSION: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Created, not yet fully written: a killed run leaves this.
    Preparing = 1,
    /// Every data block written once.
    Ready = 2,
}

/// What an existing file is, judged by its stamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// No iocurve stamp: a file iocurve did not create.
    NotScratch,
    /// An iocurve stamp that no longer fits the file (copied, replaced, resized).
    Stale(String),
    /// iocurve's scratch file of `size` data bytes.
    Scratch { size: u64, state: State },
}

fn checksum(bytes: &[u8]) -> u64 {
    // FNV-1a: detects a damaged stamp; not a defence against forgery (whoever can write the
    // file can write its data too).
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ *b as u64).wrapping_mul(0x100_0000_01b3))
}

fn stamp_bytes(state: State, size: u64, dev: u64, ino: u64) -> Vec<u8> {
    let mut b = vec![0u8; STAMP_LEN as usize];
    b[..16].copy_from_slice(MAGIC);
    b[16..20].copy_from_slice(&VERSION.to_le_bytes());
    b[20..24].copy_from_slice(&(state as u32).to_le_bytes());
    b[24..32].copy_from_slice(&size.to_le_bytes());
    b[32..40].copy_from_slice(&dev.to_le_bytes());
    b[40..48].copy_from_slice(&ino.to_le_bytes());
    let sum = checksum(&b[..48]);
    b[48..56].copy_from_slice(&sum.to_le_bytes());
    b
}

/// Runs `f` with O_DIRECT off on `file` (the stamp is small and unaligned), restoring it after.
fn buffered<T>(file: &File, f: impl FnOnce() -> std::io::Result<T>) -> std::io::Result<T> {
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor the caller owns.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || flags & libc::O_DIRECT == 0 {
        return f();
    }
    crate::fdctl::set_direct(fd, false)?;
    let r = f();
    crate::fdctl::set_direct(fd, true)?;
    r
}

/// Reads the stamp of an open file and says whether it is iocurve's scratch file.
pub fn identify(file: &File) -> std::io::Result<Identity> {
    buffered(file, || identify_buffered(file))
}

fn identify_buffered(file: &File) -> std::io::Result<Identity> {
    use std::os::unix::fs::FileExt;
    let meta = file.metadata()?;
    let len = meta.len();
    if len < STAMP_LEN * 2 {
        return Ok(Identity::NotScratch);
    }
    let mut b = vec![0u8; 64];
    file.read_exact_at(&mut b, len - STAMP_LEN)?;
    if &b[..16] != MAGIC {
        return Ok(Identity::NotScratch);
    }
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
    if u32_at(16) != VERSION || u64_at(48) != checksum(&b[..48]) {
        return Ok(Identity::Stale("its iocurve stamp is damaged".into()));
    }
    let (size, dev, ino) = (u64_at(24), u64_at(32), u64_at(40));
    if (dev, ino) != (meta.dev(), meta.ino()) {
        return Ok(Identity::Stale("its iocurve stamp belongs to another file (it was copied or replaced)".into()));
    }
    if size.checked_add(STAMP_LEN) != Some(len) {
        return Ok(Identity::Stale(format!(
            "it was resized: iocurve created it with {size} data bytes, it now has {}",
            len.saturating_sub(STAMP_LEN)
        )));
    }
    let state = match u32_at(20) {
        1 => State::Preparing,
        2 => State::Ready,
        s => return Ok(Identity::Stale(format!("its iocurve stamp has an unknown state {s}"))),
    };
    Ok(Identity::Scratch { size, state })
}

/// Writes the stamp (and makes it durable) for a file of `size` data bytes.
pub fn write_stamp(file: &File, size: u64, state: State) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let meta = file.metadata()?;
    buffered(file, || file.write_all_at(&stamp_bytes(state, size, meta.dev(), meta.ino()), size))?;
    file.sync_data()
}

/// The directory and name a scratch file was created under, held for removal.
#[derive(Debug)]
pub struct Name {
    dir: OwnedFd,
    name: OsString,
}

/// Opens `dir` as a directory (following symlinks in it, as the user named it).
pub fn open_dir(dir: &Path) -> std::io::Result<OwnedFd> {
    let c = CString::new(dir.as_os_str().as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: valid C string; the fd is owned right away.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Creates `name` in `dir` exclusively, never through a symlink.
pub fn create_in(dir: OwnedFd, name: &OsStr) -> std::io::Result<(File, Name)> {
    let c = CString::new(name.as_bytes()).map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: valid directory fd and C string; the fd is owned right away.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_RDWR | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    Ok((file, Name { dir, name: name.to_os_string() }))
}

impl Name {
    /// The name of an existing file at `path`, for [`Name::remove`] (a scratch file kept by an
    /// earlier run, replaced by this one).
    pub fn of(path: &Path) -> std::io::Result<Name> {
        let (Some(name), Some(dir)) = (path.file_name(), path.parent()) else {
            return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
        };
        let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
        Ok(Name { dir: open_dir(dir)?, name: name.to_os_string() })
    }

    /// Removes the name if it still refers to `file`; otherwise leaves it and says why.
    pub fn remove(&self, file: &File) -> Result<(), String> {
        let Ok(c) = CString::new(self.name.as_bytes()) else {
            return Err("invalid name".into());
        };
        let Ok(meta) = file.metadata() else {
            return Err("cannot inspect the open scratch file".into());
        };
        // SAFETY: zeroed stat is a valid out-buffer; valid fd and string.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstatat writes only into `st`; the directory descriptor and the C string are valid.
        let r = unsafe { libc::fstatat(self.dir.as_raw_fd(), c.as_ptr(), &mut st, libc::AT_SYMLINK_NOFOLLOW) };
        if r != 0 {
            return Err(format!("{} is gone already", self.name.to_string_lossy()));
        }
        if (st.st_dev as u64, st.st_ino as u64) != (meta.dev(), meta.ino()) {
            return Err(format!(
                "{} now names another file (it was replaced during the run); left in place",
                self.name.to_string_lossy()
            ));
        }
        // SAFETY: valid fd and string.
        if unsafe { libc::unlinkat(self.dir.as_raw_fd(), c.as_ptr(), 0) } != 0 {
            return Err(format!("cannot remove {}: {}", self.name.to_string_lossy(), std::io::Error::last_os_error()));
        }
        Ok(())
    }
}

/// Sizes a new scratch file: `size` data bytes plus the stamp, stamped as preparing.
pub fn allocate(file: &File, size: u64) -> std::io::Result<()> {
    // SAFETY: fallocate on an fd we own; where unsupported, set_len makes the size.
    unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, (size + STAMP_LEN) as libc::off_t) };
    file.set_len(size + STAMP_LEN)?;
    write_stamp(file, size, State::Preparing)
}

/// Writes every data block once with unique, incompressible data (so reads hit allocated
/// blocks, not holes, and no sector repeats), then stamps the file ready. Stops early when
/// `cancel` is set.
pub fn fill(file: &File, size: u64, cancel: Option<&AtomicBool>) -> Result<(), FillError> {
    let fd: RawFd = file.as_raw_fd();
    // Prefer O_DIRECT so preparing 1 GiB does not evict the page cache; fall back to buffered.
    // Failure is fine (tmpfs): the data goes through the page cache and is synced below.
    let _ = crate::fdctl::set_direct(fd, true);
    const CHUNK: usize = 8 << 20;
    let mut pool = iocurve_data::buffer::BufferPool::new(1, CHUNK);
    let buf = pool.slice_mut(0);
    // The engine's own fresh, unique, incompressible data: no sector of a scratch file repeats.
    let mut rng = Rng::seed_from(size ^ fd as u64);
    let pattern = iocurve_plan::DataPattern::default();
    let mut data = DataGen::new(&pattern, 4096, Pool::shared(), &mut rng).untagged();
    let mut off = 0u64;
    while off < size {
        if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(FillError::Cancelled);
        }
        let n = CHUNK.min((size - off) as usize);
        data.fill(&mut buf[..n], off, &mut rng);
        crate::fullio::write_all_at(fd, &buf[..n], off).map_err(|e| FillError::Io("write", e))?;
        off += n as u64;
    }
    crate::fdctl::set_direct(fd, false).map_err(|e| FillError::Io("reset flags of", e))?;
    file.sync_data().map_err(|e| FillError::Io("sync", e))?;
    write_stamp(file, size, State::Ready).map_err(|e| FillError::Io("stamp", e))
}

#[derive(Debug)]
pub enum FillError {
    Cancelled,
    Io(&'static str, std::io::Error),
}

impl FillError {
    pub fn into_engine(self, path: &Path) -> TargetError {
        match self {
            FillError::Cancelled => TargetError::Input(format!(
                "preparing scratch file {} was cancelled (the coordinator is gone or the run was interrupted)",
                path.display()
            )),
            FillError::Io(what, e) => TargetError::io(format!("cannot {what} scratch file {}", path.display()), e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_file(dir: &Path, name: &str) -> (File, Name) {
        create_in(open_dir(dir).unwrap(), OsStr::new(name)).unwrap()
    }

    #[test]
    fn a_stamped_file_is_recognised_until_copied_resized_or_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let (f, _n) = new_file(dir.path(), "s");
        allocate(&f, 1 << 20).unwrap();
        assert_eq!(identify(&f).unwrap(), Identity::Scratch { size: 1 << 20, state: State::Preparing });
        fill(&f, 1 << 20, None).unwrap();
        assert_eq!(identify(&f).unwrap(), Identity::Scratch { size: 1 << 20, state: State::Ready });

        let p = dir.path().join("s");
        std::fs::copy(&p, dir.path().join("copy")).unwrap();
        let copy = File::open(dir.path().join("copy")).unwrap();
        assert!(matches!(identify(&copy).unwrap(), Identity::Stale(r) if r.contains("copied")));

        f.set_len((1 << 20) + STAMP_LEN + 4096).unwrap();
        assert_eq!(identify(&f).unwrap(), Identity::NotScratch, "the stamp is no longer the last block");

        let plain = dir.path().join("plain");
        std::fs::write(&plain, vec![1u8; 1 << 20]).unwrap();
        assert_eq!(identify(&File::open(&plain).unwrap()).unwrap(), Identity::NotScratch);
    }

    #[test]
    fn a_prepared_scratch_file_repeats_no_sector() {
        let dir = tempfile::tempdir().unwrap();
        let (f, _n) = new_file(dir.path(), "s");
        let size = 24u64 << 20; // three 8 MiB preparation writes
        allocate(&f, size).unwrap();
        fill(&f, size, None).unwrap();
        let data = std::fs::read(dir.path().join("s")).unwrap();
        let sectors: std::collections::HashSet<&[u8]> = data[..size as usize].chunks(512).collect();
        assert_eq!(sectors.len() as u64, size / 512, "every 512-byte sector unique");
    }

    #[test]
    fn removal_only_takes_the_same_inode() {
        let dir = tempfile::tempdir().unwrap();
        let (f, n) = new_file(dir.path(), "s");
        let p = dir.path().join("s");
        // Someone swaps the name for a symlink: removal leaves the symlink alone.
        std::fs::rename(&p, dir.path().join("moved")).unwrap();
        std::os::unix::fs::symlink("/dev/null", &p).unwrap();
        let e = n.remove(&f).unwrap_err();
        assert!(e.contains("another file"), "{e}");
        assert!(std::fs::symlink_metadata(&p).unwrap().file_type().is_symlink());

        let (g, m) = new_file(dir.path(), "t");
        m.remove(&g).unwrap();
        assert!(!dir.path().join("t").exists());
    }

    #[test]
    fn creation_never_follows_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        std::fs::write(&target, b"precious").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("s")).unwrap();
        let e = create_in(open_dir(dir.path()).unwrap(), OsStr::new("s")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EEXIST));
        assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    }
}
