//! Issue 13, finding 1 and part 1: storage that stops answering never hangs a run. I/Os still
//! outstanding at a step's end get a bounded wait, then count as stuck with their age (in the
//! latency figures, never missing from them); Ctrl-C ends a run within about a second whatever
//! the storage does; and the error policies say which target stopped, when and why (finding 7).
//!
//! These tests hold completions back with iocurve's own fault injection (a stall that outlasts
//! the step); `faultdev.rs` and `storage_faults.rs` do the same with real kernel I/O below
//! iocurve.

use std::path::Path;

use crate::util::*;
use serde_json::Value;

pub(crate) fn write_plan(dir: &Path, toml: &str) {
    std::fs::write(dir.join("plan.toml"), toml).unwrap();
}

pub(crate) fn json(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("r.json")).expect("JSON written")).unwrap()
}

pub(crate) fn flag<'a>(step: &'a Value, code: &str) -> Option<&'a str> {
    step["flags"].as_array().unwrap().iter().find(|f| f["code"] == code).map(|f| f["message"].as_str().unwrap())
}

/// A slow but answering device: I/Os outstanding at the step's end complete within the wait and
/// count as late, with their latency in the last interval; nothing is stuck.
#[test]
fn ios_that_complete_after_the_step_end_are_late_not_stuck() {
    let dir = tempfile::tempdir().unwrap();
    write_plan(
        dir.path(),
        r#"[defaults]
ramp = [4]
warmup_s = 0.2
intervals = 2
interval_s = 0.5
[[workloads]]
name = "r"
[[faults]]
kind = "latency"
latency_ms = 300
"#,
    );
    let o = iocurve(dir.path(), &["run", "plan.toml", "--size", "64m", "--json", "r.json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = json(dir.path());
    let s = &steps(&r, 0)[0];
    assert_eq!(s["stuck_ios"], 0, "{s}");
    assert_eq!(s["late_ios"], 4, "every worker had one I/O out at the end: {s}");
    assert!(flag(s, "stuck").is_none());
}
