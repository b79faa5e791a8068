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
