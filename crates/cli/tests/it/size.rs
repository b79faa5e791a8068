//! `iocurve size` (issue 19, sizing arithmetic): every subcommand's help example, run as
//! printed, gives the result its help promises, and bad input names what was wrong.

use crate::util::*;

/// `size speedup --run`: the new latency read off a stored run's curve at the application's
/// load — the measured mean itself at a step's load, a clear error beyond the curve.
#[test]
fn speedup_takes_the_latency_from_a_stored_curve() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "32m", "--workload", "backend-random-read-4k", "--ramp", "1,2"];
    let r = run_json(dir.path(), &args(&base, FAST));
    let s = steps(&r, 0);
    let (iops0, lat0) = (f(&s[0]["iops"]), f(&s[0]["lat_us"]["mean"]));
    let trim = |ms: f64| format!("{ms:.4}").trim_end_matches('0').trim_end_matches('.').to_string();
    // At half the lightest step's load: that step's latency, no claim below it.
    let at = format!("{}", (iops0 / 2.0).round());
    let o =
        iocurve(dir.path(), &["size", "speedup", "--io-share", "40", "--from-ms", "5", "--run", "1", "--at-iops", &at]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("at or below its lightest step, 1 worker"), "{out}");
    assert!(out.contains(&format!("latency 5 ms → {} ms", trim(lat0 / 1000.0))), "{out}");
    // Midway between the two steps' loads: on the straight line between them when the second
    // carried more; when it carried less (a noisy machine), that load is at or below the
    // lightest step, whose latency it gets. Either way the figure is the rule's.
    let (iops1, lat1) = (f(&s[1]["iops"]), f(&s[1]["lat_us"]["mean"]));
    let mid = (iops0 + iops1) / 2.0;
    let o = iocurve(
        dir.path(),
        &["size", "speedup", "--io-share", "40", "--from-ms", "5", "--run", "1", "--at-iops", &format!("{mid}")],
    );
    let want =
        if iops1 > iops0 { (lat0 + (lat1 - lat0) * (mid - iops0) / (iops1 - iops0)) / 1000.0 } else { lat0 / 1000.0 };
    assert!(stdout(&o).contains(&format!("→ {} ms", trim(want))), "{}", stdout(&o));
    let o = iocurve(
        dir.path(),
        &["size", "speedup", "--io-share", "40", "--from-ms", "5", "--run", "1", "--at-iops", "1e12"],
    );
    input_error(&o, &["run 1 backend-random-read-4k", "never carried"]);
    // The maximum as `show` prints it (rounded) is on the curve.
    let max = s.iter().map(|s| f(&s["iops"])).fold(0.0, f64::max);
    let top = format!("{}", max.round());
    let o = iocurve(
        dir.path(),
        &["size", "speedup", "--io-share", "40", "--from-ms", "5", "--run", "1", "--at-iops", &top],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    // A latency that grows is said so, not as a negative saving.
    let o = iocurve(
        dir.path(),
        &["size", "speedup", "--io-share", "40", "--from-ms", "0.001", "--run", "1", "--at-iops", &at],
    );
    assert!(stdout(&o).contains("% more time") && stdout(&o).contains("as slow"), "{}", stdout(&o));
    // A workload beside its response-time curve is picked by its exact name.
    let o = iocurve(dir.path(), &args(&args(&base, FAST), &["--curve", "50", "--json", "c.json"]));
    ok_json(&o, &dir.path().join("c.json"));
    let exact = ["size", "speedup", "--io-share", "40", "--from-ms", "5", "--run", "2", "--at-iops", &at];
    let o = iocurve(dir.path(), &args(&exact, &["--workload", "backend-random-read-4k"]));
    assert!(
        o.status.success() && stdout(&o).contains("run 2 backend-random-read-4k carries"),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
    let o = iocurve(dir.path(), &exact);
    input_error(&o, &["several", "backend-random-read-4k-curve"]);
}

/// `size reduction --run`: the pattern a stored run wrote, what its data check measured the
/// way an array reduces (unique units, each compressed), and the array's own figure.
#[test]
fn reduction_puts_the_runs_data_check_beside_the_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "32m", "--workload", "backend-random-write-4k", "--ramp", "1"];
    let r = run_json(dir.path(), &args(&args(&base, FAST), &["--compress", "0.4", "--dedupe", "2"]));
    let rows = r["workloads"][0]["data_check"].as_array().unwrap();
    let at = |kind: &str, method: &str| {
        f(&rows.iter().find(|x| x["kind"] == kind && x["method"] == method && x["unit"] == 4096).unwrap()["achieved"])
    };
    let (c, d) = (at("compression", "zstd -1"), at("deduplication", "fixed units"));
    let o = iocurve(dir.path(), &["size", "reduction", "--run", "1", "--array-ratio", "3.1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("run 1, workload backend-random-write-4k:"), "{out}");
    assert!(out.contains("3.32:1 expected (1.66:1 compression × 2:1 dedupe)"), "{out}");
    assert!(
        out.contains(&format!("measured {:.2}:1 ({c:.2}:1 compression by zstd -1 per 4k unit × {d:.2}:1", c * d)),
        "{out}"
    );
    assert!(out.contains("the array reports 3.10:1: 93 % of what the data allows"), "{out}");
    // 1 MiB blocks: compression at the largest unit checked up to the block.
    let seq = ["run", "--size", "32m", "--workload", "backend-seq-write-1m", "--ramp", "1", "--compress", "0.4"];
    let r = run_json(dir.path(), &args(&seq, FAST));
    let o = iocurve(dir.path(), &["size", "reduction", "--run", "2"]);
    let out = stdout(&o);
    let rows = &r["workloads"][0]["data_check"];
    assert!(
        out.contains("compression by zstd -1 per 128k unit") && out.contains("dedupe in 1m units"),
        "{out}\n{rows}"
    );
    // A run that wrote nothing has nothing to compare.
    run_json(dir.path(), &args(&["run", "--size", "32m", "--workload", "backend-random-read-4k", "--ramp", "1"], FAST));
    let o = iocurve(dir.path(), &["size", "reduction", "--run", "3"]);
    input_error(&o, &["run 3 has no writing workload"]);
}
