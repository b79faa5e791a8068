//! Replays of production traces (issue 45) as a user meets them on a scratch file: a CSV trace
//! played at two speeds, every I/O due once and in its direction, the step as long as the trace
//! at its speed; and the refusals of what cannot be.

use crate::util::*;

/// `n` I/Os evenly over `secs` seconds: reads, writes and trims by turns (6:3:1), 4 KiB (trims
/// 64 KiB), each on its own block.
fn csv(n: u64, secs: f64) -> String {
    let mut out = String::from("time,offset,size,op\n");
    for k in 0..n {
        let (op, size) = match k % 10 {
            0..=5 => ("R", 4096),
            6..=8 => ("W", 4096),
            _ => ("T", 65536),
        };
        out.push_str(&format!("{:.9},{},{size},{op}\n", k as f64 * secs / n as f64, (k % 200) * 65536));
    }
    out
}

#[test]
fn a_csv_trace_replays_at_each_speed_with_every_io_due_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.csv"), csv(3000, 1.0)).unwrap();
    let r = run_json(
        dir.path(),
        &["run", "--target", "t.dat", "--replay", "t.csv", "--replay-speed", "1,2", "--size", "64m", "--buffered"],
    );
    let w = &r["workloads"][0];
    // The workload says what the trace does.
    assert_eq!((f(&w["read_pct"]), f(&w["trim_pct"])), (60.0, 10.0), "{w}");
    let steps = steps(&r, 0);
    assert_eq!(steps.len(), 2);
    for (s, speed) in steps.iter().zip([1.0, 2.0]) {
        let rate = &s["rate"];
        assert_eq!(f(&rate["replay_speed"]), speed, "{rate}");
        // Every I/O of the trace was due once in the measured intervals, in its direction.
        assert_eq!(rate["due"].as_u64(), Some(3000), "{rate}");
        let (reads, writes, trims) = (
            s["read"]["ops"].as_u64().unwrap(),
            s["write"]["ops"].as_u64().unwrap(),
            s["trim"]["ops"].as_u64().unwrap(),
        );
        // (Those still in flight when the trace ended complete after the measurement.)
        assert!((3000 - 64..=3000).contains(&(reads + writes + trims)), "{s}");
        assert!(reads <= 1800 && writes <= 900 && (300 - 64..=300).contains(&trims), "{reads} {writes} {trims}");
        // As long as the trace at its speed: 3000 slots of 1/3 ms, over the speed.
        assert!((f(&s["duration_s"]) - 1.0 / speed).abs() < 1e-6, "{}", s["duration_s"]);
    }
    let o = iocurve(dir.path(), &["show", "1"]);
    assert!(stdout(&o).contains("at 2× the trace (6'000 IOPS)"), "{}", stdout(&o));
}

#[test]
fn traces_and_keys_that_cannot_be_replayed_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.csv"), csv(10, 1.0)).unwrap();
    std::fs::write(dir.path().join("bad.csv"), "time,offset,size,op\n0,0,4096,R\n0.1,abc,4096,W\n").unwrap();
    for (extra, says) in [
        (vec!["--replay", "missing.csv"], "missing.csv"),
        (vec!["--replay", "bad.csv"], "bad.csv:3"),
        (vec!["--replay", "t.csv", "--rate", "1000"], "replays a trace"),
        (vec!["--replay", "t.csv", "--replay-speed", "2,1"], "must increase"),
        (vec!["--replay", "t.csv", "--replay-map", "sdq=1"], "does not have"),
        (vec!["--replay", "t.csv", "--replay-map", "*=3"], "names target 3"),
        (vec!["--replay-speed", "2"], "replays no trace"),
    ] {
        let o = iocurve(dir.path(), &args(&["run", "--target", "t.dat", "--size", "16m"], &extra));
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{extra:?}: {}", stderr(&o));
        assert!(!dir.path().join("t.dat").exists(), "{extra:?}: nothing is created for a refused run");
    }
}
