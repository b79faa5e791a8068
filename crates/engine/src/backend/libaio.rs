//! The libaio back-end: Linux's native asynchronous I/O (io_setup, io_submit, io_getevents), one
//! context per I/O thread with many workers' I/Os in flight on it — fio's `ioengine=libaio`,
//! and the engine left where a policy disables io_uring. It calls the kernel directly (no
//! libaio.so): the library is a thin wrapper around these five system calls.
//!
//! The kernel's AIO is asynchronous only for O_DIRECT: a buffered I/O is done inside io_submit
//! before it returns, as it is for fio.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::{Completion, IoEngine};
use crate::ops::IoOp;

/// `struct iocb` of <linux/aio_abi.h> (64 bytes; the key/flags order is little-endian's).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Iocb {
    data: u64,
    #[cfg(target_endian = "little")]
    key: u32,
    rw_flags: i32,
    #[cfg(target_endian = "big")]
    key: u32,
    lio_opcode: u16,
    reqprio: i16,
    fildes: u32,
    buf: u64,
    nbytes: u64,
    offset: i64,
    reserved2: u64,
    flags: u32,
    resfd: u32,
}

/// `struct io_event` of <linux/aio_abi.h>.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct IoEvent {
    data: u64,
    obj: u64,
    res: i64,
    res2: i64,
}

const IOCB_CMD_PREAD: u16 = 0;
const IOCB_CMD_PWRITE: u16 = 1;

/// Checks that native AIO can be used here (not disabled by fs.aio-max-nr or a seccomp policy
/// that lets contexts be made but no I/O through them): one read of /dev/null goes through a
/// context of its own.
pub fn probe_libaio() -> Result<(), String> {
    let null = std::fs::File::open("/dev/null").map_err(|e| format!("cannot open /dev/null: {e}"))?;
    let mut b = LibaioBackend::new(1, vec![std::os::fd::AsRawFd::as_raw_fd(&null)]).map_err(|e| e.to_string())?;
    let mut buf = [0u8; 512];
    b.queue(0, &IoOp { target: 0, offset: 0, len: 512, dir: crate::ops::Dir::Read }, buf.as_mut_ptr())
        .map_err(|e| e.to_string())?;
    let mut done = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while done.is_empty() && std::time::Instant::now() < deadline {
        b.submit_and_wait(Duration::from_millis(100)).map_err(|e| e.to_string())?;
        b.reap(&mut done);
    }
    match done.first() {
        Some(&(_, r)) if r >= 0 => Ok(()),
        Some(&(_, r)) => Err(io::Error::from_raw_os_error(-r).to_string()),
        None => Err("a read of /dev/null did not complete within 2 s".into()),
    }
}

/// Room for `events` more asynchronous I/O events under the kernel's limit (each context
/// counts its slots against `fs.aio-max-nr`): None when there is, else what the limit is.
pub fn aio_room_short(events: u64) -> Option<String> {
    let read = |f: &str| std::fs::read_to_string(f).ok()?.trim().parse::<u64>().ok();
    let (max, used) = (read("/proc/sys/fs/aio-max-nr")?, read("/proc/sys/fs/aio-nr")?);
    (used.saturating_add(events) > max).then(|| format!("fs.aio-max-nr = {max}, {used} in use"))
}

pub struct LibaioBackend {
    ctx: libc::c_ulong,
    fds: Vec<RawFd>,
    /// One control block per slot: the kernel keeps its address until the I/O completes.
    iocbs: Box<[Iocb]>,
    /// Queued control blocks not yet handed to the kernel.
    queued: Vec<*mut Iocb>,
    events: Vec<IoEvent>,
    /// Completions taken from the kernel (or refused at submission) not yet reaped.
    ready: Vec<Completion>,
    /// I/Os the kernel has and has not completed yet.
    in_flight: usize,
    /// Per descriptor: a block device (trims discard) or a file (trims punch holes).
    block: Vec<bool>,
}

// SAFETY: the context and the control blocks belong to the owning I/O thread; the raw
// pointers point into this value's own `iocbs` and the thread's buffer pool.
unsafe impl Send for LibaioBackend {}

impl LibaioBackend {
    /// A context for `slots` I/Os in flight on `fds`.
    pub fn new(slots: usize, fds: Vec<RawFd>) -> io::Result<Self> {
        let slots = slots.max(1);
        let mut ctx: libc::c_ulong = 0;
        // SAFETY: io_setup writes the new context's id to `ctx`, a live local.
        let r = unsafe { libc::syscall(libc::SYS_io_setup, slots as libc::c_long, &mut ctx as *mut libc::c_ulong) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EAGAIN) {
                let read = |f: &str| std::fs::read_to_string(f).map(|s| s.trim().to_string()).unwrap_or("?".into());
                return Err(io::Error::other(format!(
                    "the kernel's limit of asynchronous I/O events (fs.aio-max-nr = {}, {} in use) leaves no room for {slots} more: raise it (sysctl fs.aio-max-nr=…), or use io_uring",
                    read("/proc/sys/fs/aio-max-nr"),
                    read("/proc/sys/fs/aio-nr"),
                )));
            }
            return Err(e);
        }
        Ok(Self {
            ctx,
            block: super::block_devices(&fds),
            fds,
            iocbs: vec![Iocb::default(); slots].into_boxed_slice(),
            queued: Vec::with_capacity(slots),
            events: vec![IoEvent::default(); slots],
            ready: Vec::with_capacity(slots),
            in_flight: 0,
        })
    }

    /// Hands the queued control blocks to the kernel. One the kernel refuses at submission
    /// completes at once with its error, as a failed I/O.
    fn submit(&mut self) -> io::Result<()> {
        while !self.queued.is_empty() {
            // SAFETY: each pointer is a control block in `self.iocbs`, filled by `queue`, whose
            // buffer stays valid until the I/O completes (the worker's contract).
            let r = unsafe {
                libc::syscall(
                    libc::SYS_io_submit,
                    self.ctx,
                    self.queued.len() as libc::c_long,
                    self.queued.as_mut_ptr(),
                )
            };
            if r > 0 {
                self.queued.drain(..r as usize);
                self.in_flight += r as usize;
                continue;
            }
            match io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) {
                // Out of resources for now: what is in flight completes first.
                libc::EINTR => continue,
                libc::EAGAIN => return Ok(()),
                // The first control block is refused (a descriptor not open, a buffer
                // misaligned for O_DIRECT): that I/O fails, counted as such; the rest go on.
                errno => {
                    let cb = self.queued.remove(0);
                    // SAFETY: `cb` points into `self.iocbs` (see above).
                    self.ready.push((unsafe { (*cb).data } as u32, -errno));
                }
            }
        }
        Ok(())
    }

    /// Takes completions from the kernel: at least `min` of them, waiting at most `timeout`.
    fn get_events(&mut self, min: usize, timeout: Duration) -> io::Result<()> {
        let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as _ };
        // SAFETY: `events` has room for `events.len()` completions; `ts` lives across the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_io_getevents,
                self.ctx,
                min as libc::c_long,
                self.events.len() as libc::c_long,
                self.events.as_mut_ptr(),
                &ts as *const libc::timespec,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::EINTR) { Ok(()) } else { Err(e) };
        }
        for ev in &self.events[..r as usize] {
            self.ready.push((ev.data as u32, ev.res as i32));
        }
        self.in_flight = self.in_flight.saturating_sub(r as usize);
        Ok(())
    }
}

impl Drop for LibaioBackend {
    fn drop(&mut self) {
        // Completions that came since the last reap.
        let _ = self.get_events(0, Duration::ZERO);
        let ctx = self.ctx;
        // SAFETY: `ctx` is this back-end's context, destroyed once; io_destroy waits for what
        // is still in flight (the step forgot, not freed, the buffers of stuck I/Os).
        let destroy = move || unsafe { libc::syscall(libc::SYS_io_destroy, ctx) };
        if self.in_flight == 0 {
            destroy();
            return;
        }
        // A step ends with I/Os still in a device that stopped answering (stuck): its thread
        // must not wait for them, but the context's slots count against fs.aio-max-nr until it
        // is destroyed — by a thread of its own, once the device answers.
        if std::thread::Builder::new().name("iocurve-aio-end".into()).spawn(destroy).is_err() {
            tracing::warn!("a native AIO context with stuck I/Os is left to the process's end");
        }
    }
}

impl IoEngine for LibaioBackend {
    #[inline]
    fn queue(&mut self, slot: u32, op: &IoOp, buf: *mut u8) -> io::Result<()> {
        if op.is_trim() {
            // Linux AIO has no trim: a blocking call here, its completion ready at once (the
            // I/Os in flight go on meanwhile; none is issued until it returns).
            let fd = self.fds[op.target as usize];
            self.ready.push((slot, super::trim_blocking(fd, self.block[op.target as usize], op.offset, op.len)));
            return Ok(());
        }
        let cb = &mut self.iocbs[slot as usize];
        *cb = Iocb {
            data: slot as u64,
            lio_opcode: if op.is_write() { IOCB_CMD_PWRITE } else { IOCB_CMD_PREAD },
            fildes: self.fds[op.target as usize] as u32,
            buf: buf as u64,
            nbytes: op.len as u64,
            offset: op.offset as i64,
            ..Iocb::default()
        };
        self.queued.push(cb);
        Ok(())
    }

    fn submit_and_wait(&mut self, timeout: Duration) -> io::Result<()> {
        self.submit()?;
        if !self.ready.is_empty() {
            return self.get_events(0, Duration::ZERO);
        }
        if self.in_flight == 0 && !self.queued.is_empty() {
            // The kernel had no room (EAGAIN) and nothing is out to wait for: try again soon,
            // not at the timeout.
            std::thread::sleep(timeout.min(Duration::from_millis(1)));
            return Ok(());
        }
        self.get_events(1, timeout)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.submit()
    }

    fn reap(&mut self, out: &mut Vec<Completion>) {
        out.append(&mut self.ready);
    }

    fn cancel(&mut self, slot: u32) -> io::Result<()> {
        let mut ev = IoEvent::default();
        let cb: *mut Iocb = &mut self.iocbs[slot as usize];
        // SAFETY: `cb` is the slot's control block, submitted earlier; `ev` is a live local.
        // Most files cannot cancel (EINVAL): the I/O completes when the device answers. Newer
        // kernels deliver a cancelled I/O's completion through the ring (EINPROGRESS); older
        // ones hand it back here.
        let r = unsafe { libc::syscall(libc::SYS_io_cancel, self.ctx, cb, &mut ev as *mut IoEvent) };
        if r == 0 && self.in_flight > 0 {
            self.in_flight -= 1;
            self.ready.push((ev.data as u32, ev.res as i32));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn the_control_blocks_match_the_kernels_layout() {
        assert_eq!(std::mem::size_of::<Iocb>(), 64);
        assert_eq!(std::mem::size_of::<IoEvent>(), 32);
    }

    /// Writes and reads back through a real context: what was written is what is read, and a
    /// read past a file's end completes short, not as an error.
    #[test]
    fn writes_and_reads_a_file() {
        if probe_libaio().is_err() {
            eprintln!("native AIO is not available here: skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(dir.path().join("f"))
            .unwrap();
        let mut b = LibaioBackend::new(4, vec![f.as_raw_fd()]).unwrap();
        let mut bufs: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i + 1; 4096]).collect();
        for (i, buf) in bufs.iter_mut().enumerate() {
            let op = IoOp { target: 0, offset: i as u64 * 4096, len: 4096, dir: crate::ops::Dir::Write };
            b.queue(i as u32, &op, buf.as_mut_ptr()).unwrap();
        }
        let mut done = Vec::new();
        while done.len() < 4 {
            b.submit_and_wait(Duration::from_secs(5)).unwrap();
            b.reap(&mut done);
        }
        assert!(done.iter().all(|&(_, r)| r == 4096), "{done:?}");
        let mut back = vec![0u8; 8192];
        let op = IoOp { target: 0, offset: 3 * 4096, len: 8192, dir: crate::ops::Dir::Read };
        b.queue(2, &op, back.as_mut_ptr()).unwrap();
        done.clear();
        while done.is_empty() {
            b.submit_and_wait(Duration::from_secs(5)).unwrap();
            b.reap(&mut done);
        }
        assert_eq!(done, vec![(2, 4096)]);
        assert!(back[..4096].iter().all(|&x| x == 4));
        // Nothing in flight: the wait returns after its timeout with nothing.
        b.submit_and_wait(Duration::from_millis(20)).unwrap();
        b.reap(&mut done);
        assert_eq!(done.len(), 1);
    }

    /// A control block the kernel refuses at submission (a descriptor that is not open) is a
    /// failed I/O with its errno, not the end of the step.
    #[test]
    fn a_refused_submission_is_a_failed_io() {
        if probe_libaio().is_err() {
            return;
        }
        let mut b = LibaioBackend::new(2, vec![-1]).unwrap();
        let mut buf = vec![0u8; 4096];
        b.queue(1, &IoOp { target: 0, offset: 0, len: 4096, dir: crate::ops::Dir::Read }, buf.as_mut_ptr()).unwrap();
        b.submit_and_wait(Duration::from_millis(10)).unwrap();
        let mut done = Vec::new();
        b.reap(&mut done);
        assert_eq!(done, vec![(1, -libc::EBADF)]);
    }
}
