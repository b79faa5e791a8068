//! Regressions of the `stuck` subject (its helpers are `crate::stuck`).

use crate::stuck::*;
use crate::util::*;
use serde_json::Value;
use std::time::{Duration, Instant};

/// Issue 13, finding 1: "I/Os stuck across the end of a step are missing from the latency figures
/// (a 3 s stall showed max latency 3.1 ms)", and the step end waited forever. Now the step ends
/// after `stuck_after_s`, every outstanding I/O is stuck, and the step's maximum latency is at
/// least the stuck I/Os' age.
#[test]
fn regression_a_stall_across_the_step_end_is_stuck_io_with_its_age_in_the_latency() {
    let dir = tempfile::tempdir().unwrap();
    for backend in ["io_uring", "psync"] {
        write_plan(
            dir.path(),
            &format!(
                r#"[defaults]
ramp = [2]
queue_depth = 2
warmup_s = 0.2
intervals = 2
interval_s = 1
stuck_after_s = 1.5
backend = "{backend}"
[[workloads]]
name = "r"
[[faults]]
kind = "stall"
from_s = 1.5
to_s = 1000
"#
            ),
        );
        let started = Instant::now();
        let o = iocurve(dir.path(), &["run", "plan.toml", "--size", "64m", "--json", "r.json"]);
        let took = started.elapsed();
        assert_eq!(o.status.code(), Some(3), "{backend}: stuck I/Os: the storage failed: {}", stderr(&o));
        assert!(stderr(&o).contains("I/Os never completed"), "{}", stderr(&o));
        // 0.2 s warm-up + 2 s + 1.5 s wait + scratch file set-up; far from the stall's 1000 s
        // (a hang guard with room for a machine ten times slower).
        assert!(took < Duration::from_secs(120), "{backend}: the run ended after {took:?}");
        let r = json(dir.path());
        let s = &steps(&r, 0)[0];
        let outstanding = 2 * 2; // workers × queue depth (psync: one thread per I/O)
        assert_eq!(s["stuck_ios"], outstanding, "{backend}: every outstanding I/O is stuck: {s}");
        let age = f(&s["stuck_age_s"]);
        // Stalled 0.5 s before the end, waited 1.5 s: about 2 s old.
        assert!((1.9..10.0).contains(&age), "{backend}: oldest stuck I/O {age} s");
        assert!(f(&s["lat_us"]["max"]) >= age * 1e6 * 0.99, "{backend}: the stuck age is in the latency: {s}");
        let last = s["samples"].as_array().unwrap().last().unwrap();
        assert!(f(&last["lat_max_us"]) >= age * 1e6 * 0.99, "{backend}: and in the last second's maximum");
        // Found by an outside attack: the stall across the step's end was cut at its end.
        assert!(f(&s["longest_stall_s"]) >= age * 0.95, "{backend}: the whole stall: {}", s["longest_stall_s"]);
        let msg = flag(s, "stuck").unwrap_or_else(|| panic!("{backend}: flagged stuck: {s}"));
        assert!(msg.contains("their age enters the last interval's latency figures"), "{msg}");
        assert_eq!(r["status"], "complete");
        assert!(r["status_reason"].as_str().unwrap_or("").contains("never completed"), "{}", r["status_reason"]);
        // The stored run has the same figures.
        let id = if backend == "psync" { "2" } else { "1" };
        let e = iocurve(dir.path(), &["export", id, "--format", "json", "-o", "stored.json"]);
        assert!(e.status.success(), "{}", stderr(&e));
        let stored: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("stored.json")).unwrap()).unwrap();
        let st = &steps(&stored, 0)[0];
        assert_eq!(st["stuck_ios"], outstanding, "stored like everything else");
        assert_eq!(st["lat_us"]["max"], s["lat_us"]["max"], "with the same latency");
        std::fs::remove_file(dir.path().join("r.json")).unwrap();
    }
}

/// Issue 13, finding 1: "the first Ctrl-C does nothing; the second exits 130 without JSON or
/// summary, the run stays `running`". Now the first Ctrl-C ends the run within about a second, with
/// summary, JSON and the stored status, though the storage never answers and an interval lasts 20
/// s.
#[test]
fn regression_ctrl_c_on_stalled_storage_ends_the_run_within_about_a_second() {
    let dir = tempfile::tempdir().unwrap();
    for backend in ["io_uring", "psync"] {
        write_plan(
            dir.path(),
            &format!(
                r#"[defaults]
ramp = [2, 4]
warmup_s = 0.2
intervals = 3
interval_s = 20
backend = "{backend}"
[[workloads]]
name = "r"
[[faults]]
kind = "stall"
from_s = 0.5
to_s = 1000
"#
            ),
        );
        let child = std::process::Command::new(bin())
            .args(["run", "plan.toml", "--size", "64m", "--json", "r.json"])
            .current_dir(dir.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Wait until the step runs (the scratch file is prepared first), then into the stall.
        let db = dir.path().join("iocurve.db");
        let t = Instant::now();
        while !db.exists() && t.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_secs(3));
        let sent = Instant::now();
        // SAFETY: kill only signals the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let o = child.wait_with_output().unwrap();
        let took = sent.elapsed();
        assert_eq!(o.status.code(), Some(130), "{backend}: {}", stderr(&o));
        // Before the 20 s interval's end, not after it; how soon is a figure (bench/stop-latency).
        assert!(took < Duration::from_secs(10), "{backend}: ended {took:?} after Ctrl-C");
        assert!(stderr(&o).contains("stopping now"), "{}", stderr(&o));
        assert!(stdout(&o).contains("Summary"), "{backend}: the summary is printed: {}", stdout(&o));
        assert!(stderr(&o).contains("given up as stuck"), "{backend}: the stuck I/Os are reported: {}", stderr(&o));
        let r = json(dir.path());
        assert_eq!(r["status"], "interrupted");
        assert_eq!(r["interrupted"], true);
        let runs = iocurve(dir.path(), &["runs"]);
        let rows = runs_rows(&stdout(&runs));
        assert!(rows.last().is_some_and(|r| r.contains("interrupted")), "{}", stdout(&runs));
        let id = rows.len() as i64;
        iocurve_testkit::same_status_everywhere(dir.path(), "iocurve.db", id, Some(&r), "interrupted");
        std::fs::remove_file(dir.path().join("r.json")).unwrap();
    }
}

/// Issue 13, finding 7: "`on_error = stop-target` shows as a storage stall with zero errors". The
/// step now says which target stopped, when and why, and counts the error.
#[test]
fn regression_stop_target_says_which_target_stopped_when_and_why() {
    let dir = tempfile::tempdir().unwrap();
    write_plan(
        dir.path(),
        r#"targets = ["a.dat", "b.dat"]
[defaults]
ramp = [2]
warmup_s = 0.2
intervals = 2
interval_s = 1
on_error = "stop-target"
[[workloads]]
name = "r"
[[faults]]
kind = "eio"
target = "b.dat"
from_s = 0.5
to_s = 0.7
"#,
    );
    let o = iocurve(dir.path(), &["run", "plan.toml", "--size", "64m", "--json", "r.json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r = json(dir.path());
    let s = &steps(&r, 0)[0];
    assert!(s["errors"].as_u64().unwrap() >= 1, "the error that stopped the target is counted: {s}");
    let msg = flag(s, "target_stopped").unwrap_or_else(|| panic!("flagged: {s}"));
    assert!(msg.contains("b.dat") && !msg.contains("a.dat"), "{msg}");
    assert!(msg.contains("os error 5"), "why: {msg}");
    // The fault is active from 0.5 s to 0.7 s; the first I/O that meets it may come a
    // little after 0.5 s on a busy machine, but never outside the window.
    let when: f64 = msg
        .split(" s into the measurement")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("when: {msg}"));
    assert!((0.5..=0.7).contains(&when), "when: {msg}");
    assert!(s["read"]["ops"].as_u64().unwrap() > 0, "a.dat went on");
}

/// Issue 13, finding 4: "after `on_error = abort` ... the JSON says `interrupted: false` with no
/// status".
#[test]
fn regression_on_error_abort_is_status_aborted_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    write_plan(
        dir.path(),
        r#"[defaults]
ramp = [2, 4]
warmup_s = 0.2
intervals = 2
interval_s = 0.5
on_error = "abort"
[[workloads]]
name = "r"
[[faults]]
kind = "eio"
from_s = 0.6
"#,
    );
    let o = iocurve(dir.path(), &["run", "plan.toml", "--size", "64m", "--json", "r.json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let r = json(dir.path());
    assert_eq!(r["status"], "aborted");
    assert!(r["status_reason"].as_str().unwrap().contains("on_error = abort"), "{}", r["status_reason"]);
    let runs = iocurve(dir.path(), &["runs"]);
    assert!(stdout(&runs).contains("aborted"), "{}", stdout(&runs));
    // Found by an outside attack on the first version: the JSON lost the finished interval of
    // the aborted step (the database had it), and the EIO that caused the abort was counted
    // nowhere.
    let s = &steps(&r, 0)[0];
    assert_eq!(s["intervals"].as_array().unwrap().len(), 1, "the finished interval is kept: {s}");
    assert!(s["unmeasured_errors"][0]["count"].as_u64().unwrap() >= 1, "the EIO is counted: {s}");
    assert!(flag(s, "aborted").is_some_and(|m| m.contains("os error 5")), "{}", s["flags"]);
    let e = iocurve(dir.path(), &["export", "1", "--format", "json", "-o", "stored.json"]);
    assert!(e.status.success(), "{}", stderr(&e));
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("stored.json")).unwrap()).unwrap();
    assert_eq!(steps(&stored, 0).len(), steps(&r, 0).len(), "the JSON and the database agree");
    // Issue 38, finding 4: its own JSON said `"interrupted": false`, the export `true`.
    iocurve_testkit::same_status_everywhere(dir.path(), "iocurve.db", 1, Some(&r), "aborted");
}

/// Issue 36, finding 7: "`stop-target` still also flagged as a storage stall". With its only
/// target stopped 0.3 s into a 3 s measurement, a step completed nothing for 2.7 s: it was
/// flagged `stall` ("no I/O completed for 2.7 s") beside `target_stopped`, blaming the storage
/// for iocurve's own rest. Resting slots report no stall now; the stop is said once.
#[test]
fn regression_a_stopped_target_is_no_storage_stall() {
    let dir = tempfile::tempdir().unwrap();
    write_plan(
        dir.path(),
        r#"targets = ["a.dat"]
[defaults]
ramp = [2]
warmup_s = 0.2
intervals = 3
interval_s = 1
on_error = "stop-target"
[[workloads]]
name = "r"
[[faults]]
kind = "eio"
target = "a.dat"
from_s = 0.3
to_s = 0.5
"#,
    );
    let o = iocurve(dir.path(), &["run", "plan.toml", "--size", "16m", "--json", "r.json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r = json(dir.path());
    let s = &steps(&r, 0)[0];
    assert!(flag(s, "target_stopped").is_some(), "flagged: {}", s["flags"]);
    assert_eq!(flag(s, "stall"), None, "a rest of iocurve's own is no storage stall: {}", s["flags"]);
    assert!(s["longest_stall_s"].as_f64().unwrap() < 1.0, "{s}");
}
