//! iocurve-trace's integration tests: every format read with exact expectations, traces written
//! from random I/Os read back identical, and the control: blkparse and fio read our blktrace
//! files (and fio's own logs) as we do.

mod control;
mod formats;
mod roundtrip;

use iocurve_testkit::traces::{Dir, Io};
use iocurve_trace::{Limits, Trace, TraceDir, TraceIo};

pub fn io(t_ns: u64, device: &str, offset: u64, len: u32, dir: Dir, pid: u32) -> Io {
    Io { t_ns, device: device.to_string(), offset, len, dir, pid }
}

pub fn trace_dir(d: Dir) -> TraceDir {
    match d {
        Dir::Read => TraceDir::Read,
        Dir::Write => TraceDir::Write,
        Dir::Trim => TraceDir::Trim,
    }
}

/// The devices and I/Os a reader must give for `ios`: sorted by time (stable), the first at 0,
/// devices numbered by first I/O. `keep_pid` false for formats without one.
pub fn expected(ios: &[Io], keep_pid: bool) -> (Vec<String>, Vec<TraceIo>) {
    let mut sorted: Vec<&Io> = ios.iter().collect();
    sorted.sort_by_key(|io| io.t_ns);
    let t0 = sorted.first().map_or(0, |io| io.t_ns);
    let mut devices: Vec<String> = Vec::new();
    let out = sorted
        .iter()
        .map(|io| {
            let device = match devices.iter().position(|d| *d == io.device) {
                Some(i) => i as u32,
                None => {
                    devices.push(io.device.clone());
                    (devices.len() - 1) as u32
                }
            };
            TraceIo {
                t_ns: io.t_ns - t0,
                device,
                offset: io.offset,
                len: io.len,
                dir: trace_dir(io.dir),
                pid: if keep_pid { io.pid } else { 0 },
            }
        })
        .collect();
    (devices, out)
}

pub fn assert_trace(t: &Trace, ios: &[Io], keep_pid: bool) {
    let (devices, want) = expected(ios, keep_pid);
    assert_eq!(t.devices, devices);
    assert_eq!(t.ios.len(), want.len());
    for (i, (got, want)) in t.ios.iter().zip(&want).enumerate() {
        assert_eq!(got, want, "I/O {i}");
    }
}

pub fn limits() -> Limits {
    Limits::default()
}
