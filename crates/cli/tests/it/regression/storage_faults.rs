//! Regressions of the `storage_faults` subject (its helpers are `crate::storage_faults`).

use crate::storage_faults::*;
use crate::util::faultdev::FaultDev;
use crate::util::*;
use std::process::Command;
use std::time::{Duration, Instant};

/// Issue 13, finding 1, with real kernel I/O: storage that stops answering hung the run at the step
/// end. Now the step ends after `--stuck-after-s`, the results are printed, written and stored
/// while the I/Os are still stuck in the kernel, and the run exits 3 once the kernel gives them
/// back.
#[test]
fn regression_storage_that_stops_answering_ends_the_step_with_stuck_io() {
    iocurve_testkit::needs_root!();
    for backend in ["io_uring", "libaio", "psync"] {
        let dev = FaultDev::start(SIZE);
        let dir = tempfile::tempdir().unwrap();
        let json_path = dir.path().join("r.json");
        let child = spawn(
            dir.path(),
            &[
                "run",
                "--target",
                dev.path(),
                "--allow-write",
                dev.path(),
                "--workload",
                "backend-random-read-4k",
                "--backend",
                backend,
                "--ramp",
                "2",
                "--qd",
                "2",
                "--warmup-s",
                "0.3",
                "--intervals",
                "3",
                "--interval-s",
                "1",
                "--stuck-after-s",
                "1",
                "--json",
                "r.json",
            ],
        );
        // Into the second interval, then the device stops answering for good.
        std::thread::sleep(Duration::from_millis(1800));
        dev.set("stall");
        // 3.3 s planned + 1 s wait + give-up margin: the results are out while the device is
        // still stalled.
        assert!(wait_for(&json_path, Duration::from_secs(20)), "{backend}: the run wrote its JSON during the stall");
        assert_eq!(dev.counters().mode, "stall", "still stalled when the results were out");
        dev.set("pass");
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(3), "{backend}: {}", stderr(&o));
        let r = json(&json_path);
        let s = &steps(&r, 0)[0];
        assert_eq!(s["stuck_ios"], 4, "{backend}: every outstanding I/O (2 workers × qd 2) is stuck: {s}");
        assert!(f(&s["stuck_age_s"]) >= 1.0, "{backend}: {s}");
        assert!(f(&s["lat_us"]["max"]) >= 1e6, "{backend}: the stuck age is in the latency: {}", s["lat_us"]);
        assert!(flag(s, "stuck").is_some() && flag(s, "stall").is_some(), "{backend}: {}", s["flags"]);
        assert_eq!(s["intervals"].as_array().unwrap().len(), 3, "{backend}: every interval is kept");
        if backend == "psync" {
            // Blocked in pread, the threads were left behind.
            assert!(flag(s, "threads_abandoned").is_some(), "{}", s["flags"]);
        }
    }
}

/// Issue 13, finding 1: "the first Ctrl-C does nothing". With the device stalled under a 30 s
/// interval, the first Ctrl-C ends the run in about a second: summary, JSON and stored status.
#[test]
fn regression_ctrl_c_on_a_stalled_device_ends_the_run_within_about_a_second() {
    iocurve_testkit::needs_root!();
    for backend in ["io_uring", "psync"] {
        let dev = FaultDev::start(SIZE);
        let dir = tempfile::tempdir().unwrap();
        let child = spawn(
            dir.path(),
            &[
                "run",
                "--target",
                dev.path(),
                "--allow-write",
                dev.path(),
                "--workload",
                "backend-random-read-4k",
                "--backend",
                backend,
                "--ramp",
                "2,4",
                "--warmup-s",
                "0.3",
                "--intervals",
                "3",
                "--interval-s",
                "30",
                "--json",
                "r.json",
            ],
        );
        assert!(wait_for(&dir.path().join("iocurve.db"), Duration::from_secs(20)));
        std::thread::sleep(Duration::from_millis(1000));
        dev.set("stall");
        dev.wait_held(1);
        std::thread::sleep(Duration::from_millis(500));
        let sent = Instant::now();
        // SAFETY: kill only signals the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let json_path = dir.path().join("r.json");
        assert!(wait_for(&json_path, Duration::from_secs(20)), "{backend}: JSON written after Ctrl-C");
        let took = sent.elapsed();
        // Well before the 30 s interval's end; how soon is a figure (bench/stop-latency).
        assert!(took < Duration::from_secs(15), "{backend}: results out {took:?} after Ctrl-C");
        dev.set("pass");
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(130), "{backend}: {}", stderr(&o));
        assert!(stdout(&o).contains("Summary"), "{}", stdout(&o));
        assert!(stderr(&o).contains("given up as stuck"), "{backend}: {}", stderr(&o));
        assert_eq!(json(&json_path)["status"], "interrupted");
    }
}

/// Issue 13: path loss with real kernel errors (finding 4: "80,968 EIO during path loss exit 0"):
/// the device fails every I/O from the second interval on; the run completes, counts every error on
/// the device by name and exits 3.
#[test]
fn regression_path_loss_mid_run_is_counted_and_exits_3() {
    iocurve_testkit::needs_root!();
    let mut dev = FaultDev::start(SIZE);
    let dir = tempfile::tempdir().unwrap();
    let child = spawn(
        dir.path(),
        &[
            "run",
            "--target",
            dev.path(),
            "--allow-write",
            dev.path(),
            "--workload",
            "backend-random-read-4k",
            "--ramp",
            "2",
            "--warmup-s",
            "0.3",
            "--intervals",
            "3",
            "--interval-s",
            "1",
            "--json",
            "r.json",
        ],
    );
    std::thread::sleep(Duration::from_millis(1800));
    // The daemon dies: the FUSE connection is gone, every I/O on the loop device fails.
    dev.kill();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("the storage failed"), "{}", stderr(&o));
    let r = json(&dir.path().join("r.json"));
    let s = &steps(&r, 0)[0];
    let errors = s["errors"].as_u64().unwrap();
    assert!(errors > 100, "the errors after the path loss are counted: {errors}");
    for e in s["errors_by_target"].as_array().unwrap() {
        assert_eq!(e["target"], dev.path());
        assert_eq!(e["name"], "EIO", "{e}");
    }
    assert!(f(&s["intervals"][0]["iops"]) > 0.0, "the first interval measured the healthy device");
    assert_eq!(r["status"], "complete");
}

/// Issue 13, finding 7: "`on_error = stop-target` shows as a storage stall with zero errors; the
/// EIO that triggered it (in the warm-up) is counted nowhere". A device failing from the start: the
/// EIO in the warm-up is counted, the stop says which target, when and why.
#[test]
fn regression_stop_target_on_an_error_in_the_warm_up_is_counted_and_explained() {
    iocurve_testkit::needs_root!();
    let dev = FaultDev::start(SIZE);
    dev.set("eio");
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(
        dir.path(),
        &[
            "run",
            "--target",
            dev.path(),
            "--allow-write",
            dev.path(),
            "--workload",
            "backend-random-read-4k",
            "--on-error",
            "stop-target",
            "--ramp",
            "1",
            "--warmup-s",
            "0.5",
            "--intervals",
            "2",
            "--interval-s",
            "0.5",
            "--json",
            "r.json",
        ],
    );
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r = json(&dir.path().join("r.json"));
    let s = &steps(&r, 0)[0];
    let unmeasured = s["unmeasured_errors"].as_array().unwrap();
    assert_eq!(unmeasured.len(), 1, "{s}");
    assert_eq!(unmeasured[0]["name"], "EIO");
    assert_eq!(unmeasured[0]["target"], dev.path());
    assert!(flag(s, "unmeasured_errors").is_some(), "{}", s["flags"]);
    let stopped = flag(s, "target_stopped").unwrap_or_else(|| panic!("{}", s["flags"]));
    assert!(
        stopped.contains(dev.path()) && stopped.contains("in the warm-up") && stopped.contains("os error 5"),
        "{stopped}"
    );
    assert!(flag(s, "no_io").is_some(), "nothing completed: {}", s["flags"]);
}

/// Issue 14, one path, found while moving a local run's final pass onto its in-process agent:
/// on an agent, `--verify-final` on storage that stopped answering ended only once the
/// coordinator took the agent for silent (10 s, "agent … was silent"), and Ctrl-C waited as
/// long; only a local run watched its own pass. Every host now runs one watched pass: it ends
/// `--stuck-after-s` after the last read returned (exit 1) and within about a second of Ctrl-C
/// (exit 130), locally and on an agent.
#[test]
fn regression_a_final_pass_on_storage_that_stops_answering_ends_on_every_host() {
    iocurve_testkit::needs_root!();
    let _one = crate::util::one_at_a_time();
    let dev = FaultDev::start(SIZE);
    let dir = tempfile::tempdir().unwrap();
    let certs = crate::util::cluster::certs(dir.path());
    let agent = crate::util::cluster::AgentProc::start(dir.path(), &certs, dev.path(), &["--allow-write", dev.path()]);
    let target = ["--target", dev.path(), "--allow-write", dev.path(), "--bs", "4k", "--verify", "--warmup-s", "0"];
    let write = [
        &target[..],
        &["--workload", "backend-random-write-4k", "--ramp", "2", "--intervals", "1", "--interval-s", "1"],
    ]
    .concat();
    let read = [
        &target[..],
        &["--workload", "backend-random-read-4k", "--ramp", "1", "--intervals", "1", "--interval-s", "0.3"],
    ]
    .concat();
    let read = [&read[..], &["--verify-final"]].concat();
    for host in [None, Some(agent.addr.as_str())] {
        let run = |args: &[&str]| run_on(host, dir.path(), &certs, args);
        let on = host.unwrap_or("this host");
        dev.set("pass");
        let o = run(&write).output().unwrap();
        assert!(o.status.success(), "{on}: {}\n{}", stdout(&o), stderr(&o));
        for ctrl_c in [false, true] {
            // Slow reads, so that the pass is still reading when the device stops answering.
            dev.set("delay=50");
            // Ctrl-C comes well before the deadline.
            let stuck_after = if ctrl_c { "30" } else { "1" };
            let mut w =
                crate::util::cluster::Watched::spawn(run(&[&read[..], &["--stuck-after-s", stuck_after]].concat()));
            w.wait_for("(random, 100 % reads", Duration::from_secs(30));
            dev.set("stall");
            let mut since = Instant::now();
            if ctrl_c {
                dev.wait_held(1);
                since = Instant::now();
                // SAFETY: signalling our own child.
                unsafe { libc::kill(w.child.id() as i32, libc::SIGINT) };
            }
            let took = ended(&mut w.child, since, Duration::from_secs(15));
            dev.set("pass");
            let (code, out) = w.finish();
            if ctrl_c {
                assert_eq!(code, Some(130), "{on}: {out}");
                assert!(out.contains("verification interrupted"), "{on}: {out}");
                // Below the 10 s the agent's silence took before and the 30 s deadline.
                assert!(took < Duration::from_secs(8), "{on}: ended {took:?} after Ctrl-C");
            } else {
                assert_eq!(code, Some(1), "{on}: {out}");
                assert!(out.contains("no read returned for 1 s"), "{on}: {out}");
                assert!(!out.contains("silent"), "{on}: the host is not lost: {out}");
                // The 1 s deadline, not the 10 s silence: 1 s plus over 10× its usual overshoot.
                assert!(took < Duration::from_secs(8), "{on}: gave up {took:?} after the stall");
            }
        }
    }
    drop(agent);
}

/// Issue 14, one path, found beside the final pass: `run --precondition` on storage that
/// stopped answering waited for it for ever, locally and on agents (an agent's pass kept
/// reporting no progress, so it never looked lost). On every host the pass now ends
/// `--stuck-after-s` after the last write returned (exit 1), keeps the state written so far,
/// and the same command resumes once the storage answers.
#[test]
fn regression_a_precondition_pass_on_storage_that_stops_answering_ends_on_every_host() {
    iocurve_testkit::needs_root!();
    let _one = crate::util::one_at_a_time();
    let dev = FaultDev::start(SIZE);
    let dir = tempfile::tempdir().unwrap();
    let certs = crate::util::cluster::certs(dir.path());
    let agent = crate::util::cluster::AgentProc::start(dir.path(), &certs, dev.path(), &["--allow-write", dev.path()]);
    let args = [
        "--target",
        dev.path(),
        "--allow-write",
        dev.path(),
        "--precondition",
        "--stuck-after-s",
        "1",
        "--workload",
        "backend-random-read-4k",
        "--ramp",
        "1",
        "--warmup-s",
        "0",
        "--intervals",
        "1",
        "--interval-s",
        "0.3",
    ];
    for host in [None, Some(agent.addr.as_str())] {
        let run = || run_on(host, dir.path(), &certs, &args);
        let on = host.unwrap_or("this host");
        // Slow writes, so that the pass is still writing when the device stops answering, as
        // soon as it said it began.
        dev.set("delay=100");
        let mut w = crate::util::cluster::Watched::spawn(run());
        w.wait_for(if host.is_none() { ": writing 64m" } else { "precondition on 1 agents" }, Duration::from_secs(30));
        dev.set("stall");
        let since = Instant::now();
        let took = ended(&mut w.child, since, Duration::from_secs(15));
        dev.set("pass");
        let (code, out) = w.finish();
        assert_eq!(code, Some(1), "{on}: {out}");
        assert!(
            out.contains("no write to") && out.contains("returned for 1 s: the storage stopped answering"),
            "{on}: {out}"
        );
        assert!(!out.contains("precondition: precondition"), "{on}: said once: {out}");
        // The 1 s deadline is honoured (it waited for ever): a hang guard below the 15 s limit.
        assert!(took < Duration::from_secs(10), "{on}: gave up {took:?} after the stall");
        // Once it answers, the same command finishes the pass (resuming where it stopped, if a
        // write had returned before the stall).
        let o = run().output().unwrap();
        assert!(o.status.success(), "{on}: {}\n{}", stdout(&o), stderr(&o));
        assert!(stdout(&o).contains(": complete"), "{on}: {}", stdout(&o));
    }
    drop(agent);
    // `iocurve precondition` too (small writes, so that it is still writing at the stall).
    let cmd =
        ["precondition", dev.path(), "--allow-write", dev.path(), "--bs", "64k", "--qd", "1", "--stuck-after-s", "1"];
    dev.set("delay=20");
    let mut child = spawn(dir.path(), &cmd);
    let t = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    dev.set("stall");
    let since = Instant::now();
    let took = ended(&mut child, since, Duration::from_secs(15));
    dev.set("pass");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}\n{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("returned for 1 s: the storage stopped answering"), "{}", stderr(&o));
    // The 1 s deadline is honoured (it waited for ever): a hang guard below the 15 s limit.
    assert!(took < Duration::from_secs(10), "gave up {took:?} after the stall ({:?} in all)", t.elapsed());
    let o = iocurve(dir.path(), &cmd);
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("resuming at"), "written for 1.5 s before the stall: {}", stdout(&o));
}

/// `iocurve run ARGS` in `dir` on this host (None), or as the coordinator of the agent at
/// `addr` (the cluster's certificates in `certs`).
fn run_on(host: Option<&str>, dir: &std::path::Path, certs: &std::path::Path, args: &[&str]) -> Command {
    match host {
        None => {
            let mut c = Command::new(bin());
            c.arg("run").args(args).current_dir(dir);
            c
        }
        Some(addr) => {
            let mut c = crate::util::cluster::coordinator(dir, certs, &["--hosts", addr]);
            c.args(args);
            c
        }
    }
}

/// The `problems` CSV's kinds, one per row after the header.
fn problem_kinds(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = header.iter().position(|h| *h == "kind").expect("a kind column");
    lines.map(|l| l.split(',').nth(at).unwrap().to_string()).collect()
}

/// Issue 36, finding 3: the final verification stopped at the first read error: after a path
/// loss the run was `failed` with exit 1 and no counts, and `iocurve verify` exited 1 without a
/// problems file. Unreadable blocks are a class of their own now: counted and listed, the pass
/// goes on, the map keeps expecting them for a later pass; exit 3, or 4 when lost blocks were
/// found too. Bad sectors here are the fault device's `eio-reads=FROM-TO`.
#[test]
fn regression_a_pass_counts_unreadable_blocks_and_goes_on() {
    iocurve_testkit::needs_root!();
    let dev = FaultDev::start(SIZE);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = [
        "run",
        "--target",
        dev.path(),
        "--allow-write",
        dev.path(),
        "--workload",
        "backend-random-write-4k",
        "--verify",
        "--verify-map",
        "m.map",
        "--bs",
        "4k",
        "--ramp",
        "2",
        "--warmup-s",
        "0",
        "--intervals",
        "2",
        "--interval-s",
        "0.5",
    ];
    // The run's own final pass on a device whose reads all fail (writes pass): exit 3 with the
    // counts, status complete with the reason.
    dev.set(&format!("eio-reads=0-{SIZE}"));
    let o = iocurve(d, &args(&run, &["--verify-final", "--json", "r.json"]));
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    let r = json(&d.join("r.json"));
    let fv = &r["final_verification"];
    let written = fv["unreadable"].as_u64().unwrap();
    assert!(written > 100, "every written block is unreadable: {fv}");
    assert_eq!((fv["checked"].as_u64(), fv["lost"].as_u64()), (Some(0), Some(0)), "{fv}");
    assert_eq!(r["status"], "complete");
    assert!(
        r["status_reason"].as_str().unwrap().contains(&format!("could not read {written} blocks")),
        "{}",
        r["status_reason"]
    );
    // `iocurve verify` after the path loss: the same blocks, listed.
    dev.set("eio");
    let verify = |csv: &str| iocurve(d, &["verify", dev.path(), "--map", "m.map", "--problems", csv]);
    let o = verify("p1.csv");
    assert_eq!(o.status.code(), Some(3), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains(&format!("{written} unreadable")), "{}", stdout(&o));
    let kinds = problem_kinds(&d.join("p1.csv"));
    assert_eq!(kinds.len() as u64, written);
    assert!(kinds.iter().all(|k| k == "unreadable"), "{kinds:?}");
    // Once the path is back, the map still expects them: all proven.
    dev.set("pass");
    let o = verify("p2.csv");
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains(&format!("0 lost, 0 corrupted, 0 misplaced of {written} checked blocks")),
        "{}",
        stdout(&o)
    );
    // Zeros over the second half (lost writes there), bad sectors over the first quarter: both
    // classes, counted apart; exit 4 wins.
    let zeros = vec![0u8; (SIZE / 2) as usize];
    iocurve_testkit::faultdev::write_direct(dev.device(), SIZE / 2, &zeros).unwrap();
    dev.set(&format!("eio-reads=0-{}", SIZE / 4));
    let o = verify("p3.csv");
    assert_eq!(o.status.code(), Some(4), "{}{}", stdout(&o), stderr(&o));
    let kinds = problem_kinds(&d.join("p3.csv"));
    let count = |k: &str| kinds.iter().filter(|x| *x == k).count() as u64;
    let (lost, unreadable) = (count("lost"), count("unreadable"));
    assert!(
        lost > 0 && unreadable > 0 && lost + unreadable < written,
        "lost {lost}, unreadable {unreadable} of {written}"
    );
    assert!(
        stdout(&o).contains(&format!(
            "{lost} lost, 0 corrupted, 0 misplaced of {} checked blocks; {unreadable} unreadable",
            written - unreadable
        )),
        "{}",
        stdout(&o)
    );
}

/// Lines of a child's standard error as they come.
fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let err = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Waits (at most `within`) for a line holding `needle`; the lines seen on failure.
fn wait_line(rx: &std::sync::mpsc::Receiver<String>, needle: &str, within: Duration) -> Result<String, Vec<String>> {
    let until = Instant::now() + within;
    let mut seen = Vec::new();
    while let Ok(line) = rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
        if line.contains(needle) {
            return Ok(line);
        }
        seen.push(line);
    }
    Err(seen)
}

/// Issue 36, finding 2: a write run on a device that never answers hung before any output: the
/// signature probe had no deadline, and Ctrl-C and `--stuck-after-s` did nothing (`precondition`
/// alike). The probe now runs where it can be given up: the run fails at `--stuck-after-s`
/// naming the stuck probe (exit 1), or ends at Ctrl-C (130), and the process exits as soon as
/// the kernel lets its stuck read go.
#[test]
fn regression_a_device_that_never_answers_the_probe_ends_the_run() {
    iocurve_testkit::needs_root!();
    let dev = FaultDev::start(SIZE);
    let dir = tempfile::tempdir().unwrap();
    for (cmd, interrupt) in [
        (
            vec![
                "run",
                "--target",
                dev.path(),
                "--workload",
                "backend-random-write-4k",
                "--ramp",
                "1",
                "--stuck-after-s",
                "2",
            ],
            false,
        ),
        (vec!["run", "--target", dev.path(), "--workload", "backend-random-write-4k", "--ramp", "1"], true),
        (vec!["precondition", dev.path(), "--stuck-after-s", "2"], false),
    ] {
        // The probe reads through the page cache: what an earlier case read must come from the
        // device again.
        let flushed = Command::new("blockdev").args(["--flushbufs", dev.path()]).status().expect("blockdev runs");
        assert!(flushed.success());
        dev.set("stall");
        let mut child = spawn(dir.path(), &cmd);
        let lines = stderr_lines(&mut child);
        let started = Instant::now();
        if interrupt {
            // Into the probe: the device holds its first read.
            dev.wait_held(1);
            // SAFETY: signalling our own child.
            // SAFETY: kill only signals the child this test started.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        }
        let needle = if interrupt { "interrupted" } else { "did not answer the signature probe's reads within 2 s" };
        let said =
            wait_line(&lines, needle, Duration::from_secs(60)).unwrap_or_else(|seen| panic!("{cmd:?}: {seen:?}"));
        // Said at the deadline or at once after Ctrl-C, not after the device answered.
        assert!(started.elapsed() < Duration::from_secs(30), "{cmd:?}: said after {:?}: {said}", started.elapsed());
        // The stuck read keeps the process until the device answers; then it ends.
        dev.set("pass");
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(if interrupt { 130 } else { 1 }), "{cmd:?}: {said}");
    }
}

/// Issue 36, part 8: a crash of the load host. The map was saved at every interval end without
/// flushing the targets, so after a power cut it named writes the storage's volatile cache had
/// lost — false lost writes — and the blocks being written at the crash had no explanation.
/// Now every save follows a flush, and `--verify-journal` records each block before it is
/// written: after iocurve and the device (a volatile write cache) die together, `iocurve
/// verify` proves every block or explains it as in flight.
#[test]
fn regression_after_a_crash_every_block_is_proven_or_explained() {
    iocurve_testkit::needs_root!();
    let mut dev = FaultDev::start_with_volatile_cache(SIZE);
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut child = spawn(
        d,
        &[
            "run",
            "--target",
            dev.path(),
            "--allow-write",
            dev.path(),
            "--workload",
            "backend-random-write-4k",
            "--verify",
            "--verify-journal",
            "--verify-map",
            "m.map",
            "--ramp",
            "4",
            "--warmup-s",
            "0",
            "--intervals",
            "40",
            "--interval-s",
            "0.5",
        ],
    );
    // Some saves, then the power cut in the middle of an interval: iocurve and the device's
    // cache go together.
    let journal = d.join("m.map.journal");
    assert!(wait_for(&journal, Duration::from_secs(20)), "the run journals");
    std::thread::sleep(Duration::from_millis(2300));
    child.kill().unwrap();
    dev.kill();
    child.wait().unwrap();
    assert!(journal.exists(), "a crashed run leaves its journal");
    dev.restart();
    let o = iocurve(d, &["verify", dev.path(), "--map", "m.map", "--problems", "p.csv"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    assert!(out.contains("0 lost, 0 corrupted, 0 misplaced of "), "{out}");
    let named = out
        .split(" of them were being written when the run stopped")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse::<u64>().ok());
    assert!(named.is_some_and(|n| n > 0), "the journal explains the blocks being written: {out}");
    // Continued by a new run: those blocks are unknown until written again, the journal goes.
    let o = iocurve(
        d,
        &[
            "run",
            "--target",
            dev.path(),
            "--allow-write",
            dev.path(),
            "--workload",
            "backend-random-read-4k",
            "--verify",
            "--verify-map",
            "m.map",
            "--ramp",
            "1",
            "--warmup-s",
            "0",
            "--intervals",
            "1",
            "--interval-s",
            "0.5",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stderr(&o).contains("were being written when the run that kept"), "{}", stderr(&o));
    assert!(!journal.exists());
}
