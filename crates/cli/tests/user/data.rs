//! The data pattern's options and figures, as an ordinary user: bad patterns are input errors,
//! `datacheck` shows what an array would see beside what was asked, and a run's result carries
//! the data table of its writing workloads. The read-back measurements (Python, `zstd`, loop
//! devices) are in `it/data.rs`.

use crate::util::*;
use serde_json::Value;

#[test]
fn bad_data_patterns_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "16m", "--backend", "null", "--workload", "backend-seq-write", "--ramp", "1"];
    let o = iocurve(dir.path(), &args(&base, &["--compress", "1"]));
    input_error(&o, &["--compress", "0 (incompressible) to 0.99"]);
    let o = iocurve(dir.path(), &args(&base, &["--dedupe", "0.5"]));
    input_error(&o, &["--dedupe", "1 (all unique)"]);
    let o = iocurve(dir.path(), &args(&base, &["--dedupe-unit", "3k"]));
    input_error(&o, &["--dedupe-unit", "not a multiple of the dedupe unit"]);
    let o = iocurve(dir.path(), &args(&base, &["--verify", "--dedupe", "2"]));
    input_error(&o, &["--verify", "cannot deduplicate"]);
    std::fs::write(dir.path().join("p.toml"), "[[workloads]]\nname = \"w\"\nread_pct = 0\ncompress = -0.1\n").unwrap();
    let o = iocurve(dir.path(), &["run", "p.toml"]);
    input_error(&o, &["p.toml:4", "compress"]);
    let o = iocurve(dir.path(), &["datacheck", "--file", "missing.dat"]);
    input_error(&o, &["--file missing.dat"]);
    let o = iocurve(dir.path(), &["datacheck", "--size", "1000t"]);
    input_error(&o, &["--size", "out of range"]);
}

/// The run's JSON carries the data pattern of every writing workload with the table measured
/// on a sample the engine generated.
#[test]
fn the_run_result_carries_the_data_table_of_writing_workloads() {
    let dir = tempfile::tempdir().unwrap();
    let r: Value = run_json(
        dir.path(),
        &[
            "run",
            "--target",
            "t.dat",
            "--size",
            "16m",
            "--backend",
            "null",
            "--workload",
            "backend-random-write-4k",
            "--ramp",
            "1",
            "--compress",
            "0.4",
            "--warmup-s",
            "0",
            "--intervals",
            "1",
            "--interval-s",
            "0.2",
        ],
    );
    let rows =
        r["workloads"][0]["data_check"].as_array().unwrap_or_else(|| panic!("data_check in {}", r["workloads"][0]));
    assert!(rows.len() >= 10, "{rows:?}");
    // Stored with the run: the export and the HTML report carry the same table.
    let o = iocurve(dir.path(), &["export", "1", "--format", "json", "-o", "e.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let e: Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("e.json")).unwrap()).unwrap();
    assert_eq!(&e["workloads"][0]["data_check"], &r["workloads"][0]["data_check"]);
    let o = iocurve(dir.path(), &["report", "1", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(html.contains("Written data as an array sees it") && html.contains("compress zstd -1 per 128k"));
    for row in rows {
        let (e, a) = (row["expected"].as_f64().unwrap(), row["achieved"].as_f64().unwrap());
        if row["at_most"].as_bool().unwrap() {
            assert!(a <= e * 1.05, "{row}");
        } else {
            assert!((a / e - 1.0).abs() <= 0.05, "{row}");
        }
    }
}

#[test]
fn datacheck_shows_what_an_array_sees_beside_what_was_asked() {
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(dir.path(), &["precondition", "f.dat", "--size", "16m", "--bs", "8k", "--compress", "0.4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = iocurve(dir.path(), &["datacheck", "--file", "f.dat", "--compress", "0.4", "--bs", "8k", "--size", "16m"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for row in [
        "compress zstd -1 per 4k",
        "compress zstd -1 per 128k",
        "compress lz4 per 4k",
        "compress zstd --long, whole stream",
        "dedupe per 512",
        "dedupe per 8k (its unit)",
        "dedupe per 32k",
    ] {
        let line = out.lines().find(|l| l.starts_with(row)).unwrap_or_else(|| panic!("{row} in\n{out}"));
        assert!(!line.contains('!'), "the promise holds: {line}");
    }
    // The engine's own sample, with no file: the same table.
    let o = iocurve(dir.path(), &["datacheck", "--compress", "0.75", "--dedupe", "2", "--size", "32m"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("dedupe per 4k (its unit)"), "{}", stdout(&o));
}
