//! The part of the kernel's FUSE protocol (`linux/fuse.h`, ABI 7.x) this device speaks, written
//! out by hand: requests are read whole from `/dev/fuse`, replies are written whole, both in the
//! host's byte order. A library would hide the one thing this device is about — when and how a
//! request is answered — so the few structures are encoded here directly.

use std::fs::File;
use std::io::{self, IoSlice, Write};
use std::os::fd::AsRawFd;

/// Node ids: the root directory is 1 by protocol; the two files are fixed.
pub const ROOT: u64 = 1;
pub const DISK: u64 = 2;
pub const CTL: u64 = 3;

/// Largest write the kernel may send in one request (without `FUSE_MAX_PAGES` the kernel's
/// default of 32 pages); reads are split the same way.
pub const MAX_WRITE: u32 = 128 * 1024;
/// A read buffer must hold the largest write and its headers (the kernel refuses smaller ones).
pub const BUFFER: usize = MAX_WRITE as usize + 4096;

pub const IN_HEADER: usize = 40;
const OUT_HEADER: usize = 16;

pub mod op {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const FLUSH: u32 = 25;
    pub const INIT: u32 = 26;
    pub const OPENDIR: u32 = 27;
    pub const READDIR: u32 = 28;
    pub const RELEASEDIR: u32 = 29;
    pub const FSYNCDIR: u32 = 30;
    pub const ACCESS: u32 = 34;
    pub const INTERRUPT: u32 = 36;
    pub const DESTROY: u32 = 38;
    pub const BATCH_FORGET: u32 = 42;
    pub const FALLOCATE: u32 = 43;
}

// INIT flags this device asks for (each only if the kernel offers it).
const ASYNC_READ: u32 = 1 << 0;
const BIG_WRITES: u32 = 1 << 5;
/// Asynchronous direct I/O (the loop device's `--direct-io` submits kiocbs): without it every
/// request of the loop device would wait for the previous one.
const ASYNC_DIO: u32 = 1 << 15;

/// Open flags: `DIRECT_IO` sends every read and write to the daemon, bypassing the page cache
/// (else cached pages would hide faults and dropped writes would reappear from memory);
/// `PARALLEL_DIRECT_WRITES` lets direct writes to the image overlap instead of queueing on
/// the inode lock.
pub const FOPEN_DIRECT_IO: u32 = 1 << 0;
pub const FOPEN_PARALLEL_DIRECT_WRITES: u32 = 1 << 6;

/// `fuse_setattr_in.valid`: the size is being set.
pub const FATTR_SIZE: u32 = 1 << 3;

/// One request as read from the device.
pub struct Request<'a> {
    pub opcode: u32,
    pub unique: u64,
    pub nodeid: u64,
    /// The request's own structure and any data after it.
    pub body: &'a [u8],
}

impl<'a> Request<'a> {
    pub fn parse(buf: &'a [u8]) -> Option<Request<'a>> {
        if buf.len() < IN_HEADER {
            return None;
        }
        let len = u32_at(buf, 0) as usize;
        if len < IN_HEADER || len > buf.len() {
            return None;
        }
        Some(Request {
            opcode: u32_at(buf, 4),
            unique: u64_at(buf, 8),
            nodeid: u64_at(buf, 16),
            body: &buf[IN_HEADER..len],
        })
    }

    /// The body's field at `off`, or 0 if a (malformed) request is too short: the kernel never
    /// sends one, and a zero makes the request harmless rather than crashing the daemon.
    pub fn u32(&self, off: usize) -> u32 {
        if self.body.len() >= off + 4 { u32_at(self.body, off) } else { 0 }
    }

    pub fn u64(&self, off: usize) -> u64 {
        if self.body.len() >= off + 8 { u64_at(self.body, off) } else { 0 }
    }
}

pub fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
}

pub fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
}

/// The device, shared by the thread that reads requests and the threads that answer them: a
/// reply is one `writev`, so replies from several threads never interleave.
pub struct Channel {
    dev: File,
}

impl Channel {
    pub fn new(dev: File) -> Channel {
        Channel { dev }
    }

    pub fn fd(&self) -> i32 {
        self.dev.as_raw_fd()
    }

    /// Reads one request into `buf`.
    pub fn receive(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: the buffer is valid for `buf.len()` bytes and owned by the caller.
        let n = unsafe { libc::read(self.fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
    }

    /// Answers request `unique` with success and `parts` as its payload.
    pub fn ok(&self, unique: u64, parts: &[&[u8]]) {
        self.send(unique, 0, parts);
    }

    /// Answers request `unique` with the error `errno` (positive, e.g. `libc::EIO`).
    pub fn err(&self, unique: u64, errno: i32) {
        self.send(unique, -errno, &[]);
    }

    fn send(&self, unique: u64, error: i32, parts: &[&[u8]]) {
        let len = OUT_HEADER + parts.iter().map(|p| p.len()).sum::<usize>();
        let mut header = [0u8; OUT_HEADER];
        header[0..4].copy_from_slice(&(len as u32).to_ne_bytes());
        header[4..8].copy_from_slice(&error.to_ne_bytes());
        header[8..16].copy_from_slice(&unique.to_ne_bytes());
        let mut slices = vec![IoSlice::new(&header)];
        slices.extend(parts.iter().map(|p| IoSlice::new(p)));
        // ENOENT: the request was interrupted or the connection aborted meanwhile; nobody waits
        // for the answer any more. Anything else would be a protocol error of ours: say so.
        match (&self.dev).write_vectored(&slices) {
            Ok(n) if n == len => {}
            Ok(n) => eprintln!("iocurve-faultdev: short reply ({n} of {len} bytes)"),
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => eprintln!("iocurve-faultdev: reply to request {unique} failed: {e}"),
        }
    }
}

/// Builds reply structures field by field.
#[derive(Default)]
pub struct Out(pub Vec<u8>);

impl Out {
    pub fn u16(mut self, v: u16) -> Out {
        self.0.extend_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn u32(mut self, v: u32) -> Out {
        self.0.extend_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn u64(mut self, v: u64) -> Out {
        self.0.extend_from_slice(&v.to_ne_bytes());
        self
    }
    pub fn zeros(mut self, n: usize) -> Out {
        self.0.resize(self.0.len() + n, 0);
        self
    }
}

/// The `INIT` answer: protocol 7.31 (every field used here exists since then), the features
/// above if offered, and the largest write.
pub fn init_reply(req: &Request) -> Option<Vec<u8>> {
    let (major, max_readahead, offered) = (req.u32(0), req.u32(8), req.u32(12));
    if major != 7 {
        return None;
    }
    let flags = offered & (ASYNC_READ | BIG_WRITES | ASYNC_DIO);
    let out = Out::default()
        .u32(7)
        .u32(31)
        .u32(max_readahead)
        .u32(flags)
        .u16(64) // max_background: held asynchronous requests must not starve the others
        .u16(48) // congestion_threshold
        .u32(MAX_WRITE)
        .u32(1) // time_gran
        .u16(0) // max_pages: only read with FUSE_MAX_PAGES
        .u16(0) // map_alignment
        .u32(0) // flags2
        .zeros(7 * 4); // unused
    debug_assert_eq!(out.0.len(), 64);
    Some(out.0)
}

/// `fuse_attr` of one of the three nodes.
pub fn attr(ino: u64, size: u64) -> Vec<u8> {
    let (mode, nlink) = match ino {
        ROOT => (libc::S_IFDIR | 0o755, 2),
        DISK => (libc::S_IFREG | 0o600, 1),
        _ => (libc::S_IFREG | 0o644, 1),
    };
    // SAFETY: plain getters without preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    Out::default()
        .u64(ino)
        .u64(size)
        .u64(size.div_ceil(512))
        .zeros(3 * 8 + 3 * 4) // atime, mtime, ctime and their nanoseconds: the epoch
        .u32(mode)
        .u32(nlink)
        .u32(uid)
        .u32(gid)
        .u32(0) // rdev
        .u32(4096) // blksize
        .u32(0) // flags
        .0
}

/// How long the kernel may keep an answer: the disk's size never changes, the control file's
/// attributes are not cached at all.
fn valid_s(ino: u64) -> u64 {
    if ino == CTL { 0 } else { 3600 }
}

/// `fuse_entry_out` for LOOKUP.
pub fn entry(ino: u64, size: u64) -> Vec<u8> {
    let mut out = Out::default().u64(ino).u64(0).u64(valid_s(ino)).u64(valid_s(ino)).u32(0).u32(0).0;
    out.extend(attr(ino, size));
    out
}

/// `fuse_attr_out` for GETATTR and SETATTR.
pub fn attr_out(ino: u64, size: u64) -> Vec<u8> {
    let mut out = Out::default().u64(valid_s(ino)).u32(0).u32(0).0;
    out.extend(attr(ino, size));
    out
}

/// `fuse_open_out`.
pub fn open_out(flags: u32) -> Vec<u8> {
    Out::default().u64(0).u32(flags).u32(0).0
}

/// `fuse_write_out`.
pub fn write_out(size: u32) -> Vec<u8> {
    Out::default().u32(size).u32(0).0
}

/// `fuse_statfs_out` (`fuse_kstatfs`): a filesystem as large as the image, and full.
pub fn statfs_out(size: u64) -> Vec<u8> {
    Out::default().u64(size / 4096).u64(0).u64(0).u64(2).u64(0).u32(4096).u32(255).u32(4096).u32(0).zeros(6 * 4).0
}

/// The root directory's listing from `offset` on, as `fuse_dirent`s that fit in `size` bytes.
pub fn readdir(offset: u64, size: usize) -> Vec<u8> {
    let entries: [(u64, &str, u32); 4] =
        [(ROOT, ".", libc::DT_DIR as u32), (ROOT, "..", libc::DT_DIR as u32), (DISK, "disk", 8), (CTL, "ctl", 8)];
    let mut out = Vec::new();
    for (i, (ino, name, kind)) in entries.iter().enumerate().skip(offset as usize) {
        let record = (24 + name.len()).next_multiple_of(8);
        if out.len() + record > size {
            break;
        }
        // `off` is the offset of the next entry: where a following READDIR resumes.
        let mut e = Out::default().u64(*ino).u64(i as u64 + 1).u32(name.len() as u32).u32(*kind).0;
        e.extend_from_slice(name.as_bytes());
        e.resize(record, 0);
        out.extend(e);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structures_have_the_kernels_sizes() {
        assert_eq!(attr(DISK, 1).len(), 88);
        assert_eq!(entry(DISK, 1).len(), 128);
        assert_eq!(attr_out(DISK, 1).len(), 104);
        assert_eq!(open_out(0).len(), 16);
        assert_eq!(statfs_out(1).len(), 80);
    }

    #[test]
    fn directory_listing_resumes_and_fits() {
        let all = readdir(0, 4096);
        assert_eq!(all.len(), 32 + 32 + 32 + 32);
        assert_eq!(&all[96 + 24..96 + 27], b"ctl");
        // Resuming at the offset the second entry names gives the rest.
        let next = u64_at(&all, 32 + 8);
        assert_eq!(readdir(next, 4096), all[64..]);
        // A buffer too small for the next entry ends the page.
        assert_eq!(readdir(0, 40).len(), 32);
    }

    #[test]
    fn init_answers_protocol_7_only() {
        let mut buf = vec![0u8; IN_HEADER + 64];
        let len = buf.len() as u32;
        buf[0..4].copy_from_slice(&len.to_ne_bytes());
        buf[IN_HEADER..IN_HEADER + 4].copy_from_slice(&7u32.to_ne_bytes());
        buf[IN_HEADER + 12..IN_HEADER + 16].copy_from_slice(&u32::MAX.to_ne_bytes());
        let reply = init_reply(&Request::parse(&buf).unwrap()).unwrap();
        assert_eq!(reply.len(), 64);
        assert_eq!(u32_at(&reply, 12), ASYNC_READ | BIG_WRITES | ASYNC_DIO);
        buf[IN_HEADER..IN_HEADER + 4].copy_from_slice(&8u32.to_ne_bytes());
        assert!(init_reply(&Request::parse(&buf).unwrap()).is_none());
    }
}
