//! Runs of the real binary: bad input is a clear error with exit code 2. Runs on files and
//! loop devices are in `it/runs.rs`.

use crate::util::*;

#[test]
fn bad_input_is_a_clear_error_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let plan = |name: &str, body: &str| {
        std::fs::write(d.join(name), body).unwrap();
        name.to_string()
    };
    let wl = "[[workloads]]\nname = \"a\"\n";
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (vec![plan("unknown.toml", &format!("{wl}rampp = [1]\n"))], vec!["unknown.toml:3", "did you mean `ramp`"]),
        (vec![plan("type.toml", &format!("{wl}queue_depth = \"deep\"\n"))], vec!["type.toml:3"]),
        (vec![plan("zero.toml", &format!("{wl}interval_s = 0\n"))], vec!["zero.toml:3", "workloads[0].interval_s"]),
        (vec![plan("empty.toml", &format!("{wl}ramp = []\n"))], vec!["empty.toml:3", "ramp is empty"]),
        (vec![plan("bs.toml", &format!("{wl}bs = 1000\n"))], vec!["bs.toml:3", "multiple of 512"]),
        (vec![plan("pct.toml", &format!("{wl}read_pct = 150\n"))], vec!["pct.toml:3", "0 to 100"]),
        (vec![plan("noworkloads.toml", "name = \"x\"\n")], vec!["no workloads"]),
        (vec!["missing-plan.toml".into()], vec!["missing-plan.toml", "cannot read"]),
        (vec!["--target".into(), "/dev/iocurve-nonexistent".into()], vec!["no such device"]),
        (vec!["--target".into(), "/nonexistent-iocurve/*.img".into()], vec!["matches nothing"]),
        (vec!["--ramp".into(), "4,2".into()], vec!["--ramp", "increase"]),
        (vec!["--qd".into(), "0".into()], vec!["--qd"]),
        (vec!["--interval-s".into(), "0".into()], vec!["--interval-s"]),
        (vec!["--suite".into(), "quik".into()], vec!["did you mean `quick`"]),
        (vec!["--backend".into(), "aio".into()], vec!["io_uring, libaio, psync or null"]),
        (vec!["--bs".into(), "4q".into()], vec!["unknown unit"]),
        (vec!["--workload".into(), "no-such-workload".into()], vec!["no workload name contains"]),
    ];
    for (extra, needles) in cases {
        let mut a = vec!["run".to_string()];
        a.extend(extra);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let o = iocurve(d, &a);
        input_error(&o, &needles);
    }
    assert!(!d.join("iocurve-scratch.dat").exists(), "no scratch file left behind by a failed run");
}
