//! Marks on real storage (issue 44): two LUNs (the FUSE fault device under a loop device each),
//! one slowed in the middle of a step while `iocurve mark` from another process says so — the
//! run's timeline per target shows which one slowed down, from the mark on.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use iocurve_testkit::faultdev::FaultDev;
use iocurve_testkit::*;

#[test]
fn a_lun_slowed_mid_step_shows_on_its_own_timeline_from_the_mark_on() {
    needs_root!();
    let _one = one_at_a_time();
    let (a, b) = (FaultDev::start(64 << 20), FaultDev::start(64 << 20));
    a.set("delay=1");
    b.set("delay=1");
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let xdg = d.join("xdg");
    std::fs::create_dir(&xdg).unwrap();
    let plan = format!(
        "targets = [\"{}\", \"{}\"]\n[[workloads]]\nname = \"r\"\nread_pct = 100\nramp = [4]\nwarmup_s = 0\nintervals = 10\ninterval_s = 0.5\n",
        a.path(),
        b.path()
    );
    std::fs::write(d.join("plan.toml"), plan).unwrap();
    let run = Command::new(bin())
        .args(["run", "plan.toml", "--db", "r.db", "--json", "r.json"])
        .current_dir(d)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("TMPDIR", &xdg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The run is up once its socket is; then 2 s into the step, the second LUN slows to 20 ms
    // a request, and another terminal says so.
    let started = Instant::now();
    while std::fs::read_dir(xdg.join("iocurve")).map_or(true, |mut d| d.next().is_none()) {
        assert!(started.elapsed() < Duration::from_secs(60), "the run never opened its socket");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    b.set("delay=20");
    let o = Command::new(bin())
        .args(["mark", "controller B slowed"])
        .current_dir(d)
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("TMPDIR", &xdg)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = wait_within(run, Duration::from_secs(120), "the run");
    b.set("pass");
    a.set("pass");
    let r = ok_json(&out, &d.join("r.json"));
    let mark = &r["marks"][0];
    assert_eq!(mark["text"], "controller B slowed");
    let step = &steps(&r, 0)[0];
    let from = step["measured_from_unix_ns"].as_i64().unwrap();
    let at_s = (mark["at_unix_ns"].as_i64().unwrap() - from) as f64 / 1e9;
    assert!(at_s > 0.5 && at_s < 5.0, "the mark fell {at_s} s into the step");
    let target = |path: &str| step["targets"].as_array().unwrap().iter().find(|t| t["target"] == path).unwrap();
    // Each second wholly before the mark, and wholly after it (with 0.2 s for the device to take
    // its new delay): the mean latency of each LUN's I/Os then.
    let seconds = |t: &serde_json::Value, after: bool| -> Vec<f64> {
        t["samples"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["ops"].as_u64().unwrap() > 0)
            .filter(|s| {
                let (t0, t1) = (f(&s["t_s"]), f(&s["t_s"]) + f(&s["dur_s"]));
                if after { t0 > at_s + 0.2 } else { t1 < at_s }
            })
            .map(|s| f(&s["lat_mean_us"]))
            .collect()
    };
    let (a_t, b_t) = (target(a.path()), target(b.path()));
    let (b_before, b_after, a_after) = (seconds(b_t, false), seconds(b_t, true), seconds(a_t, true));
    assert!(!b_before.is_empty() && !b_after.is_empty() && !a_after.is_empty(), "{b_before:?} {b_after:?} {a_after:?}");
    // A loaded machine answers later, never sooner: the slowed LUN's seconds after the mark are
    // at least its delay; the other's stay well below it.
    assert!(b_after.iter().all(|&us| us >= 20_000.0), "LUN B after the mark: {b_after:?}");
    assert!(a_after.iter().all(|&us| us < 15_000.0), "LUN A after the mark: {a_after:?}");
    assert!(b_before.iter().all(|&us| us < 15_000.0), "LUN B before the mark: {b_before:?}");
    // The report's run timeline has each target's lines and the mark in its table.
    let o = iocurve(d, &["report", "1", "--db", "r.db", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(d.join("r.html")).unwrap();
    assert!(html.contains("data-timeline=\"targets\"") && html.contains("<td>controller B slowed</td>"));
    assert!(html.contains(&format!("\"name\":\"{}\"", b.path())), "LUN B's line in the run's timeline");
}
