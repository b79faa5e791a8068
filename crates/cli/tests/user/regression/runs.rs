//! Regressions of the `runs` subject.
use crate::util::*;
use std::process::Command;

/// Issue 13, finding 4: a bad `--json` path was reported only after the whole run. It is now
/// bad input found before any I/O: exit 2, no scratch file made.
#[test]
fn regression_an_unwritable_json_path_is_refused_before_any_io() {
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(
        dir.path(),
        &args(&["run", "--target", "t.dat", "--size", "16m", "--json", "/nonexistent-dir/r.json"], FAST),
    );
    input_error(&o, &["--json /nonexistent-dir/r.json", "cannot write there"]);
    assert!(!dir.path().join("t.dat").exists(), "nothing was prepared");
    let o = iocurve(dir.path(), &args(&["run", "--target", "t.dat", "--size", "16m", "--json", "."], FAST));
    input_error(&o, &["--json .", "directory"]);
}

/// Issue 13, finding 3: `--ramp 65536 --qd 4096` died with "memory allocation of 549755813888
/// bytes failed" (SIGABRT), leaving its scratch file and a run marked `running`. Every step is now
/// checked against the host before anything is opened: exit 2, the product named, nothing made;
/// under an address-space limit (`prlimit --as`) too.
#[test]
fn regression_an_absurd_ramp_is_refused_before_anything_is_allocated() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--target", "t.dat", "--size", "16m", "--workload", "backend-random-read-4k"];
    let o = iocurve(dir.path(), &args(&base, &["--ramp", "65536", "--qd", "4096"]));
    input_error(&o, &["65536 workers × queue depth 4096", "--ramp", "--qd"]);
    assert!(!dir.path().join("t.dat").exists(), "no scratch file");
    assert!(!dir.path().join("iocurve.db").exists(), "no run recorded");
    let o = Command::new("prlimit")
        .arg("--as=1073741824")
        .arg(bin())
        .args(args(&base, &["--ramp", "256", "--qd", "1024"]))
        .current_dir(dir.path())
        .output()
        .expect("prlimit runs (util-linux)");
    input_error(&o, &["256 workers × queue depth 1024", "available"]);
    assert!(!dir.path().join("t.dat").exists());
}
