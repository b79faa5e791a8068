//! Replays checked from below iocurve (issue 45): a blktrace capture in blktrace's own record
//! format (two per-CPU files) replayed on a loop device, whose own counters
//! (`/sys/block/*/stat`) must show exactly the trace's writes and at least its reads, in a step as
//! long as the trace; and fio replaying the same capture beside it as a control.

use iocurve_testkit::traces::{Dir, Io, write_blktrace};
use iocurve_testkit::*;

/// Requests completed and 512-byte sectors moved: (reads, sectors read, writes, sectors written).
fn counters(dev: &std::path::Path) -> [u64; 4] {
    let name = dev.file_name().unwrap().to_string_lossy();
    let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    let f: Vec<u64> = stat.split_whitespace().map(|x| x.parse().unwrap()).collect();
    [f[0], f[2], f[4], f[6]]
}

/// 3000 I/Os over 1.5 s (every 0.5 ms): 2 reads to 1 write, 4 KiB and 64 KiB, each on a 128 KiB
/// block of its own within 32 MiB (none adjacent to another: the block layer would merge them into
/// one request, and the device count one).
fn trace() -> Vec<Io> {
    (0..3000u64)
        .map(|k| Io {
            t_ns: k * 500_000,
            device: "8,16".into(),
            offset: (k * 7919 % 250) * 131_072,
            len: if k % 4 == 0 { 65536 } else { 4096 },
            dir: if k % 3 == 2 { Dir::Write } else { Dir::Read },
            pid: 100 + (k % 2) as u32,
        })
        .collect()
}

#[test]
fn a_blktrace_capture_replays_on_a_loop_device_as_its_counters_show() {
    needs_root!();
    let _one = one_at_a_time();
    let lo = Loop::new(64 << 20, &["--direct-io=on"]);
    let dir = tempfile::tempdir().unwrap();
    let ios = trace();
    write_blktrace(dir.path(), "sdb", 2, &ios);
    let (reads, writes) = (
        ios.iter().filter(|i| i.dir == Dir::Read).count() as u64,
        ios.iter().filter(|i| i.dir == Dir::Write).count() as u64,
    );
    let sectors = |d: Dir| ios.iter().filter(|i| i.dir == d).map(|i| i.len as u64 / 512).sum::<u64>();
    let before = counters(&lo.dev);
    let began = std::time::Instant::now();
    let r = run_json(
        dir.path(),
        &["run", "--target", lo.path(), "--allow-write", lo.path(), "--replay", "sdb", "--max-outstanding", "32"],
    );
    let took = began.elapsed();
    let after = counters(&lo.dev);
    let s = &steps(&r, 0)[0];
    assert_eq!(s["rate"]["due"].as_u64(), Some(3000), "{}", s["rate"]);
    // Every write of the trace, no other: iocurve writes nothing else to a device.
    assert_eq!(after[2] - before[2], writes, "writes the device completed");
    assert_eq!(after[3] - before[3], sectors(Dir::Write), "sectors written");
    // Every read; beside them only the signature probe of the opening (a few reads).
    let (r_done, r_sectors) = (after[0] - before[0], after[1] - before[1]);
    assert!(r_done >= reads && r_done <= reads + 64, "reads {r_done} of {reads}");
    assert!(r_sectors >= sectors(Dir::Read) && r_sectors <= sectors(Dir::Read) + 64 * 256, "{r_sectors}");
    // As long as the trace: its last I/O at 1.4995 s and one gap after it, measured exactly; the run around it at least that.
    assert!((f(&s["duration_s"]) - 1.5).abs() < 1e-6, "{}", s["duration_s"]);
    assert!(took.as_secs_f64() >= 1.5, "{took:?}");
    // The I/Os the step counted are the trace's (those in flight at its end complete after it).
    let counted = s["read"]["ops"].as_u64().unwrap() + s["write"]["ops"].as_u64().unwrap();
    assert!(counted + 32 >= 3000 && counted <= 3000, "{counted}");
    assert_eq!(r["workloads"][0]["read_pct"].as_f64(), Some(66.67), "{}", r["workloads"][0]);

    // fio replays the same capture (one per-CPU file: fio#1257) onto the same device, as a
    // control: the device sees the same writes.
    let one = tempfile::tempdir().unwrap();
    write_blktrace(one.path(), "sdb", 1, &ios);
    let before = counters(&lo.dev);
    let out = std::process::Command::new("fio")
        .current_dir(one.path())
        .args(["--name=r", "--ioengine=libaio", "--iodepth=32", "--direct=1", "--read_iolog=sdb.blktrace.0"])
        .arg(format!("--replay_redirect={}", lo.path()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = counters(&lo.dev);
    assert_eq!(after[2] - before[2], writes, "fio's replay: {}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(after[3] - before[3], sectors(Dir::Write));
}

/// A trace of two devices replayed on two agents, split by device: each agent issues its
/// device's I/Os (three in four on the first, one in four on the second) at the common start,
/// and the step's due I/Os are the whole trace's.
#[test]
fn a_trace_of_two_devices_replays_split_over_two_agents() {
    use iocurve_testkit::cluster::*;
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (_agents, hosts) = file_agents(dir.path(), &c, &["a", "b"]);
    let mut csv = String::from("time,device,offset,size,op\n");
    for k in 0..4000u64 {
        let dev = if k % 4 == 3 { "d1" } else { "d0" };
        csv.push_str(&format!(
            "{:.6},{dev},{},4096,{}\n",
            k as f64 * 0.0005,
            (k % 1000) * 8192,
            if k % 2 == 0 { "R" } else { "W" }
        ));
    }
    std::fs::write(dir.path().join("t.csv"), csv).unwrap();
    hosts_plan(
        dir.path(),
        &hosts,
        "[[workloads]]\nname = \"r\"\nreplay = \"t.csv\"\nreplay_split = \"device\"\nreplay_map = \"*=1\"\ninterval_s = 1\n",
    );
    let o = coordinator(dir.path(), &c, &["plan.toml", "--size", "16m", "--json", "r.json", "--write-iolog", "r.log"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = &steps(&r, 0)[0];
    assert_eq!(s["rate"]["due"].as_u64(), Some(4000), "{}", s["rate"]);
    let secs = f(&s["duration_s"]);
    assert!((secs - 2.0).abs() < 1e-6, "{secs}");
    let per: Vec<f64> = s["hosts"].as_array().unwrap().iter().map(|h| f(&h["iops"]) * secs).collect();
    assert_eq!(per.len(), 2, "{s}");
    // (Those in flight at the end complete after the measurement.)
    assert!(per[0] <= 3000.5 && per[0] >= 3000.0 - 64.0, "{per:?}");
    assert!(per[1] <= 1000.5 && per[1] >= 1000.0 - 64.0, "{per:?}");

    // The run's I/O log (issue 45, part 4): both hosts' I/Os on one clock, each host's target a
    // file of its own named by the host, every I/O the agents issued.
    let log = std::fs::read_to_string(dir.path().join("r.log")).unwrap();
    let names: Vec<String> = hosts.iter().map(|(a, p)| format!("{a}:{}", p.display())).collect();
    let (count, last) = iocurve_testkit::traces::logged_ios(&log, &names);
    let unissued = s["rate"]["backlog"].as_u64().unwrap() + s["rate"]["dropped"].as_u64().unwrap();
    assert!(count[0] <= 3000 && count[1] <= 1000 && count[0] + count[1] + unissued == 4000, "{count:?}, {unissued}");
    // The trace lasts 2 s; its log too (both hosts started within milliseconds).
    assert!((1_900_000..2_100_000).contains(&last), "{last} µs");
}

/// Issue 45, part 4: a run's I/O log is what the device saw, and fio replays it: a closed-loop
/// write step on a loop device (one I/O at a time, so the block layer merges none), the log's
/// writes against the device's counters, then `fio --read_iolog` on the log writes the same.
#[test]
fn a_runs_io_log_is_what_the_device_saw_and_fio_replays_it() {
    needs_root!();
    let _one = one_at_a_time();
    let lo = Loop::new(64 << 20, &["--direct-io=on"]);
    let dir = tempfile::tempdir().unwrap();
    let before = counters(&lo.dev);
    let run = ["run", "--target", lo.path(), "--allow-write", lo.path(), "--workload", "backend-random-write-4k"];
    let o = iocurve(
        dir.path(),
        &args(
            &run,
            &["--ramp", "1", "--warmup-s", "0", "--intervals", "2", "--interval-s", "0.2", "--write-iolog", "w.log"],
        ),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let after = counters(&lo.dev);
    let log = std::fs::read_to_string(dir.path().join("w.log")).unwrap();
    let writes: Vec<&str> = log.lines().filter(|l| l.contains(" write ")).collect();
    assert!(writes.len() > 50, "{}", writes.len());
    assert!(writes.iter().all(|l| l.split(' ').nth(1) == Some(lo.path())), "named by the device's path");
    assert_eq!(after[2] - before[2], writes.len() as u64, "every write the device completed is in the log");
    assert_eq!(after[3] - before[3], writes.len() as u64 * 8);

    let before = counters(&lo.dev);
    let out = std::process::Command::new("fio")
        .current_dir(dir.path())
        .args(["--name=r", "--ioengine=libaio", "--iodepth=1", "--direct=1", "--read_iolog=w.log"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = counters(&lo.dev);
    assert_eq!(after[2] - before[2], writes.len() as u64, "fio's replay: {}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(after[3] - before[3], writes.len() as u64 * 8);
}

/// A trace of 512-byte I/Os on a device of 4 KiB sectors: each I/O is aligned to the device's
/// logical block (found by an outside test: the run was refused for its block size), and the
/// step says how many were.
#[test]
fn regression_a_trace_of_small_ios_replays_on_a_4k_sector_device_aligned() {
    needs_root!();
    let _one = one_at_a_time();
    let lo = Loop::new(16 << 20, &["--sector-size", "4096", "--direct-io=on"]);
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("time,offset,size,op\n");
    for k in 0..200u64 {
        csv.push_str(&format!(
            "{:.4},{},512,{}\n",
            k as f64 * 0.001,
            k * 8192 + 512,
            if k % 2 == 0 { "R" } else { "W" }
        ));
    }
    std::fs::write(dir.path().join("t.csv"), csv).unwrap();
    let before = counters(&lo.dev);
    let r = run_json(dir.path(), &["run", "--target", lo.path(), "--allow-write", lo.path(), "--replay", "t.csv"]);
    let after = counters(&lo.dev);
    let s = &steps(&r, 0)[0];
    assert_eq!(s["rate"]["due"].as_u64(), Some(200), "{s}");
    // Every write as one 4 KiB request (8 sectors of 512 bytes in the kernel's count). On a
    // loaded machine the last I/Os may still wait when the trace's time is up (the replay does
    // not stretch: CI of 4b3b7f7 issued 91 of the 100 writes, its backlog said so).
    let writes = after[2] - before[2];
    assert_eq!(after[3] - before[3], writes * 8);
    let unissued = s["rate"]["backlog"].as_u64().unwrap() + s["rate"]["dropped"].as_u64().unwrap();
    if unissued == 0 {
        assert_eq!(writes, 100, "{s}");
    } else {
        assert!(writes + unissued >= 100 && writes <= 100, "{writes} writes, {unissued} not issued");
    }
    let notes = s.to_string();
    assert!(notes.contains("200 were aligned to 4096 bytes"), "{notes}");
}

/// Found by an outside test: a log on a filesystem that fills up was cut mid-step and mid-line
/// while the message said the steps before were in it. Now it is cut back to its last whole
/// step, which fio and iocurve read, and the run ends with exit code 1 saying how many I/Os it
/// holds.
#[test]
fn a_log_on_a_full_filesystem_is_cut_back_to_its_last_whole_step() {
    needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=100k", "tmpfs"])
        .arg(&small)
        .status()
        .unwrap();
    assert!(mounted.success());
    // Rate steps on the null back-end: the same count of I/Os on a loaded machine as on a quiet
    // one — about 2000 lines (64 KB) in the first, 2400 in the second: the second fills 100 KB.
    let run =
        ["run", "--target", "t.dat", "--size", "16m", "--workload", "backend-random-read-4k", "--backend", "null"];
    let o = iocurve(
        dir.path(),
        &args(
            &run,
            &[
                "--rate",
                "5000,6000",
                "--warmup-s",
                "0",
                "--intervals",
                "2",
                "--interval-s",
                "0.2",
                "--write-iolog",
                "small/full.log",
            ],
        ),
    );
    let log = std::fs::read_to_string(small.join("full.log")).unwrap_or_default();
    let _ = std::process::Command::new("umount").arg(&small).status();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let said = stderr(&o);
    assert!(said.contains("No space left on device") && said.contains("cut back to their end"), "{said}");
    // Whole lines only, each an I/O of the header's one file or the header itself.
    assert!(log.ends_with('\n'), "{}", &log[log.len().saturating_sub(100)..]);
    let ios = log.lines().filter(|l| l.split(' ').count() == 5).count();
    assert!(ios > 0 && said.contains(&format!("{ios} I/Os")), "{ios} I/O lines; {said}");
    assert!(log.lines().skip(3).all(|l| l.split(' ').count() == 5 && l.contains(" t.dat read ")), "whole lines");
}
