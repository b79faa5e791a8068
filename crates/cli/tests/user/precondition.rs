//! Preconditioning, as an ordinary user: what it may not write is refused, and
//! `--until-steady` checks its rounds before writing. The passes themselves are in
//! `it/precondition.rs`.

use crate::util::*;

/// Review: `--max-rounds` / `--round-s` outside their bounds are refused before the fill (which
/// can take hours), naming the flag.
#[test]
fn precondition_until_steady_checks_its_rounds_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    for (flag, value, words) in [("--max-rounds", "3", "--max-rounds 3"), ("--round-s", "0.01", "--round-s 0.01")] {
        let o = iocurve(dir.path(), &["precondition", "n.dat", "--size", "16m", "--until-steady", flag, value]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains(words), "{}", stderr(&o));
        assert!(!dir.path().join("n.dat").exists(), "nothing written");
    }
}

#[test]
fn precondition_refuses_what_it_may_not_write() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("foreign.dat"), vec![1u8; 1 << 20]).unwrap();
    let o = iocurve(dir.path(), &["precondition", "foreign.dat"]);
    input_error(&o, &["refusing to write to foreign.dat", "--allow-write"]);
    assert_eq!(std::fs::read(dir.path().join("foreign.dat")).unwrap(), vec![1u8; 1 << 20], "untouched");
    let o = iocurve(dir.path(), &["precondition", "x.dat", "--bs", "3000"]);
    input_error(&o, &["--bs", "multiple of 512"]);
}
