//! The results database: one that cannot be opened is a clear error. Storing, showing and
//! exporting runs are in `it/store.rs`.

use crate::util::*;

#[test]
fn a_database_that_cannot_be_opened_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("junk.db"), b"this is not a database, not at all, not even close").unwrap();
    let o = iocurve(dir.path(), &["runs", "--db", "junk.db"]);
    let err = stderr(&o);
    // The wrong file named: bad input (exit 2), one line, and the file left as it was.
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("junk.db") && err.contains("--db") && !err.contains("panicked"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(
        std::fs::read(dir.path().join("junk.db")).unwrap(),
        b"this is not a database, not at all, not even close"
    );
    // Issue 13, finding 9: a read command never creates a database.
    let o = iocurve(dir.path(), &["show", "1", "--db", "typo.db"]);
    input_error(&o, &["typo.db", "no such results database"]);
    assert!(!dir.path().join("typo.db").exists());
}
