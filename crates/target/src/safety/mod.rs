//! Write-safety rules. Writing destroys data, so before a target is written:
//!
//! - **Never** (whatever `--allow-write` says): a block device that is mounted (itself or a
//!   partition), active swap, held by a holder device (device-mapper, md, LVM, bcache) or held
//!   exclusively by another process — every writing open of a block device is exclusive
//!   (O_EXCL), so the kernel itself refuses those and nobody can mount it while iocurve writes;
//!   a file that is active swap or backs a loop device in use.
//! - **Only when named with `--allow-write PATH`**: a device or file carrying any signature
//!   libblkid recognises (filesystem, volume manager, RAID, partition table), a device with
//!   partitions, an existing file that is not iocurve's own scratch file (by its stamp, bound
//!   to the file's identity and size), a file backing an idle loop device.
//!
//! Every check runs on the descriptor that is then used for I/O (see [`crate::target`]), so
//! what was checked is what gets written.

pub mod blkid;
pub mod confine;
pub mod inuse;
pub mod lock;

use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use crate::TargetError;
use crate::scratch::{self, Identity};

/// True if the opened object `meta` is named (as the same device or file) in the allow list.
pub fn is_allowed(meta: &std::fs::Metadata, allow: &[PathBuf]) -> bool {
    allow.iter().any(|a| match std::fs::metadata(a) {
        Ok(m) if meta.file_type().is_block_device() => m.file_type().is_block_device() && m.rdev() == meta.rdev(),
        Ok(m) => m.dev() == meta.dev() && m.ino() == meta.ino(),
        Err(_) => false,
    })
}

/// What the checks found out about a target that may be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A device or a foreign file cleared by the checks (or by `--allow-write`).
    Writable,
    /// iocurve's own scratch file of `size` data bytes; `prepared` is false when a killed run
    /// left it half-written (it must be prepared again before use).
    Scratch { size: u64, prepared: bool },
}

/// Reasons the user cannot override (in use right now).
fn hard_refusal(path: &Path, reasons: Vec<String>) -> TargetError {
    TargetError::Input(format!(
        "refusing to write to {}: {}.\n  --allow-write cannot override this: a device or file in use is never written; unmount it, stop what holds it, or choose another target",
        path.display(),
        reasons.join("; ")
    ))
}

fn soft_refusal(path: &Path, allow: &[PathBuf], mut reasons: Vec<String>) -> TargetError {
    // A name in --allow-write that names nothing is most likely a typo of this one.
    let missing: Vec<String> =
        allow.iter().filter(|a| std::fs::metadata(a).is_err()).map(|a| a.display().to_string()).collect();
    if !missing.is_empty() {
        reasons.push(format!("(--allow-write {} names nothing that exists)", missing.join(", ")));
    }
    TargetError::WriteRefused { path: path.to_path_buf(), reasons: reasons.join("; ") }
}

/// How long a signature probe may wait for the target's answers when the caller gives no
/// deadline of its own (the run's `--stuck-after-s` default).
pub const PROBE_DEADLINE: Duration = Duration::from_secs(30);

/// Where a probe may wait and what may end its wait.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProbeLimits<'a> {
    /// No answer within this long: the target does not answer reads (None: [`PROBE_DEADLINE`]).
    pub deadline: Option<Duration>,
    /// Set when the caller is interrupted (Ctrl-C, the coordinator gone).
    pub cancel: Option<&'a AtomicBool>,
}

/// Signatures as reasons; a failed probe is a reason too (writes need a clean bill). The probe
/// reads the target, so it runs on a thread of its own that is given up at the deadline or
/// when the caller is interrupted (issue 36, finding 2: a write run on a device that never
/// answered hung before any output, and Ctrl-C did nothing): a read stuck in the kernel
/// cannot be cancelled, only left behind.
fn signature_reasons(path: &Path, file: &File, limits: ProbeLimits) -> Result<Vec<String>, TargetError> {
    let own = file.try_clone().map_err(|e| TargetError::io(format!("cannot probe {}", path.display()), e))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("iocurve-probe".into())
        .spawn(move || {
            let _ = tx.send(blkid::signatures(own.as_raw_fd()));
        })
        .map_err(|e| TargetError::io(format!("cannot start the signature probe of {}", path.display()), e))?;
    let deadline = limits.deadline.unwrap_or(PROBE_DEADLINE);
    let started = Instant::now();
    let found = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(found) => break found,
            Err(RecvTimeoutError::Disconnected) => break Err("the probe thread ended without an answer".into()),
            Err(RecvTimeoutError::Timeout) => {}
        }
        if limits.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(TargetError::Input(format!(
                "the signature probe of {} was interrupted (its read may stay in the kernel until the device answers)",
                path.display()
            )));
        }
        if started.elapsed() >= deadline {
            return Err(TargetError::io(
                format!(
                    "target {} did not answer the signature probe's reads within {:.0} s: the device does not answer (its read stays in the kernel until it does; the process ends once the kernel lets it go)",
                    path.display(),
                    deadline.as_secs_f64()
                ),
                std::io::Error::from_raw_os_error(libc::ETIMEDOUT),
            ));
        }
    };
    Ok(match found {
        Ok(sigs) => sigs.iter().map(|s| format!("it carries the signature {s} (found by libblkid)")).collect(),
        Err(e) => vec![format!("its signatures cannot be checked ({e})")],
    })
}

/// Refuses a block device, opened exclusively, that must not be written. `openers` are the
/// processes with devices open: one that has this device open without claiming it (a VM's raw
/// disk, a database on a raw volume) is a reason to refuse unless named.
pub fn check_device(
    path: &Path,
    file: &File,
    allow: &[PathBuf],
    openers: &mut inuse::Openers,
    limits: ProbeLimits,
) -> Result<(Verdict, Vec<u64>), TargetError> {
    let meta = file.metadata().map_err(|e| TargetError::io(format!("cannot inspect {}", path.display()), e))?;
    let mut busy = inuse::device_in_use(meta.rdev(), false);
    // A LUN mounted or held through one path is never written through another (issue 42):
    // every other path is checked now (and returned, for the engine to check again before
    // each writing step).
    let mut others = Vec::new();
    let mut open_elsewhere = Vec::new();
    for (major, minor, name) in openers.other_paths(meta.rdev()) {
        let rdev = libc::makedev(major, minor);
        others.push(rdev);
        let via = format!("another path to its LUN, {name},");
        busy.extend(
            inuse::device_in_use(rdev, false).into_iter().map(|r| format!("{via} {}", r.trim_start_matches("it "))),
        );
        // Held exclusively by someone: mounted or claimed there — unless by iocurve (this run
        // itself, one target among several paths of one LUN, or its other hosts on this
        // machine), which holds what it writes exclusively.
        let procs = openers.of(rdev);
        let iocurve = |p: &[String]| p.iter().any(|p| p.ends_with("(iocurve)"));
        if !inuse::open_here(rdev)
            && !iocurve(&procs)
            && inuse::exclusive_open_refused(&Path::new("/dev").join(&name))
            // (Who holds it now: an iocurve that opened it since the scan is no refusal.)
            && !iocurve(&inuse::Openers::scan().of(rdev))
        {
            busy.push(format!(
                "{via} is held exclusively (the kernel refused an exclusive open of /dev/{name}: mounted or claimed through it)"
            ));
        }
        open_elsewhere
            .extend(procs.into_iter().filter(|p| !p.ends_with("(iocurve)")).map(|p| format!("{p} through {name}")));
    }
    if !busy.is_empty() {
        return Err(hard_refusal(path, busy));
    }
    if is_allowed(&meta, allow) {
        return Ok((Verdict::Writable, others));
    }
    let mut reasons: Vec<String> =
        inuse::partitions(meta.rdev()).into_iter().map(|p| format!("it has partition {p}")).collect();
    let mut procs = openers.of(meta.rdev());
    procs.extend(open_elsewhere);
    if !procs.is_empty() {
        reasons.push(format!("it is open in {}", procs.join(", ")));
    }
    reasons.extend(signature_reasons(path, file, limits)?);
    if reasons.is_empty() { Ok((Verdict::Writable, others)) } else { Err(soft_refusal(path, allow, reasons)) }
}

/// The refusal for a block device whose exclusive open the kernel refused.
pub fn device_busy(path: &Path, rdev: u64) -> TargetError {
    hard_refusal(path, inuse::device_in_use(rdev, true))
}

/// Refuses an existing regular file that must not be written; recognises iocurve's own
/// scratch files by their stamp.
pub fn check_file(path: &Path, file: &File, allow: &[PathBuf], limits: ProbeLimits) -> Result<Verdict, TargetError> {
    let meta = file.metadata().map_err(|e| TargetError::io(format!("cannot inspect {}", path.display()), e))?;
    let (hard, idle_loops) = inuse::file_in_use((meta.dev(), meta.ino()));
    if !hard.is_empty() {
        return Err(hard_refusal(path, hard));
    }
    let identity =
        scratch::identify(file).map_err(|e| TargetError::io(format!("cannot read {}", path.display()), e))?;
    let verdict = match identity {
        Identity::Scratch { size, state } => Verdict::Scratch { size, prepared: state == scratch::State::Ready },
        _ => Verdict::Writable,
    };
    if is_allowed(&meta, allow) {
        return Ok(verdict);
    }
    let mut reasons = idle_loops;
    match identity {
        Identity::NotScratch => reasons.push("it is an existing file that iocurve did not create".into()),
        Identity::Stale(why) => reasons.push(format!("it is not the scratch file iocurve created: {why}")),
        Identity::Scratch { .. } => {}
    }
    reasons.extend(signature_reasons(path, file, limits)?);
    if reasons.is_empty() { Ok(verdict) } else { Err(soft_refusal(path, allow, reasons)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn existing_foreign_file_is_refused_and_allow_list_admits_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("data");
        std::fs::write(&p, b"precious").unwrap();
        let f = File::open(&p).unwrap();
        let e = check_file(&p, &f, &[], ProbeLimits::default()).unwrap_err();
        assert!(e.to_string().contains("did not create"), "{e}");
        assert!(e.to_string().contains("--allow-write"), "{e}");
        assert_eq!(check_file(&p, &f, std::slice::from_ref(&p), ProbeLimits::default()).unwrap(), Verdict::Writable);
    }

    #[test]
    fn a_scratch_file_reformatted_as_a_filesystem_is_foreign() {
        let dir = tempfile::tempdir().unwrap();
        let (f, _name) = scratch::create_in(scratch::open_dir(dir.path()).unwrap(), "s".as_ref()).unwrap();
        scratch::allocate(&f, 1 << 20).unwrap();
        scratch::fill(&f, 1 << 20, None).unwrap();
        let p = dir.path().join("s");
        assert_eq!(
            check_file(&p, &f, &[], ProbeLimits::default()).unwrap(),
            Verdict::Scratch { size: 1 << 20, prepared: true }
        );
        // An ext superblock where mkfs puts it (magic 0xEF53 at 1080), the stamp untouched.
        use std::os::unix::fs::FileExt;
        let mut sb = vec![0u8; 1024];
        sb[4..8].copy_from_slice(&256u32.to_le_bytes()); // blocks count
        sb[24..28].copy_from_slice(&0u32.to_le_bytes()); // log block size: 1 KiB
        sb[56..58].copy_from_slice(&[0x53, 0xEF]);
        sb[76..80].copy_from_slice(&1u32.to_le_bytes()); // revision 1
        f.write_all_at(&sb, 1024).unwrap();
        let e = check_file(&p, &f, &[], ProbeLimits::default()).unwrap_err();
        assert!(e.to_string().contains("signature `ext"), "{e}");
    }
}
