//! fio I/O logs written (issue 45, part 4: a run's I/Os replayable by iocurve and by fio): version
//! 3, as fio 3.31 and later write it with `--write_iolog` — `0 FILE add` and `0 FILE open` for
//! every file, one `TIME FILE read|write|trim OFFSET LENGTH` per I/O, TIME in microseconds since
//! the start, and `TIME FILE close` at the end. Streaming: one line per call, nothing kept.

use std::io::{self, Write};

use crate::{Trace, TraceDir};

pub struct FioLogWriter<W: Write> {
    w: W,
    devices: Vec<String>,
}

impl<W: Write> FioLogWriter<W> {
    /// Writes the version line, an `add` and an `open` of every device (a name without white
    /// space: fio reads a line's fields split at it).
    pub fn new(mut w: W, devices: &[String]) -> io::Result<Self> {
        if let Some(bad) = devices.iter().find(|d| d.is_empty() || d.chars().any(char::is_whitespace)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("device name {bad:?} is empty or holds white space, which a fio I/O log cannot carry"),
            ));
        }
        writeln!(w, "fio version 3 iolog")?;
        for d in devices {
            // fio replays I/O only on a file it opened: it asserts so (fio 3.33 aborts the job).
            writeln!(w, "0 {d} add\n0 {d} open")?;
        }
        Ok(FioLogWriter { w, devices: devices.to_vec() })
    }

    /// One I/O at `t_ns` since the start (written to the microsecond) on device index `device`.
    pub fn io(&mut self, t_ns: u64, device: u32, offset: u64, len: u32, dir: TraceDir) -> io::Result<()> {
        let name = self.devices.get(device as usize).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("device {device} of {}", self.devices.len()))
        })?;
        writeln!(self.w, "{} {name} {} {offset} {len}", t_ns / 1000, dir.name())
    }

    /// Hands what is buffered on (the lines so far stay if the writer is never finished).
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// The writer, as it is (nothing more written or flushed).
    pub fn into_inner(self) -> W {
        self.w
    }

    /// Writes a `close` of every device at `t_ns` and gives the writer back, flushed.
    pub fn finish(mut self, t_ns: u64) -> io::Result<W> {
        for d in &self.devices {
            writeln!(self.w, "{} {d} close", t_ns / 1000)?;
        }
        self.w.flush()?;
        Ok(self.w)
    }
}

impl Trace {
    /// The trace as a fio v3 I/O log (times to the microsecond).
    pub fn write_fio_v3(&self, w: impl Write) -> io::Result<()> {
        let mut log = FioLogWriter::new(w, &self.devices)?;
        for io in &self.ios {
            log.io(io.t_ns, io.device, io.offset, io.len, io.dir)?;
        }
        log.finish(self.duration_ns())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Limits, TraceIo, parse};

    #[test]
    fn a_trace_written_as_a_fio_log_reads_back() {
        let ios = vec![
            TraceIo { t_ns: 0, device: 0, offset: 4096, len: 4096, dir: TraceDir::Read, pid: 0 },
            TraceIo { t_ns: 1_500_000, device: 1, offset: 0, len: 512, dir: TraceDir::Write, pid: 0 },
            TraceIo { t_ns: 2_000_000, device: 0, offset: 1 << 40, len: 1 << 20, dir: TraceDir::Trim, pid: 0 },
        ];
        let t = Trace { devices: vec!["/dev/sdb".into(), "/tmp/f".into()], ios, ..Trace::default() };
        let mut out = Vec::new();
        t.write_fio_v3(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "fio version 3 iolog\n0 /dev/sdb add\n0 /dev/sdb open\n0 /tmp/f add\n0 /tmp/f open\n\
             0 /dev/sdb read 4096 4096\n\
             1500 /tmp/f write 0 512\n2000 /dev/sdb trim 1099511627776 1048576\n\
             2000 /dev/sdb close\n2000 /tmp/f close\n"
        );
        let back = parse("x.log", text.as_bytes(), &Limits::default()).unwrap();
        assert_eq!((back.devices, back.ios), (t.devices, t.ios));
    }

    #[test]
    fn names_fio_cannot_read_are_refused() {
        assert!(FioLogWriter::new(Vec::new(), &["a b".to_string()]).is_err());
        assert!(FioLogWriter::new(Vec::new(), &[String::new()]).is_err());
        let mut w = FioLogWriter::new(Vec::new(), &["a".to_string()]).unwrap();
        assert!(w.io(0, 1, 0, 1, TraceDir::Read).is_err());
    }
}
