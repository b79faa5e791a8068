//! Trims (issue 40), checked from outside iocurve: a loop device's own discard counters
//! (`/sys/block/loopN/stat`) against the run's trim counts, the allocated size of a loop
//! device's backing file and of a file target against the bytes the run says it trimmed, and
//! the reclaim step's figures against the same counters.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::util::cluster::{certs, coordinator, file_agents, hosts_plan};
use crate::util::*;

/// Discard requests completed and sectors discarded by a block device since it was set up
/// (fields 12 and 14 of its statistics).
fn discards(lo: &Loop) -> (u64, u64) {
    let name = lo.dev.file_name().unwrap().to_str().unwrap();
    let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    let f: Vec<u64> = stat.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (f[11], f[13])
}

/// Bytes allocated to a file.
fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// Fills a file with data that allocates every block (a loop device's backing file before any
/// I/O through the device).
fn fill(path: &Path, mib: u64) {
    sh(
        "dd",
        &[
            "if=/dev/urandom",
            &format!("of={}", path.display()),
            "bs=1M",
            &format!("count={mib}"),
            "conv=notrunc,fsync",
            "status=none",
        ],
    );
}

fn step(r: &Value) -> &Value {
    &r["workloads"][0]["steps"][0]
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("a count expected, got {v}"))
}

/// A mix of reads, writes and trims on a loop device: every trim the run counts is a discard
/// the device counts (one at a time: no two merged), of its 64 KiB; reads and writes stay
/// apart from them in the figures.
#[test]
fn a_loop_device_counts_the_discards_the_run_counts() {
    needs_root!();
    let _one = one_at_a_time();
    let lo = Loop::new(64 << 20, &[]);
    fill(&lo.backing, 64);
    let dir = tempfile::tempdir().unwrap();
    // io_uring twice: its queued discards (Linux 6.12), and the blocking way of older kernels.
    for (backend, blocking) in [("io_uring", false), ("io_uring", true), ("psync", false), ("libaio", false)] {
        let before = discards(&lo);
        std::fs::write(
            dir.path().join("plan.toml"),
            format!(
                "targets = [\"{}\"]\n[[workloads]]\nname = \"mix\"\nbackend = \"{backend}\"\nread_pct = 40\ntrim_pct = 30\nbs = \"4k\"\ntrim_bs = \"64k\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.5\n",
                lo.path()
            ),
        )
        .unwrap();
        let mut cmd = Command::new(bin());
        cmd.args(["run", "plan.toml", "--allow-write", lo.path(), "--json", "plan.json"]).current_dir(dir.path());
        if blocking {
            cmd.env("IOCURVE_NO_URING_DISCARD", "1");
        }
        let r = ok_json(&cmd.output().unwrap(), &dir.path().join("plan.json"));
        let after = discards(&lo);
        let s = step(&r);
        let trims = u(&s["trim"]["ops"]);
        assert!(trims > 20, "{backend}: {trims} trims in half a second");
        assert!(u(&s["read"]["ops"]) > 0 && u(&s["write"]["ops"]) > 0, "{backend}: {s}");
        assert_eq!(u(&s["trim"]["bytes"]), trims * 65536, "{backend}");
        assert_eq!(
            u(&s["read"]["bytes"]) + u(&s["write"]["bytes"]),
            (u(&s["read"]["ops"]) + u(&s["write"]["ops"])) * 4096
        );
        // One I/O in flight: at most the one that completed after the interval is not counted.
        let dev = after.0 - before.0;
        let outside = u(&s["late_ios"]) + u(&s["stuck_ios"]);
        assert!(
            dev >= trims && dev <= trims + outside,
            "{backend}: the device discarded {dev} times, the run counted {trims} (+{outside} after its interval)"
        );
        assert_eq!(after.1 - before.1, dev * 128, "{backend}: every discard of 64 KiB");
        // The trims' shares: about 30 % of the I/Os.
        let share = trims as f64 / (u(&s["read"]["ops"]) + u(&s["write"]["ops"]) + trims) as f64;
        assert!((share - 0.3).abs() < 0.08, "{backend}: trims are {:.0} % of the I/Os", share * 100.0);
        assert_eq!(r["workloads"][0]["trim_pct"], 30.0);
        assert_eq!(r["workloads"][0]["bs"], "4k r, 4k w, 64k t");
    }
}

/// Sequential trims, held to 16 MB/s (a rate of a sequential workload is in MB/s) by one
/// stream (a rate step reuses its free slots first: with more, one stream could go round its
/// share of the target) so that none trims a block twice: the backing file of a
/// loop device and a file target lose exactly the bytes the run says it trimmed.
#[test]
fn the_allocated_size_falls_by_what_the_run_trimmed() {
    needs_root!();
    let _one = one_at_a_time();
    let lo = Loop::new(64 << 20, &[]);
    fill(&lo.backing, 64);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.dat");
    std::fs::File::create(&file).unwrap();
    fill(&file, 64);
    for (target, watched) in [(lo.path().to_string(), lo.backing.clone()), (file.display().to_string(), file.clone())] {
        let before = allocated(&watched);
        let r = run_plan(
            dir.path(),
            &format!(
                "targets = [\"{target}\"]\n[[workloads]]\nname = \"t\"\npattern = \"sequential\"\nread_pct = 0\ntrim_pct = 100\nbs = \"64k\"\nrate = [16]\nmax_outstanding = 1\nwarmup_s = 0\nintervals = 1\ninterval_s = 1\n"
            ),
            &["--allow-write", &target],
        );
        let s = step(&r);
        let trims = u(&s["trim"]["ops"]) + u(&s["late_ios"]) + u(&s["stuck_ios"]);
        assert!(trims > 150, "{target}: {trims} trims at 16 MB/s for a second");
        // Exact but for a block or two the file system may take for the extents the holes split
        // the file into (ext4's extent tree).
        let freed = before - allocated(&watched);
        assert!(
            freed <= trims * 65536 && freed + 16384 >= trims * 65536,
            "{target}: freed {freed} bytes, the run trimmed {trims} × 64 KiB"
        );
    }
}

/// A verifying workload that trims: a trimmed block's content is no longer promised, so the
/// final pass finds nothing lost (before the map forgot them, every trimmed block read back as
/// zeros would have been a lost write).
#[test]
fn verification_forgets_what_was_trimmed() {
    needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let r = run_plan(
        dir.path(),
        "targets = [\"t.dat\"]\n[[workloads]]\nname = \"v\"\nread_pct = 40\ntrim_pct = 30\nbs = \"4k\"\nverify = true\nramp = [2]\nwarmup_s = 0\nintervals = 1\ninterval_s = 1\n",
        &["--size", "16m", "--verify-final", "--keep"],
    );
    let s = step(&r);
    assert!(u(&s["trim"]["ops"]) > 100, "{s}");
    let v = &r["final_verification"];
    assert!(u(&v["checked"]) > 100, "{v}");
    assert_eq!((u(&v["lost"]), u(&v["corrupt"]), u(&v["misplaced"])), (0, 0, 0), "{v}");
    // The journal cannot say what a trimmed block holds: refused, not half done.
    std::fs::write(
        dir.path().join("plan.toml"),
        "targets = [\"t.dat\"]\n[[workloads]]\nname = \"v\"\nread_pct = 40\ntrim_pct = 30\nverify = true\n",
    )
    .unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--verify-journal"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--verify-journal cannot journal trims, and workload v verifies and trims"),
        "{}",
        stderr(&o)
    );
}

/// What a device cannot take is refused before any I/O, with the reason: trims smaller than its
/// discard granularity.
#[test]
fn trims_that_do_not_fit_the_device_are_refused() {
    needs_root!();
    let lo = Loop::new(16 << 20, &[]);
    let dir = tempfile::tempdir().unwrap();
    let gran = std::fs::read_to_string(format!(
        "/sys/block/{}/queue/discard_granularity",
        lo.dev.file_name().unwrap().to_str().unwrap()
    ))
    .unwrap();
    assert_eq!(gran.trim(), "4096", "a loop device over a file of 4 KiB blocks");
    std::fs::write(
        dir.path().join("plan.toml"),
        format!("targets = [\"{}\"]\n[[workloads]]\nname = \"t\"\nread_pct = 50\ntrim_pct = 50\nbs = \"4k\"\ntrim_bs = \"2k\"\nramp = [1]\n", lo.path()),
    )
    .unwrap();
    let before = discards(&lo);
    let o = iocurve(dir.path(), &["run", "plan.toml", "--allow-write", lo.path()]);
    assert_ne!(o.status.code(), Some(0));
    let e = stderr(&o);
    assert!(e.contains("trims of 2k") && e.contains("not a multiple of its discard granularity 4k"), "{e}");
    assert_eq!(discards(&lo), before, "nothing trimmed");
    // A trim destroys data as a write does: a device with a file system on it is refused
    // without --allow-write, and not touched.
    sh("mkfs.ext4", &["-q", "-F", lo.path()]);
    let before = discards(&lo);
    std::fs::write(
        dir.path().join("plan.toml"),
        format!(
            "targets = [\"{}\"]\n[[workloads]]\nname = \"t\"\nread_pct = 50\ntrim_pct = 50\nbs = \"4k\"\nramp = [1]\n",
            lo.path()
        ),
    )
    .unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--allow-write"), "{}", stderr(&o));
    assert_eq!(discards(&lo), before, "nothing trimmed");
}

/// The reclaim step on a loop device: it writes, trims and reads back its region; the device
/// discarded exactly the region, the backing file gave it back, the reads found zeros, and the
/// result is stored (show) as its own phase.
#[test]
fn a_reclaim_step_gives_the_region_back() {
    needs_root!();
    let _one = one_at_a_time();
    let lo = Loop::new(64 << 20, &[]);
    let dir = tempfile::tempdir().unwrap();
    let before = discards(&lo);
    let r = run_plan(
        dir.path(),
        &format!(
            "targets = [\"{}\"]\n[[reclaim]]\nname = \"thin\"\nsize = \"16m\"\noffset = \"8m\"\nbs = \"1m\"\nqueue_depth = 4\n",
            lo.path()
        ),
        &["--allow-write", lo.path()],
    );
    let c = &r["reclaims"][0];
    assert_eq!(c["name"], "thin");
    for pass in ["write", "trim", "read"] {
        assert_eq!((u(&c[pass]["ops"]), u(&c[pass]["bytes"])), (16, 16 << 20), "{pass}: {c}");
    }
    let after = discards(&lo);
    assert_eq!((after.0 - before.0, after.1 - before.1), (16, 16 * 2048), "16 discards of 1 MiB");
    assert_eq!(u(&c["zero_blocks"]), 16, "trimmed ranges of a loop device read back as zeros");
    let used = &c["used"];
    assert_eq!(u(&used["after_write"]) - u(&used["before"]), 16 << 20, "{c}");
    assert_eq!(u(&used["after_write"]) - u(&used["after_trim"]), 16 << 20, "{c}");
    assert!(c["back_after_s"].as_f64().is_some(), "{c}");
    assert!(c["probe"].as_str().unwrap().contains(lo.backing.to_str().unwrap()), "{c}");
    assert_eq!(allocated(&lo.backing), u(&used["before"]));
    // Stored: `show` tells it again.
    let o = iocurve(dir.path(), &["show", "1"]);
    assert!(
        stdout(&o).contains("reclaim thin  (16 MiB on 1 target") && stdout(&o).contains("space back after"),
        "{}",
        stdout(&o)
    );
    // The user's probe: a command printing the used bytes; one that prints nonsense fails the
    // step with what it printed.
    let probe = format!("echo $(( $(stat -c %b {}) * 512 ))", lo.backing.display());
    let r = run_plan(
        dir.path(),
        &format!("targets = [\"{}\"]\n[[reclaim]]\nsize = \"4m\"\nprobe = \"{probe}\"\n", lo.path()),
        &["--allow-write", lo.path()],
    );
    let c = &r["reclaims"][0];
    assert_eq!(c["probe"], format!("command: {probe}"));
    assert_eq!(u(&c["used"]["after_write"]) - u(&c["used"]["after_trim"]), 4 << 20, "{c}");
    std::fs::write(
        dir.path().join("plan.toml"),
        format!("targets = [\"{}\"]\n[[reclaim]]\nsize = \"4m\"\nprobe = \"echo lots\"\n", lo.path()),
    )
    .unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--allow-write", lo.path()]);
    assert_ne!(o.status.code(), Some(0));
    assert!(stderr(&o).contains("reclaim probe `echo lots` printed `lots`, not a size"), "{}", stderr(&o));
}

/// Agents trim as a local run does: the agent's file target loses what the run says its host
/// trimmed, and the result has the host's trims apart.
#[test]
fn agents_trim_their_targets() {
    needs_root!();
    let _one = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let (_agents, hosts) = file_agents(dir.path(), &c, &["a"]);
    // A first run makes the scratch file (written whole, preconditioned) and keeps it.
    let read = "[[workloads]]\nname = \"r\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.2\n";
    hosts_plan(dir.path(), &hosts, read);
    let pre = ["plan.toml", "--size", "64m", "--keep", "--precondition"];
    let o = coordinator(dir.path(), &c, &pre).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    let t = &hosts[0].1;
    let before = allocated(t);
    hosts_plan(
        dir.path(),
        &hosts,
        "[[workloads]]\nname = \"t\"\npattern = \"sequential\"\nread_pct = 50\ntrim_pct = 50\nbs = \"64k\"\nrate = [16]\nmax_outstanding = 1\nwarmup_s = 0\nintervals = 1\ninterval_s = 1\n",
    );
    let o =
        coordinator(dir.path(), &c, &["plan.toml", "--size", "64m", "--keep", "--json", "r.json"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = step(&r);
    let trims = u(&s["trim"]["ops"]);
    assert!(trims > 50, "{s}");
    assert_eq!(u(&s["trim"]["bytes"]), trims * 65536);
    // Its holes are the trims (reads allocate nothing). The file system may take a block or
    // two for the extents the holes split the file into (ext4's extent tree: 4 KiB).
    let holes = before - allocated(t);
    let outside = u(&s["late_ios"]) + u(&s["stuck_ios"]);
    assert!(
        holes + 16384 >= trims * 65536 && holes <= (trims + outside) * 65536,
        "{holes} bytes of holes, {trims} trims of 64 KiB"
    );
    // The trims undid the agent's preconditioning: the next one writes it again.
    // (An agent lets go of the last run's lock on its target a moment after that run ended: a
    // run started at once may be refused for it; seen here after a rate step.)
    hosts_plan(dir.path(), &hosts, read);
    let deadline = Instant::now() + Duration::from_secs(30);
    let o = loop {
        let o = coordinator(dir.path(), &c, &pre).output().unwrap();
        if !stderr(&o).contains("is being written by another run") || Instant::now() > deadline {
            break o;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(o.status.code(), Some(0), "{}\n{}", stdout(&o), stderr(&o));
    assert!(!stdout(&o).contains("already done"), "preconditioned again after the trims: {}", stdout(&o));
    assert!(allocated(t) >= 64 << 20, "every block written again");
}

/// Found by an outside attack: a Ctrl-C while the probe hung waited out the probe's 60 s, left
/// its child running, failed the run (exit 1) and threw the measured passes away; a probe that
/// failed after the passes threw them away too. Now the probe's whole process group is ended
/// at once, the run stops as interrupted (130) with its passes stored, and a failing probe
/// leaves the step stored with its error.
#[test]
fn regression_a_hung_or_failing_probe_keeps_what_the_reclaim_measured() {
    needs_root!();
    let _one = one_at_a_time();
    let lo = Loop::new(16 << 20, &[]);
    let dir = tempfile::tempdir().unwrap();
    // Answers twice (the check before any I/O, the probe before the writes), then hangs — or
    // fails — from the third call on (after the writes).
    let probe = |then: &str| {
        format!(
            "n=$(cat {d}/calls 2>/dev/null || echo 0); echo $((n+1)) > {d}/calls; if [ $n -ge 2 ]; then {then}; fi; echo 1g",
            d = dir.path().display()
        )
    };
    let plan =
        |p: String| format!("targets = [\"{}\"]\n[[reclaim]]\nname = \"r\"\nsize = \"4m\"\nprobe = '{p}'\n", lo.path());
    std::fs::write(dir.path().join("plan.toml"), plan(probe("exec sleep 1000"))).unwrap();
    let child = Command::new(bin())
        .args(["run", "plan.toml", "--allow-write", lo.path(), "--json", "r.json"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(dir.path().join("calls")).map_or(0, |n| n.trim().parse::<u32>().unwrap_or(0)) < 3 {
        assert!(Instant::now() < deadline, "the probe was never called after the writes");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    let signalled = Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert!(signalled.elapsed() < Duration::from_secs(10), "stopped {:?} after the Ctrl-C", signalled.elapsed());
    assert_eq!(o.status.code(), Some(130), "{}\n{}", stdout(&o), stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let c = &r["reclaims"][0];
    assert_eq!(u(&c["write"]["bytes"]), 4 << 20, "{c}");
    assert_eq!(c["interrupted"], true, "{c}");
    let left = Command::new("pgrep").args(["-f", "sleep 1000"]).output().unwrap();
    assert!(String::from_utf8_lossy(&left.stdout).trim().is_empty(), "the probe's sleep was left running");

    std::fs::remove_file(dir.path().join("calls")).unwrap();
    std::fs::write(dir.path().join("plan.toml"), plan(probe("echo broken >&2; exit 7"))).unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--allow-write", lo.path(), "--json", "r.json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("failed (exit status: 7): broken"), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let c = &r["reclaims"][0];
    assert_eq!(u(&c["write"]["bytes"]), 4 << 20, "the passes before the failure are kept: {c}");
    assert!(c["error"].as_str().unwrap().contains("broken"), "{c}");
    let o = iocurve(dir.path(), &["show", "2"]);
    assert!(stdout(&o).contains("stopped: reclaim probe"), "{}", stdout(&o));
}

/// A file on a file system that cannot punch holes (ramfs) is refused before any I/O, as a
/// device that cannot discard is (an outside attack found 110'413 EOPNOTSUPP errors instead).
#[test]
fn regression_a_file_that_cannot_punch_holes_is_refused_before_any_io() {
    needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let mnt = dir.path().join("ramfs");
    std::fs::create_dir(&mnt).unwrap();
    sh("mount", &["-t", "ramfs", "ramfs", mnt.to_str().unwrap()]);
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).output();
        }
    }
    let _u = Unmount(mnt.clone());
    let file = mnt.join("t.dat");
    std::fs::write(&file, vec![7u8; 1 << 20]).unwrap();
    let f = file.to_str().unwrap();
    std::fs::write(
        dir.path().join("plan.toml"),
        format!("targets = [\"{f}\"]\n[[workloads]]\nname = \"t\"\nread_pct = 50\ntrim_pct = 50\ndirect = false\nramp = [1]\n"),
    )
    .unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--allow-write", f]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot punch holes"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&file).unwrap(), vec![7u8; 1 << 20], "untouched");
    std::fs::write(
        dir.path().join("plan.toml"),
        format!("targets = [\"{f}\"]\n[[reclaim]]\nsize = \"512k\"\nbs = \"64k\"\n"),
    )
    .unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--allow-write", f]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot punch holes"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&file).unwrap(), vec![7u8; 1 << 20], "untouched");
}

/// Found in review: trims gave blocks back, yet the next `--precondition` skipped the target as
/// "already done" and its reads then measured deallocated blocks. A run that trims forgets the
/// record first.
#[test]
fn regression_trims_undo_preconditioning() {
    needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.dat");
    std::fs::File::create(&file).unwrap();
    fill(&file, 16);
    let f = file.to_str().unwrap();
    let read = "[[workloads]]\nname = \"r\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.2\n";
    std::fs::write(dir.path().join("plan.toml"), format!("targets = [\"{f}\"]\n{read}")).unwrap();
    let pre = ["run", "plan.toml", "--precondition", "--allow-write", f];
    let o = iocurve(dir.path(), &pre);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = iocurve(dir.path(), &pre);
    assert!(stdout(&o).contains("already done"), "the second precondition is skipped: {}", stdout(&o));
    std::fs::write(
        dir.path().join("plan.toml"),
        format!("targets = [\"{f}\"]\n[[workloads]]\nname = \"t\"\nread_pct = 0\ntrim_pct = 100\nbs = \"64k\"\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.2\n"),
    )
    .unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--allow-write", f]);
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::write(dir.path().join("plan.toml"), format!("targets = [\"{f}\"]\n{read}")).unwrap();
    let o = iocurve(dir.path(), &pre);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stdout(&o).contains("already done"), "preconditioned again after the trims: {}", stdout(&o));
    assert!(allocated(&file) >= 16 << 20, "every block written again");
}
