//! Injected faults: bad fault descriptions are input errors. Running through faults is in
//! `it/faults.rs`.

use crate::util::*;

#[test]
fn bad_faults_are_input_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (fault, needle) in [
        ("kind = \"melt\"", "unknown variant `melt`"),
        ("kind = \"eio\"\nshare = 2", "faults[0].share"),
        ("kind = \"stall\"\nfrom_s = 1", "a stall needs its end"),
        ("kind = \"latency\"", "latency_ms"),
        ("kind = \"eio\"\ntarget = \"elsewhere.dat\"", "fault target elsewhere.dat is not a target"),
    ] {
        let plan = format!("targets = [\"x.dat\"]\n[[faults]]\n{fault}\n[[workloads]]\nname = \"w\"\nramp = [1]\n");
        std::fs::write(dir.path().join("p.toml"), plan).unwrap();
        let o = iocurve(dir.path(), &["run", "p.toml", "--size", "64m", "--intervals", "1", "--interval-s", "0.2"]);
        input_error(&o, &[needle]);
    }
    let o = iocurve(dir.path(), &["run", "--on-error", "maybe"]);
    input_error(&o, &["unknown policy `maybe`"]);
}
