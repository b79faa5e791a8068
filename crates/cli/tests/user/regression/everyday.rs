//! Regressions of the `everyday` subject.
use crate::util::*;
use std::process::Command;

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
