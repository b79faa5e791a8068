//! Room for the writes that end a run (issue 36, finding 5: with the database's filesystem full
//! mid-run, the run's status stayed `running`). A run keeps a file of [`ROOM`] bytes beside the
//! database, `DB.room-HOST-PID`, allocated when it starts. When a write that ends the run (its status,
//! its headlines) finds the filesystem full, the file is removed and the write tried again,
//! after a checkpoint that lets the WAL start over in its own space. The file goes when the run
//! ends, and a run's stale one (its process gone) when the next run on that host starts (a
//! database on a shared filesystem may have runs of other hosts beside it).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::Store;

/// Bytes kept: many times what a run's last writes take (a few pages of WAL).
pub const ROOM: u64 = 1 << 20;

#[derive(Debug, Default)]
pub(crate) struct Room(Mutex<Option<PathBuf>>);

impl Room {
    /// Gives the room back to the filesystem; true when there was some to give.
    fn release(&self) -> bool {
        let taken = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        taken.is_some_and(|p| std::fs::remove_file(p).is_ok())
    }
}

impl Drop for Room {
    fn drop(&mut self) {
        self.release();
    }
}

fn room_prefix(db: &Path) -> (PathBuf, String) {
    let dir = db.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let name = db.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    (dir, format!("{name}.room-{}-", crate::owner::host()))
}

impl Store {
    /// Keeps [`ROOM`] bytes beside the database for the writes that end this run, and removes
    /// the rooms of runs whose process is gone. Best effort: without it a full filesystem at
    /// the end leaves the status unsettled, as before.
    pub fn keep_room(&self) {
        let db = Path::new(&self.path);
        let (dir, prefix) = room_prefix(db);
        if let Ok(entries) = std::fs::read_dir(&dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let gone = name
                    .strip_prefix(&prefix)
                    .and_then(|pid| pid.parse::<u32>().ok())
                    .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
                if gone {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        let path = dir.join(format!("{prefix}{}", std::process::id()));
        // A small filesystem cannot spare the whole room: a quarter, then a sixteenth, is still
        // many times what the last writes take (on a 1 MiB filesystem there was no room at all,
        // and the status stayed unsettled when the run's first writes had taken a page more).
        let made = std::fs::File::create(&path).and_then(|f| {
            use std::os::fd::AsRawFd;
            let mut last = std::io::Error::from_raw_os_error(libc::ENOSPC);
            for size in [ROOM, ROOM / 4, ROOM / 16] {
                // SAFETY: fallocate on a descriptor we own.
                if unsafe { libc::fallocate(f.as_raw_fd(), 0, 0, size as libc::off_t) } == 0 {
                    return Ok(());
                }
                last = std::io::Error::last_os_error();
            }
            Err(last)
        });
        match made {
            Ok(()) => *self.room.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(path),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                tracing::debug!("no room kept beside {}: {e}", self.path);
            }
        }
    }

    /// Runs a write; when the filesystem is full, gives the kept room back, lets the WAL
    /// start over and tries again.
    pub(crate) fn with_room<T>(&self, op: impl Fn() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
        match op() {
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull) && self.room.release() => {
                let _ = self.conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()));
                op()
            }
            r => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_keeps_room_beside_its_database_and_clears_stale_rooms() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        // A room of a process of this host that is gone (pid beyond pid_max), and one of
        // another host's run, which stays.
        let (_, prefix) = room_prefix(&db);
        let stale = dir.path().join(format!("{prefix}4194304"));
        let other = dir.path().join("r.db.room-otherhost-4194304");
        std::fs::write(&other, b"x").unwrap();
        std::fs::write(&stale, b"x").unwrap();
        let store = Store::open(&db).unwrap();
        store.keep_room();
        let mine = dir.path().join(format!("{prefix}{}", std::process::id()));
        assert_eq!(std::fs::metadata(&mine).unwrap().len(), ROOM);
        assert!(!stale.exists(), "the stale room is removed");
        assert!(other.exists(), "another host's room stays");
        drop(store);
        assert!(!mine.exists(), "the room goes with the store");
    }
}
