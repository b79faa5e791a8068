//! The everyday command line (issue 16, part 5): shell completions and man pages from the one
//! clap definition, and `run --dry-run` that says what a plan would do without touching
//! anything.

use crate::util::*;
use std::process::Command;

#[test]
fn a_dry_run_says_what_would_happen_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(dir.path(), &["run", "--dry-run", "--size", "64m"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("missing: a scratch file of 64m would be created"), "{out}");
    assert!(out.contains("workload frontend-random-read-4k") && out.contains("steps (workers): 1, 2, 4"), "{out}");
    assert!(out.contains("nothing was opened, written or stored"), "{out}");
    // The duration is the one `suites` announces for the quick suite.
    let suites = stdout(&iocurve(dir.path(), &["suites"]));
    let about = suites.lines().find(|l| l.contains("workloads, about")).unwrap();
    let d = about.split("about ").nth(1).unwrap().split(' ').next().unwrap();
    assert!(out.lines().next().unwrap().ends_with(&format!("about {d}")), "{out}\n{about}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "no scratch file, no database");
    // A fio job file too, checked as the run would check it.
    std::fs::write(dir.path().join("j.fio"), "[r]\nioengine=null\nfilename=t.dat\nsize=4m\nnumjobs=3\nruntime=3\n")
        .unwrap();
    let o = iocurve(dir.path(), &["run", "j.fio", "--dry-run"]);
    let out = stdout(&o);
    assert!(o.status.success() && out.contains("steps (workers): 3") && out.contains("scratch file of 4m"), "{out}");
    let o = iocurve(dir.path(), &["run", "j.fio", "--dry-run", "--qd", "0"]);
    input_error(&o, &["--qd"]);
    assert!(!dir.path().join("t.dat").exists() && !dir.path().join("iocurve.db").exists());
}

/// Issue 37, finding 5: with `[[hosts]]` that carry their own targets the dry run listed the
/// default scratch file instead of each host's targets, and every dry run printed `targets
/// targets:` and `10 workload(s)`.
#[test]
fn regression_a_dry_run_lists_each_hosts_own_targets() {
    let dir = tempfile::tempdir().unwrap();
    let plan = "[[hosts]]\naddress = \"10.0.0.1:7878\"\ntargets = [\"/dev/sdb\", \"/dev/sdc\"]\n[[hosts]]\naddress = \"10.0.0.2:7878\"\ntargets = [\"/dev/nvme0n1\"]\n[[workloads]]\nname = \"w\"\nread_pct = 100\nramp = [1]\n";
    std::fs::write(dir.path().join("p.toml"), plan).unwrap();
    let o = iocurve(dir.path(), &["run", "p.toml", "--dry-run"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(out.contains("targets of 10.0.0.1:7878:\n  /dev/sdb  — ") && out.contains("  /dev/sdc  — "), "{out}");
    assert!(out.contains("targets of 10.0.0.2:7878:\n  /dev/nvme0n1  — "), "{out}");
    assert!(!out.contains("iocurve-scratch.dat") && !out.contains("targets targets"), "{out}");
    assert!(out.lines().next().unwrap().contains(": 1 workload, about"), "{out}");
    let o = iocurve(dir.path(), &["run", "--dry-run"]);
    let out = stdout(&o);
    assert!(out.contains("\ntargets:\n  iocurve-scratch.dat") && out.contains("10 workloads"), "{out}");
}

/// Review of this session: a plan read through a pipe is read once (sniffing it for a fio job
/// file consumed it), and the null back-end, which puts nothing on a target, refuses to verify.
#[test]
fn a_plan_through_a_pipe_and_verify_on_the_null_back_end() {
    let dir = tempfile::tempdir().unwrap();
    let plan = stdout(&iocurve(dir.path(), &["plan", "--suite", "quick"]));
    let mut c = Command::new(bin())
        .args(["run", "/dev/stdin", "--dry-run"])
        .current_dir(dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    c.stdin.take().unwrap().write_all(plan.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success() && stdout(&o).contains("10 workloads"), "{}{}", stdout(&o), stderr(&o));
    let base = ["run", "--size", "16m", "--backend", "null", "--workload", "backend-random-write-4k", "--ramp", "1"];
    let o = iocurve(dir.path(), &args(&base, &["--verify"]));
    input_error(&o, &["verify", "null back-end"]);
    let o = iocurve(dir.path(), &args(&base, &["--verify-final"]));
    input_error(&o, &["--verify-final", "null back-end"]);
    // --fio-lenient on a TOML plan is a mistake, said so.
    std::fs::write(dir.path().join("p.toml"), &plan).unwrap();
    let o = iocurve(dir.path(), &["run", "p.toml", "--fio-lenient", "--dry-run"]);
    input_error(&o, &["--fio-lenient", "TOML plan", "--fio"]);
}

#[test]
fn man_pages_come_from_the_same_options_as_help() {
    let dir = tempfile::tempdir().unwrap();
    let o = iocurve(dir.path(), &["man"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = stdout(&o);
    assert!(page.starts_with(".ie") || page.contains(".TH iocurve"), "{page:.200}");
    assert!(page.contains("completions") && page.contains("report"), "subcommands listed");
    std::fs::create_dir(dir.path().join("man")).unwrap();
    let o = iocurve(dir.path(), &["man", "-o", "man"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let run = std::fs::read_to_string(dir.path().join("man/iocurve-run.1")).expect("a page per subcommand");
    assert!(run.contains("dry\\-run") && run.contains("fio\\-lenient"), "{run:.400}");
    assert!(dir.path().join("man/iocurve.1").exists());
    let o = iocurve(dir.path(), &["man", "-o", "no/such/dir"]);
    input_error(&o, &["no/such/dir", "not a directory"]);
}

#[test]
fn completions_for_every_shell_name_the_subcommands() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, marker) in [("bash", "_iocurve()"), ("zsh", "#compdef iocurve"), ("fish", "complete -c iocurve")] {
        let o = iocurve(dir.path(), &["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let script = stdout(&o);
        assert!(script.contains(marker), "{shell}: {script:.300}");
        for sub in ["run", "report", "compare", "precondition"] {
            assert!(script.contains(sub), "{shell} completes {sub}");
        }
        if shell == "bash" {
            // The script is valid bash.
            std::fs::write(dir.path().join("c.bash"), &script).unwrap();
            let ok = Command::new("bash").arg("-n").arg(dir.path().join("c.bash")).status().unwrap();
            assert!(ok.success(), "bash -n rejects the completion script");
            assert!(script.contains("--dry-run") && script.contains("--fio-lenient"), "options complete too");
        }
    }
    let o = iocurve(dir.path(), &["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// Issue 16, part 4: on a terminal the tables fit its width, cut by columns (each part
/// repeating the step's column); to a pipe they keep whole rows for tools — and, issue 37,
/// finding 7, as plain text (`iocurve runs | awk '{print $1}'` gave `│`).
#[test]
fn tables_fit_the_terminal_by_columns_and_pipes_get_whole_rows() {
    let dir = tempfile::tempdir().unwrap();
    let run = ["run", "--size", "16m", "--backend", "null", "--workload", "frontend-mixed", "--ramp", "1,2"];
    let o = iocurve(dir.path(), &args(&run, &["--intervals", "1", "--interval-s", "0.2", "--warmup-s", "0"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let piped = stdout(&iocurve(dir.path(), &["show", "1"]));
    let step_tables = |t: &str| t.lines().filter(|l| l.contains("│ workers ┆")).count();
    let plain_tables = |t: &str| t.lines().filter(|l| l.starts_with("workers  in flight  ")).count();
    assert_eq!(plain_tables(&piped), 1, "one whole table to a pipe:\n{piped}");
    assert!(!piped.contains(['│', '┆', '┌', '╞']), "no box characters to a pipe:\n{piped}");
    let listed = stdout(&iocurve(dir.path(), &["runs"]));
    let first: Vec<&str> = listed.lines().filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(first, ["id", "1"], "the first column is the run's id:\n{listed}");
    let wide = piped.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(wide > 70, "the whole table is wider than the terminal below: {wide}");
    // A 70-column terminal (a pseudo-terminal from `script`).
    let cmd = format!("stty cols 70; {} show 1", bin());
    let o = Command::new("script").args(["-qec", &cmd, "/dev/null"]).current_dir(dir.path()).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let tty = String::from_utf8_lossy(&o.stdout).replace('\r', "");
    assert!(step_tables(&tty) >= 2, "cut by columns:\n{tty}");
    for l in tty.lines().filter(|l| l.starts_with(['┌', '│', '╞', '└'])) {
        assert!(l.chars().count() <= 70, "{} columns: {l}", l.chars().count());
    }
    for header in ["IOPS", "p99 µs", "flags"] {
        assert!(tty.contains(header), "{header} in\n{tty}");
    }
}
