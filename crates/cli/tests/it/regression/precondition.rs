//! Regressions of the `precondition` subject.

use crate::util::*;

/// Issue 14 review: a scratch file created by this run was reported preconditioned when an
/// earlier file of its name had been (the summary's "preconditioned:" line and
/// `targets[].preconditioned_at`), though not a block of it had been written by a pass.
#[test]
fn regression_a_new_scratch_file_is_not_reported_preconditioned_by_an_earlier_files_record() {
    let dir = tempfile::tempdir().unwrap();
    let run = ["run", "--target", "a.dat", "--size", "64m", "--workload", "backend-random-read", "--ramp", "1"];
    let run = args(&run, FAST);
    let o = iocurve(dir.path(), &args(&run, &["--keep", "--precondition", "--json", "1.json"]));
    let r = ok_json(&o, &dir.path().join("1.json"));
    assert!(r["targets"][0]["preconditioned_at"].is_string(), "{}", r["targets"]);
    std::fs::remove_file(dir.path().join("a.dat")).unwrap();
    let o = iocurve(dir.path(), &args(&run, &["--json", "2.json"]));
    let r = ok_json(&o, &dir.path().join("2.json"));
    assert!(r["targets"][0]["preconditioned_at"].is_null(), "a new file: {}", r["targets"]);
    assert!(!stdout(&o).contains("preconditioned:"), "{}", stdout(&o));
}
