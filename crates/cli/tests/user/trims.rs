//! Trims and reclaim steps (issue 40) as an ordinary user meets them: on a scratch file, the
//! refusals of what cannot be, and what a dry run says.

use crate::util::*;

/// A mix with trims on a scratch file: trims apart from reads and writes in the JSON, the
/// summary and the CSV; the scratch file has holes where it was trimmed.
#[test]
fn a_scratch_file_is_trimmed_and_the_trims_are_counted_apart() {
    let dir = tempfile::tempdir().unwrap();
    let r = run_plan(
        dir.path(),
        "targets = [\"t.dat\"]\n[[workloads]]\nname = \"m\"\nread_pct = 50\ntrim_pct = 25\nbs = \"4k\"\ntrim_bs = \"64k\"\ndirect = false\nramp = [1]\nwarmup_s = 0\nintervals = 1\ninterval_s = 0.3\n",
        &["--size", "32m", "--keep"],
    );
    let s = &r["workloads"][0]["steps"][0];
    let trims = s["trim"]["ops"].as_u64().unwrap();
    assert!(trims > 10, "{s}");
    assert_eq!(s["trim"]["bytes"].as_u64().unwrap(), trims * 65536);
    // MB/s are of the data moved: a trim moves none.
    let moved = (s["read"]["bytes"].as_u64().unwrap() + s["write"]["bytes"].as_u64().unwrap()) as f64;
    assert!((f(&s["mbps"]) - moved / 1e6 / f(&s["duration_s"])).abs() < 0.01, "{s}");
    assert_eq!(r["workloads"][0]["bs"], "4k r, 4k w, 64k t");
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(dir.path().join("t.dat")).unwrap();
    assert!(m.blocks() * 512 < m.len(), "holes where it was trimmed");
    let o = iocurve(dir.path(), &["export", "1", "--format", "csv", "-o", "s.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.path().join("s.csv")).unwrap();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    // The trims' columns are the last five (the `bs` field holds commas, quoted: count from the
    // end).
    let col = |name: &str| row[row.len() - (head.len() - head.iter().position(|h| *h == name).unwrap())];
    assert_eq!(col("trim_pct"), "25");
    assert!(col("trim_iops").parse::<f64>().unwrap() > 0.0);
}

/// What cannot be is refused before anything is opened, naming the key and the way out; a dry
/// run says what a reclaim step will overwrite and how long it may wait.
#[test]
fn trims_that_cannot_be_are_refused_and_a_dry_run_tells_the_reclaim() {
    let dir = tempfile::tempdir().unwrap();
    for (plan, says) in [
        ("read_pct = 95\ntrim_pct = 10", "read_pct = 95 and trim_pct = 10: together more than 100"),
        ("trim_bs = \"64k\"", "trim_bs is the block size of trims, but workload w has trim_pct = 0"),
    ] {
        std::fs::write(dir.path().join("plan.toml"), format!("[[workloads]]\nname = \"w\"\n{plan}\n")).unwrap();
        let o = iocurve(dir.path(), &["run", "plan.toml"]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(says), "{}", stderr(&o));
    }
    std::fs::write(
        dir.path().join("plan.toml"),
        "targets = [\"t.dat\"]\n[[reclaim]]\nname = \"thin\"\nsize = \"8m\"\noffset = \"1m\"\ntimeout_s = 120\n",
    )
    .unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--size", "16m", "--dry-run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(
            "reclaim thin: after the workloads, writes, trims and reads back 8m from offset 1m of every target"
        ) && stdout(&o).contains("waits up to 120 s for 90 % of the trimmed bytes"),
        "{}",
        stdout(&o)
    );
    assert!(!dir.path().join("t.dat").exists(), "a dry run makes nothing");
    // A reclaim step beside a verifying workload would overwrite what it verifies.
    std::fs::write(
        dir.path().join("plan.toml"),
        "targets = [\"t.dat\"]\n[[workloads]]\nname = \"v\"\nread_pct = 50\nverify = true\n[[reclaim]]\nsize = \"8m\"\n",
    )
    .unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--size", "16m"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("run the reclaim step in a plan of its own"), "{}", stderr(&o));
}
