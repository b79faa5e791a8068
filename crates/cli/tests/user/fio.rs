//! fio job files (issue 19): includes are found where fio finds them. Runs of job files, and
//! the comparison with fio itself, are in `it/fio.rs` and `crates/plan/tests/`.

use crate::util::*;

/// As fio 3.33: a relative include is looked up in the working directory first, then beside
/// the including file (review of issue 19).
#[test]
fn includes_are_found_where_fio_finds_them() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("inc.fio"), "bs=8k\n").unwrap();
    std::fs::write(dir.path().join("sub/inc.fio"), "bs=32k\n").unwrap();
    std::fs::write(dir.path().join("sub/main.fio"), "[j]\nioengine=null\nfilename=x\ninclude inc.fio\nruntime=1\n")
        .unwrap();
    let o = iocurve(dir.path(), &["plan", "--from-fio", "sub/main.fio"]);
    assert!(stdout(&o).contains("bs = \"8k\""), "the working directory's: {}{}", stdout(&o), stderr(&o));
    let o = iocurve(&dir.path().join("sub"), &["plan", "--from-fio", "main.fio"]);
    assert!(stdout(&o).contains("bs = \"32k\""), "{}{}", stdout(&o), stderr(&o));
}
