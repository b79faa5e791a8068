//! `iocurve trace FILE` and `iocurve plan --from-trace FILE` (issue 45, part 4) on traces whose
//! figures are known: the description's exact figures, the JSON, the refusal of a bad trace,
//! and a plan that carries the trace's shares, sizes, skew and rate and runs.

use crate::util::*;

/// 1000 I/Os 10 ms apart: 7 of 10 reads of 4 KiB, 3 of 10 writes of 64 KiB. The even I/Os fall
/// on 10 hot 4 KiB blocks (50 I/Os each), the odd ones each on a block of their own from 1 MiB
/// on: 510 blocks touched, the busiest 6 (1 %) carry 300 I/Os, 51 (10 %) 541, 102 (20 %) 592.
fn csv() -> String {
    let mut out = String::from("time,offset,size,op\n");
    for k in 0..1000u64 {
        let (op, size) = if k % 10 < 7 { ("R", 4096) } else { ("W", 65536) };
        let offset = if k % 2 == 0 { (k / 2 % 10) * 4096 } else { (1 << 20) + (k / 2) * 65536 };
        out.push_str(&format!("{:.9},{offset},{size},{op}\n", k as f64 * 0.01));
    }
    out
}

/// The `key = value` lines of a TOML plan, comments cut (the plan is flat: one workload).
fn keys(toml: &str) -> Vec<(String, String)> {
    toml.lines()
        .filter(|l| !l.trim_start().starts_with('#') && l.contains(" = "))
        .map(|l| {
            let l = l.split(" # ").next().unwrap();
            let (k, v) = l.split_once(" = ").unwrap();
            (k.trim().to_string(), v.trim().to_string())
        })
        .collect()
}

fn value<'a>(keys: &'a [(String, String)], key: &str) -> &'a str {
    keys.iter().rev().find(|(k, _)| k == key).map_or_else(|| panic!("no {key} in {keys:?}"), |(_, v)| v)
}

#[test]
fn trace_describes_a_trace_with_its_exact_figures() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.csv"), csv()).unwrap();
    let o = iocurve(dir.path(), &["trace", "t.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "t.csv: csv trace, 1'000 I/Os over 9.99 s
  rate: mean 100 IOPS, peak 100 IOPS (its busiest second)
  read   70.0 % of I/Os (700), mean size 4 KiB, sequential 0.0 %
         sizes: 4k 100.0 %
  write  30.0 % of I/Os (300), mean size 64 KiB, sequential 0.0 %
         sizes: 64k 100.0 %
  skew: of the 510 4 KiB blocks I/Os start in, the busiest 1 % carry 30.0 % of the I/Os, 10 %: 54.1 %, 20 %: 59.2 %
  inter-arrival: mean 10.0 ms, p50 10.0 ms, p99 10.0 ms, CV 0.00 (<1: evener than random arrivals)
  device t.csv: 1'000 I/Os (700 r, 300 w, 0 t), 21.5 MiB, offsets 0 to 33'816'576 (span 32.2 MiB)
  left out: nothing (every event was an I/O)
"
    );

    let o = iocurve(dir.path(), &["trace", "t.csv", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(
        (j["format"].as_str(), j["ios"].as_u64(), j["peak_iops"].as_u64()),
        (Some("csv"), Some(1000), Some(100))
    );
    assert_eq!(j["dirs"][0]["dir"], "read");
    assert_eq!(j["dirs"][0]["share_pct"].as_f64(), Some(70.0));
    assert_eq!(j["dirs"][1]["sizes"][0]["size"].as_u64(), Some(65536));
    assert_eq!((j["skew"]["blocks_touched"].as_u64(), j["skew"]["busiest_1pct"].as_f64()), (Some(510), Some(30.0)));
    assert_eq!(j["devices"][0]["span_bytes"].as_u64(), Some(33_816_576));
    assert_eq!(j["left_out"], serde_json::json!({}));
}

#[test]
fn a_trace_that_cannot_be_read_is_bad_input_named_by_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.csv"), "time,offset,size,op\n0,0,4096,R\n0.1,abc,4096,W\n").unwrap();
    for args in [&["trace", "bad.csv"][..], &["trace", "bad.csv", "--json"], &["plan", "--from-trace", "bad.csv"]] {
        let o = iocurve(dir.path(), args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("bad.csv:3"), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?}: {}", stdout(&o));
    }
    let o = iocurve(dir.path(), &["trace", "missing.csv"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn the_plan_from_a_trace_carries_its_figures_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.csv"), csv()).unwrap();
    let o = iocurve(dir.path(), &["plan", "--from-trace", "t.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = stdout(&o);
    let k = keys(&plan);
    assert_eq!(value(&k, "read_pct"), "70", "{plan}");
    assert!(!plan.contains("trim_pct"), "no trims, no trim share: {plan}");
    assert_eq!(value(&k, "bs"), "\"4k\"", "{plan}");
    assert_eq!(value(&k, "write_bs"), "\"64k\"", "{plan}");
    assert_eq!(value(&k, "pattern"), "\"random\"", "{plan}");
    // 30 % on the busiest 1 %, 54 − 30 on the next 9 %, 59 − 54 on the next 10 %, the rest.
    assert_eq!(value(&k, "distribution"), "\"zoned:30/1:24/9:5/10:41/80\"", "{plan}");
    assert_eq!(value(&k, "working_set"), "{ start = \"0\", end = \"33024k\" }", "{plan}");
    assert_eq!(value(&k, "rate"), "[100]", "{plan}");
    assert_eq!(value(&k, "arrival"), "\"uniform\"", "evenly spaced: {plan}");
    assert_eq!(value(&k, "max_outstanding"), "64", "{plan}");
    // Every key says where it came from.
    for line in plan
        .lines()
        .filter(|l| l.contains(" = ") && !l.starts_with('#') && !l.starts_with("name") && !l.starts_with("description"))
    {
        assert!(line.contains(" # "), "{line}");
    }
    std::fs::write(dir.path().join("plan.toml"), &plan).unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--dry-run", "--size", "64m"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("70 % reads, bs 4k r, 64k w"), "{out}");
    assert!(out.contains("distribution zoned:30/1:24/9:5/10:41/80"), "{out}");
    assert!(out.contains("steps (rate): 100 IOPS"), "{out}");
}

/// Sequential 128 KiB writes in bursts (10 a millisecond apart, then a second's pause) and a few
/// trims: a sequential plan at the mean MB/s, Poisson arrivals, and no invented bursts.
#[test]
fn a_sequential_bursty_trace_becomes_a_sequential_plan_in_mb_s_that_says_to_replay_the_bursts() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from("time_ns;offset;len;op;device\n");
    for k in 0..200u64 {
        let t = k / 10 * 1_000_000_000 + k % 10 * 1_000_000;
        csv.push_str(&format!("{t};{};131072;write;sdb\n", k * 131072));
    }
    csv.push_str("19500000000;0;1048576;discard;sdb\n");
    std::fs::write(dir.path().join("seq.csv"), csv).unwrap();
    let o = iocurve(dir.path(), &["plan", "--from-trace", "seq.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let plan = stdout(&o);
    let k = keys(&plan);
    assert_eq!(value(&k, "read_pct"), "0", "{plan}");
    assert_eq!(value(&k, "trim_pct"), "0.5", "1 of 201: {plan}");
    assert_eq!((value(&k, "bs"), value(&k, "trim_bs")), ("\"128k\"", "\"1m\""), "{plan}");
    assert_eq!(value(&k, "pattern"), "\"sequential\"", "{plan}");
    assert!(!plan.contains("distribution"), "{plan}");
    assert_eq!(value(&k, "arrival"), "\"poisson\"", "{plan}");
    assert!(!plan.contains("\nbursts"), "{plan}");
    assert!(plan.contains("# The trace is bursty") && plan.contains("iocurve run --replay seq.csv"), "{plan}");
    std::fs::write(dir.path().join("plan.toml"), &plan).unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--dry-run"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("MB/s"), "{}", stdout(&o));
}

/// Found by an outside test: a trace shorter than a second showed a peak below its mean.
#[test]
fn a_trace_under_a_second_names_no_peak_second() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("s.csv"), "time,offset,size,op\n0,0,4096,W\n0.2,8192,4096,W\n").unwrap();
    let o = iocurve(dir.path(), &["trace", "s.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("rate: mean 5 IOPS, no peak second (it lasts under a second)"), "{}", stdout(&o));
}
