//! Regression tests for the findings of issue 11, "Never write what the user did not permit".
//!
//! Each test is named after a finding and asserts on the protected bytes — the SHA-256 of the
//! device or file before and after (the `sha256sum` binary), the device's sectors-written
//! counter, `e2fsck -n`, or the file's own blocks — not only on the exit code and message.
//! They need root (loop devices, mount), as the project's machines provide.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// The write workload on `target`, with the fast timing and `extra` options.
fn write_run<'a>(target: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let base = ["run", "--target", target, "--workload", "backend-random-write-4k", "--ramp", "1"];
    args(&args(&base, FAST), extra)
}

/// A child process killed (and reaped) when the test ends, whether it passes or panics.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A mount point unmounted when the test ends, before its directory is removed.
struct Mounted<'a>(&'a str);

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).output();
    }
}

/// Counts the 4 KiB units of a file and those that are all zeros (never written); returns
/// (units, zero units, offset of the first zero unit).
fn zero_units(path: &Path) -> (u64, u64, Option<u64>) {
    let mut f = std::fs::File::open(path).unwrap();
    let mut chunk = Vec::with_capacity(8 << 20);
    let (mut units, mut zero, mut first) = (0u64, 0u64, None);
    loop {
        chunk.clear();
        (&mut f).take(8 << 20).read_to_end(&mut chunk).unwrap();
        if chunk.is_empty() {
            return (units, zero, first);
        }
        for unit in chunk.chunks(4096) {
            if unit.iter().fold(0u8, |a, b| a | b) == 0 {
                zero += 1;
                first.get_or_insert(units * 4096);
            }
            units += 1;
        }
    }
}

/// Everything iocurve printed, for messages that may go to either stream.
fn both(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

#[test]
fn allow_write_does_not_let_a_mounted_filesystem_be_written() {
    iocurve_testkit::needs_root!();
    let lo = Loop::new(64 << 20, &[]);
    // No lazy initialisation: the mounted filesystem itself must not write in the background,
    // so that the device's sectors-written counter only moves if iocurve writes.
    sh("mkfs.ext4", &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", lo.path()]);
    let mnt = tempfile::tempdir().unwrap();
    let mnt_path = mnt.path().to_str().unwrap();
    sh("mount", &["-o", "noatime", lo.path(), mnt_path]);
    let mounted = Mounted(mnt_path);
    sh("sync", &["-f", mnt_path]);
    let dir = tempfile::tempdir().unwrap();

    let before = sectors_written(&lo);
    let o = iocurve(dir.path(), &write_run(lo.path(), &["--allow-write", lo.path()]));
    let after = sectors_written(&lo);
    sh("umount", &[mnt_path]);
    drop(mounted);
    let fsck = Command::new("e2fsck").args(["-f", "-n", lo.path()]).output().unwrap();

    assert_eq!(after, before, "iocurve wrote {} sectors to the mounted filesystem:\n{}", after - before, stderr(&o));
    assert!(
        fsck.status.success(),
        "the filesystem is damaged: {}\niocurve said:\n{}",
        String::from_utf8_lossy(&fsck.stdout),
        stderr(&o)
    );
    input_error(&o, &["refusing to write", "mounted on", "--allow-write cannot override"]);
}

#[test]
fn allow_write_does_not_let_a_device_held_by_another_process_be_written() {
    iocurve_testkit::needs_root!();
    let lo = Loop::new(64 << 20, &[]);
    let script = format!(
        "import os,time; fd=os.open('{}', os.O_RDONLY|os.O_EXCL); print('held', os.getpid(), flush=True); time.sleep(60)",
        lo.path()
    );
    let mut holder =
        Killed(Command::new("python3").args(["-c", &script]).stdout(Stdio::piped()).spawn().expect("python3 runs"));
    let mut line = String::new();
    BufReader::new(holder.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let pid = line.strip_prefix("held ").map(str::trim).unwrap_or_else(|| panic!("the holder opened it: {line:?}"));
    let dir = tempfile::tempdir().unwrap();

    let before = sha256(&lo.dev);
    let o = iocurve(dir.path(), &write_run(lo.path(), &["--allow-write", lo.path()]));
    assert_eq!(sha256(&lo.dev), before, "the held device was written:\n{}", stderr(&o));
    input_error(&o, &["refusing to write", "held", pid, "--allow-write cannot override"]);
    assert!(holder.0.try_wait().unwrap().is_none(), "the holder still runs");
}

/// A device another process has open without claiming it (a VM's raw disk, a database on a
/// raw volume) carries no signature and no exclusive claim: it is refused unless named, and the
/// refusal names the process.
#[test]
fn a_device_another_process_has_open_is_refused_unless_named() {
    iocurve_testkit::needs_root!();
    let lo = Loop::new(64 << 20, &[]);
    let script = format!(
        "import os,time; fd=os.open('{}', os.O_RDWR); print('open', os.getpid(), flush=True); time.sleep(60)",
        lo.path()
    );
    let mut user =
        Killed(Command::new("python3").args(["-c", &script]).stdout(Stdio::piped()).spawn().expect("python3 runs"));
    let mut line = String::new();
    BufReader::new(user.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let pid = line.strip_prefix("open ").map(str::trim).unwrap_or_else(|| panic!("the user opened it: {line:?}"));
    let dir = tempfile::tempdir().unwrap();
    let before = sha256(&lo.dev);
    let o = iocurve(dir.path(), &write_run(lo.path(), &[]));
    assert_eq!(sha256(&lo.dev), before, "the device in use was written:\n{}", stderr(&o));
    input_error(&o, &["refusing to write", "it is open in pid", pid, &format!("--allow-write {}", lo.path())]);
    let o = iocurve(dir.path(), &write_run(lo.path(), &["--allow-write", lo.path()]));
    assert!(o.status.success(), "named exactly, it is written: {}", stderr(&o));
}

/// A file behind a mounted loop device is the filesystem's disk: never written, whatever
/// `--allow-write` says.
#[test]
fn a_file_backing_a_mounted_loop_device_is_never_written() {
    iocurve_testkit::needs_root!();
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    std::fs::File::create(&img).unwrap().set_len(64 << 20).unwrap();
    let img_s = img.to_str().unwrap();
    sh("mkfs.ext4", &["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", img_s]);
    let o = sh("losetup", &["--find", "--show", img_s]);
    let dev = String::from_utf8_lossy(&o.stdout).trim().to_string();
    struct Detach(String);
    impl Drop for Detach {
        fn drop(&mut self) {
            let _ = Command::new("losetup").args(["-d", &self.0]).output();
        }
    }
    let _detach = Detach(dev.clone());
    let mnt = tempfile::tempdir().unwrap();
    let mnt_s = mnt.path().to_str().unwrap().to_string();
    sh("mount", &["-o", "noatime", &dev, &mnt_s]);
    let _mounted = Mounted(&mnt_s);
    sh("sync", &["-f", &mnt_s]);
    let before = sha256(&img);
    let o = iocurve(dir.path(), &write_run(img_s, &["--allow-write", img_s]));
    assert_eq!(sha256(&img), before, "the mounted filesystem's image was written:\n{}", stderr(&o));
    input_error(
        &o,
        &["refusing to write", &format!("it backs loop device {dev}"), "mounted on", "--allow-write cannot override"],
    );
}

/// Runs a write workload on a new scratch file `s.dat` and, from the moment the file appears
/// until the run ends, keeps replacing `s.dat` with a symlink to `dev` (atomically: a symlink
/// made as `s.tmp`, renamed over `s.dat`, about every millisecond). Returns iocurve's
/// standard error and the number of swaps made.
fn swap_for_symlink_during_preparation(dir: &Path, dev: &Path) -> (String, u32) {
    let dat = dir.join("s.dat");
    let tmp = dir.join("s.tmp");
    let out = tempfile::tempdir().unwrap();
    let err = out.path().join("err");
    let mut child = Killed(
        Command::new(bin())
            .args(write_run("s.dat", &["--size", "512m"]))
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("iocurve runs"),
    );
    let start = Instant::now();
    while !std::fs::symlink_metadata(&dat).is_ok_and(|m| m.is_file()) {
        assert!(child.0.try_wait().unwrap().is_none(), "iocurve ended before creating s.dat");
        assert!(start.elapsed() < Duration::from_secs(10), "s.dat never appeared");
        std::thread::sleep(Duration::from_micros(200));
    }
    let mut swaps = 0;
    while child.0.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < Duration::from_secs(30), "iocurve did not finish");
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(dev, &tmp).unwrap();
        std::fs::rename(&tmp, &dat).unwrap();
        swaps += 1;
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(child);
    (std::fs::read_to_string(&err).unwrap(), swaps)
}

#[test]
fn a_scratch_file_swapped_for_a_symlink_during_preparation_is_not_followed() {
    iocurve_testkit::needs_root!();
    // A device with a filesystem, and a blank one: with no signature to recognise, only the
    // scratch file's identity stands between the workload and the device.
    let ext4 = Loop::new(64 << 20, &[]);
    sh("mkfs.ext4", &["-q", "-F", ext4.path()]);
    let blank = Loop::new(64 << 20, &[]);
    for lo in [&ext4, &blank] {
        let dir = tempfile::tempdir().unwrap();
        let before = sha256(&lo.dev);
        let (output, swaps) = swap_for_symlink_during_preparation(dir.path(), &lo.dev);
        assert!(swaps > 0, "s.dat was swapped while iocurve ran");
        assert!(!output.contains("panicked"), "no panic: {output}");
        assert_eq!(sha256(&lo.dev), before, "{} was written through the symlink ({swaps} swaps):\n{output}", lo.path());
        if lo.dev == ext4.dev {
            sh("e2fsck", &["-f", "-n", lo.path()]);
        }
        let link = std::fs::read_link(dir.path().join("s.dat"));
        assert_eq!(
            link.ok().as_deref(),
            Some(lo.dev.as_path()),
            "iocurve removed s.dat though it no longer named its own file:\n{output}"
        );
    }
}

#[test]
fn a_kept_scratch_file_turned_into_a_filesystem_is_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let w = write_run("s.dat", &["--size", "64m", "--keep"]);
    let o = iocurve(dir.path(), &w);
    assert!(o.status.success(), "{}", stderr(&o));
    let dat = dir.path().join("s.dat");
    sh("mkfs.ext4", &["-F", "-q", dat.to_str().unwrap()]);
    let before = sha256(&dat);

    let o = iocurve(dir.path(), &w);
    assert_eq!(sha256(&dat), before, "the filesystem made on the kept scratch file was written:\n{}", stderr(&o));
    sh("e2fsck", &["-f", "-n", dat.to_str().unwrap()]);
    input_error(&o, &["refusing to write", "ext4"]);
}

#[test]
fn a_scratch_file_resized_or_replaced_is_foreign() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for name in ["a.dat", "b.dat"] {
        let o = iocurve(d, &write_run(name, &["--size", "64m", "--keep"]));
        assert!(o.status.success(), "{}", stderr(&o));
    }

    // (a) Grown by someone else: no longer the file iocurve prepared.
    sh("truncate", &["-s", "+1M", d.join("a.dat").to_str().unwrap()]);
    let before = sha256(&d.join("a.dat"));
    let o = iocurve(d, &write_run("a.dat", &["--keep"]));
    assert_eq!(sha256(&d.join("a.dat")), before, "the resized scratch file was written:\n{}", stderr(&o));
    input_error(&o, &["refusing to write"]);

    // (b) Replaced by a copy (another inode), extended attributes and all.
    sh("cp", &["--preserve=xattr", d.join("b.dat").to_str().unwrap(), d.join("b2").to_str().unwrap()]);
    sh("mv", &[d.join("b2").to_str().unwrap(), d.join("b.dat").to_str().unwrap()]);
    let before = sha256(&d.join("b.dat"));
    let o = iocurve(d, &write_run("b.dat", &["--keep"]));
    assert_eq!(
        sha256(&d.join("b.dat")),
        before,
        "the copy put in the scratch file's place was written:\n{}",
        stderr(&o)
    );
    input_error(&o, &["refusing to write"]);
}

#[test]
fn a_scratch_file_left_by_a_killed_preparation_is_prepared_again_not_used_as_is() {
    let dir = tempfile::tempdir().unwrap();
    let dat = dir.path().join("s.dat");
    let mut child = Killed(
        Command::new(bin())
            .args(write_run("s.dat", &["--size", "2g", "--keep"]))
            .current_dir(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("iocurve runs"),
    );
    // Killed once the preparation has begun: the file exists with its size, and its first block
    // is written (or 200 ms have passed) while most of it is still zeros.
    let start = Instant::now();
    let sized = || std::fs::metadata(&dat).is_ok_and(|m| m.len() > 0);
    let head_written = || {
        let mut head = [0u8; 4096];
        std::fs::File::open(&dat).and_then(|mut f| f.read_exact(&mut head)).is_ok() && head.iter().any(|b| *b != 0)
    };
    while !sized() {
        assert!(child.0.try_wait().unwrap().is_none(), "iocurve ended before creating s.dat");
        assert!(start.elapsed() < Duration::from_secs(10), "s.dat never appeared");
        std::thread::sleep(Duration::from_micros(200));
    }
    let start = Instant::now();
    while !head_written() && start.elapsed() < Duration::from_millis(200) {
        std::thread::sleep(Duration::from_micros(200));
    }
    assert!(child.0.try_wait().unwrap().is_none(), "iocurve was still preparing s.dat when killed");
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    drop(child);

    // Without --size: the kept file at its own size (another --size would make it again, issue 36).
    let o = iocurve(dir.path(), &write_run("s.dat", &["--keep", "--allow-write", "s.dat"]));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        both(&o).to_lowercase().contains("prepar"),
        "says the file was left by an interrupted preparation:\n{}",
        both(&o)
    );
    let (units, zero, first_zero) = zero_units(&dat);
    assert!(units > 0, "s.dat is empty");
    assert!(
        zero == 0,
        "{zero} of {units} 4 KiB blocks of s.dat were never written (first at offset {first_zero:?}):\n{}",
        stderr(&o)
    );
}
