//! Write-safety rules: writing destroys data, so it is refused on a block device that is
//! mounted, held (partitions, device-mapper, md, swap) or carries a filesystem or partition
//! signature, and on an existing file iocurve did not create — unless the user names exactly
//! that path with `--allow-write`.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::EngineError;

/// Extended attribute marking files iocurve created (scratch files), so a kept scratch file can
/// be written again by a later run without `--allow-write`.
pub const SCRATCH_XATTR: &str = "user.iocurve.scratch";

/// True if `path` is named (as the same file) in the allow list.
pub fn is_allowed(path: &Path, allow: &[PathBuf]) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    allow.iter().any(|a| match std::fs::metadata(a) {
        Ok(m) if meta.file_type().is_block_device() => m.file_type().is_block_device() && m.rdev() == meta.rdev(),
        Ok(m) => m.dev() == meta.dev() && m.ino() == meta.ino(),
        Err(_) => false,
    })
}

/// Refuses writing to `path` unless it is safe or explicitly allowed.
/// `created_now` marks a scratch file this run created.
pub fn check_write(path: &Path, allow: &[PathBuf], created_now: bool) -> Result<(), EngineError> {
    if created_now || is_allowed(path, allow) {
        return Ok(());
    }
    let meta = std::fs::metadata(path).map_err(|e| EngineError::io(format!("cannot inspect {}", path.display()), e))?;
    let refuse =
        |reasons: Vec<String>| EngineError::WriteRefused { path: path.to_path_buf(), reasons: reasons.join("; ") };
    if meta.file_type().is_block_device() {
        let reasons = block_device_dangers(path, meta.rdev());
        if reasons.is_empty() { Ok(()) } else { Err(refuse(reasons)) }
    } else if meta.is_file() {
        if has_scratch_mark(path) {
            Ok(())
        } else {
            Err(refuse(vec!["it is an existing file that iocurve did not create".into()]))
        }
    } else {
        Err(EngineError::Input(format!("{} is neither a regular file nor a block device", path.display())))
    }
}

pub fn has_scratch_mark(path: &Path) -> bool {
    let c_path = match std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) {
        Ok(p) => p,
        Err(_) => return false,
    };
    let name = std::ffi::CString::new(SCRATCH_XATTR).expect("constant has no NUL");
    let mut buf = [0u8; 16];
    // SAFETY: valid C strings and a buffer of the given length.
    let n = unsafe { libc::getxattr(c_path.as_ptr(), name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    n > 0
}

/// Marks a file as created by iocurve. Filesystems without user xattrs simply don't keep the
/// mark; then a kept scratch file needs `--allow-write` in a later run.
pub fn set_scratch_mark(path: &Path) {
    let (Ok(c_path), Ok(name)) =
        (std::ffi::CString::new(path.as_os_str().as_encoded_bytes()), std::ffi::CString::new(SCRATCH_XATTR))
    else {
        return;
    };
    // SAFETY: valid C strings and value buffer.
    unsafe { libc::setxattr(c_path.as_ptr(), name.as_ptr(), b"1".as_ptr().cast(), 1, 0) };
}

fn dev_string(rdev: u64) -> String {
    format!("{}:{}", libc::major(rdev), libc::minor(rdev))
}

/// Every reason this block device must not be written to; empty when none.
pub fn block_device_dangers(path: &Path, rdev: u64) -> Vec<String> {
    let mut reasons = Vec::new();
    let dev = dev_string(rdev);
    let sys = PathBuf::from(format!("/sys/dev/block/{dev}"));
    // Partitions of this device are its children in sysfs.
    let mut children = vec![dev.clone()];
    if let Ok(entries) = std::fs::read_dir(&sys) {
        for e in entries.flatten() {
            if e.path().join("partition").exists() {
                reasons.push(format!("it has partition {}", e.file_name().to_string_lossy()));
                if let Ok(d) = std::fs::read_to_string(e.path().join("dev")) {
                    children.push(d.trim().to_string());
                }
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(sys.join("holders")) {
        for e in entries.flatten() {
            reasons
                .push(format!("it is held by {} (device-mapper, md RAID or similar)", e.file_name().to_string_lossy()));
        }
    }
    if let Ok(mounts) = std::fs::read_to_string("/proc/self/mountinfo") {
        for line in mounts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 4 && children.iter().any(|c| c == f[2]) {
                reasons.push(format!("it is mounted on {}", f[4]));
            }
        }
    }
    if let Ok(swaps) = std::fs::read_to_string("/proc/swaps") {
        for line in swaps.lines().skip(1) {
            if let Some(p) = line.split_whitespace().next()
                && let Ok(m) = std::fs::metadata(p)
                && m.rdev() == rdev
            {
                reasons.push("it is in use as swap".into());
            }
        }
    }
    match read_head(path) {
        Ok(head) => {
            if let Some(sig) = signature(&head) {
                reasons.push(format!("it carries a {sig} signature"));
            }
        }
        Err(e) => reasons.push(format!("its first blocks cannot be read to check for a filesystem ({e})")),
    }
    reasons
}

const HEAD_LEN: usize = 68 * 1024;

fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(HEAD_LEN);
    File::open(path)?.take(HEAD_LEN as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Recognises the on-disk signatures of common filesystems, volume managers and partition
/// tables in the first 68 KiB of a device.
pub fn signature(head: &[u8]) -> Option<&'static str> {
    let at = |off: usize, magic: &[u8]| head.get(off..off + magic.len()) == Some(magic);
    let checks: &[(usize, &[u8], &str)] = &[
        (0x438, &[0x53, 0xEF], "ext2/3/4 filesystem"),
        (0, b"XFSB", "XFS filesystem"),
        (0x10040, b"_BHRfS_M", "btrfs filesystem"),
        (512, b"EFI PART", "GPT partition table"),
        (512, b"LABELONE", "LVM physical volume"),
        (24, b"LABELONE", "LVM physical volume"),
        (0x1000, &[0xfc, 0x4e, 0x2b, 0xa9], "md RAID member"),
        (0, b"LUKS\xba\xbe", "LUKS encrypted volume"),
        (3, b"NTFS    ", "NTFS filesystem"),
        (0x36, b"FAT", "FAT filesystem"),
        (0x52, b"FAT32", "FAT filesystem"),
        (0x8001, b"CD001", "ISO 9660 filesystem"),
        (0, b"\x10\x20\xf5\xf2", "F2FS filesystem"),
        (0x400, &[0x10, 0x20, 0xf5, 0xf2], "F2FS filesystem"),
        (4086, b"SWAPSPACE2", "swap"),
        (4086, b"SWAP-SPACE", "swap"),
        (0x10000, b"ReIsEr", "ReiserFS filesystem"),
    ];
    for (off, magic, what) in checks {
        if at(*off, magic) {
            return Some(what);
        }
    }
    // An MBR: boot signature plus at least one non-empty partition entry.
    if at(510, &[0x55, 0xAA]) && (0..4).any(|i| head.get(446 + 16 * i + 4).is_some_and(|t| *t != 0)) {
        return Some("MBR partition table");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_signatures() {
        let mut h = vec![0u8; HEAD_LEN];
        assert_eq!(signature(&h), None);
        h[0x438] = 0x53;
        h[0x439] = 0xEF;
        assert_eq!(signature(&h), Some("ext2/3/4 filesystem"));
        let mut g = vec![0u8; HEAD_LEN];
        g[512..520].copy_from_slice(b"EFI PART");
        assert_eq!(signature(&g), Some("GPT partition table"));
        let mut m = vec![0u8; HEAD_LEN];
        m[510] = 0x55;
        m[511] = 0xAA;
        assert_eq!(signature(&m), None, "a boot signature alone is not a partition table");
        m[446 + 4] = 0x83;
        assert_eq!(signature(&m), Some("MBR partition table"));
    }

    #[test]
    fn short_heads_do_not_panic() {
        assert_eq!(signature(&[]), None);
        assert_eq!(signature(&[0x55]), None);
    }

    #[test]
    fn existing_foreign_file_is_refused_and_allow_list_admits_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("data");
        std::fs::write(&p, b"precious").unwrap();
        let e = check_write(&p, &[], false).unwrap_err();
        assert!(e.to_string().contains("did not create"), "{e}");
        assert!(e.to_string().contains("--allow-write"), "{e}");
        check_write(&p, std::slice::from_ref(&p), false).unwrap();
        set_scratch_mark(&p);
        if has_scratch_mark(&p) {
            check_write(&p, &[], false).unwrap();
        }
    }
}
