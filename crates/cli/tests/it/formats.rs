//! The filesystem-format matrix (DESIGN.md §5: "a device carrying a signature libblkid
//! recognises … is refused unless the user names that exact path with `--allow-write`").
//!
//! Every filesystem, volume-manager, RAID, encryption and partition-table format that Debian's
//! tools can create on a loop device here is made with its own tool, and then:
//! - a write run is refused: exit code 2, "refusing to write", and the message names the
//!   signature as libblkid reports it (`blkid -p`: its TYPE, or PTTYPE for a bare partition
//!   table);
//! - a read run is allowed (exit code 0);
//! - `iocurve precondition` is refused (exit code 2);
//! - after each of them the device is byte for byte what the tool left (SHA-256 of the whole
//!   device by `sha256sum`, the kernel's buffers dropped first) and the loop device counted no
//!   sector written.
//!
//! One table-driven test runs every row (a few at a time) and reports all failing rows at the
//! end, so one run tells which formats the engine refuses and which it lets through.
//! A tool that `scripts/test` installs but that is missing fails its row: nothing is skipped
//! silently. Formats that cannot be created on this machine at all are listed in `NOT_HERE`,
//! with the reason, instead of being hand-crafted.
//! Needs root (loop devices), as the project's machines provide.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::util::*;

const MIB: u64 = 1 << 20;

/// Where a row's tools work: the loop device, its backing file, and a scratch directory
/// (images, key files, data files) that is not on the device.
struct Ctx<'a> {
    dev: &'a str,
    backing: &'a str,
    dir: &'a Path,
}

impl Ctx<'_> {
    fn file(&self, name: &str) -> String {
        self.dir.join(name).to_str().unwrap().to_string()
    }
}

/// One format of the matrix.
struct Format {
    /// The row's name in the report.
    name: &'static str,
    /// What `blkid -p` must see on the device once the tool ran: `TYPE=…` or `PTTYPE=…`; the
    /// value is what iocurve's refusal must name.
    blkid: &'static str,
    /// Size of the loop device (sparse).
    size: u64,
    /// The programs the row runs, each installed by `scripts/test` (checked before the row).
    tools: &'static [&'static str],
    /// Puts the format on the device.
    make: fn(&Ctx) -> Result<(), String>,
}

/// Formats Debian's tools can write, but not on this machine (no md and no device-mapper in
/// its kernel), with the error their tool gives. They are not rows: the test does not forge
/// their bytes by hand, it only uses the real tools.
const NOT_HERE: &[(&str, &str)] = &[
    (
        "md RAID superblocks 0.90, 1.0, 1.2 (mdadm --create --metadata=…)",
        "mdadm creates the array in the kernel to write its superblocks and there is no md driver: \
         `modprobe: FATAL: Module md_mod not found`, `mdadm: Fail to create md9 when using \
         /sys/module/md_mod/parameters/new_array, fallback to creation via node`, `mdadm: unexpected \
         failure opening /dev/md9`",
    ),
    (
        "DDF and Intel IMSM RAID containers (mdadm --create -e ddf / -e imsm)",
        "the same: `mdadm: unexpected failure opening /dev/md127`",
    ),
    (
        "dm-integrity (integritysetup format), LUKS2 with --integrity",
        "they need device-mapper to format: `Cannot initialize device-mapper. Is dm_mod kernel module \
         loaded?`",
    ),
];

/// Runs `prog args`, with `stdin` fed to it; an error names the command and its output.
fn run_with(prog: &str, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Result<Output, String> {
    let mut cmd = Command::new(prog);
    cmd.args(args).envs(env.iter().copied()).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(|e| format!("`{prog}` cannot run: {e}"))?;
    let mut input = child.stdin.take().unwrap();
    // A tool may exit without reading its input: a failed write is not its error.
    let _ = input.write_all(stdin.as_bytes());
    drop(input);
    let o = child.wait_with_output().map_err(|e| format!("`{prog}`: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "`{prog} {}` failed ({}): {} {}",
            args.join(" "),
            o.status,
            String::from_utf8_lossy(&o.stdout).trim(),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(o)
}

fn run(prog: &str, args: &[&str]) -> Result<(), String> {
    run_with(prog, args, "", &[]).map(drop)
}

/// A small directory tree for the formats that are built as an image from files.
fn source_tree(c: &Ctx) -> Result<String, String> {
    let src = c.dir.join("src");
    std::fs::create_dir_all(src.join("sub")).map_err(|e| e.to_string())?;
    std::fs::write(src.join("hello.txt"), "hello from iocurve's format matrix\n").map_err(|e| e.to_string())?;
    std::fs::write(src.join("sub/data.bin"), vec![0x5a; 40_000]).map_err(|e| e.to_string())?;
    Ok(src.to_str().unwrap().to_string())
}

/// Copies an image file built by a tool onto the start of the device.
fn dd_image(c: &Ctx, img: &str) -> Result<(), String> {
    run("dd", &[&format!("if={img}"), &format!("of={}", c.dev), "bs=1M", "conv=notrunc,fsync", "status=none"])
}

/// A plain file of `size` zero bytes (sparse) in the scratch directory.
fn zero_file(c: &Ctx, name: &str, size: u64) -> Result<String, String> {
    let path = c.file(name);
    std::fs::File::create(&path).and_then(|f| f.set_len(size)).map_err(|e| e.to_string())?;
    Ok(path)
}

fn key_file(c: &Ctx) -> Result<String, String> {
    let key = c.file("luks.key");
    std::fs::write(&key, "iocurve format matrix key").map_err(|e| e.to_string())?;
    Ok(key)
}

fn fs(
    name: &'static str,
    blkid: &'static str,
    size: u64,
    tools: &'static [&'static str],
    make: fn(&Ctx) -> Result<(), String>,
) -> Format {
    Format { name, blkid, size, tools, make }
}

/// parted always tells the kernel about the partitions it writes (an Apple map and an SGI
/// volume header have some even when empty), and partitions it adds to a loop device outlive
/// the loop device: so it writes the backing file, which the loop device reads.
fn parted(c: &Ctx, label: &str) -> Result<(), String> {
    run("parted", &["-s", c.backing, "mklabel", label])
}

/// The matrix. Sizes are the smallest round size each tool accepts (XFS wants 300 MiB,
/// btrfs more than 114 MiB).
fn formats() -> Vec<Format> {
    vec![
        // Linux filesystems.
        fs("ext2", "TYPE=ext2", 64 * MIB, &["mkfs.ext2"], |c| run("mkfs.ext2", &["-q", "-F", c.dev])),
        fs("ext3", "TYPE=ext3", 64 * MIB, &["mkfs.ext3"], |c| run("mkfs.ext3", &["-q", "-F", c.dev])),
        fs("ext4", "TYPE=ext4", 64 * MIB, &["mkfs.ext4"], |c| run("mkfs.ext4", &["-q", "-F", c.dev])),
        fs("ext4 external journal", "TYPE=jbd", 64 * MIB, &["mke2fs"], |c| {
            run("mke2fs", &["-q", "-F", "-O", "journal_dev", c.dev])
        }),
        fs("xfs", "TYPE=xfs", 320 * MIB, &["mkfs.xfs"], |c| run("mkfs.xfs", &["-q", "-f", c.dev])),
        fs("xfs external log", "TYPE=xfs_external_log", 64 * MIB, &["mkfs.xfs"], |c| {
            // The data section goes to a file; the device is the log.
            let data = c.file("xfs-data.img");
            run(
                "mkfs.xfs",
                &[
                    "-q",
                    "-f",
                    "-l",
                    &format!("logdev={},size=64m", c.dev),
                    "-d",
                    &format!("name={data},file=1,size=320m"),
                ],
            )
        }),
        fs("btrfs", "TYPE=btrfs", 128 * MIB, &["mkfs.btrfs"], |c| run("mkfs.btrfs", &["-q", "-f", c.dev])),
        fs("f2fs", "TYPE=f2fs", 64 * MIB, &["mkfs.f2fs"], |c| run("mkfs.f2fs", &["-q", "-f", c.dev])),
        fs("jfs", "TYPE=jfs", 64 * MIB, &["mkfs.jfs"], |c| run("mkfs.jfs", &["-q", c.dev])),
        fs("nilfs2", "TYPE=nilfs2", 64 * MIB, &["mkfs.nilfs2"], |c| {
            run("mkfs.nilfs2", &["-q", "-f", "-B", "16", c.dev]) // short segments: fits 64 MiB
        }),
        fs("reiserfs", "TYPE=reiserfs", 64 * MIB, &["mkfs.reiserfs"], |c| run("mkfs.reiserfs", &["-q", "-f", c.dev])),
        fs("gfs2", "TYPE=gfs2", 64 * MIB, &["mkfs.gfs2"], |c| run("mkfs.gfs2", &["-O", "-p", "lock_nolock", c.dev])),
        fs("ocfs2", "TYPE=ocfs2", 64 * MIB, &["mkfs.ocfs2"], |c| {
            run("mkfs.ocfs2", &["-q", "-F", "-M", "local", c.dev])
        }),
        fs("minix v1", "TYPE=minix", 64 * MIB, &["mkfs.minix"], |c| run("mkfs.minix", &["-1", c.dev])),
        fs("minix v2", "TYPE=minix", 64 * MIB, &["mkfs.minix"], |c| run("mkfs.minix", &["-2", c.dev])),
        fs("minix v3", "TYPE=minix", 64 * MIB, &["mkfs.minix"], |c| run("mkfs.minix", &["-3", c.dev])),
        fs("bfs", "TYPE=bfs", 64 * MIB, &["mkfs.bfs"], |c| run("mkfs.bfs", &[c.dev])),
        // Read-only image filesystems: built into a file, then copied onto the device.
        fs("cramfs", "TYPE=cramfs", 64 * MIB, &["mkfs.cramfs", "dd"], |c| {
            let img = c.file("cramfs.img");
            run("mkfs.cramfs", &[&source_tree(c)?, &img])?;
            dd_image(c, &img)
        }),
        fs("squashfs", "TYPE=squashfs", 64 * MIB, &["mksquashfs", "dd"], |c| {
            let img = c.file("squashfs.img");
            run("mksquashfs", &[&source_tree(c)?, &img, "-quiet", "-no-progress", "-noappend"])?;
            dd_image(c, &img)
        }),
        fs("erofs", "TYPE=erofs", 64 * MIB, &["mkfs.erofs", "dd"], |c| {
            let img = c.file("erofs.img");
            run("mkfs.erofs", &[&img, &source_tree(c)?])?;
            dd_image(c, &img)
        }),
        fs("romfs", "TYPE=romfs", 64 * MIB, &["genromfs", "dd"], |c| {
            let img = c.file("romfs.img");
            run("genromfs", &["-d", &source_tree(c)?, "-f", &img])?;
            dd_image(c, &img)
        }),
        fs("iso9660", "TYPE=iso9660", 64 * MIB, &["xorriso", "dd"], |c| {
            let img = c.file("image.iso");
            run("xorriso", &["-as", "mkisofs", "-quiet", "-o", &img, &source_tree(c)?])?;
            dd_image(c, &img)
        }),
        fs("udf", "TYPE=udf", 64 * MIB, &["mkudffs"], |c| run("mkudffs", &[c.dev])),
        // Other systems' filesystems.
        fs("FAT12", "TYPE=vfat", 64 * MIB, &["mkfs.vfat"], |c| run("mkfs.vfat", &["-F", "12", c.dev])),
        fs("FAT16", "TYPE=vfat", 64 * MIB, &["mkfs.vfat"], |c| run("mkfs.vfat", &["-F", "16", c.dev])),
        fs("FAT32", "TYPE=vfat", 64 * MIB, &["mkfs.vfat"], |c| run("mkfs.vfat", &["-F", "32", c.dev])),
        fs("exfat", "TYPE=exfat", 64 * MIB, &["mkfs.exfat"], |c| run("mkfs.exfat", &[c.dev])),
        fs("ntfs", "TYPE=ntfs", 64 * MIB, &["mkntfs"], |c| run("mkntfs", &["-F", "-Q", "-q", c.dev])),
        fs("hfs", "TYPE=hfs", 64 * MIB, &["hformat"], |c| {
            // hformat records the "mounted" volume in $HOME/.hcwd: keep that in the scratch dir.
            run_with("hformat", &[c.dev], "", &[("HOME", c.dir.to_str().unwrap())]).map(drop)
        }),
        // Swap, volume managers, caches, replication, encryption.
        fs("swap", "TYPE=swap", 64 * MIB, &["mkswap"], |c| run("mkswap", &[c.dev])),
        fs("LVM physical volume", "TYPE=LVM2_member", 64 * MIB, &["pvcreate"], |c| {
            run_with("pvcreate", &["-ff", "-y", c.dev], "", &[("LVM_SUPPRESS_FD_WARNINGS", "1")]).map(drop)
        }),
        fs("LUKS1", "TYPE=crypto_LUKS", 64 * MIB, &["cryptsetup"], |c| {
            let key = key_file(c)?;
            let fast = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"]; // a test, not a secret
            run("cryptsetup", &args(&["luksFormat", "--batch-mode", "--type", "luks1", c.dev, &key], &fast))
        }),
        fs("LUKS2", "TYPE=crypto_LUKS", 64 * MIB, &["cryptsetup"], |c| {
            let key = key_file(c)?;
            let fast = ["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
            run("cryptsetup", &args(&["luksFormat", "--batch-mode", "--type", "luks2", c.dev, &key], &fast))
        }),
        fs("dm-verity hash device", "TYPE=DM_verity_hash", 64 * MIB, &["veritysetup"], |c| {
            let data = zero_file(c, "verity-data.img", 16 * MIB)?;
            run("veritysetup", &["format", &data, c.dev])
        }),
        fs("bcache backing device", "TYPE=bcache", 64 * MIB, &["make-bcache"], |c| run("make-bcache", &["-B", c.dev])),
        fs("bcache cache device", "TYPE=bcache", 64 * MIB, &["make-bcache"], |c| run("make-bcache", &["-C", c.dev])),
        fs("DRBD 8 metadata", "TYPE=drbd", 64 * MIB, &["drbdmeta"], |c| {
            // Internal metadata at the end of the device; the minor only names the lock.
            run_with("drbdmeta", &["--force", "18", "v08", c.dev, "internal", "create-md"], "yes\nyes\n", &[]).map(drop)
        }),
        fs("DRBD 9 metadata", "TYPE=drbd", 64 * MIB, &["drbdmeta"], |c| {
            run_with("drbdmeta", &["--force", "19", "v09", c.dev, "internal", "create-md", "1"], "yes\nyes\n", &[])
                .map(drop)
        }),
        // Partition tables, written without telling the kernel: no partition devices appear (the
        // refusal must come from the signature), and none outlive the loop device.
        fs("MBR, one partition (sfdisk)", "PTTYPE=dos", 64 * MIB, &["sfdisk"], |c| {
            run_with("sfdisk", &["-q", "--no-reread", "--no-tell-kernel", c.dev], ",,L\n", &[]).map(drop)
        }),
        fs("MBR, no partition (sfdisk)", "PTTYPE=dos", 64 * MIB, &["sfdisk"], |c| {
            run_with("sfdisk", &["-q", "--no-reread", "--no-tell-kernel", c.dev], "label: dos\n", &[]).map(drop)
        }),
        fs("GPT, one partition (sfdisk)", "PTTYPE=gpt", 64 * MIB, &["sfdisk"], |c| {
            run_with("sfdisk", &["-q", "--no-reread", "--no-tell-kernel", c.dev], "label: gpt\n,,L\n", &[]).map(drop)
        }),
        fs("GPT, one partition (sgdisk)", "PTTYPE=gpt", 64 * MIB, &["sgdisk"], |c| {
            run("sgdisk", &["-n", "1:0:0", c.dev])
        }),
        fs("GPT, no partition (sgdisk)", "PTTYPE=gpt", 64 * MIB, &["sgdisk"], |c| run("sgdisk", &["-o", c.dev])),
        fs("Apple partition map (parted)", "PTTYPE=mac", 64 * MIB, &["parted"], |c| parted(c, "mac")),
        fs("Sun disk label (parted)", "PTTYPE=sun", 64 * MIB, &["parted"], |c| parted(c, "sun")),
        fs("SGI volume header (parted)", "PTTYPE=sgi", 64 * MIB, &["parted"], |c| parted(c, "dvh")),
    ]
}

/// What happened to one check of a row.
#[derive(Clone, Copy, PartialEq)]
enum Status {
    Ok,
    /// Wrong exit code or message, the device intact.
    Fail,
    /// The device was written to.
    Wrote,
    NotRun,
}

impl Status {
    fn cell(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Fail => "FAIL",
            Status::Wrote => "WROTE",
            Status::NotRun => "-",
        }
    }
}

struct RowResult {
    name: &'static str,
    blkid: &'static str,
    create: Status,
    write: Status,
    read: Status,
    precondition: Status,
    problems: Vec<String>,
    took: Duration,
}

impl RowResult {
    fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

fn is_program(name: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).chain(["/usr/sbin".into(), "/sbin".into()]).any(|d| {
        std::fs::metadata(d.join(name))
            .is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
    })
}

/// `blkid -p -o value -s TAG DEV` (low-level probe, no cache): empty when libblkid sees none.
fn blkid_tag(dev: &str, tag: &str) -> String {
    // blkid exits 2 when it finds nothing: not an error here.
    let o =
        Command::new("blkid").args(["-p", "-o", "value", "-s", tag, dev]).output().expect("blkid runs (util-linux)");
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The partition devices the kernel has for a loop device (`loop3p1`, …).
fn partition_devices(lo: &Loop) -> Vec<String> {
    let name = lo.dev.file_name().unwrap().to_str().unwrap();
    let Ok(entries) = std::fs::read_dir(format!("/sys/block/{name}")) else { return Vec::new() };
    let mut parts: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().join("partition").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    parts.sort();
    parts
}

/// Keeps a row's loop device free of partition devices: removes any the kernel still has for
/// it (left by an earlier user of the same loop number: they outlive `losetup -d`) when the row
/// starts, and any it has when the row ends.
struct NoPartitions<'a>(&'a Loop);

impl<'a> NoPartitions<'a> {
    fn new(lo: &'a Loop) -> NoPartitions<'a> {
        let guard = NoPartitions(lo);
        guard.clear();
        guard
    }

    fn clear(&self) {
        let name = self.0.dev.file_name().unwrap().to_str().unwrap();
        for p in partition_devices(self.0) {
            let nr = std::fs::read_to_string(format!("/sys/block/{name}/{p}/partition")).unwrap_or_default();
            let _ = Command::new("delpart").args([self.0.path(), nr.trim()]).output();
        }
    }
}

impl Drop for NoPartitions<'_> {
    fn drop(&mut self) {
        self.clear();
    }
}

fn excerpt(o: &Output) -> String {
    let text = format!("{}{}", stdout(o), stderr(o));
    let text = text.trim();
    let cut: String = text.chars().take(400).collect();
    if cut.len() < text.len() { format!("{cut}…") } else { cut }
}

/// Runs every check of one row and says what failed.
fn check(f: &Format) -> RowResult {
    let start = Instant::now();
    let mut r = RowResult {
        name: f.name,
        blkid: f.blkid,
        create: Status::NotRun,
        write: Status::NotRun,
        read: Status::NotRun,
        precondition: Status::NotRun,
        problems: Vec::new(),
        took: Duration::ZERO,
    };
    let missing: Vec<&str> = f.tools.iter().copied().filter(|t| !is_program(t)).collect();
    if !missing.is_empty() {
        r.create = Status::Fail;
        r.problems.push(format!("create: tool {missing:?} missing (scripts/test installs it)"));
        return r;
    }
    let lo = Loop::new(f.size, &[]);
    let _partitions = NoPartitions::new(&lo);
    let scratch = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap(); // iocurve's working directory (its results database)
    let dev = lo.path();
    let c = Ctx { dev, backing: lo.backing.to_str().unwrap(), dir: scratch.path() };
    if let Err(e) = (f.make)(&c) {
        r.create = Status::Fail;
        r.problems.push(format!("create: {e}"));
        return r;
    }
    sh("blockdev", &["--flushbufs", dev]); // a tool may have written the backing file
    let parts = partition_devices(&lo);
    if !parts.is_empty() {
        r.create = Status::Fail;
        r.problems.push(format!("create: the tool made the kernel add partitions {parts:?}"));
        return r;
    }
    let (tag, want) = f.blkid.split_once('=').unwrap();
    let seen = blkid_tag(dev, tag);
    if seen != want {
        r.create = Status::Fail;
        r.problems.push(format!(
            "create: blkid -p sees {tag}={seen:?} (TYPE={:?} PTTYPE={:?}), the row expects {want}",
            blkid_tag(dev, "TYPE"),
            blkid_tag(dev, "PTTYPE")
        ));
        return r;
    }
    r.create = Status::Ok;
    let original = sha256(Path::new(dev));
    let mut before = original.clone();

    // Runs `cmd`, checks its exit code (and for a refusal its message), then that the device is
    // unchanged; returns the check's status and records its problems.
    let mut step = |what: &str, cmd: Vec<&str>, refuse: bool| -> Status {
        let sectors = sectors_written(&lo);
        let o = iocurve(work.path(), &cmd);
        let mut bad = Vec::new();
        let err = stderr(&o);
        if err.contains("panicked") {
            bad.push(format!("panicked: {}", excerpt(&o)));
        }
        if refuse {
            if o.status.code() != Some(2) {
                bad.push(format!("exit code {:?}, expected 2: {}", o.status.code(), excerpt(&o)));
            } else {
                for needle in ["refusing to write", want] {
                    if !err.contains(needle) {
                        bad.push(format!("the refusal does not mention `{needle}`: {}", excerpt(&o)));
                    }
                }
            }
        } else if !o.status.success() {
            bad.push(format!("exit code {:?}, expected 0: {}", o.status.code(), excerpt(&o)));
        }
        let written = sectors_written(&lo) - sectors;
        if written != 0 {
            bad.push(format!("{written} sectors were written to the device"));
        }
        let after = sha256(Path::new(dev));
        let changed = after != before;
        if changed {
            bad.push(format!("the device's bytes changed (sha256 {before} → {after})"));
            before = after;
        }
        let status = if written != 0 || changed {
            Status::Wrote
        } else if bad.is_empty() {
            Status::Ok
        } else {
            Status::Fail
        };
        r.problems.extend(bad.into_iter().map(|b| format!("{what}: {b}")));
        status
    };
    let workload = |w| args(&["run", "--target", dev, "--workload", w, "--ramp", "1"], FAST);
    let write = step("write run", workload("backend-random-write-4k"), true);
    let read = step("read run", workload("backend-random-read-4k"), false);
    let precondition = step("precondition", vec!["precondition", dev, "--bs", "4k"], true);
    if before != original {
        r.problems.push(format!("the device is not what the tool left (sha256 {original} → {before})"));
    }
    r.write = write;
    r.read = read;
    r.precondition = precondition;
    r.took = start.elapsed();
    r
}

/// Runs a row, turning a panic (a loop device that cannot be set up, a helper's assertion)
/// into a failed row so that the other rows still report.
fn check_caught(f: &Format) -> RowResult {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(f))).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        RowResult {
            name: f.name,
            blkid: f.blkid,
            create: Status::Fail,
            write: Status::NotRun,
            read: Status::NotRun,
            precondition: Status::NotRun,
            problems: vec![format!("panicked: {msg}")],
            took: Duration::ZERO,
        }
    })
}

#[test]
fn every_format_libblkid_recognises_is_refused_and_left_intact() {
    iocurve_testkit::needs_root!();
    let formats = formats();
    let results: Mutex<Vec<Option<RowResult>>> = Mutex::new(formats.iter().map(|_| None).collect());
    let next = AtomicUsize::new(0);
    // A few rows at a time: most of a row's time is the read run's fixed timing.
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(f) = formats.get(i) else { break };
                    let r = check_caught(f);
                    results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
                }
            });
        }
    });
    let results: Vec<RowResult> = results.into_inner().unwrap().into_iter().map(Option::unwrap).collect();

    let failed = results.iter().filter(|r| !r.passed()).count();
    let mut report = format!(
        "format matrix: {} rows, {} passed, {failed} failed\n{:<32} {:<26} {:<7} {:<6} {:<6} {:<12} {}\n",
        results.len(),
        results.len() - failed,
        "format",
        "libblkid",
        "create",
        "write",
        "read",
        "precondition",
        "time"
    );
    for r in &results {
        report += &format!(
            "{:<32} {:<26} {:<7} {:<6} {:<6} {:<12} {:.1}s\n",
            r.name,
            r.blkid,
            r.create.cell(),
            r.write.cell(),
            r.read.cell(),
            r.precondition.cell(),
            r.took.as_secs_f64()
        );
    }
    if failed > 0 {
        report += "\nfailures:\n";
        for r in results.iter().filter(|r| !r.passed()) {
            for p in &r.problems {
                report += &format!("  {} ({}): {p}\n", r.name, r.blkid);
            }
        }
    }
    report += "\nWROTE: the device was written to; FAIL: wrong exit code or message, the device intact.\n";
    report += "\nnot covered (cannot be created on this machine):\n";
    for (what, why) in NOT_HERE {
        report += &format!("  {what}: {why}\n");
    }
    println!("{report}");
    assert_eq!(failed, 0, "{failed} of {} formats failed: see the table and the failures above", results.len());
}
