//! A block device as sysfs tells it (issue 42): its kernel name (the line of `/proc/diskstats`
//! that counts it), its queue's limits (why the device saw other request sizes than iocurve
//! issued), and the LUN it is a path to (shared/DESIGN.md "target identity": several device
//! nodes — SCSI paths, loop devices over one file — may lead to one LUN).
//!
//! Everything is read below a sysfs root, `/sys` on a host and a tree of files in tests.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use iocurve_stats::DeviceQueue;

pub struct Sysfs {
    root: PathBuf,
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

impl Sysfs {
    pub fn system() -> Sysfs {
        Sysfs { root: PathBuf::from("/sys") }
    }

    pub fn at(root: &Path) -> Sysfs {
        Sysfs { root: root.to_path_buf() }
    }

    /// `/sys/dev/block/MAJ:MIN`.
    pub fn dir(&self, major: u32, minor: u32) -> PathBuf {
        self.root.join(format!("dev/block/{major}:{minor}"))
    }

    /// The device's kernel name (`sda`, `loop3`, `nvme0n1p2`): its `uevent`'s DEVNAME, else the
    /// name of its directory.
    pub fn name(&self, major: u32, minor: u32) -> Option<String> {
        let dir = self.dir(major, minor);
        read(&dir.join("uevent"))
            .and_then(|u| u.lines().find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_string)))
            .or_else(|| std::fs::canonicalize(&dir).ok()?.file_name().map(|n| n.to_string_lossy().into_owned()))
    }

    /// The whole disk of a partition (its parent directory); the device itself otherwise.
    fn disk_dir(&self, major: u32, minor: u32) -> Option<PathBuf> {
        let dir = std::fs::canonicalize(self.dir(major, minor)).ok()?;
        if dir.join("partition").exists() { dir.parent().map(Path::to_path_buf) } else { Some(dir) }
    }

    /// The device's queue: a partition's is its disk's. `of_filesystem`: the device holds the
    /// filesystem a file target is on. None: no such device in sysfs.
    pub fn queue(&self, major: u32, minor: u32, of_filesystem: bool) -> Option<DeviceQueue> {
        let device = self.name(major, minor)?;
        let q = self.disk_dir(major, minor)?.join("queue");
        let num = |n: &str| read(&q.join(n)).and_then(|v| v.parse::<u64>().ok());
        Some(DeviceQueue {
            device,
            max_sectors_kb: num("max_sectors_kb"),
            max_hw_sectors_kb: num("max_hw_sectors_kb"),
            nr_requests: num("nr_requests"),
            scheduler: read(&q.join("scheduler")).map(|s| DeviceQueue::active_scheduler(&s)),
            rotational: num("rotational").map(|r| r == 1),
            of_filesystem,
        })
    }

    /// What LUN a block device is a path to, whatever node names it: its WWID (SCSI, NVMe),
    /// device-mapper UUID, or for a loop device its backing file (filesystem id and inode,
    /// offset); a partition by its disk's and its number. None: nothing that another path
    /// could share (the caller falls back to the device number).
    pub fn lun(&self, major: u32, minor: u32) -> Option<String> {
        let dir = self.dir(major, minor);
        let wwid_of = |d: &Path| {
            read(&d.join("device/wwid"))
                .or_else(|| read(&d.join("wwid")))
                .or_else(|| read(&d.join("dm/uuid")).map(|u| format!("dm {u}")))
        };
        if let Some(part) = read(&dir.join("partition")) {
            let disk = self.disk_dir(major, minor)?;
            return wwid_of(&disk).map(|w| format!("wwid {w} partition {part}"));
        }
        if let Some(w) = wwid_of(&dir) {
            return Some(format!("wwid {w}"));
        }
        let backing = read(&dir.join("loop/backing_file"))?;
        let b = std::fs::File::open(&backing).ok()?;
        let (bm, fs) = (b.metadata().ok()?, fsid(&b)?);
        let offset = read(&dir.join("loop/offset")).unwrap_or_else(|| "0".into());
        use std::os::unix::fs::MetadataExt;
        Some(format!("loop file {fs} inode {} offset {offset}", bm.ino()))
    }

    /// Every block device sysfs lists, as (major, minor).
    fn devices(&self) -> Vec<(u32, u32)> {
        let Ok(entries) = std::fs::read_dir(self.root.join("dev/block")) else { return Vec::new() };
        let mut out: Vec<(u32, u32)> = entries
            .flatten()
            .filter_map(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                let (a, b) = n.split_once(':')?;
                Some((a.parse().ok()?, b.parse().ok()?))
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// Every block device's LUN, read once: a run of many paths asks it for each of them (a
    /// scan of all devices per target would be quadratic).
    pub fn lun_index(&self) -> LunIndex {
        let mut by_dev = std::collections::HashMap::new();
        for (a, b) in self.devices() {
            if let Some(l) = self.lun(a, b) {
                by_dev.insert((a, b), (same_data(&l), self.name(a, b).unwrap_or_else(|| format!("{a}:{b}"))));
            }
        }
        LunIndex { by_dev }
    }

    /// The other paths to the LUN device (major, minor) is a path to (see [`LunIndex`]).
    pub fn other_paths(&self, major: u32, minor: u32) -> Vec<(u32, u32, String)> {
        self.lun_index().other_paths(major, minor)
    }
}

/// What must be guarded as one: a loop device's data at any offset of its file (two loop
/// devices over one file overlap, whatever their offsets), any other LUN as it is.
fn same_data(lun: &str) -> String {
    match lun.find(" offset ") {
        Some(i) if lun.starts_with("loop file ") => lun[..i].to_string(),
        _ => lun.to_string(),
    }
}

/// Every block device with a LUN identity: (major, minor) → (what it shares data with, name).
#[derive(Debug)]
pub struct LunIndex {
    by_dev: std::collections::HashMap<(u32, u32), (String, String)>,
}

impl LunIndex {
    /// The other device nodes that reach the data of device (major, minor): every block device
    /// of the same LUN (and every loop device over the same file), as (major, minor, kernel
    /// name), in device order. Empty for a device without a LUN identity.
    pub fn other_paths(&self, major: u32, minor: u32) -> Vec<(u32, u32, String)> {
        let Some((lun, _)) = self.by_dev.get(&(major, minor)) else { return Vec::new() };
        let mut out: Vec<(u32, u32, String)> = self
            .by_dev
            .iter()
            .filter(|(d, (l, _))| **d != (major, minor) && l == lun)
            .map(|(&(a, b), (_, n))| (a, b, n.clone()))
            .collect();
        out.sort_unstable();
        out
    }
}

/// The filesystem's id (statfs `f_fsid`: from the filesystem's UUID on ext4, xfs and btrfs),
/// which, unlike `st_dev`, stays when the disk is numbered otherwise after a reboot. A
/// filesystem that reports none (0: FUSE, some network filesystems) is named by its device
/// number instead, unique while it is mounted: under the zero id every FUSE mount's file 2 was
/// one "LUN", and a loop device over one fault device refused writes while another was held
/// (CI of 5442ffe).
pub(crate) fn fsid(f: &std::fs::File) -> Option<String> {
    // SAFETY: zeroed statfs is a valid out-buffer; an fd we own.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs writes only into `st`, on a descriptor we own.
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    // SAFETY: fsid_t is two 32-bit words (its fields are private in libc).
    let words: [u32; 2] = unsafe { std::mem::transmute(st.f_fsid) };
    if words == [0, 0] {
        use std::os::unix::fs::MetadataExt;
        let dev = f.metadata().ok()?.dev();
        return Some(format!("dev {}:{}", libc::major(dev), libc::minor(dev)));
    }
    Some(format!("{:08x}{:08x}", words[0], words[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sysfs tree as the kernel lays it out: `dev/block/M:m` links to the device's directory,
    /// a partition's directory inside its disk's.
    fn device(root: &Path, dev: &str, path: &str, files: &[(&str, &str)]) {
        let dir = root.join("devices").join(path);
        std::fs::create_dir_all(&dir).unwrap();
        let name = path.rsplit('/').next().unwrap();
        std::fs::write(dir.join("uevent"), format!("MAJOR=8\nDEVNAME={name}\n")).unwrap();
        for (f, v) in files {
            let p = dir.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{v}\n")).unwrap();
        }
        std::fs::create_dir_all(root.join("dev/block")).unwrap();
        std::os::unix::fs::symlink(&dir, root.join("dev/block").join(dev)).unwrap();
    }

    #[test]
    fn four_paths_of_one_lun_are_one_lun_and_a_partition_its_disk_s() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path();
        let queue = [
            ("queue/max_sectors_kb", "256"),
            ("queue/max_hw_sectors_kb", "32767"),
            ("queue/nr_requests", "64"),
            ("queue/scheduler", "none [mq-deadline] kyber"),
            ("queue/rotational", "0"),
        ];
        for (dev, name) in [("8:16", "sdb"), ("8:32", "sdc"), ("8:48", "sdd"), ("8:64", "sde")] {
            let mut f = queue.to_vec();
            f.push(("device/wwid", "naa.600a098038303053453f463045727a6b"));
            device(root, dev, name, &f);
        }
        device(root, "8:80", "sdf", &[("device/wwid", "naa.other")]);
        device(root, "8:17", "sdb/sdb1", &[("partition", "1")]);
        device(root, "8:96", "sdg", &[]);
        let s = Sysfs::at(root);
        assert_eq!(s.name(8, 32).as_deref(), Some("sdc"));
        assert_eq!(s.lun(8, 16).as_deref(), Some("wwid naa.600a098038303053453f463045727a6b"));
        assert_eq!(s.lun(8, 17).as_deref(), Some("wwid naa.600a098038303053453f463045727a6b partition 1"));
        assert_eq!(s.lun(8, 96), None, "no identity another path could share");
        let others: Vec<String> = s.other_paths(8, 32).into_iter().map(|p| p.2).collect();
        assert_eq!(others, ["sdb", "sdd", "sde"]);
        assert!(s.other_paths(8, 80).is_empty());
        assert!(s.other_paths(8, 96).is_empty());
        let q = s.queue(8, 17, true).unwrap();
        assert_eq!(q.device, "sdb1", "a partition's own counters ...");
        assert_eq!(q.max_sectors_kb, Some(256), "... and its disk's queue");
        assert_eq!((q.nr_requests, q.scheduler.as_deref(), q.rotational), (Some(64), Some("mq-deadline"), Some(false)));
        assert!(q.of_filesystem);
        assert_eq!(s.queue(9, 9, false), None);
    }

    #[test]
    fn loop_devices_over_one_file_are_paths_of_one_lun() {
        let t = tempfile::tempdir().unwrap();
        let root = t.path().join("sys");
        let (a, b) = (t.path().join("a.img"), t.path().join("b.img"));
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(&b, b"y").unwrap();
        let (a, b) = (a.to_string_lossy().into_owned(), b.to_string_lossy().into_owned());
        device(&root, "7:1", "loop1", &[("loop/backing_file", &a)]);
        device(&root, "7:2", "loop2", &[("loop/backing_file", &a)]);
        device(&root, "7:3", "loop3", &[("loop/backing_file", &a), ("loop/offset", "4096")]);
        device(&root, "7:4", "loop4", &[("loop/backing_file", &b)]);
        let s = Sysfs::at(&root);
        // Another offset is another LUN (its figures apart), but the same data to guard: a
        // region of one file overlaps the whole file another loop device reads.
        assert_ne!(s.lun(7, 3), s.lun(7, 1));
        let names = |v: Vec<(u32, u32, String)>| v.into_iter().map(|p| p.2).collect::<Vec<_>>();
        assert_eq!(names(s.other_paths(7, 1)), ["loop2", "loop3"]);
        assert_eq!(names(s.other_paths(7, 3)), ["loop1", "loop2"]);
        assert!(s.other_paths(7, 4).is_empty());
    }
}
