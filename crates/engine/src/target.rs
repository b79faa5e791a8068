//! Targets: resolving paths and globs, creating scratch files, opening with O_DIRECT, sizing.
//!
//! Two phases, as in ripgrep: the plan holds paths as typed; [`TargetSet::open`] resolves them
//! (globs expanded, scratch files created, devices sized, safety checked) before any step runs.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use iocurve_plan::{TargetGroup, format_size};

use crate::EngineError;
use crate::rng::Rng;
use crate::safety;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    File,
    BlockDevice,
}

impl TargetKind {
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::File => "file",
            TargetKind::BlockDevice => "block device",
        }
    }
}

#[derive(Debug)]
pub struct Target {
    pub path: PathBuf,
    pub file: File,
    pub kind: TargetKind,
    pub size: u64,
    /// Smallest offset/length granularity for O_DIRECT on this target.
    pub logical_block: u64,
    /// Index into [`TargetSet::groups`].
    pub group: usize,
    /// Created by this run (removed at the end unless kept).
    pub created: bool,
}

impl Target {
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

#[derive(Debug, Clone)]
pub struct Group {
    pub name: String,
    pub weight: u32,
    /// Indices into [`TargetSet::targets`].
    pub members: Vec<usize>,
}

#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Some workload writes: open read-write and apply the safety rules.
    pub write: bool,
    /// Size of scratch files created for paths that do not exist.
    pub scratch_size: u64,
    /// Keep created scratch files after the run.
    pub keep: bool,
    /// Paths the user allows writing to despite the safety rules.
    pub allow_write: Vec<PathBuf>,
    /// Create scratch files allocated but not written: preconditioning writes them anyway.
    pub scratch_unfilled: bool,
}

#[derive(Debug)]
pub struct TargetSet {
    pub targets: Vec<Target>,
    pub groups: Vec<Group>,
    keep: bool,
}

fn is_glob(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

impl TargetSet {
    pub fn open(groups: &[TargetGroup], opts: &OpenOptions) -> Result<TargetSet, EngineError> {
        if groups.is_empty() {
            return Err(EngineError::Input(
                "no targets: give --target PATH (a file, device or glob) or `targets` in the plan".into(),
            ));
        }
        let mut set = TargetSet { targets: Vec::new(), groups: Vec::new(), keep: opts.keep };
        for (gi, g) in groups.iter().enumerate() {
            let mut members = Vec::new();
            for pattern in &g.targets {
                for path in expand(pattern, &g.name)? {
                    if let Some(dup) = set.targets.iter().find(|t| same_file(&t.path, &path)) {
                        return Err(EngineError::Input(format!(
                            "target {} is named twice ({} and {}): each target may appear once",
                            path.display(),
                            dup.path.display(),
                            pattern
                        )));
                    }
                    // Pushed first so that a later error still removes a scratch file created here.
                    let created = if path.exists() {
                        false
                    } else {
                        create_scratch(&path, opts.scratch_size, !opts.scratch_unfilled)?;
                        true
                    };
                    let t = match open_target(&path, opts, gi, created) {
                        Ok(t) => t,
                        Err(e) => {
                            if created {
                                let _ = std::fs::remove_file(&path);
                            }
                            return Err(e);
                        }
                    };
                    members.push(set.targets.len());
                    set.targets.push(t);
                }
            }
            set.groups.push(Group { name: g.name.clone(), weight: g.weight, members });
        }
        Ok(set)
    }

    /// Switches O_DIRECT on or off for every target (between steps, never with I/O in flight).
    pub fn set_direct(&self, direct: bool) -> Result<(), EngineError> {
        for t in &self.targets {
            set_direct(t.fd(), direct).map_err(|e| {
                let hint = if direct {
                    ": the filesystem may not support O_DIRECT (tmpfs does not); use --buffered"
                } else {
                    ""
                };
                EngineError::io(
                    format!(
                        "cannot {} O_DIRECT on {}{hint}",
                        if direct { "enable" } else { "disable" },
                        t.path.display()
                    ),
                    e,
                )
            })?;
        }
        Ok(())
    }

    /// Largest logical block size among the targets.
    pub fn logical_block(&self) -> u64 {
        self.targets.iter().map(|t| t.logical_block).max().unwrap_or(512)
    }
}

impl Drop for TargetSet {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for t in self.targets.iter().filter(|t| t.created) {
            let _ = std::fs::remove_file(&t.path);
        }
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => a == b,
    }
}

/// Expands a glob (sorted), or returns a plain path as is.
fn expand(pattern: &str, group: &str) -> Result<Vec<PathBuf>, EngineError> {
    if !is_glob(pattern) {
        let p = PathBuf::from(pattern);
        if !p.exists() {
            if pattern.starts_with("/dev/") {
                return Err(EngineError::Input(format!(
                    "target {pattern} does not exist: no such device (check the name with `lsblk`)"
                )));
            }
            let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !parent.is_dir() {
                return Err(EngineError::Input(format!(
                    "target {pattern} does not exist and cannot be created as a scratch file: directory {} does not exist",
                    parent.display()
                )));
            }
        }
        return Ok(vec![p]);
    }
    let paths =
        glob::glob(pattern).map_err(|e| EngineError::Input(format!("target glob `{pattern}` is invalid: {e}")))?;
    let mut out: Vec<PathBuf> = paths.filter_map(Result::ok).collect();
    out.sort();
    if out.is_empty() {
        return Err(EngineError::Input(format!("target glob `{pattern}` (group {group}) matches nothing")));
    }
    Ok(out)
}

/// Switches O_DIRECT on or off for one descriptor.
pub fn set_direct(fd: RawFd, direct: bool) -> std::io::Result<()> {
    // SAFETY: plain fcntl on an fd we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let new = if direct { flags | libc::O_DIRECT } else { flags & !libc::O_DIRECT };
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, new) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn open_target(path: &Path, opts: &OpenOptions, group: usize, created: bool) -> Result<Target, EngineError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| EngineError::Input(format!("cannot inspect target {}: {e}", path.display())))?;
    let kind = if meta.file_type().is_block_device() {
        TargetKind::BlockDevice
    } else if meta.is_file() {
        TargetKind::File
    } else {
        return Err(EngineError::Input(format!(
            "target {} is neither a regular file nor a block device",
            path.display()
        )));
    };
    if opts.write {
        safety::check_write(path, &opts.allow_write, created)?;
    }
    let mut oo = std::fs::OpenOptions::new();
    oo.read(true).write(opts.write);
    if opts.write && kind == TargetKind::BlockDevice && !safety::is_allowed(path, &opts.allow_write) {
        // O_EXCL on a block device claims it: the kernel refuses if it is mounted or held, and
        // nobody can mount it while we write.
        oo.custom_flags(libc::O_EXCL);
    }
    let file = oo.open(path).map_err(|e| {
        let mode = if opts.write { "reading and writing" } else { "reading" };
        let hint = match e.raw_os_error() {
            Some(libc::EBUSY) => " (it is in use: mounted or held by another driver)",
            Some(libc::EACCES) | Some(libc::EPERM) => " (permission denied: run as a user who may open it)",
            Some(libc::EROFS) => " (read-only: use a read-only workload, e.g. --workload read)",
            _ => "",
        };
        EngineError::Input(format!("cannot open target {} for {mode}: {e}{hint}", path.display()))
    })?;
    let (size, logical_block) = match kind {
        TargetKind::BlockDevice => (device_size(&file, path)?, device_logical_block(&file)),
        TargetKind::File => (meta.len(), file_dio_align(path)),
    };
    if size < logical_block.max(4096) {
        return Err(EngineError::Input(format!(
            "target {} is too small ({} bytes): it needs at least 4 KiB",
            path.display(),
            size
        )));
    }
    Ok(Target { path: path.to_path_buf(), file, kind, size, logical_block, group, created })
}

fn device_size(file: &File, path: &Path) -> Result<u64, EngineError> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut size) };
    if r < 0 {
        return Err(EngineError::io(
            format!("cannot size block device {} (BLKGETSIZE64)", path.display()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(size)
}

// From <linux/fs.h>: _IOR(0x12, 114, size_t) and _IO(0x12, 104).
const BLKGETSIZE64: libc::c_ulong = 0x8008_1272;
const BLKSSZGET: libc::c_ulong = 0x1268;

fn device_logical_block(file: &File) -> u64 {
    let mut ssz: libc::c_int = 0;
    // SAFETY: BLKSSZGET writes one int.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), BLKSSZGET, &mut ssz) };
    if r < 0 || ssz <= 0 { 512 } else { ssz as u64 }
}

/// O_DIRECT offset alignment of a file (statx STATX_DIOALIGN, Linux 6.1+); 512 if unknown.
fn file_dio_align(path: &Path) -> u64 {
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else {
        return 512;
    };
    // SAFETY: zeroed statx is a valid out-buffer.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    const STATX_DIOALIGN: u32 = 0x2000;
    // SAFETY: valid path and out-buffer.
    let r = unsafe { libc::statx(libc::AT_FDCWD, c_path.as_ptr(), 0, STATX_DIOALIGN, &mut stx) };
    if r == 0 && stx.stx_mask & STATX_DIOALIGN != 0 && stx.stx_dio_offset_align > 0 {
        stx.stx_dio_offset_align as u64
    } else {
        512
    }
}

/// Free bytes on the filesystem holding `dir`.
pub fn free_space(dir: &Path) -> Option<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: zeroed statvfs is a valid out-buffer.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: valid path and out-buffer.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    Some(s.f_bavail as u64 * s.f_frsize as u64)
}

/// Creates a scratch file of `size` bytes and writes every block once (incompressible, unique
/// data), so that reads hit allocated blocks rather than holes the filesystem answers with zeros.
pub fn create_scratch(path: &Path, size: u64, fill: bool) -> Result<(), EngineError> {
    let size = size / 4096 * 4096;
    if size < 4096 {
        return Err(EngineError::Input(format!("scratch file size {size} is too small: use --size 64m or more")));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Some(free) = free_space(dir)
        && free < size
    {
        return Err(EngineError::Input(format!(
            "not enough space for scratch file {} of {}: {} free in {}; use a smaller --size",
            path.display(),
            format_size(size),
            format_size(free / 1048576 * 1048576),
            dir.display()
        )));
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| EngineError::Input(format!("cannot create scratch file {}: {e}", path.display())))?;
    let result = if fill { fill_scratch(&file, path, size) } else { allocate_scratch(&file, path, size) };
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result
}

/// A scratch file of `size` with its blocks allocated (preconditioning writes them all).
fn allocate_scratch(file: &File, path: &Path, size: u64) -> Result<(), EngineError> {
    // SAFETY: fallocate on an fd we own; where unsupported, set_len makes the size.
    unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, size as libc::off_t) };
    file.set_len(size).map_err(|e| EngineError::io(format!("cannot size scratch file {}", path.display()), e))?;
    safety::set_scratch_mark(path);
    Ok(())
}

fn fill_scratch(file: &File, path: &Path, size: u64) -> Result<(), EngineError> {
    let fail = |what: &str, e| EngineError::io(format!("cannot {what} scratch file {}", path.display()), e);
    // SAFETY: fallocate on an fd we own. Failure (unsupported fs) is fine: we write it all anyway.
    unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, size as libc::off_t) };
    // Prefer O_DIRECT so preparing 1 GiB does not evict the page cache; fall back to buffered.
    let direct = set_direct(file.as_raw_fd(), true).is_ok();
    const CHUNK: usize = 8 << 20;
    let mut pool = crate::buffer::BufferPool::new(1, CHUNK);
    let buf = pool.slice_mut(0);
    let mut rng = Rng::seed_from(size);
    rng.fill(buf);
    let mut off = 0u64;
    while off < size {
        let n = CHUNK.min((size - off) as usize);
        // Unique data: restamp the head of every 4 KiB unit per chunk (no accidental dedupe).
        for unit in buf[..n].chunks_mut(4096) {
            unit[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        let mut done = 0;
        while done < n {
            // SAFETY: buffer is valid for n bytes.
            let r = unsafe {
                libc::pwrite(
                    file.as_raw_fd(),
                    buf[done..n].as_ptr().cast(),
                    n - done,
                    (off + done as u64) as libc::off_t,
                )
            };
            if r < 0 {
                return Err(fail("write", std::io::Error::last_os_error()));
            }
            done += r as usize;
        }
        off += n as u64;
    }
    if !direct {
        file.sync_all().map_err(|e| fail("sync", e))?;
    }
    set_direct(file.as_raw_fd(), false).map_err(|e| fail("reset flags of", e))?;
    safety::set_scratch_mark(path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scratch_file_is_created_filled_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("scratch");
        let groups = vec![TargetGroup { name: "g".into(), weight: 1, targets: vec![p.display().to_string()] }];
        let opts = OpenOptions { write: true, scratch_size: 1 << 20, ..Default::default() };
        {
            let set = TargetSet::open(&groups, &opts).unwrap();
            assert_eq!(set.targets[0].size, 1 << 20);
            assert!(set.targets[0].created);
            let data = std::fs::read(&p).unwrap();
            let zero_units = data.chunks(4096).filter(|u| u.iter().all(|b| *b == 0)).count();
            assert_eq!(zero_units, 0, "every block was written");
        }
        assert!(!p.exists(), "scratch file removed");
    }

    #[test]
    fn missing_glob_and_device_are_clear_errors() {
        let groups = |t: &str| vec![TargetGroup { name: "g".into(), weight: 1, targets: vec![t.into()] }];
        let e = TargetSet::open(&groups("/nonexistent-dir-xyz/*.dat"), &OpenOptions::default()).unwrap_err();
        assert!(e.to_string().contains("matches nothing"), "{e}");
        let e = TargetSet::open(&groups("/dev/iocurve-no-such-dev"), &OpenOptions::default()).unwrap_err();
        assert!(e.to_string().contains("no such device"), "{e}");
        let e = TargetSet::open(&groups("/nonexistent-dir-xyz/f"), &OpenOptions::default()).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        assert!(e.is_input_error());
    }
}
