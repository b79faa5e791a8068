//! Expanding a target glob by walking only what the glob can match, within bounds.
//!
//! The `glob` crate walked `/**/zz_nothing` through every directory of the host, `/proc/*/root`
//! symlinks included, and could be neither stopped nor bounded: one such request kept an
//! agent's core busy for minutes after its caller left, and the agent ignored SIGTERM meanwhile
//! (issue 35, finding 1). This walk starts at the glob's literal directory, reads a directory
//! only when a component still to match may be inside it, never descends through a symlink
//! where told not to (an agent), and stops at a bound of directories, entries and time, or when
//! its caller goes (the cancel flag), saying which.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::TargetError;

/// How far one glob may walk.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Directories read.
    pub dirs: usize,
    /// Directory entries looked at, in all.
    pub entries: usize,
    pub time: Duration,
    /// Descend through symlinks to directories at wildcard components (a local run, where the
    /// user owns the machine); an agent never does.
    pub follow_symlinks: bool,
}

impl Bounds {
    /// A local run: the user's own machine, Ctrl-C at hand.
    pub const LOCAL: Bounds =
        Bounds { dirs: 100_000, entries: 10_000_000, time: Duration::from_secs(120), follow_symlinks: true };
    /// An agent answering a peer: a glob names targets, it does not search a filesystem.
    pub const AGENT: Bounds =
        Bounds { dirs: 10_000, entries: 1_000_000, time: Duration::from_secs(10), follow_symlinks: false };
}

const MATCH: glob::MatchOptions =
    glob::MatchOptions { case_sensitive: true, require_literal_separator: true, require_literal_leading_dot: false };

enum Component {
    /// `**`: any number of directories, none included.
    AnyDirs,
    /// A name without wildcards: looked up, not listed.
    Literal(String),
    Pattern(glob::Pattern),
}

/// A glob split at its first wildcard component: the literal directory it starts in and what
/// remains to match.
pub struct Glob {
    pub base: PathBuf,
    components: Vec<Component>,
    /// The glob named no directory of its own (`*.img`): matches are named without `./`.
    implied_base: bool,
}

fn is_wild(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

impl Glob {
    pub fn parse(pattern: &str) -> Result<Glob, TargetError> {
        let invalid = |why: String| TargetError::Input(format!("target glob `{pattern}` is invalid: {why}"));
        let parts: Vec<&str> = pattern.split('/').collect();
        let first_wild = parts.iter().position(|p| is_wild(p)).unwrap_or(parts.len());
        let mut base = parts[..first_wild].join("/");
        let implied_base = base.is_empty() && !pattern.starts_with('/');
        if base.is_empty() {
            base = if pattern.starts_with('/') { "/".into() } else { ".".into() };
        }
        let mut components = Vec::new();
        for part in parts[first_wild..].iter().filter(|p| !p.is_empty() && **p != ".") {
            if *part == ".." {
                // The walk starts in the glob's literal directory, which an agent checks against
                // its allow list: `dir/*/../../..` would climb out of it (issue 35 review).
                return Err(invalid("`..` after a wildcard: name the directory without it".into()));
            }
            components.push(if *part == "**" {
                // `a/**/**/b` is `a/**/b`.
                if matches!(components.last(), Some(Component::AnyDirs)) {
                    continue;
                }
                Component::AnyDirs
            } else if part.contains("**") {
                return Err(invalid(format!("`**` must be a whole path component, not part of `{part}`")));
            } else if is_wild(part) {
                Component::Pattern(glob::Pattern::new(part).map_err(|e| invalid(e.to_string()))?)
            } else {
                Component::Literal((*part).to_string())
            });
        }
        Ok(Glob { base: PathBuf::from(base), components, implied_base })
    }
}

/// What the walks of one request may still spend: every glob of a request draws on one budget,
/// so that many globs cannot each take the whole of it.
pub struct Budget {
    bounds: Bounds,
    started: Instant,
    dirs: usize,
    entries: usize,
}

impl Budget {
    pub fn new(bounds: Bounds) -> Budget {
        Budget { bounds, started: Instant::now(), dirs: 0, entries: 0 }
    }
}

/// What stopped a walk.
#[derive(Debug, PartialEq, Eq)]
pub enum Stopped {
    Cancelled,
    Bound(String),
}

/// The paths under `base` that `glob` matches, sorted. Unreadable directories are skipped, as a
/// shell does. A trailing `**` matches what is not a directory below (the files and devices a
/// target can be).
pub fn walk(
    glob: &Glob,
    base: &Path,
    budget: &mut Budget,
    cancel: Option<&AtomicBool>,
) -> Result<Vec<PathBuf>, Stopped> {
    let mut w = Walker { budget, cancel, out: BTreeSet::new() };
    if glob.components.is_empty() {
        if std::fs::symlink_metadata(base).is_ok() {
            w.out.insert(base.to_path_buf());
        }
        return Ok(w.out.into_iter().collect());
    }
    // Explicit stack: `**` over a deep tree must not exhaust the thread's stack. A (directory,
    // component) pair is visited once, however many ways `**` reaches it.
    let mut todo: Vec<(PathBuf, usize)> = vec![(base.to_path_buf(), 0)];
    let mut seen: HashSet<(PathBuf, usize)> = HashSet::new();
    while let Some((dir, i)) = todo.pop() {
        if !seen.insert((dir.clone(), i)) {
            continue;
        }
        let last = i + 1 == glob.components.len();
        match &glob.components[i] {
            Component::Literal(name) => {
                let path = dir.join(name);
                w.tick()?;
                if last {
                    if std::fs::symlink_metadata(&path).is_ok() {
                        w.out.insert(path);
                    }
                } else if w.is_dir(&path, None) {
                    todo.push((path, i + 1));
                }
            }
            Component::Pattern(p) => {
                for (path, name, ft) in w.list(&dir)? {
                    if !p.matches_with(&name, MATCH) {
                        continue;
                    }
                    if last {
                        w.out.insert(path);
                    } else if w.is_dir(&path, Some(ft)) {
                        todo.push((path, i + 1));
                    }
                }
            }
            Component::AnyDirs => {
                if last {
                    // A trailing `**`: everything below.
                    for (path, _, ft) in w.list(&dir)? {
                        if w.is_dir(&path, Some(ft)) {
                            todo.push((path, i));
                        } else {
                            w.out.insert(path);
                        }
                    }
                } else {
                    todo.push((dir.clone(), i + 1));
                    for (path, _, ft) in w.list(&dir)? {
                        if w.is_dir(&path, Some(ft)) {
                            todo.push((path, i));
                        }
                    }
                }
            }
        }
    }
    let out = w.out.into_iter();
    Ok(if glob.implied_base {
        out.map(|p| p.strip_prefix(".").map(Path::to_path_buf).unwrap_or(p)).collect()
    } else {
        out.collect()
    })
}

struct Walker<'a> {
    budget: &'a mut Budget,
    cancel: Option<&'a AtomicBool>,
    out: BTreeSet<PathBuf>,
}

impl Walker<'_> {
    /// Counts one entry; checks the caller and the bounds every so often.
    fn tick(&mut self) -> Result<(), Stopped> {
        let b = &mut *self.budget;
        b.entries += 1;
        if b.entries > b.bounds.entries {
            return Err(Stopped::Bound(format!("{} directory entries", b.bounds.entries)));
        }
        if b.entries.is_multiple_of(256) {
            self.check()?;
        }
        Ok(())
    }

    fn check(&self) -> Result<(), Stopped> {
        if self.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(Stopped::Cancelled);
        }
        if self.budget.started.elapsed() > self.budget.bounds.time {
            return Err(Stopped::Bound(format!("{} s", self.budget.bounds.time.as_secs())));
        }
        Ok(())
    }

    /// The entries of `dir` (unreadable: none), with their own type (a symlink is a symlink).
    fn list(&mut self, dir: &Path) -> Result<Vec<(PathBuf, String, std::fs::FileType)>, Stopped> {
        self.check()?;
        self.budget.dirs += 1;
        if self.budget.dirs > self.budget.bounds.dirs {
            return Err(Stopped::Bound(format!("{} directories", self.budget.bounds.dirs)));
        }
        let Ok(read) = std::fs::read_dir(dir) else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for e in read {
            self.tick()?;
            let Ok(e) = e else { continue };
            let Ok(ft) = e.file_type() else { continue };
            // A name that is not UTF-8 cannot match a pattern given as text.
            let Ok(name) = e.file_name().into_string() else { continue };
            out.push((e.path(), name, ft));
        }
        Ok(out)
    }

    /// A directory to descend into: a real one, or one a symlink leads to where following them
    /// is allowed.
    fn is_dir(&self, path: &Path, ft: Option<std::fs::FileType>) -> bool {
        let ft = match ft {
            Some(ft) => ft,
            None => match std::fs::symlink_metadata(path) {
                Ok(m) => m.file_type(),
                Err(_) => return false,
            },
        };
        if ft.is_dir() {
            return true;
        }
        ft.is_symlink() && self.budget.bounds.follow_symlinks && path.is_dir()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for p in ["a/x.img", "a/b/x.img", "a/b/c/x.img", "a/b/c/y.dat", "z/x.img", ".h/x.img"] {
            let p = d.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, b"").unwrap();
        }
        d
    }

    fn names(d: &Path, pattern: &str, bounds: Bounds) -> Result<Vec<String>, Stopped> {
        let g = Glob::parse(&format!("{}/{pattern}", d.display())).unwrap();
        let base = g.base.clone();
        walk(&g, &base, &mut Budget::new(bounds), None)
            .map(|v| v.iter().map(|p| p.strip_prefix(d).unwrap().display().to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn it_matches_what_a_shell_glob_with_globstar_would() {
        let d = tree();
        let b = Bounds::AGENT;
        assert_eq!(names(d.path(), "*/x.img", b).unwrap(), [".h/x.img", "a/x.img", "z/x.img"]);
        assert_eq!(names(d.path(), "a/**/x.img", b).unwrap(), ["a/b/c/x.img", "a/b/x.img", "a/x.img"]);
        assert_eq!(names(d.path(), "**/*.dat", b).unwrap(), ["a/b/c/y.dat"]);
        assert_eq!(names(d.path(), "a/b/**", b).unwrap(), ["a/b/c/x.img", "a/b/c/y.dat", "a/b/x.img"]);
        assert_eq!(names(d.path(), "a/**/**/c/?.dat", b).unwrap(), ["a/b/c/y.dat"]);
        assert_eq!(names(d.path(), "[az]/x.img", b).unwrap(), ["a/x.img", "z/x.img"]);
        assert!(names(d.path(), "nothing/**/x", b).unwrap().is_empty());
        assert!(Glob::parse("/a/b**/c").is_err(), "`**` inside a component is refused");
        assert!(Glob::parse("/a/../b/*.img").is_ok(), "`..` before the first wildcard resolves with the base");
    }

    /// Issue 35 review: `allowed/*/../../..` climbed out of the directory the agent checked,
    /// up to `/`.
    #[test]
    fn regression_dotdot_after_a_wildcard_is_refused() {
        for g in ["/data/*/../../etc/pass*", "/data/d*/../../**/zz", "x/**/.."] {
            let e = Glob::parse(g).err().unwrap_or_else(|| panic!("{g} parses"));
            assert!(e.to_string().contains("`..` after a wildcard"), "{e}");
        }
    }

    #[test]
    fn a_relative_glob_names_its_matches_as_given() {
        let rel = Glob::parse("*").unwrap();
        let listed = walk(&rel, &rel.base, &mut Budget::new(Bounds::LOCAL), None).unwrap();
        assert!(!listed.is_empty() && listed.iter().all(|p| !p.starts_with(".")), "{listed:?}");
    }

    /// Issue 35, finding 1: an agent's walk never goes through a symlink (`/proc/*/root` led
    /// `/**/x` through every process's root); a local run may.
    #[test]
    fn regression_an_agent_walk_never_descends_through_a_symlink() {
        let d = tree();
        let outside = tree();
        std::os::unix::fs::symlink(outside.path(), d.path().join("a/link")).unwrap();
        let agent = names(d.path(), "**/y.dat", Bounds::AGENT).unwrap();
        assert_eq!(agent, ["a/b/c/y.dat"]);
        let local = names(d.path(), "**/y.dat", Bounds::LOCAL).unwrap();
        assert_eq!(local, ["a/b/c/y.dat", "a/link/a/b/c/y.dat"]);
    }

    /// Issue 35, finding 1: a walk stops at its bound of directories, and when its caller goes.
    #[test]
    fn regression_a_walk_stops_at_its_bound_and_when_cancelled() {
        let d = tempfile::tempdir().unwrap();
        for i in 0..40 {
            std::fs::create_dir_all(d.path().join(format!("d{i}/e"))).unwrap();
        }
        let few = Bounds { dirs: 10, ..Bounds::AGENT };
        assert_eq!(names(d.path(), "**/zz_nothing", few), Err(Stopped::Bound("10 directories".into())));
        assert!(names(d.path(), "**/zz_nothing", Bounds::AGENT).unwrap().is_empty());
        let g = Glob::parse(&format!("{}/**/zz", d.path().display())).unwrap();
        let gone = AtomicBool::new(true);
        assert_eq!(walk(&g, &g.base, &mut Budget::new(Bounds::AGENT), Some(&gone)), Err(Stopped::Cancelled));
        // One budget for every glob of a request: the second walk gets what the first left.
        let mut budget = Budget::new(Bounds { dirs: 100, ..Bounds::AGENT });
        walk(&g, &g.base, &mut budget, None).unwrap();
        // 81 directories each (the base, 40 and 40 below).
        assert_eq!(walk(&g, &g.base, &mut budget, None), Err(Stopped::Bound("100 directories".into())));
    }
}
