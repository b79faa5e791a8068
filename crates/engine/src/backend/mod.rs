//! I/O back-ends. Like fio's `ioengine_ops`, a back-end only moves I/O: it queues, submits,
//! waits and hands back completions. It does no accounting and reads no clock — the worker loop
//! timestamps and records every I/O, so all back-ends are measured the same way.

use std::io;
use std::time::Duration;

use crate::ops::IoOp;

mod fault;
mod null;
mod psync;
mod uring;

pub use fault::{ActiveFault, FaultBackend};
pub use null::NullBackend;
pub use psync::PsyncBackend;
pub use uring::{UringBackend, probe_io_uring};

/// A completion: the slot it belongs to and the result (bytes transferred, or -errno).
pub type Completion = (u32, i32);

pub trait Backend {
    /// Queues one I/O for `slot`. `buf` must stay valid and untouched until the I/O completes.
    fn queue(&mut self, slot: u32, op: &IoOp, buf: *mut u8) -> io::Result<()>;

    /// Submits what is queued and waits until at least one I/O completed or a wake-up came.
    /// `timeout` is when the caller next needs to run (an interval boundary); a back-end may
    /// keep a wake-up it armed earlier for that same boundary instead of arming a new one.
    fn submit_and_wait(&mut self, timeout: Duration) -> io::Result<()>;

    /// Hands what is queued to the device now, without waiting. The worker loop uses it to
    /// reissue completed I/Os at once while others are still in the device: holding them back
    /// for one batched submission left virtio-blk with fewer in flight than asked for (15–25 %
    /// fewer IOPS at 32 outstanding). Back-ends that complete at once need not do anything.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Moves every available completion into `out` (which the caller clears).
    fn reap(&mut self, out: &mut Vec<Completion>);

    /// Arms an extra wake-up within `d`, besides the one for the next interval boundary, for a
    /// wrapper that holds completions back (fault injection). Back-ends whose waits return by
    /// themselves need not do anything.
    fn wake_within(&mut self, _d: Duration) -> io::Result<()> {
        Ok(())
    }

    /// Asks for the I/O in `slot` to be cancelled (it is stuck: outstanding past its deadline).
    /// A cancelled I/O still completes, with -ECANCELED (or its real result, if it finished
    /// first); one the kernel cannot cancel (a request already in a device) completes when the
    /// device answers, or never. Back-ends whose I/Os complete by themselves need not do
    /// anything.
    fn cancel(&mut self, _slot: u32) -> io::Result<()> {
        Ok(())
    }

    /// Tells the back-end when the step's measurement (after warm-up) starts.
    fn start(&mut self, _measure_start: std::time::Instant) {}
}
