//! fio-plot (PyPI `fio-plot`, the usual graphing tool for fio results) reads iocurve's fio
//! export right (issue 16, finding 4): `export --format fio-dir` writes a file per step in
//! bench-fio's layout; fio-plot's own parser finds iocurve's figures in them, and its 2D,
//! histogram and compare graphs come out. Before, the single file of 60 jobs was summed into
//! one bar, and `-H` crashed on empty latency buckets.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::util::*;

const VENV: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/pyvenv/bin");

/// Reads a directory as fio-plot's graphs do (its `jsonimport` and `jsonparsing`) and prints
/// the rows it would plot.
const PARSE: &str = r#"
import json, sys
from fio_plot.fiolib import jsonimport, jsonparsing
settings = {"input_directory": [sys.argv[1]], "rw": sys.argv[2], "iodepth": [1], "numjobs": [1, 2],
            "filter": ["read", "write"], "compare_graph": False, "include_hosts": None, "exclude_hosts": None}
files = jsonimport.list_json_files(settings)
rows = jsonparsing.parse_json_data(settings, jsonimport.import_json_dataset(settings, files))[0]["data"]
keys = ("numjobs", "iodepth", "bs", "iops", "lat", "bw", "iops_stddev", "latency_ns", "latency_us", "latency_ms")
print(json.dumps([{k: r[k] for k in keys} for r in rows]))
"#;

/// Reads a directory's fio logs as fio-plot's timeline (`-g`) does (its `get_log_data`) and
/// prints, per numjobs, the (msec, value) points it would draw.
const PARSE_LOGS: &str = r#"
import json, sys
from fio_plot.fiolib import getdata, defaultsettings
s = defaultsettings.get_default_settings()
s.update({"input_directory": [sys.argv[1]], "rw": sys.argv[2], "iodepth": [1], "numjobs": [1, 2], "type": [sys.argv[3]]})
print(json.dumps({str(x["numjobs"]): x["data"][0][sys.argv[4]] for x in getdata.get_log_data(s)}))
"#;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a number: {v}"))
}

/// fio's sample standard deviation.
fn stddev(v: &[f64]) -> f64 {
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() as f64 - 1.0)).sqrt()
}

fn fio_plot(dir: &Path, args: &[&str]) {
    let o = Command::new(format!("{VENV}/fio-plot"))
        .args(args)
        .current_dir(dir)
        // matplotlib's cache, not in the user's home.
        .env("MPLCONFIGDIR", dir.join("mpl"))
        .output()
        .unwrap_or_else(|e| panic!("{VENV}/fio-plot: {e} (scripts/test installs fio-plot there)"));
    assert!(o.status.success(), "fio-plot {args:?}:\n{}\n{}", stdout(&o), stderr(&o));
    let png = args.iter().skip_while(|a| **a != "-o").nth(1).unwrap();
    let size = std::fs::metadata(dir.join(png)).map_or(0, |m| m.len());
    assert!(size > 10_000, "fio-plot {args:?} drew {png} ({size} bytes):\n{}", stdout(&o));
}

#[test]
fn fio_plot_reads_a_step_per_file_and_finds_iocurves_figures() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = ["run", "--size", "64m", "--workload", "backend-random", "--ramp", "1,2"];
    let r1 = ok_json(&iocurve(d, &args(&args(&run, FAST), &["--json", "r1.json"])), &d.join("r1.json"));
    ok_json(&iocurve(d, &args(&args(&run, FAST), &["--json", "r2.json"])), &d.join("r2.json"));
    for (id, out) in [("1", "fio1"), ("2", "fio2")] {
        let o = iocurve(d, &["export", id, "--format", "fio-dir", "-o", out]);
        assert!(o.status.success(), "{}", stderr(&o));
        // A fio document and three fio logs per step.
        assert!(stdout(&o).contains(&format!("wrote 16 files under {out}")), "{}", stdout(&o));
    }
    // An export never mixes its files with what a directory holds.
    let o = iocurve(d, &["export", "1", "--format", "fio-dir", "-o", "fio1"]);
    input_error(&o, &["fio1 is not empty"]);

    for (w, rw, dir_of, side) in
        [(0, "randread", "backend-random-read-4k", "read"), (1, "randwrite", "backend-random-write-4k", "write")]
    {
        let wl = &r1["workloads"][w];
        assert_eq!(wl["name"], dir_of);
        let files = format!("fio1/{dir_of}/4k");
        for n in ["1", "2"] {
            assert!(d.join(&files).join(format!("{rw}-1-{n}.json")).exists(), "bench-fio's name for step {n}");
        }
        let o = Command::new(format!("{VENV}/python")).args(["-c", PARSE, &files, rw]).current_dir(d).output().unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let rows: Vec<Value> = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(rows.len(), 2, "one row per step, not one sum of all: {rows:?}");
        for (i, row) in rows.iter().enumerate() {
            let s = &wl["steps"][i];
            let dirn = &s[side];
            assert_eq!(row["numjobs"], s["workers"].to_string(), "{row}");
            assert_eq!(row["iodepth"], "1");
            assert_eq!(row["bs"], "4k");
            assert_eq!(f(&row["iops"]), f(&dirn["iops"]), "{row}");
            assert!((f(&row["lat"]) - f(&dirn["lat_us"]["mean"]) * 1000.0).abs() < 1e-6, "mean latency in ns: {row}");
            assert_eq!(f(&row["bw"]), (f(&dirn["mbps"]) * 1e6 / 1024.0).round(), "KiB/s: {row}");
            // The spread over the step's samples, as fio computes it from its own.
            let samples: Vec<f64> = s["samples"].as_array().unwrap().iter().map(|x| f(&x["iops"])).collect();
            assert_eq!(samples.len(), 2, "2 intervals of 0.3 s: a sample each");
            assert!((f(&row["iops_stddev"]) - stddev(&samples)).abs() < 1e-6 * stddev(&samples).max(1.0), "{row}");
            // Every I/O in one of fio's latency buckets, and the buckets agree with the step's
            // own histogram where the edges meet (250 µs).
            let share = |group: &str| -> f64 { row[group][0].as_object().unwrap().values().map(f).sum() };
            let all = share("latency_ns") + share("latency_us") + share("latency_ms");
            assert!((all - 100.0).abs() < 1e-6, "the shares add up to 100 %: {all} in {row}");
            let below_250: f64 =
                ["2", "4", "10", "20", "50", "100", "250"].iter().map(|k| f(&row["latency_us"][0][*k])).sum::<f64>()
                    + share("latency_ns");
            let step_below_250: f64 = s["lat_histogram"].as_array().unwrap()[..2].iter().map(|b| f(&b["pct"])).sum();
            assert!((below_250 - step_below_250).abs() < 1e-6, "{below_250} vs the step's {step_below_250}");

            // Issue 37, finding 6: fio's logs of the step, a line per stored sample.
            let log = |kind: &str| -> Vec<Vec<u64>> {
                let name = format!("{rw}-iodepth-1-numjobs-{}_{kind}.1.log", s["workers"]);
                let text =
                    std::fs::read_to_string(d.join(&files).join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
                text.lines().map(|l| l.split(", ").map(|v| v.parse().unwrap()).collect()).collect()
            };
            let direction = if side == "read" { 0 } else { 1 };
            // fio-plot's timeline reads the same points.
            let o = Command::new(format!("{VENV}/python"))
                .args(["-c", PARSE_LOGS, &files, rw, "iops", side])
                .current_dir(d)
                .output()
                .unwrap();
            assert!(o.status.success(), "{}", stderr(&o));
            let drawn: Value = serde_json::from_str(&stdout(&o)).unwrap();
            let points: Vec<(u64, u64)> = s["samples"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| (((f(&x["t_s"]) + f(&x["dur_s"])) * 1000.0).round() as u64, f(&x["iops"]).round() as u64))
                .collect();
            let got: Vec<(u64, u64)> = drawn[s["workers"].to_string()]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap()))
                .collect();
            assert_eq!(got, points, "fio-plot's timeline of {rw} at {} workers", s["workers"]);
            for (kind, value) in [("iops", 1.0), ("lat", 1000.0), ("bw", 1e6 / 1024.0)] {
                let lines = log(kind);
                assert_eq!(lines.len(), samples.len(), "{kind}: {lines:?}");
                for (line, x) in lines.iter().zip(s["samples"].as_array().unwrap()) {
                    let field = match kind {
                        "iops" => "iops",
                        "lat" => "lat_mean_us",
                        _ => "mbps",
                    };
                    let end_ms = ((f(&x["t_s"]) + f(&x["dur_s"])) * 1000.0).round() as u64;
                    assert_eq!(line[..3], [end_ms, (f(&x[field]) * value).round() as u64, direction], "{kind}: {x}");
                    assert_eq!(line[3], 4096);
                }
            }
        }
    }
    let o = iocurve(d, &["export", "1", "--format", "fio-json", "-o", "one.json"]);
    assert!(
        stdout(&o).contains("fio-plot adds a file's jobs up into one bar, so for fio-plot export --format fio-dir")
    );

    // fio-plot's graphs from those files: IOPS and latency over the workers, the latency
    // histogram of one step, and the two runs compared.
    fio_plot(
        d,
        &[
            "-i",
            "fio1/backend-random-read-4k/4k",
            "-T",
            "ramp",
            "-N",
            "-r",
            "randread",
            "-d",
            "1",
            "-n",
            "1",
            "2",
            "-o",
            "2d.png",
        ],
    );
    fio_plot(
        d,
        &[
            "-i",
            "fio1/backend-random-read-4k/4k",
            "-T",
            "histogram",
            "-H",
            "-r",
            "randread",
            "-d",
            "1",
            "-n",
            "2",
            "-o",
            "h.png",
        ],
    );
    // The timeline from the logs.
    fio_plot(
        d,
        &[
            "-i",
            "fio1/backend-random-read-4k/4k",
            "-T",
            "timeline",
            "-g",
            "-t",
            "iops",
            "lat",
            "-r",
            "randread",
            "-d",
            "1",
            "-n",
            "1",
            "2",
            "-o",
            "g.png",
        ],
    );
    fio_plot(
        d,
        &[
            "-i",
            "fio1/backend-random-write-4k/4k",
            "fio2/backend-random-write-4k/4k",
            "-T",
            "compare",
            "-C",
            "-r",
            "randwrite",
            "-d",
            "1",
            "-n",
            "2",
            "-o",
            "c.png",
        ],
    );
}
