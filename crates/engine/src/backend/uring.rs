//! The io_uring back-end: one ring per I/O thread, many workers' I/Os in flight on it.
//! Files are registered (no per-I/O fd lookup) and, when it fits, the thread's buffer pool is
//! registered as one fixed buffer (no per-I/O page pinning). Waiting uses a timeout so that the
//! worker loop can close intervals on time even when the storage stalls.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use io_uring::{IoUring, opcode, squeue, types};

use super::{Backend, Completion};
use crate::ops::IoOp;

pub struct UringBackend {
    ring: IoUring,
    /// Fixed-buffer registration: the pool's address range, if registered.
    fixed: Option<(usize, usize)>,
    ext_arg: bool,
}

/// Checks that io_uring can be used here (kernel support, not disabled by sysctl or seccomp).
pub fn probe_io_uring() -> Result<(), String> {
    IoUring::new(8).map(|_| ()).map_err(|e| e.to_string())
}

impl UringBackend {
    /// A ring for `slots` I/Os in flight on `fds`; `pool` is the (base, len) of the buffers.
    pub fn new(slots: usize, fds: &[RawFd], pool: (*mut u8, usize)) -> io::Result<Self> {
        let entries = (slots as u32).next_power_of_two().clamp(8, 32768);
        let ring = IoUring::builder()
            // CQ twice the SQ so completions never overflow even when every slot completes.
            .setup_cqsize(entries * 2)
            .setup_single_issuer()
            .build(entries)
            .or_else(|_| IoUring::builder().setup_cqsize(entries * 2).build(entries))?;
        ring.submitter().register_files(fds)?;
        let (base, len) = pool;
        // A single registered buffer may be at most 1 GiB; bigger pools use plain reads/writes.
        let iov = libc::iovec {
            iov_base: base.cast(),
            iov_len: len,
        };
        // SAFETY: the pool outlives the ring (both owned by the I/O thread, ring dropped first).
        let fixed = (len <= 1 << 30 && unsafe { ring.submitter().register_buffers(&[iov]) }.is_ok())
            .then_some((base as usize, len));
        let ext_arg = ring.params().is_feature_ext_arg();
        Ok(Self { ring, fixed, ext_arg })
    }

    fn entry(&self, slot: u32, op: &IoOp, buf: *mut u8) -> squeue::Entry {
        let fd = types::Fixed(op.target);
        let e = match (
            self.fixed
                .is_some_and(|(b, l)| (buf as usize) >= b && (buf as usize) < b + l),
            op.write,
        ) {
            (true, false) => opcode::ReadFixed::new(fd, buf, op.len, 0).offset(op.offset).build(),
            (true, true) => opcode::WriteFixed::new(fd, buf, op.len, 0).offset(op.offset).build(),
            (false, false) => opcode::Read::new(fd, buf, op.len).offset(op.offset).build(),
            (false, true) => opcode::Write::new(fd, buf, op.len).offset(op.offset).build(),
        };
        e.user_data(slot as u64)
    }
}

impl Backend for UringBackend {
    #[inline]
    fn queue(&mut self, slot: u32, op: &IoOp, buf: *mut u8) -> io::Result<()> {
        let e = self.entry(slot, op, buf);
        // SAFETY: the buffer stays valid until completion (worker contract).
        if unsafe { self.ring.submission().push(&e) }.is_err() {
            // Submission queue full: hand what we have to the kernel and retry once.
            self.ring.submit()?;
            // SAFETY: as above.
            unsafe { self.ring.submission().push(&e) }
                .map_err(|_| io::Error::other("io_uring submission queue full after submit"))?;
        }
        Ok(())
    }

    fn submit_and_wait(&mut self, timeout: Duration) -> io::Result<()> {
        let r = if self.ext_arg {
            let ts = types::Timespec::from(timeout);
            let args = types::SubmitArgs::new().timespec(&ts);
            self.ring.submitter().submit_with_args(1, &args)
        } else {
            self.ring.submit_and_wait(1)
        };
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    #[inline]
    fn reap(&mut self, out: &mut Vec<Completion>) {
        for cqe in self.ring.completion() {
            out.push((cqe.user_data() as u32, cqe.result()));
        }
    }
}
