//! fio job files through the real binary (issue 19): `iocurve run job.fio` measures what the
//! job file says on a real scratch file, `plan --from-fio` prints the plan that runs, what
//! would change the measurement is refused (with file and line) unless `--fio-lenient`, and an
//! imported job is held to the same write safety as any plan.
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
