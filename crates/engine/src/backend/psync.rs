//! The psync back-end: one blocking pread/pwrite (or trim) at a time on the calling thread. Used with one
//! thread per outstanding I/O — the fallback when io_uring is unavailable, and a cross-check.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use super::{Completion, IoEngine};
use crate::ops::IoOp;

pub struct PsyncBackend {
    fds: Vec<RawFd>,
    /// Per descriptor: a block device (trims discard) or a file (trims punch holes).
    block: Vec<bool>,
    pending: Option<(u32, IoOp, *mut u8)>,
    done: Option<Completion>,
}

// SAFETY: the raw buffer pointer belongs to the owning I/O thread's pool.
unsafe impl Send for PsyncBackend {}

impl PsyncBackend {
    pub fn new(fds: Vec<RawFd>) -> Self {
        Self { block: super::block_devices(&fds), fds, pending: None, done: None }
    }
}

impl IoEngine for PsyncBackend {
    fn queue(&mut self, slot: u32, op: &IoOp, buf: *mut u8) -> io::Result<()> {
        debug_assert!(self.pending.is_none(), "psync runs one I/O at a time");
        self.pending = Some((slot, *op, buf));
        Ok(())
    }

    fn submit_and_wait(&mut self, _timeout: Duration) -> io::Result<()> {
        let Some((slot, op, buf)) = self.pending.take() else {
            return Ok(());
        };
        let fd = self.fds[op.target as usize];
        let len = op.len as usize;
        let off = op.offset as libc::off_t;
        if op.is_trim() {
            self.done = Some((slot, super::trim_blocking(fd, self.block[op.target as usize], op.offset, op.len)));
            return Ok(());
        }
        // SAFETY: buf is valid for len bytes until completion (the worker's pool).
        let r = unsafe {
            if op.is_write() { libc::pwrite(fd, buf.cast(), len, off) } else { libc::pread(fd, buf.cast(), len, off) }
        };
        let res = if r < 0 { -io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO) } else { r as i32 };
        self.done = Some((slot, res));
        Ok(())
    }

    fn reap(&mut self, out: &mut Vec<Completion>) {
        if let Some(c) = self.done.take() {
            out.push(c);
        }
    }
}
