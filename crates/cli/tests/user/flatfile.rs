//! vdbench's flatfile layout (issue 43): `export --format flatfile` of a stored run, read back
//! the way vdbench users' scripts read it (whitespace-separated columns named by the header).

use crate::util::*;

fn num(v: &str) -> f64 {
    v.parse().unwrap_or_else(|_| panic!("a number: {v:?}"))
}

/// A line per interval of every step and an avg line per step; each line's `rate` is the
/// interval's (the step's) IOPS in the JSON export, `MB/sec` its MB/s in vdbench's MB (2^20).
#[test]
fn a_flatfile_has_a_line_per_interval_and_an_average_per_step() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "64m", "--backend", "null", "--workload", "frontend-random-read", "--ramp", "1,2"];
    let o = iocurve(dir.path(), &args(&base, FAST));
    assert!(o.status.success(), "{}", stderr(&o));
    let o = iocurve(dir.path(), &["export", "1", "--format", "flatfile", "-o", "flatfile.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("wrote flatfile.html"), "{}", stdout(&o));
    let o = iocurve(dir.path(), &["export", "1", "--format", "json", "-o", "r.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(dir.path().join("flatfile.html")).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();

    let mut lines = text.lines().map(|l| l.split_whitespace().collect::<Vec<_>>());
    let header = lines.next().unwrap();
    assert_eq!(
        header.join(" "),
        "tod Run Interval reqrate rate MB/sec bytes/io resp resp_max xfersize threads rdpct seekpct lunsize \
         cpu_used cpu_user cpu_kernel cpu_wait"
    );
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.collect();
    assert!(rows.iter().all(|r| r.len() == header.len()), "every line has every column: {text}");

    // (IOPS, MB/s, interval) of every line the file should have, in order.
    let mut want = Vec::new();
    for w in json["workloads"].as_array().unwrap() {
        for s in w["steps"].as_array().unwrap() {
            let ivs = s["intervals"].as_array().unwrap();
            for (k, iv) in ivs.iter().enumerate() {
                want.push((
                    w["name"].as_str().unwrap(),
                    iv["iops"].as_f64().unwrap(),
                    iv["mbps"].as_f64().unwrap(),
                    (k + 1).to_string(),
                ));
            }
            want.push((
                w["name"].as_str().unwrap(),
                s["iops"].as_f64().unwrap(),
                s["mbps"].as_f64().unwrap(),
                format!("avg_1-{}", ivs.len()),
            ));
        }
    }
    assert_eq!(want.len(), 2 * (2 + 1), "two steps of two intervals and an average each");
    assert_eq!(rows.len(), want.len(), "a line per interval and per step's average: {text}");
    for (r, (name, iops, mbps, interval)) in rows.iter().zip(&want) {
        assert_eq!((r[col("Run")], r[col("Interval")]), (*name, interval.as_str()), "{text}");
        let rate = num(r[col("rate")]);
        assert!((rate - iops).abs() <= 0.005 + iops * 1e-9, "rate {rate} is the IOPS {iops}: {text}");
        let mib = num(r[col("MB/sec")]);
        assert!((mib - mbps * 1e6 / 1048576.0).abs() <= 0.005 + 1e-6 * mib, "MB/sec {mib} of {mbps} MB/s: {text}");
        assert_eq!(
            (r[col("reqrate")], r[col("xfersize")], r[col("rdpct")], r[col("seekpct")]),
            ("max", "4096", "100", "100")
        );
        assert!(r[col("tod")].len() == 12 && r[col("tod")].as_bytes()[2] == b':', "HH:MM:SS.mmm: {text}");
    }
    let threads: Vec<&str> = rows.iter().map(|r| r[col("threads")]).collect();
    assert_eq!(threads, ["1", "1", "1", "2", "2", "2"], "a step's outstanding I/Os, as vdbench's threads");
}

/// Bad input is refused as the other formats refuse it.
#[test]
fn flatfile_input_errors_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "64m", "--backend", "null", "--workload", "frontend-random-read", "--ramp", "1"];
    assert!(iocurve(dir.path(), &args(&base, FAST)).status.success());
    let o = iocurve(dir.path(), &["export", "9", "--format", "flatfile", "-o", "f.html"]);
    let csv = iocurve(dir.path(), &["export", "9", "--format", "csv", "-o", "f.csv"]);
    assert_eq!(o.status.code(), csv.status.code(), "{}", stderr(&o));
    input_error(&o, &["no run 9"]);
    let o = iocurve(dir.path(), &["export", "1", "--format", "flatfile", "-o", "no/such/dir/f.html"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write no/such/dir/f.html"), "{}", stderr(&o));
    assert!(!dir.path().join("f.html").exists());
}

/// Found in review of issue 43: an SLA search probes its rates out of order (bisection), the
/// store keeps them in the order they ran and the result in the order of their rates; the
/// flatfile put one probe's intervals under another's average. Each step's interval lines are
/// its own now: their `rate`s are that step's intervals' IOPS, under its `reqrate`.
#[test]
fn regression_an_sla_search_has_each_probes_intervals_under_its_own_average() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Every I/O takes 2 ms, over the 1 ms bound: each probe fails and the next is lower.
    let plan = "targets = [\"t.dat\"]\nsla_p99_ms = 1\n[defaults]\nbackend = \"null\"\nintervals = 2\ninterval_s = 0.2\nwarmup_s = 0\n[[workloads]]\nname = \"w\"\nramp = [1, 2]\nsla_search = true\n[[faults]]\nkind = \"latency\"\nlatency_ms = 2\n";
    std::fs::write(d.join("p.toml"), plan).unwrap();
    assert!(iocurve(d, &["run", "p.toml", "--size", "16m"]).status.success());
    assert!(iocurve(d, &["export", "1", "--format", "flatfile", "-o", "f.txt"]).status.success());
    assert!(iocurve(d, &["export", "1", "--format", "json", "-o", "r.json"]).status.success());
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
    let text = std::fs::read_to_string(d.join("f.txt")).unwrap();
    let mut lines = text.lines().map(|l| l.split_whitespace().collect::<Vec<_>>());
    let header = lines.next().unwrap();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.filter(|r| r[col("Run")] == "w-sla-search").collect();
    let search =
        json["workloads"].as_array().unwrap().iter().find(|w| w["name"] == "w-sla-search").expect("the search ran");
    let steps = search["steps"].as_array().unwrap();
    assert!(steps.len() >= 2, "{search}");
    let rates: Vec<f64> = steps.iter().map(|s| s["rate"]["target_iops"].as_f64().unwrap()).collect();
    assert!(rates.windows(2).all(|w| w[0] <= w[1]), "the result's steps in the order of their rates: {rates:?}");
    let mut k = 0;
    for s in steps {
        for iv in s["intervals"].as_array().unwrap() {
            let rate = num(rows[k][col("rate")]);
            let iops = iv["iops"].as_f64().unwrap();
            assert!((rate - iops).abs() <= 0.005 + iops * 1e-9, "line {k}: {rate}, its step's interval {iops}: {text}");
            k += 1;
        }
        assert!(rows[k][col("Interval")].starts_with("avg_"), "{text}");
        let target = s["rate"]["target_iops"].as_f64().unwrap();
        assert!((num(rows[k][col("reqrate")]) - target).abs() <= 0.5, "its own target rate {target}: {text}");
        k += 1;
    }
}
