//! One writing run per file target (shared/DESIGN.md §5; issue 36, finding 1: two runs wrote
//! one file, both exited 0, and their verification maps then reported lost writes that were
//! the other run's).
//!
//! The lock is an open-file-description lock (`F_OFD_SETLK`) on one byte far beyond any data,
//! in a range no I/O touches: byte `BASE + key × 2²² + pid`. `key` is the run's (the
//! coordinator draws it and sends it to every host), `pid` the holder's process id. So:
//!
//! - the hosts, workers and workloads of one run share the file: they take read locks in their
//!   run's own stretch of the range, which never conflict with each other;
//! - a second run finds the first one's lock (`F_OFD_GETLK` over every other run's stretch) and
//!   is refused, with the holder's pid and command line named where the holder is on this host;
//! - a reading run takes nothing, but says when a writer is at work beside it;
//! - the lock lives as long as the descriptor: a run that dies lets go with its last
//!   descriptor, and nothing is left to clean up. On NFS the client passes byte-range locks to
//!   the server, so hosts of other runs on other machines see it too.
//!
//! Two runs that start at the same instant may both see the other and both be refused (each
//! takes its lock before it looks); never both let through.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::OnceLock;

use crate::TargetError;

/// Start of the lock range: far beyond any file's data (2⁶²; off_t is signed 64-bit).
const BASE: i64 = 1 << 62;
/// Bits of the pid within a run's stretch (pid_max is at most 2²²).
const PID_BITS: u32 = 22;
/// End of the whole range: 2³² keys of 2²² bytes.
const END: i64 = BASE + (1i64 << (32 + PID_BITS));

/// A run's key: the hosts of one run share it. Never 0 (0 means "this process's own").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunKey(pub u32);

impl RunKey {
    /// A new random key for a run.
    pub fn draw() -> RunKey {
        let mut b = [0u8; 4];
        // SAFETY: getrandom into a 4-byte buffer we own.
        let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), 4, 0) };
        let k = if n == 4 {
            u32::from_le_bytes(b)
        } else {
            // No entropy source: the time and pid still tell runs on one host apart.
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            (t as u32) ^ std::process::id().rotate_left(16)
        };
        RunKey(k.max(1))
    }

    /// The key given, or (for 0) one drawn once for this process: commands that write
    /// targets without a coordinator (precondition) are a run of their own.
    pub fn or_own(key: u32) -> RunKey {
        static OWN: OnceLock<RunKey> = OnceLock::new();
        if key == 0 { *OWN.get_or_init(RunKey::draw) } else { RunKey(key) }
    }

    fn start(self) -> i64 {
        BASE + ((self.0 as i64) << PID_BITS)
    }
}

/// Another run's lock found on a file: its key and the pid that holds it (on its host); or a
/// lock of another program (whole-file POSIX locks, `flock` as NFS emulates it) over the range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Holder {
    Run { key: u32, pid: u32 },
    Other { pid: Option<i32> },
}

impl Holder {
    fn from_lock(fl: &libc::flock) -> Holder {
        let offset = fl.l_start;
        // One byte of iocurve's range is one run's lock; anything else another program's.
        if fl.l_len == 1 && (BASE..END).contains(&offset) {
            let rel = offset - BASE;
            return Holder::Run { key: (rel >> PID_BITS) as u32, pid: (rel & ((1 << PID_BITS) - 1)) as u32 };
        }
        Holder::Other { pid: (fl.l_pid > 0).then_some(fl.l_pid) }
    }

    /// "another run: pid 1234 on this host (iocurve run plan.toml)" when the holder lives on
    /// this host and `with_command` (not for a remote coordinator: an agent does not hand out
    /// its host's command lines); otherwise what is known.
    pub fn describe(&self, with_command: bool) -> String {
        let pid = match self {
            Holder::Run { pid, .. } => *pid,
            Holder::Other { pid: Some(p) } => {
                return format!("another program (pid {p}, which holds a lock over the whole file)");
            }
            Holder::Other { pid: None } => return "another program (it holds a lock over the whole file)".into(),
        };
        match crate::process::command_line(pid) {
            Some(line) if with_command => format!("another run: pid {pid} on this host ({line})"),
            Some(_) => format!("another run: pid {pid}"),
            None => format!("another run: pid {pid} of another host sharing the file (no such process here)"),
        }
    }

    fn here(&self) -> bool {
        match self {
            Holder::Run { pid, .. } => Path::new(&format!("/proc/{pid}")).exists(),
            Holder::Other { .. } => true,
        }
    }
}

fn flock_at(kind: libc::c_short, start: i64, len: i64) -> libc::flock {
    // SAFETY: flock is plain data; zero is a valid value for every field.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = start;
    fl.l_len = len;
    fl
}

/// The first lock on the file over `spans` (a write lock is asked for, so that read locks
/// conflict and are reported).
fn first_lock(file: &File, spans: &[(i64, i64)]) -> std::io::Result<Option<Holder>> {
    for &(start, len) in spans.iter().filter(|&&(_, len)| len > 0) {
        let mut fl = flock_at(libc::F_WRLCK as libc::c_short, start, len);
        // SAFETY: F_OFD_GETLK on a descriptor we own with a valid flock.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if fl.l_type != libc::F_UNLCK as libc::c_short {
            return Ok(Some(Holder::from_lock(&fl)));
        }
    }
    Ok(None)
}

/// The first lock of another run (or program) on the file: over every stretch but `own`'s.
fn other_run(file: &File, own: RunKey) -> std::io::Result<Option<Holder>> {
    let after = own.start() + (1 << PID_BITS);
    first_lock(file, &[(BASE, own.start() - BASE), (after, END - after)])
}

/// True when no lock but this process's own byte is on the file: no other run, and none of
/// this run's other hosts, uses it (then a kept scratch file may be made again).
pub fn alone(file: &File, own: RunKey) -> bool {
    let byte = own.start() + (std::process::id() & ((1 << PID_BITS) - 1)) as i64;
    matches!(first_lock(file, &[(BASE, byte - BASE), (byte + 1, END - byte - 1)]), Ok(None))
}

/// How long a lock whose holder is no process of this host is waited out: a run that just
/// ended may leave its descriptors to its io_uring, which the kernel closes asynchronously
/// after the process is gone (seen: the next run found the lock of an exited pid). A holder on
/// another host sharing the file stays past this and is refused then. One wait per process,
/// from the first: a thousand files beside another host's run cost 2 s, not 2,000.
const GONE_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Another run's lock, waiting out (until [`GONE_GRACE`] after this process first waited) a
/// holder that is no process here.
fn other_run_settled(file: &File, own: RunKey) -> std::io::Result<Option<Holder>> {
    static GRACE_ENDS: OnceLock<std::time::Instant> = OnceLock::new();
    loop {
        match other_run(file, own)? {
            Some(h)
                if !h.here()
                    && std::time::Instant::now()
                        < *GRACE_ENDS.get_or_init(|| std::time::Instant::now() + GONE_GRACE) =>
            {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            found => return Ok(found),
        }
    }
}

/// Takes this run's lock on a file target it will write, or refuses (bad input, exit 2)
/// naming the run (or program) that holds the file already. Call before the first write; the
/// lock lasts as long as `file`'s open file description (and its duplicates). `with_command`:
/// the refusal may quote the holder's command line (not on an agent).
pub fn lock_for_writing(file: &File, path: &Path, key: RunKey, with_command: bool) -> Result<(), TargetError> {
    let pid = std::process::id() & ((1 << PID_BITS) - 1);
    let fl = flock_at(libc::F_RDLCK as libc::c_short, key.start() + pid as i64, 1);
    // SAFETY: F_OFD_SETLK on a descriptor we own (open for reading) with a valid flock.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) } != 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            // Another program's write lock over the whole file covers our byte.
            Some(libc::EAGAIN) | Some(libc::EACCES) => Err(TargetError::Input(format!(
                "target {} is locked by another program (a write lock over the whole file): it is in use; stop that program or use another target",
                path.display()
            ))),
            // A file system without byte-range locks: nothing to guard with, and no reason to
            // refuse the run; said in the log.
            Some(libc::ENOLCK) | Some(libc::EOPNOTSUPP) | Some(libc::EINVAL) => {
                tracing::warn!(
                    "target {}: no advisory lock on this file system ({e}): a second run writing it would not be refused",
                    path.display()
                );
                Ok(())
            }
            _ => Err(TargetError::io(format!("cannot lock target {} for writing", path.display()), e)),
        };
    }
    match other_run_settled(file, key) {
        Ok(None) => Ok(()),
        Ok(Some(h)) => {
            // Let go at once: this run will not write, and a run that starts beside us must
            // not see us.
            let un = flock_at(libc::F_UNLCK as libc::c_short, key.start() + pid as i64, 1);
            // SAFETY: as above.
            unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &un) };
            Err(TargetError::Input(format!(
                "target {} is being written by {}: two runs writing one target make each other's figures and verification wrong; wait for it to end, or use another target",
                path.display(),
                h.describe(with_command)
            )))
        }
        Err(e) => Err(TargetError::io(format!("cannot look for other runs writing {}", path.display()), e)),
    }
}

/// Lets go of run `key`'s lock that this process took on `file` (through any descriptor of the
/// same open file description): for a descriptor kept open after its run ended (an agent keeps
/// the scratch files it created until it ends, to remove them then), which would otherwise
/// refuse every later run in the ended run's name.
pub fn unlock(file: &File, key: RunKey) {
    let pid = std::process::id() & ((1 << PID_BITS) - 1);
    let un = flock_at(libc::F_UNLCK as libc::c_short, key.start() + pid as i64, 1);
    // SAFETY: F_OFD_SETLK on a descriptor we own with a valid flock; unlocking a byte not
    // locked is no error.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &un) };
}

/// For a run that only reads a file: another run (or program) holding it beside this one, if
/// any (then the reader goes on and says so). `own`: this run's key (its own hosts may hold
/// the file).
pub fn writer_beside(file: &File, own: RunKey) -> Option<Holder> {
    other_run_settled(file, own).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regression_a_descriptor_kept_after_its_run_lets_the_next_run_write_once_unlocked() {
        let (_d, p) = file();
        let kept = open(&p);
        lock_for_writing(&kept, &p, RunKey(7), false).unwrap();
        // Another descriptor (another open file description) of this process: another run.
        let next = open(&p);
        let e = lock_for_writing(&next, &p, RunKey(8), false).unwrap_err().to_string();
        assert!(e.contains("being written by"), "{e}");
        unlock(&kept, RunKey(7));
        lock_for_writing(&next, &p, RunKey(8), false).unwrap();
    }

    fn file() -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.dat");
        std::fs::write(&p, vec![0u8; 4096]).unwrap();
        (d, p)
    }

    fn open(p: &Path) -> File {
        std::fs::OpenOptions::new().read(true).write(true).open(p).unwrap()
    }

    #[test]
    fn one_run_shares_a_file_and_a_second_run_is_refused_naming_the_first() {
        let (_d, p) = file();
        let (a, b) = (RunKey(7), RunKey(8));
        let first = open(&p);
        lock_for_writing(&first, &p, a, true).unwrap();
        // The same run again (another host, worker or workload of it): shared.
        let same_run = open(&p);
        lock_for_writing(&same_run, &p, a, true).unwrap();
        // Another run: refused, the holder named by pid and command line.
        let other = open(&p);
        let e = lock_for_writing(&other, &p, b, true).unwrap_err().to_string();
        assert!(
            e.contains("is being written by another run") && e.contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
        assert!(matches!(lock_for_writing(&other, &p, b, true), Err(TargetError::Input(_))));
        let quiet = lock_for_writing(&other, &p, b, false).unwrap_err().to_string();
        assert!(
            !quiet.contains("cargo") && !quiet.contains("lock::tests"),
            "no command line for a remote peer: {quiet}"
        );
        // A reader is told.
        assert_eq!(writer_beside(&open(&p), b), Some(Holder::Run { key: 7, pid: std::process::id() }));
        assert_eq!(writer_beside(&open(&p), a), None, "its own run is no other writer");
        // The refused run left nothing behind: once the first run's descriptors close, the
        // second gets the file.
        drop((first, same_run));
        lock_for_writing(&other, &p, b, true).unwrap();
        assert!(alone(&other, b));
        assert_eq!(writer_beside(&open(&p), a), Some(Holder::Run { key: 8, pid: std::process::id() }));
    }

    #[test]
    fn holders_are_decoded_from_their_offset() {
        for (key, pid) in [(1u32, 1u32), (u32::MAX, (1 << PID_BITS) - 1), (12345, 4_000_000)] {
            let fl = flock_at(libc::F_RDLCK as libc::c_short, RunKey(key).start() + pid as i64, 1);
            assert_eq!(Holder::from_lock(&fl), Holder::Run { key, pid });
        }
        let whole = libc::flock { l_pid: 42, ..flock_at(libc::F_WRLCK as libc::c_short, 0, 0) };
        assert_eq!(Holder::from_lock(&whole), Holder::Other { pid: Some(42) });
        assert_ne!(RunKey::draw().0, 0);
        assert_eq!(RunKey::or_own(0), RunKey::or_own(0));
        assert_eq!(RunKey::or_own(5), RunKey(5));
    }

    /// Review of issue 36: another program's lock over the whole file (a POSIX lock; `flock` as
    /// NFS emulates it) hid other runs and let a writer through. It is a holder too.
    #[test]
    fn another_programs_whole_file_lock_refuses_a_writer() {
        let (_d, p) = file();
        let program = open(&p);
        let fl = flock_at(libc::F_RDLCK as libc::c_short, 0, 0);
        // SAFETY: a lock on a descriptor we own.
        assert_eq!(unsafe { libc::fcntl(program.as_raw_fd(), libc::F_OFD_SETLK, &fl) }, 0);
        let run = open(&p);
        let e = lock_for_writing(&run, &p, RunKey(3), true).unwrap_err().to_string();
        assert!(e.contains("another program"), "{e}");
        assert!(matches!(writer_beside(&open(&p), RunKey(3)), Some(Holder::Other { .. })));
        let wl = flock_at(libc::F_WRLCK as libc::c_short, 0, 0);
        drop(program);
        let program = open(&p);
        // SAFETY: as above.
        assert_eq!(unsafe { libc::fcntl(program.as_raw_fd(), libc::F_OFD_SETLK, &wl) }, 0);
        let e = lock_for_writing(&open(&p), &p, RunKey(3), true).unwrap_err().to_string();
        assert!(e.contains("locked by another program"), "{e}");
    }
}
