//! fio's I/O logs (`--write_iolog`, `--read_iolog`), versions 2 and 3, read as fio's iolog.c
//! reads them (read, never copied).
//!
//! - Version 2, first line `fio version 2 iolog`: `FILE add|open|close` and
//!   `FILE read|write|trim|sync|datasync|wait OFFSET LENGTH`. A v2 log has no time per I/O: fio
//!   issues its I/Os as fast as it can, and `FILE wait N 0` holds the next ones until N
//!   **milliseconds after the job's start** (fio compares N with `mtime_since_genesis()`; the
//!   HOWTO's "microseconds, relative to the previous wait" is not what the code does). So an I/O's
//!   time is the largest wait before it: I/Os between two waits share a time.
//! - Version 3, first line `fio version 3 iolog` (what fio 3.31 and later write): every line
//!   starts with a time in **microseconds** since the job's start. `wait` is ignored (as fio does).
//!
//! Blank lines are skipped; any other line fio would not read is an error here (fio skips it with
//! a message), so a log never replays differently from what it says unnoticed.

use std::io::BufRead;

use crate::text::{Lines, quote, uint};
use crate::{Builder, Format, Limits, Trace, TraceDir, TraceError, TraceIo, checked_end};

pub(crate) const V2: &[u8] = b"fio version 2 iolog";
pub(crate) const V3: &[u8] = b"fio version 3 iolog";

pub(crate) fn parse(file: &str, r: impl BufRead, format: Format, limits: &Limits) -> Result<Trace, TraceError> {
    let v3 = format == Format::FioV3;
    let mut lines = Lines::new(file, r);
    let mut b = Builder::default();
    let mut header = false;
    // v2: the time the last wait holds I/Os until.
    let mut clock_ns = 0u64;
    while let Some((n, line)) = lines.next_line()? {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if !header {
            // detect() saw the version line: it is this one.
            header = true;
            continue;
        }
        let tokens: Vec<&str> = line.split_ascii_whitespace().take(6).collect();
        let (t_ns, rest) = if v3 {
            let t = uint(tokens[0]).and_then(|us| us.checked_mul(1000)).ok_or_else(|| {
                TraceError::line(
                    file,
                    n,
                    format!(
                        "time {} is not a number of microseconds: a v3 line is TIME FILE ACTION [OFFSET LENGTH]",
                        quote(tokens[0])
                    ),
                )
            })?;
            (t, &tokens[1..])
        } else {
            (clock_ns, &tokens[..])
        };
        let line_of = Line { file, n, v3 };
        match *rest {
            [_, act] => line_of.file_action(act, &mut b)?,
            [name, act, off, len] => {
                let Some(io) = line_of.io(act, off, len, &mut b)? else { continue };
                if act == "wait" {
                    if !v3 {
                        let until =
                            io.0.checked_mul(1_000_000).ok_or_else(|| line_of.err("wait of more than 2^64 ns"))?;
                        clock_ns = clock_ns.max(until);
                    }
                    continue;
                }
                let (offset, len, dir) = (io.0, io.1, io.2);
                let device = b.device(name);
                b.push(file, TraceIo { t_ns, device, offset, len, dir, pid: 0 }, limits)?;
            }
            [_, "wait", _] if !v3 => {
                return Err(line_of.err(
                    "a wait without its second number: fio reads `FILE wait MILLISECONDS 0` and skips \
                     this line (so it waits for nothing): add the 0, or remove the line",
                ));
            }
            _ => {
                let form = if v3 { "TIME FILE ACTION [OFFSET LENGTH]" } else { "FILE ACTION [OFFSET LENGTH]" };
                return Err(line_of.err(format!(
                    "{} fields where a v{} line is {form} (file names cannot hold spaces)",
                    tokens.len(),
                    if v3 { 3 } else { 2 }
                )));
            }
        }
    }
    b.finish(
        file,
        format,
        "the I/Os of a fio log are its read, write and trim lines with a length (FILE ACTION OFFSET \
         LENGTH, after a time in v3): write the log with fio --write_iolog during the I/O to replay",
    )
}

struct Line<'a> {
    file: &'a str,
    n: u64,
    v3: bool,
}

impl Line<'_> {
    fn err(&self, msg: impl Into<String>) -> TraceError {
        TraceError::line(self.file, self.n, msg)
    }

    fn file_action(&self, act: &str, b: &mut Builder) -> Result<(), TraceError> {
        match act {
            "add" | "open" | "close" => {
                b.leave_out(&format!("file {act}"));
                Ok(())
            }
            "read" | "write" | "trim" | "sync" | "datasync" | "wait" => Err(self.err(format!(
                "{act} without OFFSET and LENGTH: fio reads `{}FILE {act} OFFSET LENGTH`",
                if self.v3 { "TIME " } else { "" }
            ))),
            _ => Err(self.err(format!("file action {} is not add, open or close", quote(act)))),
        }
    }

    /// An I/O line's (offset, length, direction); for a wait, (milliseconds, 0, Read); None for a
    /// line left out.
    fn io(&self, act: &str, off: &str, len: &str, b: &mut Builder) -> Result<Option<(u64, u32, TraceDir)>, TraceError> {
        let offset = uint(off).ok_or_else(|| self.err(format!("offset {} is not a number of bytes", quote(off))))?;
        let len64 = uint(len).ok_or_else(|| self.err(format!("length {} is not a number of bytes", quote(len))))?;
        let dir = match act {
            "read" => TraceDir::Read,
            "write" => TraceDir::Write,
            "trim" => TraceDir::Trim,
            "sync" | "datasync" => {
                b.leave_out(act);
                return Ok(None);
            }
            "wait" if self.v3 => {
                b.leave_out("wait (ignored in v3, as fio does)");
                return Ok(None);
            }
            "wait" => {
                b.leave_out("wait (v2 timing)");
                return Ok(Some((offset, 0, TraceDir::Read)));
            }
            _ => {
                return Err(self.err(format!(
                    "action {} is not read, write, trim, sync, datasync{}",
                    quote(act),
                    if self.v3 { "" } else { " or wait" }
                )));
            }
        };
        let len = u32::try_from(len64)
            .map_err(|_| self.err(format!("length {len64} is over 4 GiB, more than one I/O can carry")))?;
        if len == 0 {
            b.leave_out("zero-length I/O");
            return Ok(None);
        }
        if checked_end(offset, len).is_none() {
            return Err(self.err(format!("offset {offset} and length {len} end past 2^64 bytes")));
        }
        Ok(Some((offset, len, dir)))
    }
}
