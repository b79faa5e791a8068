//! Running through faults, with faults injected around the real back-ends: errors are counted
//! per target and second and match what was injected, stalls show as zero-throughput seconds and
//! as the longest stall, the error policies do what they say, and the write faults really reach
//! (or do not reach) the file.

use std::path::Path;

use crate::util::*;
use serde_json::Value;

/// Runs `toml` (a plan without targets) on `targets` with `extra` options; returns exit code
/// and the JSON result.
pub(crate) fn run(dir: &Path, toml: &str, extra: &[&str]) -> (Option<i32>, Value, String) {
    std::fs::write(dir.join("plan.toml"), toml).unwrap();
    let o = iocurve(dir, &args(&["run", "plan.toml", "--json", "r.json"], extra));
    let json =
        std::fs::read_to_string(dir.join("r.json")).map(|t| serde_json::from_str(&t).unwrap()).unwrap_or(Value::Null);
    (o.status.code(), json, format!("{}\n{}", stdout(&o), stderr(&o)))
}

pub(crate) fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

#[test]
fn injected_eio_is_counted_exactly_per_target_and_second() {
    let dir = tempfile::tempdir().unwrap();
    for backend in ["io_uring", "libaio", "psync"] {
        let plan = format!(
            r#"targets = ["a.dat", "b.dat"]
[[faults]]
kind = "eio"
share = 0.25
target = "b.dat"
[[workloads]]
name = "w"
read_pct = 50
ramp = [1, 4]
warmup_s = 0.2
intervals = 2
interval_s = 0.5
backend = "{backend}"
"#
        );
        // (A share of 0.25: at 5 %, a 1-worker step on a loaded disk sends b.dat about 40 I/Os,
        // and 0.95^40 leaves it without an error about once in 8 steps.)
        let (code, r, out) = run(dir.path(), &plan, &["--size", "64m"]);
        // Issue 13, finding 4: errors used to end in exit 0; the run completes, and exit code 3
        // says the storage failed I/Os.
        assert_eq!(code, Some(3), "the run completes despite errors, exit 3: {out}");
        assert!(out.contains("exit code 3: the run finished, but the storage failed"), "{out}");
        assert_eq!(r["status"], "complete");
        for s in steps(&r, 0) {
            let errors = u(&s["errors"]);
            assert!(errors > 0, "{backend}: errors injected");
            // An error injected into the last I/Os of a step (or at the warm-up's edge) is
            // counted too, as unmeasured.
            let unmeasured: u64 = s["unmeasured_errors"].as_array().unwrap().iter().map(|e| u(&e["count"])).sum();
            assert_eq!(
                errors + unmeasured,
                u(&s["faults_injected"]),
                "{backend}: every injected error counted, no other"
            );
            let per_second: u64 = s["samples"].as_array().unwrap().iter().map(|x| u(&x["errors"])).sum();
            assert_eq!(per_second, errors, "the samples hold every error in its second");
            for e in s["errors_by_target"].as_array().unwrap() {
                assert_eq!(e["target"], "b.dat", "only the faulty target has errors: {e}");
                assert_eq!(e["name"], "EIO");
            }
            assert!(
                s["flags"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f["code"] == "errors" && f["message"].as_str().unwrap().contains("× EIO on b.dat"))
            );
            assert!(u(&s["read"]["ops"]) > 0 && u(&s["write"]["ops"]) > 0, "the rest of the I/O went on");
        }
    }
}

#[test]
fn an_injected_stall_shows_as_zero_seconds_and_the_longest_stall() {
    // Timed to 0.1 s: not beside the other timing-sensitive tests (a psync step measured 3.14 s
    // once among them on this 2-core machine, where a 2 ms sleep overran by up to 40 ms).
    let _one = crate::util::one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    for backend in ["io_uring", "psync"] {
        let plan = format!(
            r#"targets = ["s.dat"]
[[faults]]
kind = "stall"
from_s = 1
to_s = 4
[[workloads]]
name = "w"
ramp = [2]
warmup_s = 0.3
intervals = 1
interval_s = 6
backend = "{backend}"
"#
        );
        let (code, r, out) = run(dir.path(), &plan, &["--size", "64m"]);
        assert_eq!(code, Some(0), "{out}");
        let s = &steps(&r, 0)[0];
        let ops: Vec<u64> = s["samples"].as_array().unwrap().iter().map(|x| u(&x["ops"])).collect();
        assert_eq!(ops.len(), 6);
        // The fault's three seconds without I/O; a loaded disk's hiccup beside them can only
        // lengthen the stall (a zero fourth second), never shorten it.
        assert!(ops[1] == 0 && ops[2] == 0 && ops[3] == 0 && ops[0] > 0 && ops[5] > 0, "{backend}: {ops:?}");
        let stall = s["longest_stall_s"].as_f64().unwrap();
        assert!((2.9..3.6).contains(&stall), "{backend}: longest stall {stall} s");
        assert!(s["flags"].as_array().unwrap().iter().any(|f| f["code"] == "stall"), "{backend}: flagged");
        let said = format!("no I/O completed for {stall:.1} s");
        assert!(out.contains(&said), "{backend}: said in the summary: {said}: {out}");
    }
}

#[test]
fn on_error_abort_ends_the_run_and_stop_target_spares_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let plan = r#"targets = ["a.dat", "b.dat"]
[[faults]]
kind = "eio"
from_s = 0.6
target = "a.dat"
[[workloads]]
name = "w"
ramp = [2]
warmup_s = 0.1
intervals = 4
interval_s = 0.25
"#;
    let (code, _, out) = run(dir.path(), plan, &["--size", "64m", "--on-error", "abort"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("I/O error on a.dat") && out.contains("on_error = abort"), "{out}");
    // The stored run keeps what finished before the error.
    let o = iocurve(dir.path(), &["export", "1", "--format", "json", "-o", "aborted.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("aborted.json")).unwrap()).unwrap();
    let s = &steps(&r, 0)[0];
    assert_eq!(s["intervals"].as_array().unwrap().len(), 2, "the intervals before the error are kept: {s}");
    assert_eq!(u(&s["errors"]), 0, "the aborted interval is not half-counted");

    let (code, r, out) = run(dir.path(), plan, &["--size", "64m", "--on-error", "stop-target"]);
    assert_eq!(code, Some(3), "the storage failed I/Os: {out}");
    let s = &steps(&r, 0)[0];
    let errors = u(&s["errors"]);
    assert!((1..=2).contains(&errors), "at most the I/Os in flight to a.dat fail before it is stopped: {errors}");
    let late: u64 = s["samples"].as_array().unwrap()[3..].iter().map(|x| u(&x["ops"])).sum();
    assert!(late > 0, "b.dat goes on: {s}");
}

#[test]
fn latency_is_added_to_every_io() {
    let dir = tempfile::tempdir().unwrap();
    let plan = r#"targets = ["l.dat"]
[[faults]]
kind = "latency"
latency_ms = 20
[[workloads]]
name = "w"
ramp = [1]
warmup_s = 0.1
intervals = 1
interval_s = 1
"#;
    let (code, r, out) = run(dir.path(), plan, &["--size", "64m"]);
    assert_eq!(code, Some(0), "{out}");
    let s = &steps(&r, 0)[0];
    // I/Os issued in the warm-up (before the faults' window) complete without the delay.
    assert!(s["lat_us"]["p50"].as_f64().unwrap() >= 20_000.0, "{}", s["lat_us"]);
    let mean = s["lat_us"]["mean"].as_f64().unwrap();
    // Added once, not twice (40 ms) nor not at all; above 20 ms, room for a slow machine's timers.
    assert!((18_000.0..35_000.0).contains(&mean), "{}", s["lat_us"]);
}

/// Sequential 8k writes with one write fault on a zeroed 1 MiB file; returns the file.
pub(crate) fn write_with(dir: &Path, kind: &str) -> Vec<u8> {
    // 32 blocks of 8k, written in a second: a loaded CI disk wrote 84 a second (1 MiB, 128
    // blocks in 0.5 s, asked for three times its pace).
    std::fs::write(dir.join("w.dat"), vec![0u8; 256 << 10]).unwrap();
    let plan = format!(
        r#"targets = ["w.dat"]
[[faults]]
kind = "{kind}"
[[workloads]]
name = "w"
read_pct = 0
bs = "8k"
pattern = "sequential"
ramp = [1]
warmup_s = 0
intervals = 1
interval_s = 1
"#
    );
    let (code, r, out) = run(dir, &plan, &["--allow-write", "w.dat"]);
    assert_eq!(code, Some(0), "{out}");
    let s = &steps(&r, 0)[0];
    assert_eq!(u(&s["errors"]), 0, "{kind} is acknowledged as written");
    assert!(u(&s["faults_injected"]) > 32, "{kind}: every write of at least one whole pass");
    std::fs::read(dir.join("w.dat")).unwrap()
}

#[test]
fn write_faults_reach_the_file_as_described() {
    let dir = tempfile::tempdir().unwrap();
    let stamp = |c: &[u8]| u64::from_le_bytes(c[8..16].try_into().unwrap());
    let data = write_with(dir.path(), "drop-write");
    assert!(data.iter().all(|&b| b == 0), "dropped writes never reached the file");

    let data = write_with(dir.path(), "torn-write");
    for (i, c) in data.chunks(4096).enumerate() {
        if i % 2 == 0 {
            assert_eq!(stamp(c), i as u64 * 4096, "the first half of each block was written");
        } else {
            assert!(c.iter().all(|&b| b == 0), "the second half of block {} never was", i / 2);
        }
    }

    let data = write_with(dir.path(), "misdirect-write");
    assert!(stamped_units(&dir.path().join("w.dat")).is_empty(), "no chunk holds the data meant for it");
    let blocks: Vec<&[u8]> = data.chunks(8192).collect();
    for (b, c) in blocks.iter().enumerate().take(blocks.len() - 1) {
        // Block 0's data cannot land earlier: it goes one block late, to block 1's place, which
        // block 2's data overwrites unless the run ended between the two writes.
        let from_block_0 = b == 1 && stamp(c) == 0;
        assert!(from_block_0 || stamp(c) == (b as u64 + 1) * 8192, "block {}'s data landed one block early", b + 1);
    }
    assert!(blocks[blocks.len() - 1].iter().all(|&x| x == 0), "nothing was meant for the last block's place");
}
