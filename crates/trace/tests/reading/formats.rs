//! Each format read with exact expectations, and its refusals with their messages.

use iocurve_testkit::traces::{self, BlkOptions, BlkRecord, Dir, Io};
use iocurve_trace::{Format, Limits, TraceDir, TraceIo, parse, read_trace};

use crate::{assert_trace, io, limits};

fn sample() -> Vec<Io> {
    vec![
        io(0, "8,16", 4096, 4096, Dir::Read, 100),
        io(1_000, "8,16", 8192, 4096, Dir::Read, 100),
        io(250_000, "8,16", 1 << 30, 65536, Dir::Write, 101),
        io(260_000, "8,16", 0, 512, Dir::Write, 102),
        io(2_000_000_000, "8,16", 1 << 20, 1 << 20, Dir::Trim, 103),
        io(3_000, "8,16", 12288, 8192, Dir::Read, 100),
        io(999_999_999, "8,17", 4096, 4096, Dir::Read, 7),
    ]
}

#[test]
fn blktrace_per_cpu_files_merge_by_time_whichever_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let ios = sample();
    let files = traces::write_blktrace(dir.path(), "sdb", 3, &ios);
    assert_eq!(files.len(), 3);
    for name in ["sdb", "sdb.blktrace.0", "sdb.blktrace.2"] {
        let t = read_trace(&dir.path().join(name), &limits()).unwrap();
        assert_eq!(t.format, Some(Format::Blktrace));
        assert_trace(&t, &ios, true);
        assert_eq!(t.devices, ["8,16", "8,17"]);
        assert_eq!(
            t.left_out,
            [("complete (C)".to_string(), 7), ("notify (process, timestamp, message)".to_string(), 4)]
        );
        assert_eq!(t.wall_start_ns, Some(BlkOptions::default().wall_ns), "the first I/O is at the trace's clock base");
        assert_eq!(t.duration_ns(), 2_000_000_000);
    }
    // One per-CPU file alone is what it holds: I/Os 0, 3, 6 of the sample.
    let one = iocurve_trace::parse("sdb.blktrace.0", &std::fs::read(&files[0]).unwrap(), &limits()).unwrap();
    assert_trace(&one, &[ios[0].clone(), ios[3].clone(), ios[6].clone()], true);
}

#[test]
fn blktrace_big_endian_reads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let ios = sample();
    let o = BlkOptions { big_endian: true, wall_ns: 1_700_000_000_000_000_000, ..Default::default() };
    traces::write_blktrace_with(dir.path(), "sdc", 2, &ios, &o);
    let t = read_trace(&dir.path().join("sdc"), &limits()).unwrap();
    assert_trace(&t, &ios, true);
    assert_eq!(t.wall_start_ns, Some(1_700_000_000_000_000_000));
}

fn record(time: u64, sector: u64, bytes: u32, action: u32) -> BlkRecord {
    BlkRecord { time, sector, bytes, action, pid: 9, device: traces::dev_t("253,0"), ..Default::default() }
}

#[test]
fn blktrace_takes_queue_events_with_data_and_counts_the_rest() {
    use traces::{TA_QUEUE, TC_DISCARD, TC_FLUSH, TC_QUEUE, TC_READ, TC_WRITE};
    let q = |bits: u32| TA_QUEUE | ((TC_QUEUE | bits) << 16);
    let mut bytes = Vec::new();
    for r in [
        record(100, 8, 4096, q(TC_READ)),
        record(200, 0, 0, q(TC_WRITE | TC_FLUSH)),       // a flush: no data
        record(300, 16, 8192, q(TC_WRITE | TC_FLUSH)),   // a write with preflush: a write
        record(400, 24, 0, q(TC_READ)),                  // zero size
        record(500, 32, 4096, q(TC_WRITE | TC_DISCARD)), // a discard
        record(600, 40, 4096, 7 | ((1 << 6 | TC_READ) << 16)), // issue (D)
        record(700, 48, 4096, 2 | ((TC_QUEUE | TC_READ) << 16)), // back merge (M)
    ] {
        r.encode(false, &mut bytes);
    }
    let t = parse("x", &bytes, &limits()).unwrap();
    assert_eq!(t.devices, ["253,0"]);
    let want = [
        TraceIo { t_ns: 0, device: 0, offset: 4096, len: 4096, dir: TraceDir::Read, pid: 9 },
        TraceIo { t_ns: 200, device: 0, offset: 8192, len: 8192, dir: TraceDir::Write, pid: 9 },
        TraceIo { t_ns: 400, device: 0, offset: 16384, len: 4096, dir: TraceDir::Trim, pid: 9 },
    ];
    assert_eq!(t.ios, want);
    let reasons: Vec<(&str, u64)> = t.left_out.iter().map(|(r, n)| (r.as_str(), *n)).collect();
    assert_eq!(
        reasons,
        [("back merge (M)", 1), ("flush (Q without data)", 1), ("issue (D)", 1), ("zero-size queue", 1)]
    );
    assert_eq!(t.wall_start_ns, None);
}

#[test]
fn blktrace_with_only_completions_says_to_capture_queue_events() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = Vec::new();
    record(1, 0, 4096, traces::TA_COMPLETE | ((traces::TC_COMPLETE | traces::TC_READ) << 16)).encode(false, &mut bytes);
    std::fs::write(dir.path().join("sdd.blktrace.0"), &bytes).unwrap();
    let e = read_trace(&dir.path().join("sdd"), &limits()).unwrap_err().to_string();
    assert!(
        e.contains("sdd.blktrace.0: no I/O in the trace (seen: 1 complete (C)): only events other than queue (Q)"),
        "{e}"
    );
    assert!(e.contains("-a queue"), "{e}");
}

#[test]
fn blktrace_corrupt_record_is_named_by_its_byte_and_a_cut_end_is_counted() {
    let mut bytes = Vec::new();
    let q = traces::TA_QUEUE | ((traces::TC_QUEUE | traces::TC_READ) << 16);
    record(1, 0, 4096, q).encode(false, &mut bytes);
    let mut with_pdu = record(2, 8, 4096, q);
    with_pdu.pdu = vec![7; 10];
    with_pdu.encode(false, &mut bytes);
    let good = bytes.len();
    // A cut last record: the I/Os before it are read, the cut one counted.
    let mut cut = bytes.clone();
    record(3, 16, 4096, q).encode(false, &mut cut);
    cut.truncate(good + 30);
    let t = parse("cut", &cut, &limits()).unwrap();
    assert_eq!(t.ios.len(), 2);
    assert_eq!(t.left_out_count("truncated record at a file's end"), 1);
    // Garbage after the good records.
    bytes.extend_from_slice(&[0xab; 48]);
    let e = parse("bad", &bytes, &limits()).unwrap_err().to_string();
    assert!(e.starts_with(&format!("bad at byte {good}: no blktrace record here (magic 0xabababab")), "{e}");
    // An old version.
    let mut old = Vec::new();
    record(1, 0, 4096, q).encode(false, &mut old);
    old[0] = 6;
    let e = parse("old", &old, &limits()).unwrap_err().to_string();
    assert!(e.starts_with("old at byte 0: blktrace record version 6"), "{e}");
}

#[test]
fn blktrace_sector_past_2_64_bytes_is_refused() {
    let mut bytes = Vec::new();
    record(1, u64::MAX / 512, 4096, traces::TA_QUEUE | ((traces::TC_QUEUE | traces::TC_READ) << 16))
        .encode(false, &mut bytes);
    let e = parse("x", &bytes, &limits()).unwrap_err().to_string();
    assert!(e.starts_with("x at byte 0: sector 36028797018963967 and 4096 bytes end past 2^64 bytes"), "{e}");
}

#[test]
fn fio_v3_times_are_microseconds_and_non_ios_are_counted() {
    let text = "fio version 3 iolog\n\
                10 /dev/sdb add\n\
                12 /dev/sdb open\n\
                20 /dev/sdb read 4096 4096\n\
                25 /dev/sdb sync 0 0\n\
                30 /tmp/f write 0 512\n\
                30 /dev/sdb wait 5 0\n\
                1000020 /dev/sdb trim 8192 1048576\n\
                1000021 /dev/sdb read 0 0\n\
                1000030 /dev/sdb close\n";
    let t = parse("x.log", text.as_bytes(), &limits()).unwrap();
    assert_eq!(t.format, Some(Format::FioV3));
    assert_eq!(t.devices, ["/dev/sdb", "/tmp/f"]);
    assert_eq!(
        t.ios,
        [
            TraceIo { t_ns: 0, device: 0, offset: 4096, len: 4096, dir: TraceDir::Read, pid: 0 },
            TraceIo { t_ns: 10_000, device: 1, offset: 0, len: 512, dir: TraceDir::Write, pid: 0 },
            TraceIo { t_ns: 1_000_000_000, device: 0, offset: 8192, len: 1 << 20, dir: TraceDir::Trim, pid: 0 },
        ]
    );
    let reasons: Vec<(&str, u64)> = t.left_out.iter().map(|(r, n)| (r.as_str(), *n)).collect();
    assert_eq!(
        reasons,
        [
            ("file add", 1),
            ("file close", 1),
            ("file open", 1),
            ("sync", 1),
            ("wait (ignored in v3, as fio does)", 1),
            ("zero-length I/O", 1)
        ]
    );
}

#[test]
fn fio_v2_waits_are_milliseconds_since_the_start_and_hold_the_ios_after_them() {
    let text = "fio version 2 iolog\n/f add\n/f open\n/f read 0 4096\n/f read 4096 4096\n/f wait 1500 0\n\
                /f write 8192 4096\n/f wait 1200 0\n/f read 0 4096\n/f wait 2500 0\n/f datasync 0 0\n\
                /f trim 0 4096\n/f close\n";
    let t = parse("v2.log", text.as_bytes(), &limits()).unwrap();
    assert_eq!(t.format, Some(Format::FioV2));
    let times: Vec<u64> = t.ios.iter().map(|io| io.t_ns).collect();
    // A wait earlier than the last one holds nothing.
    assert_eq!(times, [0, 0, 1_500_000_000, 1_500_000_000, 2_500_000_000]);
    assert_eq!(t.left_out_count("wait (v2 timing)"), 3);
    assert_eq!(t.left_out_count("datasync"), 1);
}

#[test]
fn fio_log_refusals_name_the_line() {
    let cases = [
        ("fio version 2 iolog\n/f read x 4096\n", "l:2: offset \"x\" is not a number of bytes"),
        ("fio version 2 iolog\n/f read 0 4096 9\n", "l:2: 5 fields where a v2 line is FILE ACTION [OFFSET LENGTH]"),
        ("fio version 2 iolog\n/f read 0 -1\n", "l:2: length \"-1\" is not a number of bytes"),
        ("fio version 2 iolog\n/f read 0 4294967296\n", "l:2: length 4294967296 is over 4 GiB"),
        (
            "fio version 2 iolog\n/f reed 0 4096\n",
            "l:2: action \"reed\" is not read, write, trim, sync, datasync or wait",
        ),
        ("fio version 2 iolog\n\n/f read\n", "l:3: read without OFFSET and LENGTH"),
        ("fio version 2 iolog\n/f wait 100\n", "l:2: a wait without its second number"),
        ("fio version 3 iolog\nsoon /f read 0 1\n", "l:2: time \"soon\" is not a number of microseconds"),
        (
            "fio version 3 iolog\n1 /f read 18446744073709551615 1\n",
            "l:2: offset 18446744073709551615 and length 1 end past 2^64 bytes",
        ),
        (
            "fio version 3 iolog\n1 /f open\n2 /f sync 0 0\n",
            "l: no I/O in the trace (seen: 1 file open, 1 sync): the I/Os of a fio log",
        ),
    ];
    for (text, want) in cases {
        let e = parse("l", text.as_bytes(), &limits()).unwrap_err().to_string();
        assert!(e.starts_with(want), "{text:?}: {e}");
    }
}

#[test]
fn csv_accepts_any_column_order_separators_quotes_comments_and_sorts() {
    let text = "\u{feff}# exported\n\
                op;size;offset;time;device;extra;pid\n\
                \n\
                W;4096;0;0.5;\"sd;b\";x;12\n\
                # a comment\n\
                read ; 512 ; 4096 ; .25 ; sdc ; \"a \"\"q\"\"\" ; \n\
                t;8192;8192;0.5;\"sd;b\";;1\n\
                D;1024;0;1.000000001999;sdc;;\n\
                write;0;0;3;sdc;;\n";
    let t = parse("dir/trace.csv", text.as_bytes(), &limits()).unwrap();
    assert_eq!(t.format, Some(Format::Csv));
    assert_eq!(t.devices, ["sdc", "sd;b"]);
    assert_eq!(
        t.ios,
        [
            TraceIo { t_ns: 0, device: 0, offset: 4096, len: 512, dir: TraceDir::Read, pid: 0 },
            TraceIo { t_ns: 250_000_000, device: 1, offset: 0, len: 4096, dir: TraceDir::Write, pid: 12 },
            TraceIo { t_ns: 250_000_000, device: 1, offset: 8192, len: 8192, dir: TraceDir::Trim, pid: 1 },
            TraceIo { t_ns: 750_000_001, device: 0, offset: 0, len: 1024, dir: TraceDir::Trim, pid: 0 },
        ]
    );
    assert_eq!(t.left_out, [("zero-length I/O".to_string(), 1)]);
}

#[test]
fn csv_without_a_device_column_names_the_device_after_the_file_and_takes_time_ns_and_tabs() {
    let text = "time_ns\toffset\tsize\top\n5\t0\t4096\tR\n7\t4096\t4096\tw\n";
    let t = parse("/some/where/prod.csv", text.as_bytes(), &limits()).unwrap();
    assert_eq!(t.devices, ["prod.csv"]);
    assert_eq!(
        t.ios.iter().map(|io| (io.t_ns, io.dir)).collect::<Vec<_>>(),
        [(0, TraceDir::Read), (2, TraceDir::Write)]
    );
}

#[test]
fn csv_refusals_name_the_line_and_the_fix() {
    let cases = [
        ("time,offset,size,op\n1,0,4096,R\n\n2,abc,4096,R\n", "trace.csv:4: offset \"abc\" is not a number of bytes"),
        ("time,offset,size\n", "trace.csv:1: the header \"time,offset,size\" has no column op"),
        ("when,where\n", "trace.csv:1: the header \"when,where\" has no column time (or time_ns), offset, size, op"),
        ("time,time_ns,offset,size,op\n", "trace.csv:1: column \"time_ns\" given twice"),
        ("time,offset,size,op\n1,0,4096\n", "trace.csv:2: 3 fields where the header has 4"),
        ("time,offset,size,op\n-1,0,4096,R\n", "trace.csv:2: time \"-1\" is not a number of seconds"),
        ("time,offset,size,op\n1,0,4096,X\n", "trace.csv:2: op \"X\" is not read, write or trim (or R, W, T, D)"),
        ("time,offset,size,op\n1,0,8589934592,R\n", "trace.csv:2: size 8589934592 is over 4 GiB"),
        ("time,offset,size,op\n1,\"0,4096,R\n", "trace.csv:2: a quote opened at character 3 is not closed"),
        ("time,offset,size,op,device\n1,0,1,R,\n", "trace.csv:2: device is empty"),
        ("# nothing\n\n", "trace.csv: empty: a CSV trace starts with a header"),
        ("time,offset,size,op\n1,0,0,R\n", "trace.csv: no I/O in the trace (seen: 1 zero-length I/O)"),
        (
            "time,offset,size,op\n99999999999999999999,0,1,R\n",
            "trace.csv:2: time \"99999999999999999999\" is not a number of seconds",
        ),
    ];
    for (text, want) in cases {
        let e = parse("trace.csv", text.as_bytes(), &limits()).unwrap_err().to_string();
        assert!(e.starts_with(want), "{text:?}: {e}");
    }
}

#[test]
fn limits_refuse_too_many_ios_and_too_many_bytes() {
    let text = "time,offset,size,op\n1,0,1,R\n2,0,1,R\n3,0,1,R\n";
    let small = Limits { max_ios: 2, ..Limits::default() };
    let e = parse("t.csv", text.as_bytes(), &small).unwrap_err().to_string();
    assert!(e.starts_with("t.csv: more than 2 I/Os"), "{e}");
    let tiny = Limits { max_bytes: 10, ..Limits::default() };
    let e = parse("t.csv", text.as_bytes(), &tiny).unwrap_err().to_string();
    assert!(e.starts_with("t.csv: 44 bytes, over the 10 bytes a trace may have"), "{e}");
}

#[test]
fn binary_that_is_not_blktrace_is_refused_and_a_directory_too() {
    let e = parse("x.bin", &[0, 1, 2, 3, 0, 0, 9], &limits()).unwrap_err().to_string();
    assert!(e.starts_with("x.bin: not a trace iocurve reads"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let e = read_trace(dir.path(), &limits()).unwrap_err().to_string();
    assert!(e.contains("is a directory"), "{e}");
    let e = read_trace(&dir.path().join("nothing"), &limits()).unwrap_err().to_string();
    assert!(e.contains("No such file"), "{e}");
}

#[test]
fn read_trace_reads_each_text_format_from_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let ios = vec![io(0, "/dev/sdb", 0, 4096, Dir::Read, 0), io(2_000_000, "/dev/sdc", 4096, 8192, Dir::Write, 0)];
    let p = dir.path().join("a.log");
    traces::write_fio_v3(&p, &ios);
    assert_trace(&read_trace(&p, &limits()).unwrap(), &ios, false);
    traces::write_fio_v2(&p, &ios);
    assert_trace(&read_trace(&p, &limits()).unwrap(), &ios, false);
    traces::write_csv(&p, &ios, ',');
    assert_trace(&read_trace(&p, &limits()).unwrap(), &ios, true);
}

#[test]
fn several_blktrace_captures_merge_on_the_kernel_clock_and_text_traces_from_their_starts() {
    let dir = tempfile::tempdir().unwrap();
    // Two devices of one machine: sdc's first I/O is 1 ms after sdb's on the kernel's clock.
    let sdb = vec![io(0, "8,16", 0, 4096, Dir::Read, 1), io(3_000_000, "8,16", 4096, 4096, Dir::Read, 1)];
    let sdc = vec![io(1_000_000, "8,32", 0, 512, Dir::Write, 2)];
    traces::write_blktrace(dir.path(), "sdb", 2, &sdb);
    traces::write_blktrace(dir.path(), "sdc", 1, &sdc);
    let t =
        iocurve_trace::read_traces(&[dir.path().join("sdb"), dir.path().join("sdc.blktrace.0")], &limits()).unwrap();
    assert_trace(&t, &[sdb[0].clone(), sdc[0].clone(), sdb[1].clone()], true);
    assert_eq!(t.left_out_count("complete (C)"), 3);
    // Two fio jobs' logs: each from its own start; /f in both is one device.
    let a = vec![io(5_000, "/f", 0, 4096, Dir::Read, 0), io(9_000, "/g", 0, 4096, Dir::Write, 0)];
    let b = vec![io(7_000, "/f", 8192, 4096, Dir::Trim, 0)];
    traces::write_fio_v3(&dir.path().join("a.log"), &a);
    traces::write_fio_v3(&dir.path().join("b.log"), &b);
    let t = iocurve_trace::read_traces(&[dir.path().join("a.log"), dir.path().join("b.log")], &limits()).unwrap();
    assert_eq!(t.devices, ["/f", "/g"]);
    let got: Vec<(u64, u32, TraceDir)> = t.ios.iter().map(|io| (io.t_ns, io.device, io.dir)).collect();
    assert_eq!(got, [(0, 0, TraceDir::Read), (0, 0, TraceDir::Trim), (4_000, 1, TraceDir::Write)]);
    assert_eq!(t.left_out_count("file add"), 3);
    let e = iocurve_trace::read_traces(&[dir.path().join("a.log"), dir.path().join("sdb")], &limits()).unwrap_err();
    assert!(e.to_string().contains("blktrace captures and text traces together"), "{e}");
}

/// Not a test bound: how long reading a million I/Os takes here (`cargo test -- --ignored
/// --nocapture read_speed`).
#[test]
#[ignore]
fn read_speed() {
    let dir = tempfile::tempdir().unwrap();
    let ios: Vec<Io> =
        (0..1_000_000u64).map(|i| io(i * 1000, "8,16", (i * 7919 % 100_000) * 4096, 4096, Dir::Read, 1)).collect();
    traces::write_blktrace(dir.path(), "sdb", 4, &ios);
    let ios: Vec<Io> = ios.into_iter().map(|io| Io { device: "sdb".into(), ..io }).collect();
    traces::write_csv(&dir.path().join("t.csv"), &ios, ',');
    traces::write_fio_v3(&dir.path().join("t.log"), &ios);
    for name in ["sdb", "t.csv", "t.log"] {
        let start = std::time::Instant::now();
        let t = read_trace(&dir.path().join(name), &limits()).unwrap();
        let read = start.elapsed();
        let start = std::time::Instant::now();
        let s = t.stats();
        println!("{name}: {} I/Os read in {read:?}, statistics in {:?}", s.ios, start.elapsed());
    }
}

#[test]
fn a_per_cpu_file_that_is_not_blktrace_is_named() {
    let dir = tempfile::tempdir().unwrap();
    traces::write_blktrace(dir.path(), "sdb", 1, &sample());
    std::fs::write(dir.path().join("sdb.blktrace.1"), "time,offset,size,op\n").unwrap();
    let e = read_trace(&dir.path().join("sdb"), &limits()).unwrap_err().to_string();
    assert!(e.contains("sdb.blktrace.1 at byte 0: not a blktrace file"), "{e}");
}

/// Found by an outside test: a fio log of another version was read as a CSV without columns, and
/// a UTF-16 CSV was "not text"; each is said for what it is.
#[test]
fn another_fio_version_and_utf16_text_are_named() {
    let e = parse("v4.log", b"fio version 4 iolog\n0 /dev/sdb add\n", &limits()).unwrap_err().to_string();
    assert!(e.contains("\"fio version 4 iolog\": iocurve reads fio I/O logs of versions 2 and 3"), "{e}");
    let utf16: Vec<u8> =
        [0xff, 0xfe].into_iter().chain("time,offset,size,op\n".encode_utf16().flat_map(u16::to_le_bytes)).collect();
    let e = parse("t.csv", &utf16, &limits()).unwrap_err().to_string();
    assert!(e.contains("UTF-16 text") && e.contains("iconv"), "{e}");
}
