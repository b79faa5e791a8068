//! The results database: runs stored as they go, listed, shown and deleted.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::util::*;

/// The table lines of every workload report in `out` (piped: plain text): each step table's
/// header and its rows (a worker count first).
fn table_lines(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| {
            l.starts_with("workers  ") || l.trim_start().split("  ").next().is_some_and(|c| c.parse::<u32>().is_ok())
        })
        .collect()
}

#[test]
fn show_prints_exactly_what_the_run_printed() {
    let dir = tempfile::tempdir().unwrap();
    let run = ["run", "--size", "64m", "--workload", "random", "--ramp", "1,2", "--label", "3 of 4 controllers"];
    let o = iocurve(dir.path(), &args(&run, FAST));
    assert!(o.status.success(), "{}", stderr(&o));
    let printed = stdout(&o);
    assert!(printed.contains("stored as run 1 in iocurve.db"), "{printed}");
    let o = iocurve(dir.path(), &["show", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = stdout(&o);
    assert!(shown.contains("run 1 \"3 of 4 controllers\": plan quick, complete"), "{shown}");
    let (a, b) = (table_lines(&printed), table_lines(&shown));
    assert!(a.len() >= 4 * 2, "four workloads of two steps: {a:?}");
    assert_eq!(a, b, "every figure of every step comes back from the store");

    let o = iocurve(dir.path(), &["runs"]);
    let listed = stdout(&o);
    assert!(listed.contains("\"3 of 4 controllers\"") && listed.contains("complete"), "{listed}");
    assert!(listed.contains("frontend-random-read-4k") && listed.contains("IOPS @"), "{listed}");
    // A run stored before schema v12 (or killed) has no headlines: `runs` computes the same
    // ones from its steps (and keeps them, as figures: the store holds no formatted line).
    let sql = |q: &str| {
        let py = format!(
            "import sqlite3; c = sqlite3.connect('iocurve.db'); print(c.execute(\"{q}\").fetchone()); c.commit()"
        );
        stdout(&Command::new("python3").args(["-c", &py]).current_dir(dir.path()).output().unwrap())
    };
    let kept = sql("SELECT headlines_json FROM runs");
    assert!(kept.contains("\"workload\":\"frontend-random-read-4k\"") && kept.contains("\"iops\":"), "{kept}");
    assert!(!kept.contains("IOPS @"), "figures, not a formatted line: {kept}");
    assert_eq!(sql("UPDATE runs SET headlines_json = NULL RETURNING id").trim(), "(1,)");
    assert_eq!(stdout(&iocurve(dir.path(), &["runs"])), listed, "the same listing without stored headlines");
    assert_eq!(sql("SELECT headlines_json FROM runs"), kept, "the headlines are stored for next time");
    // For scripts (issue 16): the same list as JSON, the maxima as figures.
    let o = iocurve(dir.path(), &["runs", "--json"]);
    let list: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("runs --json is JSON");
    let run = &list[0];
    assert_eq!(
        (run["id"].as_i64(), run["label"].as_str(), run["status"].as_str()),
        (Some(1), Some("3 of 4 controllers"), Some("complete"))
    );
    assert_eq!(run["plan"], "quick");
    assert!(run["targets"].as_str().is_some_and(|t| t.contains("iocurve-scratch.dat")), "{run}");
    let first = &run["maxima"][0];
    assert_eq!(first["workload"], "frontend-random-read-4k");
    // A figure, or on a loaded disk a maximum too noisy to tell, said so (issue 37).
    if first["maximum"].is_null() {
        assert_eq!(first["undecided"], true, "{first}");
    } else {
        assert!(f(&first["maximum"]["iops"]) > 0.0, "{first}");
    }

    let o = iocurve(dir.path(), &["delete", "1"]);
    assert!(o.status.success());
    let o = iocurve(dir.path(), &["show", "1"]);
    input_error(&o, &["no run 1", "iocurve runs"]);
}

#[test]
fn a_killed_run_keeps_every_finished_interval() {
    let dir = tempfile::tempdir().unwrap();
    // Three steps of 4 × 0.5 s; killed during the second.
    let mut child = Command::new(bin())
        .args(["run", "--size", "64m", "--backend", "null", "--workload", "frontend-random-read", "--ramp", "1,2,4"])
        .args(["--warmup-s", "0.2", "--intervals", "4", "--interval-s", "0.5", "--db", "k.db"])
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the second step has stored at least one interval, then SIGKILL.
    let db = dir.path().join("k.db");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if crate::util::cluster::stored_intervals(&db) >= 5 {
            break;
        }
        assert!(Instant::now() < deadline, "the run never stored its intervals");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let o = iocurve(dir.path(), &["runs", "--db", "k.db"]);
    assert!(stdout(&o).contains("incomplete"), "{}", stdout(&o));
    let o = Command::new(bin()).args(["show", "1"]).env("IOCURVE_DB", "k.db").current_dir(dir.path()).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = stdout(&o);
    assert!(shown.contains("incomplete"), "{shown}");
    iocurve_testkit::same_status_everywhere(dir.path(), "k.db", 1, None, "incomplete");
    let rows = table_lines(&shown);
    // Header plus the first step (4 intervals) and the part of the second that finished.
    assert_eq!(rows.len(), 3, "{shown}");
    assert!(rows[2].contains("interrupted"), "the cut-off step is flagged: {shown}");

    // The report works on it too, and says the run is incomplete.
    let o = iocurve(dir.path(), &["report", "1", "--db", "k.db", "-o", "killed.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(dir.path().join("killed.html")).unwrap();
    assert!(page.contains("status-incomplete") && page.contains("killed or still running"), "marked incomplete");
    assert!(page.contains("\"x\":[1,2]"), "both steps are in the report's data");
}

#[test]
fn sla_maximum_from_options_plan_and_stored_runs() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "64m", "--backend", "null", "--workload", "frontend-random-read", "--ramp", "1,2"];
    // A generous bound admits every step: the SLA maximum is the maximum.
    let r = run_json(dir.path(), &args(&args(&base, FAST), &["--sla-mean-ms", "1000"]));
    let w = &r["workloads"][0];
    assert_eq!(w["sla_maximum"], w["maximum"], "{w}");
    assert_eq!(r["sla"]["mean_ms"], 1000.0);
    // An impossible bound admits none.
    let r = run_json(dir.path(), &args(&args(&base, FAST), &["--sla-p99-ms", "0.000001"]));
    assert!(r["workloads"][0]["sla_maximum"].is_null());
    // A stored run recomputes it with the bound given to `show`.
    let o = iocurve(dir.path(), &["show", "1", "--sla-mean-ms", "1000"]);
    let out = stdout(&o);
    assert!(out.contains("SLA: mean ≤ 1000 ms") && out.contains("SLA max"), "{out}");
    let o = iocurve(dir.path(), &["show", "1"]);
    assert!(stdout(&o).contains("SLA max"), "the bound stored with the run's plan applies: {}", stdout(&o));
    let o = iocurve(dir.path(), &["show", "1", "--sla-mean-ms", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("positive number of milliseconds"), "{}", stderr(&o));
}

#[test]
fn compare_stored_runs_against_a_baseline() {
    let dir = tempfile::tempdir().unwrap();
    // Every I/O held 1 ms (slept): a throughput set by the delay, steady enough on a loaded
    // machine for both maxima to be decided. The null back-end's own throughput is the CPU's,
    // and under CI's parallel lanes (CI of 235ead6) it varied so much that run 2's maximum was
    // "undecided (too noisy)" — right for the figures, no comparison for this test to read.
    std::fs::write(
        dir.path().join("plan.toml"),
        "targets = [\"t.dat\"]\n[[faults]]\nkind = \"latency\"\nlatency_ms = 1\n[[workloads]]\nname = \"frontend-random-read-4k\"\nbackend = \"null\"\nread_pct = 100\nbs = \"4k\"\nramp = [1, 2]\n",
    )
    .unwrap();
    let base = ["run", "plan.toml", "--size", "64m"];
    for label in ["8 of 8 controllers", "7 of 8 controllers"] {
        let o = iocurve(dir.path(), &args(&args(&base, FAST), &["--label", label]));
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let o = iocurve(dir.path(), &["compare", "1", "2"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        out.contains("run 2 \"7 of 8 controllers\" against baseline run 1 \"8 of 8 controllers\", at the maximum"),
        "{out}"
    );
    let row = out.lines().find(|l| l.contains("frontend-random-read-4k")).expect("a row per workload");
    assert_eq!(row.matches(" %").count(), 3, "throughput change, its noise and latency change: {row}");
    assert!(row.contains("±"), "the noise of both runs beside the change: {row}");
    assert!(row.matches("IOPS @").count() == 2, "{row}");
    // The noise and its verdict, as the JSON of both runs gives them: √(cv₁² + cv₂²), each at
    // least 1 %.
    let export = |id: &str| -> serde_json::Value {
        iocurve(dir.path(), &["export", id, "--format", "json", "-o", &format!("r{id}.json")]);
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(format!("r{id}.json"))).unwrap()).unwrap()
    };
    let (a, b) = (export("1"), export("2"));
    let cv = |r: &serde_json::Value| {
        let w = &r["workloads"][0];
        f(&w["steps"][w["maximum"]["step"].as_u64().unwrap() as usize]["cv"]).max(0.01)
    };
    let noise = (cv(&a).powi(2) + cv(&b).powi(2)).sqrt() * 100.0;
    assert!(row.contains(&format!("±{noise:.0} %")), "{row} (noise {noise})");
    let tput = |r: &serde_json::Value| f(&r["workloads"][0]["maximum"]["iops"]);
    let change = (tput(&b) - tput(&a)) / tput(&a) * 100.0;
    assert_eq!(row.contains("(within noise)"), change.abs() <= noise, "{row}: {change} vs ±{noise}");

    let o = iocurve(dir.path(), &["compare", "1", "2", "--at", "optimum"]);
    assert!(stdout(&o).contains("at the optimum"));
    let o = iocurve(dir.path(), &["compare", "1", "2", "--at", "sla"]);
    input_error(&o, &["--at sla needs SLA bounds", "--sla-mean-ms"]);
    let o = iocurve(dir.path(), &["compare", "1", "2", "--at", "sla", "--sla-mean-ms", "1000"]);
    assert!(stdout(&o).contains("SLA: mean ≤ 1000 ms") && stdout(&o).contains(" %"), "{}", stdout(&o));
    let o = iocurve(dir.path(), &["compare", "1", "9"]);
    input_error(&o, &["no run 9"]);
}

/// Issue 17: two rate runs compare at every target rate both drove: the same load, its
/// response time on each configuration (here the second adds 2 ms to every I/O).
#[test]
fn rate_runs_compare_response_time_at_the_same_target_rate() {
    let dir = tempfile::tempdir().unwrap();
    let w = "[[workloads]]\nname = \"rated\"\nbackend = \"null\"\nrate = [500, 1000]\nwarmup_s = 0.1\nintervals = 2\ninterval_s = 0.3\n";
    std::fs::write(dir.path().join("a.toml"), format!("targets = [\"t.dat\"]\n{w}")).unwrap();
    std::fs::write(
        dir.path().join("b.toml"),
        format!("targets = [\"t.dat\"]\n[[faults]]\nkind = \"latency\"\nlatency_ms = 2\n{w}"),
    )
    .unwrap();
    for p in ["a.toml", "b.toml"] {
        let o = iocurve(dir.path(), &["run", p, "--size", "16m"]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let o = iocurve(dir.path(), &["compare", "1", "2"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!out.contains("not like with like"), "the same workloads, a fault apart: {out}");
    assert!(out.contains("response time at the same target rate:"), "{out}");
    for target in ["500 IOPS", "1'000 IOPS"] {
        let table = out.split("response time at the same target rate:").nth(1).unwrap();
        let row = table
            .lines()
            .find(|l| l.contains("rated") && l.contains(target))
            .unwrap_or_else(|| panic!("{target}: {out}"));
        // Piped, the table is plain text: columns parted by two spaces or more.
        let cells: Vec<&str> = row.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        // µs, from `2'195 µs` or `12.3 ms` (either may say ` (unsustained)` after it: a
        // loaded machine's schedule ran late, CI of 235ead6).
        let us = |c: &str| -> f64 {
            let c = c.trim_end_matches(" (unsustained)").replace('\'', "");
            match c.strip_suffix(" ms") {
                Some(ms) => ms.parse::<f64>().unwrap() * 1000.0,
                None => c.strip_suffix(" µs").unwrap().parse().unwrap(),
            }
        };
        let pct = |c: &str| -> f64 { c.strip_suffix(" %").unwrap().parse().unwrap() };
        assert_eq!(cells.len(), 8, "{row}");
        // Every I/O of the run took 2 ms more: its p99 is at least that, whatever the baseline's
        // p99 (a few hundred I/Os: one scheduling hiccup moves it), and the mean grows by far
        // more than the noise.
        assert!(us(cells[3]) >= 2_000.0, "run p99: {row}");
        assert!(us(cells[6]) >= 1_900.0 && pct(cells[7]) > 50.0, "mean: {row}");
        assert!(pct(cells[4]).is_finite(), "the p99 change is given: {row}");
    }
}

#[test]
fn exports_json_is_the_run_document_and_fio_json_has_fios_keys() {
    let dir = tempfile::tempdir().unwrap();
    let run = ["run", "--size", "64m", "--workload", "backend-mixed", "--ramp", "1,2", "--json", "run.json"];
    let o = iocurve(dir.path(), &args(&run, FAST));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = iocurve(dir.path(), &["export", "1", "--format", "json", "-o", "export.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let read = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.path().join(f)).unwrap()).unwrap()
    };
    assert_eq!(read("export.json"), read("run.json"), "a stored run exports the very document the run wrote");

    let o = iocurve(dir.path(), &["export", "1", "--format", "csv", "-o", "steps.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let steps = std::fs::read_to_string(dir.path().join("steps.csv")).unwrap();
    assert_eq!(steps.lines().count(), 1 + 2, "a header and one row per step");
    // Issue 16: the steps that are the workload's speed, optimum and maximum are marked, the
    // spread is in percent as the report shows it, and no column is named like a pandas
    // attribute.
    let run = read("run.json");
    let w = &run["workloads"][0];
    let header: Vec<&str> = steps.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("{name} in {header:?}"));
    assert!(!header.contains(&"flags") && !header.contains(&"cv"), "{header:?}");
    for (i, row) in steps.lines().skip(1).enumerate() {
        let cells: Vec<&str> = row.split(',').collect();
        for (mark, point) in [("is_speed", "speed"), ("is_optimum", "optimum"), ("is_maximum", "maximum")] {
            let want = w[point]["step"].as_u64() == Some(i as u64);
            assert_eq!(cells[col(mark)], want.to_string(), "{mark} of step {i}: {row}");
        }
        let cv: f64 = cells[col("cv_pct")].parse().unwrap();
        assert!((cv - f(&w["steps"][i]["cv"]) * 100.0).abs() < 1e-3, "{row}");
    }
    let samples = std::fs::read_to_string(dir.path().join("steps-samples.csv")).unwrap();
    assert_eq!(samples.lines().count(), 1 + 2 * 2, "a header and one row per sample (2 steps × 2 intervals)");

    let o = iocurve(dir.path(), &["export", "1", "--format", "fio-json", "-o", "fio.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let check = r#"
import json, sys
d = json.load(open(sys.argv[1]))
assert isinstance(d["jobs"], list) and len(d["jobs"]) == 2, d["jobs"]
for j in d["jobs"]:
    assert isinstance(j["jobname"], str)
    o = j["job options"]
    for k in ("rw", "bs", "iodepth", "numjobs"):
        assert isinstance(o[k], str), (k, o)
    assert o["rw"] == "randrw" and o["rwmixread"] == "70", o
    for side in ("read", "write"):
        x = j[side]
        assert isinstance(x["iops"], float) and x["iops"] > 0, x["iops"]
        for k in ("bw", "io_bytes", "runtime"):
            assert isinstance(x[k], int) and x[k] > 0, (k, x[k])
        for lat in ("clat_ns", "lat_ns"):
            l = x[lat]
            assert isinstance(l["min"], int) and isinstance(l["max"], int)
            assert isinstance(l["mean"], float) and isinstance(l["stddev"], float)
            for p in ("50.000000", "90.000000", "99.000000", "99.900000", "99.990000"):
                assert isinstance(l["percentile"][p], int), (p, l)
            assert l["min"] <= l["percentile"]["50.000000"] <= l["max"]
    assert isinstance(j["usr_cpu"], float) and isinstance(j["sys_cpu"], float)
print("ok")
"#;
    let o = Command::new("python3").arg("-c").arg(check).arg(dir.path().join("fio.json")).output().unwrap();
    assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
}

/// Issue 21, finding 5 (and issue 16): histograms were stored as plain HdrHistogram V2, which
/// Python's `hdrhistogram` cannot read without re-wrapping, at 1.8 KB per interval. They are
/// stored in the standard compressed encoding now: Python decodes every blob as stored, and
/// its count is the interval's I/Os.
#[test]
fn stored_histograms_are_the_standard_compressed_encoding_python_reads() {
    let python = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/pyvenv/bin/python");
    assert!(Path::new(python).exists(), "{python} is missing: scripts/test installs Python's hdrhistogram there");
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(dir.path(), &args(&["run", "--size", "64m", "--workload", "backend-random", "--ramp", "1"], FAST));
    assert!(o.status.success(), "{}", stderr(&o));
    // Every interval's count is its I/Os; the last interval of a step also holds the I/Os that
    // completed late after the stop (their age enters the latency figures), at most the step's
    // late and stuck ones.
    let py = "import sqlite3, base64\nfrom hdrh.histogram import HdrHistogram\nc = sqlite3.connect('iocurve.db')\nn = 0\nq = 'SELECT i.idx, s.intervals_max, s.drain_late + s.drain_stuck, i.read_ops, i.read_hist, i.write_ops, i.write_hist FROM intervals i JOIN (SELECT id, drain_late, drain_stuck, (SELECT MAX(idx) FROM intervals WHERE step_id = steps.id) AS intervals_max FROM steps) s ON s.id = i.step_id'\nfor idx, last, drained, rops, rblob, wops, wblob in c.execute(q):\n    extra = 0\n    for ops, blob in ((rops, rblob), (wops, wblob)):\n        count = HdrHistogram.decode(base64.b64encode(blob)).get_total_count()\n        assert count >= ops, (count, ops)\n        extra += count - ops\n        n += 1\n    assert extra == 0 or (idx == last and extra <= drained), (idx, last, extra, drained)\nprint(n)\n";
    let o = Command::new(python).args(["-c", py]).current_dir(dir.path()).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).trim().parse::<u32>().unwrap() >= 4,
        "every interval's histograms, both directions: {}",
        stdout(&o)
    );
}
