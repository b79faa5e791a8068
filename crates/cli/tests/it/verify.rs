//! Verification: every injected dropped, torn and misdirected write is found, on a real file and
//! on a loop device; a clean run of a million I/Os with concurrent readers and writers finds
//! nothing; a killed run's saved map still finds a write dropped before the kill.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;
use serde_json::Value;

pub(crate) fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// The final pass's counts, from the line `verification: L lost, C corrupted, M misplaced of N
/// checked blocks`.
pub(crate) fn final_counts(out: &str) -> (u64, u64, u64, u64) {
    let line = out.lines().rev().find(|l| l.starts_with("verification: ") && l.contains("checked blocks"));
    let line = line.unwrap_or_else(|| panic!("a final verification line in {out}"));
    let n: Vec<u64> =
        line.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
    (n[0], n[1], n[2], n[3])
}

/// One sequential pass of 4k writes (one worker, one in flight) over part of `target`, with
/// `kind` injected into every write between 0.2 and 1.0 s: each faulty block is written once
/// and never again. Returns (injected, lost, corrupt, misplaced) of the final pass. (A window of
/// 0.2 s held no write at all once in CI of 606e069: the loaded machine stalled the step 365 ms.)
pub(crate) fn one_pass_with(dir: &Path, target: &str, kind: &str, extra: &[&str]) -> (u64, u64, u64, u64) {
    let plan = format!(
        r#"targets = ["{target}"]
[[faults]]
kind = "{kind}"
from_s = 0.2
to_s = 1.0
[[workloads]]
name = "seq"
read_pct = 0
bs = "4k"
pattern = "sequential"
verify = true
ramp = [1]
warmup_s = 0
intervals = 1
interval_s = 1.4
"#
    );
    std::fs::write(dir.join("v.toml"), plan).unwrap();
    let map = format!("{kind}.map");
    let run = ["run", "v.toml", "--verify-final", "--verify-map", &map, "--json", "v.json"];
    let o = iocurve(dir, &args(&run, extra));
    let out = format!("{}\n{}", stdout(&o), stderr(&o));
    assert_eq!(o.status.code(), Some(4), "found problems end with exit code 4: {out}");
    assert!(out.contains("verification found"), "{out}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("v.json")).unwrap()).unwrap();
    let s = &steps(&r, 0)[0];
    let written = u(&s["write"]["ops"]);
    let size = r["targets"][0]["size"].as_u64().unwrap();
    assert!(written * 4096 < size, "one pass, no block written twice ({written} writes)");
    let (lost, corrupt, misplaced, checked) = final_counts(&out);
    assert!(checked >= written, "every written block was read back");
    (u(&s["faults_injected"]), lost, corrupt, misplaced)
}

pub(crate) fn finds_every_injected_fault(dir: &Path, target: &str, extra: &[&str]) {
    let (injected, lost, corrupt, misplaced) = one_pass_with(dir, target, "drop-write", extra);
    assert!(injected > 100, "{injected}");
    assert_eq!((lost, corrupt, misplaced), (injected, 0, 0), "every dropped write is a lost block");

    let (injected, lost, corrupt, misplaced) = one_pass_with(dir, target, "torn-write", extra);
    assert!(injected > 100, "{injected}");
    assert_eq!((lost, corrupt, misplaced), (0, injected, 0), "every torn write is a corrupted block");

    // A misdirected write lands on the block before its own (written just before): that block
    // holds a stranger, and the last faulty block's own place never got its data.
    let (injected, lost, corrupt, misplaced) = one_pass_with(dir, target, "misdirect-write", extra);
    assert!(injected > 100, "{injected}");
    assert_eq!((lost, corrupt, misplaced), (1, 0, injected), "every misdirected write is found");
}

#[test]
fn every_injected_fault_is_found_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    // Sparse and large: one pass of this machine's fastest writes never wraps around.
    std::fs::File::create(dir.path().join("f.dat")).unwrap().set_len(4 << 30).unwrap();
    finds_every_injected_fault(dir.path(), "f.dat", &["--allow-write", "f.dat"]);
}

#[test]
fn every_injected_fault_is_found_on_a_loop_device() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let dev = Loop::new(4 << 30, &[]);
    finds_every_injected_fault(dir.path(), dev.path(), &["--allow-write", dev.path()]);
}

#[test]
fn a_million_ios_of_concurrent_readers_and_writers_find_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A small target, many workers, half reads: blocks are read and written by many streams,
    // and the one-I/O-per-block rule is exercised all the time.
    let run = [
        "run",
        "--target",
        "c.dat",
        "--size",
        "16m",
        "--workload",
        "backend-mixed",
        "--bs",
        "4k",
        "--verify",
        "--verify-final",
        "--buffered",
        "--ramp",
        "16",
        "--qd",
        "4",
        "--warmup-s",
        "0",
        "--intervals",
        "1",
    ];
    let mut total = 0u64;
    let mut checked = 0u64;
    // As many seconds as this machine needs for a million I/Os (a few; bounded).
    for _ in 0..6 {
        let o = iocurve(dir.path(), &args(&run, &["--interval-s", "3", "--json", "c.json"]));
        let out = stdout(&o);
        assert!(o.status.success(), "{out}\n{}", stderr(&o));
        let r: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("c.json")).unwrap()).unwrap();
        let s = &steps(&r, 0)[0];
        let v = &s["verify"];
        assert_eq!((u(&v["lost"]), u(&v["corrupt"]), u(&v["misplaced"])), (0, 0, 0), "{v}");
        assert_eq!(final_counts(&out).0 + final_counts(&out).1 + final_counts(&out).2, 0, "{out}");
        assert!(out.contains("continuing with") || total == 0, "later runs continue the map: {out}");
        total += u(&s["read"]["ops"]) + u(&s["write"]["ops"]);
        checked += u(&v["checked"]);
        if total >= 1_000_000 {
            break;
        }
    }
    assert!(total >= 1_000_000, "{total} I/Os");
    assert!(checked > total / 4, "most reads were checked: {checked} of {total}");
}

#[test]
fn a_killed_run_s_map_still_finds_a_write_dropped_before_the_kill() {
    let dir = tempfile::tempdir().unwrap();
    let plan = r#"targets = ["k.dat"]
[[faults]]
kind = "drop-write"
share = 0.05
[[workloads]]
name = "w"
read_pct = 0
bs = "4k"
verify = true
ramp = [1]
warmup_s = 0
intervals = 10
interval_s = 1
"#;
    std::fs::write(dir.path().join("k.toml"), plan).unwrap();
    let mut child = Command::new(bin())
        .args(["run", "k.toml", "--size", "1g", "--keep", "--verify-map", "k.map"])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The map is saved at the end of every interval.
    // Wait until a saved map records at least 1500 written blocks (it ends with the 2-byte
    // generations of the target's 262'144 blocks): on a loaded machine the first interval may
    // hold only a handful of writes, and so no dropped one yet.
    let map = dir.path().join("k.map");
    let deadline = Instant::now() + Duration::from_secs(60);
    let records_writes = |p: &Path| {
        std::fs::read(p).is_ok_and(|m| {
            m.len() > 512 << 10 && m[m.len() - (512 << 10)..].chunks(2).filter(|g| g != &[0, 0]).count() >= 1500
        })
    };
    while !records_writes(&map) {
        assert!(Instant::now() < deadline, "no map with written blocks saved");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before it could be killed");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let o = iocurve(dir.path(), &["verify", "k.dat", "--map", "k.map"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(4), "lost writes: exit code 4: {out}\n{}", stderr(&o));
    let (lost, corrupt, misplaced, checked) = final_counts(&out);
    assert!(lost > 0 && corrupt == 0 && misplaced == 0, "{out}");
    assert!(checked > 1000, "{out}");
    assert!(out.contains("lost write"), "examples name the blocks: {out}");

    // Bad input: a map for other targets.
    std::fs::write(dir.path().join("other.dat"), vec![0u8; 1 << 20]).unwrap();
    let o = iocurve(dir.path(), &["verify", "other.dat", "--map", "k.map"]);
    input_error(&o, &["was made for", "k.dat"]);
}

/// Rows of a problems CSV after its header, as (block, kind, found), checking the header and
/// that every row names `target`.
pub(crate) fn problem_rows(csv: &str, target: &str) -> Vec<(u64, String, String)> {
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("target,block,offset,kind,expected_generation,found_generation,found"), "{csv}");
    lines
        .map(|l| {
            let c: Vec<&str> = l.split(',').collect();
            assert_eq!(c.len(), 7, "{l}");
            assert!(c[0].ends_with(target), "{l}");
            let block: u64 = c[1].parse().unwrap();
            assert_eq!(c[2].parse::<u64>().unwrap(), block * 4096, "offset = block x 4k: {l}");
            assert!(c[4].parse::<u16>().unwrap() > 0, "the generation acknowledged: {l}");
            (block, c[3].to_string(), c[6].to_string())
        })
        .collect()
}
