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
    for sub in ["raid", "links", "speedup", "reduction"] {
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
