//! blktrace's binary output: `struct blk_io_trace` records (48 bytes, then `pdu_len` bytes of
//! payload) in the byte order of the machine that captured them, one file per CPU. The I/Os are
//! the queue events (`Q`, `__BLK_TA_QUEUE`) of reads, writes and discards, as fio's replay and
//! `blkparse` see a workload; every other event is counted by name. The per-CPU files share the
//! kernel's clock (`time`, ns), so merging is a stable sort by time.
//!
//! Differences from fio's reader (fio#1257 aside, which reads one per-CPU file): a queue event
//! that carries data and the flush bit (a write with REQ_PREFLUSH) is a write here, not a flush;
//! a file that ends inside a record ends there (counted, as a capture cut short leaves it), where
//! fio stops with "short read" too.

use std::io::Read;
use std::path::PathBuf;

use crate::{Builder, Format, Limits, Trace, TraceDir, TraceError, TraceIo, checked_end};

const MAGIC: u32 = 0x6561_7400;
const VERSION: u32 = 0x07;
const RECORD: usize = 48;

const TC_READ: u32 = 1 << 0;
const TC_WRITE: u32 = 1 << 1;
const TC_FLUSH: u32 = 1 << 2;
const TC_NOTIFY: u32 = 1 << 10;
const TC_PC: u32 = 1 << 9;
const TC_DISCARD: u32 = 1 << 13;
const TA_QUEUE: u32 = 1;
const TN_TIMESTAMP: u32 = 1;

pub(crate) fn is_magic(word: u32) -> bool {
    word & 0xffff_ff00 == MAGIC
}

/// One record's fields, in the host's order whatever the file's.
#[derive(Debug, Clone, Copy)]
struct Record {
    time: u64,
    sector: u64,
    bytes: u32,
    action: u32,
    pid: u32,
    device: u32,
    pdu_len: u16,
}

/// What the files of one capture gather: the I/Os with the kernel's times, devices by dev_t.
struct Capture {
    b: Builder,
    /// dev_t → device index in `b`.
    devs: std::collections::HashMap<u32, u32>,
    /// A timestamp notify: (wall ns, kernel time ns).
    wall: Option<(u64, u64)>,
}

pub(crate) fn parse_one(file: &str, r: impl Read, limits: &Limits) -> Result<Trace, TraceError> {
    let mut c = Capture::new();
    c.read(file, r, limits)?;
    c.finish(file)
}

pub(crate) fn parse_many(files: &[(&str, &[u8])], limits: &Limits) -> Result<Trace, TraceError> {
    let mut c = Capture::new();
    for (name, bytes) in files {
        c.read(name, *bytes, limits)?;
    }
    c.finish(files.first().map_or("blktrace", |f| f.0))
}

/// Reads the per-CPU files of one capture, in the order given.
pub(crate) fn read_files(files: &[PathBuf], limits: &Limits) -> Result<Trace, TraceError> {
    let mut total = 0u64;
    let mut opened = Vec::new();
    for p in files {
        let shown = p.display().to_string();
        let f = crate::open(p).map_err(|source| TraceError::Io { file: shown.clone(), source })?;
        total =
            total.saturating_add(f.metadata().map_err(|source| TraceError::Io { file: shown.clone(), source })?.len());
        opened.push((shown, f));
    }
    let first = opened.first().map_or_else(String::new, |f| f.0.clone());
    crate::check_size(&first, total, limits)?;
    let mut c = Capture::new();
    for (shown, f) in opened {
        c.read(&shown, std::io::BufReader::with_capacity(1 << 16, f), limits)?;
    }
    let name = if files.len() > 1 { format!("{first} (and {} more per-CPU files)", files.len() - 1) } else { first };
    c.finish(&name)
}

/// Reads up to `buf.len()` bytes; fewer only at the end of the input.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl Capture {
    fn new() -> Self {
        Capture { b: Builder::default(), devs: Default::default(), wall: None }
    }

    fn read(&mut self, file: &str, mut r: impl Read, limits: &Limits) -> Result<(), TraceError> {
        let io_err = |source| TraceError::Io { file: file.to_string(), source };
        let mut head = [0u8; RECORD];
        let mut pdu = Vec::new();
        let mut at = 0u64;
        let mut big_endian = None;
        loop {
            let got = read_full(&mut r, &mut head).map_err(io_err)?;
            if got == 0 {
                return Ok(());
            }
            if got < RECORD {
                // A cut record still starts with the magic: anything else is not blktrace's.
                let word0 = (got >= 4).then(|| u32::from_le_bytes(word(&head, 0)));
                let ok = word0.map_or(at > 0, |w| is_magic(w) || is_magic(w.swap_bytes()));
                check_magic(file, at, if ok { MAGIC | VERSION } else { word0.unwrap_or(0) }, false)?;
                self.b.leave_out("truncated record at a file's end");
                return Ok(());
            }
            let big = *big_endian.get_or_insert_with(|| !is_magic(u32::from_le_bytes(word(&head, 0))));
            let (rec, magic) = decode(&head, big);
            check_magic(file, at, magic, big)?;
            pdu.clear();
            pdu.resize(usize::from(rec.pdu_len), 0);
            let got = read_full(&mut r, &mut pdu).map_err(io_err)?;
            if got < pdu.len() {
                self.b.leave_out("truncated record at a file's end");
                return Ok(());
            }
            self.record(file, at, &rec, &pdu, big, limits)?;
            at += (RECORD + pdu.len()) as u64;
        }
    }

    fn record(
        &mut self,
        file: &str,
        at: u64,
        t: &Record,
        pdu: &[u8],
        big: bool,
        limits: &Limits,
    ) -> Result<(), TraceError> {
        let category = t.action >> 16;
        let act = t.action & 0xffff;
        if category & TC_NOTIFY != 0 {
            if act == TN_TIMESTAMP && pdu.len() >= 8 && self.wall.is_none() {
                let w = |i| if big { u32::from_be_bytes(word(pdu, i)) } else { u32::from_le_bytes(word(pdu, i)) };
                let wall = u64::from(w(0)).saturating_mul(1_000_000_000).saturating_add(u64::from(w(4)));
                self.wall = Some((wall, t.time));
            }
            self.b.leave_out("notify (process, timestamp, message)");
            return Ok(());
        }
        if act != TA_QUEUE {
            self.b.leave_out(action_name(act));
            return Ok(());
        }
        let dir = if category & TC_DISCARD != 0 {
            TraceDir::Trim
        } else if category & TC_WRITE != 0 {
            TraceDir::Write
        } else if category & TC_READ != 0 {
            TraceDir::Read
        } else if category & TC_FLUSH != 0 {
            self.b.leave_out("flush (Q without data)");
            return Ok(());
        } else {
            self.b.leave_out("queue without a direction");
            return Ok(());
        };
        if category & TC_PC != 0 {
            self.b.leave_out("queue of a passthrough (pc) request");
            return Ok(());
        }
        if t.bytes == 0 {
            self.b.leave_out(if category & TC_FLUSH != 0 { "flush (Q without data)" } else { "zero-size queue" });
            return Ok(());
        }
        let bad = |msg: String| TraceError::Record { file: file.to_string(), byte: at, msg };
        let offset = t.sector.checked_mul(512).filter(|o| checked_end(*o, t.bytes).is_some()).ok_or_else(|| {
            bad(format!(
                "sector {} and {} bytes end past 2^64 bytes: a corrupt record (cut the file before it)",
                t.sector, t.bytes
            ))
        })?;
        let device = match self.devs.get(&t.device) {
            Some(&d) => d,
            None => {
                let d = self.b.device(&format!("{},{}", t.device >> 20, t.device & 0xfffff));
                self.devs.insert(t.device, d);
                d
            }
        };
        self.b.push(file, TraceIo { t_ns: t.time, device, offset, len: t.bytes, dir, pid: t.pid }, limits)
    }

    fn finish(mut self, file: &str) -> Result<Trace, TraceError> {
        if let Some(first) = self.b.ios.iter().map(|io| io.t_ns).min()
            && let Some((wall, at)) = self.wall
        {
            let w = i128::from(wall) + i128::from(first) - i128::from(at);
            self.b.wall_start_ns = u64::try_from(w).ok();
        }
        let seen_other = self.b.left_out.keys().any(|k| k.starts_with("complete") || k.starts_with("issue"));
        let hint = if seen_other {
            "only events other than queue (Q) were captured: capture with the queue events \
             (blktrace without -a, or -a queue) so that every I/O is seen once, when it was asked for"
        } else {
            "the I/Os of a blktrace are its queue events (Q) of reads, writes and discards with data: \
             capture the device under load (blktrace -d /dev/sdX -a queue)"
        };
        self.b.finish(file, Format::Blktrace, hint)
    }
}

fn word(b: &[u8], at: usize) -> [u8; 4] {
    [b[at], b[at + 1], b[at + 2], b[at + 3]]
}

fn decode(h: &[u8; RECORD], big: bool) -> (Record, u32) {
    let u32_at = |i: usize| if big { u32::from_be_bytes(word(h, i)) } else { u32::from_le_bytes(word(h, i)) };
    let u64_at = |i: usize| {
        let b = [h[i], h[i + 1], h[i + 2], h[i + 3], h[i + 4], h[i + 5], h[i + 6], h[i + 7]];
        if big { u64::from_be_bytes(b) } else { u64::from_le_bytes(b) }
    };
    let u16_at =
        |i: usize| if big { u16::from_be_bytes([h[i], h[i + 1]]) } else { u16::from_le_bytes([h[i], h[i + 1]]) };
    let rec = Record {
        time: u64_at(8),
        sector: u64_at(16),
        bytes: u32_at(24),
        action: u32_at(28),
        pid: u32_at(32),
        device: u32_at(36),
        pdu_len: u16_at(46),
    };
    (rec, u32_at(0))
}

fn check_magic(file: &str, at: u64, magic: u32, big: bool) -> Result<(), TraceError> {
    let bad = |msg: String| Err(TraceError::Record { file: file.to_string(), byte: at, msg });
    if !is_magic(magic) && at == 0 {
        return bad(format!(
            "not a blktrace file: its first bytes ({magic:#010x}) are no blktrace record in either byte \
             order (0x656174xx): name only the per-CPU files blktrace wrote (DEVICE.blktrace.N)"
        ));
    }
    if !is_magic(magic) {
        let order = if big { "big" } else { "little" };
        return bad(format!(
            "no blktrace record here (magic {magic:#010x}, {order}-endian like the file's first record, \
             where 0x656174xx was expected): the file is corrupt or not a blktrace capture; cut it before \
             this byte to read what precedes"
        ));
    }
    if magic & 0xff != VERSION {
        return bad(format!(
            "blktrace record version {}, where iocurve (as blkparse and fio) reads version {VERSION}: \
             convert the capture with the blktrace tools of its time",
            magic & 0xff
        ));
    }
    Ok(())
}

/// The left-out reason of a non-queue action, with blkparse's letter.
fn action_name(act: u32) -> &'static str {
    match act {
        2 => "back merge (M)",
        3 => "front merge (F)",
        4 => "get request (G)",
        5 => "sleep request (S)",
        6 => "requeue (R)",
        7 => "issue (D)",
        8 => "complete (C)",
        9 => "plug (P)",
        10 => "unplug (U)",
        11 => "unplug by timer (UT)",
        12 => "insert (I)",
        13 => "split (X)",
        14 => "bounce (B)",
        15 => "remap (A)",
        16 => "abort",
        17 => "driver data",
        _ => "unknown action",
    }
}
