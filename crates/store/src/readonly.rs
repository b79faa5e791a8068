//! Opening the results database for reading only: `runs`, `show`, `report`, `compare`,
//! `export` never write it, so they work on a read-only mount, without write permission and
//! beside a run that writes it (issue 36, finding 4: each said "not an iocurve results
//! database" there).
//!
//! WAL and its shared-memory file: a reader normally maps `DB-shm` and takes its read locks
//! there, which needs the file to exist and be writable, or the directory to be writable so
//! that SQLite can make it. Where it can (`mode=ro`), the reader does that and sees everything
//! a run writing at the same time has committed, as any reader does. Where it cannot (a
//! read-only mount, a directory of another user), the database is opened as *immutable*:
//! SQLite then takes no lock and reads the database file as it is. That is exact when no run
//! writes it (no `DB-wal`, or an empty one: what runs committed is in the file after their
//! checkpoint); with a non-empty `DB-wal` the commits since the last checkpoint are missing,
//! and the reader is told so.

use std::path::Path;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use crate::schema::MIGRATIONS;
use crate::{Result, Store, StoreError};

impl Store {
    /// Opens an existing results database for reading only; the database is never changed
    /// (one written by an older iocurve is upgraded only where it may be written).
    pub fn open_read(path: &Path) -> Result<Store> {
        let p = path.display().to_string();
        if !path.is_file() {
            return Err(StoreError::Invalid {
                path: p,
                message: "no such results database (runs are stored where `iocurve run` ran, ./iocurve.db by default; give --db or IOCURVE_DB)".into(),
            });
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let store = match Self::read_with(path, flags, false) {
            Err(StoreError::Sql { source, .. }) if cannot_share_memory(&source) => {
                let wal = wal_bytes(path);
                if wal > 0 {
                    tracing::warn!(
                        "results database {p}: its shared-memory file cannot be used here (read-only mount or no write permission), so it is read as it is on disk: the {wal} bytes in {p}-wal (what a run writing it committed since its last checkpoint) are not shown"
                    );
                }
                Self::read_with(path, flags | OpenFlags::SQLITE_OPEN_URI, true)?
            }
            other => other?,
        };
        let version = store.schema_version()? as usize;
        if version > MIGRATIONS.len() {
            return Err(StoreError::Invalid {
                path: p,
                message: format!(
                    "schema version {version} is newer than this iocurve knows ({}): use a newer iocurve or another --db",
                    MIGRATIONS.len()
                ),
            });
        }
        if version < MIGRATIONS.len() {
            // An older iocurve's database: upgraded where it may be written, as every command
            // did before; otherwise said.
            drop(store);
            return Store::open(path).map_err(|e| StoreError::Invalid {
                path: p,
                message: format!(
                    "was written by an older iocurve (schema {version} of {}) and must be upgraded before it is read, which needs write access ({e}); open it once where it may be written (e.g. `iocurve runs` as its owner), or read it with the iocurve that wrote it",
                    MIGRATIONS.len()
                ),
            });
        }
        Ok(store)
    }

    fn read_with(path: &Path, flags: OpenFlags, immutable: bool) -> Result<Store> {
        let p = path.display().to_string();
        let sql = |source| StoreError::Sql { path: p.clone(), source };
        let conn = if immutable {
            Connection::open_with_flags(format!("{}?immutable=1", file_uri(path)), flags)
        } else {
            Connection::open_with_flags(path, flags)
        }
        .map_err(sql)?;
        let store = Store { conn, path: p.clone(), room: Default::default() };
        let r = store.conn.execute_batch("PRAGMA busy_timeout = 5000; PRAGMA cache_size = -512;");
        match r {
            Err(e) if e.sqlite_error_code() == Some(ErrorCode::NotADatabase) => {
                return Err(StoreError::Invalid {
                    path: p,
                    message: format!("is not an iocurve results database ({e}); give another --db"),
                });
            }
            r => store.sql(r)?,
        }
        store.check_ours()?;
        // The first read of a table: where WAL's shared memory is needed and unavailable, it
        // fails here, not in the middle of a command.
        let r = store.conn.query_row("SELECT count(*) FROM runs", [], |r| r.get::<_, i64>(0));
        store.sql(r)?;
        Ok(store)
    }
}

/// A read-only reader that cannot use WAL's shared memory (`DB-shm` missing and not creatable,
/// or not writable).
fn cannot_share_memory(e: &rusqlite::Error) -> bool {
    matches!(e.sqlite_error_code(), Some(ErrorCode::ReadOnly) | Some(ErrorCode::CannotOpen))
}

/// Bytes in the database's WAL file (0 when it has none).
fn wal_bytes(path: &Path) -> u64 {
    let mut wal = path.as_os_str().to_os_string();
    wal.push("-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

/// `file:` URI of a path, every byte that could be read as URI syntax escaped.
fn file_uri(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = String::from("file:");
    for &b in abs.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_escape_what_sqlite_would_parse() {
        assert_eq!(file_uri(Path::new("/a b/r?x#y%.db")), "file:/a%20b/r%3Fx%23y%25.db");
    }

    #[test]
    fn a_database_is_read_beside_a_writer_and_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        let writer = Store::open(&path).unwrap();
        writer.conn.execute_batch("CREATE TABLE extra(x); INSERT INTO extra VALUES (1);").unwrap();
        let reader = Store::open_read(&path).unwrap();
        assert_eq!(reader.runs().unwrap().len(), 0);
        let n: i64 = reader.conn.query_row("SELECT count(*) FROM extra", [], |r| r.get(0)).unwrap();
        assert_eq!(n, 1, "what the writer committed, still in its WAL, is seen");
        assert!(reader.conn.execute_batch("INSERT INTO extra VALUES (2)").is_err(), "read only");
    }

    #[test]
    fn a_missing_or_foreign_file_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let missing = Store::open_read(&dir.path().join("none.db")).err().unwrap().to_string();
        assert!(missing.contains("no such results database"), "{missing}");
        std::fs::write(dir.path().join("text.db"), "hello").unwrap();
        let foreign = Store::open_read(&dir.path().join("text.db")).err().unwrap().to_string();
        assert!(foreign.contains("not an iocurve results database"), "{foreign}");
    }
}
