//! `iocurve-faultdev`: test support, not part of iocurve. A FUSE filesystem serving one image
//! file as `DIR/disk`, whose answers can be switched at any moment between pass-through, EIO,
//! dropped writes, added latency and a full stall. A loop device on `DIR/disk` turns these into
//! real kernel errors and hangs of a block device: the kernel here has no device-mapper
//! (dm-error, dm-flakey, dm-delay), so this is how the tests get faults below iocurve rather
//! than iocurve's own injection.
//!
//! ```text
//! iocurve-faultdev --image FILE [--size BYTES] --mount DIR [--mode MODE] [--workers N]
//! echo stall > DIR/ctl        # switch the mode (pass, eio, eio-writes, eio-reads=FROM-TO, drop-writes, delay=MS, stall)
//! cat DIR/ctl                 # mode=stall served=12 failed=0 dropped=0 held=1
//! ```
//!
//! Runs in the foreground; prints `ready DIR/disk` once mounted. SIGTERM or SIGINT answers held
//! requests with EIO, unmounts (lazily if a loop device still holds the disk) and exits 0.
//! Needs root: it mounts with mount(2) on /dev/fuse directly, without fusermount3 or libfuse.

mod device;
mod fuse;

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use device::{Device, Mode, Op};
use fuse::{CTL, DISK, ROOT, Request, op};

const USAGE: &str = "usage: iocurve-faultdev --image FILE [--size BYTES] --mount DIR [--mode MODE] [--workers N]
                        [--volatile-cache] [--exit-with-stdin]

Test support for iocurve: serves FILE as DIR/disk over FUSE (every read and write reaches this
process: FOPEN_DIRECT_IO). Put a loop device on it: losetup --find --show --direct-io=on DIR/disk

  --image FILE   the image; created with --size if missing
  --size BYTES   its size (suffixes K, M, G: powers of 1024); must match an existing image
  --mount DIR    where to mount (created if missing)
  --mode MODE    the mode to start in (default pass)
  --workers N    threads serving data requests (default 4)
  --volatile-cache
                 a volatile write cache: writes are acknowledged and kept in memory until a
                 flush (fsync) writes them to the image, and are lost when the daemon is killed
                 (what a power cut loses); `cat DIR/ctl` then shows the pages held (cached=N)
  --exit-with-stdin
                 also shut down (as on SIGTERM) when standard input reaches its end: a test
                 holding the other end of a pipe cannot leave the daemon behind, even if killed

Modes, written to DIR/ctl at any time (`echo stall > DIR/ctl`); `cat DIR/ctl` shows the mode and
the counters (served, failed, dropped, held):
  pass           reads and writes reach the image
  eio            every read, write and fsync fails with EIO
  eio-writes     writes (and fsync, discard) fail with EIO, reads pass
  eio-reads=FROM-TO
                 reads touching bytes FROM..TO of the image fail with EIO (bad sectors);
                 everything else passes
  drop-writes    writes are acknowledged with their full length but not written
  delay=MS       every request is answered MS milliseconds after it arrived
  stall          nothing is answered until the mode changes; then the held requests are served
                 under the new mode

SIGTERM/SIGINT: held requests fail with EIO, DIR is unmounted, exit 0.";

#[derive(Debug)]
struct Args {
    image: PathBuf,
    size: Option<u64>,
    mount: PathBuf,
    mode: Mode,
    workers: usize,
    volatile_cache: bool,
    exit_with_stdin: bool,
}

fn main() {
    let args = match parse_args(std::env::args().skip(1).collect()) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("iocurve-faultdev: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(args) {
        eprintln!("iocurve-faultdev: {e}");
        std::process::exit(1);
    }
}

fn parse_args(argv: Vec<String>) -> Result<Args, String> {
    let (mut image, mut size, mut mount, mut mode, mut workers) = (None, None, None, Mode::Pass, 4);
    let (mut exit_with_stdin, mut volatile_cache) = (false, false);
    let mut it = argv.into_iter();
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        if flag == "--exit-with-stdin" {
            exit_with_stdin = true;
            continue;
        }
        if flag == "--volatile-cache" {
            volatile_cache = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--image" => image = Some(PathBuf::from(value)),
            "--mount" => mount = Some(PathBuf::from(value)),
            "--size" => size = Some(parse_size(&value)?),
            "--mode" => mode = value.parse()?,
            "--workers" => {
                workers = value.parse().ok().filter(|&n| n > 0).ok_or("--workers: a number above 0")?;
            }
            _ => return Err(format!("unknown option `{flag}`")),
        }
    }
    Ok(Args {
        image: image.ok_or("--image is required")?,
        size,
        mount: mount.ok_or("--mount is required")?,
        mode,
        workers,
        volatile_cache,
        exit_with_stdin,
    })
}

fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let shift = match unit {
        "" => 0,
        "K" | "k" => 10,
        "M" => 20,
        "G" => 30,
        _ => return Err(format!("--size: `{s}` is not a size (bytes, or with K, M, G)")),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("--size: `{s}` is not a size above 0"))
}

fn run(args: Args) -> Result<(), String> {
    let image = open_image(&args.image, args.size)?;
    let size = image.metadata().map_err(|e| format!("{}: {e}", args.image.display()))?.len();
    std::fs::create_dir_all(&args.mount).map_err(|e| format!("{}: {e}", args.mount.display()))?;

    // Signals are taken by one thread with sigwait; blocked here, before any thread starts, so
    // that every thread inherits the mask and none is interrupted by them.
    let signals = signal_set();
    // SAFETY: `signals` is an initialised set.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut()) };

    let dev = File::options().read(true).write(true).open("/dev/fuse").map_err(|e| format!("/dev/fuse: {e}"))?;
    mount(&dev, &args.mount)?;
    let device = Device::new(fuse::Channel::new(dev), image, size, args.mode);
    let device = Arc::new(if args.volatile_cache { device.with_volatile_cache() } else { device });

    for _ in 0..args.workers {
        let d = device.clone();
        std::thread::spawn(move || d.work());
    }
    let d = device.clone();
    std::thread::spawn(move || session(&d));
    if args.exit_with_stdin {
        std::thread::spawn(|| {
            let mut buf = [0u8; 64];
            while matches!(std::io::Read::read(&mut std::io::stdin(), &mut buf), Ok(n) if n > 0) {}
            // SAFETY: plain system call; the main thread's sigwait takes it.
            unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
        });
    }

    println!("ready {}", args.mount.join("disk").display());
    let _ = std::io::stdout().flush();

    let mut sig = 0;
    // SAFETY: valid set and out-pointer.
    unsafe { libc::sigwait(&signals, &mut sig) };
    device.stop();
    unmount(&args.mount);
    std::process::exit(0);
}

fn open_image(path: &Path, size: Option<u64>) -> Result<File, String> {
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    match (File::options().read(true).write(true).open(path), size) {
        (Ok(f), None) => Ok(f),
        (Ok(f), Some(size)) => {
            let len = f.metadata().map_err(err)?.len();
            if len != size {
                return Err(format!("{}: the image has {len} bytes, not --size {size}", path.display()));
            }
            Ok(f)
        }
        (Err(e), Some(size)) if e.kind() == std::io::ErrorKind::NotFound => {
            let f = File::options().read(true).write(true).create_new(true).open(path).map_err(err)?;
            f.set_len(size).map_err(err)?;
            Ok(f)
        }
        (Err(e), None) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(format!("{}: no such image; give --size to create it", path.display()))
        }
        (Err(e), _) => Err(err(e)),
    }
}

fn signal_set() -> libc::sigset_t {
    // SAFETY: sigemptyset initialises the set before it is used.
    unsafe {
        let mut set = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn cstring(p: &Path) -> CString {
    CString::new(p.as_os_str().as_encoded_bytes()).expect("a path without NUL")
}

/// Mounts the FUSE connection `dev` at `dir` with mount(2), as root: `allow_other` so that any
/// process (udev, a test running as another user) may open the disk.
fn mount(dev: &File, dir: &Path) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    // SAFETY: plain getters.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let opts = CString::new(format!(
        "fd={},rootmode=40000,user_id={uid},group_id={gid},allow_other,default_permissions",
        dev.as_raw_fd()
    ))
    .unwrap();
    let target = cstring(dir);
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
    let r = unsafe {
        libc::mount(
            c"iocurve-faultdev".as_ptr(),
            target.as_ptr(),
            c"fuse.iocurve-faultdev".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOATIME,
            opts.as_ptr().cast(),
        )
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!("mount FUSE at {}: {e} (needs root and /dev/fuse: modprobe fuse)", dir.display()));
    }
    Ok(())
}

/// Unmounts `dir`. A loop device on the disk keeps it busy until detached (`losetup -d` has
/// closed the disk when it returns, but another process may still be closing it), so a busy
/// mount is retried for half a second before it is detached lazily: it then goes when the last
/// user closes the disk, and with this process gone their I/O fails (ENOTCONN, EIO through a
/// loop device) — a storage path lost.
fn unmount(dir: &Path) {
    let target = cstring(dir);
    for _ in 0..10 {
        // SAFETY: valid NUL-terminated path.
        if unsafe { libc::umount2(target.as_ptr(), 0) } == 0 {
            return;
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::EBUSY) => std::thread::sleep(Duration::from_millis(50)),
            // Not mounted any more (unmounted from outside): nothing to do.
            _ => return,
        }
    }
    eprintln!("iocurve-faultdev: {} is still in use (a loop device?): unmounted lazily", dir.display());
    // SAFETY: as above.
    unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
}

/// Reads requests until the connection ends, answering all but data requests on the disk at
/// once. The control file is served here, so it answers while data requests are held.
fn session(device: &Device) {
    let mut buf = vec![0u8; fuse::BUFFER];
    // Each open control file reads one snapshot of the status, so that a reader taking it in
    // small pieces (std's read_to_string starts with 32 bytes) never mixes two snapshots.
    let mut snapshots: HashMap<u64, Vec<u8>> = HashMap::new();
    let mut next_fh = 1;
    loop {
        let n = match device.chan.receive(&mut buf) {
            Ok(n) => n,
            // ENOENT: a request was interrupted before it was read; EINTR: a signal. Both harmless.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::EINTR | libc::EAGAIN)) => continue,
            Err(e) => {
                // ENODEV: unmounted from outside or the connection was aborted. Shut down as on
                // SIGTERM (the main thread waits for it), so there is one way out.
                if e.raw_os_error() != Some(libc::ENODEV) {
                    eprintln!("iocurve-faultdev: reading /dev/fuse: {e}");
                }
                // SAFETY: plain system call.
                unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
                return;
            }
        };
        let Some(req) = Request::parse(&buf[..n]) else {
            eprintln!("iocurve-faultdev: malformed request of {n} bytes");
            continue;
        };
        dispatch(device, &req, &mut snapshots, &mut next_fh);
    }
}

fn dispatch(device: &Device, req: &Request, snapshots: &mut HashMap<u64, Vec<u8>>, next_fh: &mut u64) {
    let chan = &device.chan;
    let (u, node) = (req.unique, req.nodeid);
    let size_of = |ino| if ino == DISK { device.size } else { 0 };
    let known = matches!(node, ROOT | DISK | CTL);
    match req.opcode {
        op::INIT => match fuse::init_reply(req) {
            Some(out) => chan.ok(u, &[&out]),
            None => chan.err(u, libc::EPROTO),
        },
        // No answer is expected to these.
        op::FORGET | op::BATCH_FORGET | op::INTERRUPT => {}
        op::LOOKUP => {
            let name = req.body.split(|&b| b == 0).next().unwrap_or_default();
            match (node, name) {
                (ROOT, b"disk") => chan.ok(u, &[&fuse::entry(DISK, device.size)]),
                (ROOT, b"ctl") => chan.ok(u, &[&fuse::entry(CTL, 0)]),
                _ => chan.err(u, libc::ENOENT),
            }
        }
        op::GETATTR if known => chan.ok(u, &[&fuse::attr_out(node, size_of(node))]),
        op::SETATTR if known => {
            // `echo mode > ctl` truncates first: fine. The disk's size is fixed.
            let (valid, size) = (req.u32(0), req.u64(16));
            if node == DISK && valid & fuse::FATTR_SIZE != 0 && size != device.size {
                chan.err(u, libc::EPERM);
            } else {
                chan.ok(u, &[&fuse::attr_out(node, size_of(node))]);
            }
        }
        op::OPEN => match node {
            DISK => chan.ok(u, &[&fuse::open_out(fuse::FOPEN_DIRECT_IO | fuse::FOPEN_PARALLEL_DIRECT_WRITES)]),
            CTL => {
                let fh = *next_fh;
                *next_fh += 1;
                snapshots.insert(fh, device.status().into_bytes());
                let mut out = fuse::open_out(fuse::FOPEN_DIRECT_IO);
                out[..8].copy_from_slice(&fh.to_ne_bytes());
                chan.ok(u, &[&out]);
            }
            _ => chan.err(u, libc::EISDIR),
        },
        op::OPENDIR if node == ROOT => chan.ok(u, &[&fuse::open_out(0)]),
        op::OPENDIR => chan.err(u, libc::ENOTDIR),
        op::READDIR if node == ROOT => chan.ok(u, &[&fuse::readdir(req.u64(8), req.u32(16) as usize)]),
        op::READ => {
            // fuse_read_in: fh, offset, size.
            let (fh, offset, size) = (req.u64(0), req.u64(8), req.u32(16));
            match node {
                DISK => device.submit(u, offset, Op::Read { size }),
                CTL => {
                    // Reading from the start takes a fresh snapshot.
                    if offset == 0 {
                        snapshots.insert(fh, device.status().into_bytes());
                    }
                    let text = snapshots.get(&fh).map(Vec::as_slice).unwrap_or_default();
                    let start = (offset as usize).min(text.len());
                    let end = (start + size as usize).min(text.len());
                    chan.ok(u, &[&text[start..end]]);
                }
                _ => chan.err(u, libc::EISDIR),
            }
        }
        op::WRITE => {
            // fuse_write_in: fh, offset, size, ... then the data at byte 40.
            let (offset, size) = (req.u64(8), req.u32(16) as usize);
            let data = req.body.get(40..40 + size).unwrap_or_default();
            match node {
                DISK => device.submit(u, offset, Op::Write { data: data.to_vec() }),
                CTL => match std::str::from_utf8(data).map_err(|e| e.to_string()).and_then(str::parse::<Mode>) {
                    Ok(mode) => {
                        device.set_mode(mode);
                        chan.ok(u, &[&fuse::write_out(size as u32)]);
                    }
                    Err(e) => {
                        eprintln!("iocurve-faultdev: {e}");
                        chan.err(u, libc::EINVAL);
                    }
                },
                _ => chan.err(u, libc::EISDIR),
            }
        }
        // The loop device's flushes (REQ_PREFLUSH, FUA) arrive as fsync: they are data requests.
        op::FSYNC if node == DISK => device.submit(u, 0, Op::Fsync),
        op::FALLOCATE if node == DISK => {
            // fuse_fallocate_in: fh, offset, length, mode.
            let (offset, len, mode) = (req.u64(8), req.u64(16), req.u32(24) as i32);
            device.submit(u, offset, Op::Fallocate { len, mode });
        }
        op::FALLOCATE => chan.err(u, libc::EOPNOTSUPP),
        op::RELEASE => {
            snapshots.remove(&req.u64(0));
            chan.ok(u, &[]);
        }
        op::FSYNC | op::FLUSH | op::RELEASEDIR | op::FSYNCDIR | op::ACCESS | op::DESTROY => chan.ok(u, &[]),
        op::STATFS => chan.ok(u, &[&fuse::statfs_out(device.size)]),
        op::GETATTR | op::SETATTR | op::READDIR => chan.err(u, libc::ENOENT),
        // Everything else (create, unlink, xattrs, locks, ioctl …): not offered. ENOSYS makes
        // the kernel stop asking for most of them.
        _ => chan.err(u, libc::ENOSYS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert!(parse_size("0").is_err());
        assert!(parse_size("12X").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn arguments_are_checked() {
        let argv = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let a = parse_args(argv("--image i --mount m --size 1M --mode delay=5")).unwrap();
        assert_eq!((a.size, a.mode, a.workers), (Some(1 << 20), Mode::Delay(Duration::from_millis(5)), 4));
        assert!(parse_args(argv("--image i")).unwrap_err().contains("--mount"));
        assert!(parse_args(argv("--image i --mount m --volatile-cache")).unwrap().volatile_cache);
        assert!(!parse_args(argv("--image i --mount m")).unwrap().volatile_cache);
        assert!(parse_args(argv("--image i --mount m --mode bogus")).unwrap_err().contains("unknown mode"));
        assert!(parse_args(argv("--image i --mount")).unwrap_err().contains("needs a value"));
    }
}
