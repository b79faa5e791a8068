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

/// Issue 36, finding 6: a hangup (terminal closed, ssh dropped) killed a run like SIGKILL: no
/// JSON, the status left `running`, the scratch file left behind. It ends the run as Ctrl-C
/// does now — finished intervals kept, JSON and status `interrupted` written, scratch removed —
/// with exit code 129.
#[test]
fn regression_a_hangup_ends_a_run_as_ctrl_c_does_with_exit_code_129() {
    let dir = tempfile::tempdir().unwrap();
    let mut run = iocurve_testkit::cluster::Watched::spawn({
        let mut c = std::process::Command::new(bin());
        // As from a terminal: SIGHUP at its default even where the tests run under nohup
        // (which iocurve honours, leaving it ignored).
        // SAFETY: only signal(2), async-signal-safe, between fork and exec.
        unsafe {
            use std::os::unix::process::CommandExt;
            c.pre_exec(|| {
                libc::signal(libc::SIGHUP, libc::SIG_DFL);
                Ok(())
            });
        }
        c.args(["run", "--size", "16m", "--backend", "null", "--workload", "backend-random-read-4k"])
            .args(["--ramp", "1,2,4,8,16,32", "--warmup-s", "0.2", "--intervals", "4", "--interval-s", "0.5"])
            .args(["--json", "h.json"])
            .current_dir(dir.path());
        c
    });
    run.wait_for("step 1/6", std::time::Duration::from_secs(60));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(run.child.id() as i32, libc::SIGHUP) };
    let (code, out) = run.finish();
    assert_eq!(code, Some(129), "{out}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("h.json")).unwrap()).unwrap();
    assert_eq!(
        (&r["status"], &r["interrupted"]),
        (&serde_json::Value::from("interrupted"), &serde_json::Value::from(true))
    );
    let done = steps(&r, 0);
    assert!(!done.is_empty() && done.len() < 6, "the finished steps, not all: {}", done.len());
    assert_eq!(done[0]["intervals"].as_array().unwrap().len(), 4, "the first step is kept whole");
    assert!(!dir.path().join("iocurve-scratch.dat").exists(), "scratch file removed");
    let runs = iocurve(dir.path(), &["runs"]);
    assert!(stdout(&runs).contains("interrupted") && !stdout(&runs).contains("running"), "{}", stdout(&runs));
}

/// Issue 36, finding 1: two runs on one file target both wrote it and both exited 0; their
/// verification maps then reported lost writes that were the other run's. A writing run now
/// holds a lock on each file target: a second writing run is refused (exit 2) naming the first
/// (its pid and command line); a reading run goes on beside it and says so.
#[test]
fn regression_a_second_run_never_writes_a_file_target_a_run_writes() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut c = std::process::Command::new(bin());
        c.args(["run", "--target", "t.dat", "--size", "16m"]).args(extra).current_dir(dir.path());
        c
    };
    let mut first = iocurve_testkit::cluster::Watched::spawn(run(&[
        "--workload",
        "backend-random-write-4k",
        "--ramp",
        "1,2,3,4,5,6,7,8",
        "--warmup-s",
        "0",
        "--intervals",
        "4",
        "--interval-s",
        "0.5",
        "--db",
        "first.db",
    ]));
    first.wait_for("step 1/8", std::time::Duration::from_secs(60));
    let pid = first.child.id();
    let o = run(&["--workload", "backend-random-write-4k", "--ramp", "1", "--db", "second.db"])
        .args(FAST)
        .output()
        .unwrap();
    input_error(&o, &["target t.dat is being written by another run", &format!("pid {pid}"), "first.db"]);
    let o =
        run(&["--workload", "backend-random-read-4k", "--ramp", "1", "--db", "reader.db"]).args(FAST).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(&format!("being written by another run: pid {pid}")), "{}", stdout(&o));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let (code, out) = first.finish();
    assert_eq!(code, Some(130), "{out}");
    // Once the first run is gone, the file is free again.
    let o = run(&["--workload", "backend-random-write-4k", "--ramp", "1", "--db", "second.db"])
        .args(FAST)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
}

/// Issue 36, finding 7: a kept scratch file of another size than `--size` was reused silently,
/// so a run asked for 32m measured the 16m an earlier one left. It is made again at the size
/// asked for, and the run says so; without `--size` the kept file is reused as before.
#[test]
fn regression_a_kept_scratch_file_of_another_size_is_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let run = |size: Option<&str>| {
        let mut a = vec!["run", "--target", "k.dat", "--keep", "--workload", "backend-random-read-4k", "--ramp", "1"];
        if let Some(s) = size {
            a.extend(["--size", s]);
        }
        let o = iocurve(dir.path(), &args(&a, FAST));
        assert!(o.status.success(), "{}", stderr(&o));
        let len = std::fs::metadata(dir.path().join("k.dat")).unwrap().len();
        (stdout(&o) + &stderr(&o), len)
    };
    let (_, first) = run(Some("16m"));
    let (out, len) = run(Some("32m"));
    assert!(out.contains("scratch file k.dat held 16m, not the 32m asked for: made again at 32m"), "{out}");
    assert!(len > first && len == (32 << 20) + 4096, "{len}");
    let (out, again) = run(None);
    assert!(out.contains("reusing scratch file k.dat (32m)"), "{out}");
    assert_eq!(again, len);
}
