//! What holds a block device or a file: mounts, swap, holder devices (device-mapper, md, LVM,
//! bcache), partitions in use, loop devices a file backs, processes with the device open.
//! These are the reasons `--allow-write` can never override: writing would corrupt something
//! that is running right now.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

fn dev_string(rdev: u64) -> String {
    format!("{}:{}", libc::major(rdev), libc::minor(rdev))
}

fn parse_dev(s: &str) -> Option<u64> {
    let (ma, mi) = s.trim().split_once(':')?;
    Some(libc::makedev(ma.parse().ok()?, mi.parse().ok()?))
}

/// The sysfs directory of a block device.
fn sys_dir(rdev: u64) -> PathBuf {
    PathBuf::from(format!("/sys/dev/block/{}", dev_string(rdev)))
}

/// The device and its partitions, each with its sysfs name.
fn device_and_partitions(rdev: u64) -> Vec<(u64, String)> {
    let sys = sys_dir(rdev);
    let own = std::fs::canonicalize(&sys)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dev_string(rdev));
    let mut out = vec![(rdev, own)];
    if let Ok(entries) = std::fs::read_dir(&sys) {
        for e in entries.flatten() {
            if e.path().join("partition").exists()
                && let Some(d) = std::fs::read_to_string(e.path().join("dev")).ok().and_then(|d| parse_dev(&d))
            {
                out.push((d, e.file_name().to_string_lossy().into_owned()));
            }
        }
    }
    out
}

/// Mount points of a block device (by device number, and by source for filesystems such as
/// btrfs whose mounts carry an anonymous device number).
fn mounts_of(rdev: u64) -> Vec<String> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for line in info.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let source = f.iter().position(|x| *x == "-").and_then(|i| f.get(i + 2));
        let by_number = f.get(2).and_then(|d| parse_dev(d)) == Some(rdev);
        let by_source = source.is_some_and(|s| {
            s.starts_with('/')
                && std::fs::metadata(s).is_ok_and(|m| m.file_type().is_block_device() && m.rdev() == rdev)
        });
        if (by_number || by_source)
            && let Some(mp) = f.get(4)
        {
            let mp = mp.replace("\\040", " ");
            if !out.contains(&mp) {
                out.push(mp);
            }
        }
    }
    out
}

/// Entries of /proc/swaps that are this object (a device by number, a file by identity).
fn swap_use(is_device: bool, id: (u64, u64)) -> bool {
    let Ok(swaps) = std::fs::read_to_string("/proc/swaps") else {
        return false;
    };
    swaps.lines().skip(1).filter_map(|l| l.split_whitespace().next()).any(|p| {
        std::fs::metadata(p.replace("\\040", " ")).is_ok_and(|m| {
            if is_device { m.file_type().is_block_device() && m.rdev() == id.0 } else { (m.dev(), m.ino()) == id }
        })
    })
}

/// Which processes (other than this one) have which block devices open: device number →
/// "pid N (name)". One pass over /proc, shared by all targets of one open.
#[derive(Debug, Default)]
pub struct Openers(std::collections::HashMap<u64, Vec<String>>, Option<crate::device::LunIndex>);

impl Openers {
    pub fn scan() -> Openers {
        let me = std::process::id();
        let mut map: std::collections::HashMap<u64, Vec<String>> = std::collections::HashMap::new();
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return Openers(map, None);
        };
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if pid == me {
                continue;
            }
            let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
                continue;
            };
            let mut devs: Vec<u64> = fds
                .flatten()
                .filter_map(|fd| std::fs::metadata(fd.path()).ok())
                .filter(|m| m.file_type().is_block_device())
                .map(|m| m.rdev())
                .collect();
            devs.sort_unstable();
            devs.dedup();
            if devs.is_empty() {
                continue;
            }
            let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
            let who = format!("pid {pid} ({})", comm.trim());
            for d in devs {
                map.entry(d).or_default().push(who.clone());
            }
        }
        Openers(map, None)
    }

    /// The other paths to the LUN of block device `rdev` (read once for every target opened).
    pub fn other_paths(&mut self, rdev: u64) -> Vec<(u32, u32, String)> {
        self.1
            .get_or_insert_with(|| crate::device::Sysfs::system().lun_index())
            .other_paths(libc::major(rdev), libc::minor(rdev))
    }

    /// The processes that have device `rdev` open (at most eight named).
    pub fn of(&self, rdev: u64) -> Vec<String> {
        self.0.get(&rdev).map(|v| v.iter().take(8).cloned().collect()).unwrap_or_default()
    }
}

/// Every reason a block device is in use; empty when it is not. `exclusive_refused` says the
/// kernel refused an exclusive open (someone holds it), which is a reason on its own.
pub fn device_in_use(rdev: u64, exclusive_refused: bool) -> Vec<String> {
    let mut reasons = Vec::new();
    for (dev, name) in device_and_partitions(rdev) {
        let what = if dev == rdev { "it".to_string() } else { format!("its partition {name}") };
        for mp in mounts_of(dev) {
            reasons.push(format!("{what} is mounted on {mp}"));
        }
        if swap_use(true, (dev, 0)) {
            reasons.push(format!("{what} is in use as swap"));
        }
        if let Ok(entries) = std::fs::read_dir(sys_dir(dev).join("holders")) {
            for e in entries.flatten() {
                reasons.push(format!(
                    "{what} is held by {} (device-mapper, md RAID, LVM, bcache or similar)",
                    e.file_name().to_string_lossy()
                ));
            }
        }
    }
    if exclusive_refused {
        let procs = Openers::scan().of(rdev);
        if reasons.is_empty() {
            let who = if procs.is_empty() {
                "another program or a kernel driver (no process visible here has it open; it may be mounted in another mount namespace, e.g. a container)".to_string()
            } else {
                procs.join(", ")
            };
            reasons.push(format!("it is held exclusively by {who}: the kernel refused iocurve's exclusive open"));
        } else if !procs.is_empty() {
            reasons.push(format!("it is open in {}", procs.join(", ")));
        }
    }
    reasons
}

/// Partitions of a device that exist (not in use): a reason the user may override.
pub fn partitions(rdev: u64) -> Vec<String> {
    device_and_partitions(rdev).into_iter().filter(|(d, _)| *d != rdev).map(|(_, n)| n).collect()
}

/// Every reason a regular file is in use: active swap, or backing a loop device that is
/// mounted or held. Also returns the loop devices it backs that are attached but idle.
pub fn file_in_use(id: (u64, u64)) -> (Vec<String>, Vec<String>) {
    let mut hard = Vec::new();
    let mut idle = Vec::new();
    if swap_use(false, id) {
        hard.push("it is in use as a swap file".into());
    }
    let Ok(blocks) = std::fs::read_dir("/sys/block") else {
        return (hard, idle);
    };
    for b in blocks.flatten() {
        let name = b.file_name().to_string_lossy().into_owned();
        let Ok(backing) = std::fs::read_to_string(b.path().join("loop/backing_file")) else {
            continue;
        };
        let Some(rdev) = std::fs::read_to_string(b.path().join("dev")).ok().and_then(|d| parse_dev(&d)) else {
            continue;
        };
        let dev_path = Path::new("/dev").join(&name);
        // By identity where the device node is here (the kernel's record of the backing
        // inode); by the name sysfs shows otherwise (a loop set up elsewhere may show a path
        // that means something else here).
        let same = match loop_backing_identity(&dev_path, rdev) {
            Some(backing_id) => backing_id == id,
            None => {
                let backing = backing.trim_end_matches('\n').trim_end_matches(" (deleted)");
                std::fs::metadata(backing).is_ok_and(|m| (m.dev(), m.ino()) == id)
            }
        };
        if !same {
            continue;
        }
        let busy = exclusive_open_refused(&dev_path);
        let uses = device_in_use(rdev, busy);
        if uses.is_empty() {
            idle.push(format!("it backs loop device {}", dev_path.display()));
        } else {
            hard.push(format!("it backs loop device {}, which is in use ({})", dev_path.display(), uses.join("; ")));
        }
    }
    (hard, idle)
}

/// The (device, inode) of a loop device's backing file as the kernel records it
/// (LOOP_GET_STATUS64), if `dev` is that loop device's node here.
fn loop_backing_identity(dev: &Path, rdev: u64) -> Option<(u64, u64)> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(dev).ok()?;
    let m = f.metadata().ok()?;
    if !m.file_type().is_block_device() || m.rdev() != rdev {
        return None;
    }
    // struct loop_info64 from <linux/loop.h>: lo_device and lo_inode lead; 232 bytes in all.
    const LOOP_GET_STATUS64: libc::c_ulong = 0x4C05;
    let mut info = [0u64; 29];
    // SAFETY: the ioctl writes one struct loop_info64 (232 bytes) into the 232-byte buffer.
    if unsafe { libc::ioctl(f.as_raw_fd(), LOOP_GET_STATUS64, info.as_mut_ptr()) } != 0 {
        return None;
    }
    // The kernel encodes the device number as new_encode_dev.
    let d = info[0];
    let major = ((d & 0xfff00) >> 8) as u32;
    let minor = ((d & 0xff) | ((d >> 12) & 0xfff00)) as u32;
    Some((libc::makedev(major, minor), info[1]))
}

/// This process has block device `rdev` open (a target it opened before).
pub(crate) fn open_here(rdev: u64) -> bool {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return false };
    fds.flatten()
        .any(|e| std::fs::metadata(e.path()).is_ok_and(|m| m.file_type().is_block_device() && m.rdev() == rdev))
}

/// True when the kernel refuses an exclusive open of a device (mounted or held).
pub(crate) fn exclusive_open_refused(dev: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_EXCL | libc::O_NONBLOCK).open(dev) {
        Ok(_) => false,
        Err(e) => e.raw_os_error() == Some(libc::EBUSY),
    }
}
