//! A block device whose faults a test switches at run time: real kernel errors and hangs below
//! iocurve (path loss, stuck storage, lost writes), where the kernel has no device-mapper.
//!
//! `FaultDev::start(size)` starts `iocurve-faultdev` (crates/faultdev: a FUSE filesystem serving
//! an image file as `disk`) in a temporary directory and puts a loop device on `disk`:
//!
//! ```text
//! let fd = FaultDev::start(64 << 20);
//! fd.set("stall");                       // pass, eio, eio-writes, eio-reads=FROM-TO, drop-writes, delay=MS, stall
//! let c = fd.wait_held(1);               // a request is held
//! fd.set("pass");                        // ... and now served
//! assert_eq!(fd.counters().failed, 0);
//! ```
//!
//! `set` returns once the daemon has switched: every request answered after that is answered
//! under the new mode (a request held by `stall` is served under the mode that ends the stall).
//! Dropping the `FaultDev` — also when the test panics — sets `pass`, detaches the loop device,
//! stops the daemon, unmounts and removes the directory. Should the test process die instead,
//! nothing stays either: the loop device is set up with autoclear and held open only by this
//! process, and the daemon exits when the pipe on its standard input closes.
//!
//! The binary is another package's, which `cargo test -p iocurve` does not build, so the first
//! `FaultDev` of a test process runs `cargo build -p iocurve-faultdev --target-dir
//! target/faultdev`: never a stale binary, a few seconds the first time (libc and the daemon),
//! tens of milliseconds after. Its own target directory, because the workspace's is locked for as
//! long as any other cargo builds in it. `IOCURVE_FAULTDEV=/path/to/binary` skips the build.

use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The daemon's counters and mode, as its control file shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub mode: String,
    /// Data requests answered with success (reads and writes that reached the image).
    pub served: u64,
    /// Data requests answered with an error.
    pub failed: u64,
    /// Writes (and flushes, discards) acknowledged but not performed.
    pub dropped: u64,
    /// Data requests received and not yet answered (held by `stall` or `delay`, or in service).
    pub held: u64,
}

pub struct FaultDev {
    dev: PathBuf,
    mount: PathBuf,
    image: PathBuf,
    /// The loop device, held open: it is set up with autoclear, so it goes when this closes.
    lo: Option<File>,
    daemon: Option<Child>,
    /// The daemon's standard input: it shuts down when this closes (or this process dies).
    lifeline: Option<ChildStdin>,
    dio: bool,
    dir: Option<tempfile::TempDir>,
    /// The image's size and the daemon's extra arguments, for [`FaultDev::restart`].
    size: u64,
    extra: Vec<String>,
}

// linux/loop.h
const LOOP_CLR_FD: libc::c_ulong = 0x4C01;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LO_FLAGS_AUTOCLEAR: u32 = 4;
const LO_FLAGS_DIRECT_IO: u32 = 16;

#[repr(C)]
struct LoopInfo64 {
    device: u64,
    inode: u64,
    rdevice: u64,
    offset: u64,
    sizelimit: u64,
    number: u32,
    encrypt_type: u32,
    encrypt_key_size: u32,
    flags: u32,
    file_name: [u8; 64],
    crypt_name: [u8; 64],
    encrypt_key: [u8; 32],
    init: [u64; 2],
}

#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

impl FaultDev {
    /// An image of `size` bytes (zeros) behind a FUSE file and a loop device, in mode `pass`.
    pub fn start(size: u64) -> FaultDev {
        Self::start_with(size, &[])
    }

    /// The same with a volatile write cache: writes reach the image only at a flush, and are
    /// lost when the daemon is killed ([`FaultDev::kill`]), as at a power cut.
    pub fn start_with_volatile_cache(size: u64) -> FaultDev {
        Self::start_with(size, &["--volatile-cache"])
    }

    fn start_with(size: u64, extra: &[&str]) -> FaultDev {
        let dir = tempfile::Builder::new().prefix("iocurve-faultdev-").tempdir().expect("a temporary directory");
        let (image, mount) = (dir.path().join("image"), dir.path().join("mnt"));
        let mut fd = FaultDev {
            dev: PathBuf::new(),
            mount,
            image,
            lo: None,
            lifeline: None,
            daemon: None,
            dio: false,
            dir: Some(dir),
            size,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        // From here on, Drop cleans up whatever was set up if a step below panics.
        fd.launch();
        fd
    }

    /// Starts the daemon on the image and puts a loop device on its disk.
    fn launch(&mut self) {
        let errors = self.dir.as_ref().expect("the directory").path().join("daemon.err");
        let mut daemon = Command::new(binary())
            .arg("--image")
            .arg(&self.image)
            .args(["--size", &self.size.to_string(), "--exit-with-stdin"])
            .args(&self.extra)
            .arg("--mount")
            .arg(&self.mount)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(File::create(&errors).unwrap())
            .spawn()
            .expect("iocurve-faultdev starts");
        self.lifeline = daemon.stdin.take();
        let stdout = daemon.stdout.take().unwrap();
        self.daemon = Some(daemon);
        let fd = self;
        let mut ready = String::new();
        BufReader::new(stdout).read_line(&mut ready).unwrap();
        assert!(
            ready.starts_with("ready "),
            "iocurve-faultdev did not mount (needs root and /dev/fuse): {}",
            std::fs::read_to_string(&errors).unwrap_or_default()
        );
        let (dev, lo) = attach_loop(&fd.mount.join("disk"));
        fd.dev = dev;
        fd.lo = Some(lo);
        let name = fd.dev.file_name().unwrap().to_str().unwrap().to_string();
        fd.dio = std::fs::read_to_string(format!("/sys/block/{name}/loop/dio")).is_ok_and(|s| s.trim() == "1");
    }

    /// After [`FaultDev::kill`] (a power cut): the storage comes back with what its image holds
    /// — a new daemon on the same image and mount, a new loop device on its disk (the same file:
    /// the same identity for `iocurve verify`).
    pub fn restart(&mut self) {
        assert!(self.daemon.is_none(), "restart follows kill");
        self.detach();
        if is_mounted(&self.mount) {
            let target = std::ffi::CString::new(self.mount.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: valid path.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
        self.launch();
    }

    /// Detaches the loop device and waits until it is gone.
    fn detach(&mut self) {
        if let Some(lo) = self.lo.take() {
            // SAFETY: ioctl without argument on an open loop device.
            unsafe { libc::ioctl(lo.as_raw_fd(), LOOP_CLR_FD) };
            drop(lo);
            // Autoclear finishes when the last opener closes: wait for it, so that the unmount
            // that follows finds the disk closed.
            let backing = format!("/sys/block/{}/loop/backing_file", self.dev.file_name().unwrap().to_string_lossy());
            let start = Instant::now();
            while Path::new(&backing).exists() && start.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(10));
            }
            if Path::new(&backing).exists() {
                eprintln!("faultdev: {} is still attached (held open by another process?)", self.dev.display());
            }
        }
    }

    /// The loop device, `/dev/loopN`.
    pub fn device(&self) -> &Path {
        &self.dev
    }

    /// The loop device as a string, for command lines.
    pub fn path(&self) -> &str {
        self.dev.to_str().unwrap()
    }

    /// The FUSE mount, holding `disk` (the loop device's backing file) and `ctl`.
    pub fn mount(&self) -> &Path {
        &self.mount
    }

    /// The image file: what really reached the "disk" (read it to check for lost writes).
    pub fn image(&self) -> &Path {
        &self.image
    }

    /// Whether the loop device does direct I/O on the FUSE file (it does on the kernels seen so
    /// far; without it the FUSE file's FOPEN_DIRECT_IO still sends every request to the daemon,
    /// but the loop device then serves one request at a time).
    pub fn dio(&self) -> bool {
        self.dio
    }

    /// Switches the mode: `pass`, `eio`, `eio-writes`, `eio-reads=FROM-TO`, `drop-writes`, `delay=MS` or
    /// `stall`.
    /// Panics on an unknown mode or a daemon that is gone.
    pub fn set(&self, mode: &str) {
        std::fs::write(self.mount.join("ctl"), mode).unwrap_or_else(|e| panic!("faultdev mode `{mode}`: {e}"));
    }

    pub fn counters(&self) -> Counters {
        let text = std::fs::read_to_string(self.mount.join("ctl")).expect("faultdev control file");
        let mut c = Counters::default();
        for field in text.split_whitespace() {
            let (key, value) = field.split_once('=').unwrap_or((field, ""));
            let n = || value.parse::<u64>().unwrap_or_else(|_| panic!("faultdev counter `{field}`"));
            match key {
                "mode" => c.mode = value.to_string(),
                "served" => c.served = n(),
                "failed" => c.failed = n(),
                "dropped" => c.dropped = n(),
                "held" => c.held = n(),
                _ => {}
            }
        }
        c
    }

    /// Waits (up to 10 s) until at least `n` requests are held, and returns the counters.
    pub fn wait_held(&self, n: u64) -> Counters {
        let start = Instant::now();
        loop {
            let c = self.counters();
            if c.held >= n {
                return c;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "{n} requests held expected within 10 s: {c:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops the daemon, as a storage path that goes away: held requests fail with EIO, and
    /// from then on every I/O on the loop device fails with EIO (the FUSE connection is gone).
    /// The loop device stays until the `FaultDev` is dropped.
    pub fn kill(&mut self) {
        self.lifeline.take();
        if let Some(mut daemon) = self.daemon.take() {
            stop(&mut daemon);
        }
    }
}

impl Drop for FaultDev {
    /// Never panics (it may run while a test unwinds); problems are printed.
    fn drop(&mut self) {
        // Held requests are released first: a thread of the test may wait for one, and the
        // loop device flushes on detach.
        if self.daemon.is_some() {
            let _ = std::fs::write(self.mount.join("ctl"), "pass");
        }
        self.detach();
        self.lifeline.take();
        if let Some(mut daemon) = self.daemon.take() {
            stop(&mut daemon);
        }
        // The daemon unmounts on its way out; after a crash of it the dead mount is removed here.
        if is_mounted(&self.mount) {
            let target = std::ffi::CString::new(self.mount.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: valid path.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
        drop(self.dir.take());
    }
}

/// SIGTERM, then SIGKILL after 10 s.
fn stop(daemon: &mut Child) {
    // SAFETY: signal to our own child, not yet reaped.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(_)) = daemon.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("faultdev: the daemon ignored SIGTERM for 10 s: killed");
    let _ = daemon.kill();
    let _ = daemon.wait();
}

fn is_mounted(dir: &Path) -> bool {
    let dir = dir.to_string_lossy();
    std::fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|m| m.lines().any(|l| l.split(' ').nth(4) == Some(dir.as_ref())))
}

/// A free loop device on `file`, with direct I/O and autoclear: set up with LOOP_CONFIGURE
/// rather than `losetup`, whose devices outlive a killed test.
fn attach_loop(file: &Path) -> (PathBuf, File) {
    let backing = File::options().read(true).write(true).open(file).expect("the FUSE disk opens");
    let control = File::options().read(true).write(true).open("/dev/loop-control").expect("/dev/loop-control (root)");
    let mut config = LoopConfig {
        fd: backing.as_raw_fd() as u32,
        block_size: 0,
        info: LoopInfo64 {
            device: 0,
            inode: 0,
            rdevice: 0,
            offset: 0,
            sizelimit: 0,
            number: 0,
            encrypt_type: 0,
            encrypt_key_size: 0,
            flags: LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO,
            file_name: [0; 64],
            crypt_name: [0; 64],
            encrypt_key: [0; 32],
            init: [0; 2],
        },
        reserved: [0; 8],
    };
    let name = file.as_os_str().as_encoded_bytes();
    let n = name.len().min(63);
    config.info.file_name[..n].copy_from_slice(&name[..n]);
    // Another process may take the free device between the two calls (EBUSY): ask again.
    for _ in 0..50 {
        // SAFETY: ioctl without argument.
        let number = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE) };
        assert!(number >= 0, "no free loop device: {}", io::Error::last_os_error());
        let dev = PathBuf::from(format!("/dev/loop{number}"));
        let Ok(lo) = File::options().read(true).write(true).open(&dev) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        // SAFETY: `config` is a valid loop_config that lives across the call.
        if unsafe { libc::ioctl(lo.as_raw_fd(), LOOP_CONFIGURE, &config) } == 0 {
            return (dev, lo);
        }
        let e = io::Error::last_os_error();
        assert_eq!(e.raw_os_error(), Some(libc::EBUSY), "LOOP_CONFIGURE {}: {e}", dev.display());
    }
    panic!("no loop device could be set up after 50 tries");
}

/// The `iocurve-faultdev` binary, built (or found up to date) once per test process.
fn binary() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(p) = std::env::var_os("IOCURVE_FAULTDEV") {
            return PathBuf::from(p);
        }
        // Its own target directory inside the workspace's (the one holding this test binary):
        // the workspace's is locked for as long as any other cargo builds in it, which made
        // tests wait minutes while another build ran.
        let exe = std::env::current_exe().unwrap();
        let target = exe
            .ancestors()
            .find(|d| d.join("CACHEDIR.TAG").exists())
            .map(Path::to_path_buf)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"))
            .join("faultdev");
        let bin = target.join("debug/iocurve-faultdev");
        let built = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "iocurve-faultdev", "--bin", "iocurve-faultdev", "--target-dir"])
            .arg(&target)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output();
        match built {
            Ok(o) if o.status.success() => {}
            // Without cargo (a test binary run by hand) an existing binary is good enough.
            Ok(o) if bin.exists() => {
                eprintln!("faultdev: building failed, using {}: {}", bin.display(), String::from_utf8_lossy(&o.stderr))
            }
            Err(e) if bin.exists() => eprintln!("faultdev: cargo did not run ({e}), using {}", bin.display()),
            Ok(o) => panic!("cargo build -p iocurve-faultdev failed: {}", String::from_utf8_lossy(&o.stderr)),
            Err(e) => panic!("cargo build -p iocurve-faultdev: {e}"),
        }
        bin
    })
    .clone()
}

/// A page-aligned buffer, as O_DIRECT needs.
struct Aligned {
    ptr: *mut u8,
    layout: Layout,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = Layout::from_size_align(len.max(1), 4096).unwrap();
        // SAFETY: the layout's size is above 0.
        let ptr = unsafe { alloc_zeroed(layout) };
        assert!(!ptr.is_null(), "allocation of {len} bytes");
        Aligned { ptr, layout }
    }

    fn slice(&mut self, len: usize) -> &mut [u8] {
        // SAFETY: `ptr` is valid for `layout.size()` ≥ `len` bytes, owned by `self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

fn open_direct(dev: &Path, write: bool) -> io::Result<File> {
    File::options().read(true).write(write).custom_flags(libc::O_DIRECT).open(dev)
}

/// Reads `len` bytes at `offset` with O_DIRECT (multiples of 512): straight from the device.
pub fn read_direct(dev: &Path, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    let f = open_direct(dev, false)?;
    let mut buf = Aligned::new(len);
    let n = f.read_at(buf.slice(len), offset)?;
    Ok(buf.slice(n).to_vec())
}

/// Writes `data` at `offset` with O_DIRECT (multiples of 512); returns the bytes acknowledged.
pub fn write_direct(dev: &Path, offset: u64, data: &[u8]) -> io::Result<usize> {
    let f = open_direct(dev, true)?;
    let mut buf = Aligned::new(data.len());
    buf.slice(data.len()).copy_from_slice(data);
    f.write_at(buf.slice(data.len()), offset)
}

/// Flushes the device's write cache (fsync: the loop device passes it on as a flush, the
/// daemon sees an fsync, a data request like any other).
pub fn flush(dev: &Path) -> io::Result<()> {
    File::options().write(true).open(dev)?.sync_all()
}

/// Reads `len` bytes at `offset` of a plain file (the image).
pub fn read_file(path: &Path, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    File::open(path).unwrap().read_exact_at(&mut buf, offset).unwrap();
    buf
}
