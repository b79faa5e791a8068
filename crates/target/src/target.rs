//! Targets: resolving paths and globs, creating scratch files, opening, sizing.
//!
//! Two phases, as in ripgrep: the plan holds paths as typed; [`TargetSet::open`] resolves them
//! (globs expanded, scratch files created, devices sized, safety checked) before any step runs.
//! Identity, not names: each target is resolved once, checked and used through the same open
//! descriptor (see [`crate::safety`] and [`crate::scratch`]).

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use iocurve_plan::{TargetGroup, format_size};

use crate::TargetError;
use crate::device::fsid;
use crate::safety::confine::{self, Confinement};
use crate::safety::{self, Verdict};
use crate::scratch;

pub use crate::fdctl::{free_space, set_direct};

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
    /// The path as the user named it (or as a glob expanded).
    pub path: PathBuf,
    /// The one descriptor every check and every I/O goes through.
    pub file: File,
    pub kind: TargetKind,
    /// Bytes I/O may touch (a scratch file's stamp block lies beyond).
    pub size: u64,
    /// Smallest offset/length granularity for O_DIRECT on this target.
    pub logical_block: u64,
    /// Index into [`TargetSet::groups`].
    pub group: usize,
    /// Created by this run (removed at the end unless kept).
    pub created: bool,
    /// A scratch file created by this run or left half-prepared by an earlier one: no earlier
    /// record about this path (a finished preconditioning) applies to it.
    pub fresh: bool,
    /// Where a scratch file this run created is named, for removal as the same inode.
    scratch_name: Option<scratch::Name>,
    /// The other paths to a written block device's LUN (device numbers), checked again before
    /// every writing step ([`Target::lun_in_use`]).
    other_paths: Vec<u64>,
}

impl Drop for Target {
    /// Removes a scratch file this run created (unless kept), also when opening a later
    /// target fails.
    fn drop(&mut self) {
        if let Some(name) = self.scratch_name.take()
            && let Err(why) = name.remove(&self.file)
        {
            tracing::warn!("scratch file {}: {why}", self.path.display());
        }
    }
}

impl Target {
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// What this target is, whatever path names it (shared/DESIGN.md "target identity"): a
    /// file by its filesystem and inode; a block device by its WWID (or device-mapper UUID)
    /// where it has one, a partition by its disk's and its number, a loop device by its backing
    /// file; else by device number and size. A verification map keeps it, so that
    /// `iocurve verify` finds the target under another name (`/dev/sdb` after a reboot that
    /// named it `/dev/sdc`, a by-id path).
    pub fn identity_key(&self) -> Option<String> {
        let m = self.file.metadata().ok()?;
        if self.kind != TargetKind::BlockDevice {
            return Some(format!("file {} inode {}", fsid(&self.file)?, m.ino()));
        }
        let (major, minor) = (libc::major(m.rdev()), libc::minor(m.rdev()));
        crate::device::Sysfs::system()
            .lun(major, minor)
            .or_else(|| Some(format!("device {major}:{minor} of {} bytes", self.size)))
    }

    /// The block device whose queue takes this target's I/Os: the device itself, or the one
    /// holding a file's filesystem (as (major, minor, of a filesystem)). None: a filesystem
    /// without a block device (tmpfs, NFS, FUSE).
    fn block_device(&self) -> Option<(u32, u32, bool)> {
        let m = self.file.metadata().ok()?;
        let (dev, fs) = if self.kind == TargetKind::BlockDevice { (m.rdev(), false) } else { (m.dev(), true) };
        Some((libc::major(dev), libc::minor(dev), fs))
    }

    /// Its block device's name and queue limits (issue 42). None: no block device under it.
    pub fn device_queue(&self) -> Option<iocurve_stats::DeviceQueue> {
        let (major, minor, fs) = self.block_device()?;
        crate::device::Sysfs::system().queue(major, minor, fs)
    }

    /// Why this written block device's LUN is in use through another path now (mounted, swap,
    /// held by a holder device since the run began); empty when it is not.
    pub fn lun_in_use(&self) -> Vec<String> {
        self.other_paths
            .iter()
            .flat_map(|&rdev| {
                let name = format!("{}:{}", libc::major(rdev), libc::minor(rdev));
                crate::safety::inuse::device_in_use(rdev, false)
                    .into_iter()
                    .map(move |r| format!("through device {name}, {}", r.trim_start_matches("it ")))
            })
            .collect()
    }

    /// The sysfs directory of a block device target (`/sys/dev/block/MAJ:MIN`); None for a file.
    fn sysfs(&self) -> Option<PathBuf> {
        let m = self.file.metadata().ok()?;
        (self.kind == TargetKind::BlockDevice)
            .then(|| PathBuf::from(format!("/sys/dev/block/{}:{}", libc::major(m.rdev()), libc::minor(m.rdev()))))
    }

    /// Whether this target takes trims, and in what granules: Some(`discard_granularity`) for a
    /// block device (whose trims are discards), None for a file (whose trims are punched holes,
    /// of any size). Err says why it cannot trim.
    pub fn trim_granule(&self) -> Result<Option<u64>, String> {
        self.can_punch_holes()?;
        self.discard().transpose()
    }

    /// How a block device discards: its `discard_granularity` from its queue (a partition's is
    /// its disk's). Err says why it cannot: a device whose `discard_max_bytes` is 0 cannot
    /// discard at all. None for a file.
    fn discard(&self) -> Option<Result<u64, String>> {
        let sys = self.sysfs()?;
        let queue = if sys.join("partition").exists() { sys.join("../queue") } else { sys.join("queue") };
        let read = |name: &str| {
            let p = queue.join(name);
            std::fs::read_to_string(&p)
                .map_err(|e| format!("cannot read {}: {e}", p.display()))?
                .trim()
                .parse::<u64>()
                .map_err(|e| format!("{}: {e}", p.display()))
        };
        Some((|| {
            let (gran, max) = (read("discard_granularity")?, read("discard_max_bytes")?);
            if max == 0 {
                return Err(format!(
                    "{} cannot discard: its discard_max_bytes is 0 (the device, or the path to it, takes no trims)",
                    self.path.display()
                ));
            }
            Ok(gran.max(self.logical_block).max(1))
        })())
    }

    /// Marks a scratch file as not prepared again (its stamp back to preparing): trims gave its
    /// blocks back, so reads would no longer hit allocated blocks. Other targets are left alone.
    pub fn mark_unprepared(&self) -> Result<(), TargetError> {
        if self.kind != TargetKind::File {
            return Ok(());
        }
        let fail = |e| TargetError::io(format!("cannot stamp scratch file {}", self.path.display()), e);
        if let scratch::Identity::Scratch { size, state: scratch::State::Ready } =
            scratch::identify(&self.file).map_err(fail)?
        {
            scratch::write_stamp(&self.file, size, scratch::State::Preparing).map_err(fail)?;
        }
        Ok(())
    }

    /// Whether a file target's file system punches holes (its trims): asked by punching one past
    /// the file's end, which changes nothing. Ok for a block device (see [`Target::discard`]).
    fn can_punch_holes(&self) -> Result<(), String> {
        if self.kind != TargetKind::File {
            return Ok(());
        }
        let len = self.file.metadata().map_err(|e| format!("cannot stat {}: {e}", self.path.display()))?.len();
        let past = len.next_multiple_of(4096) + 4096;
        // SAFETY: fallocate takes plain integers; the range lies past the end (KEEP_SIZE).
        let r = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                past as libc::off_t,
                4096,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        Err(format!(
            "the file system of {} cannot punch holes ({e}), and a file's trims are punched holes: use a file on a file system that can (ext4, xfs, btrfs, tmpfs) or a block device",
            self.path.display()
        ))
    }

    /// The file behind a loop device target (`loop/backing_file`): where its trims show as
    /// space given back. None for another device or a file.
    pub fn loop_backing_file(&self) -> Option<PathBuf> {
        let s = std::fs::read_to_string(self.sysfs()?.join("loop/backing_file")).ok()?;
        let s = s.trim();
        (!s.is_empty()).then(|| PathBuf::from(s))
    }

    /// Records in a scratch file's stamp that every block has been written (after a
    /// precondition pass over a file created unfilled); other targets are left alone.
    pub fn mark_prepared(&self) -> Result<(), TargetError> {
        if self.kind != TargetKind::File {
            return Ok(());
        }
        let fail = |e| TargetError::io(format!("cannot stamp scratch file {}", self.path.display()), e);
        if let scratch::Identity::Scratch { size, state: scratch::State::Preparing } =
            scratch::identify(&self.file).map_err(fail)?
        {
            scratch::write_stamp(&self.file, size, scratch::State::Ready).map_err(fail)?;
        }
        Ok(())
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
    /// Paths the user allows writing to despite the overridable safety rules.
    pub allow_write: Vec<PathBuf>,
    /// Create scratch files allocated but not written: preconditioning writes them anyway.
    pub scratch_unfilled: bool,
    /// An agent's allow list and scratch budget; None for a local run.
    pub confine: Option<Arc<Confinement>>,
    /// Set to stop preparing scratch files (the coordinator is gone, or Ctrl-C).
    pub cancel: Option<Arc<AtomicBool>>,
    /// A path that does not exist is an error, not a scratch file to create (reading back what
    /// was written).
    pub existing_only: bool,
    /// The run's key for the advisory lock on file targets it writes ([`safety::lock`]): the
    /// hosts of one run share it. 0: this process's own (a local run, `precondition`).
    pub run_key: u32,
    /// `scratch_size` is the size the user asked for (not a default): a kept scratch file of
    /// another size is made again at it.
    pub size_given: bool,
    /// How long the signature probe of a target to write may wait for its reads (the run's
    /// `--stuck-after-s`); None: [`safety::PROBE_DEADLINE`].
    pub stuck_after: Option<std::time::Duration>,
}

#[derive(Debug)]
pub struct TargetSet {
    pub targets: Vec<Target>,
    pub groups: Vec<Group>,
    /// What the user should know about the targets (reused or re-prepared scratch files).
    pub notes: Vec<String>,
    keep: bool,
}

use iocurve_plan::is_glob;

impl TargetSet {
    pub fn open(groups: &[TargetGroup], opts: &OpenOptions) -> Result<TargetSet, TargetError> {
        if groups.is_empty() {
            return Err(TargetError::Input(
                "no targets: give --target PATH (a file, device or glob) or `targets` in the plan".into(),
            ));
        }
        let mut set = TargetSet { targets: Vec::new(), groups: Vec::new(), notes: Vec::new(), keep: opts.keep };
        let mut openers = None;
        let mut sizing = ScratchSizing { files: scratch_files(groups), chosen: Vec::new() };
        // Every target's identity, to find one named twice: a hash set, not a scan of the
        // targets before it (1,024 targets made a million `statx` calls; 4,096 took 25 s).
        let mut seen: std::collections::HashMap<Identity, usize> = std::collections::HashMap::new();
        let cancelled = || opts.cancel.as_ref().is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed));
        // Every glob of the request draws on one budget (an agent's is the tighter).
        let mut walks = crate::walk::Budget::new(if opts.confine.is_some() {
            crate::walk::Bounds::AGENT
        } else {
            crate::walk::Bounds::LOCAL
        });
        for (gi, g) in groups.iter().enumerate() {
            let mut members = Vec::new();
            for pattern in &g.targets {
                for path in expand(pattern, &g.name, opts.confine.as_deref(), opts.cancel.as_deref(), &mut walks)? {
                    // Thousands of targets take a while: Ctrl-C (or a coordinator gone) stops
                    // between two.
                    if cancelled() {
                        return Err(TargetError::Input(
                            "opening the targets was cancelled (the coordinator is gone or the run was interrupted)"
                                .into(),
                        ));
                    }
                    // On an error the set drops, removing the scratch files created so far.
                    let t = open_one(&path, opts, gi, &mut set.notes, &mut openers, &mut sizing)?;
                    if let Some(id) = identity(&t.file) {
                        if let Some(&dup) = seen.get(&id) {
                            return Err(TargetError::Input(format!(
                                "target {} is named twice ({} and {}): each target may appear once",
                                path.display(),
                                set.targets[dup].path.display(),
                                pattern
                            )));
                        }
                        seen.insert(id, set.targets.len());
                    }
                    members.push(set.targets.len());
                    tracing::debug!(path = %t.path.display(), kind = t.kind.name(), size = t.size, logical_block = t.logical_block, scratch = t.created, group = %g.name, "target opened");
                    set.targets.push(t);
                }
            }
            set.groups.push(Group { name: g.name.clone(), weight: g.weight, members });
        }
        set.notes.extend(set.lun_notes());
        Ok(set)
    }

    /// Targets that are paths of one LUN (issue 42): several device nodes of one WWID, loop
    /// devices over one file. A glob over `/dev/sd*` names every path of a multipath LUN as a
    /// target of its own: the run drives each, and its per-LUN figures add them up.
    pub fn luns_of_several_paths(&self) -> Vec<(String, Vec<usize>)> {
        let mut by: Vec<(String, Vec<usize>)> = Vec::new();
        let mut at: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for (i, t) in self.targets.iter().enumerate().filter(|(_, t)| t.kind == TargetKind::BlockDevice) {
            let Some(id) = t.identity_key().filter(|k| !k.starts_with("device ")) else { continue };
            match at.get(&id) {
                Some(&k) => by[k].1.push(i),
                None => {
                    at.insert(id.clone(), by.len());
                    by.push((id, vec![i]));
                }
            }
        }
        by.retain(|b| b.1.len() > 1);
        by
    }

    /// Verification keeps a map per target, not per LUN: a block written through one path and
    /// read through another would look lost or misplaced. Err says which paths to drop.
    pub fn one_path_per_lun(&self) -> Result<(), String> {
        match self.luns_of_several_paths().into_iter().next() {
            None => Ok(()),
            Some((lun, paths)) => {
                let names: Vec<String> = paths.iter().map(|&i| self.targets[i].path.display().to_string()).collect();
                Err(format!(
                    "{} are paths of one LUN ({lun}): verification keeps a map per target, not per LUN; name one path of each LUN (or its multipath device)",
                    names.join(" and ")
                ))
            }
        }
    }

    fn lun_notes(&self) -> Vec<String> {
        self.luns_of_several_paths()
            .into_iter()
            .map(|(lun, paths)| {
                let names: Vec<String> = paths.iter().map(|&i| self.targets[i].path.display().to_string()).collect();
                format!(
                    "{} are {} paths of one LUN ({lun}): each is driven as a target of its own, and the per-LUN figures add them up; name one path (or the multipath device) to test the LUN through one",
                    names.join(", "),
                    names.len()
                )
            })
            .collect()
    }
    /// Switches O_DIRECT on or off for every target (between steps, never with I/O in flight).
    pub fn set_direct(&self, direct: bool) -> Result<(), TargetError> {
        for t in &self.targets {
            set_direct(t.fd(), direct).map_err(|e| {
                let hint = if direct {
                    ": the filesystem may not support O_DIRECT (tmpfs does not); use --buffered"
                } else {
                    ""
                };
                TargetError::io(
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

    /// Puts the targets in the order given (`order[i]`: the index of the target that goes
    /// `i`th), as a verification map lists them; the groups follow.
    pub fn reorder(&mut self, order: &[usize]) {
        let mut old: Vec<Option<Target>> = std::mem::take(&mut self.targets).into_iter().map(Some).collect();
        self.targets = order.iter().filter_map(|&j| old.get_mut(j).and_then(Option::take)).collect();
        for g in &mut self.groups {
            g.members = g.members.iter().filter_map(|m| order.iter().position(|&j| j == *m)).collect();
        }
    }

    /// Largest logical block size among the targets.
    pub fn logical_block(&self) -> u64 {
        self.targets.iter().map(|t| t.logical_block).max().unwrap_or(512)
    }
}

impl Drop for TargetSet {
    fn drop(&mut self) {
        // Each target removes its own scratch file when dropped; kept ones forget their name.
        if self.keep {
            self.targets.iter_mut().for_each(|t| t.scratch_name = None);
        }
    }
}

/// What makes two open targets one: a block device by its device number (two nodes of one
/// device are one target), anything else by filesystem and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Identity {
    Device(u64),
    Inode(u64, u64),
}

fn identity(f: &File) -> Option<Identity> {
    let m = f.metadata().ok()?;
    Some(if m.file_type().is_block_device() { Identity::Device(m.rdev()) } else { Identity::Inode(m.dev(), m.ino()) })
}

/// Expands a glob (sorted), or returns a plain path as is. An agent (`confined`) says nothing
/// about paths it may not use, so its messages do not tell what exists.
fn expand(
    pattern: &str,
    group: &str,
    confine: Option<&Confinement>,
    cancel: Option<&AtomicBool>,
    budget: &mut crate::walk::Budget,
) -> Result<Vec<PathBuf>, TargetError> {
    if !is_glob(pattern) {
        let p = PathBuf::from(pattern);
        if confine.is_none() && std::fs::symlink_metadata(&p).is_err() {
            if pattern.starts_with("/dev/") {
                return Err(TargetError::Input(format!(
                    "target {pattern} does not exist: no such device (check the name with `lsblk`)"
                )));
            }
            let parent = p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            if !parent.is_dir() {
                return Err(TargetError::Input(format!(
                    "target {pattern} does not exist and cannot be created as a scratch file: directory {} does not exist",
                    parent.display()
                )));
            }
        }
        return Ok(vec![p]);
    }
    let glob = crate::walk::Glob::parse(pattern)?;
    let base = match confine {
        // An agent walks only inside a directory its allow list names, from the directory the
        // kernel resolved, never through a symlink (issue 35, finding 1).
        Some(c) => c.glob_base(pattern, &glob.base)?,
        None => glob.base.clone(),
    };
    let mut out = crate::walk::walk(&glob, &base, budget, cancel).map_err(|stopped| match stopped {
        crate::walk::Stopped::Cancelled => TargetError::Input(format!(
            "expanding target glob `{pattern}` was cancelled (the coordinator is gone or the run was interrupted)"
        )),
        crate::walk::Stopped::Bound(bound) => TargetError::Input(format!(
            "target glob `{pattern}` was stopped at its bound of {bound}: a glob names targets, it does not search a filesystem; start it in the targets' own directory"
        )),
    })?;
    // Bounded: a glob is no way to walk a whole filesystem.
    const MAX_MATCHES: usize = 100_000;
    if out.len() > MAX_MATCHES {
        return Err(TargetError::Input(format!(
            "target glob `{pattern}` matches more than {MAX_MATCHES} paths: name the targets more narrowly"
        )));
    }
    if let Some(c) = confine {
        // An agent uses the matches inside its allow list and says nothing of the others.
        out.retain(|p| c.admits(p));
        if out.is_empty() {
            return Err(c.refuse(pattern));
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(TargetError::Input(format!("target glob `{pattern}` (group {group}) matches nothing")));
    }
    Ok(out)
}

/// Opens one target: an existing file or device through one descriptor that every check and
/// all I/O use, or a new scratch file.
/// `openers` is the scan of processes with devices open, made at the first device written.
fn open_one(
    path: &Path,
    opts: &OpenOptions,
    group: usize,
    notes: &mut Vec<String>,
    openers: &mut Option<safety::inuse::Openers>,
    sizing: &mut ScratchSizing,
) -> Result<Target, TargetError> {
    // Resolve without side effects first (O_PATH opens nothing: no tape rewinds, no claim):
    // the allow list is checked on what the kernel resolved, before the real open.
    let asked = path.display().to_string();
    // A confined agent answers anything it may not look at with the one refusal.
    let hide = |e: TargetError| match &opts.confine {
        Some(c) => c.refuse(&asked),
        None => e,
    };
    let probe = match open_raw(path, libc::O_PATH | libc::O_CLOEXEC) {
        Ok(fd) => fd,
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) && opts.existing_only => {
            return Err(hide(TargetError::Input(format!("target {asked} does not exist"))));
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return create_scratch_target(path, opts, group, sizing),
        Err(e) if out_of_room(&e) => return Err(host_limit(&format!("open target {asked}"), e)),
        Err(e) => return Err(hide(open_error(path, opts, e))),
    };
    let probe_meta = probe.metadata().map_err(|e| hide(open_error(path, opts, e)))?;
    if let Some(c) = &opts.confine {
        let canonical = confine::canonical_of(probe.as_raw_fd()).map_err(|_| c.refuse(&asked))?;
        c.check_opened(&asked, &canonical, probe_meta.nlink(), probe_meta.file_type().is_file())?;
    }
    let ft = probe_meta.file_type();
    let kind = if ft.is_block_device() {
        TargetKind::BlockDevice
    } else if ft.is_file() {
        TargetKind::File
    } else {
        return Err(TargetError::Input(format!("target {asked} is neither a regular file nor a block device")));
    };
    // The real open goes through the resolved descriptor (/proc/self/fd), so it is the same
    // object. Writing a block device is always exclusive: the kernel refuses a mounted or
    // held device and lets nobody mount it while iocurve writes.
    let mut flags = libc::O_CLOEXEC | if opts.write { libc::O_RDWR } else { libc::O_RDONLY };
    if opts.write && kind == TargetKind::BlockDevice {
        flags |= libc::O_EXCL;
    }
    let file = open_exclusive_retrying(path, &probe, flags, probe_meta.rdev(), opts)?;
    let meta = file.metadata().map_err(|e| open_error(path, opts, e))?;
    let same = if kind == TargetKind::BlockDevice {
        meta.rdev() == probe_meta.rdev()
    } else {
        (meta.dev(), meta.ino()) == (probe_meta.dev(), probe_meta.ino())
    };
    if !same {
        return Err(TargetError::Input(format!("target {} changed while it was opened; try again", path.display())));
    }
    // Before anything is written (a scratch file's preparation included): one writing run per
    // file. A reader goes on beside a writer, and says so.
    let key = safety::lock::RunKey::or_own(opts.run_key);
    let mut beside = None;
    if kind == TargetKind::File {
        if opts.write {
            safety::lock::lock_for_writing(&file, path, key, opts.confine.is_none())?;
        } else if let Some(h) = safety::lock::writer_beside(&file, key) {
            notes.push(format!(
                "target {} is being written by {}: this run only reads it, beside that one; its figures include the other run's load",
                path.display(),
                h.describe(opts.confine.is_none())
            ));
            beside = Some(h);
        }
    }
    let mut fresh = false;
    let mut other_paths = Vec::new();
    let (size, logical_block) = match kind {
        TargetKind::BlockDevice => {
            if opts.write {
                let openers = openers.get_or_insert_with(safety::inuse::Openers::scan);
                other_paths = safety::check_device(path, &file, &opts.allow_write, openers, probe_limits(opts))?.1;
            }
            (device_size(&file, path)?, device_logical_block(&file))
        }
        TargetKind::File => {
            let verdict = if opts.write {
                safety::check_file(path, &file, &opts.allow_write, probe_limits(opts))?
            } else {
                match scratch::identify(&file) {
                    Ok(scratch::Identity::Scratch { size, state }) => {
                        Verdict::Scratch { size, prepared: state == scratch::State::Ready }
                    }
                    _ => Verdict::Writable,
                }
            };
            // A kept scratch file of another size than the one asked for is made again at that
            // size, once nothing else uses it — no other run, none of this run's other hosts
            // (issue 36: it was reused silently, so a run asked for 10g measured the 1g left by
            // an earlier one).
            if let Verdict::Scratch { size: have, .. } = verdict
                && opts.size_given
                && opts.scratch_size != AUTO_SCRATCH_SIZE
                && have != opts.scratch_size / 4096 * 4096
                && beside.is_none()
                && safety::lock::alone(&file, key)
                && !opts.existing_only
            {
                let name = scratch::Name::of(path)
                    .map_err(|e| TargetError::io(format!("cannot replace scratch file {}", path.display()), e))?;
                name.remove(&file).map_err(|why| {
                    TargetError::Input(format!("cannot replace scratch file {} of another size: {why}", path.display()))
                })?;
                drop(file);
                notes.push(format!(
                    "scratch file {} held {}, not the {} asked for: made again at {}",
                    path.display(),
                    format_size(have),
                    format_size(opts.scratch_size),
                    format_size(opts.scratch_size / 4096 * 4096)
                ));
                return create_scratch_target(path, opts, group, sizing);
            }
            let size = match verdict {
                Verdict::Writable => meta.len(),
                Verdict::Scratch { size, prepared: true } => {
                    notes.push(format!(
                        "reusing scratch file {} ({}), kept or left by an earlier run",
                        path.display(),
                        format_size(size)
                    ));
                    size
                }
                Verdict::Scratch { size, prepared: false } if opts.scratch_unfilled => {
                    fresh = true;
                    notes.push(format!(
                        "scratch file {} is not written through (left by an interrupted preparation, trimmed by an earlier run, or kept from a null back-end run): used as it is; preconditioning writes every block",
                        path.display()
                    ));
                    size
                }
                Verdict::Scratch { size, prepared: false } => {
                    if !opts.write {
                        return Err(TargetError::Input(format!(
                            "scratch file {} is not written through (left by an interrupted preparation, trimmed by an earlier run, or kept from a null back-end run), so reads would find unwritten blocks: run a writing workload on it (it is prepared again) or remove it",
                            path.display()
                        )));
                    }
                    notes.push(format!(
                        "scratch file {} is not written through (left by an interrupted preparation, or trimmed by an earlier run): preparing it again ({})",
                        path.display(),
                        format_size(size)
                    ));
                    scratch::fill(&file, size, opts.cancel.as_deref()).map_err(|e| e.into_engine(path))?;
                    size
                }
            };
            (size, file_dio_align(&file))
        }
    };
    check_size(path, size, logical_block)?;
    Ok(Target {
        path: path.to_path_buf(),
        file,
        kind,
        size,
        logical_block,
        group,
        created: false,
        fresh,
        scratch_name: None,
        other_paths,
    })
}

/// How long and until what a signature probe of `opts`' targets may wait.
fn probe_limits(opts: &OpenOptions) -> safety::ProbeLimits<'_> {
    safety::ProbeLimits { deadline: opts.stuck_after, cancel: opts.cancel.as_deref() }
}

/// Opens the resolved target for I/O. A device whose exclusive open is refused while nothing
/// visible holds it (no mount, holder or swap) is tried again for up to two seconds: the last
/// run's io_uring may still hold it, since the kernel releases a ring's registered files
/// asynchronously after the ring is closed.
fn open_exclusive_retrying(
    path: &Path,
    probe: &File,
    flags: libc::c_int,
    rdev: u64,
    opts: &OpenOptions,
) -> Result<File, TargetError> {
    let resolved = PathBuf::from(format!("/proc/self/fd/{}", probe.as_raw_fd()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match open_raw(&resolved, flags) {
            Ok(f) => return Ok(f),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && flags & libc::O_EXCL != 0 => {
                if std::time::Instant::now() >= deadline || !safety::inuse::device_in_use(rdev, false).is_empty() {
                    return Err(safety::device_busy(path, rdev));
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) if out_of_room(&e) => return Err(host_limit(&format!("open target {}", path.display()), e)),
            Err(e) => return Err(open_error(path, opts, e)),
        }
    }
}

fn check_size(path: &Path, size: u64, logical_block: u64) -> Result<(), TargetError> {
    if size < logical_block.max(4096) {
        return Err(TargetError::Input(format!(
            "target {} is too small ({} bytes): it needs at least 4 KiB",
            path.display(),
            size
        )));
    }
    Ok(())
}

/// `open(2)` with raw flags; O_NONBLOCK keeps a FIFO from blocking the open (it is refused
/// right after as neither file nor device) and is cleared again.
fn open_raw(path: &Path, flags: libc::c_int) -> std::io::Result<File> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    let nonblock = if flags & libc::O_PATH == 0 { libc::O_NONBLOCK } else { 0 };
    // SAFETY: valid C string; the fd is owned right away.
    let fd = unsafe { libc::open(c.as_ptr(), flags | nonblock) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    if nonblock != 0 {
        // SAFETY: fcntl on the fd we own.
        unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

fn open_error(path: &Path, opts: &OpenOptions, e: std::io::Error) -> TargetError {
    let mode = if opts.write { "reading and writing" } else { "reading" };
    let hint = match e.raw_os_error() {
        Some(libc::EACCES) | Some(libc::EPERM) => " (permission denied: run as a user who may open it)",
        Some(libc::EROFS) => " (read-only: use a read-only workload, e.g. --workload read)",
        Some(libc::ETXTBSY) => " (it is in use as swap or by a running program)",
        _ => "",
    };
    TargetError::Input(format!("cannot open target {} for {mode}: {e}{hint}", path.display()))
}

/// The process ran out of descriptors or memory: nothing about the path, which a confined
/// agent may then say (it was the agent at its limit, not a target outside its list).
fn out_of_room(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM))
}

/// `what` could not be done (`open target PATH`, `create scratch file PATH`): the host's limit.
fn host_limit(what: &str, e: std::io::Error) -> TargetError {
    let raise = match e.raw_os_error() {
        Some(libc::EMFILE) => "raise the process's open-file limit, `ulimit -n`",
        Some(libc::ENFILE) => "the whole system's open files are at their limit, fs.file-max",
        _ => "the host is out of memory",
    };
    TargetError::io(format!("cannot {what}: this host is at its limit ({raise})"), e)
}

/// Creates, sizes and (unless preconditioning follows) fills a scratch file for `path`,
/// keeping its descriptor and directory for the whole run.
fn create_scratch_target(
    path: &Path,
    opts: &OpenOptions,
    group: usize,
    sizing: &mut ScratchSizing,
) -> Result<Target, TargetError> {
    let asked = path.display().to_string();
    let hide = |e: TargetError| match &opts.confine {
        Some(c) => c.refuse(&asked),
        None => e,
    };
    let named = path.file_name().zip(path.parent()).filter(|_| !asked.ends_with('/'));
    let Some((name, dir)) = named else {
        return Err(hide(TargetError::Input(format!(
            "target {asked} does not exist and does not name a file to create (a path ending in a file name)"
        ))));
    };
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let dir_fd = scratch::open_dir(dir).map_err(|e| {
        if out_of_room(&e) {
            return host_limit(&format!("create scratch file {asked}"), e);
        }
        hide(TargetError::Input(format!(
            "target {asked} does not exist and cannot be created as a scratch file: directory {}: {e}",
            dir.display()
        )))
    })?;
    let auto = opts.scratch_size == AUTO_SCRATCH_SIZE;
    let size = if auto { sizing.size_on(dir_fd.as_raw_fd()) } else { opts.scratch_size } / 4096 * 4096;
    let total = size.checked_add(scratch::STAMP_LEN).filter(|_| size >= 4096);
    if let Some(c) = &opts.confine {
        let canonical = confine::canonical_of(dir_fd.as_raw_fd()).map_err(|_| c.refuse(&asked))?;
        c.admit_scratch(&asked, &canonical, name, total.unwrap_or(u64::MAX))?;
    }
    if auto && size < MIN_SCRATCH_SIZE {
        return Err(TargetError::Input(format!(
            "not enough free space in {} for scratch file {asked} (its share of half the free space is {}, at least {} needed): free some space, give --size, or name an existing target",
            dir.display(),
            format_size(size),
            format_size(MIN_SCRATCH_SIZE)
        )));
    }
    let Some(total) = total else {
        return Err(TargetError::Input(format!(
            "scratch file size {} is out of range: use --size 64m or more (and less than the disk)",
            opts.scratch_size
        )));
    };
    if let Some(free) = free_space(dir)
        && free < total
    {
        return Err(TargetError::Input(format!(
            "not enough space for scratch file {} of {}: {} free in {}; use a smaller --size",
            path.display(),
            format_size(size),
            format_size(free / 1048576 * 1048576),
            dir.display()
        )));
    }
    let (file, scratch_name) = scratch::create_in(dir_fd, name).map_err(|e| {
        if out_of_room(&e) {
            return host_limit(&format!("create scratch file {asked}"), e);
        }
        let hint = if e.raw_os_error() == Some(libc::EEXIST) {
            " (a symlink or file appeared under that name; a dangling symlink is never followed)"
        } else {
            ""
        };
        TargetError::Input(format!("cannot create scratch file {asked}: {e}{hint}"))
    })?;
    // From here on the target owns the name: any error drops it and removes the file.
    let locked =
        safety::lock::lock_for_writing(&file, path, safety::lock::RunKey::or_own(opts.run_key), opts.confine.is_none());
    let t = Target {
        path: path.to_path_buf(),
        logical_block: file_dio_align(&file),
        file,
        kind: TargetKind::File,
        size,
        group,
        created: true,
        fresh: true,
        scratch_name: Some(scratch_name),
        other_paths: Vec::new(),
    };
    locked?;
    let prepared = scratch::allocate(&t.file, size)
        .map_err(|e| TargetError::io(format!("cannot size scratch file {}", path.display()), e))
        .and_then(|()| {
            if opts.scratch_unfilled {
                Ok(())
            } else {
                scratch::fill(&t.file, size, opts.cancel.as_deref()).map_err(|e| e.into_engine(path))
            }
        });
    prepared?;
    check_size(path, size, t.logical_block)?;
    Ok(t)
}

fn device_size(file: &File, path: &Path) -> Result<u64, TargetError> {
    let mut size: u64 = 0;
    // SAFETY: BLKGETSIZE64 writes one u64.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), BLKGETSIZE64, &mut size) };
    if r < 0 {
        return Err(TargetError::io(
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

/// O_DIRECT offset alignment of an open file (statx STATX_DIOALIGN, Linux 6.1+); 512 if unknown.
fn file_dio_align(file: &File) -> u64 {
    // SAFETY: zeroed statx is a valid out-buffer.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    const STATX_DIOALIGN: u32 = 0x2000;
    // SAFETY: an fd we own, the empty path with AT_EMPTY_PATH, and a valid out-buffer.
    let r = unsafe { libc::statx(file.as_raw_fd(), c"".as_ptr(), libc::AT_EMPTY_PATH, STATX_DIOALIGN, &mut stx) };
    if r == 0 && stx.stx_mask & STATX_DIOALIGN != 0 && stx.stx_dio_offset_align > 0 {
        stx.stx_dio_offset_align as u64
    } else {
        512
    }
}

/// Free bytes on the filesystem holding `dir`.
/// `OpenOptions::scratch_size` for "choose": 1 GiB, or half the free space of the scratch
/// file's filesystem when that is less (what an agent does when the run gave no --size: the
/// coordinator cannot see the agent's disks).
pub const AUTO_SCRATCH_SIZE: u64 = 0;
pub const DEFAULT_SCRATCH_SIZE: u64 = 1 << 30;
/// Below this a scratch file measures more cache than storage.
pub const MIN_SCRATCH_SIZE: u64 = 64 << 20;

/// How a set's scratch files are sized when the run gave no size: the files it will create,
/// counted before the first is made, share half the free space evenly; the size is chosen at
/// the first one (after the allow list admitted it) and kept for the others.
struct ScratchSizing {
    files: u64,
    /// Per filesystem (its device): the size chosen at its first file.
    chosen: Vec<(u64, u64)>,
}

impl ScratchSizing {
    /// The size of a scratch file in the directory `dir_fd`: chosen at the first file on that
    /// filesystem from its free space, kept for the others there.
    fn size_on(&mut self, dir_fd: RawFd) -> u64 {
        // SAFETY: zeroed stat is a valid out-buffer; dir_fd is open.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat writes only into `st`; dir_fd is open.
        let dev = if unsafe { libc::fstat(dir_fd, &mut st) } == 0 { st.st_dev } else { u64::MAX };
        if let Some(&(_, size)) = self.chosen.iter().find(|(d, _)| *d == dev) {
            return size;
        }
        let size = auto_scratch_size(free_space_fd(dir_fd), self.files);
        self.chosen.push((dev, size));
        size
    }
}

/// The targets of `groups` that name files still to be made (not globs, not existing): the
/// scratch files [`TargetSet::open`] will create.
pub fn scratch_to_create(groups: &[TargetGroup]) -> Vec<&str> {
    groups
        .iter()
        .flat_map(|g| &g.targets)
        .map(String::as_str)
        .filter(|t| !is_glob(t) && !Path::new(t).exists())
        .collect()
}

/// How many scratch files share the free space (at least one).
fn scratch_files(groups: &[TargetGroup]) -> u64 {
    scratch_to_create(groups).len().max(1) as u64
}

/// The chosen size of each of `files` scratch files on a filesystem with `free` bytes available
/// (None: unknown): 1 GiB, or their share of half the free space when that is less, stamp
/// included, in whole MiB. The one rule of local runs and agents.
fn auto_scratch_size(free: Option<u64>, files: u64) -> u64 {
    free.map_or(DEFAULT_SCRATCH_SIZE, |f| (f / 2 / files.max(1)).saturating_sub(scratch::STAMP_LEN) >> 20 << 20)
        .min(DEFAULT_SCRATCH_SIZE)
}

/// The size [`TargetSet::open`] will give each of `files` scratch files made without a size on
/// the filesystem of `dir`: for saying it before they are made.
pub fn auto_scratch_size_for(files: usize, dir: &Path) -> u64 {
    auto_scratch_size(free_space(dir), files.max(1) as u64)
}

/// A target's size as far as it can be told before it is opened: a block device's, an existing
/// file's length (an upper bound: a scratch file keeps a stamp at its end), or the size a scratch
/// file made now would get (`scratch`, else the automatic one for `new_files` files). None where
/// it cannot be told (a device that cannot be opened, a directory).
pub fn size_before_open(path: &Path, scratch: Option<u64>, new_files: usize) -> Option<u64> {
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_block_device() => {
            let f = File::open(path).ok()?;
            device_size(&f, path).ok()
        }
        Ok(m) if m.is_file() => Some(m.len()),
        Ok(_) => None,
        Err(_) => {
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            Some(scratch.unwrap_or_else(|| auto_scratch_size_for(new_files, dir)))
        }
    }
}

fn free_space_fd(fd: RawFd) -> Option<u64> {
    // SAFETY: zeroed statvfs is a valid out-buffer.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: fd is an open descriptor; valid out-buffer.
    if unsafe { libc::fstatvfs(fd, &mut s) } != 0 {
        return None;
    }
    Some(s.f_bavail as u64 * s.f_frsize as u64)
}

#[cfg(test)]
mod tests {
    /// An agent out of descriptors or memory says so (the tool failed, exit code 1), not that
    /// the target was bad input: the same whether it opened a target or created a scratch file.
    #[test]
    fn a_host_at_its_limit_is_not_bad_input() {
        for (errno, says) in [
            (libc::EMFILE, "raise the process's open-file limit, `ulimit -n`"),
            (libc::ENFILE, "the whole system's open files are at their limit, fs.file-max"),
            (libc::ENOMEM, "the host is out of memory"),
        ] {
            let e = std::io::Error::from_raw_os_error(errno);
            assert!(super::out_of_room(&e));
            let told = super::host_limit("create scratch file /data/t.dat", e);
            assert!(!told.is_input_error(), "{told}");
            assert!(
                told.to_string().starts_with(&format!(
                    "cannot create scratch file /data/t.dat: this host is at its limit ({says})"
                )),
                "{told}"
            );
        }
        assert!(!super::out_of_room(&std::io::Error::from_raw_os_error(libc::EEXIST)));
    }

    #[test]
    fn a_chosen_scratch_size_is_a_gib_or_half_the_free_space() {
        assert_eq!(super::auto_scratch_size(None, 1), 1 << 30);
        assert_eq!(super::auto_scratch_size(Some(100 << 30), 1), 1 << 30);
        assert_eq!(super::auto_scratch_size(Some(300 << 20), 1), 149 << 20);
        assert_eq!(super::auto_scratch_size(Some(302 << 20), 1), 150 << 20);
        assert_eq!(super::auto_scratch_size(Some(0), 1), 0);
    }

    #[test]
    fn scratch_files_share_half_the_free_space_evenly() {
        // Three files on 3 GiB free: a share of 512 MiB each (less the stamp, in whole MiB).
        assert_eq!(super::auto_scratch_size(Some(3 << 30), 3), 511 << 20);
        assert_eq!(super::auto_scratch_size(Some(30 << 30), 3), 1 << 30);
        let dir = tempfile::tempdir().unwrap();
        let t = |name: &str| dir.path().join(name).display().to_string();
        std::fs::write(t("there.dat"), b"x").unwrap();
        let groups = [
            TargetGroup { name: "a".into(), weight: 1, targets: vec![t("new1.dat"), t("there.dat")] },
            TargetGroup { name: "b".into(), weight: 1, targets: vec![t("new2.dat"), t("*.dat")] },
        ];
        assert_eq!(
            super::scratch_to_create(&groups),
            [t("new1.dat"), t("new2.dat")],
            "neither an existing file nor a glob is made"
        );
        assert_eq!(super::scratch_files(&groups), 2);
    }

    use super::*;

    /// Issue 21, finding 1: the check for a target named twice compared every target with
    /// every earlier one (two `statx` each: 4,096 targets took 25 s). It is a hash set now; it
    /// still finds a file named twice under another name, and a cancel stops between targets.
    #[test]
    fn a_target_named_twice_is_refused_and_a_cancel_stops_between_targets() {
        let dir = tempfile::tempdir().unwrap();
        let f = |n: &str| dir.path().join(n).display().to_string();
        for n in ["a.dat", "b.dat"] {
            std::fs::write(dir.path().join(n), vec![0u8; 1 << 20]).unwrap();
        }
        std::fs::hard_link(dir.path().join("a.dat"), dir.path().join("also-a.bin")).unwrap();
        let group = |targets: Vec<String>| vec![TargetGroup { name: "t".into(), weight: 1, targets }];
        let read = OpenOptions { write: false, ..Default::default() };
        let set = TargetSet::open(&group(vec![f("*.dat")]), &read).unwrap();
        assert_eq!(set.targets.len(), 2);
        let e = TargetSet::open(&group(vec![f("*.dat"), f("also-a.bin")]), &read).unwrap_err().to_string();
        assert!(e.contains("is named twice") && e.contains("a.dat") && e.contains("also-a.bin"), "{e}");
        let cancel = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let e = TargetSet::open(&group(vec![f("*.dat")]), &OpenOptions { cancel: Some(cancel), ..read })
            .unwrap_err()
            .to_string();
        assert!(e.contains("cancelled"), "{e}");
    }

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
