//! Regressions of the `everyday` subject.

use crate::util::*;

/// Issue 16: on the default 1 GiB scratch file the frontend of a 1 MiB sequential workload was
/// 1000 MiB, 98 % of the file. It is capped at 1/8 of the target, and the run says so.
#[test]
fn regression_a_frontend_is_never_most_of_a_small_target() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "64m", "--backend", "null", "--workload", "frontend-seq-read", "--ramp", "1"];
    let o = iocurve(dir.path(), &args(&args(&base, FAST), &["--json", "r.json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let said = "frontend capped to at most 1/8 of a target (at least one block): 1000 blocks of 1m would be all of iocurve-scratch.dat (64m); it covers the first 8m";
    assert!(stdout(&o).contains(said), "{}", stdout(&o));
    // The run's header names what ran where (issue 16): the host with its CPU, the back-end,
    // the targets with their kind and size.
    let out = stdout(&o);
    let head: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("iocurve ")).take(3).collect();
    assert!(head[0].starts_with("iocurve ") && head[0].ends_with(", plan quick"), "{head:?}");
    assert!(
        head[1].starts_with("  host     ")
            && head[1].contains(" cores, kernel ")
            && head[1].ends_with(", back-end null"),
        "{head:?}"
    );
    assert_eq!(head[2], "  targets  iocurve-scratch.dat (file, 64m)", "{head:?}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["workloads"][0]["notes"], serde_json::json!([said]), "in the JSON");
    let o = iocurve(dir.path(), &["show", "1"]);
    assert!(stdout(&o).contains(said), "and in the stored run: {}", stdout(&o));
    // 4k blocks: 1000 of them are 4 MB, under 1/8 of 64 MiB: nothing to say.
    let base = ["run", "--size", "64m", "--backend", "null", "--workload", "frontend-random-read", "--ramp", "1"];
    let o = iocurve(dir.path(), &args(&base, FAST));
    assert!(o.status.success() && !stdout(&o).contains("capped"), "{}", stdout(&o));
}
