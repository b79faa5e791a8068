//! The fault device for tests (crates/faultdev, driven by `util::faultdev::FaultDev`): every
//! mode proven with real kernel I/O — O_DIRECT reads and writes on the loop device, errors as
//! the kernel returns them — so that tests built on it (path loss, stuck storage, lost writes)
//! can trust what it does.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use crate::util::faultdev::{FaultDev, flush, read_direct, read_file, write_direct};

const SIZE: u64 = 16 << 20;

/// 4 KiB that tell `tag` apart from any other tag and from zeros.
fn block(tag: u8) -> Vec<u8> {
    (0..4096u32).map(|i| (i % 251) as u8 ^ tag).collect()
}

fn errno<T: std::fmt::Debug>(r: io::Result<T>) -> i32 {
    r.expect_err("the kernel fails the I/O").raw_os_error().expect("an errno")
}

/// Runs `io` in a thread; its result and when it finished arrive on the channel.
fn in_thread<T: Send + 'static>(io: impl FnOnce() -> T + Send + 'static) -> Receiver<(T, Instant)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = io();
        let _ = tx.send((r, Instant::now()));
    });
    rx
}

fn still_blocked<T>(rx: &Receiver<T>) -> bool {
    matches!(rx.try_recv(), Err(mpsc::TryRecvError::Empty))
}

fn done<T>(rx: &Receiver<T>) -> T {
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(r) => r,
        Err(RecvTimeoutError::Timeout) => panic!("the I/O did not complete within 20 s"),
        Err(RecvTimeoutError::Disconnected) => panic!("the I/O thread panicked"),
    }
}

#[test]
fn pass_round_trips_data_through_the_loop_device() {
    iocurve_testkit::needs_root!();
    let fd = FaultDev::start(SIZE);
    assert!(fd.dio(), "the loop device does direct I/O on the FUSE file");
    let dev = fd.device();
    assert_eq!(write_direct(dev, 0, &block(1)).unwrap(), 4096);
    // Larger than one FUSE request (128 KiB): split by the kernel, all of it arrives.
    let big: Vec<u8> = (0..64).flat_map(|i| block(i + 10)).collect();
    assert_eq!(write_direct(dev, 1 << 20, &big).unwrap(), big.len());
    assert_eq!(read_direct(dev, 0, 4096).unwrap(), block(1));
    assert_eq!(read_direct(dev, 1 << 20, big.len()).unwrap(), big);
    // It really is on the image, and what the image has is what the device reads.
    assert_eq!(read_file(fd.image(), 0, 4096), block(1));
    assert_eq!(read_file(fd.image(), 1 << 20, big.len()), big);
    assert_eq!(read_direct(dev, SIZE - 4096, 4096).unwrap(), vec![0; 4096]);
    let c = fd.counters();
    assert_eq!((c.mode.as_str(), c.failed, c.dropped, c.held), ("pass", 0, 0, 0), "{c:?}");
    assert!(c.served >= 6, "two writes and three reads, the large ones split: {c:?}");
}

#[test]
fn eio_fails_reads_and_writes_with_eio_from_the_kernel() {
    iocurve_testkit::needs_root!();
    let fd = FaultDev::start(SIZE);
    let dev = fd.device();
    write_direct(dev, 0, &block(1)).unwrap();
    flush(dev).unwrap();
    fd.set("eio");
    assert_eq!(fd.counters().mode, "eio");
    assert_eq!(errno(read_direct(dev, 0, 4096)), libc::EIO);
    assert_eq!(errno(write_direct(dev, 0, &block(2))), libc::EIO);
    assert_eq!(errno(flush(dev)), libc::EIO);
    assert!(fd.counters().failed >= 3, "{:?}", fd.counters());
    fd.set("pass");
    assert_eq!(read_direct(dev, 0, 4096).unwrap(), block(1), "the failed write did not land");
}

#[test]
fn eio_writes_fails_only_writes() {
    iocurve_testkit::needs_root!();
    let fd = FaultDev::start(SIZE);
    let dev = fd.device();
    write_direct(dev, 4096, &block(1)).unwrap();
    fd.set("eio-writes");
    assert_eq!(read_direct(dev, 4096, 4096).unwrap(), block(1));
    assert_eq!(errno(write_direct(dev, 4096, &block(2))), libc::EIO);
    assert_eq!(errno(flush(dev)), libc::EIO, "a flush is a write");
    assert_eq!(read_direct(dev, 4096, 4096).unwrap(), block(1));
    assert_eq!(read_file(fd.image(), 4096, 4096), block(1));
}

/// The volatile write cache (issue 36, part 8): what the device acknowledged is read back, but
/// reaches the image only at a flush (the loop device passes fsync on); a kill loses what was
/// not flushed, as a power cut does.
#[test]
fn a_volatile_cache_loses_what_was_not_flushed_when_killed() {
    iocurve_testkit::needs_root!();
    let mut fd = FaultDev::start_with_volatile_cache(SIZE);
    let dev = fd.device().to_path_buf();
    assert_eq!(write_direct(&dev, 8192, &block(1)).unwrap(), 4096);
    assert_eq!(read_direct(&dev, 8192, 4096).unwrap(), block(1), "acknowledged and read back");
    assert_eq!(read_file(fd.image(), 8192, 4096), vec![0; 4096], "not on the image yet");
    flush(&dev).unwrap();
    assert_eq!(read_file(fd.image(), 8192, 4096), block(1), "a flush writes it");
    assert_eq!(write_direct(&dev, 8192, &block(2)).unwrap(), 4096);
    assert_eq!(read_direct(&dev, 8192, 4096).unwrap(), block(2));
    fd.kill();
    assert_eq!(read_file(fd.image(), 8192, 4096), block(1), "the unflushed write went with the daemon");
}

#[test]
fn drop_writes_acknowledges_writes_that_never_land() {
    iocurve_testkit::needs_root!();
    let fd = FaultDev::start(SIZE);
    let dev = fd.device();
    write_direct(dev, 8192, &block(1)).unwrap();
    fd.set("drop-writes");
    assert_eq!(write_direct(dev, 8192, &block(2)).unwrap(), 4096, "the write is acknowledged in full");
    assert_eq!(read_direct(dev, 8192, 4096).unwrap(), block(1), "and lost");
    let c = fd.counters();
    assert!(c.dropped >= 1 && c.failed == 0, "{c:?}");
    fd.set("pass");
    assert_eq!(read_direct(dev, 8192, 4096).unwrap(), block(1));
    assert_eq!(read_file(fd.image(), 8192, 4096), block(1));
}

#[test]
fn delay_adds_latency_to_every_request() {
    iocurve_testkit::needs_root!();
    let fd = FaultDev::start(SIZE);
    let dev = fd.device();
    fd.set("delay=200");
    let t = Instant::now();
    read_direct(dev, 0, 4096).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(200), "a delayed read took {:?}", t.elapsed());
    let t = Instant::now();
    write_direct(dev, 0, &block(1)).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(200), "a delayed write took {:?}", t.elapsed());
    fd.set("pass");
    assert_eq!(read_direct(dev, 0, 4096).unwrap(), block(1), "a delayed write lands");
}

#[test]
fn stall_holds_a_read_until_pass() {
    iocurve_testkit::needs_root!();
    let fd = FaultDev::start(SIZE);
    let dev = fd.device().to_path_buf();
    write_direct(&dev, 0, &block(3)).unwrap();
    fd.set("stall");
    let rx = in_thread(move || read_direct(&dev, 0, 4096));
    let c = fd.wait_held(1);
    assert_eq!(c.mode, "stall");
    std::thread::sleep(Duration::from_millis(300));
    assert!(still_blocked(&rx), "a stalled read stays blocked");
    assert!(fd.counters().held >= 1);
    let released = Instant::now();
    fd.set("pass");
    let (data, at) = done(&rx);
    assert_eq!(data.unwrap(), block(3));
    assert!(at >= released);
    assert_eq!(fd.counters().held, 0);
}

#[test]
fn a_held_request_is_served_under_the_mode_that_ends_the_stall() {
    iocurve_testkit::needs_root!();
    let fd = FaultDev::start(SIZE);
    let dev = fd.device().to_path_buf();
    write_direct(&dev, 0, &block(1)).unwrap();
    let read = |dev: &Path| {
        let dev = dev.to_path_buf();
        in_thread(move || read_direct(&dev, 0, 4096))
    };

    // stall → eio: the held read fails.
    fd.set("stall");
    let rx = read(&dev);
    fd.wait_held(1);
    fd.set("eio");
    assert_eq!(errno(done(&rx).0), libc::EIO);

    // stall → drop-writes: the held write is acknowledged and lost.
    fd.set("stall");
    let d = dev.clone();
    let rx = in_thread(move || write_direct(&d, 0, &block(2)));
    fd.wait_held(1);
    fd.set("drop-writes");
    assert_eq!(done(&rx).0.unwrap(), 4096);
    fd.set("pass");
    assert_eq!(read_direct(&dev, 0, 4096).unwrap(), block(1));

    // stall → stall (a second switch keeps holding) → delay=300: the delay counts from the switch.
    fd.set("stall");
    let rx = read(&dev);
    fd.wait_held(1);
    fd.set("stall");
    std::thread::sleep(Duration::from_millis(100));
    assert!(still_blocked(&rx));
    let switched = Instant::now();
    fd.set("delay=300");
    let (data, at) = done(&rx);
    assert_eq!(data.unwrap(), block(1));
    assert!(at.duration_since(switched) >= Duration::from_millis(300), "served {:?} after the switch", at - switched);

    // stall → eio-writes: a held write fails, a held read passes.
    fd.set("stall");
    let d = dev.clone();
    let w = in_thread(move || write_direct(&d, 0, &block(3)));
    let r = read(&dev);
    fd.wait_held(2);
    fd.set("eio-writes");
    assert_eq!(errno(done(&w).0), libc::EIO);
    assert_eq!(done(&r).0.unwrap(), block(1));
}

#[test]
fn killing_the_daemon_is_path_loss() {
    iocurve_testkit::needs_root!();
    let mut fd = FaultDev::start(SIZE);
    let dev = fd.device().to_path_buf();
    write_direct(&dev, 0, &block(1)).unwrap();
    fd.set("stall");
    let d = dev.clone();
    let rx = in_thread(move || read_direct(&d, 0, 4096));
    fd.wait_held(1);
    let (name, mount) = names(&fd);
    fd.kill();
    assert_eq!(errno(done(&rx).0), libc::EIO, "the held read fails when the daemon goes");
    assert_eq!(errno(read_direct(&dev, 0, 4096)), libc::EIO);
    assert_eq!(errno(write_direct(&dev, 0, &block(2))), libc::EIO);
    drop(fd);
    assert_gone(&name, &mount);
}

/// The loop device's name and the mount point of a `FaultDev`.
fn names(fd: &FaultDev) -> (String, PathBuf) {
    let name = fd.device().file_name().unwrap().to_str().unwrap().to_string();
    let backing = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).unwrap();
    assert_eq!(Path::new(backing.trim()), fd.mount().join("disk"));
    (name, fd.mount().to_path_buf())
}

fn assert_gone(name: &str, mount: &Path) {
    // Detached from this device's disk. (Another test running beside this one may have taken
    // the freed loop device already: its name alone says nothing.)
    let backing = std::fs::read_to_string(format!("/sys/block/{name}/loop/backing_file")).unwrap_or_default();
    assert!(Path::new(backing.trim()) != mount.join("disk"), "{name} is detached");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(mount.to_str().unwrap()), "{} is unmounted", mount.display());
    assert!(!mount.parent().unwrap().exists(), "the temporary directory is removed");
}

#[test]
fn a_panicking_test_leaves_no_loop_device_or_mount_even_while_stalled() {
    iocurve_testkit::needs_root!();
    let seen = std::sync::Mutex::new(None);
    let reader = std::sync::Mutex::new(None);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let fd = FaultDev::start(SIZE);
        *seen.lock().unwrap() = Some(names(&fd));
        fd.set("stall");
        let dev = fd.device().to_path_buf();
        *reader.lock().unwrap() = Some(in_thread(move || read_direct(&dev, 0, 4096)));
        fd.wait_held(1);
        panic!("a test fails while a request is held");
    }));
    assert!(result.is_err());
    let (name, mount) = seen.into_inner().unwrap().unwrap();
    assert_gone(&name, &mount);
    // The held read was released (served under `pass`) before the device went.
    let rx = reader.into_inner().unwrap().unwrap();
    assert_eq!(done(&rx).0.unwrap(), vec![0; 4096]);
}
