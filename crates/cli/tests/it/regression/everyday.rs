//! Regressions of the `everyday` subject.

use std::process::Command;

use crate::util::*;

/// Issue 16: on the default 1 GiB scratch file the frontend of a 1 MiB sequential workload was
/// 1000 MiB, 98 % of the file. It is capped at 1/8 of the target, and the run says so.
#[test]
fn regression_a_frontend_is_never_most_of_a_small_target() {
    let dir = tempfile::tempdir().unwrap();
    let base = ["run", "--size", "64m", "--backend", "null", "--workload", "frontend-seq-read", "--ramp", "1"];
    let o = iocurve(dir.path(), &args(&args(&base, FAST), &["--json", "r.json"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let said = "frontend capped to at most 1/8 of a target (at least one block): 1000 blocks of 1m would be all of iocurve-scratch.dat (64m); it covers the first 8m";
    assert!(stdout(&o).contains(said), "{}", stdout(&o));
    // The run's header names what ran where (issue 16): the host with its CPU, the back-end,
    // the targets with their kind and size.
    let out = stdout(&o);
    let head: Vec<&str> = out.lines().skip_while(|l| !l.starts_with("iocurve ")).take(3).collect();
    assert!(head[0].starts_with("iocurve ") && head[0].ends_with(", plan quick"), "{head:?}");
    assert!(
        head[1].starts_with("  host     ")
            && head[1].contains(" cores, kernel ")
            && head[1].ends_with(", back-end null"),
        "{head:?}"
    );
    assert_eq!(head[2], "  targets  iocurve-scratch.dat (file, 64m)", "{head:?}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r["workloads"][0]["notes"], serde_json::json!([said]), "in the JSON");
    let o = iocurve(dir.path(), &["show", "1"]);
    assert!(stdout(&o).contains(said), "and in the stored run: {}", stdout(&o));
    // 4k blocks: 1000 of them are 4 MB, under 1/8 of 64 MiB: nothing to say.
    let base = ["run", "--size", "64m", "--backend", "null", "--workload", "frontend-random-read", "--ramp", "1"];
    let o = iocurve(dir.path(), &args(&base, FAST));
    assert!(o.status.success() && !stdout(&o).contains("capped"), "{}", stdout(&o));
}

/// Issue 33: after `cargo run --release -- run` the run said `next: iocurve report 1 -o
/// run-1.html`, and a fresh clone's user got "iocurve: command not found" (the binary is
/// `target/release/iocurve`, not on the PATH); with `--db` the `show` hint left the database out.
/// Every suggested command is pasted into a shell in the run's directory, as the user would.
#[test]
fn regression_the_commands_a_run_suggests_work_from_where_the_user_is() {
    let dir = tempfile::tempdir().unwrap();
    // A database name a shell would split: the hints must quote it.
    let base = ["run", "--size", "16m", "--backend", "null", "--workload", "frontend-random-read", "--ramp", "1"];
    let o = iocurve(dir.path(), &args(&args(&base, FAST), &["--db", "my runs.db"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // This binary is started by its path and is not what the PATH finds under its name.
    let me = std::fs::canonicalize(bin()).unwrap();
    let quoted = |s: &str| if s.contains(' ') { format!("'{s}'") } else { s.to_string() };
    let shown = quoted(&me.display().to_string());
    let line = |prefix: &str| out.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("{prefix}: {out}"));
    assert_eq!(line("stored as run "), format!("stored as run 1 in my runs.db (`{shown} show 1 --db 'my runs.db'`)"));
    let next = line("next: ");
    let commands: Vec<&str> = next.split('`').skip(1).step_by(2).collect();
    assert_eq!(
        commands,
        [
            format!("{shown} report 1 -o run-1.html --db 'my runs.db'"),
            format!("{shown} compare 1 OTHER --db 'my runs.db'"),
            format!("{shown} export 1 --format csv -o run-1.csv --db 'my runs.db'"),
        ],
        "{next}"
    );
    let sh = |cmd: &str| {
        // An empty PATH but for the shell's own tools: nothing named iocurve on it.
        let o =
            Command::new("sh").args(["-c", cmd]).current_dir(dir.path()).env("PATH", "/usr/bin:/bin").output().unwrap();
        assert!(o.status.success(), "`{cmd}` failed: {}", stderr(&o));
        stdout(&o)
    };
    assert!(sh(&format!("{shown} show 1 --db 'my runs.db'")).contains("run 1: plan quick, complete"));
    sh(commands[0]);
    assert!(std::fs::read_to_string(dir.path().join("run-1.html")).unwrap().contains("<html"));
    sh(commands[2]);
    assert!(std::fs::read_to_string(dir.path().join("run-1.csv")).unwrap().contains("frontend-random-read-4k"));
    sh(&commands[1].replace("OTHER", "1"));
}
