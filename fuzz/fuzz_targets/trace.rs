//! Traces (issue 45): any bytes through `iocurve_trace::parse` as a blktrace file, a fio I/O log
//! (v2, v3) or a CSV, whichever the content says, and as per-CPU blktrace files merged. The first
//! byte picks the file's name (its extension means nothing to the reader, the base name names
//! a CSV's device) and whether the rest is split into two per-CPU files. Must never panic; a
//! trace read is well formed (in time order from 0, devices in range and all used, lengths over
//! 0, no end past 2^64) and its statistics are computed without a panic.
#![no_main]

use iocurve_fuzz::write_seeds;
use iocurve_trace::{Limits, Trace, parse, parse_blktrace_cpus};
use libfuzzer_sys::fuzz_target;

const NAMES: [&str; 4] = ["trace.csv", "x.log", "sdb.blktrace.0", "t"];

fn check(t: &Trace) {
    assert!(!t.ios.is_empty(), "a trace without I/O is an error");
    assert_eq!(t.ios[0].t_ns, 0);
    assert!(t.ios.windows(2).all(|w| w[0].t_ns <= w[1].t_ns), "in time order");
    let mut used = vec![false; t.devices.len()];
    for io in &t.ios {
        assert!(io.len > 0);
        assert!(io.offset.checked_add(u64::from(io.len)).is_some());
        used[io.device as usize] = true;
    }
    assert!(used.iter().all(|u| *u), "every device has I/Os");
    assert_eq!(t.duration_ns(), t.ios[t.ios.len() - 1].t_ns);
    let s = t.stats();
    assert_eq!(s.ios, t.ios.len() as u64);
    assert!(s.dirs.iter().map(|d| d.ios).sum::<u64>() == s.ios);
}

/// One blktrace record (little-endian): a queue event of a read.
fn record(time: u64, sector: u64, action: u32, pdu: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&(0x6561_7400u32 | 7).to_le_bytes());
    r.extend_from_slice(&1u32.to_le_bytes());
    r.extend_from_slice(&time.to_le_bytes());
    r.extend_from_slice(&sector.to_le_bytes());
    r.extend_from_slice(&4096u32.to_le_bytes());
    r.extend_from_slice(&action.to_le_bytes());
    r.extend_from_slice(&77u32.to_le_bytes());
    r.extend_from_slice(&((8u32 << 20) | 16).to_le_bytes());
    r.extend_from_slice(&0u32.to_le_bytes());
    r.extend_from_slice(&0u16.to_le_bytes());
    r.extend_from_slice(&(pdu.len() as u16).to_le_bytes());
    r.extend_from_slice(pdu);
    r
}

fn seeds() -> Vec<(String, Vec<u8>)> {
    let q_read = 1 | ((1 << 4 | 1) << 16);
    let complete = 8 | ((1 << 7 | 1) << 16);
    let mut blk = vec![2u8];
    blk.extend(record(5, 0, 1 << 26, b"fio\0"));
    blk.extend(record(10, 8, q_read, b""));
    blk.extend(record(20, 8, complete, b""));
    blk.extend(record(15, 64, q_read | (1 << 29), b""));
    let texts = [
        ("csv", 0u8, "time,offset,size,op,device,pid\n0.5,4096,4096,R,sdb,1\n# c\n0.25;0;512;write;sdc;2\n"),
        ("csv-semicolon", 0, "\u{feff}op;size;time_ns;offset\n\"T\";8192;100;0\nd;1;1;1\n"),
        ("v2", 1, "fio version 2 iolog\n/f add\n/f open\n/f read 0 4096\n/f wait 10 0\n/f write 4096 512\n/f close\n"),
        ("v3", 1, "fio version 3 iolog\n0 /f add\n12 /f read 0 4096\n30 /f trim 4096 8192\n31 /f sync 0 0\n"),
    ];
    let mut out: Vec<(String, Vec<u8>)> = texts
        .iter()
        .map(|(n, first, t)| {
            let mut b = vec![*first];
            b.extend_from_slice(t.as_bytes());
            (n.to_string(), b)
        })
        .collect();
    out.push(("blktrace".into(), blk.clone()));
    blk[0] = 0x82;
    out.push(("blktrace-split".into(), blk));
    out
}

fuzz_target!(init: write_seeds("trace", seeds), |data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else { return };
    let limits = Limits { max_ios: 100_000, max_bytes: 1 << 20 };
    let name = NAMES[usize::from(pick & 3)];
    if let Ok(t) = parse(name, bytes, &limits) {
        check(&t);
    }
    if pick & 0x80 != 0 {
        let cut = bytes.len() / 2 / 48 * 48;
        let files = [("sdb.blktrace.0", &bytes[..cut]), ("sdb.blktrace.1", &bytes[cut..])];
        if let Ok(t) = parse_blktrace_cpus(&files, &limits) {
            check(&t);
        }
    }
});
