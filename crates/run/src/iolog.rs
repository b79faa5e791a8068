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
use iocurve_trace::{FioLogWriter, TraceDir};

use crate::Error;
use crate::coordinator::HostIoLog;

/// Whether `path` can take the log: checked before any target is opened or prepared (a scratch
/// file of a terabyte is not written for a run that cannot keep its log). Leaves the file, empty
/// when new, and changes nothing in one that exists.
/// `others`: the files the run reads or writes besides (the results database, the verification
/// map, the traces it replays, the JSON result), by what they are: the log must not be one of
/// them (it would be emptied).
pub fn check(path: &Path, others: &[(&str, &Path)]) -> Result<(), Error> {
    let shown = path.display();
    let me = identity(path);
    if let Some((what, _)) = others.iter().find(|(_, p)| me.is_some() && identity(p) == me) {
        return Err(Error::Usage(format!(
            "--write-iolog {shown} is {what}: the log would overwrite it; name another file"
        )));
    }
    if let Ok(m) = std::fs::metadata(path)
        && !m.is_file()
    {
        return Err(Error::Usage(format!(
            "--write-iolog {shown}: it exists and is not a regular file (a device, a directory or a FIFO); name a new file"
        )));
    }
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map(drop)
        .map_err(|e| Error::Usage(format!("--write-iolog {shown}: cannot create it: {e}")))
}

/// Where a path leads, for telling two names of one file apart: the file itself where it
/// exists (symbolic links followed), else its canonical directory and name.
fn identity(p: &Path) -> Option<PathBuf> {
    if let Ok(c) = std::fs::canonicalize(p) {
        return Some(c);
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    // A link to a file not there yet leads where creating it would write.
    if let Ok(to) = std::fs::read_link(p) {
        return identity(&dir.join(to));
    }
    Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
}

/// The run's I/O log as it is written.
pub struct RunLog {
    path: PathBuf,
    w: FioLogWriter<BufWriter<File>>,
    /// When the run's first logged step started (Unix ns, the coordinator's clock).
    origin: Option<i64>,
    /// The latest time written (ns since the origin): lines never go back in time.
    last_ns: u64,
    /// I/Os written, and those the hosts did not keep.
    pub logged: u64,
    pub left_out: u64,
}

impl RunLog {
    /// Creates (or empties) `path` for the targets of the run. Refused before anything runs: a
    /// path that is one of the targets, one that is not a regular file (a device, a FIFO), and
    /// targets whose names a fio log cannot carry.
    pub fn create(path: &Path, targets: &[TargetInfo]) -> Result<RunLog, Error> {
        let shown = path.display();
        check(path, &[])?;
        let canonical = |p: &Path| std::fs::canonicalize(p).ok();
        if let Some(c) = canonical(path)
            && targets.iter().any(|t| canonical(Path::new(&t.path)).as_ref() == Some(&c))
        {
            return Err(Error::Usage(format!(
                "--write-iolog {shown} is a target of this run: the log would overwrite what the run measures; name another file"
            )));
        }
        let names: Vec<String> = targets.iter().map(|t| t.path.clone()).collect();
        if let Some(bad) = names.iter().find(|n| n.is_empty() || n.chars().any(char::is_whitespace)) {
            return Err(Error::Usage(format!(
                "--write-iolog: target {bad:?} has white space in its name, which a fio I/O log cannot carry (it splits a line's fields at white space); rename the target or leave the log out"
            )));
        }
        let file =
            File::create(path).map_err(|e| Error::Usage(format!("--write-iolog {shown}: cannot create it: {e}")))?;
        let w = FioLogWriter::new(BufWriter::new(file), &names)
            .map_err(|e| Error::Usage(format!("--write-iolog {shown}: {e}")))?;
        Ok(RunLog { path: path.to_path_buf(), w, origin: None, last_ns: 0, logged: 0, left_out: 0 })
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
        for (t, op) in ios {
            self.last_ns = self.last_ns.max(t);
            let dir = match op.dir {
                Dir::Read => TraceDir::Read,
                Dir::Write => TraceDir::Write,
                Dir::Trim => TraceDir::Trim,
            };
            self.w.io(self.last_ns, op.target, op.offset, op.len, dir).map_err(|e| self.failed(e))?;
            self.logged += 1;
        }
        self.w.flush().map_err(|e| self.failed(e))
    }

    /// Closes every file of the log after the last I/O.
    pub fn finish(self) -> Result<(), Error> {
        let (path, last) = (self.path.clone(), self.last_ns);
        self.w
            .finish(last)
            .map(drop)
            .map_err(|e| Error::Runtime(format!("writing the I/O log {}: {e}", path.display())))
    }

    fn failed(&self, e: std::io::Error) -> Error {
        Error::Runtime(format!("writing the I/O log {}: {e}; the steps before are in it", self.path.display()))
    }
}
