//! `iocurve size` (issue 19, sizing arithmetic): every subcommand's help example, run as
//! printed, gives the result its help promises, and bad input names what was wrong.

use crate::util::*;

#[test]
fn bad_input_says_what_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    for (args, says) in [
        (&["size", "links", "2", "40G"][..], "`40G` is not a link type iocurve knows"),
        (
            &["size", "raid", "--level", "7", "--disks", "3", "--disk-iops", "1", "--read-pct", "50"][..],
            "not a RAID level",
        ),
        (
            &["size", "raid", "--level", "5", "--disks", "3", "--disk-iops", "100", "--read-pct", "120"][..],
            "percentage",
        ),
        (&["size", "reduction", "--compress", "1.5"][..], "compress is 1.5"),
        (&["size", "speedup", "--io-share", "40", "--from-ms", "0", "--to-ms", "1"][..], "positive"),
    ] {
        let o = iocurve(dir.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn the_published_figures() {
    let dir = tempfile::tempdir().unwrap();
    let out = |a: &[&str]| stdout(&iocurve(dir.path(), a));
    assert!(
        out(&["size", "raid", "--level", "6", "--iops", "5000", "--disk-iops", "200", "--read-pct", "70"])
            .contains("63 disks (they give 5'040 IOPS)")
    );
    assert!(
        out(&["size", "raid", "--level", "dp", "--disks", "10", "--disk-iops", "100", "--read-pct", "50"])
            .contains(": 667 IOPS")
    );
    assert!(out(&["size", "links", "4", "25GbE"]).contains("11.9 GB/s usable per direction"));
    assert!(out(&["size", "reduction", "--compress", "0.4"]).contains("1.66:1 expected"));
}

#[test]
fn every_help_example_gives_what_it_promises() {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["raid", "links", "speedup", "reduction", "replication", "economics"] {
        let help = stdout(&iocurve(dir.path(), &["size", sub, "--help"]));
        let example = help.lines().find(|l| l.starts_with("Example: ")).unwrap_or_else(|| panic!("{sub}: {help}"));
        let (cmd, promise) = example.trim_start_matches("Example: ").split_once("  →  ").unwrap();
        let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
        let o = iocurve(dir.path(), &args);
        assert!(o.status.success(), "{cmd}: {}", stderr(&o));
        assert!(stdout(&o).contains(promise.trim()), "{cmd}: promised {promise:?}, printed {}", stdout(&o));
    }
}

/// The hosts' links in the summary, the JSON, `show` and the report: the maximum's share of
/// what they carry, from exactly the measured MB/s.
#[test]
fn the_maximum_against_the_hosts_links() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "32m", "--workload", "backend-seq-read", "--ramp", "1", "--links", "2x10GbE"];
    let o = iocurve(dir.path(), &args(&args(&base, FAST), &["--json", "r.json"]));
    let r = ok_json(&o, &dir.path().join("r.json"));
    let w = &r["workloads"][0];
    let l = &w["links"];
    // 2 × 10G Ethernet: 1,250 MB/s × 1460/1538 each.
    let cap = 2.0 * 1250.0 * 1460.0 / 1538.0;
    assert!((f(&l["capacity_mbps"]) - cap).abs() < 1e-6, "{l}");
    let step = &w["steps"][w["maximum"]["step"].as_u64().unwrap() as usize];
    assert!((f(&l["read_pct"]) - f(&step["read"]["mbps"]) / cap * 100.0).abs() < 1e-9, "{l}");
    let pct = format!("{:.0} % of the host's links (2 × 10G Ethernet", f(&l["read_pct"]));
    assert!(stdout(&o).contains(&format!("links    the maximum is {pct}")), "{}", stdout(&o));
    // Stored with the plan: `show` and the report say the same.
    assert!(stdout(&iocurve(dir.path(), &["show", "1"])).contains(&pct));
    let o = iocurve(dir.path(), &["report", "1", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(page.contains(&pct.replace('\'', "&#x27;")), "the maximum's cell in the report");
    // Plan key and a bad value.
    let o = iocurve(dir.path(), &["run", "--links", "3x40G"]);
    input_error(&o, &["--links", "3x40G", "32G FC"]);
}

/// Issue 42: the seed's figures, printed by the commands as a person types them.
#[test]
fn issue_42_replication_links_and_economics_of_the_seed() {
    let dir = tempfile::tempdir().unwrap();
    let out = |a: &[&str]| {
        let o = iocurve(dir.path(), a);
        assert!(o.status.success(), "{a:?}: {}", stderr(&o));
        stdout(&o)
    };
    // 3.5 M front-end write IOPS, half mirrored: 5.25 M processed; 47 GB/s: 70.5 GB/s.
    let o = out(&["size", "replication", "--mirrored-pct", "50", "--iops", "3500000"]);
    assert!(o.contains(": 5'250'000 write IOPS processed"), "{o}");
    let o = out(&["size", "replication", "--mirrored-pct", "50", "--mbps", "47000"]);
    assert!(o.contains(": 70.5 GB/s (70'500 MB/s) processed"), "{o}");
    // 11,500 MB/s of 4 × 32G FC: "more than 70 %" of the nominal, nearly 90 % of the payload.
    let o = out(&["size", "links", "4", "32G", "--carrying", "11500"]);
    assert!(
        o.contains("11'500 MB/s a direction is 71.9 % of the nominal 16.0 GB/s and 89.8 % of the usable 12.8 GB/s"),
        "{o}"
    );
    // A 256 KiB block: 0.164 ms on 16G FC ("≈ 0.2 ms"), twice that on 8G ("0.4 ms").
    let o = out(&["size", "links", "1", "16G", "--block", "256k"]);
    assert!(o.contains("one block of 256k (262'144 B) crosses one 16G FC link in 0.164 ms"), "{o}");
    assert!(out(&["size", "links", "1", "8G", "--block", "256k"]).contains("link in 0.328 ms"));
    // One array of 1 M IOPS for 250'000, 1.8 kW, 200 TB, 4 U; 1.5 M IOPS at ≤ 50 % each: 3.
    let o = out(&[
        "size",
        "economics",
        "--cost",
        "250000",
        "--power-w",
        "1800",
        "--capacity-tb",
        "200",
        "--rack-units",
        "4",
        "--iops",
        "1000000",
        "--load-iops",
        "1500000",
    ]);
    for says in [
        "cost   1'250 per TB, 250 per 1'000 IOPS",
        "power  9 W per TB, 1.80 W per 1'000 IOPS",
        "space  250'000 IOPS per rack unit",
        "1'500'000 IOPS with each array at most at 50 % of its maximum: 3 arrays",
        ": 750'000 in cost, 5'400 W, 12 rack units",
    ] {
        assert!(o.contains(says), "{says}: {o}");
    }
    // Only a throughput: the figures it allows, none invented.
    let o = out(&["size", "economics", "--iops", "1000", "--load-iops", "2500", "--headroom-pct", "100"]);
    assert!(o.contains("2'500 IOPS with each array at most at 100 % of its maximum: 3 arrays  (="), "{o}");
    assert!(!o.contains("cost"), "{o}");
    for (args, says) in [
        (&["size", "replication", "--mirrored-pct", "50"][..], "--iops"),
        (&["size", "replication", "--mirrored-pct", "150", "--iops", "1"][..], "percentage"),
        (&["size", "links", "1", "16G", "--block", "0"][..], "no size"),
        (&["size", "links", "1", "16G", "--carrying", "0"][..], "positive"),
        (&["size", "economics", "--iops", "1000", "--headroom-pct", "0"][..], "above 0"),
        (&["size", "economics", "--iops", "1000", "--load-iops", "1e300"][..], "more than 1'000'000 arrays"),
        (&["size", "economics", "--iops", "1000", "--cost", "nan"][..], "positive"),
    ] {
        let o = iocurve(dir.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    }
}

/// `1234567` → `1'234'567`, as iocurve prints IOPS.
fn grouped(v: f64) -> String {
    let s = (v.round() as u64).to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push('\'');
        }
        out.push(c);
    }
    out
}

/// Issue 42: the figures of a stored run — its maximum's writes mirrored, its maximum priced,
/// the throughput its curve carries at a latency (and what it says where the curve has none).
#[test]
fn issue_42_figures_from_a_stored_run() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "32m", "--workload", "backend-random-write", "--ramp", "1,2"];
    let r = ok_json(&iocurve(dir.path(), &args(&args(&base, FAST), &["--json", "r.json"])), &dir.path().join("r.json"));
    let w = &r["workloads"][0];
    let out = |a: &[&str]| {
        let o = iocurve(dir.path(), a);
        assert!(o.status.success(), "{a:?}: {}", stderr(&o));
        stdout(&o)
    };
    match w["maximum"]["step"].as_u64() {
        Some(step) => {
            let max = &w["steps"][step as usize];
            let o = out(&["size", "replication", "--run", "1", "--mirrored-pct", "50"]);
            let processed = format!("{} write IOPS processed", grouped(f(&max["write"]["iops"]) * 1.5));
            assert!(o.contains(&processed) && o.contains("the writes of its maximum"), "{processed}: {o}");
            let o = out(&["size", "economics", "--run", "1", "--cost", "1000"]);
            assert!(o.contains(&format!("its maximum: {} IOPS:", grouped(f(&w["maximum"]["iops"])))), "{o}");
        }
        // Too noisy to tell on a loaded machine: said, not a figure of another step.
        None => {
            let o = iocurve(dir.path(), &["size", "replication", "--run", "1", "--mirrored-pct", "50"]);
            input_error(&o, &["has no maximum", "--iops"]);
        }
    }
    // Where the curve has no answer, it says why (exit code 2).
    let o = iocurve(dir.path(), &["size", "at-latency", "--run", "1", "--latency-ms", "0.000001"]);
    input_error(&o, &["even its lightest step", "no throughput is known"]);
    let o = iocurve(dir.path(), &["size", "at-latency", "--run", "1", "--latency-ms", "100000"]);
    input_error(&o, &["never reached", "at its maximum"]);
    // Between its two steps, the interpolation (where the second took longer, as a loaded
    // machine need not give).
    let (s1, s2) = (&w["steps"][0], &w["steps"][1]);
    let (l1, l2) = (f(&s1["lat_us"]["mean"]), f(&s2["lat_us"]["mean"]));
    if l2 > l1 * 1.01 {
        let mid = (l1 + l2) / 2.0;
        let want = (f(&s1["iops"]) + f(&s2["iops"])) / 2.0;
        let o = out(&["size", "at-latency", "--run", "1", "--latency-ms", &format!("{:?}", mid / 1000.0)]);
        let got: f64 =
            o.split(" carries ").nth(1).unwrap().split(" IOPS").next().unwrap().replace('\'', "").parse().unwrap();
        assert!((got - want).abs() <= 1.0, "{want}: {o}");
        assert!(o.contains("between 1 worker: ") && o.contains(" and 2 workers: "), "{o}");
    }
}

/// Issue 42: `compare` gives latency changes in µs (at the point, at speed, of the lowest
/// latency), `--at speed`, and each throughput change against `--expected-loss`.
#[test]
fn issue_42_compare_in_microseconds_and_against_the_expected_loss() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "32m", "--workload", "backend-random-read", "--ramp", "1,2"];
    let mut runs = Vec::new();
    for n in 1..=2 {
        let json = format!("r{n}.json");
        let o = iocurve(dir.path(), &args(&args(&base, FAST), &["--json", &json]));
        runs.push(ok_json(&o, &dir.path().join(&json)));
    }
    let speed = |r: &serde_json::Value| f(&r["workloads"][0]["speed"]["lat_us"]);
    let o = iocurve(dir.path(), &["compare", "1", "2", "--at", "speed", "--expected-loss", "75"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("at the speed"), "{out}");
    let (b, r) = (&runs[0]["workloads"][0]["speed"], &runs[1]["workloads"][0]["speed"]);
    let change = (f(&r["iops"]) - f(&b["iops"])) / f(&b["iops"]) * 100.0;
    let points = (change + 75.0).round();
    let against = match points {
        0.0 => "as expected".to_string(),
        p if p > 0.0 => format!("{p:.0} points better"),
        p => format!("{:.0} points worse", -p),
    };
    assert!(out.contains(&format!("(expected -75 %: {against})")), "{against}: {out}");
    // The latency change at speed in µs, under the table.
    let d = speed(&runs[1]) - speed(&runs[0]);
    assert!(out.contains("· backend-random-read-4k: latency "), "{out}");
    assert!(out.contains(" at speed, ") && out.contains(" min latency"), "{out}");
    let sign = if d < 0.0 { "-" } else { "+" };
    assert!(out.contains(&format!("({sign}")), "the latency cell has its µs: {d} {out}");
    let o = iocurve(dir.path(), &["compare", "1", "2", "--expected-loss", "120"]);
    input_error(&o, &["--expected-loss", "percentage"]);
}

/// Issue 42: a vendor's claims beside the measurement (`[claims.NAME]`: in the summary, the
/// JSON, `show` and the report, under the workload's label when `--bs` renames it), and the
/// links' transfer floor of a workload.
#[test]
fn issue_42_claims_and_the_transfer_floor() {
    let dir = tempfile::tempdir().unwrap();
    let plan = "links = \"1x16G FC\"\n[[workloads]]\nname = \"seq-read-1m\"\npattern = \"sequential\"\nbs = \"1m\"\nramp = [1]\n\n[claims.seq-read-1m]\nmbps = 1000000\n";
    std::fs::write(dir.path().join("p.toml"), plan).unwrap();
    let o = iocurve(dir.path(), &args(&args(&["run", "p.toml", "--size", "32m"], FAST), &["--json", "r.json"]));
    let r = ok_json(&o, &dir.path().join("r.json"));
    let w = &r["workloads"][0];
    let c = &w["claim"];
    assert_eq!(
        (c["against"].as_str(), c["in_mbps"].as_bool(), c["holds"].as_bool()),
        (Some("maximum"), Some(true), Some(false)),
        "{c}"
    );
    let pct = f(&w["maximum"]["mbps"]) / 1e6 * 100.0;
    assert!((f(&c["pct"]) - pct).abs() < 1e-9, "{c}");
    let says = c["says"].as_str().unwrap();
    assert!(says.starts_with("claimed 1000 GB/s; measured "), "{says}");
    assert!(stdout(&o).contains(&format!("  claim    {says}")), "{}", stdout(&o));
    // 1 MiB on 16G FC: 1,048,576 B at 1,600 MB/s = 655.36 µs.
    let floor = &w["transfer_floor"];
    assert!((f(&floor["us"]) - 655.36).abs() < 1e-9 && floor["link"] == "16G FC", "{floor}");
    // Stored with the plan: `show` and the report find them again.
    assert!(stdout(&iocurve(dir.path(), &["show", "1"])).contains(says));
    let o = iocurve(dir.path(), &["report", "1", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(page.contains("transfer floor 655 µs (1 MiB on 16G FC)"), "the floor line and its label");
    assert!(page.contains("claimed 1000 GB&#x2f;s; measured "), "the claim under the summary");
    // --bs renames the workload; its claim follows.
    let o = iocurve(
        dir.path(),
        &args(&args(&["run", "p.toml", "--size", "32m", "--bs", "512k"], FAST), &["--json", "s.json"]),
    );
    let r = ok_json(&o, &dir.path().join("s.json"));
    assert_eq!(r["workloads"][0]["name"], "seq-read-512k");
    assert!(r["workloads"][0]["claim"]["says"].as_str().is_some(), "{}", r["workloads"][0]);
    // A claim of a workload the plan does not have: where, and the workloads it has.
    std::fs::write(dir.path().join("bad.toml"), plan.replace("[claims.seq-read-1m]", "[claims.seq-read]")).unwrap();
    let o = iocurve(dir.path(), &["run", "bad.toml", "--dry-run"]);
    input_error(&o, &["bad.toml:8", "claims.seq-read", "seq-read-1m"]);
    std::fs::write(dir.path().join("bad.toml"), plan.replace("mbps = 1000000", "mbps = 0")).unwrap();
    let o = iocurve(dir.path(), &["run", "bad.toml", "--dry-run"]);
    input_error(&o, &["bad.toml:9", "claims.seq-read-1m.mbps", "positive"]);
}
