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
    // The overview and the per-direction table name the steps by speed, not by workers (an
    // outside test's finding: "1–32 workers (6 steps)", "workers 64").
    assert!(stdout(&o).contains("replay of t.csv at 1×, 2× (2 steps)"), "{}", stdout(&o));
    let table = stdout(&o).split("latency by direction").nth(1).unwrap_or_default().to_string();
    assert!(table.lines().nth(1).is_some_and(|h| h.trim_start().starts_with("target")), "{table}");
    assert!(table.lines().nth(2).is_some_and(|r| r.contains("1× the trace")), "{table}");
}

#[test]
fn traces_and_keys_that_cannot_be_replayed_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.csv"), csv(10, 1.0)).unwrap();
    std::fs::write(dir.path().join("bad.csv"), "time,offset,size,op\n0,0,4096,R\n0.1,abc,4096,W\n").unwrap();
    // Found by an outside test: a time near 2^64 ns panicked, a tiny speed aborted on a
    // terabyte allocation, a 100 MB I/O was refused only once the target was made.
    std::fs::write(dir.path().join("far.csv"), "time,offset,size,op\n0,0,4096,R\n18446744073.709551615,0,4096,R\n")
        .unwrap();
    std::fs::write(dir.path().join("big.csv"), "time,offset,size,op\n0,0,100000000,R\n0.5,0,4096,R\n").unwrap();
    // Found by an outside test: with replay_remap = "refuse" the scratch file was made (and
    // filled) before the replay was refused.
    std::fs::write(dir.path().join("far2.csv"), "time,offset,size,op\n0,0,4096,R\n0.2,104857600,4096,W\n").unwrap();
    for (extra, says) in [
        (vec!["--replay", "far.csv"], "at most a week"),
        (vec!["--replay", "t.csv", "--replay-speed", "1e-300"], "0.001 to 1000"),
        (vec!["--replay", "big.csv"], "I/O 1 (at 0.000000 s, a read at offset 0) is 100000000 bytes"),
        (vec!["--replay", "t.csv", "--replay-speed", "1,100"], "at least 0.1 s"),
        (vec!["--replay", "missing.csv"], "missing.csv"),
        (vec!["--replay", "bad.csv"], "bad.csv:3"),
        (vec!["--replay", "t.csv", "--rate", "1000"], "replays a trace"),
        (vec!["--replay", "t.csv", "--replay-speed", "2,1"], "must increase"),
        (vec!["--replay", "t.csv", "--replay-map", "sdq=1"], "does not have"),
        (vec!["--replay", "t.csv", "--replay-map", "*=3"], "names target 3"),
        (vec!["--replay-speed", "2"], "replays no trace"),
        (
            vec!["--replay", "far2.csv", "--replay-remap", "refuse"],
            "reach 104861696 bytes into target t.dat of 16777216 bytes",
        ),
        // Found by an outside test: keys a replay takes from its trace were accepted and ignored,
        // and a suite with --replay ran each of its workloads as the same replay.
        (vec!["--replay", "t.csv", "--suite", "quick"], "this plan runs 10"),
        (vec!["--replay", "t.csv", "--ramp", "1,2"], "its steps are its speeds"),
        (vec!["--replay", "t.csv", "--bs", "8k"], "its block sizes come from the trace"),
        (vec!["--replay", "t.csv", "--distribution", "zipf:1.2"], "its offsets come from the trace"),
        (vec!["--replay", "t.csv", "--intervals", "3"], "drop intervals"),
        (vec!["--replay", "t.csv", "--warmup-s", "2"], "no warm-up"),
    ] {
        let o = iocurve(dir.path(), &args(&["run", "--target", "t.dat", "--size", "16m"], &extra));
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{extra:?}: {}", stderr(&o));
        assert!(!dir.path().join("t.dat").exists(), "{extra:?}: nothing is created for a refused run");
    }
}

/// A FIFO no one writes is an empty trace, not a run that waits for ever (found by an outside
/// test: the dry run hung).
#[test]
fn regression_a_fifo_without_a_writer_is_refused_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("p");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let child = std::process::Command::new(bin())
        .current_dir(dir.path())
        .args(["run", "--replay", "p", "--dry-run"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_within(child, std::time::Duration::from_secs(60), "a dry run of a FIFO without a writer");
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("p: empty"), "{}", stderr(&o));
}

/// What a trace holds that is no I/O is said with the run, not dropped silently.
#[test]
fn events_that_are_no_io_are_counted_in_the_workloads_notes() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = csv(300, 1.0);
    t.push_str("1.0,0,0,R\n");
    std::fs::write(dir.path().join("t.csv"), t).unwrap();
    let r = run_json(dir.path(), &["run", "--target", "t.dat", "--replay", "t.csv", "--size", "16m", "--buffered"]);
    let notes = r["workloads"][0]["notes"].to_string();
    assert!(notes.contains("left out of the replay") && notes.contains("1 "), "{notes}");
}

/// The lines of a fio v3 I/O log read here on their own (not with iocurve's reader): the files
/// it adds, and each I/O as (µs, file, action, offset, length).
type LogIo = (u64, String, String, u64, u64);
fn read_log(path: &std::path::Path) -> (Vec<String>, Vec<LogIo>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("fio version 3 iolog"));
    let (mut files, mut ios) = (Vec::new(), Vec::new());
    for l in lines {
        let f: Vec<&str> = l.split(' ').collect();
        match f[..] {
            [_, file, "add"] => files.push(file.to_string()),
            [_, _, "open" | "close"] => {}
            [t, file, action, offset, len] => ios.push((
                t.parse().unwrap(),
                file.to_string(),
                action.to_string(),
                offset.parse().unwrap(),
                len.parse().unwrap(),
            )),
            _ => panic!("a line fio does not read: {l:?}"),
        }
    }
    (files, ios)
}

/// Issue 45, part 4: a run writes what it issued as a fio I/O log. A replay's log is its trace
/// again: every I/O once, with its offset, size and direction, each at or after its trace time,
/// in time order; a ramp's log replays through iocurve with each of its I/Os due once.
#[test]
fn a_run_writes_its_ios_as_a_fio_log_that_replays() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.csv"), csv(500, 0.5)).unwrap();
    let r = run_json(
        dir.path(),
        &["run", "--target", "t.dat", "--replay", "t.csv", "--size", "64m", "--buffered", "--write-iolog", "t.log"],
    );
    let rate = &steps(&r, 0)[0]["rate"];
    let unissued = rate["backlog"].as_u64().unwrap() + rate["dropped"].as_u64().unwrap();
    let (files, ios) = read_log(&dir.path().join("t.log"));
    assert_eq!(files, ["t.dat"]);
    assert_eq!(ios.len() as u64, 500 - unissued, "{rate}");
    assert!(ios.windows(2).all(|p| p[0].0 <= p[1].0), "in time order");
    // The trace's own I/Os: k-th at k ms, on block k % 200 (the first 200 are unique).
    let mut traced: Vec<(String, u64, u64)> = (0..500u64)
        .map(|k| match k % 10 {
            0..=5 => ("read".into(), (k % 200) * 65536, 4096),
            6..=8 => ("write".into(), (k % 200) * 65536, 4096),
            _ => ("trim".into(), (k % 200) * 65536, 65536),
        })
        .collect();
    let mut logged: Vec<(String, u64, u64)> = ios.iter().map(|io| (io.2.clone(), io.3, io.4)).collect();
    traced.sort();
    logged.sort();
    if unissued == 0 {
        assert_eq!(logged, traced);
    }
    for (t, _, _, offset, _) in &ios {
        let k = (0..500u64).find(|k| k % 200 * 65536 == *offset).unwrap();
        assert!(*t >= k * 1000, "the I/O at trace time {k} ms logged at {t} µs");
    }

    // A closed-loop ramp's log, replayed by iocurve on the same file: each I/O due once.
    let run = ["run", "--target", "c.dat", "--size", "16m", "--workload", "backend-mixed-70-8k", "--ramp", "1,2"];
    let o = iocurve(
        dir.path(),
        &args(&run, &["--interval-s", "0.2", "--intervals", "2", "--warmup-s", "0", "--write-iolog", "c.log"]),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let (files, ios) = read_log(&dir.path().join("c.log"));
    assert_eq!(files, ["c.dat"]);
    let reads = ios.iter().filter(|io| io.2 == "read").count() as f64;
    assert!(ios.len() > 100 && (reads / ios.len() as f64 - 0.7).abs() < 0.1, "{} I/Os, {reads} reads", ios.len());
    assert!(
        ios.iter().all(|io| io.4 == 8192 && io.3 % 8192 == 0 && io.3 + 8192 <= 16 << 20),
        "8 KiB blocks within 16 MiB"
    );
    let r = run_json(dir.path(), &["run", "--target", "c.dat", "--replay", "c.log", "--buffered"]);
    let due: u64 = steps(&r, 0).iter().map(|s| s["rate"]["due"].as_u64().unwrap()).sum();
    assert_eq!(due, ios.len() as u64);
}

/// Where the log cannot go is bad input, found before anything runs.
#[test]
fn an_io_log_that_cannot_be_written_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    std::fs::write(dir.path().join("t.dat"), vec![0u8; 1 << 20]).unwrap();
    // A link to the database before it exists leads there too.
    std::os::unix::fs::symlink("r.db", dir.path().join("db-link")).unwrap();
    std::fs::write(dir.path().join("t.csv"), csv(10, 1.0)).unwrap();
    let o = iocurve(dir.path(), &["run", "--target", "t.dat", "--replay", "t.csv", "--write-iolog", "t.csv"]);
    assert!(stderr(&o).contains("is a trace this run replays"), "{}", stderr(&o));
    // Found by an outside test: a hard link, the plan itself, and a dry run that accepted all.
    std::fs::hard_link(dir.path().join("t.dat"), dir.path().join("hard-t")).unwrap();
    std::fs::write(dir.path().join("p.toml"), "[[workloads]]\nname = \"a\"\n").unwrap();
    let o = iocurve(dir.path(), &["run", "p.toml", "--target", "t.dat", "--write-iolog", "p.toml"]);
    assert!(stderr(&o).contains("is the plan this run reads"), "{}", stderr(&o));
    let o = iocurve(dir.path(), &["run", "--target", "t.dat", "--write-iolog", "hard-t", "--dry-run"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("is a target of this run"), "{}", stderr(&o));
    for (log, says) in [
        ("d", "is not a regular file"),
        ("t.dat", "is a target of this run"),
        ("nowhere/x.log", "cannot create it"),
        // The run's own files, by any name: emptied, they would be lost.
        ("r.db", "is the results database"),
        ("db-link", "is the results database"),
        ("r.json", "is the --json result"),
        ("hard-t", "is a target of this run"),
        ("-", "not to standard output"),
    ] {
        let run = ["run", "--target", "t.dat", "--workload", "backend-random-read-4k", "--ramp", "1", "--db", "r.db"];
        let o = iocurve(
            dir.path(),
            &args(&run, &["--intervals", "1", "--interval-s", "0.1", "--json", "r.json", "--write-iolog", log]),
        );
        assert_eq!(o.status.code(), Some(2), "{log}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{log}: {}", stderr(&o));
    }
    assert_eq!(std::fs::read(dir.path().join("t.dat")).unwrap(), vec![0u8; 1 << 20], "the target is untouched");
    // (The target's check comes once the database is open: it may exist, never as a log.)
    let db = std::fs::read(dir.path().join("r.db")).unwrap_or_default();
    assert!(!db.starts_with(b"fio version"), "the database is no log");
    assert_eq!(std::fs::read(dir.path().join("t.csv")).unwrap(), csv(10, 1.0).as_bytes(), "the trace is untouched");
    assert!(!dir.path().join("nowhere").exists() && !dir.path().join("r.json").exists(), "nothing left behind");
}
