//! The null back-end: every I/O completes at once with its full length. It measures iocurve
//! itself — the cost of generating, timestamping and recording an I/O.

use std::io;
use std::time::Duration;

use super::{Completion, IoEngine};
use crate::ops::IoOp;

pub struct NullBackend {
    done: Vec<Completion>,
}

impl NullBackend {
    pub fn new(slots: usize) -> Self {
        Self { done: Vec::with_capacity(slots) }
    }
}

impl IoEngine for NullBackend {
    #[inline]
    fn queue(&mut self, slot: u32, op: &IoOp, _buf: *mut u8) -> io::Result<()> {
        self.done.push((slot, op.len as i32));
        Ok(())
    }

    #[inline]
    fn submit_and_wait(&mut self, _timeout: Duration) -> io::Result<()> {
        Ok(())
    }

    #[inline]
    fn reap(&mut self, out: &mut Vec<Completion>) {
        out.append(&mut self.done);
    }
}
