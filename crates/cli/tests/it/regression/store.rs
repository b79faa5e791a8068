//! Regressions of the `store` subject.

use crate::util::*;
use std::process::Command;

/// Unmounts and removes a bind mount when the test ends, however it ends.
struct Mount(std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Issue 36, finding 4: the reading commands (`runs`, `show`, `export`, `report`, `compare`)
/// opened the results database to write it, so on a read-only mount, without write
/// permission, or with few descriptors they said "not an iocurve results database". They open
/// it read-only now and never change it: here on a read-only bind mount (where WAL's
/// shared-memory file cannot be made, so SQLite reads it as it is on disk), and with 4
/// descriptors.
#[test]
fn regression_reading_commands_work_on_a_read_only_database() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("data")).unwrap();
    for _ in 0..2 {
        let run = ["run", "--db", "data/r.db", "--backend", "null", "--size", "16m"];
        let o = iocurve(d, &args(&run, &args(&["--workload", "backend-random-read-4k", "--ramp", "1"], FAST)));
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let before = std::fs::read(d.join("data/r.db")).unwrap();
    let ro = d.join("ro");
    std::fs::create_dir(&ro).unwrap();
    let bind = Command::new("mount").arg("--bind").arg(d.join("data")).arg(&ro).status().expect("mount runs");
    assert!(bind.success(), "bind mount (needs root)");
    let _mounted = Mount(ro.clone());
    let remount = Command::new("mount").args(["-o", "remount,bind,ro"]).arg(&ro).status().unwrap();
    assert!(remount.success(), "read-only remount");
    let db = ["--db", "ro/r.db"];
    for cmd in [
        args(&["runs"], &db),
        args(&["show", "1"], &db),
        args(&["export", "2", "--format", "csv", "-o", "e.csv"], &db),
        args(&["report", "1", "-o", "r.html"], &db),
        args(&["compare", "1", "2"], &db),
    ] {
        let o = iocurve(d, &cmd);
        assert!(o.status.success(), "{cmd:?} on a read-only mount: {}", stderr(&o));
        assert!(!stderr(&o).contains("not an iocurve"), "{}", stderr(&o));
    }
    assert!(stdout(&iocurve(d, &args(&["runs"], &db))).contains("complete"));
    // Few descriptors: the database is still what it is.
    let o = Command::new("prlimit")
        .arg("--nofile=4")
        .arg(bin())
        .args(["runs", "--db", "data/r.db"])
        .current_dir(d)
        .output()
        .unwrap();
    assert!(o.status.success() && stdout(&o).contains("complete"), "{}", stderr(&o));
    // `delete` needs write access, and says so on a read-only database.
    let o = iocurve(d, &args(&["delete", "1"], &db));
    input_error(&o, &["ro/r.db", "cannot be written here", "Read-only file system"]);
    drop(_mounted);
    // Reading changed nothing.
    assert_eq!(std::fs::read(d.join("data/r.db")).unwrap(), before, "the database is unchanged");
}

/// Issue 36, finding 5: with the database's filesystem full mid-run, the JSON had no workloads
/// although intervals were stored, the status stayed `running`, the terminal said "stored", and
/// a `.json.tmp` was left. Now the step the database stopped taking keeps its stored intervals
/// (flagged `not_stored`), the JSON has every step, the terminal says "stored in part", the
/// status is settled (`failed`, with room the run kept beside the database), and a JSON that
/// cannot be written leaves no temporary file.
#[test]
fn regression_a_full_database_keeps_what_it_stored_and_settles_the_status() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let full = d.join("full");
    std::fs::create_dir(&full).unwrap();
    let made = Command::new("mount").args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"]).arg(&full).status().unwrap();
    assert!(made.success(), "tmpfs (needs root)");
    let _mounted = Mount(full.clone());
    let base = ["run", "--backend", "null", "--size", "16m", "--workload", "backend-random-read-4k", "--warmup-s", "0"];
    let run = |json: &str| {
        let long = ["--db", "full/r.db", "--ramp", "1,2,4,8,16,32,64", "--intervals", "10", "--interval-s", "0.2"];
        iocurve(d, &args(&args(&base, &long), &["--json", json]))
    };
    let o = run("r.json");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("stored in part as run 1 in full/r.db"), "{}", stdout(&o));
    assert!(stderr(&o).contains("database or disk is full"), "{}", stderr(&o));
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("r.json")).unwrap()).unwrap();
    assert_eq!(r["status"], "failed");
    let s = steps(&r, 0);
    let last = s.last().unwrap();
    assert!(s.len() < 7, "the run stopped at the refusal: {} steps", s.len());
    let flags: Vec<&str> = last["flags"].as_array().unwrap().iter().map(|f| f["code"].as_str().unwrap()).collect();
    assert!(flags.contains(&"not_stored"), "{flags:?}");
    // The JSON's steps are the database's: the same intervals, read back.
    let shown = iocurve(d, &["export", "1", "--format", "json", "-o", "e.json", "--db", "full/r.db"]);
    assert!(shown.status.success(), "{}", stderr(&shown));
    let e: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(d.join("e.json")).unwrap()).unwrap();
    assert_eq!(e["status"], "failed", "settled, not left running");
    iocurve_testkit::same_status_everywhere(d, "full/r.db", 1, Some(&r), "failed");
    let stored = steps(&e, 0);
    assert_eq!(stored.len(), s.len());
    assert_eq!(
        stored.last().unwrap()["intervals"].as_array().unwrap().len(),
        last["intervals"].as_array().unwrap().len()
    );
    let left: Vec<String> =
        std::fs::read_dir(&full).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!left.iter().any(|n| n.ends_with(".tmp") || n.contains(".room-")), "{left:?}");
    // A JSON on a full filesystem of its own (the database's frees what its room and WAL held
    // when the run ends): said, and no temporary file left.
    let json_fs = d.join("jfull");
    std::fs::create_dir(&json_fs).unwrap();
    let made = Command::new("mount").args(["-t", "tmpfs", "-o", "size=64k", "tmpfs"]).arg(&json_fs).status().unwrap();
    assert!(made.success());
    let _json_mounted = Mount(json_fs.clone());
    let _ = std::fs::write(json_fs.join("filler"), vec![0u8; 1 << 20]);
    let short = ["--ramp", "1", "--intervals", "1", "--interval-s", "0.2", "--json", "jfull/r2.json"];
    let o = iocurve(d, &args(&base, &short));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write the JSON result to jfull/r2.json"), "{}", stderr(&o));
    let left: Vec<String> =
        std::fs::read_dir(&json_fs).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, ["filler"], "no temporary file left");
}
