//! iocurve's CSV trace: a header naming the columns (any order), one I/O per row. See the
//! crate's documentation (and README-section.md) for the columns; this is its one reader.

use std::borrow::Cow;
use std::io::BufRead;

use crate::text::{Lines, quote, uint};
use crate::{Builder, Format, Limits, Trace, TraceDir, TraceError, TraceIo, checked_end};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Time,
    TimeNs,
    Offset,
    Size,
    Op,
    Device,
    Pid,
}

impl Col {
    fn of(name: &str) -> Option<Col> {
        Some(match name.to_ascii_lowercase().as_str() {
            "time" => Col::Time,
            "time_ns" => Col::TimeNs,
            "offset" => Col::Offset,
            "size" | "len" | "length" | "bytes" => Col::Size,
            "op" | "dir" | "rw" => Col::Op,
            "device" => Col::Device,
            "pid" => Col::Pid,
            _ => return None,
        })
    }
}

/// Where each column is in a row.
struct Header {
    delim: u8,
    fields: usize,
    time: (usize, bool),
    offset: usize,
    size: usize,
    op: usize,
    device: Option<usize>,
    pid: Option<usize>,
}

pub(crate) fn parse(file: &str, base: &str, r: impl BufRead, limits: &Limits) -> Result<Trace, TraceError> {
    let mut lines = Lines::new(file, r);
    let mut b = Builder::default();
    let mut header: Option<Header> = None;
    while let Some((n, line)) = lines.next_line()? {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let err = |msg: String| TraceError::line(file, n, msg);
        let Some(h) = &header else {
            header = Some(read_header(line).map_err(err)?);
            continue;
        };
        let mut fields = Vec::new();
        split(line, h.delim, &mut fields).map_err(err)?;
        if fields.len() != h.fields {
            return Err(err(format!("{} fields where the header has {}", fields.len(), h.fields)));
        }
        let io = row(h, &fields, base, &mut b).map_err(err)?;
        if let Some(io) = io {
            b.push(file, io, limits)?;
        }
    }
    if header.is_none() {
        return Err(TraceError::file(file, "empty: a CSV trace starts with a header, e.g. time,offset,size,op"));
    }
    b.finish(file, Format::Csv, "every row with a size of 0 was left out: sizes are in bytes")
}

fn read_header(line: &str) -> Result<Header, String> {
    let delim = line.bytes().find(|b| matches!(b, b',' | b';' | b'\t')).unwrap_or(b',');
    let mut names = Vec::new();
    split(line, delim, &mut names)?;
    let mut cols: Vec<(Col, usize)> = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let Some(c) = Col::of(name.trim()) else { continue };
        let same = |o: Col| o == c || matches!((o, c), (Col::Time, Col::TimeNs) | (Col::TimeNs, Col::Time));
        if cols.iter().any(|(o, _)| same(*o)) {
            return Err(format!("column {} given twice (time and time_ns are one column)", quote(name)));
        }
        cols.push((c, i));
    }
    let find = |c: Col| cols.iter().find(|(o, _)| *o == c).map(|(_, i)| *i);
    let time = find(Col::Time).map(|i| (i, false)).or_else(|| find(Col::TimeNs).map(|i| (i, true)));
    let missing: Vec<&str> = [
        ("time (or time_ns)", time.is_none()),
        ("offset", find(Col::Offset).is_none()),
        ("size", find(Col::Size).is_none()),
        ("op", find(Col::Op).is_none()),
    ]
    .iter()
    .filter(|(_, m)| *m)
    .map(|(n, _)| *n)
    .collect();
    let (Some(time), Some(offset), Some(size), Some(op)) = (time, find(Col::Offset), find(Col::Size), find(Col::Op))
    else {
        return Err(format!(
            "the header {} has no column {}: a CSV trace's first line names its columns, e.g. \
             time,offset,size,op[,device][,pid] (separated by , ; or tab)",
            quote(line),
            missing.join(", ")
        ));
    };
    Ok(Header { delim, fields: names.len(), time, offset, size, op, device: find(Col::Device), pid: find(Col::Pid) })
}

/// One row's I/O; None for a row left out (size 0).
fn row(h: &Header, f: &[Cow<'_, str>], base: &str, b: &mut Builder) -> Result<Option<TraceIo>, String> {
    let field = |i: usize| f[i].trim();
    let t_ns = if h.time.1 {
        uint(field(h.time.0))
            .ok_or_else(|| format!("time_ns {} is not a number of nanoseconds", quote(field(h.time.0))))?
    } else {
        seconds_ns(field(h.time.0)).ok_or_else(|| {
            format!("time {} is not a number of seconds (like 12.000250, at most 584 years)", quote(field(h.time.0)))
        })?
    };
    let offset =
        uint(field(h.offset)).ok_or_else(|| format!("offset {} is not a number of bytes", quote(field(h.offset))))?;
    let size = uint(field(h.size)).ok_or_else(|| format!("size {} is not a number of bytes", quote(field(h.size))))?;
    let dir = op(field(h.op))
        .ok_or_else(|| format!("op {} is not read, write or trim (or R, W, T, D)", quote(field(h.op))))?;
    let pid = match h.pid {
        Some(i) if !field(i).is_empty() => u32::try_from(uint(field(i)).unwrap_or(u64::MAX))
            .map_err(|_| format!("pid {} is not a process number", quote(field(i))))?,
        _ => 0,
    };
    let len = u32::try_from(size).map_err(|_| format!("size {size} is over 4 GiB, more than one I/O can carry"))?;
    if len == 0 {
        b.leave_out("zero-length I/O");
        return Ok(None);
    }
    if checked_end(offset, len).is_none() {
        return Err(format!("offset {offset} and size {len} end past 2^64 bytes"));
    }
    let device = match h.device {
        Some(i) if !field(i).is_empty() => b.device(field(i)),
        Some(_) => return Err("device is empty: name the device, or leave out the device column".into()),
        None => b.device(base),
    };
    Ok(Some(TraceIo { t_ns, device, offset, len, dir, pid }))
}

fn op(s: &str) -> Option<TraceDir> {
    let is = |names: &[&str]| names.iter().any(|n| s.eq_ignore_ascii_case(n));
    if is(&["read", "r"]) {
        Some(TraceDir::Read)
    } else if is(&["write", "w"]) {
        Some(TraceDir::Write)
    } else if is(&["trim", "t", "discard", "d"]) {
        Some(TraceDir::Trim)
    } else {
        None
    }
}

/// Decimal seconds to nanoseconds: `12`, `12.5`, `.5`; digits past the nanosecond are dropped.
pub(crate) fn seconds_ns(s: &str) -> Option<u64> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole = if int.is_empty() { 0 } else { int.parse::<u64>().ok()? };
    let mut ns = 0u64;
    for (i, d) in frac.bytes().take(9).enumerate() {
        ns += u64::from(d - b'0') * 10u64.pow(8 - i as u32);
    }
    whole.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// Splits a row at `delim`; a field in double quotes may hold the delimiter and `""` for a quote.
fn split<'a>(line: &'a str, delim: u8, out: &mut Vec<Cow<'a, str>>) -> Result<(), String> {
    out.clear();
    let bytes = line.as_bytes();
    let mut i = 0;
    loop {
        while i < bytes.len() && bytes[i] == b' ' && delim != b' ' {
            i += 1;
        }
        if i < bytes.len() && bytes[i] == b'"' {
            let mut s = String::new();
            let mut j = i + 1;
            loop {
                let Some(k) = line[j..].find('"').map(|k| j + k) else {
                    return Err(format!("a quote opened at character {} is not closed on this line", i + 1));
                };
                s.push_str(&line[j..k]);
                if bytes.get(k + 1) == Some(&b'"') {
                    s.push('"');
                    j = k + 2;
                } else {
                    j = k + 1;
                    break;
                }
            }
            while j < bytes.len() && bytes[j] != delim && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            out.push(Cow::Owned(s));
            if j >= bytes.len() {
                return Ok(());
            }
            if bytes[j] != delim {
                return Err(format!("text after the closing quote at character {j}"));
            }
            i = j + 1;
        } else {
            let end = bytes[i..].iter().position(|&b| b == delim).map_or(bytes.len(), |k| i + k);
            out.push(Cow::Borrowed(&line[i..end]));
            if end >= bytes.len() {
                return Ok(());
            }
            i = end + 1;
        }
    }
}
