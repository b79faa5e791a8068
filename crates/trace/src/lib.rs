//! Block I/O traces read and described (issue 45): what production did, as a list of I/Os with
//! their times, for a replay through the open-loop scheduler and for a plan that mimics it. Pure:
//! no clock, no I/O but reading the trace files; never panics on any input.
//!
//! # Formats (detected from the content, not the file name)
//!
//! - **blktrace** binary output (`struct blk_io_trace`: a 48-byte record and `pdu_len` bytes of
//!   payload, magic `0x65617400 | 7`, either byte order). The per-CPU files of one device
//!   (`sdb.blktrace.0`, `sdb.blktrace.1`, …) are merged by time, as `blkparse -i sdb` does:
//!   [`read_trace`] on `dir/sdb` or on any of `dir/sdb.blktrace.N` reads them all. The I/Os are the
//!   queue events (`Q`) of reads, writes and discards; every other event is counted in
//!   [`Trace::left_out`] by name. Sectors are 512 bytes; devices are named `MAJ,MIN` as blkparse
//!   prints them (the kernel's dev_t: major = dev >> 20, minor = dev & 0xfffff).
//! - **fio I/O logs**, version 2 (`fio version 2 iolog`: `FILE ACTION [OFFSET LENGTH]`, timed by
//!   `FILE wait MS 0` lines, which fio reads as "not before MS milliseconds after the job's start")
//!   and version 3 (`fio version 3 iolog`: `MICROSECONDS FILE ACTION [OFFSET LENGTH]`, what
//!   `--write_iolog` writes). Files are the devices, by name; `add`/`open`/`close`, `sync`,
//!   `datasync` and zero-length I/Os are left out.
//! - **CSV**: a header naming its columns, in any order (names case-insensitive):
//!   `time` (seconds since the trace start, decimal, up to nanoseconds) or `time_ns` (integer
//!   nanoseconds), `offset` (bytes), `size` (bytes; also `len`, `length`, `bytes`), `op`
//!   (`read`/`write`/`trim`/`discard` or `R`/`W`/`T`/`D`, case-insensitive; also `dir`, `rw`),
//!   optional `device` (a name; without it every I/O is on one device named after the file) and
//!   optional `pid`; other columns are ignored. Separated by `,`, `;` or tab (the first of them in
//!   the header); a UTF-8 byte-order mark, `"quoted"` fields (`""` inside for a quote), blank
//!   lines and lines starting with `#` are accepted. Rows need not be in time order.
//!
//! Every trace comes out the same way ([`Trace`]): I/Os sorted by time (stable: equal times keep
//! the file's order), the first at time 0, devices numbered in the order of their first I/O, and
//! what was not an I/O counted by reason. A trace without any I/O is an error that says what it
//! held instead.

mod blktrace;
mod csv;
mod fio;
mod stats;
mod text;
mod write;

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

pub use stats::{DeviceStats, DirStats, InterArrival, SizeShare, Skew, TraceStats};
pub use write::FioLogWriter;

/// The direction of an I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceDir {
    Read,
    Write,
    Trim,
}

impl TraceDir {
    pub const ALL: [TraceDir; 3] = [TraceDir::Read, TraceDir::Write, TraceDir::Trim];

    pub fn name(self) -> &'static str {
        match self {
            TraceDir::Read => "read",
            TraceDir::Write => "write",
            TraceDir::Trim => "trim",
        }
    }
}

impl fmt::Display for TraceDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One I/O of a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceIo {
    /// Nanoseconds since the trace's first I/O (the first is 0).
    pub t_ns: u64,
    /// Index into [`Trace::devices`].
    pub device: u32,
    /// Bytes from the device's start; `offset + len` never overflows.
    pub offset: u64,
    /// Bytes, over 0.
    pub len: u32,
    pub dir: TraceDir,
    /// The process that issued it; 0 where the format has none (fio logs, CSV without `pid`).
    pub pid: u32,
}

/// The format a trace was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Format {
    Blktrace,
    FioV2,
    FioV3,
    Csv,
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Format::Blktrace => "blktrace",
            Format::FioV2 => "fio iolog v2",
            Format::FioV3 => "fio iolog v3",
            Format::Csv => "csv",
        })
    }
}

/// A trace as read: its I/Os in time order and what was left out.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    /// None only for a trace built by hand.
    pub format: Option<Format>,
    /// Device names: `MAJ,MIN` (blktrace), the file name (fio logs), the `device` column (CSV).
    pub devices: Vec<String>,
    /// Sorted by `t_ns`, stable (equal times keep the order of the file, per-CPU files in their
    /// numeric order).
    pub ios: Vec<TraceIo>,
    /// Events that are not I/Os, by reason (sorted by reason): flushes, fio waits and opens,
    /// zero-length I/Os, blktrace events other than queue (complete, issue, notify, …).
    pub left_out: Vec<(String, u64)>,
    /// The wall-clock time (ns since the Unix epoch) of the first I/O, where the format gives one
    /// (blktrace with a timestamp notify record, as blktrace writes at its start).
    pub wall_start_ns: Option<u64>,
}

impl Trace {
    /// The time of the last I/O (the first is at 0).
    pub fn duration_ns(&self) -> u64 {
        self.ios.last().map_or(0, |io| io.t_ns)
    }

    /// The trace's figures: see [`TraceStats`].
    pub fn stats(&self) -> TraceStats {
        stats::compute(self)
    }

    /// How many events were left out for `reason` (0 for one never seen).
    pub fn left_out_count(&self, reason: &str) -> u64 {
        self.left_out.iter().find(|(r, _)| r == reason).map_or(0, |(_, n)| *n)
    }
}

/// Caps on what a trace may hold, so that no input makes the reader allocate without bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// I/Os at most (default 50 million: about 1.6 GB in memory).
    pub max_ios: u64,
    /// Bytes of trace files at most, all per-CPU files together (default 256 GiB).
    pub max_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_ios: 50_000_000, max_bytes: 256 << 30 }
    }
}

/// Why a trace could not be read. Every message names the file and the line (text) or byte
/// (blktrace) and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{file}: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}:{line}: {msg}")]
    Line { file: String, line: u64, msg: String },
    #[error("{file} at byte {byte}: {msg}")]
    Record { file: String, byte: u64, msg: String },
    #[error("{file}: {msg}")]
    File { file: String, msg: String },
    #[error(
        "{file}: more than {limit} I/Os, the most a trace may hold: cut the trace (a time range, \
         one device) or raise the limit"
    )]
    TooManyIos { file: String, limit: u64 },
}

impl TraceError {
    pub(crate) fn line(file: &str, line: u64, msg: impl Into<String>) -> Self {
        TraceError::Line { file: file.to_string(), line, msg: msg.into() }
    }
    pub(crate) fn file(file: &str, msg: impl Into<String>) -> Self {
        TraceError::File { file: file.to_string(), msg: msg.into() }
    }
}

/// Reads the trace at `path`, whatever its format (see the crate's documentation). A blktrace
/// file `dir/sdb.blktrace.N`, or `dir/sdb` where only `dir/sdb.blktrace.N` files exist, reads all
/// the per-CPU files `dir/sdb.blktrace.*` together.
pub fn read_trace(path: &Path, limits: &Limits) -> Result<Trace, TraceError> {
    let shown = path.display().to_string();
    if path.is_dir() {
        return Err(TraceError::file(
            &shown,
            "is a directory: name a trace file, or a blktrace capture by its device (dir/sdb for \
             dir/sdb.blktrace.0, .1, …)",
        ));
    }
    if let Some(files) = blktrace_cpu_files(path).map_err(|source| TraceError::Io { file: shown.clone(), source })? {
        return blktrace::read_files(&files, limits);
    }
    let file = open(path).map_err(|source| TraceError::Io { file: shown.clone(), source })?;
    let size = file.metadata().map_err(|source| TraceError::Io { file: shown.clone(), source })?.len();
    check_size(&shown, size, limits)?;
    let name = path.file_name().map_or_else(|| shown.clone(), |n| n.to_string_lossy().into_owned());
    parse_reader(&shown, &name, std::io::BufReader::with_capacity(1 << 16, file), limits)
}

/// Reads several traces as one (a capture of several devices, the logs of several fio jobs), all
/// of one format. blktrace captures (each named as [`read_trace`] takes it) are merged on their
/// common clock (the kernel's, one per machine); other traces each start at time 0 (fio's jobs
/// start together) and are merged by time. A device named alike in two traces is one device.
pub fn read_traces(paths: &[PathBuf], limits: &Limits) -> Result<Trace, TraceError> {
    let Some(first) = paths.first() else {
        return Err(TraceError::file("(no trace)", "no trace named: name at least one trace file"));
    };
    let mut blk_files = Vec::new();
    let mut blk = 0;
    for p in paths {
        let shown = p.display().to_string();
        let files = blktrace_cpu_files(p).map_err(|source| TraceError::Io { file: shown.clone(), source })?;
        let files = files.unwrap_or_else(|| vec![p.clone()]);
        if starts_as_blktrace(&files[0]).map_err(|source| TraceError::Io { file: shown, source })? {
            blk += 1;
        }
        blk_files.extend(files);
    }
    if blk == paths.len() {
        return blktrace::read_files(&blk_files, limits);
    }
    if blk > 0 {
        return Err(TraceError::file(
            &first.display().to_string(),
            "blktrace captures and text traces together: read them apart (their clocks differ)",
        ));
    }
    let mut b = Builder::default();
    let mut format = None;
    for p in paths {
        let shown = p.display().to_string();
        let t = read_trace(p, limits)?;
        if format.is_some_and(|f| Some(f) != t.format) {
            return Err(TraceError::file(&shown, "traces of different formats: merge traces of one format"));
        }
        format = t.format;
        for (reason, n) in &t.left_out {
            *b.left_out.entry(reason.clone()).or_insert(0) += n;
        }
        for io in &t.ios {
            let device = b.device(&t.devices[io.device as usize]);
            b.push(&shown, TraceIo { device, ..*io }, limits)?;
        }
    }
    b.finish(&first.display().to_string(), format.unwrap_or(Format::Csv), "")
}

/// Opens a trace file. A FIFO is opened without waiting for a writer (a plain open would hold the
/// run for ever when none comes: found by an outside test), then read as any file: without a
/// writer it reads as empty.
pub(crate) fn open(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    use std::os::unix::io::AsRawFd;
    if !std::fs::metadata(path)?.file_type().is_fifo() {
        return std::fs::File::open(path);
    }
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)?;
    // SAFETY: F_GETFL and F_SETFL on a descriptor this function owns; no memory is passed.
    let flags = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
    // SAFETY: as above; the flags are those just read, less O_NONBLOCK.
    if flags < 0 || unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(f)
}

fn starts_as_blktrace(path: &Path) -> std::io::Result<bool> {
    let mut head = [0u8; 4];
    // (A FIFO is not a per-CPU file: reading its head would take what the trace's reader needs.)
    if !std::fs::metadata(path)?.is_file() {
        return Ok(false);
    }
    let n = std::fs::File::open(path)?.read(&mut head)?;
    Ok(n == 4 && detect(&head) == Some(Format::Blktrace))
}

/// Parses one trace file's bytes (`name` in messages; its base name names the device of a CSV
/// without a `device` column). A blktrace given here is one per-CPU file.
pub fn parse(name: &str, bytes: &[u8], limits: &Limits) -> Result<Trace, TraceError> {
    check_size(name, bytes.len() as u64, limits)?;
    let base = Path::new(name).file_name().map_or_else(|| name.to_string(), |n| n.to_string_lossy().into_owned());
    parse_reader(name, &base, bytes, limits)
}

/// Parses the per-CPU files of one blktrace capture (name, bytes), merged by time.
pub fn parse_blktrace_cpus(files: &[(&str, &[u8])], limits: &Limits) -> Result<Trace, TraceError> {
    let total = files.iter().map(|(_, b)| b.len() as u64).sum();
    check_size(files.first().map_or("blktrace", |f| f.0), total, limits)?;
    blktrace::parse_many(files, limits)
}

fn check_size(file: &str, size: u64, limits: &Limits) -> Result<(), TraceError> {
    if size > limits.max_bytes {
        return Err(TraceError::file(
            file,
            format!(
                "{size} bytes, over the {} bytes a trace may have: cut the trace or raise the limit",
                limits.max_bytes
            ),
        ));
    }
    Ok(())
}

/// The first bytes of a trace, enough to tell its format.
const SNIFF: usize = 4096;

fn parse_reader(file: &str, base: &str, mut r: impl Read, limits: &Limits) -> Result<Trace, TraceError> {
    let mut head = Vec::with_capacity(SNIFF);
    (&mut r)
        .take(SNIFF as u64)
        .read_to_end(&mut head)
        .map_err(|source| TraceError::Io { file: file.into(), source })?;
    // Said for what they are (found by an outside test: a UTF-16 CSV was "not text", a fio log
    // of another version was read as a CSV without columns).
    if head.starts_with(b"\xff\xfe") || head.starts_with(b"\xfe\xff") {
        return Err(TraceError::file(
            file,
            "UTF-16 text (its byte-order mark says so): traces are read as UTF-8 or ASCII; convert it, e.g. `iconv -f UTF-16 -t UTF-8 FILE > FILE.csv`",
        ));
    }
    if let Some(first) = head.split(|&b| b == b'\n').next()
        && first.starts_with(b"fio version ")
        && !first.starts_with(fio::V2)
        && !first.starts_with(fio::V3)
    {
        return Err(TraceError::file(
            file,
            format!(
                "{:?}: iocurve reads fio I/O logs of versions 2 and 3 (fio 3.31 and later write version 3)",
                String::from_utf8_lossy(first.trim_ascii())
            ),
        ));
    }
    let format = detect(&head);
    let whole = std::io::BufReader::with_capacity(1 << 16, std::io::Cursor::new(head).chain(r));
    match format {
        Some(Format::Blktrace) => blktrace::parse_one(file, whole, limits),
        Some(f @ (Format::FioV2 | Format::FioV3)) => fio::parse(file, whole, f, limits),
        Some(Format::Csv) => csv::parse(file, base, whole, limits),
        None => Err(TraceError::file(
            file,
            "not a trace iocurve reads: no blktrace record at its start (magic 0x65617400) and not \
             text (a fio I/O log or a CSV with a header): name a blktrace file, a fio I/O log or a CSV",
        )),
    }
}

/// The format of a trace from its first bytes: blktrace by its magic (either byte order), a fio
/// log by its version line, CSV for other text; None for binary that is not blktrace.
pub fn detect(head: &[u8]) -> Option<Format> {
    if head.len() >= 4 {
        let m = [head[0], head[1], head[2], head[3]];
        if blktrace::is_magic(u32::from_le_bytes(m)) || blktrace::is_magic(u32::from_be_bytes(m)) {
            return Some(Format::Blktrace);
        }
    }
    let text = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    if text.contains(&0) {
        return None;
    }
    let first = text.split(|&b| b == b'\n').map(|l| l.trim_ascii()).find(|l| !l.is_empty()).unwrap_or(b"");
    if first.starts_with(fio::V2) {
        Some(Format::FioV2)
    } else if first.starts_with(fio::V3) {
        Some(Format::FioV3)
    } else {
        Some(Format::Csv)
    }
}

/// The per-CPU files of a blktrace capture named by `path`, in their CPU order; None when
/// `path` is not one (then it is read as a single file).
fn blktrace_cpu_files(path: &Path) -> std::io::Result<Option<Vec<PathBuf>>> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return Ok(None) };
    let base = match cpu_suffix(name) {
        Some((base, _)) => base.to_string(),
        None if !path.exists() => name.to_string(),
        None => return Ok(None),
    };
    let mut found: Vec<(u64, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let fname = entry.file_name();
        let Some(fname) = fname.to_str() else { continue };
        if let Some((b, cpu)) = cpu_suffix(fname)
            && b == base
        {
            found.push((cpu, entry.path()));
        }
    }
    if found.is_empty() {
        return Ok(None);
    }
    found.sort();
    Ok(Some(found.into_iter().map(|(_, p)| p).collect()))
}

/// `sdb.blktrace.3` → ("sdb", 3).
fn cpu_suffix(name: &str) -> Option<(&str, u64)> {
    let (base, cpu) = name.rsplit_once(".blktrace.")?;
    if base.is_empty() || cpu.is_empty() || !cpu.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((base, cpu.parse().ok()?))
}

/// What a parser gathers before the common finish: I/Os with device numbers of its own, device
/// names, reasons left out.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    pub ios: Vec<TraceIo>,
    pub devices: Vec<String>,
    device_ids: std::collections::HashMap<String, u32>,
    pub left_out: BTreeMap<String, u64>,
    pub wall_start_ns: Option<u64>,
}

impl Builder {
    pub fn device(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.device_ids.get(name) {
            return id;
        }
        let id = self.devices.len() as u32;
        self.devices.push(name.to_string());
        self.device_ids.insert(name.to_string(), id);
        id
    }

    pub fn leave_out(&mut self, reason: &str) {
        *self.left_out.entry(reason.to_string()).or_insert(0) += 1;
    }

    /// Adds an I/O; refuses one past the limit.
    pub fn push(&mut self, file: &str, io: TraceIo, limits: &Limits) -> Result<(), TraceError> {
        if self.ios.len() as u64 >= limits.max_ios {
            return Err(TraceError::TooManyIos { file: file.to_string(), limit: limits.max_ios });
        }
        self.ios.push(io);
        Ok(())
    }

    /// Sorts (stable), rebases the times on the first I/O, renumbers the devices by first I/O and
    /// drops those without any; an error naming what was seen when no I/O is left.
    pub fn finish(mut self, file: &str, format: Format, nothing: &str) -> Result<Trace, TraceError> {
        if self.ios.is_empty() {
            let seen = if self.left_out.is_empty() {
                "nothing at all".to_string()
            } else {
                self.left_out.iter().map(|(r, n)| format!("{n} {r}")).collect::<Vec<_>>().join(", ")
            };
            return Err(TraceError::file(file, format!("no I/O in the trace (seen: {seen}): {nothing}")));
        }
        self.ios.sort_by_key(|io| io.t_ns);
        let t0 = self.ios[0].t_ns;
        let mut renumber: Vec<Option<u32>> = vec![None; self.devices.len()];
        let mut devices = Vec::new();
        for io in &mut self.ios {
            io.t_ns -= t0;
            let slot = &mut renumber[io.device as usize];
            io.device = *slot.get_or_insert_with(|| {
                devices.push(std::mem::take(&mut self.devices[io.device as usize]));
                (devices.len() - 1) as u32
            });
        }
        Ok(Trace {
            format: Some(format),
            devices,
            ios: self.ios,
            left_out: self.left_out.into_iter().collect(),
            wall_start_ns: self.wall_start_ns,
        })
    }
}

/// An I/O's end, refused where `offset + len` overflows.
pub(crate) fn checked_end(offset: u64, len: u32) -> Option<u64> {
    offset.checked_add(u64::from(len))
}
