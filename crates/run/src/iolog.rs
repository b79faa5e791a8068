//! `run --write-iolog FILE` (issue 45, part 4): what a run issued, as a fio version 3 I/O log,
//! so that the run can be replayed by iocurve (`run --replay FILE`) and by fio
//! (`fio --read_iolog=FILE`). Every step's I/Os from every host, merged by time, each at its
//! time since the run's first step started; a step's lines are written and flushed when it ends,
//! so a run stopped later keeps the steps before. Each target is one file of the log, named as
//! the run names it (a path on this host; `HOST:PORT:PATH` on agents).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use iocurve_analysis::TargetInfo;
use iocurve_engine::ops::Dir;
use iocurve_plan::Plan;
use iocurve_trace::{FioLogWriter, TraceDir};

use crate::Error;
use crate::coordinator::HostIoLog;

/// The files a run reads or writes besides its log, by what they are: the log must be none of
/// them (it would empty it). The results database; the verification map with its journal and
/// lock where a workload verifies; the traces it replays; the plan file; its targets.
pub fn run_files(plan: &Plan, db: &Path, verify_map: &Path) -> Vec<(&'static str, PathBuf)> {
    let mut out = vec![("the results database", db.to_path_buf())];
    if plan.workloads.iter().any(|w| w.verify) {
        let beside = |ext: &str| PathBuf::from(format!("{}.{ext}", verify_map.display()));
        out.push(("the verification map", verify_map.to_path_buf()));
        out.push(("the verification map's journal", beside("journal")));
        out.push(("the verification map's lock", beside("lock")));
    }
    out.extend(plan.workloads.iter().filter_map(|w| w.replay.as_ref()).map(|t| ("a trace this run replays", t.into())));
    if Path::new(&plan.source).is_file() {
        out.push(("the plan this run reads", plan.source.clone().into()));
    }
    out.extend(plan.groups.iter().flat_map(|g| &g.targets).map(|t| ("a target of this run", t.into())));
    out
}

/// Whether `path` can take the log, checked before any target is opened or prepared (a scratch
/// file of a terabyte is not written for a run that cannot keep its log): not one of `others`
/// (by any name: symbolic and hard links), a regular file or none, in a directory it can be
/// made in. Leaves nothing behind: a file made to try is removed again.
pub fn check(path: &Path, others: &[(&str, PathBuf)]) -> Result<(), Error> {
    let shown = path.display();
    if path.as_os_str() == "-" {
        return Err(Error::Usage(
            "--write-iolog -: the log is written to a file, not to standard output; name a file".into(),
        ));
    }
    let me = identity(path);
    if let Some((what, _)) = others.iter().find(|(_, p)| me.is_some() && identity(p) == me) {
        return Err(Error::Usage(format!(
            "--write-iolog {shown} is {what}: the log would overwrite it; name another file"
        )));
    }
    match std::fs::metadata(path) {
        Ok(m) if !m.is_file() => {
            return Err(Error::Usage(format!(
                "--write-iolog {shown}: it exists and is not a regular file (a device, a directory or a FIFO); name a new file"
            )));
        }
        Ok(_) => std::fs::OpenOptions::new().append(true).open(path).map(drop),
        Err(_) => {
            // Tried where it would be made (a link to a file not there yet: at its end).
            let at = match &me {
                Some(Identity::Path(p)) => p.clone(),
                _ => path.to_path_buf(),
            };
            std::fs::OpenOptions::new().write(true).create_new(true).open(&at).and_then(|_| std::fs::remove_file(&at))
        }
    }
    .map_err(|e| Error::Usage(format!("--write-iolog {shown}: cannot create it: {e}")))
}

/// Target names a fio log cannot carry (it splits a line's fields at white space).
pub fn check_names<'a>(targets: impl IntoIterator<Item = &'a str>) -> Result<(), Error> {
    match targets.into_iter().find(|n| n.is_empty() || n.chars().any(char::is_whitespace)) {
        Some(bad) => Err(Error::Usage(format!(
            "--write-iolog: target {bad:?} has white space in its name, which a fio I/O log cannot carry (it splits a line's fields at white space); rename the target or leave the log out"
        ))),
        None => Ok(()),
    }
}

/// What a path names, for telling two names of one file apart: an existing file by its device
/// and inode (hard links too), else where creating it would write (its canonical directory and
/// name, a dangling symbolic link followed).
#[derive(PartialEq)]
enum Identity {
    Inode(u64, u64),
    Path(PathBuf),
}

fn identity(p: &Path) -> Option<Identity> {
    use std::os::unix::fs::MetadataExt;
    if let Ok(m) = std::fs::metadata(p) {
        return Some(Identity::Inode(m.dev(), m.ino()));
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(to) = std::fs::read_link(p) {
        return identity(&dir.join(to));
    }
    Some(Identity::Path(std::fs::canonicalize(dir).ok()?.join(p.file_name()?)))
}

/// The run's I/O log as it is written.
pub struct RunLog {
    path: PathBuf,
    /// None once a write failed (what it buffered is dropped, not written after the cut).
    w: Option<FioLogWriter<BufWriter<File>>>,
    /// The same file, for cutting it back to its last whole step; it holds the log's lock.
    file: File,
    /// The log's length after the last whole step.
    committed: u64,
    /// When the run's first logged step started (Unix ns, the coordinator's clock).
    origin: Option<i64>,
    /// The latest time written (ns since the origin): lines never go back in time.
    last_ns: u64,
    /// I/Os written, and those the hosts did not keep.
    pub logged: u64,
    pub left_out: u64,
}

impl RunLog {
    /// Creates (or empties) `path` for the targets of the run, locked against another run's log
    /// at the same place. Refused before anything runs: a path that is one of the targets, and
    /// targets whose names a fio log cannot carry (the run's other files were checked by
    /// [`check`] before they were opened).
    pub fn create(path: &Path, targets: &[TargetInfo]) -> Result<RunLog, Error> {
        let shown = path.display();
        let named: Vec<(&str, PathBuf)> =
            targets.iter().map(|t| ("a target of this run", t.path.clone().into())).collect();
        check(path, &named)?;
        let names: Vec<String> = targets.iter().map(|t| t.path.clone()).collect();
        check_names(names.iter().map(String::as_str))?;
        let cannot = |e: std::io::Error| Error::Usage(format!("--write-iolog {shown}: cannot create it: {e}"));
        let file = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(path).map_err(cannot)?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&file), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            return Err(Error::Usage(format!(
                "--write-iolog {shown} is being written by another run now: name another file"
            )));
        }
        file.set_len(0).map_err(cannot)?;
        let w = FioLogWriter::new(BufWriter::new(file.try_clone().map_err(cannot)?), &names)
            .map_err(|e| Error::Usage(format!("--write-iolog {shown}: {e}")))?;
        Ok(RunLog {
            path: path.to_path_buf(),
            w: Some(w),
            file,
            committed: 0,
            origin: None,
            last_ns: 0,
            logged: 0,
            left_out: 0,
        })
    }

    /// Appends a step's I/Os from every host, merged by time, and flushes them.
    pub fn add_step(&mut self, hosts: Vec<HostIoLog>) -> Result<(), Error> {
        let Some(first) = hosts.iter().map(|h| h.started_unix_ns).min() else { return Ok(()) };
        let origin = *self.origin.get_or_insert(first);
        let mut ios: Vec<(u64, iocurve_engine::ops::IoOp)> =
            Vec::with_capacity(hosts.iter().map(|h| h.ios.len()).sum());
        for h in hosts {
            self.left_out += h.left_out;
            // A host's times from its own start, placed on the run's clock (never before the origin).
            let from = h.started_unix_ns.saturating_sub(origin).max(0) as u64;
            ios.extend(h.ios.iter().map(|io| (from.saturating_add(io.t_ns), io.op)));
        }
        ios.sort_by_key(|&(t, _)| t);
        let Some(w) = self.w.as_mut() else { return Ok(()) };
        let mut written = || -> std::io::Result<u64> {
            let mut n = 0;
            for &(t, op) in &ios {
                self.last_ns = self.last_ns.max(t);
                let dir = match op.dir {
                    Dir::Read => TraceDir::Read,
                    Dir::Write => TraceDir::Write,
                    Dir::Trim => TraceDir::Trim,
                };
                w.io(self.last_ns, op.target, op.offset, op.len, dir)?;
                n += 1;
            }
            w.flush()?;
            Ok(n)
        };
        match written() {
            Ok(n) => {
                self.logged += n;
                self.committed = self.file.metadata().map_or(self.committed, |m| m.len());
                Ok(())
            }
            Err(e) => Err(self.cut(e)),
        }
    }

    /// Closes every file of the log after the last I/O.
    pub fn finish(mut self) -> Result<(), Error> {
        let Some(w) = self.w.take() else { return Ok(()) };
        match w.finish(self.last_ns) {
            Ok(_) => Ok(()),
            Err(e) => Err(self.cut(e)),
        }
    }

    /// A write failed (a full disk): the log is cut back to its last whole step, what was
    /// buffered dropped, nothing more written.
    fn cut(&mut self, e: std::io::Error) -> Error {
        if let Some(w) = self.w.take() {
            // Dropped without a flush: a buffer written after the cut would leave a hole and half a line.
            let (_, _unwritten) = w.into_inner().into_parts();
        }
        let cut = self.file.set_len(self.committed);
        Error::Runtime(format!(
            "writing the I/O log {}: {e}; {}",
            self.path.display(),
            match cut {
                Ok(()) => format!("it holds the steps before, {} I/Os, cut back to their end", self.logged),
                Err(c) => format!("it could not be cut back to the steps before ({c}): its last line may be cut short"),
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by an outside test: a hard link to the database was taken for another file and the
    /// log emptied the database; two runs wrote one log at once and one of them was lost.
    #[test]
    fn a_log_is_none_of_the_runs_files_by_any_name_and_one_run_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        std::fs::write(&db, b"db").unwrap();
        std::fs::hard_link(&db, dir.path().join("hard")).unwrap();
        let others = vec![("the results database", db.clone())];
        let e = check(&dir.path().join("hard"), &others).unwrap_err().to_string();
        assert!(e.contains("is the results database"), "{e}");
        assert!(check(Path::new("-"), &[]).unwrap_err().to_string().contains("not to standard output"));
        // Checked, nothing left behind.
        let log = dir.path().join("x.log");
        check(&log, &others).unwrap();
        assert!(!log.exists());
        let first = RunLog::create(&log, &[]).unwrap();
        let e = RunLog::create(&log, &[]).err().unwrap().to_string();
        assert!(e.contains("being written by another run"), "{e}");
        first.finish().unwrap();
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "fio version 3 iolog\n");
        assert_eq!(std::fs::read(&db).unwrap(), b"db");
    }
}
