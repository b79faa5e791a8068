//! Regressions of the `runs` subject.

use crate::util::*;

/// Issue 13, finding 2: `iocurve run … | head -c 10` died with "failed printing to stdout: Broken
/// pipe" (exit 101) and left the run `running`; `show | head`, `runs | head`, `> /dev/full`
/// panicked too. Output now falls silent: the run measures and stores every step, notes the cut
/// in its steps, and print-only commands finish quietly.
#[test]
fn regression_a_closed_stdout_never_kills_a_run_or_a_command() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let run = args(
        &["run", "--target", "t.dat", "--size", "16m", "--backend", "null", "--workload", "backend-random-write-4k"],
        &["--ramp", "1,2", "--warmup-s", "0.1", "--intervals", "2", "--interval-s", "0.3", "--json", "r.json"],
    );
    let mut child = std::process::Command::new(bin())
        .args(&run)
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // the reader is gone before the first line
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let s = steps(&r, 0);
    assert_eq!(s.len(), 2, "both steps measured");
    // Noted at the step during which the first write failed (the pipe may have taken the first
    // lines before its reader went away).
    let flags: Vec<&str> =
        s.iter().flat_map(|st| st["flags"].as_array().unwrap().iter().filter_map(|f| f["code"].as_str())).collect();
    assert_eq!(flags.iter().filter(|f| **f == "output_closed").count(), 1, "the cut is noted once: {flags:?}");
    // Stored as complete, with the note.
    let o = iocurve(dir.path(), &["export", "1", "--format", "json", "-o", "e.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e = std::fs::read_to_string(dir.path().join("e.json")).unwrap();
    assert!(e.contains("output_closed"), "the stored run says so");
    for cmd in [&["runs"][..], &["show", "1"], &["compare", "1", "1"], &["suites"], &["datacheck", "--size", "4m"]] {
        let mut c = std::process::Command::new(bin())
            .args(cmd)
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(c.stdout.take());
        let o = c.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{cmd:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{cmd:?}: {}", stderr(&o));
        let full = std::fs::File::create("/dev/full").unwrap();
        let o = std::process::Command::new(bin()).args(cmd).current_dir(dir.path()).stdout(full).output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{cmd:?} > /dev/full: {}", stderr(&o));
    }
}

/// Issue 13, finding 9: Ctrl-C while a scratch file was prepared waited for all of it. It now
/// ends the run within a fraction of a second (exit 130), and the half-written file is removed.
#[test]
fn regression_ctrl_c_during_scratch_preparation_ends_the_run_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // Seconds of filling on any disk the test runs on, without asking for more than it has.
    let free = iocurve_engine::target::free_space(dir.path()).expect("free space of the test directory");
    let size = format!("{}m", ((free / 4) >> 20).min(8 << 10));
    let child = std::process::Command::new(bin())
        .args(["run", "--target", "big.dat", "--size", &size, "--workload", "backend-random-read-4k", "--ramp", "1"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let file = dir.path().join("big.dat");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::fs::metadata(&file).map_or(0, |m| m.len()) == 0 {
        assert!(std::time::Instant::now() < deadline, "preparation never started");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let sent = std::time::Instant::now();
    let o = child.wait_with_output().unwrap();
    // At once, not after seconds of filling: over 10× the 0.06–0.22 s measured (bench/stop-latency).
    assert!(sent.elapsed() < std::time::Duration::from_secs(3), "ended {:?} after Ctrl-C", sent.elapsed());
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted while preparing"), "{}", stderr(&o));
    assert!(!file.exists(), "the half-prepared scratch file is removed");
}

/// Found 2026-11-27: the outputs written via a temporary file renamed over them (`run --json`,
/// `export -o`, `report -o`) replaced a device they were pointed at: `export -o /dev/null` left
/// the machine's /dev/null a regular file, and every later reader of /dev/null read what others
/// had thrown away. A device made here (/dev/null's own, 1:3) stays a device, and takes the
/// output; a failed `verify --problems` and a `--verify-map` leave it too.
#[test]
fn regression_an_output_pointed_at_a_device_leaves_the_device() {
    iocurve_testkit::needs_root!();
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let null = dir.path().join("null");
    let made = std::process::Command::new("mknod").arg("-m").arg("666").arg(&null).args(["c", "1", "3"]).status();
    assert!(made.unwrap().success(), "mknod (needs root)");
    let n = null.to_str().unwrap();
    let device = || std::fs::symlink_metadata(&null).unwrap().file_type().is_char_device();
    let o =
        iocurve(dir.path(), &args(&["run", "--target", "t.dat", "--size", "16m", "--ramp", "1", "--json", n], FAST));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(device(), "run --json");
    for cmd in [
        vec!["export", "1", "--format", "json", "-o", n],
        vec!["export", "1", "--format", "fio-json", "-o", n],
        vec!["report", "1", "-o", n],
    ] {
        let o = iocurve(dir.path(), &cmd);
        assert!(o.status.success(), "{cmd:?}: {}", stderr(&o));
        assert!(device(), "{cmd:?}");
    }
    let o = iocurve(dir.path(), &["verify", "t.dat", "--map", "none.map", "--problems", n]);
    assert_eq!(o.status.code(), Some(2), "no map: {}", stderr(&o));
    assert!(device(), "a failed verify --problems");
    let o =
        iocurve(dir.path(), &args(&["run", "--target", "t.dat", "--ramp", "1", "--verify", "--verify-map", n], FAST));
    assert!(!o.status.success(), "a device is no map: {}", stderr(&o));
    assert!(device(), "--verify-map");
}
