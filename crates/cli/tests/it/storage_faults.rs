//! Issue 13, part 8: faults below iocurve. A FUSE-backed image under a loop device (the fault
//! device, `util::faultdev`) answers iocurve's real O_DIRECT I/O with real kernel errors, lost
//! writes, stalls and path loss — switched mid-run, as a failing array would. Each test names
//! the finding it guards.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::faultdev::FaultDev;
use crate::util::*;
use serde_json::Value;

pub(crate) const SIZE: u64 = 64 << 20;

// Every run names the device with --allow-write: the test holds the loop device open (it is
// attached with autoclear, so that a killed test leaves none behind), and iocurve refuses a
// device another process has open unless told.

pub(crate) fn spawn(dir: &Path, args: &[&str]) -> Child {
    Command::new(bin()).args(args).current_dir(dir).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
}

/// Waits until `path` exists (up to `limit`); true if it does.
pub(crate) fn wait_for(path: &Path, limit: Duration) -> bool {
    let t = Instant::now();
    while !path.exists() {
        if t.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Waits (up to `limit` after `since`) until `child` has ended: exited, or a zombie whose last
/// thread the kernel still holds in an I/O on the stalled device. How long after `since`.
pub(crate) fn ended(child: &mut Child, since: Instant, limit: Duration) -> Duration {
    let pid = child.id();
    while since.elapsed() < limit {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.is_empty() || stat.contains(") Z") || matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    since.elapsed()
}

pub(crate) fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("JSON written")).unwrap()
}

pub(crate) fn flag<'a>(step: &'a Value, code: &str) -> Option<&'a str> {
    step["flags"].as_array().unwrap().iter().find(|f| f["code"] == code).map(|f| f["message"].as_str().unwrap())
}

/// Lost writes below iocurve: the device acknowledges writes it never stores; verifying reads
/// find them (exit 4), with real kernel I/O — not iocurve's own drop-write injection.
#[test]
fn writes_the_device_acknowledges_but_drops_are_found_by_verification() {
    iocurve_testkit::needs_root!();
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
            "backend-mixed-70-8k",
            "--verify",
            "--verify-final",
            "--bs",
            "4k",
            "--ramp",
            "2",
            "--warmup-s",
            "0.2",
            "--intervals",
            "4",
            "--interval-s",
            "1",
            "--json",
            "r.json",
        ],
    );
    // Reads and writes (70/30) of 4 KiB blocks; the device drops writes for a second mid-run.
    std::thread::sleep(Duration::from_millis(1500));
    dev.set("drop-writes");
    std::thread::sleep(Duration::from_millis(1000));
    let dropped = dev.counters().dropped;
    dev.set("pass");
    let o = child.wait_with_output().unwrap();
    assert!(dropped > 0, "the device dropped writes");
    assert_eq!(o.status.code(), Some(4), "lost writes are found: {}\n{}", stdout(&o), stderr(&o));
    let r = json(&dir.path().join("r.json"));
    // The final pass reads every block the map knows: a dropped write not overwritten later is
    // a lost write there. Only lost writes: the device dropped, it did not corrupt.
    let fin = &r["final_verification"];
    let lost = fin["lost"].as_u64().unwrap();
    assert!(lost > 0 && lost <= dropped, "{lost} lost blocks found of {dropped} dropped writes: {fin}");
    assert_eq!((fin["corrupt"].as_u64(), fin["misplaced"].as_u64()), (Some(0), Some(0)), "{fin}");
}

/// Found by an outside attack on the first version: a Ctrl-C while a step waited for its
/// outstanding I/Os (`--stuck-after-s 60`) was ignored for the whole wait (58 s).
#[test]
fn ctrl_c_during_the_wait_at_a_step_end_cuts_the_wait_short() {
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
                "2",
                "--warmup-s",
                "0.3",
                "--intervals",
                "2",
                "--interval-s",
                "1",
                "--stuck-after-s",
                "60",
                "--json",
                "r.json",
            ],
        );
        assert!(wait_for(&dir.path().join("iocurve.db"), Duration::from_secs(20)));
        std::thread::sleep(Duration::from_millis(1200));
        dev.set("stall");
        // The step ends at 2.3 s; its I/Os are stuck; the wait would last 60 s.
        std::thread::sleep(Duration::from_millis(2500));
        let sent = Instant::now();
        // SAFETY: kill only signals the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let json_path = dir.path().join("r.json");
        assert!(wait_for(&json_path, Duration::from_secs(30)), "{backend}: JSON written");
        let took = sent.elapsed();
        dev.set("pass");
        let o = child.wait_with_output().unwrap();
        // Ctrl-C rather than the 60 s wait; how soon is a figure (bench/stop-latency).
        assert!(took < Duration::from_secs(20), "{backend}: results out {took:?} after Ctrl-C: {}", stderr(&o));
        assert_eq!(o.status.code(), Some(130), "{backend}: {}", stderr(&o));
        let r = json(&json_path);
        let s = &steps(&r, 0)[0];
        assert_eq!(s["intervals"].as_array().unwrap().len(), 2, "{backend}: the finished step is kept: {s}");
        assert_eq!(s["stuck_ios"], 2, "{backend}: {s}");
    }
}

/// Found by the outside attack: on a device that stopped answering, `--verify-final` and
/// `iocurve verify` hung, and ignored Ctrl-C. Now Ctrl-C ends the pass in about a second
/// (exit 130), and a read that does not return within `--stuck-after-s` ends it (exit 1).
#[test]
fn a_verification_pass_on_a_stalled_device_ends_on_ctrl_c_and_at_its_deadline() {
    iocurve_testkit::needs_root!();
    let dev = FaultDev::start(SIZE);
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
            "backend-random-write-4k",
            "--verify",
            "--bs",
            "4k",
            "--ramp",
            "2",
            "--warmup-s",
            "0.2",
            "--intervals",
            "1",
            "--interval-s",
            "1",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    dev.set("stall");
    let verify = ["verify", dev.path(), "--map", "iocurve-verify.map"];

    let mut child = spawn(dir.path(), &verify);
    dev.wait_held(1);
    let sent = Instant::now();
    // SAFETY: kill only signals the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    // The process itself can only exit once the kernel returns its read.
    let took = ended(&mut child, sent, Duration::from_secs(30));
    dev.set("pass");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    assert!(stderr(&o).contains("verification interrupted"), "{}", stderr(&o));
    // Ends at all on a stalled device (a hang guard, 10× the ~1 s stop); how soon: bench/stop-latency.
    assert!(took < Duration::from_secs(20), "ended {took:?} after Ctrl-C");

    dev.set("stall");
    let started = Instant::now();
    let mut child = spawn(dir.path(), &[&verify[..], &["--stuck-after-s", "1"]].concat());
    let took = ended(&mut child, started, Duration::from_secs(30));
    dev.set("pass");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no read returned for 1 s"), "{}", stderr(&o));
    // The 1 s deadline is honoured, not waited out for ever: 1 s plus over 10× its overshoot.
    assert!(took < Duration::from_secs(10), "gave up after {took:?}");
}

/// Found by the outside attack: Ctrl-C while preconditioning a stalled device blocked in the
/// final sync until the device answered, and `run --precondition` then wrote no JSON and stored
/// no run.
#[test]
fn ctrl_c_while_preconditioning_a_stalled_device_ends_the_run_with_its_json() {
    iocurve_testkit::needs_root!();
    let dev = FaultDev::start(SIZE);
    dev.set("delay=100");
    let dir = tempfile::tempdir().unwrap();
    let child = spawn(
        dir.path(),
        &[
            "run",
            "--target",
            dev.path(),
            "--allow-write",
            dev.path(),
            "--precondition",
            "--workload",
            "backend-random-read-4k",
            "--ramp",
            "1",
            "--json",
            "r.json",
        ],
    );
    // Stalled once the pass has begun (it said so), not after a fixed time: a pass that had
    // already finished let a step measure an interval before the Ctrl-C.
    let mut child = child;
    let out = std::io::BufReader::new(child.stdout.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = Vec::new();
        for line in out.lines().map_while(Result::ok) {
            if line.contains(": writing") {
                let _ = tx.send(());
            }
            lines.push(line);
        }
        lines
    });
    rx.recv_timeout(Duration::from_secs(20)).expect("the precondition pass began");
    dev.set("stall");
    dev.wait_held(1);
    let sent = Instant::now();
    // SAFETY: kill only signals the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let json_path = dir.path().join("r.json");
    assert!(wait_for(&json_path, Duration::from_secs(20)), "JSON written");
    let took = sent.elapsed();
    dev.set("pass");
    let o = child.wait_with_output().unwrap();
    let printed = reader.join().unwrap().join("\n");
    assert!(printed.contains("interrupted while preconditioning"), "{printed}");
    // Out while the device still stalls (it never answers until the test lets it): a hang guard.
    assert!(took < Duration::from_secs(15), "results out {took:?} after Ctrl-C: {}", stderr(&o));
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let r = json(&json_path);
    assert_eq!(r["status"], "interrupted", "{r}");
    assert!(r["workloads"].as_array().unwrap().is_empty());
    let runs = iocurve(dir.path(), &["runs"]);
    assert!(stdout(&runs).contains("interrupted"), "the run is stored: {}", stdout(&runs));
}

/// Found by the outside attack: psync threads whose first I/O never returned (a device already
/// stalled when the step starts) were not counted as stuck.
#[test]
fn psync_ios_stuck_from_the_first_are_counted() {
    iocurve_testkit::needs_root!();
    let dev = FaultDev::start(SIZE);
    let dir = tempfile::tempdir().unwrap();
    dev.set("stall");
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
            "psync",
            "--ramp",
            "3",
            "--warmup-s",
            "0.2",
            "--intervals",
            "1",
            "--interval-s",
            "0.5",
            "--stuck-after-s",
            "0.5",
            "--json",
            "r.json",
        ],
    );
    let json_path = dir.path().join("r.json");
    // The signature probe reads the device too: let it through, then stall the step's reads.
    std::thread::sleep(Duration::from_millis(300));
    dev.set("pass");
    dev.set("stall");
    let ok = wait_for(&json_path, Duration::from_secs(30));
    dev.set("pass");
    let o = child.wait_with_output().unwrap();
    assert!(ok, "JSON written during the stall: {}", stderr(&o));
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r = json(&json_path);
    let s = &steps(&r, 0)[0];
    assert_eq!(s["stuck_ios"], 3, "one stuck read per psync thread: {s}");
    assert!(flag(s, "threads_abandoned").is_some_and(|m| !m.contains("0.0 s")), "{}", s["flags"]);
}

/// (bytes written over all sessions, finished) of every precondition record, by target.
pub(crate) fn precondition_records(db: &Path) -> Vec<(String, u64, bool)> {
    let py = "import sqlite3, sys\nfor r in sqlite3.connect(sys.argv[1]).execute('SELECT target, bytes_written, finished_at IS NOT NULL FROM preconditions'): print(r[0], r[1], r[2])";
    let o = Command::new("python3").args(["-c", py]).arg(db).output().unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().collect();
            (v[0].to_string(), v[1].parse().unwrap(), v[2] == "1")
        })
        .collect()
}

/// Issue 14: preconditioning on agents. Ctrl-C on the coordinator stops the agent's pass, the
/// coordinator keeps where it stopped, and the same command resumes there: both sessions
/// together write every block exactly once.
#[test]
fn an_agents_precondition_pass_stopped_by_ctrl_c_resumes_where_it_stopped() {
    iocurve_testkit::needs_root!();
    use crate::util::cluster::{AgentProc, certs, coordinator};
    let dev = FaultDev::start(SIZE);
    // Slow enough to interrupt after the first saved state (about 4 s for the pass).
    dev.set("delay=400");
    let dir = tempfile::tempdir().unwrap();
    let c = certs(dir.path());
    let agent = AgentProc::start(dir.path(), &c, dev.path(), &["--allow-write", dev.path()]);
    let cmd = [
        "--hosts",
        &agent.addr,
        "--target",
        dev.path(),
        "--precondition",
        "--workload",
        "backend-random-read-4k",
        "--ramp",
        "1",
        "--warmup-s",
        "0.1",
        "--intervals",
        "1",
        "--interval-s",
        "0.3",
        "--json",
        "r.json",
    ];
    let child = coordinator(dir.path(), &c, &cmd).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let db = dir.path().join("iocurve.db");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(db.exists() && precondition_records(&db).first().is_some_and(|r| r.1 > 0)) {
        assert!(Instant::now() < deadline, "no progress saved");
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signalling our own child.
    // SAFETY: kill only signals the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(130), "{}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("interrupted while preconditioning"), "{}", stdout(&o));
    let r = json(&dir.path().join("r.json"));
    assert_eq!(r["status"], "interrupted");
    let recs = precondition_records(&db);
    let key = format!("{}:{}", agent.addr, dev.path());
    assert_eq!(recs.len(), 1, "{recs:?}");
    assert_eq!(recs[0].0, key);
    let partial = recs[0].1;
    assert!(!recs[0].2 && partial > 0 && partial < SIZE, "{partial} of {SIZE}");

    dev.set("pass");
    let o = coordinator(dir.path(), &c, &cmd).output().unwrap();
    assert!(o.status.success(), "{}\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains(&format!("precondition {key}: resuming at")), "{}", stdout(&o));
    let recs = precondition_records(&db);
    assert!(recs[0].2, "finished: {recs:?}");
    assert_eq!(recs[0].1, SIZE, "both sessions together wrote every block exactly once");
    drop(agent);
}

/// Issue 17, part 4, below iocurve: the fault device stalls for 1 s during a 2000 IOPS open-loop
/// step (io_uring, O_DIRECT, a real loop device). The response time of the I/Os that were due
/// during the stall shows it — p99 ≥ 0.5 s with a sixth of the step's I/Os due then — while
/// their service time does not (only the I/Os in flight at the stall waited in the device).
#[test]
fn a_stall_below_iocurve_shows_in_the_response_time_of_a_rate_step() {
    iocurve_testkit::needs_root!();
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
            "--rate",
            "2000",
            "--max-outstanding",
            "16",
            "--warmup-s",
            "0.5",
            "--intervals",
            "6",
            "--interval-s",
            "1",
            "--json",
            "r.json",
        ],
    );
    // Two and a half seconds into the measurement (its start and set-up take about a second).
    std::thread::sleep(Duration::from_millis(3500));
    dev.set("stall");
    std::thread::sleep(Duration::from_millis(1000));
    dev.set("pass");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json(&json_path);
    let s = &steps(&r, 0)[0];
    let rate = &s["rate"];
    assert!(f(&s["lat_us"]["p99"]) >= 500_000.0, "response p99 shows the stall: {}", s["lat_us"]);
    assert!(f(&s["lat_us"]["max"]) >= 900_000.0, "{}", s["lat_us"]);
    // Far below the stalled I/Os' 500 ms and more, with room for a slow machine's service times.
    assert!(f(&rate["service_us"]["p99"]) < 200_000.0, "service p99 does not: {rate}");
    assert!(f(&rate["lag_us"]["p99"]) >= 400_000.0, "the lag says where the time went: {rate}");
    // 6 s at 2000 IOPS, none dropped: the backlog of the stall was issued once it ended.
    assert!((f(&rate["due"]) - 12_000.0).abs() <= 3.0, "{rate}");
    assert_eq!(rate["dropped"], 0);
}
