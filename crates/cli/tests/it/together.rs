//! Concurrent steps (issue 41) checked from below iocurve: two workloads at one time, each on a
//! loop device of its own (`target_groups`); each device's own counters (`/sys/block/*/stat`:
//! reads completed and sectors read) must match its workload's count and size over the same
//! seconds, and the step's total must be the two together.

use iocurve_testkit::*;
use serde_json::Value;

/// Reads completed and 512-byte sectors read by a block device so far.
fn reads(dev: &std::path::Path) -> (u64, u64) {
    let name = dev.file_name().unwrap().to_string_lossy();
    let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    let f: Vec<u64> = stat.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (f[0], f[2])
}

#[test]
fn two_workloads_at_once_each_on_its_device_match_the_devices_counters() {
    needs_root!();
    let _one = one_at_a_time();
    let (a, b) = (Loop::new(64 << 20, &["--direct-io=on"]), Loop::new(64 << 20, &["--direct-io=on"]));
    let dir = tempfile::tempdir().unwrap();
    let plan = format!(
        "[[groups]]\nname = \"a\"\ntargets = [\"{}\"]\n[[groups]]\nname = \"b\"\ntargets = [\"{}\"]\n\
         [defaults]\nramp = [2, 4]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\n\
         [[workloads]]\nname = \"small\"\nbs = \"4k\"\nqueue_depth = 2\ntarget_groups = [\"a\"]\ntogether = \"both\"\nshare = 3\n\
         [[workloads]]\nname = \"big\"\npattern = \"sequential\"\nbs = \"64k\"\ntarget_groups = [\"b\"]\ntogether = \"both\"\nshare = 1\n",
        a.path(),
        b.path()
    );
    let (a0, b0) = (reads(&a.dev), reads(&b.dev));
    let r = run_plan(dir.path(), &plan, &[]);
    let (a1, b1) = (reads(&a.dev), reads(&b.dev));
    let names: Vec<&str> = r["workloads"].as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["both", "small", "big"], "the step's total, then each member on its own");
    let ops = |w: usize, dir: &str| -> u64 { steps(&r, w).iter().map(|s| s[dir]["ops"].as_u64().unwrap()).sum() };
    let bytes = |w: usize| -> u64 { steps(&r, w).iter().map(|s| s["read"]["bytes"].as_u64().unwrap()).sum() };
    // Every read each member counted went to its own device, at its own size: device a saw
    // only 4k reads, device b only 64k ones (the block layer merges none of one stream's I/Os
    // at a time; a few more reads than measured were in flight at a step's end).
    let (reads_a, sectors_a) = (a1.0 - a0.0, a1.1 - a0.1);
    let (reads_b, sectors_b) = (b1.0 - b0.0, b1.1 - b0.1);
    assert_eq!(sectors_a, reads_a * 8, "device a: only 4k reads ({reads_a} reads, {sectors_a} sectors)");
    assert_eq!(sectors_b, reads_b * 128, "device b: only 64k reads ({reads_b} reads, {sectors_b} sectors)");
    let (small, big) = (ops(1, "read"), ops(2, "read"));
    assert!(small > 100 && big > 10, "both ran: {small} and {big} reads");
    for (dev, counted, device) in [("a", small, reads_a), ("b", big, reads_b)] {
        // Those completed after a step's measured intervals (the drain) are on the device
        // only: at most the I/Os in flight at each of the 2 steps' ends (4 × 2 + 1 per step).
        assert!(device >= counted && device <= counted + 2 * 16, "device {dev}: {device} reads, {counted} counted");
    }
    assert_eq!(bytes(1), small * 4096);
    assert_eq!(bytes(2), big * 65536);
    // The step's total is its members together, step by step, and its in flight theirs.
    for (k, s) in steps(&r, 0).iter().enumerate() {
        let (m1, m2) = (&steps(&r, 1)[k], &steps(&r, 2)[k]);
        assert_eq!(
            s["read"]["ops"].as_u64(),
            Some(m1["read"]["ops"].as_u64().unwrap() + m2["read"]["ops"].as_u64().unwrap())
        );
        let outstanding = m1["outstanding"].as_u64().unwrap() + m2["outstanding"].as_u64().unwrap();
        assert_eq!(s["outstanding"].as_u64(), Some(outstanding), "{s}");
        // Measured over the same seconds.
        assert_eq!(s["measured_from_unix_ns"], m1["measured_from_unix_ns"]);
    }
    // Each member its share of the step's workers: one each, the rest 3 : 1.
    let workers = |w: usize| -> Vec<u64> { steps(&r, w).iter().map(|s| s["workers"].as_u64().unwrap()).collect() };
    assert_eq!((workers(0), workers(1), workers(2)), (vec![2, 4], vec![1, 3], vec![1, 1]));
    let total: &Value = &r["workloads"][0];
    assert_eq!(total["members"], serde_json::json!(["small", "big"]));
    assert!(total["settings"]["access"].as_str().unwrap().starts_with("concurrent step of small: "), "{total}");
    // Stored so: `show` reads the same run back.
    let shown = stdout(&iocurve(dir.path(), &["show", "1"]));
    assert!(shown.contains("both  (concurrent step: small and big at one time"), "{shown}");
}

/// The same through a fio job file: two jobs fio runs at once, each on its own device, import
/// as one concurrent step with a target group per job's files — each device sees only its job's
/// reads, at its job's size.
#[test]
fn a_fio_file_of_two_jobs_on_two_devices_runs_each_on_its_own() {
    needs_root!();
    let _one = one_at_a_time();
    let (a, b) = (Loop::new(64 << 20, &["--direct-io=on"]), Loop::new(64 << 20, &["--direct-io=on"]));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("jobs.fio"),
        format!(
            "[global]\nioengine=io_uring\ndirect=1\ntime_based\nruntime=1\n[small]\nfilename={}\nrw=randread\nbs=4k\niodepth=2\n[big]\nfilename={}\nrw=read\nbs=64k\n",
            a.path(),
            b.path()
        ),
    )
    .unwrap();
    let (a0, b0) = (reads(&a.dev), reads(&b.dev));
    let r = run_json(dir.path(), &["run", "jobs.fio", "--warmup-s", "0", "--intervals", "1", "--interval-s", "0.5"]);
    let (a1, b1) = (reads(&a.dev), reads(&b.dev));
    let names: Vec<&str> = r["workloads"].as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["small-together", "small", "big"]);
    assert!(a1.0 > a0.0 && b1.0 > b0.0, "both devices read");
    assert_eq!(a1.1 - a0.1, (a1.0 - a0.0) * 8, "device a: only the small job's 4k reads");
    assert_eq!(b1.1 - b0.1, (b1.0 - b0.0) * 128, "device b: only the big job's 64k reads");
}
