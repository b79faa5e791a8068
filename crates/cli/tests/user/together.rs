//! Concurrent steps (issue 41) as a user meets them: two workloads at one time on the null
//! back-end behind a latency fault (2 ms a request: by Little's law each keeps its own share of
//! the workers × its depth in flight), their report and CSV, a fio file whose jobs run at once,
//! and what cannot run together refused where it is written.

use crate::util::*;

const MIX: &str = "[defaults]\nbackend = \"null\"\nramp = [2, 4]\nwarmup_s = 0.1\nintervals = 2\ninterval_s = 0.4\n\
[[workloads]]\nname = \"oltp\"\nread_pct = 70\nbs = \"8k\"\nqueue_depth = 2\ntogether = \"mix\"\nshare = 3\n\
[[workloads]]\nname = \"backup\"\npattern = \"sequential\"\nbs = \"1m\"\ntogether = \"mix\"\n\
[[faults]]\nkind = \"latency\"\nlatency_ms = 2\n";

#[test]
fn two_workloads_at_once_are_measured_on_their_own_and_in_total() {
    let dir = tempfile::tempdir().unwrap();
    let r = run_plan(dir.path(), MIX, &["--target", "t.dat", "--size", "16m"]);
    let names: Vec<&str> = r["workloads"].as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mix", "oltp", "backup"]);
    // One each, the rest 3 : 1: of 2 workers 1 and 1, of 4 3 and 1 — adding up to the step's.
    let workers = |w: usize| -> Vec<u64> { steps(&r, w).iter().map(|s| s["workers"].as_u64().unwrap()).collect() };
    assert_eq!((workers(1), workers(2)), (vec![1, 3], vec![1, 1]));
    for w in 0..3 {
        for s in steps(&r, w) {
            let want = s["outstanding"].as_f64().unwrap();
            let in_flight = f(&s["iops"]) * f(&s["lat_us"]["mean"]) / 1e6;
            assert!((in_flight - want).abs() <= 0.15 * want, "workload {w}: {in_flight} in flight, not {want}");
        }
    }
    // The total: its members' I/Os and in flight together, its figures over them.
    for (k, s) in steps(&r, 0).iter().enumerate() {
        let part = |w: usize, key: &str| steps(&r, w)[k][key].as_f64().unwrap();
        assert_eq!(part(0, "outstanding"), part(1, "outstanding") + part(2, "outstanding"));
        let ops = |w: usize| {
            steps(&r, w)[k]["read"]["ops"].as_u64().unwrap() + steps(&r, w)[k]["write"]["ops"].as_u64().unwrap()
        };
        assert_eq!(ops(0), ops(1) + ops(2), "{s}");
    }
    assert_eq!(r["workloads"][0]["members"], serde_json::json!(["oltp", "backup"]));
    assert!(r["workloads"][2]["settings"]["access"].as_str().unwrap().contains("in concurrent step mix at share 1"));
    let o = iocurve(dir.path(), &["export", "1", "--format", "csv", "-o", "s.csv"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(dir.path().join("s.csv")).unwrap();
    assert_eq!(csv.lines().filter(|l| l.contains(",mix,")).count(), 2, "the total's steps: {csv}");
    assert_eq!(csv.lines().filter(|l| l.contains(",backup,")).count(), 2, "each member's: {csv}");
    let o = iocurve(dir.path(), &["report", "1", "-o", "r.html"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shown = stdout(&iocurve(dir.path(), &["show", "1"]));
    assert!(shown.contains("mix  (concurrent step: oltp and backup at one time"), "{shown}");
}

#[test]
fn a_fio_file_of_jobs_at_once_runs_as_one_concurrent_step() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("jobs.fio"),
        "[global]\nioengine=null\nsize=16m\nfilename=t.dat\ntime_based\nruntime=1\n[reads]\nrw=randread\nnumjobs=2\n[writes]\nrw=write\nbs=64k\n",
    )
    .unwrap();
    let r = run_json(dir.path(), &["run", "jobs.fio", "--warmup-s", "0", "--intervals", "1", "--interval-s", "0.3"]);
    let names: Vec<&str> = r["workloads"].as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["reads-together", "reads", "writes"]);
    let workers: Vec<u64> = (0..3).map(|w| steps(&r, w)[0]["workers"].as_u64().unwrap()).collect();
    assert_eq!(workers, [3, 2, 1], "the step's numjobs together, each job its own");
}

#[test]
fn what_cannot_run_together_is_refused_where_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let two = |a: &str, b: &str| {
        format!(
            "[[workloads]]\nname = \"a\"\ntogether = \"t\"\n{a}\n[[workloads]]\nname = \"b\"\ntogether = \"t\"\n{b}\n"
        )
    };
    for (plan, key, says) in [
        (
            "[[workloads]]\nname = \"a\"\ntogether = \"t\"\n".to_string(),
            "workloads[0].together",
            "has one workload (a)",
        ),
        (two("ramp = [2, 4]", "ramp = [2, 8]"), "workloads[1].ramp", "ramp must be a's ([2, 4])"),
        (two("direct = false", ""), "workloads[1].direct", "must be a's (false)"),
        (two("", "interval_s = 3"), "workloads[1].interval_s", "measured over the same seconds"),
        (two("verify = true", ""), "workloads[0].verify", "verify the workloads alone"),
        (two("rate = [100]", ""), "workloads[0].rate", "shares out workers, not a rate"),
        (
            two("target_groups = [\"nope\"]", ""),
            "workloads[0].target_groups",
            "target group `nope` is not one of the run's",
        ),
        ("[[workloads]]\nname = \"a\"\nshare = 2\n".to_string(), "workloads[0].share", "runs alone"),
        ("[[workloads]]\nname = \"t\"\n".to_string() + &two("", ""), "together", "the name of a workload"),
    ] {
        std::fs::write(dir.path().join("plan.toml"), &plan).unwrap();
        let o = iocurve(dir.path(), &["run", "plan.toml", "--dry-run"]);
        input_error(&o, &[key, says]);
    }
}

/// Found by an outside attack (issue 41): a failed I/O of a concurrent step was counted twice in
/// the run's exit reason (in the total and again in its member); a host-count sweep passed
/// `--dry-run` where the run refuses it.
#[test]
fn regression_a_concurrent_step_s_errors_count_once_and_a_dry_run_checks_sweeps() {
    let dir = tempfile::tempdir().unwrap();
    let plan = MIX.replace("kind = \"latency\"\nlatency_ms = 2\n", "kind = \"eio\"\nshare = 0.5\n");
    std::fs::write(dir.path().join("plan.toml"), &plan).unwrap();
    let o = iocurve(dir.path(), &["run", "plan.toml", "--target", "t.dat", "--size", "16m", "--json", "r.json"]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    let total: u64 = steps(&r, 0)
        .iter()
        .map(|s| {
            s["errors"].as_u64().unwrap()
                + s["unmeasured_errors"].as_array().unwrap().iter().map(|e| e["count"].as_u64().unwrap()).sum::<u64>()
        })
        .sum();
    assert!(total > 0);
    assert!(stderr(&o).contains(&format!("the storage failed {total} I/Os")), "{total} once: {}", stderr(&o));
    // Sweeps against the agents there are, in a dry run as in the run.
    std::fs::write(dir.path().join("plan.toml"), "[[workloads]]\nname = \"w\"\nhost_ramp = [1, 2]\n").unwrap();
    input_error(&iocurve(dir.path(), &["run", "plan.toml", "--dry-run"]), &["this host alone"]);
    let hosts = "[[hosts]]\naddress = \"a:7420\"\n[[hosts]]\naddress = \"b:7420\"\n";
    std::fs::write(
        dir.path().join("plan.toml"),
        format!("{hosts}[[workloads]]\nname = \"w\"\nhost_ramp = [1, 2, 4]\n"),
    )
    .unwrap();
    input_error(&iocurve(dir.path(), &["run", "plan.toml", "--dry-run"]), &["goes up to 4 hosts, but the run has 2"]);
}
