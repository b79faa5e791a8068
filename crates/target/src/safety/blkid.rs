//! Signatures as libblkid sees them: the util-linux library that `blkid`, `wipefs` and `mkfs`
//! use, so every filesystem, volume-manager, RAID and partition-table format it knows (well
//! over a hundred, superblocks at the end of a device included) is recognised — never a
//! hand-written table.
//!
//! The library is loaded at run time (`libblkid.so.1`, present wherever util-linux is) so the
//! build needs no headers or libclang. When it cannot be loaded, callers refuse to write.
//! Probing runs on the caller's open descriptor: what is checked is what gets written.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::os::fd::RawFd;
use std::sync::OnceLock;

type Probe = *mut c_void;

// From <blkid/blkid.h> (util-linux 2.38; stable ABI of libblkid.so.1).
const SUBLKS_TYPE: c_int = 1 << 5;
const SUBLKS_USAGE: c_int = 1 << 7;
const SUBLKS_MAGIC: c_int = 1 << 9;
const SUBLKS_BADCSUM: c_int = 1 << 10;
const PARTS_FORCE_GPT: c_int = 1 << 1;
const PARTS_MAGIC: c_int = 1 << 3;

struct Lib {
    new_probe: unsafe extern "C" fn() -> Probe,
    free_probe: unsafe extern "C" fn(Probe),
    set_device: unsafe extern "C" fn(Probe, c_int, i64, i64) -> c_int,
    enable_superblocks: unsafe extern "C" fn(Probe, c_int) -> c_int,
    set_superblocks_flags: unsafe extern "C" fn(Probe, c_int) -> c_int,
    enable_partitions: unsafe extern "C" fn(Probe, c_int) -> c_int,
    set_partitions_flags: unsafe extern "C" fn(Probe, c_int) -> c_int,
    do_probe: unsafe extern "C" fn(Probe) -> c_int,
    lookup_value: unsafe extern "C" fn(Probe, *const c_char, *mut *const c_char, *mut usize) -> c_int,
    _lib: libloading::Library,
}

fn load() -> Result<Lib, String> {
    // SAFETY: loading util-linux's libblkid runs no initialisers with preconditions; every
    // symbol is declared with its C signature from blkid.h.
    unsafe {
        let lib = libloading::Library::new("libblkid.so.1").map_err(|e| format!("cannot load libblkid.so.1: {e}"))?;
        macro_rules! sym {
            ($name:literal) => {
                *lib.get(concat!($name, "\0").as_bytes()).map_err(|e| format!("libblkid.so.1 lacks {}: {e}", $name))?
            };
        }
        Ok(Lib {
            new_probe: sym!("blkid_new_probe"),
            free_probe: sym!("blkid_free_probe"),
            set_device: sym!("blkid_probe_set_device"),
            enable_superblocks: sym!("blkid_probe_enable_superblocks"),
            set_superblocks_flags: sym!("blkid_probe_set_superblocks_flags"),
            enable_partitions: sym!("blkid_probe_enable_partitions"),
            set_partitions_flags: sym!("blkid_probe_set_partitions_flags"),
            do_probe: sym!("blkid_do_probe"),
            lookup_value: sym!("blkid_probe_lookup_value"),
            _lib: lib,
        })
    }
}

fn lib() -> Result<&'static Lib, String> {
    static LIB: OnceLock<Result<Lib, String>> = OnceLock::new();
    LIB.get_or_init(load).as_ref().map_err(Clone::clone)
}

/// One signature found: its libblkid name (`ext4`, `gpt`, `LVM2_member` …) and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    pub name: String,
    pub offset: Option<u64>,
}

impl std::fmt::Display for Signature {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.offset {
            Some(o) => write!(f, "`{}` at byte {o:#x}", self.name),
            None => write!(f, "`{}`", self.name),
        }
    }
}

/// Every superblock and partition-table signature on the file or device behind `fd`, the way
/// `wipefs` lists them (checksum failures included: a damaged filesystem is still one).
pub fn signatures(fd: RawFd) -> Result<Vec<Signature>, String> {
    let lib = lib()?;
    // SAFETY: the probe is created, used on a descriptor the caller keeps open for the call,
    // and freed on every path; strings from lookup_value live until the next probe call and
    // are copied at once.
    unsafe {
        let pr = (lib.new_probe)();
        if pr.is_null() {
            return Err("libblkid could not allocate a probe".into());
        }
        let result = (|| {
            if (lib.set_device)(pr, fd, 0, 0) != 0 {
                return Err(format!("libblkid cannot probe this target: {}", std::io::Error::last_os_error()));
            }
            (lib.enable_superblocks)(pr, 1);
            (lib.set_superblocks_flags)(pr, SUBLKS_TYPE | SUBLKS_USAGE | SUBLKS_MAGIC | SUBLKS_BADCSUM);
            (lib.enable_partitions)(pr, 1);
            (lib.set_partitions_flags)(pr, PARTS_MAGIC | PARTS_FORCE_GPT);
            let value = |name: &CStr| -> Option<String> {
                let mut data: *const c_char = std::ptr::null();
                let mut len = 0usize;
                if (lib.lookup_value)(pr, name.as_ptr(), &mut data, &mut len) == 0 && !data.is_null() {
                    Some(CStr::from_ptr(data).to_string_lossy().into_owned())
                } else {
                    None
                }
            };
            let mut found = Vec::new();
            // Each call reports the next signature; a device has a handful at most.
            for _ in 0..64 {
                match (lib.do_probe)(pr) {
                    0 => {
                        let (name, off) = match value(c"TYPE") {
                            Some(t) => (t, value(c"SBMAGIC_OFFSET")),
                            None => match value(c"PTTYPE") {
                                Some(t) => (t, value(c"PTMAGIC_OFFSET")),
                                None => continue,
                            },
                        };
                        let offset = off.and_then(|o| o.trim().parse().ok());
                        let sig = Signature { name, offset };
                        if !found.contains(&sig) {
                            found.push(sig);
                        }
                    }
                    1 => break,
                    code => {
                        // libblkid sets errno only on some paths: report its own code.
                        return Err(format!(
                            "libblkid failed while probing (code {code}); the target may be unreadable"
                        ));
                    }
                }
            }
            Ok(found)
        })();
        (lib.free_probe)(pr);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn random_and_zero_files_carry_no_signature() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("z");
        std::fs::write(&p, vec![0u8; 1 << 20]).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        assert_eq!(signatures(f.as_raw_fd()).unwrap(), vec![]);
    }

    #[test]
    fn an_ext_superblock_and_an_mbr_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("img");
        let mut img = vec![0u8; 1 << 20];
        // A minimal MBR: boot signature and one Linux partition from sector 2048.
        img[510] = 0x55;
        img[511] = 0xAA;
        img[446 + 4] = 0x83;
        img[446 + 8..446 + 12].copy_from_slice(&2048u32.to_le_bytes());
        img[446 + 12..446 + 16].copy_from_slice(&8u32.to_le_bytes());
        std::fs::write(&p, &img).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        let s = signatures(f.as_raw_fd()).unwrap();
        assert!(s.iter().any(|s| s.name == "dos"), "{s:?}");
    }
}
