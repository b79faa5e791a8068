//! Regressions of the `faults` subject (its helpers are `crate::faults`).

use crate::faults::*;
use crate::util::*;
use serde_json::Value;

/// CI of stop 28: a misdirected write that completed after the step's end (its thread ran late
/// on a loaded machine) was found by the verification but missing from `faults_injected`.
/// Here a delay carries one I/O across the end on purpose: it completes late, and it is counted,
/// in the run's document and in the stored run alike.
#[test]
fn regression_a_fault_on_an_io_that_completes_after_the_step_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let plan = r#"targets = ["l.dat"]
[[faults]]
kind = "latency"
latency_ms = 400
from_s = 0.5
to_s = 0.6
[[workloads]]
name = "w"
ramp = [1]
warmup_s = 0
intervals = 1
interval_s = 0.6
"#;
    let (code, r, out) = run(dir.path(), plan, &["--size", "64m"]);
    assert_eq!(code, Some(0), "{out}");
    let s = &steps(&r, 0)[0];
    // One worker, one I/O in flight: the first I/O issued in the window is held 400 ms, past
    // the end, and no other is issued before the window closes.
    assert_eq!(u(&s["late_ios"]), 1, "{s}");
    assert_eq!(u(&s["faults_injected"]), 1, "the delayed I/O is an injected fault: {s}");
    let o = iocurve(dir.path(), &["export", "1", "--format", "json", "-o", "export.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let stored: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("export.json")).unwrap()).unwrap();
    assert_eq!(stored, r, "the stored run keeps the count");
}

/// Issue 13, finding 4: a run where every I/O failed exited 0 with "speed 0 IOPS @ 0.0 µs". A
/// run whose storage failed I/Os now ends with exit code 3, and a step that completed no I/O is
/// flagged `no_io` and enters no figure.
#[test]
fn regression_a_run_where_every_io_failed_is_not_a_success() {
    let dir = tempfile::tempdir().unwrap();
    let eio = r#"targets = ["f.dat"]
[[faults]]
kind = "eio"
[[workloads]]
name = "w"
ramp = [1]
warmup_s = 0.1
intervals = 1
interval_s = 0.3
"#;
    let (code, _, out) = run(dir.path(), eio, &["--size", "64m"]);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("exit code 3: the run finished, but the storage failed"), "{out}");
    // Nothing completes within the measured interval: the stall outlasts it.
    let stall = r#"targets = ["f.dat"]
[[faults]]
kind = "stall"
from_s = 0
to_s = 1
[[workloads]]
name = "w"
ramp = [1]
warmup_s = 0
intervals = 1
interval_s = 0.3
"#;
    let (code, r, out) = run(dir.path(), stall, &["--size", "64m"]);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("no I/O completed in w at 1 workers"), "{out}");
    let s = &steps(&r, 0)[0];
    assert!(s["flags"].as_array().unwrap().iter().any(|f| f["code"] == "no_io"), "{s}");
    let w = &r["workloads"][0];
    assert!(w["speed"].is_null() && w["maximum"].is_null() && w["optimum"].is_null(), "no figure: {w}");
    assert!(!out.contains("0 IOPS @ 0.0 µs"), "{out}");
}
