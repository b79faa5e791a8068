//! The io_uring back-end: one ring per I/O thread, many workers' I/Os in flight on it.
//! Files are registered (no per-I/O fd lookup) and, when it fits, the thread's buffer pool is
//! registered as one fixed buffer (no per-I/O page pinning).
//!
//! The worker loop must wake at interval boundaries even when the storage stalls. A timed wait
//! (IORING_ENTER_EXT_ARG) would arm a kernel timer on every wait — once per I/O at queue
//! depth 1. Instead one IORING_OP_TIMEOUT is kept pending: its completion wakes the wait, and
//! it is re-armed only after it fired, so a step arms about one timer per interval.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::{IoUring, opcode, squeue, types};

use super::{Completion, IoEngine};
use crate::ops::IoOp;

pub struct UringBackend {
    ring: IoUring,
    /// Fixed-buffer registration: the pool's address range, if registered.
    fixed: Option<(usize, usize)>,
    /// A wake-up timeout is queued or in flight.
    wake_pending: bool,
    /// The wake-up's duration; the kernel reads it when the SQE is submitted.
    wake_ts: Box<types::Timespec>,
    /// Extra wake-ups armed for a fault-injection wrapper: durations and how many are pending.
    extra_ts: Box<[types::Timespec; EXTRA_WAKES]>,
    extra_pending: usize,
    extra_next: usize,
    /// Per descriptor: a block device (trims are discards) or a file (punched holes).
    block: Vec<bool>,
    /// The descriptors, for discards this kernel cannot queue (before Linux 6.12): those are
    /// made with the blocking call at once, their completions held in `ready`.
    fds: Vec<RawFd>,
    queued_discards: bool,
    ready: Vec<Completion>,
    /// Per slot: the length of the trim in flight on it (0: none). A trim completes with 0,
    /// the worker counts an I/O whole when its result is its length.
    trim_len: Vec<u32>,
}

/// `BLOCK_URING_CMD_DISCARD` of linux/fs.h (`_IO(0x12, 0)`, Linux 6.12): a queued discard of
/// `[addr, addr + addr3)`.
const BLOCK_URING_CMD_DISCARD: u32 = 0x1200;

/// Whether this kernel queues block discards through io_uring (Linux 6.12), asked once with a
/// discard of nothing on the first block device a ring meets: 6.12 refuses it as invalid, an
/// older kernel as unsupported (or has no uring commands at all). `IOCURVE_NO_URING_DISCARD`
/// set says no (the tests of the blocking way).
fn queued_discards(fd: RawFd) -> bool {
    static ANSWER: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ANSWER.get_or_init(|| {
        if std::env::var_os("IOCURVE_NO_URING_DISCARD").is_some() {
            return false;
        }
        let Ok(mut ring) = IoUring::new(2) else { return false };
        let mut probe = io_uring::Probe::new();
        if ring.submitter().register_probe(&mut probe).is_err() || !probe.is_supported(opcode::UringCmd16::CODE) {
            return false;
        }
        let e = opcode::UringCmd16::new(types::Fd(fd), BLOCK_URING_CMD_DISCARD).addr(Some(0)).build().user_data(1);
        // SAFETY: the entry refers to no memory.
        if unsafe { ring.submission().push(&e) }.is_err() || ring.submit_and_wait(1).is_err() {
            return false;
        }
        ring.completion().next().is_some_and(|c| c.result() != -libc::EOPNOTSUPP)
    })
}

/// Extra wake-ups in flight at most: a wrapper needs one for its earliest held completion.
const EXTRA_WAKES: usize = 4;

/// user_data of the wake-up timeout (slots are u32, so this never collides).
const WAKE: u64 = u64::MAX;
/// user_data of an extra wake-up.
const WAKE_EXTRA: u64 = u64::MAX - 1;
/// user_data of a cancellation request (its own completion says only whether it was found).
const CANCEL: u64 = u64::MAX - 2;

/// Checks that io_uring can be used here (kernel support, not disabled by sysctl or seccomp).
pub fn probe_io_uring() -> Result<(), String> {
    IoUring::new(8).map(|_| ()).map_err(|e| e.to_string())
}

impl UringBackend {
    /// A ring for `slots` I/Os in flight on `fds`; `pool` is the (base, len) of the buffers.
    pub fn new(slots: usize, fds: &[RawFd], pool: (*mut u8, usize)) -> io::Result<Self> {
        let entries = (slots as u32).next_power_of_two().clamp(8, 32768);
        // DEFER_TASKRUN (Linux 6.1): completion work runs only when this thread enters to wait,
        // without interrupting it with task-work notifications; it needs SINGLE_ISSUER (6.0),
        // which holds: only the owning I/O thread touches its ring. Older kernels fall back.
        let build = |defer: bool, single: bool| {
            let mut b = IoUring::builder();
            // CQ twice the SQ so completions never overflow even when every slot completes.
            b.setup_cqsize(entries * 2);
            if single {
                b.setup_single_issuer();
            }
            if defer {
                b.setup_defer_taskrun();
            }
            b.build(entries)
        };
        let ring = build(true, true).or_else(|_| build(false, true)).or_else(|_| build(false, false))?;
        ring.submitter().register_files(fds)?;
        let (base, len) = pool;
        // A single registered buffer may be at most 1 GiB; bigger pools use plain reads/writes.
        let iov = libc::iovec { iov_base: base.cast(), iov_len: len };
        // SAFETY: the pool outlives the ring (both owned by the I/O thread, ring dropped first).
        let fixed = (len <= 1 << 30 && unsafe { ring.submitter().register_buffers(&[iov]) }.is_ok())
            .then_some((base as usize, len));
        Ok(Self {
            ring,
            fixed,
            wake_pending: false,
            wake_ts: Box::new(types::Timespec::new()),
            extra_ts: Box::new([types::Timespec::new(); EXTRA_WAKES]),
            extra_pending: 0,
            extra_next: 0,
            block: super::block_devices(fds),
            fds: fds.to_vec(),
            queued_discards: true,
            ready: Vec::new(),
            trim_len: vec![0; slots.max(1)],
        })
    }

    fn push(&mut self, e: &squeue::Entry) -> io::Result<()> {
        // SAFETY: the buffer stays valid until completion (worker contract).
        if unsafe { self.ring.submission().push(e) }.is_err() {
            // Submission queue full: hand what we have to the kernel and retry once.
            self.ring.submit()?;
            // SAFETY: as above.
            unsafe { self.ring.submission().push(e) }
                .map_err(|_| io::Error::other("io_uring submission queue full after submit"))?;
        }
        Ok(())
    }

    fn entry(&mut self, slot: u32, op: &IoOp, buf: *mut u8) -> squeue::Entry {
        let fd = types::Fixed(op.target);
        if op.is_trim() {
            self.trim_len[slot as usize] = op.len;
            let e = if self.block[op.target as usize] {
                // The command's addr3 (the length) is the first 8 bytes of its data.
                let mut cmd = [0u8; 16];
                cmd[..8].copy_from_slice(&(op.len as u64).to_ne_bytes());
                opcode::UringCmd16::new(fd, BLOCK_URING_CMD_DISCARD).addr(Some(op.offset)).cmd(cmd).build()
            } else {
                opcode::Fallocate::new(fd, op.len as u64)
                    .offset(op.offset)
                    .mode(libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE)
                    .build()
            };
            return e.user_data(slot as u64);
        }
        let e = match (self.fixed.is_some_and(|(b, l)| (buf as usize) >= b && (buf as usize) < b + l), op.is_write()) {
            (true, false) => opcode::ReadFixed::new(fd, buf, op.len, 0).offset(op.offset).build(),
            (true, true) => opcode::WriteFixed::new(fd, buf, op.len, 0).offset(op.offset).build(),
            (false, false) => opcode::Read::new(fd, buf, op.len).offset(op.offset).build(),
            (false, true) => opcode::Write::new(fd, buf, op.len).offset(op.offset).build(),
        };
        e.user_data(slot as u64)
    }
}

impl IoEngine for UringBackend {
    #[inline]
    fn queue(&mut self, slot: u32, op: &IoOp, buf: *mut u8) -> io::Result<()> {
        if op.is_trim() && self.block[op.target as usize] {
            let fd = self.fds[op.target as usize];
            self.queued_discards = self.queued_discards && queued_discards(fd);
            if !self.queued_discards {
                // Before Linux 6.12: the blocking discard now, its completion at the next reap
                // (the I/Os in flight go on meanwhile).
                self.ready.push((slot, super::trim_blocking(fd, true, op.offset, op.len)));
                return Ok(());
            }
        }
        let e = self.entry(slot, op, buf);
        self.push(&e)
    }

    fn submit_and_wait(&mut self, timeout: Duration) -> io::Result<()> {
        if !self.ready.is_empty() {
            return self.ring.submit().map(|_| ());
        }
        if !self.wake_pending {
            *self.wake_ts = types::Timespec::from(timeout);
            let ts: *const types::Timespec = &*self.wake_ts;
            let e = opcode::Timeout::new(ts).build().user_data(WAKE);
            self.push(&e)?;
            self.wake_pending = true;
        }
        match self.ring.submit_and_wait(1) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn submit_and_wait_within(&mut self, timeout: Duration) -> io::Result<()> {
        if !self.ready.is_empty() {
            return self.ring.submit().map(|_| ());
        }
        if !self.ring.params().is_feature_ext_arg() {
            self.wake_within(timeout)?;
            return self.submit_and_wait(timeout);
        }
        // The timeout goes with the wait itself (IORING_ENTER_EXT_ARG): no timeout request to
        // submit and reap for every due I/O.
        let ts = types::Timespec::from(timeout);
        let args = types::SubmitArgs::new().timespec(&ts);
        match self.ring.submitter().submit_with_args(1, &args) {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.ring.submit().map(|_| ())
    }

    fn wake_within(&mut self, d: Duration) -> io::Result<()> {
        if self.extra_pending >= EXTRA_WAKES {
            return Ok(());
        }
        // The kernel copies the duration when the SQE is submitted, which the next
        // submit_and_wait does; a slot is reused only after EXTRA_WAKES more are armed.
        let i = self.extra_next % EXTRA_WAKES;
        self.extra_ts[i] = types::Timespec::from(d);
        let ts: *const types::Timespec = &self.extra_ts[i];
        let e = opcode::Timeout::new(ts).build().user_data(WAKE_EXTRA);
        self.push(&e)?;
        self.extra_pending += 1;
        self.extra_next += 1;
        Ok(())
    }

    fn cancel(&mut self, slot: u32) -> io::Result<()> {
        let e = opcode::AsyncCancel::new(slot as u64).build().user_data(CANCEL);
        self.push(&e)?;
        self.ring.submit().map(|_| ())
    }

    #[inline]
    fn reap(&mut self, out: &mut Vec<Completion>) {
        out.append(&mut self.ready);
        for cqe in self.ring.completion() {
            if cqe.user_data() == WAKE {
                self.wake_pending = false;
            } else if cqe.user_data() == WAKE_EXTRA {
                self.extra_pending -= 1;
            } else if cqe.user_data() == CANCEL {
                // The cancelled I/O completes on its own (with -ECANCELED if it was caught).
            } else {
                let slot = cqe.user_data() as u32;
                let mut res = cqe.result();
                if let Some(len) = self.trim_len.get_mut(slot as usize).filter(|l| **l > 0) {
                    if res == 0 {
                        res = *len as i32;
                    }
                    *len = 0;
                }
                out.push((slot, res));
            }
        }
    }
}
