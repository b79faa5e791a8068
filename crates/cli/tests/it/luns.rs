//! Figures per target, per LUN and per path, and the facts that explain them (issue 42), checked
//! from below iocurve: each loop device's own counters (`/sys/block/*/stat`), a queue limit that
//! splits iocurve's I/Os, and two loop devices over one file as two paths of one LUN.

use iocurve_testkit::*;
use serde_json::Value;

/// Requests completed and 512-byte sectors moved by a block device so far: (reads, sectors
/// read, writes, sectors written).
/// A device's reads, sectors read, writes, sectors written, and reads merged into others.
fn counters(dev: &std::path::Path) -> [u64; 5] {
    let name = dev.file_name().unwrap().to_string_lossy();
    let stat = std::fs::read_to_string(format!("/sys/block/{name}/stat")).unwrap();
    let f: Vec<u64> = stat.split_whitespace().map(|x| x.parse().unwrap()).collect();
    [f[0], f[2], f[4], f[6], f[1]]
}

/// A second loop device over `backing`: another path to the same LUN, detached on drop.
struct Path2(std::path::PathBuf);

impl Path2 {
    fn over(backing: &std::path::Path) -> Path2 {
        let out = std::process::Command::new("losetup")
            .args(["--find", "--show", "--direct-io=on"])
            .arg(backing)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        Path2(String::from_utf8(out.stdout).unwrap().trim().into())
    }
}

impl Drop for Path2 {
    fn drop(&mut self) {
        let _ = std::process::Command::new("losetup").arg("-d").arg(&self.0).output();
    }
}

fn plan(targets: &[&str], workload: &str) -> String {
    let list: Vec<String> = targets.iter().map(|t| format!("\"{t}\"")).collect();
    format!(
        "targets = [{}]\n[defaults]\nwarmup_s = 0\nintervals = 2\ninterval_s = 0.5\nramp = [2]\n[[workloads]]\n{workload}",
        list.join(", ")
    )
}

#[test]
fn per_target_figures_add_up_to_the_step_and_match_each_devices_counters() {
    needs_root!();
    let _one = one_at_a_time();
    let (a, b) = (Loop::new(64 << 20, &["--direct-io=on"]), Loop::new(64 << 20, &["--direct-io=on"]));
    let dir = tempfile::tempdir().unwrap();
    let (a0, b0) = (counters(&a.dev), counters(&b.dev));
    let r = run_plan(
        dir.path(),
        &plan(&[a.path(), b.path()], "name = \"r\"\nbs = \"4k\"\nqueue_depth = 4\n"),
        &["--allow-write", a.path(), "--allow-write", b.path()],
    );
    let (a1, b1) = (counters(&a.dev), counters(&b.dev));
    let s = &steps(&r, 0)[0];
    let targets = s["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 2, "{s}");
    let ops = s["read"]["ops"].as_u64().unwrap() as f64;
    let secs = f(&s["duration_s"]);
    // Each target's I/Os add up to the step's; each at 4 KiB.
    let per: Vec<f64> = targets.iter().map(|t| (f(&t["iops"]) * secs).round()).collect();
    assert_eq!(per.iter().sum::<f64>(), ops, "{targets:?}");
    for (t, (before, after)) in targets.iter().zip([(a0, a1), (b0, b1)]) {
        assert_eq!(f(&t["read_kib"]), 4.0);
        // The device counted every read iocurve counted, at 4 KiB (8 sectors), and those still
        // in flight when the step ended (at most the step's 8). The block layer merges the odd
        // two adjacent random reads into one request (a full run of 2398405 had 351,096 sectors
        // for fewer than 8 per read): a merged read is still one of iocurve's.
        let (reads, sectors) = (after[0] - before[0], after[1] - before[1]);
        let issued = reads + (after[4] - before[4]);
        let counted = (f(&t["iops"]) * secs).round() as u64;
        assert!(issued >= counted && issued <= counted + 8, "{}: device {issued}, counted {counted}", t["target"]);
        assert_eq!(sectors, issued * 8);
        // What iocurve read off /proc/diskstats over the measured intervals is within the
        // device's own count, at the size the device saw.
        let dev = &t["device"];
        // (4 KiB each, but for the odd two merged into one request of 8.)
        assert!((f(&dev["read_request_kib"]) - 4.0).abs() < 0.01, "{t}");
        let seen = (f(&dev["requests_per_s"]) * secs).round() as u64;
        // Read at the boundaries by the step's coordination when it wakes, a little off the I/O
        // threads' own: a loop device on a page-cached file does over 100'000 reads a second
        // here, so each millisecond the coordination wakes late is 100 of them. Up to 25 ms at
        // each of the two boundaries (a full CI run's load) is 5 % of the step; a wrong device,
        // sectors taken for requests or a count taken twice are far off that.
        let late = (counted as f64 / secs * 0.05) as u64;
        assert!(
            seen <= reads && seen.abs_diff(counted) <= 8 + late + (issued - reads),
            "{}: seen {seen}, device {reads}, counted {counted}",
            t["target"]
        );
    }
    // Two paths: a balance over them.
    assert_eq!(s["balance"][0]["over"], "paths");
    // The per-second figures of each target, exported.
    let out = dir.path().join("t.csv");
    let o = iocurve(dir.path(), &["export", "1", "--format", "targets", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = std::fs::read_to_string(&out).unwrap();
    let rows: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 2 * 2, "one row per target and second (2 intervals of 0.5 s): {csv}");
    let ops_csv: u64 = rows.iter().map(|r| r.split(',').nth(8).unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(ops_csv as f64, ops, "the samples add up to the step: {csv}");
}

/// `placement = "paths"`: worker k drives the k-th path alone. One worker on two paths: the
/// first carries every I/O, the second none, and the balance over the paths says 0 %.
#[test]
fn workers_placed_on_paths_drive_their_own() {
    needs_root!();
    let _one = one_at_a_time();
    let (a, b) = (Loop::new(64 << 20, &["--direct-io=on"]), Loop::new(64 << 20, &["--direct-io=on"]));
    let dir = tempfile::tempdir().unwrap();
    let (a0, b0) = (counters(&a.dev), counters(&b.dev));
    let toml = plan(&[a.path(), b.path()], "name = \"r\"\nbs = \"4k\"\nplacement = \"paths\"\n")
        .replace("ramp = [2]", "ramp = [1, 2]");
    let r = run_plan(dir.path(), &toml, &[]);
    let (a1, b1) = (counters(&a.dev), counters(&b.dev));
    let one = &steps(&r, 0)[0];
    assert!(f(&one["targets"][0]["iops"]) > 0.0);
    assert_eq!(f(&one["targets"][1]["iops"]), 0.0, "{one}");
    assert_eq!(one["balance"][0]["balance_pct"].as_f64(), Some(0.0));
    // Two workers: one on each.
    let two = &steps(&r, 0)[1];
    assert!(f(&two["targets"][1]["iops"]) > 0.0, "{two}");
    assert!(a1[0] > a0[0] && b1[0] > b0[0]);
}

/// The VSP PoC wrote 1 MB and the array saw 256 KB: a device whose `max_sectors_kb` is 64
/// takes iocurve's 1 MiB writes as 64 KiB requests; the run says so, beside the device's
/// counters.
#[test]
fn a_device_that_splits_the_ios_is_said_with_the_request_size_it_saw() {
    needs_root!();
    let _one = one_at_a_time();
    let lo = Loop::new(64 << 20, &["--direct-io=on"]);
    let name = lo.dev.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::write(format!("/sys/block/{name}/queue/max_sectors_kb"), "64").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let before = counters(&lo.dev);
    let r = run_plan(
        dir.path(),
        &plan(&[lo.path()], "name = \"w\"\npattern = \"sequential\"\nread_pct = 0\nbs = \"1m\"\n"),
        &["--allow-write", lo.path()],
    );
    let after = counters(&lo.dev);
    let s = &steps(&r, 0)[0];
    let t = &s["targets"][0];
    assert_eq!(f(&t["write_kib"]), 1024.0);
    assert_eq!(f(&t["device"]["write_request_kib"]), 64.0, "{t}");
    // The device's own counters say the same: 128 sectors a request.
    assert_eq!(after[3] - before[3], (after[2] - before[2]) * 128);
    let split: Vec<&Value> = s["flags"].as_array().unwrap().iter().filter(|f| f["code"] == "split").collect();
    assert_eq!(split.len(), 1, "{s}");
    let m = split[0]["message"].as_str().unwrap();
    assert!(m.contains("1024 KiB") && m.contains("64 KiB") && m.contains("max_sectors_kb is 64"), "{m}");
    // The queue's facts are kept with the run.
    let q = &r["targets"][0]["device"];
    assert_eq!((q["device"].as_str(), q["max_sectors_kb"].as_u64()), (Some(name.as_str()), Some(64)));
}

/// Two loop devices over one file are two paths of one LUN: said at the start, added up into
/// the LUN's figures, refused for verification, and never written through one while the LUN is
/// mounted through the other.
#[test]
fn two_paths_of_one_lun_are_one_lun_and_guarded_together() {
    needs_root!();
    let _one = one_at_a_time();
    let a = Loop::new(64 << 20, &["--direct-io=on"]);
    let b = Path2::over(&a.backing);
    let bp = b.0.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let allow = ["--allow-write", a.path(), "--allow-write", bp];
    // Written through both paths: each holds the other while the run goes on, and neither is
    // refused for the other's hold.
    let toml = plan(&[a.path(), bp], "name = \"r\"\nbs = \"4k\"\nqueue_depth = 2\nread_pct = 50\n");
    std::fs::write(dir.path().join("p.toml"), &toml).unwrap();
    let json = dir.path().join("r.json");
    let o = iocurve(dir.path(), &args(&["run", "p.toml", "--json", json.to_str().unwrap()], &allow));
    let r = ok_json(&o, &json);
    assert!(stdout(&o).contains("are 2 paths of one LUN (loop file"), "{}", stdout(&o));
    let s = &steps(&r, 0)[0];
    let luns = s["luns"].as_array().unwrap();
    assert_eq!(luns.len(), 1, "{s}");
    assert_eq!(luns[0]["paths"].as_array().unwrap().len(), 2);
    let sum: f64 = s["targets"].as_array().unwrap().iter().map(|t| f(&t["iops"])).sum();
    assert!((f(&luns[0]["iops"]) - sum).abs() < 1e-6, "the LUN is its paths together");
    assert_eq!(r["targets"][0]["lun"], r["targets"][1]["lun"]);
    let o = iocurve(dir.path(), &["show", "1"]);
    let shown = stdout(&o);
    assert!(shown.contains("LUN loop file") && shown.contains("2 paths"), "{shown}\n{}", stderr(&o));

    // A verifying workload keeps a map per target: one path per LUN.
    let v = plan(&[a.path(), bp], "name = \"v\"\nbs = \"4k\"\nread_pct = 50\nverify = true\n");
    std::fs::write(dir.path().join("v.toml"), v).unwrap();
    let o = iocurve(dir.path(), &args(&["run", "v.toml"], &allow));
    let e = input_error(&o, &["paths of one LUN", "one path of each LUN"]);
    assert!(e.contains(a.path()) && e.contains(bp), "{e}");

    // A run writing through the second path stops writing once the LUN is mounted through the
    // first: every writing step checks its LUN's other paths again.
    assert!(sh("mkfs.ext4", &["-q", "-F", a.path()]).status.success());
    let mnt = tempfile::tempdir().unwrap();
    let long = plan(&[bp], "name = \"w\"\nbs = \"4k\"\nread_pct = 50\n")
        .replace("ramp = [2]", "ramp = [1, 2, 4, 8]")
        .replace("intervals = 2\ninterval_s = 0.5", "intervals = 1\ninterval_s = 1");
    std::fs::write(dir.path().join("long.toml"), long).unwrap();
    let mut child = std::process::Command::new(bin())
        .current_dir(dir.path())
        .args(["run", "long.toml", "--allow-write", bp])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Its header comes once its targets are open and checked.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0 && !line.contains("targets") {
        line.clear();
    }
    assert!(sh("mount", &["-o", "ro", a.path(), mnt.path().to_str().unwrap()]).status.success());
    let o = wait_within(child, std::time::Duration::from_secs(120), "a run whose LUN was mounted through another path");
    let _ = std::process::Command::new("umount").arg(mnt.path()).output();
    let e = stderr(&o);
    assert!(!o.status.success(), "{e}");
    assert!(
        e.contains(&format!("refusing to write to {bp}: its LUN is in use through another path since the run began")),
        "{e}"
    );

    // Mounted through the first path: never written through the second.
    assert!(sh("mount", &[a.path(), mnt.path().to_str().unwrap()]).status.success());
    let w = plan(&[bp], "name = \"w\"\nbs = \"4k\"\nread_pct = 0\n");
    std::fs::write(dir.path().join("w.toml"), w).unwrap();
    let o = iocurve(dir.path(), &["run", "w.toml", "--allow-write", bp]);
    let _ = sh("umount", &[mnt.path().to_str().unwrap()]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    let first = a.dev.file_name().unwrap().to_string_lossy().into_owned();
    assert!(e.contains(&format!("another path to its LUN, {first}, is mounted on")), "{e}");
    assert!(e.contains("--allow-write cannot override this"), "{e}");
}

/// Two fault devices are two LUNs: their FUSE filesystems report no id (`f_fsid` 0) and number
/// their image file alike, and under that zero id a loop device over one was refused ("another
/// path to its LUN … is held exclusively") while a test held the other (CI of 5442ffe).
#[test]
fn regression_loop_devices_over_two_fuse_files_are_two_luns() {
    needs_root!();
    let (a, b) =
        (iocurve_testkit::faultdev::FaultDev::start(16 << 20), iocurve_testkit::faultdev::FaultDev::start(16 << 20));
    // `a` held exclusively, as a mounted filesystem or a claimed device holds it.
    use std::os::unix::fs::OpenOptionsExt;
    let _held = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL).open(a.device()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let r = run_plan(
        dir.path(),
        &plan(&[b.path()], "name = \"w\"\nbs = \"4k\"\nread_pct = 0\n"),
        &["--allow-write", b.path()],
    );
    assert!(f(&steps(&r, 0)[0]["write"]["iops"]) > 0.0, "{r}");
}
