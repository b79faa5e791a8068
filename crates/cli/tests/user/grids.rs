//! Queue-depth ramps and workers × queue-depth grids (issue 41) as a user meets them, on the
//! null back-end behind a latency fault: every I/O takes 2 ms, so by Little's law a step keeps
//! `IOPS × mean latency` I/Os in flight — the workers × depth it claims to have run, whatever
//! the machine's speed.

use crate::util::*;

const GRID: &str = "[defaults]\nbackend = \"null\"\nwarmup_s = 0.1\nintervals = 2\ninterval_s = 0.4\n\
[[workloads]]\nname = \"grid\"\nramp = [1, 2]\nqd_ramp = [1, 4, 8]\n\
[[faults]]\nkind = \"latency\"\nlatency_ms = 2\n";

/// Each cell runs its workers × depth (by Little's law), row after row; the grid's figures
/// along each axis, the CSV's per-step depth, the terminal's matrices and the report's heat
/// maps say the same.
#[test]
fn a_grid_runs_every_cell_at_its_depth_and_tells_each_axis() {
    let dir = tempfile::tempdir().unwrap();
    let r = run_plan(dir.path(), GRID, &["--target", "t.dat", "--size", "8m"]);
    let w = &r["workloads"][0];
    let cells: Vec<(u64, u64)> =
        steps(&r, 0).iter().map(|s| (s["workers"].as_u64().unwrap(), s["queue_depth"].as_u64().unwrap())).collect();
    assert_eq!(cells, [(1, 1), (1, 4), (1, 8), (2, 1), (2, 4), (2, 8)]);
    for s in steps(&r, 0) {
        let outstanding = (s["workers"].as_u64().unwrap() * s["queue_depth"].as_u64().unwrap()) as f64;
        assert_eq!(s["outstanding"].as_f64().unwrap(), outstanding, "{s}");
        // Little's law: I/Os in flight = completions per second × seconds each.
        let in_flight = f(&s["iops"]) * f(&s["lat_us"]["mean"]) / 1e6;
        assert!((in_flight - outstanding).abs() <= 0.15 * outstanding, "{in_flight} in flight, not {outstanding}: {s}");
    }
    let g = &w["grid"];
    assert_eq!(g["workers"], serde_json::json!([1, 2]));
    assert_eq!(g["queue_depths"], serde_json::json!([1, 4, 8]));
    // Along the depth at 2 workers: speed its first point (qd 1), maximum its deepest.
    // (Twice the I/Os in flight are twice the throughput here; a loaded machine may still
    // stretch the deepest cell's latency enough to put the maximum one cell earlier, or leave
    // it undecided: each is checked as the JSON has it.)
    let cell = |p: &serde_json::Value| (p["workers"].as_u64(), p["queue_depth"].as_u64());
    let top = [(Some(2), Some(4)), (Some(2), Some(8))];
    let row = &g["by_workers"][1];
    assert_eq!((row["at"].as_u64(), row["speed"]["queue_depth"].as_u64()), (Some(2), Some(1)));
    assert!(top.contains(&cell(&row["maximum"])) || row["maximum_undecided"].is_object(), "{row}");
    // Along the workers at qd 4: speed at 1 worker.
    let column = &g["by_queue_depth"][1];
    assert_eq!((column["at"].as_u64(), column["speed"]["workers"].as_u64()), (Some(4), Some(1)));
    assert_eq!(w["speed"]["queue_depth"].as_u64(), Some(1));
    assert!(top.contains(&cell(&w["maximum"])) || w["maximum_undecided"].is_object(), "{w}");
    assert!(w["settings"]["access"].as_str().unwrap().contains("workers × queue-depth grid"), "{w}");

    let shown = iocurve(dir.path(), &["show", "1"]);
    let text = stdout(&shown);
    assert!(text.contains("2 × qd 8"), "{text}");
    assert!(text.contains("along the queue depth at 2 workers: speed"), "{text}");
    assert!(text.contains("maximum  "), "{text}");
    match cell(&w["maximum"]) {
        (Some(2), Some(qd)) => assert!(text.contains(&format!("(2 workers × qd {qd})")), "{text}"),
        _ => assert!(text.contains(" undecided: "), "{text}"),
    }

    let o = iocurve(dir.path(), &["export", "1", "--format", "csv", "-o", "s.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.path().join("s.csv")).unwrap();
    let head: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let qd = head.iter().position(|h| *h == "queue_depth").unwrap();
    let depths: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').nth(qd).unwrap()).collect();
    assert_eq!(depths, ["1", "4", "8", "1", "4", "8"]);

    let o = iocurve(dir.path(), &["report", "1", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(dir.path().join("r.html")).unwrap();
    assert!(html.contains("Workers × queue depth"), "heat maps");
    // The top cell is outlined as the maximum; the optimum is the knee, which a loaded machine
    // may place a cell earlier (latency grows at 16 in flight): outlined where the run put it.
    let top = match w["maximum"].is_null() {
        true => "optimum",
        false if cell(&w["optimum"]) == cell(&w["maximum"]) => "optimum and maximum",
        false => "maximum",
    };
    assert!(html.contains(&format!("title=\"{top} of the grid\"")), "the top cell outlined as {top}");
    if top == "maximum" && !w["optimum"].is_null() {
        assert!(html.contains("title=\"optimum of the grid\""), "the optimum outlined where it is");
    }
    assert!(html.contains("grid @ 2 workers"), "a series per row");
}

/// A queue-depth ramp at fixed workers from the command line; a plan's ramp of depths run at
/// one depth with `--qd`; what cannot be is refused naming the key, before anything runs.
#[test]
fn a_queue_depth_ramp_from_the_command_line_and_what_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let r = run_json(
        dir.path(),
        &args(
            &["run", "--backend", "null", "--target", "t.dat", "--size", "8m", "--workload", "frontend-random-read"],
            &["--qd-ramp", "2,16", "--ramp", "4", "--warmup-s", "0", "--intervals", "1", "--interval-s", "0.2"],
        ),
    );
    let cells: Vec<(u64, u64)> =
        steps(&r, 0).iter().map(|s| (s["workers"].as_u64().unwrap(), s["queue_depth"].as_u64().unwrap())).collect();
    assert_eq!(cells, [(4, 2), (4, 16)]);
    assert!(r["workloads"][0]["grid"].is_null(), "one worker count: a ramp, not a grid");

    // --qd-ramp alone on a suite whose ramp is its own: at 1 worker, not a grid.
    let o = iocurve(dir.path(), &["run", "--dry-run", "--backend", "null", "--qd-ramp", "1,2,4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("steps (workers × queue depth): 1×1, 1×2, 1×4 —"), "{}", stdout(&o));

    // A plan's qd_ramp at one depth: the command line's --qd is nearer.
    std::fs::write(dir.path().join("plan.toml"), GRID).unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--dry-run", "--qd", "2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("steps (workers): 1, 2 —"), "{}", stdout(&o));

    for (plan, key, says) in [
        ("queue_depth = 4\nqd_ramp = [1, 2]", "workloads[0].qd_ramp", "are both given"),
        ("qd_ramp = [4, 2]", "workloads[0].qd_ramp", "must increase strictly"),
        ("qd_ramp = [1, 8192]", "workloads[0].qd_ramp", "1 to 4096"),
        ("qd_ramp = []", "workloads[0].qd_ramp", "qd_ramp is empty"),
        ("qd_ramp = [1, 2]\nrate = [1000]", "workloads[0].qd_ramp", "no queue depth to ramp"),
    ] {
        std::fs::write(dir.path().join("plan.toml"), format!("[[workloads]]\nname = \"w\"\n{plan}\n")).unwrap();
        let o = iocurve(dir.path(), &["run", "plan.toml", "--dry-run"]);
        input_error(&o, &[key, says]);
    }
}

/// Uneven hosts and host sweeps as a dry run tells them; a scale that means nothing is refused
/// where it is written (issue 41).
#[test]
fn a_dry_run_tells_uneven_hosts_and_a_sweep_and_refuses_a_bad_scale() {
    let dir = tempfile::tempdir().unwrap();
    let hosts = "[[hosts]]\naddress = \"a:7420\"\n[[hosts]]\naddress = \"b:7420\"\nworkers_scale = 0.25\n";
    std::fs::write(
        dir.path().join("plan.toml"),
        format!("{hosts}[[workloads]]\nname = \"w\"\nramp = [4, 8]\nhost_ramp = [1, 2]\n"),
    )
    .unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--dry-run"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("hosts: agents a:7420, b:7420 (workers × 0.25)"), "{out}");
    assert!(out.contains("steps (workers): on 1 host: 4, 8; on 2 hosts: 4, 8 —"), "{out}");
    for bad in ["0", "-1", "65", "nan"] {
        std::fs::write(
            dir.path().join("plan.toml"),
            format!("[[hosts]]\naddress = \"a:7420\"\nworkers_scale = {bad}\n[[workloads]]\nname = \"w\"\n"),
        )
        .unwrap();
        let o = iocurve(dir.path(), &["run", "plan.toml", "--dry-run"]);
        input_error(&o, &["hosts[0].workers_scale", "above 0 up to 64"]);
    }
}
