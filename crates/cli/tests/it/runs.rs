//! Runs of the real binary on real files and loop devices: the default run, options, output,
//! the JSON result, exit codes.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use crate::util::*;

#[test]
fn default_suite_runs_on_a_scratch_file_and_meets_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(dir.path(), &args(&["run", "--size", "64m", "--ramp", "1,2", "--json", "r.json"], FAST));
    let r = ok_json(&o, &dir.path().join("r.json"));
    assert!(!dir.path().join("iocurve-scratch.dat").exists(), "scratch file removed");
    for key in ["schema_version", "tool_version", "started_at", "host", "plan", "workloads"] {
        assert!(!r[key].is_null(), "top-level `{key}`");
    }
    for key in ["hostname", "kernel", "cpu_model", "cores", "backend"] {
        assert!(!r["host"][key].is_null(), "host.{key}");
    }
    assert_eq!(r["host"]["backend"], "io_uring");
    let names: Vec<&str> = r["workloads"].as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 10, "{names:?}");
    assert_eq!(names[0], "frontend-random-read-4k");
    let w = &r["workloads"][0];
    for key in ["name", "kind", "working_set", "steps", "min_lat_us"] {
        assert!(!w[key].is_null(), "workload.{key}");
    }
    // Always there; null where no step qualifies — on a loaded machine two steps of 2 × 0.3 s
    // may both be flagged (CI of 453bb2d: no maximum).
    for key in ["speed", "optimum", "maximum"] {
        assert!(w.as_object().unwrap().contains_key(key), "workload.{key}");
    }
    let s = &w["steps"][0];
    for key in [
        "workers",
        "queue_depth",
        "outstanding",
        "iops",
        "mbps",
        "lat_us",
        "read",
        "write",
        "intervals",
        "cv",
        "cpu",
        "errors",
        "flags",
        "samples",
    ] {
        assert!(!s[key].is_null(), "step.{key}");
    }
    for key in ["mean", "min", "max", "p50", "p90", "p99", "p99_9", "p99_99"] {
        assert!(f(&s["lat_us"][key]) > 0.0, "lat_us.{key}");
    }
    for key in ["user", "system", "iowait"] {
        assert!(!s["cpu"][key].is_null(), "cpu.{key}");
    }
    assert_eq!(s["intervals"].as_array().unwrap().len(), 2);
    assert_eq!(s["samples"].as_array().unwrap().len(), 2, "one sample per sub-second interval");
    // Output: progress lines, the table, and the headline in the published form.
    let out = stdout(&o);
    assert!(out.contains("[1/10] frontend-random-read-4k step 1/2, 1 worker:"), "{out}");
    assert!(out.contains("IOPS @"), "{out}");
    assert!(out.contains("/s @"), "sequential headline in MB/s or GB/s: {out}");
}

#[test]
fn real_file_both_backends_count_and_mix_correctly() {
    let dir = tempfile::tempdir().unwrap();
    for backend in ["io_uring", "libaio", "psync"] {
        let run = ["run", "--target", "t.dat", "--size", "128m", "--workload", "backend-mixed-70-8k", "--ramp", "1,4"];
        let timing = ["--warmup-s", "0.2", "--intervals", "2", "--interval-s", "1", "--backend", backend];
        let r = run_json_on_shared_disk(dir.path(), &args(&run, &timing));
        assert_eq!(r["host"]["backend"], backend);
        // Little's law within 20 %: a real file on the shared disk, beside the other lanes,
        // stretched the I/Os straddling an interval's edges to 12 % in a full run of f794c98.
        check_steps_within(&r, 8192, 0.20);
        let (mut reads, mut total) = (0u64, 0u64);
        for s in steps(&r, 0) {
            reads += s["read"]["ops"].as_u64().unwrap();
            total += s["read"]["ops"].as_u64().unwrap() + s["write"]["ops"].as_u64().unwrap();
        }
        // Each I/O is a read with probability 0.7, so the share is binomial: allow four standard
        // deviations (2 points at least). A fixed ±2 points held over the thousands of I/Os of an
        // idle machine, and failed over the 228 of a loaded clean CI run of c6e57bd (67.11 %).
        let share = 100.0 * reads as f64 / total as f64;
        let allowed = (4.0 * 100.0 * (0.7 * 0.3 / total as f64).sqrt()).max(2.0);
        assert!(total > 0, "{backend}: no I/O");
        assert!(
            (share - 70.0).abs() <= allowed,
            "{backend}: 70/30 mix gave {share:.2} % reads over {total} I/Os (allowed ±{allowed:.2} points)"
        );
        // psync runs one thread per outstanding I/O; io_uring and libaio multiplex onto at most one
        // per core.
        let threads: Vec<u64> = steps(&r, 0).iter().map(|s| s["threads"].as_u64().unwrap()).collect();
        if backend == "psync" {
            assert_eq!(threads, vec![1, 4]);
        } else {
            assert!(threads[1] <= 2, "{threads:?}");
        }
    }
}

#[test]
fn loop_device_both_backends_and_sequential_streams() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    for backend in ["io_uring", "libaio", "psync"] {
        sequential_streams_on_a_fresh_device(backend);
    }
    let lo = Loop::new(2 << 30, &["--direct-io=on"]);
    for backend in ["io_uring", "libaio", "psync"] {
        let run = [
            "run",
            "--target",
            lo.path(),
            "--workload",
            "backend-random-read-4k",
            "--ramp",
            "1,8",
            "--backend",
            backend,
        ];
        let r = run_json(dir.path(), &args(&run, FAST));
        assert_eq!(r["targets"][0]["kind"], "block device");
        assert_eq!(r["targets"][0]["size"], 2u64 << 30);
        check_steps(&r, 4096);
    }
}

#[test]
fn frontend_runs_touch_only_the_first_blocks() {
    iocurve_testkit::needs_root!();
    let lo = Loop::new(256 << 20, &["--direct-io=on"]);
    let dir = tempfile::tempdir().unwrap();
    let r = run_plan(
        dir.path(),
        &format!(
            "targets = [\"{}\"]\n[[workloads]]\nname = \"frontend-random-write-4k\"\nread_pct = 0\nbs = \"4k\"\nworking_set = \"frontend\"\nfrontend_blocks = 100\nramp = [1, 4]\nwarmup_s = 0.1\nintervals = 2\ninterval_s = 0.3\n",
            lo.path()
        ),
        &[],
    );
    assert_eq!(r["workloads"][0]["working_set"], "frontend");
    let units = stamped_units(&lo.backing);
    assert!(units.iter().all(|o| *o < 100 * 4096), "an offset beyond the first 100 blocks: {:?}", units.iter().max());
    assert!(units.len() > 90, "the 100 frontend blocks are all hit (uniform): {}", units.len());
    let data = std::fs::read(&lo.backing).unwrap();
    assert!(data[100 * 4096..].iter().all(|b| *b == 0), "nothing written past the frontend");
}

#[test]
fn weighted_groups_split_io_by_weight() {
    let dir = tempfile::tempdir().unwrap();
    let r = run_plan(
        dir.path(),
        "[[groups]]\nname = \"local\"\nweight = 3\ntargets = [\"a.dat\"]\n\n[[groups]]\nname = \"mirrored\"\nweight = 1\ntargets = [\"b.dat\"]\n\n[[workloads]]\nname = \"backend-random-write-4k\"\nread_pct = 0\nramp = [4]\nwarmup_s = 0.1\nintervals = 2\ninterval_s = 1\n",
        &["--size", "256m", "--keep"],
    );
    assert_eq!(r["targets"][0]["group"], "local");
    assert_eq!(r["targets"][1]["group"], "mirrored");
    // Distinct written blocks undercount repeated writes to a block, the more so the more
    // writes a file gets: invert the occupancy law d = N(1 − e^(−k/N)) to estimate the writes k.
    let blocks = (256u64 << 20) as f64 / 4096.0;
    let writes = |file: &str| {
        let d = stamped_units(&dir.path().join(file)).len() as f64;
        -blocks * (1.0 - d / blocks).ln()
    };
    let (a, b) = (writes("a.dat"), writes("b.dat"));
    let n = a + b;
    let measured = f(&r["workloads"][0]["steps"][0]["write"]["ops"]);
    // Enough that four σ (below) still tell 3:1 from 1:1 (n/4 apart from n/2 by more than 4σ
    // from n ≥ 48); a loaded CI disk gave 84 in 1 s (CI of 41b0a09), a quiet one thousands.
    assert!(measured >= 64.0, "enough writes to judge: {measured}");
    assert!(n >= 0.9 * measured, "the measured writes landed (warm-up adds more): {n:.0} vs {measured}");
    // Each write picks group b with p = 1/4: binomial, σ = √(n·3/16). Four σ keep the test from
    // flaking, while a broken pick (e.g. uniform groups: n/2) is still far outside.
    let sigma = (n * 3.0 / 16.0).sqrt();
    assert!(
        (b - n / 4.0).abs() <= 4.0 * sigma,
        "weights 3:1 gave {a:.0}:{b:.0} writes (expected b = {:.0} ± {:.0})",
        n / 4.0,
        4.0 * sigma
    );
}

#[test]
fn writes_are_refused_on_filesystems_and_mounted_devices_unless_allowed() {
    iocurve_testkit::needs_root!();
    let lo = Loop::new(64 << 20, &[]);
    sh("mkfs.ext4", &["-q", "-F", lo.path()]);
    let dir = tempfile::tempdir().unwrap();
    let w = ["run", "--target", lo.path(), "--workload", "backend-random-write-4k", "--ramp", "1"];
    let o = iocurve(dir.path(), &args(&w, FAST));
    input_error(&o, &["refusing to write", "signature `ext4`", "--allow-write"]);
    sh("e2fsck", &["-f", "-n", lo.path()]); // still intact

    // Reads are always allowed.
    let o = iocurve(
        dir.path(),
        &args(&["run", "--target", lo.path(), "--workload", "backend-random-read-4k", "--ramp", "1"], FAST),
    );
    assert!(o.status.success(), "{}", stderr(&o));

    // Mounted: refused, and the reason names the mount point.
    let mnt = tempfile::tempdir().unwrap();
    sh("mount", &[lo.path(), mnt.path().to_str().unwrap()]);
    let o = iocurve(dir.path(), &args(&w, FAST));
    input_error(&o, &["refusing to write", "mounted on"]);
    sh("umount", &[lo.path()]);
    sh("e2fsck", &["-f", "-n", lo.path()]);

    // Named exactly with --allow-write: it proceeds.
    let o = iocurve(dir.path(), &args(&args(&w, FAST), &["--allow-write", lo.path(), "--json", "a.json"]));
    let r = ok_json(&o, &dir.path().join("a.json"));
    assert!(f(&r["workloads"][0]["steps"][0]["write"]["iops"]) > 0.0);
}

#[test]
fn existing_files_are_protected_and_kept_scratch_files_reused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("precious.db"), vec![7u8; 1 << 20]).unwrap();
    let o = iocurve(
        dir.path(),
        &args(&["run", "--target", "precious.db", "--workload", "backend-random-write-4k", "--ramp", "1"], FAST),
    );
    input_error(&o, &["refusing to write", "did not create", "--allow-write precious.db"]);
    assert!(std::fs::read(dir.path().join("precious.db")).unwrap().iter().all(|b| *b == 7));

    let w =
        ["run", "--target", "s.dat", "--size", "64m", "--workload", "backend-random-write-4k", "--ramp", "1", "--keep"];
    let o = iocurve(dir.path(), &args(&w, FAST));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(dir.path().join("s.dat").exists(), "--keep keeps it");
    let o = iocurve(dir.path(), &args(&w, FAST));
    assert!(o.status.success(), "a kept scratch file may be written again: {}", stderr(&o));
}

#[test]
fn device_errors_are_clear() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    // 4 KiB logical blocks: 512-byte O_DIRECT I/O cannot work.
    let lo = Loop::new(64 << 20, &["--direct-io=on", "--sector-size", "4096"]);
    let o = iocurve(
        dir.path(),
        &args(
            &["run", "--target", lo.path(), "--workload", "backend-random-read-4k", "--bs", "512", "--ramp", "1"],
            FAST,
        ),
    );
    input_error(&o, &["not a multiple of the logical block size 4096", "--buffered"]);

    // An unbound loop device has no medium: a clear error, not a crash.
    let free = Command::new("losetup").arg("--find").output().unwrap();
    let free = String::from_utf8(free.stdout).unwrap();
    let o = iocurve(
        dir.path(),
        &args(&["run", "--target", free.trim(), "--workload", "backend-random-read-4k", "--ramp", "1"], FAST),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(free.trim()) && !err.contains("panicked"), "{err}");

    // A device the user may not read: the error says so and what to do.
    let o = Command::new(bin())
        .args(args(&["run", "--target", lo.path(), "--workload", "backend-random-read-4k", "--ramp", "1"], FAST))
        .current_dir(dir.path())
        .uid(65534) // nobody
        .gid(65534)
        .output()
        .unwrap();
    input_error(&o, &["cannot open target", lo.path(), "Permission denied", "run as a user who may open it"]);
}

#[test]
fn many_workers_share_few_threads() {
    iocurve_testkit::needs_root!();
    let lo = Loop::new(1 << 30, &["--direct-io=on"]);
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(bin())
        .args(args(
            &[
                "run",
                "--target",
                lo.path(),
                "--workload",
                "backend-random-read-4k",
                "--ramp",
                "512",
                "--json",
                "m.json",
            ],
            &["--warmup-s", "0.5", "--intervals", "2", "--interval-s", "1"],
        ))
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Our own threads, and the kernel's io-wq workers (`iou-wrk-*`) that show up in the
    // process's task list when a device punts I/O to them (the loop driver does); the kernel
    // bounds those at 4 per CPU and ring for block I/O.
    let (mut max_threads, mut max_iowq) = (0, 0);
    let mut seen = Vec::new();
    let task = format!("/proc/{}/task", child.id());
    while child.try_wait().unwrap().is_none() {
        if let Ok(rd) = std::fs::read_dir(&task) {
            let names: Vec<String> =
                rd.flatten().filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok()).collect();
            let iowq = names.iter().filter(|n| n.starts_with("iou-wrk")).count();
            // By name: an io-wq worker briefly carries the name of the thread that made it
            // before it becomes `iou-wrk-*`.
            let ours: std::collections::BTreeSet<&String> =
                names.iter().filter(|n| !n.starts_with("iou-wrk")).collect();
            if ours.len() > max_threads {
                seen = names.clone();
            }
            max_threads = max_threads.max(ours.len());
            max_iowq = max_iowq.max(iowq);
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(child.wait().unwrap().success());
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("m.json")).unwrap()).unwrap();
    let s = &steps(&r, 0)[0];
    assert_eq!(s["workers"], 512);
    assert!(s["threads"].as_u64().unwrap() <= 2);
    // Ours: the main thread (coordinator), the step's control thread (the in-process agent's)
    // and two I/O threads.
    assert!((3..=4).contains(&max_threads), "512 workers ran on {max_threads} threads of ours: {seen:?}");
    assert!(max_iowq <= 2 * 4 * 8, "io-wq workers stay bounded: {max_iowq}");
    check_steps(&r, 4096);
}

#[test]
fn ctrl_c_keeps_finished_intervals_and_exits_nonzero() {
    let dir = tempfile::tempdir().unwrap();
    let child = Command::new(bin())
        .args([
            "run",
            "--size",
            "64m",
            "--backend",
            "null",
            "--ramp",
            "1,2,4,8",
            "--warmup-s",
            "0.2",
            "--intervals",
            "5",
            "--interval-s",
            "0.5",
            "--json",
            "i.json",
        ])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first step's 5 intervals and one of the second are stored (a fixed 4 s left a
    // loaded machine's slow preparation 1.3 s of margin).
    iocurve_testkit::cluster::wait_for_intervals(&dir.path().join("iocurve.db"), 5);
    // SAFETY: kill only signals the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("stopping now"), "{}", stderr(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("i.json")).unwrap()).unwrap();
    assert_eq!(r["interrupted"], true);
    let done = steps(&r, 0);
    assert!(!done.is_empty() && done.len() < 4, "some but not all steps: {}", done.len());
    assert_eq!(done[0]["intervals"].as_array().unwrap().len(), 5, "the first step completed");
    let last = done.last().unwrap();
    assert!(!last["intervals"].as_array().unwrap().is_empty(), "only steps with finished intervals are kept");
    assert!(!Path::new(&dir.path().join("iocurve-scratch.dat")).exists(), "scratch file removed after Ctrl-C");
}

#[test]
fn suites_and_plan_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(dir.path(), &["suites"]);
    let out = stdout(&o);
    for s in ["quick (default)", "frontend-backend", "blocksize-sweep", "oltp"] {
        assert!(out.contains(s), "{out}");
    }
    let o = iocurve(dir.path(), &["plan", "--suite", "oltp"]);
    assert!(o.status.success());
    std::fs::write(dir.path().join("oltp.toml"), &o.stdout).unwrap();
    let o = iocurve(
        dir.path(),
        &args(&["run", "oltp.toml", "--backend", "null", "--ramp", "1", "--size", "64m", "--json", "o.json"], FAST),
    );
    let r = ok_json(&o, &dir.path().join("o.json"));
    assert_eq!(r["workloads"].as_array().unwrap().len(), 2);
    assert_eq!(r["plan"]["name"], "oltp");
}

#[test]
fn buffered_io_and_read_share_overrides() {
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(
        dir.path(),
        &args(
            &[
                "run",
                "--size",
                "64m",
                "--buffered",
                "--workload",
                "frontend-random-read-4k",
                "--ramp",
                "1",
                "--bs",
                "8k",
                "--json",
                "b.json",
            ],
            FAST,
        ),
    );
    let r = ok_json(&o, &dir.path().join("b.json"));
    assert_eq!(r["plan"]["workloads"][0]["direct"], false);
    check_steps(&r, 8192);
}

/// Issue 13, part 3: threads are a resource like memory. A step needing more threads than the
/// pids cgroup allows is refused before any I/O, naming the limit.
#[test]
fn a_step_beyond_the_pids_limit_is_refused_before_any_io() {
    iocurve_testkit::needs_root!();
    let limit = PidsLimit::new(24);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin());
    cmd.args(args(
        &["run", "--size", "64m", "--backend", "psync", "--workload", "backend-random-read-4k", "--ramp", "1,64"],
        FAST,
    ))
    .current_dir(dir.path());
    limit.apply(&mut cmd);
    let o = cmd.output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("64 I/O threads") && err.contains("pids.max 24"), "{err}");
    assert!(!dir.path().join("iocurve-scratch.dat").exists(), "nothing was created");
}

#[test]
fn thread_creation_failure_ends_the_run_with_a_clear_error() {
    iocurve_testkit::needs_root!();
    // psync wants 64 threads; the cgroup allowed them at the start, then only 24 tasks (another
    // process took the room). The threads already started must be released and the run must end
    // with an error, not hang.
    let limit = PidsLimit::new(1000);
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin());
    cmd.args(args(
        &[
            "run",
            "--size",
            "64m",
            "--backend",
            "psync",
            "--workload",
            "backend-random-read-4k",
            "--ramp",
            "1,64",
            "--json",
            "p.json",
            "--warmup-s",
            "0.5",
            "--intervals",
            "4",
            "--interval-s",
            "0.5",
        ],
        &[],
    ))
    .current_dir(dir.path())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    limit.apply(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    // The first step (1 worker, 2.5 s) runs once the database exists; lower the limit in it.
    let db = dir.path().join("iocurve.db");
    let t = std::time::Instant::now();
    while !db.exists() && t.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(800));
    std::fs::write(limit.dir.join("pids.max"), "24").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("iocurve hung after a failed thread spawn");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    // Refused by the per-step check (exit 2) or failed at the spawn (exit 1): either way a
    // clear error, never a hang or a panic.
    assert!(matches!(o.status.code(), Some(1) | Some(2)), "{err}");
    assert!(
        (err.contains("cannot start I/O thread") || err.contains("pids.max 24")) && !err.contains("panicked"),
        "{err}"
    );
    // The step that ran is kept: nothing finished is lost.
    let text = std::fs::read_to_string(dir.path().join("p.json")).unwrap_or_else(|e| panic!("p.json: {e}: {err}"));
    let r: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(steps(&r, 0).len(), 1);
    assert!(!dir.path().join("iocurve-scratch.dat").exists());
}

/// Four sequential writers on a sparse 2 GiB device (zero blocks cost nothing, written ones are
/// easy to find): every write lands where the engine said, and each worker streams through its
/// own quarter from its start.
pub(crate) fn sequential_streams_on_a_fresh_device(backend: &str) {
    let lo = Loop::new(2 << 30, &["--direct-io=on"]);
    let dir = tempfile::tempdir().unwrap();
    let r = run_plan(
        dir.path(),
        &format!(
            "targets = [\"{}\"]\n[defaults]\nwarmup_s = 0.1\nintervals = 2\ninterval_s = 0.3\n\n[[workloads]]\nname = \"backend-seq-write-1m\"\nread_pct = 0\nbs = \"1m\"\npattern = \"sequential\"\nramp = [4]\n",
            lo.path()
        ),
        &["--backend", backend],
    );
    // 1 MiB writes over 0.6 s: a few hundred I/Os of milliseconds each, so those straddling
    // the intervals' edges weigh in Little's law (5.35 in flight for 4 once in a loaded CI).
    check_steps_within(&r, 1 << 20, 0.40);
    let written_mb = (steps(&r, 0)[0]["write"]["ops"].as_u64().unwrap()) as f64;
    // Every written 4 KiB unit carries its own offset: the data landed where the engine said.
    let units = stamped_units(&lo.backing);
    assert!(!units.is_empty());
    // Four workers, four regions of 512 MiB: each region is written as one contiguous run
    // from its start (sequential streams, no wrap at this size and speed).
    let region = 512u64 << 20;
    for k in 0..4 {
        let mut mine: Vec<u64> = units.iter().copied().filter(|o| o / region == k).collect();
        mine.sort();
        assert!(!mine.is_empty(), "worker region {k} written");
        assert_eq!(mine[0], k * region, "region {k} starts at its start");
        for pair in mine.windows(2) {
            assert_eq!(pair[1] - pair[0], 4096, "region {k} is contiguous");
        }
    }
    assert!(units.len() as f64 >= written_mb * 256.0 * 0.5, "the measured writes are on the device");
}
