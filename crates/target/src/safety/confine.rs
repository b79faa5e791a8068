//! An agent's confinement: the targets a coordinator may name are those whose canonical path
//! — resolved on the opened descriptor, after `..` and symlinks — matches the agent's allow
//! list; scratch files are created only in allowed places, up to a byte budget.
//!
//! Matching is on paths the kernel resolved, never on the text a peer sent: `allowed/../x`,
//! a symlink in an allowed directory pointing elsewhere and a glob that reaches outside all
//! resolve to a path outside the list and are refused. `*` never crosses `/` (only `**` does),
//! and a refusal never says whether, or how large, something outside the list is.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::TargetError;

#[derive(Debug)]
pub struct Confinement {
    allow: Vec<glob::Pattern>,
    /// Each pattern as given, and the directory its literal part resolves to: a target glob
    /// must start inside one of these, and symlinked device names are looked up by them.
    given: Vec<(String, PathBuf)>,
    /// The device numbers the system symlinks of `/dev` patterns resolve to, and when they were
    /// looked up: found again at most every [`LINKS_FRESH`], not once per glob match.
    links: Mutex<Option<(std::time::Instant, Vec<u64>)>>,
    /// Scratch bytes this agent may create in its life (None: its scratch files together may
    /// take at most half of the free space plus what they already take).
    max_scratch: Option<u64>,
    /// Scratch bytes created so far (kept files stay counted).
    used: Mutex<u64>,
}

const MATCH: glob::MatchOptions =
    glob::MatchOptions { case_sensitive: true, require_literal_separator: true, require_literal_leading_dot: false };

/// Resolves the literal directory part of an allow pattern the way the kernel will resolve
/// targets (`/data` being a symlink to `/mnt/data` must still allow `/mnt/data/x`).
/// Also returns that directory (as given where it does not resolve).
fn canonical_pattern(p: &str) -> (String, PathBuf) {
    let literal_end = p.find(['*', '?', '[']).unwrap_or(p.len());
    let dir_end = p[..literal_end].rfind('/').map_or(0, |i| i + 1);
    if dir_end == 0 {
        return (p.to_string(), PathBuf::from("/"));
    }
    match std::fs::canonicalize(&p[..dir_end]) {
        Ok(dir) => {
            let mut s = glob::Pattern::escape(&dir.display().to_string());
            if !s.ends_with('/') {
                s.push('/');
            }
            (s + &p[dir_end..], dir)
        }
        Err(_) => (p.to_string(), PathBuf::from(&p[..dir_end])),
    }
}

/// How long the devices of [`Confinement::names_device`] are taken as known.
const LINKS_FRESH: std::time::Duration = std::time::Duration::from_secs(2);

/// A symlink the system made, not a user: owned by root, in a directory owned by root that
/// nobody else may write (udev's `/dev/mapper`, `/dev/disk/by-id`). A symlink a user could
/// have placed is never followed to widen the list.
fn system_symlink(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(link) = std::fs::symlink_metadata(path) else { return false };
    let Some(parent) = path.parent() else { return false };
    let Ok(dir) = std::fs::symlink_metadata(parent) else { return false };
    link.file_type().is_symlink() && link.uid() == 0 && dir.is_dir() && dir.uid() == 0 && dir.mode() & 0o022 == 0
}

impl Confinement {
    /// `allow`: glob patterns of absolute paths; `max_scratch`: bytes of scratch files this
    /// agent may create over its life (None: half the free space of the filesystem, checked
    /// at each creation).
    pub fn new(allow: &[String], max_scratch: Option<u64>) -> Result<Confinement, String> {
        let mut patterns = Vec::new();
        let mut given = Vec::new();
        for p in allow {
            if !p.starts_with('/') {
                return Err(format!("--allow {p}: give an absolute path or pattern"));
            }
            let (canonical, dir) = canonical_pattern(p);
            patterns.push(glob::Pattern::new(&canonical).map_err(|e| format!("--allow {p}: {e}"))?);
            crate::walk::Glob::parse(p).map_err(|e| format!("--allow {p}: {e}"))?;
            given.push((p.clone(), dir));
        }
        Ok(Confinement { allow: patterns, given, links: Mutex::new(None), max_scratch, used: Mutex::new(0) })
    }

    pub fn is_empty(&self) -> bool {
        self.allow.is_empty()
    }

    fn list(&self) -> String {
        self.allow.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(", ")
    }

    fn matches(&self, canonical: &Path) -> bool {
        canonical.to_str().is_some_and(|s| self.allow.iter().any(|p| p.matches_with(s, MATCH)))
            || self.names_device(canonical)
    }

    /// `--allow '/dev/mapper/lun*'` where udev made those names symlinks to `/dev/dm-N`: a
    /// block device is allowed when a system symlink the pattern matches resolves to it
    /// (issue 35, finding 8). Only patterns in `/dev`, where the system names devices, and
    /// without `**` (trees of files, not device links); a symlink elsewhere in an allowed
    /// directory still resolves outside the list and is refused.
    fn names_device(&self, canonical: &Path) -> bool {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let Ok(m) = std::fs::metadata(canonical) else { return false };
        if !m.file_type().is_block_device() {
            return false;
        }
        let mut links = self.links.lock().unwrap_or_else(|e| e.into_inner());
        if links.as_ref().is_none_or(|(at, _)| at.elapsed() > LINKS_FRESH) {
            *links = Some((std::time::Instant::now(), self.linked_devices()));
        }
        links.as_ref().is_some_and(|(_, devs)| devs.contains(&m.rdev()))
    }

    /// The device numbers that system symlinks matched by the `/dev` patterns resolve to.
    fn linked_devices(&self) -> Vec<u64> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let mut devs = Vec::new();
        for (p, _) in self.given.iter().filter(|(p, dir)| !p.contains("**") && dir.starts_with("/dev")) {
            let Ok(glob) = crate::walk::Glob::parse(p) else { continue };
            let mut budget = crate::walk::Budget::new(crate::walk::Bounds::AGENT);
            for name in crate::walk::walk(&glob, &glob.base, &mut budget, None).unwrap_or_default() {
                if system_symlink(&name)
                    && let Ok(m) = std::fs::metadata(&name)
                    && m.file_type().is_block_device()
                {
                    devs.push(m.rdev());
                }
            }
        }
        devs
    }

    /// Where an agent walks a target glob: the directory its literal part resolves to, which
    /// must lie inside the literal directory of one of the allow patterns. `/**/x` would
    /// otherwise walk the whole host before the list filtered a single match (issue 35,
    /// finding 1).
    pub fn glob_base(&self, pattern: &str, base: &Path) -> Result<PathBuf, TargetError> {
        if self.allow.is_empty() {
            return Err(self.refuse(pattern));
        }
        if let Ok(resolved) = std::fs::canonicalize(base)
            && self.given.iter().any(|(_, dir)| resolved.starts_with(dir))
        {
            return Ok(resolved);
        }
        // One answer whether the directory is missing or outside: a peer learns nothing of
        // what exists outside the list.
        let dirs: Vec<String> = self.given.iter().map(|(_, d)| d.display().to_string()).collect();
        Err(TargetError::OutsideAllowList(format!(
            "target glob {pattern} is outside this agent's allow list: its directory {} does not resolve inside one the list names ({}); start the glob inside one of them",
            base.display(),
            dirs.join(", ")
        )))
    }

    /// The one answer for anything outside the list, whatever the reason (missing, no access,
    /// not a directory …): a peer learns nothing about paths it may not use.
    pub fn refuse(&self, asked: &str) -> TargetError {
        if self.allow.is_empty() {
            return TargetError::Input(
                "this agent allows no targets: start it with --allow PATH-GLOB for the paths it may use".into(),
            );
        }
        TargetError::OutsideAllowList(format!(
            "target {asked} is outside this agent's allow list ({}), after resolving `..` and symlinks",
            self.list()
        ))
    }

    /// True when a path resolves inside the list (for filtering glob matches quietly).
    pub fn admits(&self, path: &Path) -> bool {
        std::fs::canonicalize(path).is_ok_and(|c| self.matches(&c))
    }

    /// Checks an opened object by its canonical path. Hard links are refused: a second name
    /// inside the list may reach a file outside it.
    pub fn check_opened(&self, asked: &str, canonical: &Path, nlink: u64, regular: bool) -> Result<(), TargetError> {
        if !self.matches(canonical) {
            return Err(self.refuse(asked));
        }
        if regular && nlink > 1 {
            return Err(TargetError::Input(format!(
                "target {asked} has {nlink} hard links: this agent uses only files with one name, since another name may lie outside its allow list"
            )));
        }
        Ok(())
    }

    /// Checks that a scratch file `name` may be created in the directory whose canonical path
    /// is `dir`, and takes `size` bytes from the budget.
    pub fn admit_scratch(&self, asked: &str, dir: &Path, name: &std::ffi::OsStr, size: u64) -> Result<(), TargetError> {
        if !self.matches(&dir.join(name)) {
            return Err(self.refuse(asked));
        }
        // Checked and spent under one lock: concurrent requests cannot both take the same room.
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let limit = match self.max_scratch {
            Some(max) => max.saturating_sub(*used),
            None => {
                let free = crate::fdctl::free_space(dir).unwrap_or(0);
                (free.saturating_add(*used) / 2).saturating_sub(*used)
            }
        };
        if size > limit {
            return Err(TargetError::Input(format!(
                "scratch file {asked} of {} exceeds this agent's scratch budget ({} left; the agent's --max-scratch, default half the free space)",
                iocurve_plan::format_size(size),
                iocurve_plan::format_size(limit)
            )));
        }
        *used += size;
        Ok(())
    }
}

/// The path the kernel resolved for an open descriptor, proven to name that same object from
/// this process's root: a path reached through another process's root or cwd
/// (`/proc/PID/root/…`) reads back as that process sees it, and a deleted file as
/// `… (deleted)`; neither names the object here, so neither is returned.
pub fn canonical_of(fd: std::os::fd::RawFd) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let p = std::fs::read_link(format!("/proc/self/fd/{fd}"))?;
    let mismatch = || std::io::Error::other("the resolved path does not name the opened object");
    // SAFETY: fstat into a zeroed buffer on a descriptor the caller owns.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fstat writes only into `st`, on a descriptor the caller owns.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let there = std::fs::symlink_metadata(&p).map_err(|_| mismatch())?;
    let same = if there.file_type().is_block_device() {
        st.st_mode & libc::S_IFMT == libc::S_IFBLK && there.rdev() == st.st_rdev
    } else {
        (there.dev(), there.ino()) == (st.st_dev, st.st_ino)
    };
    if !same || p.starts_with("/proc") {
        return Err(mismatch());
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_does_not_cross_slashes_and_double_star_does() {
        let c = Confinement::new(&["/srv/io/*".into(), "/data/**/*.dat".into()], None).unwrap();
        assert!(c.matches(Path::new("/srv/io/a")));
        assert!(!c.matches(Path::new("/srv/io/sub/a")));
        assert!(c.matches(Path::new("/data/x/y/z.dat")));
        assert!(!c.matches(Path::new("/srv/other")));
    }

    #[test]
    fn hard_links_and_outside_paths_are_refused_without_revealing_them() {
        let c = Confinement::new(&["/srv/io/*".into()], None).unwrap();
        let e = c.check_opened("/srv/io/../../etc/shadow", Path::new("/etc/shadow"), 1, true).unwrap_err();
        assert!(e.to_string().contains("outside this agent's allow list"), "{e}");
        assert!(!e.to_string().contains("/etc/shadow ("), "{e}");
        let e = c.check_opened("/srv/io/l", Path::new("/srv/io/l"), 2, true).unwrap_err();
        assert!(e.to_string().contains("hard links"), "{e}");
        c.check_opened("/srv/io/f", Path::new("/srv/io/f"), 1, true).unwrap();
    }

    #[test]
    fn the_scratch_budget_is_spent_once() {
        let c = Confinement::new(&["/srv/io/*".into()], Some(100 << 20)).unwrap();
        c.admit_scratch("a", Path::new("/srv/io"), "a".as_ref(), 60 << 20).unwrap();
        let e = c.admit_scratch("b", Path::new("/srv/io"), "b".as_ref(), 60 << 20).unwrap_err();
        assert!(e.to_string().contains("budget"), "{e}");
        let e = c.admit_scratch("c", Path::new("/srv"), "c".as_ref(), 1).unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
    }

    #[test]
    fn a_path_through_another_root_is_not_canonical() {
        use std::os::fd::AsRawFd;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"x").unwrap();
        let f = std::fs::File::open(&p).unwrap();
        assert_eq!(canonical_of(f.as_raw_fd()).unwrap(), std::fs::canonicalize(&p).unwrap());
        let via_proc = format!("/proc/{}/root{}", std::process::id(), p.display());
        let g = std::fs::File::open(via_proc).unwrap();
        assert_eq!(canonical_of(g.as_raw_fd()).unwrap(), std::fs::canonicalize(&p).unwrap());
        std::fs::remove_file(&p).unwrap();
        assert!(canonical_of(f.as_raw_fd()).is_err(), "a deleted file has no canonical path");
    }

    #[test]
    fn relative_allow_patterns_are_refused() {
        assert!(Confinement::new(&["data/*".into()], None).is_err());
    }
}
