//! The control: the real tools read our blktrace files as we do (blkparse prints the same queue
//! events; fio replays them, one per-CPU file and merged), and we read fio's own I/O logs as fio
//! counts them. Each check is skipped, with a note, where its tool is missing.

use std::path::Path;
use std::process::Command;

use iocurve_testkit::traces::{self, Dir, Io};
use iocurve_trace::{TraceDir, read_trace};

use crate::{io, limits};

fn have(tool: &str) -> bool {
    let ok = Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success() || !o.stdout.is_empty());
    if !ok {
        println!("note: {tool} is not installed here: this control check is skipped");
    }
    ok
}

/// Distinct times (blkparse and fio order equal times their own ways), sectors within 64 MiB.
fn workload(n: u64, device: &str, trims: bool) -> Vec<Io> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let dir = match x % 10 {
                0..=5 => Dir::Read,
                6 if trims => Dir::Trim,
                _ => Dir::Write,
            };
            let len = [4096u32, 8192, 65536, 512][(x >> 8) as usize % 4];
            let offset = (x >> 16) % ((64 << 20) / 4096 - 16) * 4096;
            io(i * 37_000 + (x >> 40) % 1000, device, offset, len, dir, 1000 + (i % 3) as u32)
        })
        .collect()
}

fn dir_letter(d: TraceDir) -> char {
    match d {
        TraceDir::Read => 'R',
        TraceDir::Write => 'W',
        TraceDir::Trim => 'D',
    }
}

#[test]
fn blkparse_prints_the_queue_events_we_read() {
    if !have("blkparse") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    for big_endian in [false, true] {
        blkparse_agrees(dir.path(), big_endian);
    }
}

fn blkparse_agrees(dir: &Path, big_endian: bool) {
    let ios = workload(300, "8,16", true);
    traces::write_blktrace_with(dir, "sdb", 4, &ios, &traces::BlkOptions { big_endian, ..Default::default() });
    let out = Command::new("blkparse")
        .args(["-i", "sdb", "-D"])
        .arg(dir)
        .args(["-q", "-a", "queue", "-f", "%a %d %S %N %p %M,%m %T.%9t\n"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let theirs: Vec<String> = text.lines().filter(|l| l.starts_with("Q ")).map(str::to_string).collect();
    let t = read_trace(&dir.join("sdb"), &limits()).unwrap();
    // blkparse's times count from the first event (the notify records, at the clock base, like
    // the first I/O here).
    let ours: Vec<String> = t
        .ios
        .iter()
        .map(|io| {
            format!(
                "Q {} {} {} {} {} {}.{:09}",
                dir_letter(io.dir),
                io.offset / 512,
                io.len,
                io.pid,
                t.devices[io.device as usize],
                io.t_ns / 1_000_000_000,
                io.t_ns % 1_000_000_000
            )
        })
        .collect();
    assert_eq!(theirs.len(), 300, "big-endian {big_endian}: {text}");
    assert_eq!(theirs, ours, "big-endian {big_endian}");
}

/// A file of 64 MiB for fio to replay onto.
fn scratch(dir: &Path) -> std::path::PathBuf {
    let f = dir.join("target");
    std::fs::File::create(&f).unwrap().set_len(64 << 20).unwrap();
    f
}

/// fio's per-I/O latency log (`log_offset=1`): (direction, size, offset) of every I/O, in order.
fn fio_ios(lat_log: &Path) -> Vec<(TraceDir, u32, u64)> {
    let text = std::fs::read_to_string(lat_log).unwrap();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').map(str::trim).collect();
            let dir = match f[2] {
                "0" => TraceDir::Read,
                "1" => TraceDir::Write,
                _ => TraceDir::Trim,
            };
            (dir, f[3].parse().unwrap(), f[4].parse().unwrap())
        })
        .collect()
}

fn replay(dir: &Path, iolog: &str, extra: &[&str]) -> Vec<(TraceDir, u32, u64)> {
    let target = scratch(dir);
    let out = Command::new("fio")
        .current_dir(dir)
        .args(["--name=r", "--ioengine=psync", "--iodepth=1", "--replay_no_stall=1", "--log_offset=1"])
        .arg(format!("--read_iolog={iolog}"))
        .arg(format!("--replay_redirect={}", target.display()))
        .arg("--write_lat_log=fio")
        .args(extra)
        .output()
        .unwrap();
    let said = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // A job fio aborts (an assertion) still exits 0: its latency log is missing then.
    let lat = dir.join("fio_lat.1.log");
    assert!(out.status.success() && lat.exists(), "{said}");
    let ios = fio_ios(&lat);
    std::fs::remove_file(&lat).unwrap();
    ios
}

fn ours(t: &iocurve_trace::Trace) -> Vec<(TraceDir, u32, u64)> {
    t.ios.iter().map(|io| (io.dir, io.len, io.offset)).collect()
}

#[test]
fn fio_replays_our_blktrace_file_as_we_read_it() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // One per-CPU file: what fio's --read_iolog replays (fio#1257: it reads one file).
    traces::write_blktrace(dir.path(), "sdb", 1, &workload(200, "8,16", false));
    let t = read_trace(&dir.path().join("sdb"), &limits()).unwrap();
    let theirs = replay(dir.path(), "sdb.blktrace.0", &[]);
    assert_eq!(theirs.len(), 200);
    assert_eq!(theirs, ours(&t));
    // The same trace written as a fio log (FioLogWriter) replays the same.
    let log = dir.path().join("sdb.log");
    t.write_fio_v3(std::fs::File::create(&log).unwrap()).unwrap();
    assert_eq!(replay(dir.path(), "sdb.log", &[]), theirs);
}

/// fio replays one per-CPU file per job (fio#1257); its `merge_blktrace_file`, which would merge
/// them, reads nothing before fio commit c55d29ef (2026: "iolog short read", the merge path was
/// dead code), fio 3.33 here included. So: every per-CPU file replays as we read it alone, their
/// union is our merge, and where fio's merge works its merged file reads as our merge.
#[test]
fn fio_replays_each_of_our_per_cpu_files_and_their_union_is_our_merge() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let files = traces::write_blktrace(dir.path(), "sdb", 3, &workload(150, "8,16", false));
    let t = read_trace(&dir.path().join("sdb"), &limits()).unwrap();
    let mut union = Vec::new();
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        let alone = iocurve_trace::parse(name, &std::fs::read(f).unwrap(), &limits()).unwrap();
        let theirs = replay(dir.path(), name, &[]);
        assert_eq!(theirs, ours(&alone), "{name}");
        union.extend(theirs);
    }
    let mut merged = ours(&t);
    merged.sort();
    union.sort();
    assert_eq!(union, merged);
    let _ = replay(dir.path(), "sdb.blktrace.0:sdb.blktrace.1:sdb.blktrace.2", &["--merge_blktrace_file=merged.bin"]);
    let merged_file = dir.path().join("merged.bin");
    if std::fs::metadata(&merged_file).is_ok_and(|m| m.len() > 0) {
        assert_eq!(read_trace(&merged_file, &limits()).unwrap().ios, t.ios);
    } else {
        println!("note: this fio's merge_blktrace_file wrote nothing (fixed in fio by c55d29ef): merge not compared");
    }
}

#[test]
fn fio_replays_our_v2_and_v3_logs_and_we_read_fios_own_log() {
    if !have("fio") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let target = scratch(dir.path());
    let name = target.display().to_string();
    let ios: Vec<Io> = workload(100, &name, false);
    for (v, write) in [("v2", traces::write_fio_v2 as fn(&Path, &[Io])), ("v3", traces::write_fio_v3)] {
        let log = dir.path().join(format!("{v}.log"));
        // v2 times are milliseconds: spread the I/Os so that the waits hold them apart.
        write(&log, &ios);
        let t = read_trace(&log, &limits()).unwrap();
        let theirs = replay(dir.path(), &log.display().to_string(), &[]);
        assert_eq!(theirs, ours(&t), "{v}");
    }
    // fio's own log, of a real run: its I/O counts are fio's.
    let out = Command::new("fio")
        .current_dir(dir.path())
        .args(["--name=w", "--ioengine=psync", "--rw=randrw", "--bs=4k", "--size=8m", "--number_ios=500"])
        .arg(format!("--filename={name}"))
        .args(["--write_iolog=own.log", "--output-format=json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json = String::from_utf8_lossy(&out.stdout);
    let count = |dir: &str| -> u64 {
        let at = json.find(&format!("\"{dir}\" : {{")).unwrap();
        let rest = &json[at..];
        let n = rest.find("\"total_ios\" : ").unwrap() + "\"total_ios\" : ".len();
        rest[n..].split(',').next().unwrap().trim().parse().unwrap()
    };
    let t = read_trace(&dir.path().join("own.log"), &limits()).unwrap();
    assert_eq!(t.format, Some(iocurve_trace::Format::FioV3));
    let s = t.stats();
    let of = |d: TraceDir| s.dirs.iter().find(|x| x.dir == d).map_or(0, |x| x.ios);
    assert_eq!((of(TraceDir::Read), of(TraceDir::Write)), (count("read"), count("write")));
    assert_eq!(t.devices, [name]);
}
