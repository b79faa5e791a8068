//! fio job files through the real binary (issue 19): `iocurve run job.fio` measures what the
//! job file says on a real scratch file, `plan --from-fio` prints the plan that runs, what
//! would change the measurement is refused (with file and line) unless `--fio-lenient`, and an
//! imported job is held to the same write safety as any plan.

use crate::util::*;

/// A two-job file in the style most repositories carry: scratch file in `directory`, libaio,
/// O_DIRECT, one-second runs.
const JOBS: &str = "\
; random reads, then sequential writes
[global]
ioengine=libaio ; asynchronous
direct=1
size=8m
runtime=1
time_based
directory=.
group_reporting

[randread]
rw=randread
bs=4k
iodepth=4
numjobs=2

[seqwrite]
stonewall
rw=write
bs=64k
";

#[test]
fn a_fio_job_file_runs_as_its_jobs_say() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("jobs.fio"), JOBS).unwrap();
    let o = iocurve(dir.path(), &["run", "jobs.fio", "--json", "r.json", "--keep"]);
    let r = ok_json(&o, &dir.path().join("r.json"));
    let err = stderr(&o);
    // libaio runs on iocurve's own libaio back-end: nothing to say of the engine.
    assert!(!err.contains("ioengine"), "{err}");
    assert_eq!(r["workloads"][0]["backend"], "libaio");
    let names: Vec<&str> = r["workloads"].as_array().unwrap().iter().map(|w| w["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["randread", "seqwrite"]);
    let read = &steps(&r, 0)[0];
    assert_eq!((read["workers"].as_u64(), read["queue_depth"].as_u64()), (Some(2), Some(4)));
    assert!(f(&read["read"]["iops"]) > 0.0 && f(&read["write"]["iops"]) == 0.0, "{read}");
    assert_eq!(read["read"]["bytes"].as_u64().unwrap(), read["read"]["ops"].as_u64().unwrap() * 4096);
    let write = &steps(&r, 1)[0];
    assert!(f(&write["write"]["iops"]) > 0.0 && f(&write["read"]["iops"]) == 0.0, "{write}");
    assert_eq!(write["write"]["bytes"].as_u64().unwrap(), write["write"]["ops"].as_u64().unwrap() * 65536);
    assert_eq!(r["workloads"][1]["bs"], "64k");
    // The scratch file was made at the job's size.
    let t = &r["targets"][0];
    assert!(t["path"].as_str().unwrap().ends_with("/iocurve-fio.scratch") && t["scratch"] == true, "{t}");
    assert_eq!(t["size"].as_u64(), Some(8 << 20));
}

#[test]
fn plan_from_fio_prints_the_plan_that_runs() {
    let dir = tempfile::tempdir().unwrap();
    let job = JOBS.replace("ioengine=libaio", "ioengine=null");
    std::fs::write(dir.path().join("jobs.fio"), &job).unwrap();
    let o = iocurve(dir.path(), &["plan", "--from-fio", "jobs.fio"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let toml = stdout(&o);
    assert!(toml.starts_with("# Imported from the fio job file jobs.fio"), "{toml}");
    assert!(toml.contains("queue_depth = 4") && toml.contains("ramp = [2]"), "{toml}");
    std::fs::write(dir.path().join("plan.toml"), &toml).unwrap();
    // The printed plan carries the job's size for the scratch file: no --size needed.
    assert!(toml.contains("scratch_size = \"8m\""), "{toml}");
    let from_toml = run_json(dir.path(), &["run", "plan.toml"]);
    let o = iocurve(dir.path(), &["run", "jobs.fio", "--json", "fio.json"]);
    let from_fio = ok_json(&o, &dir.path().join("fio.json"));
    // ioengine=null: the null back-end touches no block, so the scratch file is not written.
    assert!(
        stdout(&o).contains("of 8m (allocated, not written: the null back-end touches no block)"),
        "{}",
        stdout(&o)
    );
    assert_eq!(from_toml["targets"][0]["size"].as_u64(), Some(8 << 20));
    assert_eq!(from_fio["targets"][0]["size"].as_u64(), Some(8 << 20));
    let plan = |r: &serde_json::Value| {
        let mut p = r["plan"]["workloads"].clone();
        for w in p.as_array_mut().unwrap() {
            w.as_object_mut().unwrap().remove("source");
        }
        p
    };
    assert_eq!(plan(&from_toml), plan(&from_fio));
    // --ramp makes the job's one step a curve.
    let r = run_json(dir.path(), &["run", "jobs.fio", "--ramp", "1,2,4", "--workload", "randread"]);
    assert_eq!(steps(&r, 0).iter().map(|s| s["workers"].as_u64().unwrap()).collect::<Vec<_>>(), [1, 2, 4]);
}

#[test]
fn a_job_file_that_changes_what_is_measured_is_refused_unless_lenient() {
    let dir = tempfile::tempdir().unwrap();
    let job =
        "[global]\nioengine=null\nfilename=t.dat\nsize=4m\nruntime=1\n[part]\nrw=randread\npercentage_random=50\n";
    std::fs::write(dir.path().join("part.fio"), job).unwrap();
    let o = iocurve(dir.path(), &["run", "part.fio"]);
    input_error(&o, &["part.fio:8: percentage_random=50", "--fio-lenient"]);
    assert!(!dir.path().join("t.dat").exists(), "nothing was created");
    let o = iocurve(dir.path(), &["plan", "--from-fio", "part.fio"]);
    input_error(&o, &["part.fio:8: percentage_random=50"]);
    let r = run_json(dir.path(), &["run", "part.fio", "--fio-lenient"]);
    assert_eq!(r["workloads"][0]["name"], "part");
    // A file that does not start fio's way is read as one with --fio.
    std::fs::write(dir.path().join("g.inc"), "[global]\nioengine=null\nfilename=t.dat\nsize=4m\nruntime=1\n").unwrap();
    std::fs::write(dir.path().join("jobs.cfg"), "include g.inc\n[r]\nrw=read\n").unwrap();
    let o = iocurve(dir.path(), &["run", "jobs.cfg"]);
    assert_eq!(o.status.code(), Some(2), "read as TOML: {}", stderr(&o));
    let r = run_json(dir.path(), &["run", "jobs.cfg", "--fio"]);
    assert_eq!(r["workloads"][0]["name"], "r");
}

#[test]
fn an_imported_job_is_held_to_the_same_write_safety() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("fs.img");
    std::fs::File::create(&img).unwrap().set_len(64 << 20).unwrap();
    sh("mkfs.ext4", &["-F", "-q", img.to_str().unwrap()]);
    let before = sha256(&img);
    let job = "[wipe]\nfilename=fs.img\nrw=randwrite\nbs=4k\ndirect=1\nruntime=1\nallow_mounted_write=1\n";
    std::fs::write(dir.path().join("wipe.fio"), job).unwrap();
    for extra in [&[][..], &["--fio-lenient"][..]] {
        let o = iocurve(dir.path(), &args(&["run", "wipe.fio"], extra));
        input_error(&o, &["refusing to write", "ext4"]);
    }
    assert_eq!(sha256(&img), before, "the filesystem in fs.img was written");
}
