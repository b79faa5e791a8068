//! Test traces in the formats iocurve reads (issue 45): blktrace's binary records split over
//! per-CPU files (with the completions and notify records a capture holds beside the queue
//! events), fio I/O logs v2 and v3, and iocurve's CSV. Written from [`Io`]s, so that a test knows
//! every figure of the trace it reads; checked against blkparse and fio in iocurve-trace's tests.

use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    Read,
    Write,
    Trim,
}

/// One I/O to write. `device`: `MAJ,MIN` for blktrace, a file name for fio logs and CSV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Io {
    pub t_ns: u64,
    pub device: String,
    pub offset: u64,
    pub len: u32,
    pub dir: Dir,
    pub pid: u32,
}

/// How a blktrace capture is written.
#[derive(Debug, Clone, Copy)]
pub struct BlkOptions {
    /// Records in big-endian order (a capture from a big-endian machine).
    pub big_endian: bool,
    /// A complete (C) event 10 µs after each queue event, on the same CPU.
    pub completions: bool,
    /// A process notify at the start of every CPU's file and a timestamp notify on CPU 0.
    pub notify: bool,
    /// The kernel's clock at the trace's time 0 (blktrace's times are the kernel's monotonic clock).
    pub clock_base_ns: u64,
    /// The wall-clock time the timestamp notify gives for `clock_base_ns`.
    pub wall_ns: u64,
}

impl Default for BlkOptions {
    fn default() -> Self {
        BlkOptions {
            big_endian: false,
            completions: true,
            notify: true,
            clock_base_ns: 5_000_000_000,
            wall_ns: 1_795_300_000_123_456_789,
        }
    }
}

pub const TA_QUEUE: u32 = 1;
pub const TA_COMPLETE: u32 = 8;
pub const TC_READ: u32 = 1;
pub const TC_WRITE: u32 = 1 << 1;
pub const TC_FLUSH: u32 = 1 << 2;
pub const TC_QUEUE: u32 = 1 << 4;
pub const TC_COMPLETE: u32 = 1 << 7;
pub const TC_NOTIFY: u32 = 1 << 10;
pub const TC_DISCARD: u32 = 1 << 13;

/// The category bits of a direction, as the kernel sets them (a discard is a write too).
pub fn dir_bits(dir: Dir) -> u32 {
    match dir {
        Dir::Read => TC_READ,
        Dir::Write => TC_WRITE,
        Dir::Trim => TC_WRITE | TC_DISCARD,
    }
}

/// The kernel's dev_t of `MAJ,MIN`.
pub fn dev_t(device: &str) -> u32 {
    let (maj, min) = device.split_once(',').expect("a blktrace device is MAJ,MIN");
    (maj.trim().parse::<u32>().expect("major") << 20) | min.trim().parse::<u32>().expect("minor")
}

/// One `struct blk_io_trace` and its payload.
#[derive(Debug, Clone, Default)]
pub struct BlkRecord {
    pub sequence: u32,
    pub time: u64,
    pub sector: u64,
    pub bytes: u32,
    /// The action's low 16 bits and its category bits (already shifted by 16).
    pub action: u32,
    pub pid: u32,
    pub device: u32,
    pub cpu: u32,
    pub pdu: Vec<u8>,
}

impl BlkRecord {
    pub fn encode(&self, big: bool, out: &mut Vec<u8>) {
        let w32 = |v: u32, o: &mut Vec<u8>| o.extend_from_slice(&if big { v.to_be_bytes() } else { v.to_le_bytes() });
        let w64 = |v: u64, o: &mut Vec<u8>| o.extend_from_slice(&if big { v.to_be_bytes() } else { v.to_le_bytes() });
        w32(0x6561_7400 | 7, out);
        w32(self.sequence, out);
        w64(self.time, out);
        w64(self.sector, out);
        w32(self.bytes, out);
        w32(self.action, out);
        w32(self.pid, out);
        w32(self.device, out);
        w32(self.cpu, out);
        let pdu_len = u16::try_from(self.pdu.len()).expect("a payload under 64 KiB");
        out.extend_from_slice(&if big { 0u16.to_be_bytes() } else { 0u16.to_le_bytes() });
        out.extend_from_slice(&if big { pdu_len.to_be_bytes() } else { pdu_len.to_le_bytes() });
        out.extend_from_slice(&self.pdu);
    }
}

/// Writes `ios` as a blktrace capture `dir/BASE.blktrace.CPU`, I/O i on CPU i % cpus, with the
/// default [`BlkOptions`]; returns the files.
pub fn write_blktrace(dir: &Path, base: &str, cpus: usize, ios: &[Io]) -> Vec<PathBuf> {
    write_blktrace_with(dir, base, cpus, ios, &BlkOptions::default())
}

pub fn write_blktrace_with(dir: &Path, base: &str, cpus: usize, ios: &[Io], o: &BlkOptions) -> Vec<PathBuf> {
    assert!(cpus > 0);
    let mut per_cpu: Vec<Vec<BlkRecord>> = vec![Vec::new(); cpus];
    for (i, io) in ios.iter().enumerate() {
        let cpu = i % cpus;
        assert_eq!(io.offset % 512, 0, "blktrace offsets are sectors");
        let q = BlkRecord {
            time: o.clock_base_ns + io.t_ns,
            sector: io.offset / 512,
            bytes: io.len,
            action: TA_QUEUE | ((TC_QUEUE | dir_bits(io.dir)) << 16),
            pid: io.pid,
            device: dev_t(&io.device),
            cpu: cpu as u32,
            ..Default::default()
        };
        if o.completions {
            let c = BlkRecord {
                time: q.time + 10_000,
                action: TA_COMPLETE | ((TC_COMPLETE | dir_bits(io.dir)) << 16),
                pid: 0,
                ..q.clone()
            };
            per_cpu[cpu].push(c);
        }
        per_cpu[cpu].push(q);
    }
    let device = ios.first().map_or(0, |io| dev_t(&io.device));
    let mut paths = Vec::new();
    for (cpu, mut records) in per_cpu.into_iter().enumerate() {
        if o.notify {
            let mut comm = b"fio".to_vec();
            comm.resize(16, 0);
            let n = BlkRecord {
                time: o.clock_base_ns,
                action: TC_NOTIFY << 16,
                pid: 4242,
                device,
                pdu: comm,
                ..Default::default()
            };
            records.insert(0, n);
            if cpu == 0 {
                let mut pdu = Vec::new();
                let (s, ns) = ((o.wall_ns / 1_000_000_000) as u32, (o.wall_ns % 1_000_000_000) as u32);
                for v in [s, ns] {
                    pdu.extend_from_slice(&if o.big_endian { v.to_be_bytes() } else { v.to_le_bytes() });
                }
                let t = BlkRecord {
                    time: o.clock_base_ns,
                    action: 1 | (TC_NOTIFY << 16),
                    device,
                    pdu,
                    ..Default::default()
                };
                records.insert(1, t);
            }
        }
        records.sort_by_key(|r| r.time);
        let mut bytes = Vec::new();
        for (seq, r) in records.iter_mut().enumerate() {
            r.sequence = seq as u32 + 1;
            r.cpu = cpu as u32;
            r.encode(o.big_endian, &mut bytes);
        }
        let path = dir.join(format!("{base}.blktrace.{cpu}"));
        std::fs::write(&path, bytes).expect("write a blktrace file");
        paths.push(path);
    }
    paths
}

fn fio_act(dir: Dir) -> &'static str {
    match dir {
        Dir::Read => "read",
        Dir::Write => "write",
        Dir::Trim => "trim",
    }
}

fn devices(ios: &[Io]) -> Vec<&str> {
    let mut seen: Vec<&str> = Vec::new();
    for io in ios {
        if !seen.contains(&io.device.as_str()) {
            seen.push(&io.device);
        }
    }
    seen
}

/// A fio v2 log: `add` and `open` of every device, a `wait` wherever the millisecond of the next
/// I/O is later than the last wait's, the I/Os, then `close`. Times are kept to the millisecond
/// (a v2 log has no finer time); `ios` in time order.
pub fn write_fio_v2(path: &Path, ios: &[Io]) {
    let mut s = String::from("fio version 2 iolog\n");
    let devs = devices(ios);
    for d in &devs {
        s += &format!("{d} add\n{d} open\n");
    }
    let mut ms = 0;
    for io in ios {
        if io.t_ns / 1_000_000 > ms {
            ms = io.t_ns / 1_000_000;
            s += &format!("{} wait {ms} 0\n", io.device);
        }
        s += &format!("{} {} {} {}\n", io.device, fio_act(io.dir), io.offset, io.len);
    }
    for d in &devs {
        s += &format!("{d} close\n");
    }
    std::fs::write(path, s).expect("write a fio v2 log");
}

/// A fio v3 log as fio writes it: times in microseconds, `add` of every device at 0, `close`
/// after the last I/O.
pub fn write_fio_v3(path: &Path, ios: &[Io]) {
    let mut s = String::from("fio version 3 iolog\n");
    let devs = devices(ios);
    for d in &devs {
        s += &format!("0 {d} add\n0 {d} open\n");
    }
    for io in ios {
        s += &format!("{} {} {} {} {}\n", io.t_ns / 1000, io.device, fio_act(io.dir), io.offset, io.len);
    }
    let end = ios.last().map_or(0, |io| io.t_ns / 1000);
    for d in &devs {
        s += &format!("{end} {d} close\n");
    }
    std::fs::write(path, s).expect("write a fio v3 log");
}

/// iocurve's CSV with every column (`time_ns`, `device`, `pid` too), separated by `delim`.
pub fn write_csv(path: &Path, ios: &[Io], delim: char) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create a CSV trace"));
    let d = delim;
    writeln!(f, "# written by iocurve-testkit\ntime_ns{d}offset{d}size{d}op{d}device{d}pid").expect("write");
    for io in ios {
        let op = match io.dir {
            Dir::Read => "R",
            Dir::Write => "write",
            Dir::Trim => "Trim",
        };
        writeln!(f, "{}{d}{}{d}{}{d}{op}{d}\"{}\"{d}{}", io.t_ns, io.offset, io.len, io.device, io.pid).expect("write");
    }
    f.flush().expect("write a CSV trace");
}

/// A run's I/O log (`run --write-iolog`, fio's version 3) read back: the I/O lines of each file
/// of `names` (the run's names of its targets), and the last I/O's time (µs). Panics on a line
/// naming another file, or an I/O out of time order.
pub fn logged_ios(log: &str, names: &[String]) -> (Vec<u64>, u64) {
    let (mut count, mut last) = (vec![0u64; names.len()], 0u64);
    for l in log.lines().skip(1) {
        let f: Vec<&str> = l.split(' ').collect();
        let file = names.iter().position(|n| n == f[1]).unwrap_or_else(|| panic!("{l:?} of {names:?}"));
        if f.len() == 5 {
            count[file] += 1;
            let t: u64 = f[0].parse().unwrap();
            assert!(t >= last, "in time order: {l}");
            last = t;
        }
    }
    (count, last)
}
